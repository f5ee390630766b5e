import CouchJSON
import Crypto
import Foundation
import GRDB

/// The stored state of one document id.
struct DocRow {
    var seq: Int
    var tree: RevisionTree
    var winnerDeleted: Bool

    static func fetch(_ db: GRDB.Database, id: String) throws -> DocRow? {
        let statement = try db.cachedStatement(sql: "SELECT seq, deleted, tree FROM docs WHERE id = ?")
        guard let row = try Row.fetchOne(statement, arguments: [id]) else {
            return nil
        }
        return DocRow(seq: row[0], tree: try RevisionTree(encoded: row[2]), winnerDeleted: (row[1] as Int) != 0)
    }
}

extension DocumentDatabase {
    /// Writes documents, each atomically, all in one transaction. With `newEdits` each document
    /// edits its `_rev` (or creates the document) and gets a new revision; without it, each
    /// document is a revision from elsewhere (replication), added to the tree as it is.
    /// The database's validator (design documents' `validate_doc_update`) sees each write
    /// first, as `user` (by default the server itself, a server admin); a rejected document
    /// is not written.
    /// Returns each document's new revision or its error, in input order.
    public func update(_ documents: [DocumentInput], newEdits: Bool, user: UserContext = .system) async throws -> [Result<Revision, CouchError>] {
        let rejected = try await rejectedWrites(documents, newEdits: newEdits, user: user)
        let accepted = rejected.isEmpty ? documents : documents.indices.filter { rejected[$0] == nil }.map { documents[$0] }
        let revsLimit = self.revsLimit
        let maxSize = maxDocumentSize
        let partitioned = isPartitioned
        let written = try await writer.write { db, context in
            var results: [Result<Revision, CouchError>] = []
            results.reserveCapacity(accepted.count)
            // `apply` validates a document completely before it writes anything, so a rejected
            // document leaves no trace without a savepoint of its own; a storage error aborts
            // the whole write.
            for document in accepted {
                do {
                    if let id = document.id {
                        if partitioned { try Partition.validate(documentID: id) }
                        if !partitioned, id.hasPrefix("_design/"), document.body["options"]?["partitioned"] == .bool(true) {
                            throw CouchError(status: 400, error: "invalid_design_doc", reason: "partitioned option cannot be true in a non-partitioned database.")
                        }
                    }
                    results.append(.success(try DocumentDatabase.apply(document, newEdits: newEdits, revsLimit: revsLimit, maxSize: maxSize, db: db, context: context)))
                } catch let error as CouchError where error.status < 500 {
                    results.append(.failure(error))
                }
            }
            return results
        }
        if documents.contains(where: { $0.id?.hasPrefix("_design/") == true }) { designDocumentsChanged() }
        guard !rejected.isEmpty else { return written }
        var next = written.makeIterator()
        return documents.indices.map { index in rejected[index].map { .failure($0) } ?? next.next()! }
    }

    /// Writes one document and returns its new revision, or throws its error.
    public func update(_ document: DocumentInput, newEdits: Bool = true, user: UserContext = .system) async throws -> Revision {
        try await update([document], newEdits: newEdits, user: user)[0].get()
    }

    /// 413 `document_too_large` (the id as reason, as CouchDB answers) for a body over `maxSize`.
    static func checkSize(_ body: [UInt8], id: String, maxSize: Int) throws {
        guard body.count <= maxSize else { throw CouchError(status: 413, error: "document_too_large", reason: id) }
    }

