public import CouchEngine
import CouchCollation
public import CouchJSON
import Crypto
import Foundation
import GRDB

/// A Mango JSON index: the fields it orders by, and an optional partial filter.
public struct MangoIndex: Sendable {
    public let designDocument: String
    public let name: String
    /// Dotted field paths, split.
    public let fields: [[String]]
    public private(set) var partialFilter: Selector?
    /// Whether the index serves queries in one partition (the default in a partitioned
    /// database) rather than global ones.
    public var partitioned = false
    /// The definition as stored (`{"fields":[...],"partial_filter_selector":...}`), which names
    /// the index's table: a changed definition is a new index.
    public let definition: JSON
    /// Names the index's tables; computed once (every query and catch-up needs it).
    private let tableHash: String

    public init(designDocument: String, name: String, definition: JSON) throws(CouchError) {
        self.designDocument = designDocument
        self.name = name
        self.definition = definition
        var md5 = Insecure.MD5()
        md5.update(data: Array((designDocument + "\u{0}" + name + "\u{0}").utf8) + definition.bytes)
        tableHash = Hex.string(md5.finalize())
        var fields: [[String]] = []
        for field in definition["fields"]?.arrayValue ?? [] {
            switch field {
            case let .string(s): fields.append(Selector.splitPath(s))
            case let .object(o) where o.count == 1: fields.append(Selector.splitPath(o.members[0].key))
            default: throw CouchError.badRequest("Invalid index field: \(field)")
            }
        }
        guard !fields.isEmpty else { throw CouchError.badRequest("An index needs at least one field") }
        self.fields = fields
        if let partial = definition["partial_filter_selector"], partial.objectValue?.isEmpty == false {
            partialFilter = try Selector(json: partial)
        }
    }

    /// The index as `_index` lists it and `_explain` shows it.
    public var listing: JSON {
        var def = definition.objectValue ?? [:]
        if let fields = def["fields"]?.arrayValue {
            def["fields"] = .array(fields.map { field in field.stringValue.map { [$0: "asc"] } ?? field })
        }
        return [
            "ddoc": .string(designDocument), "name": .string(name), "type": "json", "partitioned": .bool(partitioned),
            "def": .object(def),
        ]
    }

    /// The SQLite table holding this index's entries (keys and values), named by the format of
    /// its keys (`KeyCollation.storedFormat`) and the definition.
    var table: String { "mango_v3_" + MangoIndex.formatTag + "_" + tableHash }

    /// Tables of the same index in earlier layouts (keys only: `mango_<hash>`; before ICU
    /// collation: `mango_v2_<hash>`; another ICU version), dropped when `table` is built:
    /// every name in the registry that ends with this definition's hash but is not `table`.
    var tableSuffix: String { "_" + tableHash }

    /// A short digest of the stored key format.
    static let formatTag = String(ViewDefinition.digest(KeyCollation.storedFormat).prefix(8))

    /// The index entry of a document: its key, and the indexed values themselves (a JSON
    /// array, from which a covering query answers); nil when the document lacks an indexed
    /// field or fails the partial filter (CouchDB's JSON indexes skip such documents).
    func entry(for doc: JSON) -> (key: [UInt8], values: [UInt8])? {
        if let partialFilter, !partialFilter.matches(doc) { return nil }
        var key: [UInt8] = []
        var values: [JSON] = []
        values.reserveCapacity(fields.count)
        for path in fields {
            guard let value = Selector.lookup(doc, path) else { return nil }
            value.appendCollationKey(to: &key)
            values.append(value)
        }
        return (key, JSON.array(values).bytes)
    }

    /// Whether the index alone answers a query returning `fields` for `selector` (CouchDB's
    /// `mango_idx_view:covers` of the fields and the selector's fields: each is `_id` or one of
    /// the columns). Without a selector, the fields alone (as `_explain` judges candidates).
    public func covers(fields requested: [String]?, selector: Selector?) -> Bool {
        guard let requested else { return false }
        let needed = requested.map(Selector.splitPath) + (selector?.fieldPaths ?? [])
        return needed.allSatisfy { $0 == ["_id"] || fields.contains($0) }
    }

    /// The document a covering query sees: `_id` and the indexed values at their paths.
    func coveredDocument(id: String, values: [UInt8]) throws -> JSON {
        var doc: JSONObject = ["_id": .string(id)]
        for (path, value) in zip(fields, try JSON.parse(values).arrayValue ?? []) {
            Selector.setPath(&doc, path, value)
        }
        return .object(doc)
    }
}

