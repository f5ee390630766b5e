import CouchJSON

/// A `_local` document as a client sends it (replication checkpoints, device state).
///
/// CouchDB's replicator writes checkpoints with `"_rev": "0-N"` and
/// `"_revisions": {"start": 0, "ids": ["N"]}`; local documents keep no history, so
/// `_revisions` is accepted and ignored, and only `_id`, `_rev` and `_deleted` are special.
public struct LocalDocument: Sendable {
    public var rev: String?
    public var body: JSONObject
    public var deleted: Bool

    public init(rev: String? = nil, body: JSONObject = JSONObject(), deleted: Bool = false) {
        self.rev = rev
        self.body = body
        self.deleted = deleted
    }

    /// Reads a local document's JSON; throws `bad_request` for anything but an object, a
    /// non-string `_rev`, or another special (`_`) member, as CouchDB does.
    public init(json: JSON) throws {
        guard case let .object(object) = json else { throw CouchError.badRequest("Document must be a JSON object") }
        var body = JSONObject()
        var rev: String?
        var deleted = false
        for (key, value) in object.members {
            switch key {
            case "_id", "_revisions":
                continue
            case "_rev":
                guard case let .string(text) = value else { throw CouchError.badRequest("Invalid rev format") }
                rev = text
            case "_deleted":
                deleted = value == .bool(true)
            default:
                if key.hasPrefix("_") {
                    throw CouchError(status: 400, error: "doc_validation", reason: "Bad special document member: \(key)")
                }
                body.members.append((key, value))
            }
        }
        self.init(rev: rev, body: body, deleted: deleted)
    }

    /// The generation `N` of a local revision `0-N` (0 without one); `bad_request` otherwise.
    static func generation(of rev: String?) throws -> Int {
        guard let rev else { return 0 }
        guard rev.hasPrefix("0-"), let number = Int(rev.dropFirst(2)), number >= 0 else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return number
    }
}
