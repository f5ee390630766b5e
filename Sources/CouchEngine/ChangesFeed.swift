public import CouchJSON
import Foundation
import GRDB

/// Options of `_changes`.
public struct ChangesOptions: Sendable {
    public var since = 0
    public var limit: Int?
    public var descending = false
    /// `style=all_docs`: every leaf revision, not only the winner.
    public var allLeaves = false
    public var includeDocs = false
    public var read = ReadOptions()
    /// Keeps only rows this filter accepts (`_doc_ids`, `_selector`, `_design`).
    public var filter: ChangesFilter?
    public init() {}
}

/// Decides for a batch of documents which pass (a design document's filter function); a
/// deleted document is `{"_id", "_rev", "_deleted": true}`.
public typealias DocumentFilter = @Sendable ([JSONObject]) async throws -> [Bool]

/// A `_changes` filter: built in, or a function over documents (`filter=ddoc/name`, `_view`).
public enum ChangesFilter: Sendable {
    case docIDs(Set<ExactID>)
    case selector(Selector)
    case design
    case documents(DocumentFilter)
}

/// One page of a changes feed.
public struct ChangesPage: Sendable {
    public var rows: [JSON]
    /// The sequence to pass back as `since` to continue after this page.
    public var lastSeq: Int
    /// Rows left after this page (`pending`).
    public var pending: Int
}

/// The changes feed of one database (`db.changes(_:)`): pages of rows in sequence order after a
/// checkpoint, filtered by the engine (`_doc_ids`, `_selector`, `_design`) or by a filter
/// function run over pages of documents until enough rows passed.
public struct ChangesFeed: Sendable {
    public let database: DocumentDatabase

    /// Reads the feed after `options.since`, in sequence order (or reversed), filtered.
    public func read(_ options: ChangesOptions) async throws -> ChangesPage {
        guard case let .documents(filter)? = options.filter else { return try await unfilteredChanges(options) }
        // A filter function runs outside the read: pages of rows with their documents go
        // through it until enough rows passed or the feed is exhausted.
        let limit = options.limit ?? Int.max
        var rows: [JSON] = []
        var page = options
        page.filter = nil
        page.includeDocs = true
        page.read = options.includeDocs ? options.read : ReadOptions()
        while true {
            page.limit = min(1000, max(100, limit - rows.count))
            let batch = try await unfilteredChanges(page)
            let docs: [JSONObject] = batch.rows.map { row in
                if let doc = row["doc"]?.objectValue { return doc }
                var stub: JSONObject = ["_id": row["id"] ?? .null, "_rev": row["changes"]?[0]?["rev"] ?? .null]
                if row["deleted"] == true { stub["_deleted"] = true }
                return stub
            }
            let verdicts = docs.isEmpty ? [] : try await filter(docs)
            guard verdicts.count == docs.count else { throw CouchError.corrupt("filter answer") }
            var lastSeq = batch.lastSeq
            for (row, passes) in zip(batch.rows, verdicts) where passes {
                guard rows.count < limit else { break }
                var out = row.objectValue ?? JSONObject()
                if !options.includeDocs { out.removeValue(forKey: "doc") }
                rows.append(.object(out))
                if rows.count == limit, let seq = row["seq"] { lastSeq = try database.parseSequence(seq) }
            }
            if rows.count >= limit || batch.rows.count < (page.limit ?? 0) {
                var rest = ChangesOptions()
                rest.since = lastSeq
                rest.limit = 0
                let pending =
                    rows.count >= limit && !options.descending
                    ? try await unfilteredChanges(rest).pending : batch.pending
                return ChangesPage(rows: rows, lastSeq: lastSeq, pending: pending)
            }
            page.since = batch.lastSeq
        }
    }

