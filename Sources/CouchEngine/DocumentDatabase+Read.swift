import CouchJSON
import Foundation
import GRDB

/// One result of an `open_revs` read: the revision's document, or a revision we do not have.
public enum OpenRevision: Sendable {
    case ok(JSONObject)
    case missing(Revision)
}

/// Revisions of one document to read: `revs` nil means every leaf.
public struct RevisionsRequest: Sendable {
    public var id: String
    public var revs: [Revision]?
    public var attsSince: [Revision]?
    public init(id: String, revs: [Revision]?, attsSince: [Revision]? = nil) {
        self.id = id
        self.revs = revs
        self.attsSince = attsSince
    }
}

extension DocumentDatabase {
    /// Reads a document: the winning revision, or `rev`. Throws 404 `missing`/`deleted`.
    public func document(id: String, rev: Revision? = nil, options: ReadOptions = ReadOptions()) async throws -> JSONObject {
        try await reading { db in
            guard let row = try DocRow.fetch(db, id: id) else { throw CouchError.missing }
            let target: Revision
            if let rev {
                guard row.tree.contains(rev) else { throw CouchError.missing }
                target = rev
            } else {
                guard let winner = row.tree.winner else { throw CouchError.missing }
                if winner.deleted { throw CouchError.deleted }
                target = winner.rev
            }
            guard let doc = try DocumentDatabase.assemble(db, id: id, rev: target, row: row, options: options) else {
                throw CouchError.missing
            }
            return doc
        }
    }

    /// Reads several revisions of a document (`open_revs`): `nil` means every leaf. With
    /// `latest`, a requested revision that has descendants is replaced by its leaves.
    public func openRevisions(
        id: String, revs: [Revision]?, latest: Bool, options: ReadOptions
    ) async throws -> [OpenRevision] {
        let result = try await openRevisions([RevisionsRequest(id: id, revs: revs, attsSince: options.attsSince)], latest: latest, options: options)[0]
        return try result.get()
    }

    /// `open_revs` for many documents in one read transaction (`_bulk_get`, replication).
    /// Each request may name its own `atts_since`; a document that does not exist gives
    /// `missing` for each named revision, or a 404 error when no revision was named.
    public func openRevisions(
        _ requests: [RevisionsRequest], latest: Bool, options: ReadOptions
    ) async throws -> [Result<[OpenRevision], CouchError>] {
        try await reading { db in
            try requests.map { request in
                var options = options
                if let since = request.attsSince { options.attsSince = since }
                guard let row = try DocRow.fetch(db, id: request.id) else {
                    if let revs = request.revs { return .success(revs.map { OpenRevision.missing($0) }) }
                    return .failure(CouchError.missing)
                }
                return .success(try DocumentDatabase.openRevisions(db, id: request.id, row: row, revs: request.revs, latest: latest, options: options))
            }
        }
    }

    static func openRevisions(
        _ db: GRDB.Database, id: String, row: DocRow, revs: [Revision]?, latest: Bool, options: ReadOptions
    ) throws -> [OpenRevision] {
        let wanted: [Revision]
        if let revs {
            var list: [Revision] = []
            for rev in revs {
                if latest, row.tree.contains(rev), !row.tree.isLeaf(rev) {
                    for leaf in row.tree.leaves where row.tree.path(to: leaf.rev).contains(rev) && !list.contains(leaf.rev) {
                        list.append(leaf.rev)
                    }
                } else if !list.contains(rev) {
                    list.append(rev)
                }
            }
            wanted = list
        } else {
            wanted = row.tree.leaves.map(\.rev)
        }
        return try wanted.map { rev in
            if let doc = try DocumentDatabase.assemble(db, id: id, rev: rev, row: row, options: options) {
                return .ok(doc)
            }
            return .missing(rev)
        }
    }

    /// A document's winning revision as a reader gets it (nil: missing or deleted), for
    /// indexes that answer with documents.
    package static func winningDocument(_ db: GRDB.Database, id: String, options: ReadOptions = ReadOptions()) throws -> JSONObject? {
        guard let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner, !winner.deleted else { return nil }
        return try assemble(db, id: id, rev: winner.rev, row: row, options: options)
    }