    /// Stores one write inside the write queue's transaction: the revision added to the
    /// document's tree (checked as CouchDB checks it), its body and attachments, the tree
    /// stemmed to `revsLimit`, the document's row and counts, and the change for the recent
    /// changes record. Returns the new (or already known) revision.
    static func apply(
        _ input: DocumentInput, newEdits: Bool, revsLimit: Int, maxSize: Int = .max, db: GRDB.Database, context: WriteQueue.Context
    ) throws -> Revision {
        guard let id = input.id else { throw CouchError.badRequest("Document id is missing") }
        try DocumentInput.validate(id: id)
        if id.hasPrefix("_design/"), !input.deleted { try DesignDocumentRules.validate(input.body) }
        let existing = try DocRow.fetch(db, id: id)
        var tree = existing?.tree ?? RevisionTree()
        let edit = newEdits
            ? try storeEdit(input, id: id, existing: existing, tree: &tree, maxSize: maxSize, db: db)
            : try storeReplicated(input, id: id, tree: &tree, maxSize: maxSize, db: db)
        guard edit.stored else { return edit.rev }
        for removed in tree.stem(limit: revsLimit) {
            try deleteBody(db, id: id, rev: removed)
        }
        guard let winner = tree.winner else { throw CouchError.corrupt("revision tree") }
        context.seq += 1
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO docs(id, seq, winner, deleted, tree) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [id, context.seq, winner.rev.description, winner.deleted ? 1 : 0, tree.encoded])
        adjustCounts(context, before: existing.map { $0.winnerDeleted }, after: winner.deleted)
        if context.listsChanges {
            // The document as `include_docs` shows it (`assemble`), when the revision written
            // won and has no attachments (whose stubs need more than this write has at hand).
            var doc: [UInt8]?
            if winner.rev == edit.rev, edit.attachments?.meta.isEmpty ?? true {
                var shown = JSONObject()
                shown.members.reserveCapacity(input.body.count + 3)
                shown.members.append(("_id", .string(id)))
                shown.members.append(("_rev", .string(edit.rev.description)))
                if winner.deleted { shown.members.append(("_deleted", true)) }
                shown.members.append(contentsOf: input.body.members)
                doc = JSON.object(shown).bytes
            }
            context.changes.append(RecentChanges.Change(
                seq: context.seq, id: id, leaves: tree.leaves.map(\.rev.description), deleted: winner.deleted, doc: doc))
        }
        return edit.rev
    }

    /// One revision written into a document's tree, and whether anything was stored (not when
    /// the tree had it already).
    typealias StoredEdit = (rev: Revision, attachments: ResolvedAttachments?, stored: Bool)

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
        let previous = try parent.flatMap { try storedAttachments(db, id: id, rev: $0) }
        let attachments = try resolveAttachments(input, newPos: (parent?.pos ?? 0) + 1, previous: previous, db: db)
        let body = bodyForStorage(input.body, attachments: attachments?.meta)
        try checkSize(body, id: id, maxSize: maxSize)
        let newRev = Revision(pos: (parent?.pos ?? 0) + 1, hash: CouchRevisionID.hash(
            deleted: input.deleted, parent: parent, body: input.body, attachments: attachments?.meta))
        let path = [newRev] + (parent.map { tree.path(to: $0) } ?? [])
        guard !tree.contains(newRev) else { return (newRev, attachments, false) }
        tree.merge(path: path, deleted: input.deleted)
        // Everything is checked; from here on only storage errors can happen.
        try storeBody(db, id: id, rev: newRev, body: body, attachments: attachments)
        return (newRev, attachments, true)
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
        if tree.contains(rev) { return (rev, nil, false) }
        // Stubs refer to attachments of an ancestor on this path that we already have.
        var previous: JSONObject?
        for ancestor in path.dropFirst() where tree.contains(ancestor) {
            if let found = try storedAttachments(db, id: id, rev: ancestor) {
                previous = found
                break
            }
        }
        let attachments = try resolveAttachments(input, newPos: rev.pos, previous: previous, db: db)
        let body = bodyForStorage(input.body, attachments: attachments?.meta)
        try checkSize(body, id: id, maxSize: maxSize)
        tree.merge(path: path, deleted: input.deleted)
        try storeBody(db, id: id, rev: rev, body: body, attachments: attachments)
        return (rev, attachments, true)
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

    static func storeBody(_ db: GRDB.Database, id: String, rev: Revision, body: [UInt8], attachments: ResolvedAttachments?) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO revs(doc_id, rev, body) VALUES (?, ?, ?)")
            .execute(arguments: [id, rev.description, Data(body)])
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
        try db.cachedStatement(sql: "DELETE FROM revs WHERE doc_id = ? AND rev = ?").execute(arguments: [id, rev.description])
        try db.cachedStatement(sql: "DELETE FROM att_refs WHERE doc_id = ? AND rev = ?").execute(arguments: [id, rev.description])
    }

    static func storedAttachments(_ db: GRDB.Database, id: String, rev: Revision) throws -> JSONObject? {
        guard let body = try storedBody(db, id: id, rev: rev) else { return nil }
        return body["_attachments"]?.objectValue
    }

    static func storedBody(_ db: GRDB.Database, id: String, rev: Revision) throws -> JSONObject? {
        guard let data = try Data.fetchOne(
            db.cachedStatement(sql: "SELECT body FROM revs WHERE doc_id = ? AND rev = ?"), arguments: [id, rev.description])
        else { return nil }
        return try JSON.parse(data).objectValue
    }

    /// Attachment metadata for a new revision, and the bodies it adds (not yet stored).
    struct ResolvedAttachments {
        var meta = JSONObject()
        var newBodies: [(digest: String, data: Data)] = []
    }

    /// Turns the `_attachments` a client sent into stored metadata and new bodies, checking
    /// every stub and encoding; writes nothing.
    static func resolveAttachments(
        _ input: DocumentInput, newPos: Int, previous: JSONObject?, db: GRDB.Database
    ) throws -> ResolvedAttachments? {
        guard let sent = input.attachments else { return nil }
        var result = ResolvedAttachments()
        var resolved = JSONObject()
        for (name, value) in sent.members {
            guard case let .object(att) = value else { throw CouchError.badRequest("Invalid attachment \(name)") }
            if att["stub"] == .bool(true) {
                resolved.members.append((name, .object(try stubAttachment(name, att, previous: previous, newPos: newPos, db: db))))
                continue
            }
            let (bytes, sentEncoding) = try sentAttachment(name, att, input: input)
            let contentType = att["content_type"]?.stringValue ?? "application/octet-stream"
            // Stored as CouchDB stores it: gzip as sent, or compressed here when the type is compressible.
            let gzipped = sentEncoding == "gzip" || AttachmentEncoding.isCompressible(contentType)
            let stored = sentEncoding == "gzip" || !gzipped ? bytes : try AttachmentEncoding.gzip(bytes)
            let length = sentEncoding == "gzip"
                ? try AttachmentEncoding.gunzip(bytes, declaredLength: att["length"]).count
                : bytes.count
            let digest = attachmentDigest(stored)
            result.newBodies.append((digest, Data(stored)))
            let revpos = input.revisions != nil ? (att["revpos"]?.intValue ?? newPos) : newPos
            var meta: JSONObject = [
                "content_type": .string(contentType),
                "revpos": .int(revpos),
                "digest": .string(digest),
                "length": .int(length),
            ]
            if gzipped {
                meta["encoding"] = "gzip"
                meta["encoded_length"] = .int(stored.count)
            }
            resolved.members.append((name, .object(meta)))
        }
        result.meta = resolved
        return result
    }

    /// A stub (`"stub": true`): the previous revision's attachment of that name (its digest,
    /// if given, must agree), or one stored under the digest given; 412 otherwise.
    static func stubAttachment(_ name: String, _ att: JSONObject, previous: JSONObject?, newPos: Int, db: GRDB.Database) throws -> JSONObject {
        if let old = previous?[name]?.objectValue, att["digest"] == nil || att["digest"] == old["digest"] {
            return old
        }
        if let digest = att["digest"]?.stringValue,
           try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM attachments WHERE digest = ?"), arguments: [digest]) == true {
            var meta = att
            meta.removeValue(forKey: "stub")
            if meta["revpos"] == nil { meta["revpos"] = .int(newPos) }
            return meta
        }
        throw CouchError.missingStub(name)
    }

    /// The bytes of a sent attachment and their encoding: inline base64 `data` (always plain
    /// bytes; CouchDB ignores `encoding` there too), or a body that `follows` in the multipart
    /// request (`gzip` or `identity`, its sent digest checked against the bytes).
    static func sentAttachment(_ name: String, _ att: JSONObject, input: DocumentInput) throws -> (bytes: [UInt8], encoding: String) {
        if case let .string(base64)? = att["data"] {
            guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
                throw CouchError.badRequest("Invalid attachment data for \(name)")
            }
            return (Array(data), "identity")
        }
        guard att["follows"] == .bool(true) else { throw CouchError.badRequest("Attachment \(name) needs data, follows or stub") }
        guard let body = input.attachmentBodies[name] else {
            throw CouchError.badRequest("Attachment \(name) follows, but its body is missing")
        }
        var encoding = "identity"
        if let sent = att["encoding"] {
            guard let text = sent.stringValue, text == "gzip" || text == "identity" else {
                throw CouchError(status: 415, error: "bad_content_type", reason: "Attachment \(name) has an unsupported encoding")
            }
            encoding = text
        }
        // A sent digest covers the bytes as sent; a mismatch means they were damaged.
        if let sent = att["digest"]?.stringValue, sent.hasPrefix("md5-"), sent != attachmentDigest(body) {
            throw CouchError(status: 400, error: "content_md5_mismatch", reason: "Possible message corruption.")
        }
        return (body, encoding)
    }

    /// `md5-<base64>` as CouchDB writes attachment digests.
    public static func attachmentDigest(_ bytes: [UInt8]) -> String {
        "md5-" + Data(Insecure.MD5.hash(data: bytes)).base64EncodedString()
    }
}
