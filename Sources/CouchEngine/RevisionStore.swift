import CouchJSON
import Crypto
import Foundation
import GRDB
import GRDBSQLite

/// The stored state of one document id.
struct DocRow {
    var seq: Int
    var tree: RevisionTree
    var winnerDeleted: Bool

    static func fetch(_ db: GRDB.Database, id: String) throws -> DocRow? {
        // No stored id holds a NUL (`DocumentInput.validate`); SQLite's text would end at it
        // and find another document's row.
        guard !DocumentInput.holdsNUL(id) else { return nil }
        return try db.cachedStatement(sql: "SELECT seq, deleted, tree, winner FROM docs WHERE id = ?").first(.text(id))
        { row in
            let deleted = sqlite3_column_int64(row, 1) != 0
            return DocRow(
                seq: Int(sqlite3_column_int64(row, 0)),
                tree: try RevisionTree(
                    stored: GRDB.Statement.text(row, 2), winner: GRDB.Statement.text(row, 3), deleted: deleted),
                winnerDeleted: deleted)
        }
    }

    /// The stored state of many ids (those absent left out), in one query per 500 ids rather
    /// than one per id: for `_revs_diff`, `_bulk_get` and a batch's writes, where the per-id
    /// queries' set-up in the SQLite wrapper was a fifth of the request. Keyed by `ExactID`:
    /// by `String`, `é` and `e\u{301}` were one key, and one's row was answered for the other.
    static func fetchAll(_ db: GRDB.Database, ids: some Sequence<String>) throws -> [ExactID: DocRow] {
        try fetchAll(db, keys: ids.map { ExactID($0) })
    }

    /// The same, for ids already keyed.
    static func fetchAll(_ db: GRDB.Database, keys: some Sequence<ExactID>) throws -> [ExactID: DocRow] {
        let unique = Array(Set(keys.filter { !DocumentInput.holdsNUL($0.id) }))
        var rows: [ExactID: DocRow] = [:]
        rows.reserveCapacity(unique.count)
        let chunkSize = 500
        for start in stride(from: 0, to: unique.count, by: chunkSize) {
            let chunk = unique[start..<min(start + chunkSize, unique.count)]
            let sql =
                "SELECT id, seq, deleted, tree, winner FROM docs WHERE id IN (\(repeatElement("?", count: chunk.count).joined(separator: ",")))"
            // Full chunks share one cached statement; the last, of any size, is made once.
            let statement = chunk.count == chunkSize ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
            let cursor = try Row.fetchCursor(statement, arguments: StatementArguments(chunk.map { $0.id }))
            while let row = try cursor.next() {
                let deleted = (row[2] as Int) != 0
                rows[ExactID(row[0])] = DocRow(
                    seq: row[1], tree: try RevisionTree(stored: row[3], winner: row[4], deleted: deleted),
                    winnerDeleted: deleted)
            }
        }
        return rows
    }
}

/// The stored rows of a batch's ids, read before the batch is written (`DocRow.fetchAll`) rather
/// than one by one. An id that occurs more than once in the batch (as an `ExactID`) is not
/// read then: each of its writes reads the row its previous one left.
struct BatchRows {
    private let rows: [ExactID: DocRow]
    private let read: Set<ExactID>

    init(_ db: GRDB.Database, ids: [String]) throws {
        var occurrences: [ExactID: Int] = [:]
        for id in ids { occurrences[ExactID(id), default: 0] += 1 }
        let once = occurrences.compactMap { $0.value == 1 ? $0.key : nil }
        rows = try DocRow.fetchAll(db, keys: once)
        read = Set(once)
    }

    /// The stored row of `id`: from the batch's read when it was read, otherwise from the file.
    func row(_ db: GRDB.Database, id: String) throws -> DocRow? {
        let key = ExactID(id)
        return read.contains(key) ? rows[key] : try DocRow.fetch(db, id: id)
    }
}