/// What `_find` asks of the engine once the server has parsed the request.
public struct FindQuery: Sendable {
    public var selector: Selector
    public var sort: [[String]] = []
    public var descending = false
    public var skip = 0
    public var limit = 25
    public var conflicts = false
    /// Whether the index is brought up to date first (`update: false` reads it as it is).
    public var update = true
    /// Answer from the index alone, without reading documents (see `MangoIndex.covers`).
    public var covering = false
    /// Only documents whose id is in `low..<high` (one partition's).
    public var idRange: (low: String, high: String)?
    /// Asked every few hundred rows: true stops the scan (its client went away).
    public var isCancelled: @Sendable () -> Bool = { false }
    public init(selector: Selector) { self.selector = selector }
}

/// `_find` results with CouchDB's execution statistics.
public struct FindResult: Sendable {
    public var docs: [JSON]
    public var keysExamined: Int
    public var docsExamined: Int
}

/// A Mango index as a `SecondaryIndex`: each changed document's entry (its key, and the indexed
/// values a covering query reads) replaces the old one.
struct MangoEntries: SecondaryIndex {
    typealias Batch = [(key: [UInt8], values: [UInt8])?]

    let index: MangoIndex
    static let registry = "mango_indexes"
    var table: String { index.table }
    /// Large: each batch is a commit (a sync) of its own, and an entry costs little to make
    /// (2,000 made building an index over 100,000 documents a fifth slower than one
    /// transaction; 10,000 is within a few percent of it, and holds the writer well under a
    /// second).
    var batchSize: Int { 10_000 }

