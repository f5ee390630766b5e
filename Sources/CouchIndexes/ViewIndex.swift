import CouchEngine
import CouchJSON
import Crypto
import Foundation
import GRDB

/// A view's map function: the key/value rows a document emits. Thrown errors skip the
/// document (CouchDB logs and skips it; the rest of the index is built).
public typealias MapFunction = @Sendable (JSONObject) throws -> [(key: JSON, value: JSON)]

/// A map function applied to a batch of documents at once (a JavaScript query server maps a
/// batch per round trip): the rows of each document, or nil for one that failed to map.
public typealias BatchMapFunction = @Sendable ([JSONObject]) async throws -> [[(key: JSON, value: JSON)]?]

/// A view's reduce function: built in, or custom (JavaScript) with `reduce` over rows and
/// `rereduce` over earlier reductions, as CouchDB calls them.
public enum ViewReducer: Sendable {
    case builtin(BuiltinReducer)
    case custom(
        reduce: @Sendable ([(key: JSON, id: String, value: JSON)]) async throws -> JSON,
        rereduce: @Sendable ([JSON]) async throws -> JSON)

    public static let count = ViewReducer.builtin(.count)
    public static let sum = ViewReducer.builtin(.sum)
    public static let stats = ViewReducer.builtin(.stats)
    public static let approxCountDistinct = ViewReducer.builtin(.approxCountDistinct)
}

/// A map/reduce view. The index behind it is named by `signature` (a digest of the map
/// code): changed code is a new index, built from scratch; the same code reuses its index.
/// The reducer runs at query time, so changing it does not rebuild anything.
public struct ViewDefinition: Sendable {
    public var signature: String
    public var map: BatchMapFunction
    public var reduce: ViewReducer?

    /// A view from a per-document map closure.
    public init(code: String, map: @escaping MapFunction, reduce: ViewReducer? = nil) {
        self.init(code: code, batchMap: { docs in docs.map { try? map($0) } }, reduce: reduce)
    }

    /// A view from a batch map function (JavaScript). `code` is everything the map depends
    /// on (its source and any library code it may `require`).
    public init(code: String, batchMap: @escaping BatchMapFunction, reduce: ViewReducer? = nil) {
        signature = ViewDefinition.signature(code: code)
        self.map = batchMap
        self.reduce = reduce
    }

    /// The index name for map code, without building a definition (`_view_cleanup`, `_info`).
    public static func signature(code: String) -> String {
        Hex.string(Insecure.MD5.hash(data: Array(code.utf8)))
    }

    var table: String { "view_" + signature }
}

/// Query options of `_view`, named after CouchDB's parameters.
public struct ViewQuery: Sendable {
    public var key: JSON?
    public var keys: [JSON]?
    public var startKey: JSON?
    public var startKeyDocID: String?
    public var endKey: JSON?
    public var endKeyDocID: String?
    public var inclusiveEnd = true
    public var descending = false
    public var limit: Int?
    public var skip = 0
    public var includeDocs = false
    /// nil: reduce when the view has a reducer.
    public var reduce: Bool?
    public var group = false
    public var groupLevel: Int?
    /// Only rows of documents whose id is in `low..<high` (one partition's).
    public var idRange: (low: String, high: String)?
    public init() {}
}

public struct ViewResult: Sendable {
    public var totalRows: Int
    public var offset: Int
    public var rows: [JSON]
}

/// A view's index as a `SecondaryIndex`: each changed document's old rows are replaced by
/// what the map emits now (in `view_indexes`, with the row count kept beside the checkpoint).
struct ViewRows: SecondaryIndex {
    /// Each live document's rows, and how many documents failed to map (skipped).
    typealias Batch = (rows: [String: [(key: JSON, value: JSON)]], failures: Int)

    let view: ViewDefinition
    static let registry = "view_indexes"
    var table: String { view.table }
    var batchSize: Int { 1000 }

