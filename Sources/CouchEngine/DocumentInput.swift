public import CouchJSON

/// A document as a client sent it, split into CouchDB's special members and the body.
public struct DocumentInput: Sendable {
    public var id: String?
    /// `_rev`: the revision being edited (interactive) or the revision itself (replicated).
    public var rev: Revision?
    /// `_revisions`: the history path, newest first, for replicated writes.
    public var revisions: [Revision]?
    public var deleted: Bool
    /// The document's own members (no `_`-prefixed special members).
    public var body: JSONObject
    /// `_attachments` as sent: stubs, inline base64 `data`, or `follows` for multipart bodies.
    public var attachments: JSONObject?
    /// Attachment bodies that arrived as multipart parts, by attachment name.
    public var attachmentBodies: [String: [UInt8]] = [:]

    /// Members CouchDB accepts and ignores on write.
    static let ignoredSpecials: Set<String> = ["_conflicts", "_deleted_conflicts", "_local_seq", "_revs_info"]

    public init(id: String?, rev: Revision? = nil, deleted: Bool = false, body: JSONObject = JSONObject()) {
        self.id = id
        self.rev = rev
        self.deleted = deleted
        self.body = body
    }

    /// Splits a JSON document, rejecting what CouchDB rejects.
    public init(json: JSON) throws(CouchError) {
        guard case let .object(object) = json else {
            throw CouchError.badRequest("Document must be a JSON object")
        }
        var body = JSONObject()
        body.members.reserveCapacity(object.count)
        self.deleted = false
        for (key, value) in object.members {
            guard key.hasPrefix("_") else {
                body.members.append((key, value))
                continue
            }
            switch key {
            case "_id":
                guard case let .string(id) = value else {
                    throw CouchError(status: 400, error: "illegal_docid", reason: "Document id must be a string")
                }
                self.id = id
            case "_rev":
                guard case let .string(text) = value, let rev = Revision(text) else {
                    throw CouchError.badRequest("Invalid rev format")
                }
                self.rev = rev
            case "_deleted":
                guard case let .bool(flag) = value else {
                    throw CouchError.invalidDocument("_deleted must be a boolean")
                }
                self.deleted = flag
            case "_revisions":
                // Generations stay within what a revision id can carry (`Revision.largestPosition`),
                // so a later edit's `start + 1` fits too.
                guard let start = value["start"]?.intValue, start > 0, start <= Revision.largestPosition,
                    case let .array(ids)? = value["ids"], !ids.isEmpty, ids.count <= start
                else {
                    throw CouchError.badRequest(
                        "_revisions must be an object with a positive 'start' and a non-empty 'ids' array")
                }
                var path: [Revision] = []
                for (offset, id) in ids.enumerated() {
                    guard case let .string(hash) = id, !hash.isEmpty else {
                        throw CouchError.badRequest("Invalid _revisions ids")
                    }
                    path.append(Revision(pos: start - offset, hash: hash))
                }
                self.revisions = path
            case "_attachments":
                guard case let .object(atts) = value else {
                    throw CouchError.badRequest("_attachments must be an object")
                }
                for (_, att) in atts.members {
                    guard case .object = att else {
                        throw CouchError.badRequest("Each attachment must be a JSON object")
                    }
                }
                self.attachments = atts
            default:
                if DocumentInput.ignoredSpecials.contains(key) { continue }
                throw CouchError.invalidDocument("Bad special document member: \(key)")
            }
        }
        self.body = body
        if let revisions, let rev, revisions.first != rev {
            throw CouchError.badRequest("_rev does not match the newest entry of _revisions")
        }
    }

    /// Checks a document id as CouchDB does: a non-empty string; only `_design/` and `_local/`
    /// ids may start with an underscore.
    public static func validate(id: String) throws(CouchError) {
        guard !id.isEmpty else {
            throw CouchError(status: 400, error: "illegal_docid", reason: "Document id must not be empty")
        }
        // Ids are stored as SQLite text, which ends at a NUL: "a\u{0}b" would be stored as "a"
        // and replace it. CouchDB keeps such ids; this server refuses them (docs/compatibility.md).
        if holdsNUL(id) {
            throw CouchError(
                status: 400, error: "illegal_docid", reason: "Document id must not contain the NUL character (U+0000)")
        }
        if id.hasPrefix("_") {
            for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) && id.count > prefix.count { return }
            throw CouchError(
                status: 400, error: "illegal_docid", reason: "Only reserved document ids may start with underscore.")
        }
    }
}

extension DocumentInput {
    /// Whether `id` holds a NUL character, which no stored id does.
    public static func holdsNUL(_ id: String) -> Bool { id.utf8.contains(0) }
}

/// Options for reading one document revision, named after CouchDB's query parameters.
public struct ReadOptions: Sendable {
    public var revs = false
    public var revsInfo = false
    public var conflicts = false
    public var deletedConflicts = false
    public var localSeq = false
    /// Inline every attachment body (`attachments=true`).
    public var attachments = false
    /// Inline only attachments changed since these revisions (`atts_since`).
    public var attsSince: [Revision]? = nil
    /// Mark included attachments `"follows": true` instead of inlining base64, for multipart
    /// responses that send the bodies as parts of their own.
    public var attachmentsFollow = false
    /// Show `encoding` and `encoded_length` of compressed attachments (`att_encoding_info`);
    /// multipart answers always do, as their parts carry the stored (encoded) bytes.
    public var attEncodingInfo = false
    /// How many revisions `_revisions` lists at most: the database's `_revs_limit`, as CouchDB
    /// cuts a path it reads (set by the database's readers; a history kept from before a lower
    /// limit is not shown beyond it).
    var revisionsLimit = Int.max

    /// Whether a reader asks for the document alone (and perhaps `_revisions`): nothing that
    /// needs the revision tree beyond the revision's path, so a document without attachments
    /// is its stored body with `_id` and `_rev` (`StoredDocument.documentBytes`).
    var asksForDocumentOnly: Bool { !conflicts && !deletedConflicts && !localSeq && !revsInfo }

    public init() {}
}
