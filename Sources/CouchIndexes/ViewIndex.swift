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
        try DocumentDatabase.createViewTables(db, table)
    }

    func prepare(_ changed: [ChangedDocument]) async throws -> Batch {
        let live = changed.compactMap(\.doc)
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
        for (id, _, _) in changed {
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

extension DocumentDatabase {
    /// Brings a view's index up to date with the changes feed, as CouchDB updates views
    /// lazily. Returns how many documents failed to map (skipped).
    @discardableResult
    public func updateView(_ view: ViewDefinition) async throws -> Int {
        var failures = 0
        try await catchUp(ViewRows(view: view)) { batch, _, _ in failures += batch.failures }
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
    public func queryView(_ view: ViewDefinition, _ query: ViewQuery, stale: Bool = false) async throws -> ViewResult {
        if !stale { try await updateView(view) }
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
        let (total, rows, count) = try await reading { db -> (Int, [(key: JSON, id: String, value: JSON)], Int) in
            guard try db.tableExists(table) else { return (0, [], 0) }
            let total = try Int.fetchOne(db, sql: "SELECT rows FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0
            let order = query.descending ? "DESC" : "ASC"
            let parts = DocumentDatabase.viewScans(query)
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
            for (key, members) in DocumentDatabase.group(rows, group: query.group, level: query.groupLevel) {
                let value = try await DocumentDatabase.reduce(reducer, members)
                reduced.append(["key": grouped ? key : .null, "value": value])
            }
            let page = Array(reduced.dropFirst(query.skip).prefix(query.limit ?? Int.max))
            return ViewResult(totalRows: total, offset: 0, rows: page)
        }
        let page = Array(rows.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        return ViewResult(totalRows: total, offset: query.skip, rows: try await mapRows(page, includeDocs: query.includeDocs))
    }

    /// The key ranges a view query reads, each a SQL condition with its arguments: one per key
    /// (`keys`, `key`), or the range between `startkey` and `endkey`; within the partition's ids.
    static func viewScans(_ query: ViewQuery) -> [(condition: String, arguments: [any DatabaseValueConvertible])] {
        var parts: [(condition: String, arguments: [any DatabaseValueConvertible])]
        if let keys = query.keys ?? query.key.map({ [$0] }) {
            parts = keys.map { ("key = ?", [Data($0.collationKey)]) }
        } else {
            parts = [DocumentDatabase.viewRange(query)]
        }
        if let (low, high) = query.idRange {
            parts = parts.map { ("(\($0.condition)) AND doc_id >= ? AND doc_id < ?", $0.arguments + [low, high]) }
        }
        return parts
    }

    /// A map view's page of rows as JSON, each with its document when asked (`{"_id": ...}`
    /// values include that document instead, as CouchDB does).
    func mapRows(_ page: [(key: JSON, id: String, value: JSON)], includeDocs: Bool) async throws -> [JSON] {
        try await reading { db in
            try page.map { row in
                var item: JSONObject = ["id": .string(row.id), "key": row.key, "value": row.value]
                if includeDocs {
                    let docID = row.value["_id"]?.stringValue ?? row.id
                    item["doc"] = try DocumentDatabase.winningDocument(db, id: docID).map(JSON.object) ?? .null
                }
                return .object(item)
            }
        }
    }

    /// The state of the view indexes with these signatures (one design document's views):
    /// the sequence all of them have indexed up to, their size on disk, and how many changes
    /// they still have to index.
    public func viewIndexState(signatures: [String]) async throws -> (updateSeq: Int, bytes: Int, pending: Int) {
        try await reading { db in
            let tables = signatures.map { "view_" + $0 }
            var seqs: [Int] = []
            if try db.tableExists("view_indexes") {
                for table in tables {
                    seqs.append(try Int.fetchOne(db, sql: "SELECT seq FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0)
                }
            }
            let updateSeq = tables.isEmpty ? try DocumentDatabase.metaInt(db, "update_seq") : (seqs.count == tables.count ? seqs.min() ?? 0 : 0)
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
    public func dropViewIndexes(except keep: Set<String>) async throws {
        _ = try await writing { db in
            guard try db.tableExists("view_indexes") else { return true }
            for table in try String.fetchAll(db, sql: "SELECT name FROM view_indexes") where !keep.contains(String(table.dropFirst("view_".count))) {
                try db.execute(sql: "DROP TABLE IF EXISTS \(table)")
                try db.execute(sql: "DELETE FROM view_indexes WHERE name = ?", arguments: [table])
            }
            return true
        }
    }

    /// The SQL condition for a query's key range (`startkey`/`endkey`, `*_docid`,
    /// `inclusive_end`, `descending`).
    static func viewRange(_ query: ViewQuery) -> (condition: String, arguments: [any DatabaseValueConvertible]) {
        var conditions = ["1"]
        var arguments: [any DatabaseValueConvertible] = []
        let (low, lowID, high, highID) = query.descending
            ? (query.endKey, query.endKeyDocID, query.startKey, query.startKeyDocID)
            : (query.startKey, query.startKeyDocID, query.endKey, query.endKeyDocID)
        let lowInclusive = query.descending ? query.inclusiveEnd : true
        let highInclusive = query.descending ? true : query.inclusiveEnd
        // One end of the range: by key, refined by document id when one is given.
        func bound(_ end: JSON, _ docID: String?, lower: Bool, inclusive: Bool) {
            let key = Data(end.collationKey)
            let op = (lower ? ">" : "<") + (inclusive ? "=" : "")
            if let docID {
                conditions.append("(key \(lower ? ">" : "<") ? OR (key = ? AND doc_id \(op) ?))")
                arguments += [key, key, docID]
            } else {
                conditions.append("key \(op) ?")
                arguments.append(key)
            }
        }
        if let low { bound(low, lowID, lower: true, inclusive: lowInclusive) }
        if let high { bound(high, highID, lower: false, inclusive: highInclusive) }
        return (conditions.joined(separator: " AND "), arguments)
    }

    /// Groups rows for reduction: one group for everything, by exact key (`group=true`), or by
    /// the first `level` elements of array keys (`group_level`).
    static func group(
        _ rows: [(key: JSON, id: String, value: JSON)], group: Bool, level: Int?
    ) -> [(JSON, [(key: JSON, id: String, value: JSON)])] {
        guard group || level != nil else { return rows.isEmpty ? [] : [(.null, rows)] }
        var groups: [(JSON, [(key: JSON, id: String, value: JSON)])] = []
        for row in rows {
            var key = row.key
            if let level, case let .array(items) = key { key = .array(Array(items.prefix(level))) }
            if let last = groups.last, JSON.collate(last.0, key) == 0 {
                groups[groups.count - 1].1.append(row)
            } else {
                groups.append((key, [row]))
            }
        }
        return groups
    }

    /// Rows a custom reduce function sees at once; larger groups are reduced in chunks
    /// whose results are combined with `rereduce`, as CouchDB reduces b-tree nodes.
    static let reduceChunk = 500

    /// Reduces one group's rows: natively for built-in reducers; for custom ones in chunks,
    /// combining the chunks' results with rereduce until one value is left.
    static func reduce(_ reducer: ViewReducer, _ rows: [(key: JSON, id: String, value: JSON)]) async throws -> JSON {
        switch reducer {
        case let .builtin(builtin):
            return try reduce(builtin, rows.map(\.value))
        case let .custom(reduce, rereduce):
            guard rows.count > reduceChunk else { return try await reduce(rows) }
            var values: [JSON] = []
            for start in stride(from: 0, to: rows.count, by: reduceChunk) {
                values.append(try await reduce(Array(rows[start..<min(start + reduceChunk, rows.count)])))
            }
            while values.count > 1 {
                var next: [JSON] = []
                for start in stride(from: 0, to: values.count, by: reduceChunk) {
                    next.append(try await rereduce(Array(values[start..<min(start + reduceChunk, values.count)])))
                }
                values = next
            }
            return values[0]
        }
    }

    /// Applies a built-in reducer to a group's values, as CouchDB defines them.
    static func reduce(_ reducer: BuiltinReducer, _ values: [JSON]) throws -> JSON {
        switch reducer {
        case .count:
            return .int(values.count)
        case .sum:
            return try values.reduce(JSON.int(0)) { try sum($0, $1) }
        case .stats:
            var count = 0, total = 0.0, sumsqr = 0.0, minimum = Double.infinity, maximum = -Double.infinity
            for value in values {
                guard let x = value.doubleValue else {
                    throw CouchError(status: 500, error: "builtin_reduce_error", reason: "_stats can only reduce numbers: \(value)")
                }
                count += 1
                total += x
                sumsqr += x * x
                minimum = Swift.min(minimum, x)
                maximum = Swift.max(maximum, x)
            }
            return ["sum": .double(total), "count": .int(count), "min": count > 0 ? .double(minimum) : .null,
                    "max": count > 0 ? .double(maximum) : .null, "sumsqr": .double(sumsqr)]
        case .approxCountDistinct:
            // Exact here (CouchDB uses HyperLogLog; exact is within any approximation).
            var seen = Set<[UInt8]>()
            for value in values { seen.insert(value.collationKey) }
            return .int(seen.count)
        }
    }

    /// `_sum`: numbers add; arrays of numbers add element-wise (the shorter padded with 0).
    static func sum(_ a: JSON, _ b: JSON) throws -> JSON {
        switch (a, b) {
        case let (.int(x), .int(y)):
            let (result, overflow) = x.addingReportingOverflow(y)
            return overflow ? .double(Double(x) + Double(y)) : .int(result)
        case let (.array(x), .array(y)):
            return .array(try (0..<Swift.max(x.count, y.count)).map { i in
                try sum(i < x.count ? x[i] : .int(0), i < y.count ? y[i] : .int(0))
            })
        case let (.array(x), _) where b.isNumber:
            return try sum(.array(x), .array([b]))
        case let (_, .array(y)) where a.isNumber:
            return try sum(.array([a]), .array(y))
        default:
            guard let x = a.doubleValue, let y = b.doubleValue else {
                throw CouchError(status: 500, error: "builtin_reduce_error", reason: "_sum can only reduce numbers or arrays of numbers: \(b)")
            }
            return .double(x + y)
        }
    }
}
