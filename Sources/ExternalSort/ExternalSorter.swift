import Foundation
import GRDB

/// One row to put in order: rows come back ordered by `group`, then `time`, then the order they
/// were added in; `body` is carried along unread.
public struct SortedRow: Sendable, Equatable {
    public var group: String
    public var time: Double
    public var body: [UInt8]

    public init(group: String, time: Double, body: [UInt8]) {
        self.group = group
        self.time = time
        self.body = body
    }
}

/// Puts more rows in order than memory should hold: rows go into a temporary SQLite database
/// (a file SQLite deletes when it is closed, in `SQLITE_TMPDIR`/`TMPDIR` or `/var/tmp`, `/tmp`),
/// and come back out ordered a page at a time through an index SQLite builds with its own
/// external merge sort. Memory stays at the page cache (8 MiB) and one page of rows, however
/// many rows there are. Add every row first, then read them; rows added after reading began
/// are not seen.
public final class ExternalSorter: Sendable {
    private let queue: DatabaseQueue

    public init() throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(
                sql:
                    "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -8192; PRAGMA temp_store = FILE"
            )
        }
        // An empty path is SQLite's private temporary database: on disk once it outgrows the cache, removed on close.
        queue = try DatabaseQueue(path: "", configuration: configuration)
        try queue.write { db in
            try db.execute(
                sql:
                    "CREATE TABLE rows(seq INTEGER PRIMARY KEY, grp TEXT NOT NULL, time REAL NOT NULL, body BLOB NOT NULL)"
            )
        }
    }

    /// Adds rows (in one transaction).
    public func append(_ rows: [SortedRow]) async throws {
        guard !rows.isEmpty else { return }
        try await queue.write { db in
            let insert = try db.cachedStatement(sql: "INSERT INTO rows(grp, time, body) VALUES (?, ?, ?)")
            for row in rows {
                try insert.execute(arguments: [row.group, row.time.isNaN ? 0 : row.time, Data(row.body)])
            }
        }
    }

    /// How many rows have been added.
    public func count() async throws -> Int {
        try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM rows") ?? 0 }
    }

    /// Calls `visit` with every row in order, `pageSize` rows at a time; between pages nothing is
    /// held but the position reached, so `visit` may take its time (a slow client).
    public func forEachPage(size pageSize: Int = 2000, _ visit: ([SortedRow]) async throws -> Void) async throws {
        try await queue.write { db in
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS rows_order ON rows(grp, time, seq)")
        }
        var after: (group: String, time: Double, seq: Int64)?
        while true {
            let page: [(SortedRow, Int64)] = try await queue.read { [after] db in
                let rows: RowCursor
                if let after {
                    rows = try Row.fetchCursor(
                        db,
                        sql: """
                            SELECT grp, time, seq, body FROM rows INDEXED BY rows_order
                            WHERE (grp, time, seq) > (?, ?, ?) ORDER BY grp, time, seq LIMIT ?
                            """, arguments: [after.group, after.time, after.seq, pageSize])
                } else {
                    rows = try Row.fetchCursor(
                        db,
                        sql:
                            "SELECT grp, time, seq, body FROM rows INDEXED BY rows_order ORDER BY grp, time, seq LIMIT ?",
                        arguments: [pageSize])
                }
                var page: [(SortedRow, Int64)] = []
                while let row = try rows.next() {
                    let body: Data = row["body"]
                    page.append((SortedRow(group: row["grp"], time: row["time"], body: Array(body)), row["seq"]))
                }
                return page
            }
            guard let last = page.last else { return }
            after = (last.0.group, last.0.time, last.1)
            try await visit(page.map(\.0))
            if page.count < pageSize { return }
        }
    }
}
