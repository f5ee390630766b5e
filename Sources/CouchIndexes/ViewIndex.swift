public import CouchEngine
public import CouchCollation
public import CouchJSON
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
/// code, the key collation and the format of stored keys): changed code is a new index, built
/// from scratch; the same code reuses its index. The reducer runs at query time, so changing
/// it does not rebuild anything.
public struct ViewDefinition: Sendable {
    public var signature: String
    public var map: BatchMapFunction
    public var reduce: ViewReducer?
    /// How keys are ordered (`options.collation`).
    public var collation: KeyCollation
    /// The design document's `options.include_design`: design documents are mapped too.
    public var includeDesign = false
    /// The design document's `options.local_seq`: documents are mapped with `_local_seq`.
    public var localSeq = false
    /// The signature of the same code in lt before ICU collation (keys in another order):
    /// that index is dropped when this one is built.
    var signatureBeforeICU: String

    /// A view from a per-document map closure.
    public init(
        code: String, map: @escaping MapFunction, reduce: ViewReducer? = nil, collation: KeyCollation = .unicode
    ) {
        self.init(code: code, batchMap: { docs in docs.map { try? map($0) } }, reduce: reduce, collation: collation)
    }

    /// A view from a batch map function (JavaScript). `code` is everything the map depends
    /// on (its source and any library code it may `require`).
    public init(
        code: String, batchMap: @escaping BatchMapFunction, reduce: ViewReducer? = nil,
        collation: KeyCollation = .unicode
    ) {
        signature = ViewDefinition.signature(code: code, collation: collation)
        signatureBeforeICU = ViewDefinition.digest(code)
        self.map = batchMap
        self.reduce = reduce
        self.collation = collation
    }

    /// The index name for map code, without building a definition (`_view_cleanup`, `_info`).
    /// Keys stored by another ICU version or key format are another index (rebuilt).
    public static func signature(code: String, collation: KeyCollation) -> String {
        digest(code + "\u{0}" + KeyCollation.storedFormat + (collation == .raw ? "\u{0}raw" : ""))
    }

