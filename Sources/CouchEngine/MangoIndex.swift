import CouchJSON
import Crypto
import Foundation
import GRDB

/// A Mango JSON index: the fields it orders by, and an optional partial filter.
public struct MangoIndex: Sendable {
    public var designDocument: String
    public var name: String
    /// Dotted field paths, split.
    public var fields: [[String]]
    public var partialFilter: Selector?
    /// The definition as stored (`{"fields":[...],"partial_filter_selector":...}`), which names
    /// the index's table: a changed definition is a new index.
    public var definition: JSON

    public init(designDocument: String, name: String, definition: JSON) throws(EngineError) {
        self.designDocument = designDocument
        self.name = name
        self.definition = definition
        var fields: [[String]] = []
        for field in definition["fields"]?.arrayValue ?? [] {
            switch field {
            case let .string(s): fields.append(Selector.splitPath(s))
            case let .object(o) where o.count == 1: fields.append(Selector.splitPath(o.members[0].key))
            default: throw EngineError.badRequest("Invalid index field: \(field)")
            }
        }
        guard !fields.isEmpty else { throw EngineError.badRequest("An index needs at least one field") }
        self.fields = fields
        if let partial = definition["partial_filter_selector"], partial.objectValue?.isEmpty == false {
            partialFilter = try Selector(json: partial)
        }
    }

    /// The SQLite table holding this index's entries.
    var table: String {
        var md5 = Insecure.MD5()
        md5.update(data: Array((designDocument + "\u{0}" + name + "\u{0}").utf8) + definition.bytes)
        return "mango_" + Database.hex(md5.finalize())
    }