    /// Also drops the same index's tables in earlier layouts (see `MangoIndex.tableSuffix`).
    func createTables(_ db: GRDB.Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS mango_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, def TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS \(table)(
                    key BLOB NOT NULL, doc_id TEXT NOT NULL, vals BLOB NOT NULL, PRIMARY KEY(key, doc_id)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS \(table)_by_doc ON \(table)(doc_id);
                """)
        let earlier = try String.fetchAll(
            db, sql: "SELECT name FROM mango_indexes WHERE substr(name, -?) = ? AND name != ?",
            arguments: [index.tableSuffix.utf8.count, index.tableSuffix, table])
        for name in earlier {
            try db.execute(sql: "DROP TABLE IF EXISTS \(name)")
            try db.execute(sql: "DELETE FROM mango_indexes WHERE name = ?", arguments: [name])
        }
        try db.execute(
            sql: "INSERT OR IGNORE INTO mango_indexes(name, seq, def) VALUES (?, 0, ?)",
            arguments: [table, index.definition.text])
    }

    func prepare(_ changed: [ChangedDocument]) async throws -> Batch {
        try changed.map { try $0.document().flatMap { index.entry(for: .object($0)) } }
    }

    func store(_ batch: Batch, changed: [ChangedDocument], in db: GRDB.Database) throws {
        let delete = try db.makeStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
        let insert = try db.makeStatement(sql: "INSERT OR REPLACE INTO \(table)(key, doc_id, vals) VALUES (?, ?, ?)")
        for (document, entry) in zip(changed, batch) {
            try delete.execute(arguments: [document.id])
            if let entry { try insert.execute(arguments: [Data(entry.key), document.id, Data(entry.values)]) }
        }
    }
}

/// The Mango indexes of one database (`db.mango`): brought up to date, used by `_find` (or a
/// full scan without one) and dropped.
public struct MangoIndexes: Sendable {
    public let database: DocumentDatabase

    /// Brings an index up to date with the changes feed (built on first use, then maintained
    /// incrementally). Without `catchUp`, only an index that does not exist yet is made
    /// (empty, as CouchDB reads a view never built with `update=false`).
    public func update(_ index: MangoIndex, catchUp: Bool = true) async throws {
        if catchUp {
            try await database.catchUp(MangoEntries(index: index))
        } else {
            try await database.createIfMissing(MangoEntries(index: index))
        }
    }

    /// Drops index tables whose index no longer exists (`_view_cleanup`).
    public func drop(except keep: [MangoIndex]) async throws {
        try await database.dropIndexes(registry: MangoEntries.registry, keeping: Set(keep.map(\.table)))
    }

    /// Runs a Mango query. With an index, only the key range its first field's conditions
    /// allow is read, in index order (so a matching sort needs no sorting and a limit stops the
    /// scan early); without one, every document is examined. The full selector is applied to
    /// each candidate either way.
    public func find(_ query: FindQuery, index: MangoIndex?) async throws -> FindResult {
        if query.selector.isEmptyOr { return FindResult(docs: [], keysExamined: 0, docsExamined: 0) }
        if let index { try await update(index, catchUp: query.update) }
        // Only the ids the selector's `_id` prefix allows are read (a partition's otherwise).
        var narrowed = query
        if narrowed.idRange == nil { narrowed.idRange = query.selector.idPrefixRange }
        let query = narrowed
        return try await database.reading { db in
            var scan = MangoScan(query: query, index: index)
            if let index {
                let covering = query.covering && !scan.needsSorting
                let sql = MangoIndexes.indexScan(index, query, covering: covering)
                // Cached: the same query shape on the same index is asked again and again, and
                // preparing it (the SQLite wrapper's authorizer included) cost as much as a row.
                let cursor = try Row.fetchCursor(db.cachedStatement(sql: sql.sql), arguments: sql.arguments)
                while let row = try cursor.next() {
                    scan.keysExamined += 1
                    if query.isCancelled() { throw CancellationError() }
                    let going =
                        covering
                        ? try scan.coveredMatch(row[0], values: Array(row[1] as Data))
                        : try scan.consider(row[0], row: row, db)
                    if !going { break }
                }
            } else {
                let range = query.idRange.map { _ in " AND d.id >= ? AND d.id < ?" } ?? ""
                let cursor = try Row.fetchCursor(
                    db.cachedStatement(
                        sql: """
                            SELECT d.id, d.winner, d.seq, d.tree, r.body FROM docs d LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner
                            WHERE d.deleted = 0\(range) ORDER BY d.id
                            """), arguments: StatementArguments(query.idRange.map { [$0.low, $0.high] } ?? []))
                while let row = try cursor.next() {
                    scan.keysExamined += 1
                    if query.isCancelled() { throw CancellationError() }
                    if try !scan.consider(row[0], row: row, db) { break }
                }
            }
            let docs = scan.needsSorting ? MangoIndexes.sortedPage(scan.docs, query) : scan.docs
            return FindResult(docs: docs, keysExamined: scan.keysExamined, docsExamined: scan.docsExamined)
        }
    }

    /// The scan of an index for a query: the key range its first field's conditions allow
    /// (and the partition's ids), in index order; with `covering`, the index rows alone,
    /// otherwise joined with each document's winning revision.
    static func indexScan(
        _ index: MangoIndex, _ query: FindQuery, covering: Bool
    ) -> (sql: String, arguments: StatementArguments) {
        let (low, high) = MangoIndexes.keyRange(for: index, selector: query.selector)
        var sql =
            covering
            ? "SELECT i.doc_id, i.vals FROM \(index.table) i WHERE 1"
            : "SELECT i.doc_id, d.winner, d.seq, d.tree, r.body FROM \(index.table) i JOIN docs d ON d.id = i.doc_id AND d.deleted = 0 LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner WHERE 1"
        var arguments: [any DatabaseValueConvertible] = []
        if let low { sql += " AND i.key >= ?"; arguments.append(Data(low)) }
        if let high { sql += " AND i.key < ?"; arguments.append(Data(high)) }
        if let (low, high) = query.idRange {
            sql += " AND i.doc_id >= ? AND i.doc_id < ?"
            arguments += [low, high]
        }
        sql += " ORDER BY i.key \(query.descending ? "DESC" : "ASC"), i.doc_id \(query.descending ? "DESC" : "ASC")"
        return (sql, StatementArguments(arguments))
    }

    /// Documents found without an index that orders them: sorted by the query's fields in
    /// collation order, then its page (`skip`, `limit`).
    static func sortedPage(_ docs: [JSON], _ query: FindQuery) -> [JSON] {
        let sorted = docs.sorted { a, b in
            for path in query.sort {
                let c = JSON.collate(Selector.lookup(a, path) ?? .null, Selector.lookup(b, path) ?? .null)
                if c != 0 { return query.descending ? c > 0 : c < 0 }
            }
            return false
        }
        return Array(sorted.dropFirst(query.skip).prefix(query.limit))
    }

    /// The key range of the index's first field that the selector's top-level conditions allow.
    static func keyRange(for index: MangoIndex, selector: Selector) -> (low: [UInt8]?, high: [UInt8]?) {
        let first = index.fields[0]
        var low: [UInt8]? = nil
        var high: [UInt8]? = nil
        func raiseLow(_ key: [UInt8]) { if low.map({ key.lexicographicallyPrecedes($0) }) != true { low = key } }
        func lowerHigh(_ key: [UInt8]) { if high.map({ $0.lexicographicallyPrecedes(key) }) != true { high = key } }
        // Keys of the first field's value `v` are `enc(v)` followed by the other fields, so
        // "first field == v" is the range [enc(v), enc(v) + 0xFF).
        for condition in selector.conditions(on: first) {
            switch condition {
            case let .eq(v):
                raiseLow(v.collationKey())
                lowerHigh(v.collationKey() + [0xFF])
            case let .gt(v):
                // From the value itself, as CouchDB's view ranges have no exclusive start: the
                // rows equal to it are read (and counted in the statistics), then not matched.
                raiseLow(v.collationKey())
            case let .gte(v):
                raiseLow(v.collationKey())
            case let .lt(v):
                lowerHigh(v.collationKey())
            case let .lte(v):
                lowerHigh(v.collationKey() + [0xFF])
            case let .beginsWith(prefix):
                let range = JSON.stringPrefixRange(prefix)
                raiseLow(range.low)
                lowerHigh(range.high)
            default:
                break
            }
        }
        return (low, high)
    }
}

extension Selector {
    /// True when every match must have a value at `path` (so an index that skips documents
    /// without it loses nothing), as CouchDB's `mango_selector:has_required_fields` decides:
    /// any member of a conjunction may require it, every branch of an `$or` must (an empty
    /// `$or` requires everything), and any condition but `{"$exists": false}` does.
    public func requiresField(_ path: [String]) -> Bool {
        switch self {
        case let .and(parts): return parts.contains { $0.requiresField(path) }
        case let .or(parts): return parts.allSatisfy { $0.requiresField(path) }
        case let .field(fieldPath, inner):
            guard path.starts(with: fieldPath) else { return false }
            let rest = Array(path.dropFirst(fieldPath.count))
            if rest.isEmpty { return !inner.isOnlyExistsFalse }
            return inner.requiresField(rest)
        default: return false
        }
    }

    private var isOnlyExistsFalse: Bool {
        switch self {
        case .condition(.exists(false)): return true
        case let .and(parts): return parts.allSatisfy(\.isOnlyExistsFalse)
        default: return false
        }
    }

    /// `{"$or": []}` alone: CouchDB runs no query for it and answers no documents (an empty
    /// `$or` inside a larger selector is true).
    public var isEmptyOr: Bool {
        if case let .or(parts) = self { return parts.isEmpty }
        return false
    }
}

/// One `_find` scan in progress: the documents found, CouchDB's statistics, and the rows
/// skipped so far.
struct MangoScan {
    let query: FindQuery
    let index: MangoIndex?
    let options: ReadOptions
    /// Without an index that orders them, every match is kept and sorted afterwards.
    let needsSorting: Bool
    let wanted: Int
    var docs: [JSON] = []
    var keysExamined = 0
    var docsExamined = 0
    var skipped = 0

    init(query: FindQuery, index: MangoIndex?) {
        self.query = query
        self.index = index
        var options = ReadOptions()
        options.conflicts = query.conflicts
        self.options = options
        needsSorting = !query.sort.isEmpty && index == nil
        wanted = needsSorting ? Int.max : query.limit
    }

    /// A scanned row's document (a join of `docs` and `revs`): kept when the selector matches;
    /// false when the scan can stop.
    mutating func consider(_ id: String, row: Row, _ db: GRDB.Database) throws -> Bool {
        docsExamined += 1
        // CouchDB examines one row past the last it returns (its statistics count it);
        // that row need not be read.
        if docs.count >= wanted { return false }
        guard let doc = try StoredDocument.winningDocument(db, id: id, scanned: row, options: options) else {
            return true
        }
        guard query.selector.matches(.object(doc)) else { return true }
        if id.hasPrefix("_design/") {
            // A full scan reads design documents too but never returns them; like CouchDB it
            // counts only those the selector did not match (a match is dropped with its
            // statistics).
            docsExamined -= 1
            keysExamined -= 1
            return true
        }
        if !needsSorting, skipped < query.skip {
            skipped += 1
            return true
        }
        docs.append(.object(doc))
        return true
    }

    /// A covering index answers alone: documents are made of `_id` and the indexed values.
    mutating func coveredMatch(_ id: String, values: [UInt8]) throws -> Bool {
        guard let index, docs.count < wanted else { return false }
        let doc = try index.coveredDocument(id: id, values: values)
        guard query.selector.matches(doc) else { return true }
        if skipped < query.skip {
            skipped += 1
            return true
        }
        docs.append(doc)
        return true
    }
}

extension DocumentDatabase {
    /// This database's Mango indexes.
    public var mango: MangoIndexes { MangoIndexes(database: self) }
}
