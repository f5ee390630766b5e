import CouchEngine
import CouchJSON

/// What a request wants to do with a database, checked against its `_security` object.
enum Access {
    /// Read documents, changes, indexes.
    case read
    /// Write non-design documents.
    case write
    /// Write design documents, `_security`, `_revs_limit`; purge and compact.
    case admin
}

extension CouchAPI {
    /// Enforces `_security` as CouchDB 3 does: server admins may do anything; database admins
    /// (by name or role) may administer; members may read and write non-design documents; a
    /// database whose members list is empty is public. 401 for anonymous users, 403 otherwise.
    func authorize(_ db: DocumentDatabase, _ user: UserContext, _ access: Access) throws {
        if user.isServerAdmin { return }
        let security = db.security
        let isAdmin = Self.listed(user, in: security["admins"])
        let allowed: Bool
        switch access {
        case .admin:
            allowed = isAdmin
        case .read, .write:
            if db.name == "_users" {
                allowed = isAdmin  // collection reads and writes of _users are for admins only
            } else {
                allowed = isAdmin || Self.isPublic(security) || Self.listed(user, in: security["members"])
            }
        }
        guard allowed else {
            if user.name == nil { throw CouchError.unauthorized }
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
    }

    /// CouchDB 3: `_users` is for admins unless its `_security` names members; even then it is
    /// never public, and a member reaches only their own document (checked by the caller).
    func authorizeUserDocument(_ db: DocumentDatabase, _ user: UserContext) throws {
        if user.isServerAdmin { return }
        let security = db.security
        guard Self.listed(user, in: security["admins"]) || Self.listed(user, in: security["members"]) else {
            if user.name == nil { throw CouchError.unauthorized }
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
    }

    static func listed(_ user: UserContext, in group: JSON?) -> Bool {
        let names = group?["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let roles = group?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if let name = user.name, names.contains(name) { return true }
        return user.roles.contains { roles.contains($0) }
    }

    static func isPublic(_ security: JSONObject) -> Bool {
        let members = security["members"]
        let names = members?["names"]?.arrayValue ?? []
        let roles = members?["roles"]?.arrayValue ?? []
        return names.isEmpty && roles.isEmpty
    }
}