    /// The winning revision from a scan of `docs` joined with `revs` (a row with `winner`,
    /// `tree`, `seq` and the revision's `body`); nil when its body is not a JSON object.
    package static func winningDocument(_ db: GRDB.Database, id: String, scanned row: Row, options: ReadOptions) throws -> JSONObject? {
        guard let rev = Revision(row["winner"] as String), let data = row["body"] as Data?,
              let body = try JSON.parse(data).objectValue else { return nil }
        let docRow = DocRow(seq: row["seq"], tree: try RevisionTree(encoded: row["tree"]), winnerDeleted: false)
        return try assemble(db, id: id, rev: rev, row: docRow, options: options, storedBody: body)
    }

    /// Builds the JSON of one stored revision with the requested extras; nil when the body of
    /// that revision is not stored (unknown, or compacted away).
    static func assemble(
        _ db: GRDB.Database, id: String, rev: Revision, row: DocRow, options: ReadOptions,
        storedBody: JSONObject? = nil
    ) throws -> JSONObject? {
        guard let node = row.tree.node(rev) else { return nil }
        guard let body = try storedBody ?? DocumentDatabase.storedBody(db, id: id, rev: rev) else { return nil }
        var doc = JSONObject()
        doc.members.reserveCapacity(body.count + 4)
        doc.members.append(("_id", .string(id)))
        doc.members.append(("_rev", .string(rev.description)))
        if node.deleted { doc.members.append(("_deleted", true)) }
        var attachmentsMeta: JSONObject?
        for member in body.members {
            if member.key == "_attachments" {
                attachmentsMeta = member.value.objectValue
            } else {
                doc.members.append(member)
            }
        }
        if let attachmentsMeta, !attachmentsMeta.isEmpty {
            doc.members.append(("_attachments", .object(try renderAttachments(
                db, meta: attachmentsMeta, options: options, path: row.tree.path(to: rev)))))
        }
        if options.conflicts, rev == row.tree.winner?.rev {
            let conflicts = row.tree.leaves.dropFirst().filter { !$0.deleted }.map { JSON.string($0.rev.description) }
            if !conflicts.isEmpty { doc.members.append(("_conflicts", .array(conflicts))) }
        }
        if options.deletedConflicts, rev == row.tree.winner?.rev {
            let deleted = row.tree.leaves.dropFirst().filter(\.deleted).map { JSON.string($0.rev.description) }
            if !deleted.isEmpty { doc.members.append(("_deleted_conflicts", .array(deleted))) }
        }
        if options.localSeq { doc.members.append(("_local_seq", .int(row.seq))) }
        if options.revs {
            let path = row.tree.path(to: rev)
            doc.members.append(("_revisions", [
                "start": .int(rev.pos),
                "ids": .array(path.map { .string($0.hash) }),
            ]))
        }
        if options.revsInfo {
            var info: [JSON] = []
            for ancestor in row.tree.path(to: rev) {
                let status: String
                if row.tree.node(ancestor)?.deleted == true {
                    status = "deleted"
                } else if try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM revs WHERE doc_id = ? AND rev = ?", arguments: [id, ancestor.description]) == true {
                    status = "available"
                } else {
                    status = "missing"
                }
                info.append(["rev": .string(ancestor.description), "status": .string(status)])
            }
            doc.members.append(("_revs_info", .array(info)))
        }
        return doc
    }

    static func renderAttachments(
        _ db: GRDB.Database, meta: JSONObject, options: ReadOptions, path: [Revision]
    ) throws -> JSONObject {
        // With atts_since, bodies go out only for attachments newer than the newest revision
        // the client already has on this document's path.
        var knownPos: Int? = nil
        if let since = options.attsSince {
            knownPos = since.filter { path.contains($0) }.map(\.pos).max() ?? 0
        }
        var out = JSONObject()
        for (name, value) in meta.members {
            guard case let .object(stored) = value else { continue }
            let revpos = stored["revpos"]?.intValue ?? 0
            // With atts_since, only attachments newer than what the client has are included,
            // whether or not `attachments=true` was also given (CouchDB's replicator sends both).
            let inline = knownPos.map { revpos > $0 } ?? options.attachments
            let encoding = stored["encoding"]?.stringValue ?? "identity"
            // CouchDB's member order: content_type, revpos, digest, then the body's form.
            var att = JSONObject()
            for key in ["content_type", "revpos", "digest"] {
                if let value = stored[key] { att.members.append((key, value)) }
            }
            if inline, options.attachmentsFollow {
                att["length"] = stored["length"] ?? .int(0)
                att["follows"] = true
            } else if inline, let digest = stored["digest"]?.stringValue {
                let data = try Data.fetchOne(db, sql: "SELECT data FROM attachments WHERE digest = ?", arguments: [digest]) ?? Data()
                let plain = encoding == "gzip" ? Data(try AttachmentEncoding.gunzip(Array(data))) : data
                att["data"] = .string(plain.base64EncodedString())
            } else {
                att["length"] = stored["length"] ?? .int(0)
                att["stub"] = true
            }
            if options.attEncodingInfo || options.attachmentsFollow, encoding != "identity" {
                att["encoding"] = .string(encoding)
                att["encoded_length"] = stored["encoded_length"] ?? stored["length"] ?? .int(0)
            }
            out.members.append((name, .object(att)))
        }
        return out
    }

    /// An attachment's metadata and body, from the winning revision or `rev`: the body decoded,
    /// or, with `encoded`, as stored (gzip when the metadata says `"encoding": "gzip"`).
    public func attachment(docID: String, rev: Revision?, name: String, encoded: Bool = false) async throws -> (meta: JSONObject, data: [UInt8]) {
        try await reading { db in
            guard let row = try DocRow.fetch(db, id: docID), let winner = row.tree.winner else { throw CouchError.missing }
            let target = rev ?? winner.rev
            if rev == nil, winner.deleted { throw CouchError.deleted }
            guard let meta = try DocumentDatabase.storedAttachments(db, id: docID, rev: target)?[name]?.objectValue,
                  let digest = meta["digest"]?.stringValue,
                  let data = try Data.fetchOne(db, sql: "SELECT data FROM attachments WHERE digest = ?", arguments: [digest])
            else {
                throw CouchError(status: 404, error: "not_found", reason: "Document is missing attachment")
            }
            if !encoded, meta["encoding"]?.stringValue == "gzip" {
                return (meta, try AttachmentEncoding.gunzip(Array(data)))
            }
            return (meta, Array(data))
        }
    }

    /// The current winning revision of a document, if it exists (deleted or not).
    public func winningRevision(id: String) async throws -> (rev: Revision, deleted: Bool)? {
        try await reading { db in
            guard let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner else { return nil }
            return (winner.rev, winner.deleted)
        }
    }

    /// `_revs_diff`: for each document, the revisions this database lacks, and the leaves that
    /// could be their ancestors.
    public func revsDiff(_ request: [(id: String, revs: [Revision])]) async throws -> JSONObject {
        try await reading { db in
            var out = JSONObject()
            for (id, revs) in request {
                let row = try DocRow.fetch(db, id: id)
                let missing = row.map { $0.tree.missing(revs) } ?? revs
                guard !missing.isEmpty else { continue }
                var entry: JSONObject = ["missing": .array(missing.map { .string($0.description) })]
                if let tree = row?.tree {
                    var ancestors: [Revision] = []
                    for rev in missing {
                        for leaf in tree.possibleAncestors(of: rev) where !ancestors.contains(leaf) { ancestors.append(leaf) }
                    }
                    if !ancestors.isEmpty {
                        entry["possible_ancestors"] = .array(ancestors.map { .string($0.description) })
                    }
                }
                out.members.append((id, .object(entry)))
            }
            return out
        }
    }
}
