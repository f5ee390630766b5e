import CouchJSON

/// A database many users share, each seeing only their own documents, as if the database
/// were theirs alone (what Cloudant Envoy did in front of Cloudant). A user whose roles name
/// an owner (`ownerRolePrefix` + owner name) and who is not a member or admin of the database
/// reaches it through `OwnerNamespace`: every document id they send is stored under their
/// prefix, every id they get back has it removed, and other owners' documents do not exist
/// for them. Members and admins (analysts, the server) see the stored ids.
public struct SharedDatabase: Sendable {
    public var name: String
    public var ownerRolePrefix: String

    public init(name: String, ownerRolePrefix: String) {
        self.name = name
        self.ownerRolePrefix = ownerRolePrefix
    }

    /// The namespace a user acts in: from the one role that starts with `ownerRolePrefix`;
    /// nil when they have none, several, or one that names no valid owner (a role an admin
    /// wrote by hand, `lt_owner_x:y`): such a user gets no owner access at all.
    public func namespace(roles: [String]) -> OwnerNamespace? {
        let owners = roles.filter { $0.hasPrefix(ownerRolePrefix) && $0.count > ownerRolePrefix.count }
        guard owners.count == 1 else { return nil }
        return OwnerNamespace(owner: String(owners[0].dropFirst(ownerRolePrefix.count)))
    }
}

/// How one owner's document ids are stored in a shared database: `owner:id`, and
/// `_local/owner:id` for local documents (replication checkpoints). The separator is the one
/// CouchDB's partitioned databases use; owner names never contain it, so an owner's ids can
/// neither collide with nor reach another owner's.
public struct OwnerNamespace: Sendable, Equatable {
    public let owner: String
    /// `owner:`; every stored id of the owner starts with it.
    public var prefix: String { owner + ":" }
    /// Just above every stored id of the owner in raw (`_all_docs`) order: `owner;`.
    public var upperBound: String { owner + ";" }

    /// nil when `owner` cannot name a namespace: empty, or holding `:` (its ids would reach
    /// into another owner's) or a NUL (which ends a name in some stores).
    public init?(owner: String) {
        guard !owner.isEmpty, !owner.utf8.contains(where: { $0 == UInt8(ascii: ":") || $0 == 0 }) else { return nil }
        self.owner = owner
    }

    /// The stored id of one of the owner's ids.
    public func stored(_ id: String) -> String {
        if id.hasPrefix("_local/") { return "_local/" + prefix + id.dropFirst(7) }
        return prefix + id
    }

    /// The owner of a stored (non-local) id: what comes before its first `:`; nil when it has none.
    public static func owner(ofStored storedID: String) -> String? {
        guard let colon = storedID.firstIndex(of: ":"), colon != storedID.startIndex else { return nil }
        return String(storedID[..<colon])
    }

    /// The id the owner knows a stored id by; nil when the stored id is not theirs.
    public func visible(_ storedID: String) -> String? {
        if storedID.hasPrefix("_local/") {
            let rest = storedID.dropFirst(7)
            return rest.hasPrefix(prefix) ? "_local/" + rest.dropFirst(prefix.count) : nil
        }
        return storedID.hasPrefix(prefix) ? String(storedID.dropFirst(prefix.count)) : nil
    }
}