    func createTables(_ db: GRDB.Database) throws {
        try ViewIndexes.createViewTables(db, table)
    }

    func prepare(_ changed: [ChangedDocument]) async throws -> Batch {
        let live = try ChangedDocument.documents(changed)
        let mapped = live.isEmpty ? [] : try await view.map(live)
        guard mapped.count == live.count else { throw CouchError.corrupt("view map answer") }
        var rowsByID: [String: [(key: JSON, value: JSON)]] = [:]
        for (doc, rows) in zip(live, mapped) {
            if let id = doc["_id"]?.stringValue { rowsByID[id] = rows ?? [] }
        }
        return (rowsByID, mapped.filter { $0 == nil }.count)
    }

    func store(_ batch: Batch, changed: [ChangedDocument], in db: GRDB.Database) throws {
        let delete = try db.makeStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
        let insert = try db.makeStatement(sql: "INSERT OR REPLACE INTO \(table)(key, doc_id, n, key_json, value_json) VALUES (?, ?, ?, ?, ?)")
        var delta = 0
        for id in changed.map(\.id) {
            try delete.execute(arguments: [id])
            delta -= db.changesCount
            for (n, row) in (batch.rows[id] ?? []).enumerated() {
                try insert.execute(arguments: [Data(row.key.collationKey), id, n, row.key.text, row.value.text])
                delta += 1
            }
        }
        try db.execute(sql: "UPDATE view_indexes SET rows = rows + ? WHERE name = ?", arguments: [delta, table])
    }
}

/// The view indexes of one database (`db.views`): brought up to date from its changes, queried
/// (ranges, keys, reduce, `include_docs`), measured and dropped.
public struct ViewIndexes: Sendable {
    public let database: DocumentDatabase

    /// Brings a view's index up to date with the changes feed, as CouchDB updates views
    /// lazily. Returns how many documents failed to map (skipped).
    @discardableResult
    public func update(_ view: ViewDefinition) async throws -> Int {
        var failures = 0
        try await database.catchUp(ViewRows(view: view)) { batch, _, _ in failures += batch.failures }
        return failures
    }

