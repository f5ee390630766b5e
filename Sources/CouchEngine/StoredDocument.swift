package import CouchJSON
import Foundation
package import GRDB

/// Documents as readers get them, from inside a read transaction: a stored revision assembled with
/// the extras asked (`_revisions`, `_revs_info`, conflicts, attachments), the winner, or the
/// revisions `open_revs` names.
package enum StoredDocument {
    static func openRevisions(
        _ db: GRDB.Database, id: String, row: DocRow, revs: [Revision]?, latest: Bool, options: ReadOptions
    ) throws -> [OpenRevision] {
        try wantedRevisions(row: row, revs: revs, latest: latest).map { rev in
            if let doc = try StoredDocument.assemble(db, id: id, rev: rev, row: row, options: options) {
                return .ok(doc)
            }
            return .missing(rev)
        }
    }

    /// The revisions `open_revs` names: those asked (with `latest`, a non-leaf's leaves
    /// instead), or every leaf.
    static func wantedRevisions(row: DocRow, revs: [Revision]?, latest: Bool) -> [Revision] {
        guard let revs else { return row.tree.leaves.map(\.rev) }
        var list: [Revision] = []
        for rev in revs {
            if latest, row.tree.contains(rev), !row.tree.isLeaf(rev) {
                for leaf in row.tree.leaves where row.tree.path(to: leaf.rev).contains(rev) && !list.contains(leaf.rev)
                {
                    list.append(leaf.rev)
                }
            } else if !list.contains(rev) {
                list.append(rev)
            }
        }
        return list
    }

    /// `openRevisions` with each document already JSON, written from its stored bytes where
    /// `documentBytes` can (byte for byte what the assembled document serializes to).
    static func openRevisionsSerialized(
        _ db: GRDB.Database, id: String, row: DocRow, revs: [Revision]?, latest: Bool, options: ReadOptions
    ) throws -> [SerializedOpenRevision] {
        let quotedID = JSON.string(id).bytes
        return try wantedRevisions(row: row, revs: revs, latest: latest).map { rev in
            guard let node = row.tree.node(rev), let body = try RevisionStore.storedBodyBytes(db, id: id, rev: rev)
            else { return .missing(rev) }
            if !node.deleted {
                // Spelled out: JSON is nil-literal-expressible, so a bare `nil` here would be JSON.null.
                let path: JSON? = options.revs ? .some(revisions(row.tree, rev, limit: options.revisionsLimit)) : .none
                if let doc = documentBytes(
                    id: quotedID, rev: rev.description, body: body, revisions: path, options: options)
                {
                    return .ok(doc)
                }
            }
            // The body already read, parsed for `assemble` (attachments, a deletion, more asked).
            let stored = try JSON.parse(body).objectValue
            if let doc = try assemble(db, id: id, rev: rev, row: row, options: options, storedBody: stored) {
                return .ok(JSON.object(doc).bytes)
            }
            return .missing(rev)
        }
    }

    /// A document's winning revision as a reader gets it (nil: missing or deleted), for
    /// indexes that answer with documents.
    package static func winningDocument(
        _ db: GRDB.Database, id: String, options: ReadOptions = ReadOptions()
    ) throws -> JSONObject? {
        guard let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner, !winner.deleted else { return nil }
        return try assemble(db, id: id, rev: winner.rev, row: row, options: options)
    }

    /// A document as a view's `include_docs` links it: revision `rev` (nil: the winner); nil
    /// when it is missing, or its winner deleted.
    package static func document(
        _ db: GRDB.Database, id: String, rev: Revision?, options: ReadOptions
    ) throws -> JSONObject? {
        guard let rev else { return try winningDocument(db, id: id, options: options) }
        guard let row = try DocRow.fetch(db, id: id) else { return nil }
        return try assemble(db, id: id, rev: rev, row: row, options: options)
    }

    /// The winning revision from a scan of `docs` joined with `revs` (a row with `winner`,
    /// `tree`, `seq` and the revision's `body`); nil when its body is not a JSON object.
    package static func winningDocument(
        _ db: GRDB.Database, id: String, scanned row: Row, options: ReadOptions
    ) throws -> JSONObject? {
        guard let winner = row["winner"] as String?, let rev = Revision(winner), let data = row["body"] as Data?,
            let body = try JSON.parse(data).objectValue
        else { return nil }
        // A plain winner (no attachments, nothing but the document asked): `_id`, `_rev` and the
        // body, as `assemble` makes it, without decoding the revision tree it would not use.
        if options.asksForDocumentOnly, !options.revs, body["_attachments"] == nil {
            var doc = JSONObject()
            doc.members.reserveCapacity(body.count + 2)
            doc.members.append(("_id", .string(id)))
            doc.members.append(("_rev", .string(rev.description)))
            doc.members.append(contentsOf: body.members)
            return doc
        }
        let docRow = DocRow(
            seq: row["seq"], tree: try RevisionTree(stored: row["tree"], winner: winner, deleted: false),
            winnerDeleted: false)
        return try assemble(db, id: id, rev: rev, row: docRow, options: options, storedBody: body)
    }

    /// Builds the JSON of one stored revision with the requested extras; nil when the body of
    /// that revision is not stored (unknown, or compacted away).
    static func assemble(
        _ db: GRDB.Database, id: String, rev: Revision, row: DocRow, options: ReadOptions,
        storedBody: JSONObject? = nil
    ) throws -> JSONObject? {
        guard let node = row.tree.node(rev) else { return nil }
        guard let body = try storedBody ?? RevisionStore.storedBody(db, id: id, rev: rev) else { return nil }
        var doc = JSONObject()
        doc.members.reserveCapacity(body.count + 4)
        doc.members.append(("_id", .string(id)))
        doc.members.append(("_rev", .string(rev.description)))
        var attachmentsMeta: JSONObject?
        for member in body.members {
            if member.key == "_attachments" {
                attachmentsMeta = member.value.objectValue
            } else {
                doc.members.append(member)
            }
        }
        // CouchDB's order (`couch_doc:to_json_obj`): the body, `_deleted`, `_revisions`, the
        // meta members (`_revs_info`, `_conflicts`, `_deleted_conflicts`, `_local_seq`), then
        // `_attachments`.
        if node.deleted { doc.members.append(("_deleted", true)) }
        if options.revs { doc.members.append(("_revisions", revisions(row.tree, rev, limit: options.revisionsLimit))) }
        if options.revsInfo {
            var info: [JSON] = []
            for ancestor in row.tree.path(to: rev) {
                let status: String
                if row.tree.node(ancestor)?.deleted == true {
                    status = "deleted"
                } else if try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM revs WHERE doc_id = ? AND rev = ?", arguments: [id, ancestor.description])
                    == true
                {
                    status = "available"
                } else {
                    status = "missing"
                }
                info.append(["rev": .string(ancestor.description), "status": .string(status)])
            }
            doc.members.append(("_revs_info", .array(info)))
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
        if let attachmentsMeta, !attachmentsMeta.isEmpty {
            doc.members.append(
                (
                    "_attachments",
                    .object(
                        try AttachmentStore.renderAttachments(
                            db, meta: attachmentsMeta, options: options, path: row.tree.path(to: rev)))
                ))
        }
        return doc
    }

    /// A winning, not deleted revision's document as an answer writes it, from its stored body
    /// as it is: `{"_id":…,"_rev":…,` and the stored members, without parsing them. Nil when
    /// the document needs `assemble` (its body has attachments, or the options ask for
    /// conflicts, revisions, `_local_seq` or revision information), or the body is not an
    /// object as this server writes one. `quotedID` is the id already written as JSON.
    static func winnerBytes(id quotedID: [UInt8], rev: String, body: Data, options: ReadOptions) -> [UInt8]? {
        guard !options.revs else { return nil }
        return documentBytes(id: quotedID, rev: rev, body: body, revisions: nil, options: options)
    }

    /// A not deleted revision's document from its stored body as it is, as `assemble` would
    /// write it, with `_revisions` (the revision's path) appended when given; nil when it needs
    /// `assemble` (see `winnerBytes`).
    static func documentBytes(
        id quotedID: [UInt8], rev: String, body: Data, revisions: JSON?, options: ReadOptions
    ) -> [UInt8]? {
        guard options.asksForDocumentOnly else { return nil }
        return body.withUnsafeBytes { (stored: UnsafeRawBufferPointer) -> [UInt8]? in
            guard stored.count >= 2, stored.first == UInt8(ascii: "{"), stored.last == UInt8(ascii: "}"),
                !Self.mentionsAttachments(stored)
            else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(stored.count + quotedID.count + rev.utf8.count + 20)
            out += #"{"_id":"#.utf8
            out += quotedID
            out += #","_rev":"#.utf8
            JSON.string(rev).write(to: &out)
            if stored.count > 2 {
                out.append(UInt8(ascii: ","))
                out += stored[1..<(stored.count - 1)]  // the members, without the braces
            }
            if let revisions {
                out += #","_revisions":"#.utf8
                revisions.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
            return out
        }
    }

    /// `_revisions` of `rev`: its position and the hashes of its path, newest first (at most `limit`).
    static func revisions(_ tree: RevisionTree, _ rev: Revision, limit: Int = .max) -> JSON {
        ["start": .int(rev.pos), "ids": .array(tree.path(to: rev).prefix(limit).map { .string($0.hash) })]
    }

    /// `"_attachments"` as it appears in a stored body that has attachments (anywhere in the
    /// bytes: a false match only costs the slower path).
    private static let attachmentsKey = Array(#""_attachments""#.utf8)

    /// Whether the stored bytes contain `attachmentsKey`: each quote found with the C library's
    /// `memchr`, then compared with `memcmp` (the standard library's generic `firstRange(of:)`
    /// made a whole `_all_docs` read 6× slower; glibc's `memmem` is not visible to Swift).
    private static func mentionsAttachments(_ stored: UnsafeRawBufferPointer) -> Bool {
        guard let base = stored.baseAddress, stored.count >= attachmentsKey.count else { return false }
        return attachmentsKey.withUnsafeBytes { key in
            guard let keyBase = key.baseAddress else { return false }
            var offset = 0
            while offset <= stored.count - key.count {
                guard
                    let quote = memchr(base + offset, Int32(UInt8(ascii: "\"")), stored.count - key.count - offset + 1)
                else { return false }
                if memcmp(quote, keyBase, key.count) == 0 { return true }
                offset = base.distance(to: UnsafeRawPointer(quote)) + 1
            }
            return false
        }
    }

    /// Builds the winning document from a `docs` row (columns id, winner, seq, tree) and its body.
    static func assembleWinnerRow(
        _ db: GRDB.Database, id: String, row: Row, body: JSONObject, deleted: Bool, options: ReadOptions
    ) throws -> JSON {
        guard let rev = Revision(row[1] as String) else { return .null }
        let docRow = DocRow(
            seq: row[2], tree: try RevisionTree(stored: row[3], winner: row[1], deleted: deleted),
            winnerDeleted: deleted)
        return try assemble(db, id: id, rev: rev, row: docRow, options: options, storedBody: body).map(JSON.object)
            ?? .null
    }

    /// `_all_docs` with `keys`: a row per key in the order given (deleted documents with
    /// `deleted`, unknown ids as `not_found`).
    static func rows(_ db: GRDB.Database, keys: [JSON], _ options: AllDocsOptions) throws -> [JSON] {
        var rows: [JSON] = []
        let selected = options.descending ? keys.reversed() : keys
        for key in selected.dropFirst(options.skip).prefix(options.limit ?? Int.max) {
            guard case let .string(id) = key, let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner
            else {
                rows.append(["key": key, "error": "not_found"])
                continue
            }
            var value: JSONObject = ["rev": .string(winner.rev.description)]
            var out: JSONObject = ["id": .string(id), "key": .string(id)]
            if winner.deleted {
                value["deleted"] = true
                out["value"] = .object(value)
                if options.includeDocs { out["doc"] = .null }
            } else {
                out["value"] = .object(value)
                if options.includeDocs {
                    out["doc"] =
                        try StoredDocument.assemble(db, id: id, rev: winner.rev, row: row, options: options.read)
                        .map(JSON.object) ?? .null
                }
            }
            rows.append(.object(out))
        }
        return rows
    }
}