/// Revisions in storage, inside the write queue's transaction: a write applied to its document's
/// revision tree (as CouchDB checks an edit or merges a replicated revision), the tree stemmed,
/// the document's row and counts, and each revision's body in `revs`.
enum RevisionStore {
    /// 413 `document_too_large` (the id as reason, as CouchDB answers) for a body over `maxSize`.
    static func checkSize(_ body: [UInt8], id: String, maxSize: Int) throws {
        guard body.count <= maxSize else { throw CouchError(status: 413, error: "document_too_large", reason: id) }
    }

    /// Stores one write inside the write queue's transaction: the revision added to the
    /// document's tree (checked as CouchDB checks it), its body and attachments, the tree
    /// stemmed to `revsLimit`, the document's row and counts, and the change for the recent
    /// changes record. Returns the new (or already known) revision.
    static func apply(
        _ input: DocumentInput, newEdits: Bool, revsLimit: Int, maxSize: Int = .max, db: GRDB.Database,
        context: WriteQueue.Context,
        batch: BatchRows? = nil
    ) throws -> Revision {
        guard let id = input.id else { throw CouchError.badRequest("Document id is missing") }
        try DocumentInput.validate(id: id)
        if id.hasPrefix("_design/"), !input.deleted { try DesignDocumentRules.validate(input.body) }
        let existing: DocRow?
        if let batch { existing = try batch.row(db, id: id) } else { existing = try DocRow.fetch(db, id: id) }
        var tree = existing?.tree ?? RevisionTree()
        let edit =
            newEdits
            ? try storeEdit(input, id: id, existing: existing, tree: &tree, maxSize: maxSize, db: db)
            : try storeReplicated(input, id: id, tree: &tree, maxSize: maxSize, db: db)
        guard edit.stored else { return edit.rev }
        // The live bytes the document held (its winning revision's, before it may be stemmed).
        let oldWinner = existing.flatMap { $0.winnerDeleted ? nil : $0.tree.winner?.rev }
        let sizeBefore = try oldWinner.map { try storedSize(db, id: id, rev: $0) } ?? 0
        for removed in tree.stem(limit: revsLimit) {
            try deleteBody(db, id: id, rev: removed)
        }
        guard let winner = tree.winner else { throw CouchError.corrupt("revision tree") }
        context.seq += 1
        try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO docs(id, seq, winner, deleted, tree) VALUES (?, ?, ?, ?, ?)"
        )
        .run(
            .text(id), .integer(context.seq), .text(winner.rev.description), .integer(winner.deleted ? 1 : 0),
            .text(tree.stored))
        adjustCounts(context, before: existing.map { $0.winnerDeleted }, after: winner.deleted)
        let sizeAfter: Int
        if winner.deleted {
            sizeAfter = 0
        } else if winner.rev == oldWinner {
            sizeAfter = sizeBefore
        } else if winner.rev == edit.rev, edit.attachments?.meta.isEmpty ?? true {
            sizeAfter = edit.bodyBytes
        } else {
            sizeAfter = try storedSize(db, id: id, rev: winner.rev)
        }
        context.liveBytes += sizeAfter - sizeBefore
        if context.listsChanges {
            // The document as `include_docs` shows it (`assemble`), when the revision written
            // won and has no attachments (whose stubs need more than this write has at hand).
            var doc: [UInt8]?
            if winner.rev == edit.rev, edit.attachments?.meta.isEmpty ?? true {
                var shown = JSONObject()
                shown.members.reserveCapacity(input.body.count + 3)
                shown.members.append(("_id", .string(id)))
                shown.members.append(("_rev", .string(edit.rev.description)))
                shown.members.append(contentsOf: input.body.members)
                if winner.deleted { shown.members.append(("_deleted", true)) }
                doc = JSON.object(shown).bytes
            }
            context.changes.append(
                RecentChanges.Change(
                    seq: context.seq, id: id, leaves: tree.leaves.map(\.rev.description), deleted: winner.deleted,
                    doc: doc))
        }
        return edit.rev
    }

    /// One revision written into a document's tree, and whether anything was stored (not when
    /// the tree had it already).
    typealias StoredEdit = (
        rev: Revision, attachments: AttachmentStore.ResolvedAttachments?, stored: Bool, bodyBytes: Int
    )

    /// The bytes one revision keeps in the file: its stored body and its attachments' stored
    /// bodies (each digest once).
    static func storedSize(_ db: GRDB.Database, id: String, rev: Revision) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT length(body) + coalesce((SELECT sum(length(a.data)) FROM att_refs r JOIN attachments a ON a.digest = r.digest
                    WHERE r.doc_id = ?1 AND r.rev = ?2), 0) FROM revs WHERE doc_id = ?1 AND rev = ?2
                    """), arguments: [id, rev.description]) ?? 0
    }

    /// The bytes the live documents of ids from `low` to below `high` (all, without bounds) keep:
    /// `storedSize` of each winning revision not deleted. A scan; the database keeps its total
    /// (`liveBytes`) as it writes.
    static func liveSize(_ db: GRDB.Database, low: String? = nil, high: String? = nil) throws -> Int {
        let range = low == nil ? "" : " AND d.id >= ? AND d.id < ?"
        let arguments: StatementArguments = low.map { [$0, high ?? ""] } ?? []
        let bodies =
            try Int.fetchOne(
                db,
                sql: """
                    SELECT coalesce(sum(length(r.body)), 0) FROM docs d JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner WHERE d.deleted = 0\(range)
                    """, arguments: arguments) ?? 0
        guard try db.tableExists("att_refs") else { return bodies }
        let attachments =
            try Int.fetchOne(
                db,
                sql: """
                    SELECT coalesce(sum(length(a.data)), 0) FROM docs d JOIN att_refs ar ON ar.doc_id = d.id AND ar.rev = d.winner
                    JOIN attachments a ON a.digest = ar.digest WHERE d.deleted = 0\(range)
                    """, arguments: arguments) ?? 0
        return bodies + attachments
    }

    /// The database's running total of live bytes; counted once (and kept from then on) in a
    /// database written before it was kept.
    static func liveBytes(_ db: GRDB.Database) throws -> Int {
        if let kept = try DatabaseFile.meta(db, "live_bytes").flatMap(Int.init) { return kept }
        return try liveSize(db)
    }

    /// A client's edit (`new_edits=true`): the revision edited must be a leaf (a live
    /// document's deleted branch is a conflict; no revision recreates a deleted document), the
    /// new revision id is CouchDB's hash of the edit, and its body is stored.
    static func storeEdit(
        _ input: DocumentInput, id: String, existing: DocRow?, tree: inout RevisionTree, maxSize: Int, db: GRDB.Database
    ) throws -> StoredEdit {
        var parent: Revision?
        if let rev = input.rev {
            guard tree.isLeaf(rev) else { throw CouchError.conflict }
            if let node = tree.node(rev), node.deleted, !input.deleted, existing?.winnerDeleted == false {
                // Editing a deleted branch of a live document is a conflict, as in CouchDB.
                throw CouchError.conflict
            }
            parent = rev
        } else if let winner = tree.winner {
            guard winner.deleted else { throw CouchError.conflict }
            parent = winner.rev  // recreate on top of the tombstone
        }
        let previous = try parent.flatMap { try AttachmentStore.storedAttachments(db, id: id, rev: $0) }
        let attachments = try AttachmentStore.resolveAttachments(
            input, id: id, newPos: (parent?.pos ?? 0) + 1, previous: previous, db: db)
        let body = bodyForStorage(input.body, attachments: attachments?.meta)
        try checkSize(body, id: id, maxSize: maxSize)
        let newRev = Revision(
            pos: (parent?.pos ?? 0) + 1,
            hash: CouchRevisionID.hash(
                deleted: input.deleted, parent: parent, body: input.body, attachments: attachments?.meta))
        let path = [newRev] + (parent.map { tree.path(to: $0) } ?? [])
        guard !tree.contains(newRev) else { return (newRev, attachments, false, body.count) }
        tree.merge(path: path, deleted: input.deleted)
        // Everything is checked; from here on only storage errors can happen.
        try storeBody(db, id: id, rev: newRev, body: body, attachments: attachments)
        return (newRev, attachments, true, body.count)
    }

    /// A replicated revision (`new_edits=false`): merged into the tree with its history as
    /// given, its attachment stubs resolved against the nearest ancestor this side has.
    static func storeReplicated(
        _ input: DocumentInput, id: String, tree: inout RevisionTree, maxSize: Int, db: GRDB.Database
    ) throws -> StoredEdit {
        guard let rev = input.rev else {
            throw CouchError.badRequest("Replicated documents (new_edits=false) need a _rev")
        }
        let path = input.revisions ?? [rev]
        if tree.contains(rev) { return (rev, nil, false, 0) }
        // Stubs refer to attachments of an ancestor on this path that we already have.
        var previous: JSONObject?
        for ancestor in path.dropFirst() where tree.contains(ancestor) {
            if let found = try AttachmentStore.storedAttachments(db, id: id, rev: ancestor) {
                previous = found
                break
            }
        }
        let attachments = try AttachmentStore.resolveAttachments(
            input, id: id, newPos: rev.pos, replicated: true, previous: previous, db: db)
        let body = bodyForStorage(input.body, attachments: attachments?.meta)
        try checkSize(body, id: id, maxSize: maxSize)
        tree.merge(path: path, deleted: input.deleted)
        try storeBody(db, id: id, rev: rev, body: body, attachments: attachments)
        return (rev, attachments, true, body.count)
    }

    static func adjustCounts(_ context: WriteQueue.Context, before: Bool?, after: Bool?) {
        switch before {
        case .some(true): context.delCount -= 1
        case .some(false): context.docCount -= 1
        case .none: break
        }
        switch after {
        case .some(true): context.delCount += 1
        case .some(false): context.docCount += 1
        case .none: break
        }
    }

    /// The stored body of a revision: the document's members with attachment metadata
    /// (`content_type`, `digest`, `length`, `revpos`) under `_attachments`.
    static func bodyForStorage(_ body: JSONObject, attachments: JSONObject?) -> [UInt8] {
        var stored = body
        if let attachments, !attachments.isEmpty {
            stored.members.append(("_attachments", .object(attachments)))
        }
        return JSON.object(stored).bytes
    }

    static func storeBody(
        _ db: GRDB.Database, id: String, rev: Revision, body: [UInt8], attachments: AttachmentStore.ResolvedAttachments?
    ) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO revs(doc_id, rev, body) VALUES (?, ?, ?)")
            .run(.text(id), .text(rev.description), .blob(body))
        guard let attachments else { return }
        for (digest, data) in attachments.newBodies {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO attachments(digest, data) VALUES (?, ?)")
                .execute(arguments: [digest, data])
        }
        for (_, meta) in attachments.meta.members {
            if let digest = meta["digest"]?.stringValue {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO att_refs(doc_id, rev, digest) VALUES (?, ?, ?)")
                    .execute(arguments: [id, rev.description, digest])
            }
        }
    }

    static func deleteBody(_ db: GRDB.Database, id: String, rev: Revision) throws {
        try db.cachedStatement(sql: "DELETE FROM revs WHERE doc_id = ? AND rev = ?").execute(arguments: [
            id, rev.description,
        ])
        try db.cachedStatement(sql: "DELETE FROM att_refs WHERE doc_id = ? AND rev = ?").execute(arguments: [
            id, rev.description,
        ])
    }

    static func storedBody(_ db: GRDB.Database, id: String, rev: Revision) throws -> JSONObject? {
        guard let data = try storedBodyBytes(db, id: id, rev: rev) else { return nil }
        return try JSON.parse(data).objectValue
    }

    /// A revision's stored body as written (JSON), if it is kept.
    static func storedBodyBytes(_ db: GRDB.Database, id: String, rev: Revision) throws -> Data? {
        try Data.fetchOne(
            db.cachedStatement(sql: "SELECT body FROM revs WHERE doc_id = ? AND rev = ?"),
            arguments: [id, rev.description])
    }
}