    /// The feed as the HTTP answer writes it, for what the engine filters without reading
    /// bodies (no filter, `_doc_ids`, `_design`): each row already JSON, its document written
    /// from the stored body's bytes (`StoredDocument.winnerBytes`) when that is all that is
    /// asked. Byte for byte the rows of `read`; nil for the other filters, which `read` answers.
    public func readSerialized(_ options: ChangesOptions) async throws -> (rows: [[UInt8]], lastSeq: Int, pending: Int)?
    {
        switch options.filter {
        case nil, .docIDs?, .design?: break
        case .selector?, .documents?: return nil
        }
        return try await scan(options) { db, row, id, seq, bodyData, _, deleted in
            var out = Array(#"{"seq":"#.utf8)
            JSON.string(database.sequenceString(seq)).write(to: &out)
            out += #","id":"#.utf8
            let quotedID = JSON.string(id).bytes
            out += quotedID
            out += #","changes":"#.utf8
            if options.allLeaves {
                try JSON.array(changes(row, options)).write(to: &out)
            } else {
                out += #"[{"rev":"#.utf8
                JSON.string(row[1] as String).write(to: &out)
                out += "}]".utf8
            }
            if deleted { out += #","deleted":true"#.utf8 }
            if options.includeDocs {
                out += #","doc":"#.utf8
                if let bodyData, !deleted,
                    let doc = StoredDocument.winnerBytes(
                        id: quotedID, rev: row[1], body: bodyData, options: options.read)
                {
                    out += doc
                } else if let bodyData, let body = try JSON.parse(bodyData).objectValue {
                    try StoredDocument.assembleWinnerRow(
                        db, id: id, row: row, body: body, deleted: deleted, options: options.read
                    ).write(to: &out)
                } else {
                    out += "null".utf8
                }
            }
            out += "}".utf8
            return out
        }
    }

    private func unfilteredChanges(_ options: ChangesOptions) async throws -> ChangesPage {
        let (rows, lastSeq, pending) = try await scan(options) { db, row, id, seq, data, parsed, deleted in
            try changeRow(db, row, id: id, seq: seq, body: data, parsed: parsed, deleted: deleted, options)
        }
        return ChangesPage(rows: rows, lastSeq: lastSeq, pending: pending)
    }

    /// The rows after `options.since` that pass the engine's filters, each made by `makeRow`
    /// from the `docs` row (id, winner, seq, tree, body, deleted), the id, the sequence, the
    /// stored body's bytes, the body parsed (when a selector needed it) and whether deleted.
    private func scan<Output: Sendable>(
        _ options: ChangesOptions,
        makeRow: @escaping @Sendable (GRDB.Database, Row, String, Int, Data?, JSONObject?, Bool) throws -> Output
    ) async throws -> (rows: [Output], lastSeq: Int, pending: Int) {
        try await database.reading { db in
            let updateSeq = try DatabaseFile.metaInt(db, "update_seq")
            var rows: [Output] = []
            var lastSeq = options.descending ? 0 : options.since
            let limit = options.limit ?? Int.max
            let idPrefix: String? = {
                if case let .selector(selector)? = options.filter { return selector.idPrefix }
                return nil
            }()
            // Ids outside the selector's `_id` prefix are passed over before their body is
            // parsed and looked at (a shared database's owner's conditions never run on other
            // owners' documents).
            let idRange: (low: String, high: String)? = {
                if case let .selector(selector)? = options.filter, idPrefix == nil { return selector.idPrefixRange }
                return nil
            }()
            let needsBody =
                options.includeDocs
                || {
                    if case .selector = options.filter { return idPrefix == nil }
                    return false
                }()
            var cursorSeq = options.descending ? (options.since > 0 ? options.since : Int.max) : options.since
            var exhausted = false
            let batch = 1000
            while rows.count < limit, !exhausted {
                let sql = """
                    SELECT d.id, d.winner, d.seq, d.tree\(needsBody ? ", r.body" : ", NULL"), d.deleted FROM docs d
                    \(needsBody ? "LEFT JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner" : "")
                    WHERE d.seq \(options.descending ? "<" : ">") ? ORDER BY d.seq \(options.descending ? "DESC" : "ASC") LIMIT ?
                    """
                let cursor = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: [cursorSeq, batch])
                var fetched = 0
                while let row = try cursor.next() {
                    fetched += 1
                    let id: String = row[0]
                    let seq: Int = row[2]
                    cursorSeq = seq
                    let deleted = (row[5] as Int) != 0
                    if let idRange,
                        !(id.utf8.lexicographicallyPrecedes(idRange.low.utf8) == false
                            && id.utf8.lexicographicallyPrecedes(idRange.high.utf8))
                    {
                        continue
                    }
                    let data = needsBody ? row[4] as Data? : nil
                    // Parsed when a selector looks into it; for the rows' documents, `makeRow` decides.
                    var body: JSONObject?
                    if let data, case .selector = options.filter, idPrefix == nil {
                        body = try JSON.parse(data).objectValue
                    }
                    guard
                        ChangesFeed.passes(
                            options.filter, id: id, winner: row[1], body: body, deleted: deleted, idPrefix: idPrefix)
                    else { continue }
                    rows.append(try makeRow(db, row, id, seq, data, body, deleted))
                    lastSeq = seq
                    if rows.count >= limit { break }
                }
                if fetched < batch { exhausted = true }
            }
            // A page that ran out of rows has seen everything up to the snapshot's update_seq.
            if !options.descending, rows.count < limit { lastSeq = max(options.since, updateSeq) }
            // Descending, what is left is every change below the last one sent.
            if options.descending {
                let below = rows.isEmpty ? (options.since > 0 ? options.since : Int.max) : lastSeq
                let left = try Int.fetchOne(db, sql: "SELECT count(*) FROM docs WHERE seq < ?", arguments: [below]) ?? 0
                return (rows, lastSeq, left)
            }
            let pending = try database.pendingCounts.pending(
                after: lastSeq,
                state: DocumentsState(updateSeq: updateSeq, purgeSeq: DatabaseFile.metaInt(db, "purge_seq")), db)
            return (rows, lastSeq, pending)
        }
    }

    /// Whether a change passes the engine's own filters (`_doc_ids`, `_design`, `_selector`;
    /// design-function filters are applied by `changes`). As CouchDB, a selector matches a
    /// deletion as its tombstone, `{_id, _rev, _deleted: true}`; one on `_id` alone
    /// (`idPrefix`) needs no body.
    static func passes(
        _ filter: ChangesFilter?, id: String, winner: String, body: JSONObject?, deleted: Bool, idPrefix: String?
    ) -> Bool {
        switch filter {
        case let .docIDs(ids)?: return ids.contains(ExactID(id))
        case .design?: return id.hasPrefix("_design/")
        case .documents?, nil: return true
        case let .selector(selector)?:
            if let idPrefix { return id.utf8.starts(with: idPrefix.utf8) }
            var doc = body ?? JSONObject()
            if deleted { doc["_deleted"] = true }
            doc.prepend("_rev", .string(winner))
            doc.prepend("_id", .string(id))
            return selector.matches(.object(doc))
        }
    }

    /// One row of the changes feed from a `docs` row (columns id, winner, seq, tree, body):
    /// the winning revision or every leaf (`style=all_docs`), and the document when asked
    /// (from the body already parsed for a selector, or the stored bytes).
    func changeRow(
        _ db: GRDB.Database, _ row: Row, id: String, seq: Int, body: Data?, parsed: JSONObject?, deleted: Bool,
        _ options: ChangesOptions
    ) throws -> JSON {
        var out: JSONObject = [
            "seq": .string(database.sequenceString(seq)), "id": .string(id),
            "changes": .array(try changes(row, options)),
        ]
        out.members.reserveCapacity(5)
        if deleted { out["deleted"] = true }
        if options.includeDocs {
            let doc = try parsed ?? body.flatMap { try JSON.parse($0).objectValue }
            out["doc"] =
                try doc.map {
                    try StoredDocument.assembleWinnerRow(
                        db, id: id, row: row, body: $0, deleted: deleted, options: options.read)
                } ?? .null
        }
        return .object(out)
    }

    /// A row's `changes`: the winning revision, or every leaf (`style=all_docs`).
    func changes(_ row: Row, _ options: ChangesOptions) throws -> [JSON] {
        guard options.allLeaves else { return [["rev": .string(row[1] as String)]] }
        return try RevisionTree(stored: row[3], winner: row[1], deleted: (row[5] as Int) != 0).leaves.map {
            ["rev": .string($0.rev.description)]
        }
    }
}

extension DocumentDatabase {
    /// Reads the changes feed after `options.since`, in sequence order (or reversed), filtered
    /// (`ChangesFeed`).
    public func changes(_ options: ChangesOptions) async throws -> ChangesPage {
        try await ChangesFeed(database: self).read(options)
    }

    /// The changes feed with its rows already JSON (`ChangesFeed.readSerialized`), or nil for a
    /// filter that needs the rows as values.
    public func changesSerialized(
        _ options: ChangesOptions
    ) async throws -> (rows: [[UInt8]], lastSeq: Int, pending: Int)? {
        try await ChangesFeed(database: self).readSerialized(options)
    }
}
