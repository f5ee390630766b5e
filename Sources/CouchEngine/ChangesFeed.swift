import CouchJSON
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
    case docIDs(Set<String>)
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
                let pending = rows.count >= limit && !options.descending ? try await unfilteredChanges(rest).pending : batch.pending
                return ChangesPage(rows: rows, lastSeq: lastSeq, pending: pending)
            }
            page.since = batch.lastSeq
        }
    }

    private func unfilteredChanges(_ options: ChangesOptions) async throws -> ChangesPage {
        try await database.reading { db in
            let updateSeq = try DatabaseFile.metaInt(db, "update_seq")
            var rows: [JSON] = []
            var lastSeq = options.descending ? 0 : options.since
            let limit = options.limit ?? Int.max
            let idPrefix: String? = {
                if case let .selector(selector)? = options.filter { return selector.idPrefix }
                return nil
            }()
            let needsBody = options.includeDocs || {
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
                    var body: JSONObject?
                    if needsBody, let data = row[4] as Data? { body = try JSON.parse(data).objectValue }
                    guard ChangesFeed.passes(options.filter, id: id, winner: row[1], body: body, deleted: deleted, idPrefix: idPrefix) else { continue }
                    rows.append(try changeRow(db, row, id: id, seq: seq, body: body, deleted: deleted, options))
                    lastSeq = seq
                    if rows.count >= limit { break }
                }
                if fetched < batch { exhausted = true }
            }
            // A page that ran out of rows has seen everything up to the snapshot's update_seq.
            if !options.descending, rows.count < limit { lastSeq = max(options.since, updateSeq) }
            let pending = options.descending ? 0 : (try Int.fetchOne(db, sql: "SELECT count(*) FROM docs WHERE seq > ?", arguments: [lastSeq]) ?? 0)
            return ChangesPage(rows: rows, lastSeq: lastSeq, pending: pending)
        }
    }

    /// Whether a change passes the engine's own filters (`_doc_ids`, `_design`, `_selector`;
    /// design-function filters are applied by `changes`). As CouchDB, a selector matches a
    /// deletion as its tombstone, `{_id, _rev, _deleted: true}`; one on `_id` alone
    /// (`idPrefix`) needs no body.
    static func passes(_ filter: ChangesFilter?, id: String, winner: String, body: JSONObject?, deleted: Bool, idPrefix: String?) -> Bool {
        switch filter {
        case let .docIDs(ids)?: return ids.contains(id)
        case .design?: return id.hasPrefix("_design/")
        case .documents?, nil: return true
        case let .selector(selector)?:
            if let idPrefix { return id.hasPrefix(idPrefix) }
            var doc = body ?? JSONObject()
            if deleted { doc["_deleted"] = true }
            doc.prepend("_rev", .string(winner))
            doc.prepend("_id", .string(id))
            return selector.matches(.object(doc))
        }
    }

    /// One row of the changes feed from a `docs` row (columns id, winner, seq, tree, body):
    /// the winning revision or every leaf (`style=all_docs`), and the document when asked.
    func changeRow(_ db: GRDB.Database, _ row: Row, id: String, seq: Int, body: JSONObject?, deleted: Bool, _ options: ChangesOptions) throws -> JSON {
        let changes: [JSON]
        if options.allLeaves {
            changes = try RevisionTree(encoded: row[3]).leaves.map { ["rev": .string($0.rev.description)] }
        } else {
            changes = [["rev": .string(row[1] as String)]]
        }
        var out: JSONObject = ["seq": .string(database.sequenceString(seq)), "id": .string(id), "changes": .array(changes)]
        out.members.reserveCapacity(5)
        if deleted { out["deleted"] = true }
        if options.includeDocs {
            out["doc"] = body == nil ? .null : try StoredDocument.assembleWinnerRow(
                db, id: id, row: row, body: body!, deleted: deleted, options: options.read)
        }
        return .object(out)
    }
}

extension DocumentDatabase {
    /// Reads the changes feed after `options.since`, in sequence order (or reversed), filtered
    /// (`ChangesFeed`).
    public func changes(_ options: ChangesOptions) async throws -> ChangesPage {
        try await ChangesFeed(database: self).read(options)
    }
}
