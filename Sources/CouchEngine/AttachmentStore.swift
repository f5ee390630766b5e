import CouchJSON
import Crypto
import Foundation
import GRDB

/// Attachments in storage: bodies stored once by digest (`attachments`), the revisions that use
/// each (`att_refs`), and the checks of what a client sends (stubs, inline data, multipart bodies).
enum AttachmentStore {
    static func storedAttachments(_ db: GRDB.Database, id: String, rev: Revision) throws -> JSONObject? {
        guard let body = try RevisionStore.storedBody(db, id: id, rev: rev) else { return nil }
        return body["_attachments"]?.objectValue
    }

    /// Attachment metadata for a new revision, and the bodies it adds (not yet stored).
    struct ResolvedAttachments {
        var meta = JSONObject()
        var newBodies: [(digest: String, data: Data)] = []
    }

    /// Turns the `_attachments` a client sent into stored metadata and new bodies, checking
    /// every stub and encoding; writes nothing. An attachment sent with its data is the new
    /// revision's (`revpos` is `newPos`), except in a replicated write, which keeps the
    /// `revpos` it carries (0 when it has none), as CouchDB does.
    static func resolveAttachments(
        _ input: DocumentInput, id: String, newPos: Int, replicated: Bool = false, previous: JSONObject?,
        db: GRDB.Database
    ) throws -> ResolvedAttachments? {
        guard let sent = input.attachments else { return nil }
        var result = ResolvedAttachments()
        var resolved = JSONObject()
        for (name, value) in sent.members {
            guard case let .object(att) = value else { throw CouchError.badRequest("Invalid attachment \(name)") }
            if att["stub"] == .bool(true) {
                resolved.members.append(
                    (name, .object(try stubAttachment(name, att, id: id, previous: previous, newPos: newPos, db: db))))
                continue
            }
            let (bytes, sentEncoding) = try sentAttachment(name, att, input: input)
            let contentType = att["content_type"]?.stringValue ?? "application/octet-stream"
            // Stored as CouchDB stores it: gzip as sent, or compressed here when the type is compressible.
            let gzipped = sentEncoding == "gzip" || AttachmentEncoding.isCompressible(contentType)
            let stored = sentEncoding == "gzip" || !gzipped ? bytes : try AttachmentEncoding.gzip(bytes)
            let length =
                sentEncoding == "gzip"
                ? try AttachmentEncoding.gunzip(bytes, declaredLength: att["length"]).count
                : bytes.count
            let digest = attachmentDigest(stored)
            result.newBodies.append((digest, Data(stored)))
            let revpos = replicated ? (att["revpos"]?.intValue ?? 0) : newPos
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
    /// if given, must agree), or one that another revision of the same document `id` has
    /// under the digest given (an ancestor whose body compaction dropped); 412 otherwise. Never
    /// another document's: knowing a digest must not open someone else's attachment (in a
    /// shared database, another owner's).
    static func stubAttachment(
        _ name: String, _ att: JSONObject, id: String, previous: JSONObject?, newPos: Int, db: GRDB.Database
    ) throws -> JSONObject {
        // As CouchDB: a stub naming a revpos or digest must name the attachment's own.
        if let old = previous?[name]?.objectValue, att["digest"] == nil || att["digest"] == old["digest"],
            att["revpos"] == nil || att["revpos"] == old["revpos"]
        {
            return old
        }
        if let digest = att["digest"]?.stringValue,
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT 1 FROM att_refs WHERE doc_id = ? AND digest = ? LIMIT 1"),
                arguments: [id, digest]) == true
        {
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
    static func sentAttachment(
        _ name: String, _ att: JSONObject, input: DocumentInput
    ) throws -> (bytes: [UInt8], encoding: String) {
        if case let .string(base64)? = att["data"] {
            // Strict base64 (whitespace aside), as CouchDB decodes it: "notBase64Encoded=" is 400.
            let compact = base64.filter { !$0.isWhitespace }
            guard compact.count % 4 == 0, let data = Data(base64Encoded: compact) else {
                throw CouchError.badRequest("Invalid attachment data for \(name)")
            }
            return (Array(data), "identity")
        }
        guard att["follows"] == .bool(true) else {
            throw CouchError.badRequest("Attachment \(name) needs data, follows or stub")
        }
        guard let body = input.attachmentBodies[name] else {
            throw CouchError.badRequest("Attachment \(name) follows, but its body is missing")
        }
        var encoding = "identity"
        if let sent = att["encoding"] {
            guard let text = sent.stringValue, text == "gzip" || text == "identity" else {
                throw CouchError(
                    status: 415, error: "bad_content_type", reason: "Attachment \(name) has an unsupported encoding")
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
                let data =
                    try Data.fetchOne(db, sql: "SELECT data FROM attachments WHERE digest = ?", arguments: [digest])
                    ?? Data()
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
}
