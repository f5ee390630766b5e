public import CouchJSON
import Foundation
import GRDB

/// Options of `_all_docs`, `_design_docs` and `_local_docs`.
public struct AllDocsOptions: Sendable {
    public var startKey: String?
    public var endKey: String?
    public var inclusiveEnd = true
    public var descending = false
    public var limit: Int?
    public var skip = 0
    public var includeDocs = false
    public var keys: [JSON]?
    public var read = ReadOptions()
    /// Whether to count the rows before the range (`offset`); later pages of a streamed
    /// answer skip it.
    public var computeOffset = true
    /// Ids `low..<high` that `total_rows` and `offset` count instead of every document
    /// (`_design_docs` counts design documents only, as CouchDB does).
    public var countedRange: (low: String, high: String)?
    public init() {}
}

/// A row of an answer already written as JSON, with the id it is for (`_all_docs` pages
/// continue after their last id).
public struct SerializedRow: Sendable {
    public let id: String
    public let bytes: [UInt8]
}

extension DocumentDatabase {
    /// `_all_docs` (and `_design_docs` with a key range): rows of non-deleted documents in id
    /// order, or rows for `keys` in the order given.
    public func allDocs(_ options: AllDocsOptions) async throws -> (totalRows: Int, offset: Int, rows: [JSON]) {
        try await reading { db in
            if let keys = options.keys {
                return (try Self.totalRows(db, options), 0, try StoredDocument.rows(db, keys: keys, options))
            }
            return try Self.allDocsRange(db, options, offsets: allDocsOffsets) { id, rev, row in
                var out: JSONObject = ["id": .string(id), "key": .string(id), "value": ["rev": .string(rev)]]
                if options.includeDocs, let data = row[4] as Data?, let body = try JSON.parse(data).objectValue {
                    out["doc"] = try StoredDocument.assembleWinnerRow(
                        db, id: id, row: row, body: body, deleted: false, options: options.read)
                }
                return .object(out)
            }
        }
    }

    /// `_all_docs` as the HTTP answer writes it: each row already JSON, its document written
    /// from the stored body's bytes without parsing them (`StoredDocument.winnerBytes`) when
    /// nothing but the document is asked for. The same rows as `allDocs`, byte for byte as
    /// they would serialize; reading and re-writing each body was most of a full read's time.
    public func allDocsSerialized(
        _ options: AllDocsOptions
    ) async throws -> (totalRows: Int, offset: Int, rows: [SerializedRow]) {
        try await reading { db in
            if let keys = options.keys {
                let rows = try StoredDocument.rows(db, keys: keys, options)
                return (
                    try Self.totalRows(db, options), 0,
                    rows.map { row in
                        SerializedRow(id: row["id"]?.stringValue ?? row["key"]?.stringValue ?? "", bytes: row.bytes)
                    }
                )
            }
            return try Self.allDocsRange(db, options, offsets: allDocsOffsets) { id, rev, row in
                var out = Array(#"{"id":"#.utf8)
                let quotedID = JSON.string(id).bytes
                out += quotedID
                out += #","key":"#.utf8
                out += quotedID
                out += #","value":{"rev":"#.utf8
                JSON.string(rev).write(to: &out)
                out += "}".utf8
                if options.includeDocs, let data = row[4] as Data? {
                    out += #","doc":"#.utf8
                    if let doc = StoredDocument.winnerBytes(id: quotedID, rev: rev, body: data, options: options.read) {
                        out += doc
                    } else if let body = try JSON.parse(data).objectValue {
                        try StoredDocument.assembleWinnerRow(
                            db, id: id, row: row, body: body, deleted: false, options: options.read
                        ).write(to: &out)
                    }
                }
                out += "}".utf8
                return SerializedRow(id: id, bytes: out)
            }
        }
    }

    /// `total_rows`: every live document, or those in `countedRange` (`_design_docs`).
    private static func totalRows(_ db: GRDB.Database, _ options: AllDocsOptions) throws -> Int {
        guard let counted = options.countedRange else { return try DatabaseFile.metaInt(db, "doc_count") }
        return try Int.fetchOne(
            db, sql: "SELECT count(*) FROM docs WHERE deleted = 0 AND id >= ? AND id < ?",
            arguments: [counted.low, counted.high]) ?? 0
    }

    /// The rows of an `_all_docs` key range, each made by `makeRow` from the id, the winning
    /// revision and the row (`id, winner, seq, tree[, body]`).
    private static func allDocsRange<Row>(
        _ db: GRDB.Database, _ options: AllDocsOptions, offsets: AllDocsOffsets,
        makeRow: (String, String, GRDB.Row) throws -> Row
    ) throws -> (totalRows: Int, offset: Int, rows: [Row]) {
        let total = try totalRows(db, options)
        var conditions = ["d.deleted = 0"]
        var arguments: [any DatabaseValueConvertible] = []
        let (low, high) = options.descending ? (options.endKey, options.startKey) : (options.startKey, options.endKey)
        let lowInclusive = options.descending ? options.inclusiveEnd : true
        let highInclusive = options.descending ? true : options.inclusiveEnd
        if let low {
            conditions.append(lowInclusive ? "d.id >= ?" : "d.id > ?")
            arguments.append(low)
        }
        if let high {
            conditions.append(highInclusive ? "d.id <= ?" : "d.id < ?")
            arguments.append(high)
        }
        // offset: rows before the range start in the requested direction.
        var offset = 0
        if options.computeOffset, let start = options.startKey {
            let state = DocumentsState(
                updateSeq: try DatabaseFile.metaInt(db, "update_seq"),
                purgeSeq: try DatabaseFile.metaInt(db, "purge_seq"))
            offset = try offsets.offset(before: start, descending: options.descending, state: state, db)
        }
        if let counted = options.countedRange {
            if options.computeOffset, options.startKey != nil {
                let outside =
                    options.descending
                    ? try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM docs WHERE deleted = 0 AND id >= ?", arguments: [counted.high])
                        ?? 0
                    : try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM docs WHERE deleted = 0 AND id < ?", arguments: [counted.low])
                        ?? 0
                offset = Swift.max(0, offset - outside)
            }
        }
        // Past the end, the offset is the number of rows (CouchDB's fold ends there).
        offset = Swift.min(offset.addingSaturating(options.skip), total)
        let join = options.includeDocs ? "LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner" : ""
        let sql = """
            SELECT d.id, d.winner, d.seq, d.tree\(options.includeDocs ? ", r.body" : "") FROM docs d \(join)
            WHERE \(conditions.joined(separator: " AND "))
            ORDER BY d.id \(options.descending ? "DESC" : "ASC") LIMIT ? OFFSET ?
            """
        arguments.append(options.limit ?? -1)
        arguments.append(options.skip)
        var rows: [Row] = []
        let cursor = try GRDB.Row.fetchCursor(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments))
        while let row = try cursor.next() {
            rows.append(try makeRow(row[0], row[1], row))
        }
        return (total, offset, rows)
    }
}