    static func createViewTables(_ db: GRDB.Database, _ table: String) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS view_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, rows INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS \(table)(
                key BLOB NOT NULL, doc_id TEXT NOT NULL, n INTEGER NOT NULL, key_json TEXT NOT NULL, value_json TEXT NOT NULL,
                PRIMARY KEY(key, doc_id, n)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS \(table)_by_doc ON \(table)(doc_id);
            INSERT OR IGNORE INTO view_indexes(name, seq, rows) VALUES ('\(table)', 0, 0);
            """)
    }

    /// Queries a view (bringing it up to date first unless `stale`): rows in CouchDB's
    /// collation order of keys, then document ids; reduced (whole range, `group`, or
    /// `group_level`) when the view has a reducer and `reduce` is not false.
    public func query(_ view: ViewDefinition, _ query: ViewQuery, stale: Bool = false) async throws -> ViewResult {
        if !stale { try await update(view) }
        let reducing = query.reduce ?? (view.reduce != nil)
        if reducing, view.reduce == nil { throw CouchError.badRequest("Reduce is invalid for map-only views.") }
        if reducing, query.includeDocs { throw CouchError.badRequest("`include_docs` is invalid for reduce") }
        let grouped = query.group || query.groupLevel != nil
        if reducing, query.keys != nil, !grouped {
            throw CouchError.badRequest("Multi-key fetches for reduce views must use `group=true`")
        }
        let table = view.table
        // Without grouping, _count needs no rows at all: SQLite counts the range.
        let countOnly: Bool = {
            if case .builtin(.count)? = view.reduce, reducing, !grouped { return true }
            return false
        }()
        let (total, rows, count) = try await database.reading { db -> (Int, [(key: JSON, id: String, value: JSON)], Int) in
            guard try db.tableExists(table) else { return (0, [], 0) }
            let total = try Int.fetchOne(db, sql: "SELECT rows FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0
            let order = query.descending ? "DESC" : "ASC"
            let parts = ViewRange.viewScans(query)
            if countOnly {
                var count = 0
                for part in parts {
                    count += try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM \(table) WHERE \(part.condition)", arguments: StatementArguments(part.arguments)) ?? 0
                }
                return (total, [], count)
            }
            var rows: [(key: JSON, id: String, value: JSON)] = []
            for part in parts {
                let cursor = try Row.fetchCursor(
                    db, sql: "SELECT doc_id, key_json, value_json FROM \(table) WHERE \(part.condition) ORDER BY key \(order), doc_id \(order), n \(order)",
                    arguments: StatementArguments(part.arguments))
                while let row = try cursor.next() {
                    rows.append((try JSON.parse(row[1] as String), row[0] as String, try JSON.parse(row[2] as String)))
                }
            }
            return (total, rows, 0)
        }
        if reducing, let reducer = view.reduce {
            if countOnly {
                return ViewResult(totalRows: total, offset: 0, rows: count == 0 ? [] : [["key": .null, "value": .int(count)]])
            }
            var reduced: [JSON] = []
            for (key, members) in ViewReduction.group(rows, group: query.group, level: query.groupLevel) {
                let value = try await ViewReduction.reduce(reducer, members)
                reduced.append(["key": grouped ? key : .null, "value": value])
            }
            let page = Array(reduced.dropFirst(query.skip).prefix(query.limit ?? Int.max))
            return ViewResult(totalRows: total, offset: 0, rows: page)
        }
        let page = Array(rows.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        return ViewResult(totalRows: total, offset: query.skip, rows: try await mapRows(page, includeDocs: query.includeDocs))
    }

    /// A map view's page of rows as JSON, each with its document when asked (`{"_id": ...}`
    /// values include that document instead, as CouchDB does).
    func mapRows(_ page: [(key: JSON, id: String, value: JSON)], includeDocs: Bool) async throws -> [JSON] {
        try await database.reading { db in
            try page.map { row in
                var item: JSONObject = ["id": .string(row.id), "key": row.key, "value": row.value]
                if includeDocs {
                    let docID = row.value["_id"]?.stringValue ?? row.id
                    item["doc"] = try StoredDocument.winningDocument(db, id: docID).map(JSON.object) ?? .null
                }
                return .object(item)
            }
        }
    }

    /// The state of the view indexes with these signatures (one design document's views):
    /// the sequence all of them have indexed up to, their size on disk, and how many changes
    /// they still have to index.
    public func state(signatures: [String]) async throws -> (updateSeq: Int, bytes: Int, pending: Int) {
        try await database.reading { db in
            let tables = signatures.map { "view_" + $0 }
            var seqs: [Int] = []
            if try db.tableExists("view_indexes") {
                for table in tables {
                    seqs.append(try Int.fetchOne(db, sql: "SELECT seq FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0)
                }
            }
            let updateSeq = tables.isEmpty ? try DatabaseFile.metaInt(db, "update_seq") : (seqs.count == tables.count ? seqs.min() ?? 0 : 0)
            let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM docs WHERE seq > ?", arguments: [updateSeq]) ?? 0
            // Page sizes from SQLite's dbstat table where it is compiled in; 0 where it is not.
            var bytes = 0
            for table in tables {
                bytes += (try? Int.fetchOne(
                    db, sql: "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (?, ?)", arguments: [table, table + "_by_doc"])) ?? 0
            }
            return (updateSeq, bytes, pending)
        }
    }

    /// Drops the view indexes whose signature is not in `keep` (`_view_cleanup`).
    public func drop(except keep: Set<String>) async throws {
        try await database.dropIndexes(registry: ViewRows.registry, keeping: Set(keep.map { "view_" + $0 }))
    }
}

extension DocumentDatabase {
    /// This database's view indexes.
    public var views: ViewIndexes { ViewIndexes(database: self) }
}
