import CouchJSON
import Foundation
import GRDB

/// The tables of a database's secondary indexes of every kind, as the engine sees them without
/// knowing the kinds: found through each kind's registry (`*_indexes`), fed the documents changed
/// since a checkpoint, and cleared of a purged document.
enum IndexRegistry {
    /// One table of an index of any kind: its registry (a table named `*_indexes`, of `name`
    /// and `seq`), and whether that kind counts its rows there (a `rows` column).
    struct Table {
        let registry: String
        let table: String
        let countsRows: Bool
    }

    /// Every index table this database has, found through the registries.
    static func tables(_ db: GRDB.Database) throws -> [Table] {
        let registries = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_indexes' ESCAPE '\\'")
        return try registries.flatMap { registry in
            let countsRows = try db.columns(in: registry).contains { $0.name == "rows" }
            return try String.fetchAll(db, sql: "SELECT name FROM \(registry)").filter { try db.tableExists($0) }
                .map { Table(registry: registry, table: $0, countsRows: countsRows) }
        }
    }

    /// Documents changed after `since`, in sequence order, at most `limit`, with their winning
    /// revision's stored body (none for deleted documents, which indexes drop).
    static func changedDocuments(_ db: GRDB.Database, after since: Int, limit: Int) throws -> [ChangedDocument] {
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT d.id, d.seq, d.deleted, d.winner, r.body, d.tree FROM docs d LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner
                WHERE d.seq > ? ORDER BY d.seq LIMIT ?
                """, arguments: [since, limit])
        var changed: [ChangedDocument] = []
        while let row = try rows.next() {
            let id: String = row[0]
            let live = (row[2] as Int) == 0
            changed.append(
                ChangedDocument(id: id, seq: row[1], body: live ? row[4] as Data? : nil, rev: row[3], tree: row[5]))
        }
        return changed
    }

    /// A document purged down to its last revision leaves the changes feed, so the indexes,
    /// which follow that feed, would never learn of it: its rows go now, in the purge's
    /// transaction. (One that keeps a revision gets a new sequence and is re-indexed.)
    static func remove(_ id: String, from tables: [Table], in db: GRDB.Database) throws {
        for index in tables {
            let removed =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM \(index.table) WHERE doc_id = ?", arguments: [id]) ?? 0
            guard removed > 0 else { continue }
            try db.execute(sql: "DELETE FROM \(index.table) WHERE doc_id = ?", arguments: [id])
            if index.countsRows {
                try db.execute(
                    sql: "UPDATE \(index.registry) SET rows = rows - ? WHERE name = ?",
                    arguments: [removed, index.table])
            }
        }
    }
}