    /// The hex MD5 of `text`: names index tables.
    public static func digest(_ text: String) -> String {
        Hex.string(Insecure.MD5.hash(data: Array(text.utf8)))
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
    /// With `include_docs`: each document's `_conflicts` (`conflicts=true`).
    public var conflicts = false
    /// With `include_docs`: attachments' bodies inline (`attachments=true`), or their encoding
    /// shown (`att_encoding_info=true`).
    public var attachments = false
    public var attEncodingInfo = false
    /// nil: reduce when the view has a reducer.
    public var reduce: Bool?
    /// nil when not given (CouchDB tells "not given" from `false`).
    public var group: Bool?
    public var groupLevel: Int?
    /// Only rows of documents whose id is in `low..<high` (one partition's).
    public var idRange: (low: String, high: String)?
    public init() {}

    /// How rows are grouped before reducing: not at all (one value for the range), by exact
    /// key (`group=true`), or by the first `n` elements of array keys (`group_level`).
    public enum Grouping: Sendable, Equatable {
        case whole
        case exact
        case level(Int)
    }

    /// The grouping CouchDB's `determine_group_level` derives from `group` and `group_level`.
    func grouping() throws(CouchError) -> Grouping {
        switch (group, groupLevel) {
        case (nil, nil), (false?, nil): return .whole
        case let (false?, level?) where level > 0:
            throw .queryParse("Can't specify group=false and group_level>0 at the same time")
        case (true?, nil): return .exact
        case let (_, level?): return level == 0 ? .whole : .level(level)
        }
    }

    /// Checks the query against the view as CouchDB's `validate_args` and `check_range` do, in
    /// their order, with their words: whether it reduces, and how it groups.
    func validated(for view: ViewDefinition) throws(CouchError) -> (reducing: Bool, grouping: Grouping, grouped: Bool) {
        let grouping = try grouping()
        let levelAboveZero: Bool = (groupLevel ?? 0) > 0
        let explicitlyGrouped: Bool = group == true || levelAboveZero
        let reducing = view.reduce != nil && reduce != false
        if view.reduce == nil, reduce == true { throw .queryParse("Reduce is invalid for map-only views.") }
        if reducing, grouping != .exact, keys != nil {
            throw .queryParse("Multi-key fetches for reduce views must use `group=true`")
        }
        if let limit, limit < 0 { throw .queryParse("`limit` must be a positive integer.") }
        if skip < 0 { throw .queryParse("`skip` must be >= 0") }
        if !reducing, explicitlyGrouped { throw .queryParse("Invalid use of grouping on a map view.") }
        if reducing, includeDocs { throw .queryParse("`include_docs` is invalid for reduce") }
        try checkRange(view.collation)
        return (reducing, grouping, explicitlyGrouped || grouping == .exact)
    }

    /// A range whose start lies beyond its end (in the query's direction) is an error, not an
    /// empty answer; the same key at both ends is always allowed.
    private func checkRange(_ collation: KeyCollation) throws(CouchError) {
        guard let start = startKey ?? key, let end = endKey ?? key, start != end else { return }
        var order = JSON.collate(start, end, collation)
        if order == 0 {
            // Document ids decide; absent ones are the lowest id at the start and the highest at
            // the end (the reverse when descending).
            switch (startKeyDocID, endKeyDocID) {
            case let (s?, e?): order = s.utf8.lexicographicallyPrecedes(e.utf8) ? -1 : 1
            case (nil, _): order = descending ? 1 : -1
            case (_, nil): order = descending ? 1 : -1
            }
        }
        if !descending, order >= 0 {
            throw .queryParse(
                "No rows can match your key range, reverse your start_key and end_key or set descending=true")
        }
        if descending, order < 0 {
            throw .queryParse(
                "No rows can match your key range, reverse your start_key and end_key or set descending=false")
        }
    }
}

public struct ViewResult: Sendable {
    public var totalRows: Int
    public var offset: Int
    public var rows: [JSON]
    /// The database sequence the index has seen (`update_seq=true`).
    public var updateSeq: Int
    /// Whether the rows are reductions (answered without `total_rows` and `offset`).
    public var reduced: Bool
}

extension CouchError {
    /// CouchDB's 400 for view and query parameters that cannot be answered.
    public static func queryParse(_ reason: String) -> CouchError {
        CouchError(status: 400, error: "query_parse_error", reason: reason)
    }
}

/// A view's index as a `SecondaryIndex`: each changed document's old rows are replaced by
/// what the map emits now (in `view_indexes`, with the row count kept beside the checkpoint).
struct ViewRows: SecondaryIndex {
    /// The rows of each changed document, in the order of the changes (none for a deleted one
    /// or a design document), and how many documents failed to map (skipped). By position, not
    /// by id: ids differ by their bytes, and Swift's `String` equality would take `é` and
    /// `e\u{301}` (two documents) for one.
    typealias Batch = (rows: [[(key: JSON, value: JSON)]], failures: Int)

    let view: ViewDefinition
    static let registry = "view_indexes"
    var table: String { view.table }
    var batchSize: Int { 1000 }

    func createTables(_ db: GRDB.Database) throws {
        try ViewIndexes.createViewTables(db, table)
        try ViewPositions.create(db, table)
        let earlier = "view_" + view.signatureBeforeICU
        try db.execute(sql: "DROP TABLE IF EXISTS \(earlier)")
        try db.execute(sql: "DELETE FROM view_indexes WHERE name = ?", arguments: [earlier])
    }

    func prepare(_ changed: [ChangedDocument]) async throws -> Batch {
        let documents = try changed.map { try $0.document(includeDesign: view.includeDesign, localSeq: view.localSeq) }
        let live = documents.compactMap { $0 }
        let mapped = live.isEmpty ? [] : try await view.map(live)
        guard mapped.count == live.count else { throw CouchError.corrupt("view map answer") }
        var next = mapped.makeIterator()
        let rows = documents.map { document in document == nil ? [] : (next.next() ?? nil) ?? [] }
        return (rows, mapped.filter { $0 == nil }.count)
    }

