import CouchJSON
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
    public init() {}
}

extension DocumentDatabase {
    /// `_all_docs` (and `_design_docs` with a key range): rows of non-deleted documents in id
    /// order, or rows for `keys` in the order given.
    public func allDocs(_ options: AllDocsOptions) async throws -> (totalRows: Int, offset: Int, rows: [JSON]) {
        try await reading { db in
            let total = try DatabaseFile.metaInt(db, "doc_count")
            if let keys = options.keys { return (total, 0, try StoredDocument.rows(db, keys: keys, options)) }
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
                offset = try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM docs WHERE deleted = 0 AND id \(options.descending ? ">" : "<") ?",
                    arguments: [start]) ?? 0
            }
            offset += options.skip
            let join = options.includeDocs ? "LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner" : ""
            let sql = """
                SELECT d.id, d.winner, d.seq, d.tree\(options.includeDocs ? ", r.body" : "") FROM docs d \(join)
                WHERE \(conditions.joined(separator: " AND "))
                ORDER BY d.id \(options.descending ? "DESC" : "ASC") LIMIT ? OFFSET ?
                """
            arguments.append(options.limit ?? -1)
            arguments.append(options.skip)
            var rows: [JSON] = []
            let cursor = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
            while let row = try cursor.next() {
                let id: String = row[0]
                let rev: String = row[1]
                var out: JSONObject = ["id": .string(id), "key": .string(id), "value": ["rev": .string(rev)]]
                if options.includeDocs, let data = row[4] as Data?, let body = try JSON.parse(data).objectValue {
                    out["doc"] = try StoredDocument.assembleWinnerRow(db, id: id, row: row, body: body, deleted: false, options: options.read)
                }
                rows.append(.object(out))
            }
            return (total, offset, rows)
        }
    }
}