    /// The index key of a document, or nil when the document lacks an indexed field or fails
    /// the partial filter (CouchDB's JSON indexes skip such documents).
    func key(for doc: JSON) -> [UInt8]? {
        if let partialFilter, !partialFilter.matches(doc) { return nil }
        var key: [UInt8] = []
        for path in fields {
            guard let value = Selector.lookup(doc, path) else { return nil }
            value.appendCollationKey(to: &key)
        }
        return key
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
    public init(selector: Selector) { self.selector = selector }
}

/// `_find` results with CouchDB's execution statistics.
public struct FindResult: Sendable {
    public var docs: [JSON]
    public var keysExamined: Int
    public var docsExamined: Int
}

extension Database {
    /// Brings an index up to date with the changes feed: entries of documents changed since
    /// the index's checkpoint are replaced. Runs through the write queue, so it is consistent
    /// with concurrent writes; an index is built on first use and then maintained incrementally.
    public func updateIndex(_ index: MangoIndex) async throws {
        let table = index.table
        let current = try await reading { db -> (Int, Int) in
            let exists = try db.tableExists("mango_indexes")
                ? (try Int.fetchOne(db, sql: "SELECT seq FROM mango_indexes WHERE name = ?", arguments: [table]) ?? -1) : -1
            return (exists, try Database.metaInt(db, "update_seq"))
        }
        if current.0 >= current.1 { return }
        _ = try await writer.write { db, _ in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS mango_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, def TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS \(table)(key BLOB NOT NULL, doc_id TEXT NOT NULL, PRIMARY KEY(key, doc_id)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS \(table)_by_doc ON \(table)(doc_id);
                """)
            var since = try Int.fetchOne(db, sql: "SELECT seq FROM mango_indexes WHERE name = ?", arguments: [table]) ?? 0
            let delete = try db.makeStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
            let insert = try db.makeStatement(sql: "INSERT OR REPLACE INTO \(table)(key, doc_id) VALUES (?, ?)")
            while true {
                let rows = try Row.fetchAll(db, sql: """
                    SELECT d.id, d.seq, d.deleted, r.body FROM docs d LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner
                    WHERE d.seq > ? ORDER BY d.seq LIMIT 2000
                    """, arguments: [since])
                if rows.isEmpty { break }
                for row in rows {
                    let id: String = row[0]
                    since = row[1]
                    try delete.execute(arguments: [id])
                    guard (row[2] as Int) == 0, !id.hasPrefix("_design/"), let data = row[3] as Data?,
                          var body = try JSON.parse(data).objectValue else { continue }
                    body.prepend("_id", .string(id))
                    if let key = index.key(for: .object(body)) {
                        try insert.execute(arguments: [Data(key), id])
                    }
                }
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO mango_indexes(name, seq, def) VALUES (?, ?, ?)",
                arguments: [table, since, index.definition.text])
            return true
        }
    }

    /// Drops index tables whose index no longer exists (`_view_cleanup`).
    public func dropIndexes(except keep: [MangoIndex]) async throws {
        let keepTables = Set(keep.map(\.table))
        _ = try await writer.write { db, _ in
            guard try db.tableExists("mango_indexes") else { return true }
            for table in try String.fetchAll(db, sql: "SELECT name FROM mango_indexes") where !keepTables.contains(table) {
                try db.execute(sql: "DROP TABLE IF EXISTS \(table)")
                try db.execute(sql: "DELETE FROM mango_indexes WHERE name = ?", arguments: [table])
            }
            return true
        }
    }

    /// Runs a Mango query. With an index, only the key range its first field's conditions
    /// allow is read, in index order (so a matching sort needs no sorting and a limit stops the
    /// scan early); without one, every document is examined. The full selector is applied to
    /// each candidate either way.
    public func find(_ query: FindQuery, index: MangoIndex?) async throws -> FindResult {
        if let index { try await updateIndex(index) }
        return try await reading { db in
            var options = ReadOptions()
            options.conflicts = query.conflicts
            var docs: [JSON] = []
            var keysExamined = 0
            var docsExamined = 0
            var skipped = 0
            let needsSorting = !query.sort.isEmpty && index == nil
            let wanted = needsSorting ? Int.max : query.limit

            func consider(_ id: String, row: Row) throws -> Bool {
                docsExamined += 1
                guard let rev = Revision(row["winner"] as String), let data = row["body"] as Data?,
                      let body = try JSON.parse(data).objectValue else { return true }
                let docRow = DocRow(seq: row["seq"], tree: try RevisionTree(encoded: row["tree"]), winnerDeleted: false)
                guard let doc = try Database.assemble(db, id: id, rev: rev, row: docRow, options: options, storedBody: body) else { return true }
                guard query.selector.matches(.object(doc)) else { return true }
                if !needsSorting, skipped < query.skip {
                    skipped += 1
                    return true
                }
                guard docs.count < wanted else { return false }  // `limit: 0` wants none
                docs.append(.object(doc))
                return docs.count < wanted
            }

            if let index {
                let (low, high) = Database.keyRange(for: index, selector: query.selector)
                var sql = "SELECT i.doc_id, d.winner, d.seq, d.tree, r.body FROM \(index.table) i JOIN docs d ON d.id = i.doc_id AND d.deleted = 0 LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner WHERE 1"
                var arguments: [any DatabaseValueConvertible] = []
                if let low { sql += " AND i.key >= ?"; arguments.append(Data(low)) }
                if let high { sql += " AND i.key < ?"; arguments.append(Data(high)) }
                sql += " ORDER BY i.key \(query.descending ? "DESC" : "ASC"), i.doc_id \(query.descending ? "DESC" : "ASC")"
                let cursor = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
                while let row = try cursor.next() {
                    keysExamined += 1
                    if try !consider(row[0], row: row) { break }
                }
            } else {
                let cursor = try Row.fetchCursor(db, sql: """
                    SELECT d.id, d.winner, d.seq, d.tree, r.body FROM docs d LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner
                    WHERE d.deleted = 0 AND d.id NOT BETWEEN '_design/' AND '_design0' ORDER BY d.id
                    """)
                while let row = try cursor.next() {
                    if try !consider(row[0], row: row) { break }
                }
            }
            if needsSorting {
                docs.sort { a, b in
                    for path in query.sort {
                        let c = JSON.collate(Selector.lookup(a, path) ?? .null, Selector.lookup(b, path) ?? .null)
                        if c != 0 { return query.descending ? c > 0 : c < 0 }
                    }
                    return false
                }
                docs = Array(docs.dropFirst(query.skip).prefix(query.limit))
            }
            return FindResult(docs: docs, keysExamined: keysExamined, docsExamined: docsExamined)
        }
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
                raiseLow(v.collationKey)
                lowerHigh(v.collationKey + [0xFF])
            case let .gt(v):
                raiseLow(v.collationKey + [0xFF])
            case let .gte(v):
                raiseLow(v.collationKey)
            case let .lt(v):
                lowerHigh(v.collationKey)
            case let .lte(v):
                lowerHigh(v.collationKey + [0xFF])
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
    /// The conditions that every match must satisfy on `path`: those in the top-level
    /// conjunction (explicit `$and` or implicit), in any nesting of field objects.
    public func conditions(on path: [String]) -> [Condition] {
        switch self {
        case let .and(parts): return parts.flatMap { $0.conditions(on: path) }
        case let .field(fieldPath, inner):
            guard path.starts(with: fieldPath) else { return [] }
            let rest = Array(path.dropFirst(fieldPath.count))
            if rest.isEmpty { return inner.directConditions }
            return inner.conditions(on: rest)
        default: return []
        }
    }

    private var directConditions: [Condition] {
        switch self {
        case let .condition(c): return [c]
        case let .and(parts): return parts.flatMap(\.directConditions)
        default: return []
        }
    }

    /// True when every match must have a value at `path` (so an index that skips documents
    /// without it loses nothing).
    public func requiresField(_ path: [String]) -> Bool {
        conditions(on: path).contains { condition in
            if case .exists(false) = condition { return false }
            return true
        }
    }
}