    func store(_ batch: Batch, changed: [ChangedDocument], in db: GRDB.Database) throws {
        // An index built before row positions were kept gets them with its next update.
        try ViewPositions.create(db, table)
        let delete = try db.makeStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
        // Plain INSERT: the document's rows were deleted just before, and a REPLACE would remove a row
        // without the delete trigger that counts it.
        let insert = try db.makeStatement(
            sql: "INSERT INTO \(table)(key, doc_id, n, key_json, value_json) VALUES (?, ?, ?, ?, ?)")
        var delta = 0
        var inserted: [Data] = []
        for (document, rows) in zip(changed, batch.rows) {
            try delete.execute(arguments: [document.id])
            delta -= db.changesCount
            for (n, row) in rows.enumerated() {
                let key = Data(row.key.collationKey(view.collation))
                try insert.execute(arguments: [key, document.id, n, row.key.text, row.value.text])
                inserted.append(key)
                delta += 1
            }
        }
        try db.execute(sql: "UPDATE view_indexes SET rows = rows + ? WHERE name = ?", arguments: [delta, table])
        try ViewPositions.counted(db, table, keys: inserted)
        try ViewPositions.rebalance(db, table)
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
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS view_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, rows INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE IF NOT EXISTS \(table)(
                    key BLOB NOT NULL, doc_id TEXT NOT NULL, n INTEGER NOT NULL, key_json TEXT NOT NULL, value_json TEXT NOT NULL,
                    PRIMARY KEY(key, doc_id, n)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS \(table)_by_doc ON \(table)(doc_id);
                INSERT OR IGNORE INTO view_indexes(name, seq, rows) VALUES ('\(table)', 0, 0);
                """)
    }

    /// Queries a view (bringing it up to date first unless `stale`): rows in the view's
    /// collation order of keys, then document ids; reduced (whole range, `group`, or
    /// `group_level`) when the view has a reducer and `reduce` is not false. Checked first as
    /// CouchDB checks a query (`query_parse_error`).
    public func query(_ view: ViewDefinition, _ query: ViewQuery, stale: Bool = false) async throws -> ViewResult {
        if let keys = query.keys, !keys.isEmpty, query.key != nil || query.startKey != nil || query.endKey != nil {
            throw CouchError.queryParse("`keys` is incompatible with `key`, `start_key` and `end_key`")
        }
        var normalized = query
        // One key in `keys` is `key`, and `key` is the range from it to itself (so
        // `inclusive_end` and the `*_docid` bounds apply), as CouchDB reads them.
        if let keys = query.keys, keys.count == 1 {
            normalized.keys = nil
            normalized.key = keys[0]
        }
        if normalized.keys == nil, let key = normalized.key {
            normalized.startKey = key
            normalized.endKey = key
            normalized.key = nil
        }
        let (reducing, grouping, grouped) = try normalized.validated(for: view)
        if !stale { try await update(view) }
        // Several keys are read in the order given, reversed when descending (as CouchDB does).
        if normalized.descending, let keys = normalized.keys { normalized.keys = keys.reversed() }
        let query = normalized
        let table = view.table
        let collation = view.collation
        if reducing, let reducer = view.reduce {
            // Without grouping, _count needs no rows at all: SQLite counts the range.
            if case .builtin(.count) = reducer, !grouped {
                let (seq, count) = try await database.reading { db -> (Int, Int) in
                    guard try db.tableExists(table) else { return (0, 0) }
                    var count = 0
                    for part in ViewRange.viewScans(query, collation) {
                        count +=
                            try Int.fetchOne(
                                db, sql: "SELECT count(*) FROM \(table) WHERE \(part.condition)",
                                arguments: StatementArguments(part.arguments)) ?? 0
                    }
                    return (try Self.indexedSeq(db, table), count)
                }
                let rows: [JSON] =
                    count == 0 || query.skip > 0 || query.limit == 0 ? [] : [["key": .null, "value": .int(count)]]
                return ViewResult(totalRows: 0, offset: 0, rows: rows, updateSeq: seq, reduced: true)
            }
            // Each key of `keys` is reduced on its own (a key asked twice is answered twice).
            let (seq, scans) = try await database.reading { db -> (Int, [[(key: JSON, id: String, value: JSON)]]) in
                guard try db.tableExists(table) else { return (0, []) }
                var scans: [[(key: JSON, id: String, value: JSON)]] = []
                for part in ViewRange.viewScans(query, collation) {
                    var rows: [(key: JSON, id: String, value: JSON)] = []
                    try Self.readRows(db, table, part, descending: query.descending, skip: 0, limit: nil, into: &rows)
                    scans.append(rows)
                }
                return (try Self.indexedSeq(db, table), scans)
            }
            var reduced: [JSON] = []
            for rows in scans {
                for (key, members) in ViewReduction.group(rows, grouping, collation: view.collation) {
                    let value = try await ViewReduction.reduce(reducer, members)
                    if case let .object(mark) = value, mark.count == 1, let reason = mark["reduce_overflow_error"] {
                        // A reduce function that grew too fast (`[query_server_config] reduce_limit`),
                        // shown as CouchDB's fabric shows it.
                        reduced.append(["key": .null, "error": "reduce_overflow_error", "reason": reason])
                    } else {
                        reduced.append(["key": key, "value": value])
                    }
                }
            }
            let page = Array(reduced.dropFirst(query.skip).prefix(query.limit ?? Int.max))
            return ViewResult(totalRows: 0, offset: 0, rows: page, updateSeq: seq, reduced: true)
        }
        let (total, offset, seq, rows) = try await database.reading {
            db -> (Int, Int, Int, [(key: JSON, id: String, value: JSON)]) in
            guard try db.tableExists(table) else { return (0, 0, 0, []) }
            let total =
                try Int.fetchOne(db, sql: "SELECT rows FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0
            let scans = ViewRange.viewScans(query, collation)
            let offset = try Self.offset(db, table, query, scans, collation: collation, total: total)
            var rows: [(key: JSON, id: String, value: JSON)] = []
            var skip = query.skip
            for part in scans where query.limit.map({ rows.count < $0 }) ?? true {
                let remaining = query.limit.map { $0 - rows.count }
                skip -= try Self.readRows(
                    db, table, part, descending: query.descending, skip: skip, limit: remaining, into: &rows)
            }
            return (total, offset, try Self.indexedSeq(db, table), rows)
        }
        let page = try await mapRows(rows, query)
        return ViewResult(totalRows: total, offset: offset, rows: page, updateSeq: seq, reduced: false)
    }

    /// Reads one scan's rows in order after skipping `skip` of them, at most `limit`; returns how
    /// many rows it skipped.
    @discardableResult
    static func readRows(
        _ db: GRDB.Database, _ table: String, _ part: (condition: String, arguments: [any DatabaseValueConvertible]),
        descending: Bool, skip: Int, limit: Int?, into rows: inout [(key: JSON, id: String, value: JSON)]
    ) throws -> Int {
        let order = descending ? "DESC" : "ASC"
        let paging: [any DatabaseValueConvertible] = [limit ?? -1, skip]
        let cursor = try Row.fetchCursor(
            db,
            sql:
                "SELECT doc_id, key_json, value_json FROM \(table) WHERE \(part.condition) ORDER BY key \(order), doc_id \(order), n \(order) LIMIT ? OFFSET ?",
            arguments: StatementArguments(part.arguments + paging))
        var read = 0
        while let row = try cursor.next() {
            rows.append((try JSON.parse(row[1] as String), row[0] as String, try JSON.parse(row[2] as String)))
            read += 1
        }
        if read > 0 || skip == 0 { return skip }
        // Nothing left after skipping: the scan had at most `skip` rows; count them.
        let count =
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM \(table) WHERE \(part.condition)",
                arguments: StatementArguments(part.arguments)) ?? 0
        return Swift.min(count, skip)
    }

    /// CouchDB's `offset`: where its fold first met a row — the rows of the whole index before
    /// the first scan (key or range, in the query's direction) that has any, or when none has,
    /// before the last scan's start — plus `skip`, at most the total.
    static func offset(
        _ db: GRDB.Database, _ table: String, _ query: ViewQuery,
        _ scans: [(condition: String, arguments: [any DatabaseValueConvertible])],
        collation: KeyCollation, total: Int
    ) throws -> Int {
        let starts: [(key: JSON?, docID: String?)] =
            query.keys.map { $0.map { ($0, query.startKeyDocID) } } ?? [(query.startKey, query.startKeyDocID)]
        var chosen = starts.last
        // One scan is its own start whether it has rows or not.
        for (start, scan) in zip(starts, scans) where starts.count > 1 {
            let any =
                try Bool.fetchOne(
                    db, sql: "SELECT EXISTS(SELECT 1 FROM \(table) WHERE \(scan.condition))",
                    arguments: StatementArguments(scan.arguments)) ?? false
            if any {
                chosen = start
                break
            }
        }
        guard let chosen, let key = chosen.key else { return Swift.min(query.skip, total) }
        // The rows before the start: the range that ends there, the start excluded.
        var before = ViewQuery()
        before.descending = query.descending
        before.endKey = key
        before.endKeyDocID = chosen.docID
        before.inclusiveEnd = false
        let count = try ViewPositions.rowsBefore(
            db, table, key: Data(key.collationKey(collation)), descending: query.descending,
            ViewRange.viewRange(before, collation))
        return Swift.min(count.addingSaturating(query.skip), total)
    }

    static func indexedSeq(_ db: GRDB.Database, _ table: String) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT seq FROM view_indexes WHERE name = ?", arguments: [table]) ?? 0
    }

    /// A map view's page of rows as JSON, each with its document when asked, as CouchDB links
    /// them: a value `{"_id": ...}` names another document, and `"_rev"` a revision.
    func mapRows(_ page: [(key: JSON, id: String, value: JSON)], _ query: ViewQuery) async throws -> [JSON] {
        var read = ReadOptions()
        read.conflicts = query.conflicts
        read.attachments = query.attachments
        read.attEncodingInfo = query.attEncodingInfo
        let (options, includeDocs) = (read, query.includeDocs)
        return try await database.reading { db in
            try page.map { row in
                var item: JSONObject = ["id": .string(row.id), "key": row.key, "value": row.value]
                if includeDocs {
                    let docID = row.value["_id"]?.stringValue ?? row.id
                    let rev = row.value["_rev"]?.stringValue.flatMap(Revision.init)
                    item["doc"] =
                        try StoredDocument.document(db, id: docID, rev: rev, options: options).map(JSON.object) ?? .null
                }
                return .object(item)
            }
        }
    }

    /// The state of the view indexes with these signatures (one design document's views):
    /// the sequence all of them have indexed up to, their size on disk (their pages) and of the
    /// data in them, and how many changes they still have to index.
    public func state(signatures: [String]) async throws -> (updateSeq: Int, bytes: Int, dataBytes: Int, pending: Int) {
        try await database.reading { db in
            let tables = signatures.map { "view_" + $0 }
            var seqs: [Int] = []
            if try db.tableExists("view_indexes") {
                for table in tables {
                    seqs.append(
                        try Int.fetchOne(db, sql: "SELECT seq FROM view_indexes WHERE name = ?", arguments: [table])
                            ?? 0)
                }
            }
            let updateSeq =
                tables.isEmpty
                ? try DatabaseFile.metaInt(db, "update_seq") : (seqs.count == tables.count ? seqs.min() ?? 0 : 0)
            let pending =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM docs WHERE seq > ?", arguments: [updateSeq]) ?? 0
            // Page sizes from SQLite's dbstat table where it is compiled in; 0 where it is not.
            var (bytes, data) = (0, 0)
            for table in tables {
                let row = try? Row.fetchOne(
                    db,
                    sql:
                        "SELECT coalesce(sum(pgsize), 0), coalesce(sum(payload), 0) FROM dbstat WHERE name IN (?, ?, ?)",
                    arguments: [table, table + "_by_doc", table + "_blocks"])
                bytes += row?[0] ?? 0
                data += row?[1] ?? 0
            }
            return (updateSeq, bytes, data, pending)
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
