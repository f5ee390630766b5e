import CouchEngine
import CouchJSON
import HTTPTypes

/// What a request wants to do with a database, checked against its `_security` object.
enum Access {
    /// Read documents, changes, indexes.
    case read
    /// Write non-design documents.
    case write
    /// Write design documents, `_security`, `_revs_limit`; purge and compact.
    case admin
}

extension UserContext {
    /// Enforces `_security` as CouchDB 3 does: server admins may do anything; database admins
    /// (by name or role) may administer; members may read and write non-design documents; a
    /// database whose members list is empty is public. 401 for anonymous users, 403 otherwise.
    func authorize(_ access: Access, to db: DocumentDatabase) throws {
        let user = self
        if user.isServerAdmin { return }
        let security = db.security
        let isAdmin = user.isListed(in: security["admins"])
        let allowed: Bool
        switch access {
        case .admin:
            allowed = isAdmin
        case .read, .write:
            if UsersDatabase.isUsersDatabase(db.name) {
                allowed = isAdmin  // collection reads and writes of _users are for admins only
            } else {
                allowed = isAdmin || Self.isPublic(security) || user.isListed(in: security["members"])
            }
        }
        guard allowed else {
            if user.name == nil { throw CouchError.unauthorized }
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
    }

    /// Whether this user may write documents to `db` at all, one document or many (`PUT`,
    /// `DELETE`, `COPY`, `_bulk_docs` alike); each document's own rules come after (a design
    /// document needs a database admin, a `_users` document must be the writer's own).
    func authorizeDocumentWrite(to db: DocumentDatabase) throws {
        if UsersDatabase.isUsersDatabase(db.name) {
            try authorizeUserDocument(in: db)
        } else {
            try authorize(.write, to: db)
        }
    }

    /// CouchDB 3: `_users` is for admins unless its `_security` names members; even then it is
    /// never public, and a member reaches only their own document (checked by the caller).
    func authorizeUserDocument(in db: DocumentDatabase) throws {
        let user = self
        if user.isServerAdmin { return }
        let security = db.security
        guard user.isListed(in: security["admins"]) || user.isListed(in: security["members"]) else {
            if user.name == nil { throw CouchError.unauthorized }
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
    }

    /// Whether a `_security` group (`admins` or `members`) names this user or one of their roles.
    func isListed(in group: JSON?) -> Bool {
        let user = self
        let names = group?["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let roles = group?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if let name = user.name, names.contains(name) { return true }
        return user.roles.contains { roles.contains($0) }
    }

    /// Whether a `_security` object lets anyone read and write: its members list is empty.
    private static func isPublic(_ security: JSONObject) -> Bool {
        let members = security["members"]
        let names = members?["names"]?.arrayValue ?? []
        let roles = members?["roles"]?.arrayValue ?? []
        return names.isEmpty && roles.isEmpty
    }
}

extension APIRequest {
    /// 405 naming the allowed methods unless the request's is one of them (HEAD goes with GET).
    func requireMethod(_ allowed: HTTPRequest.Method...) throws {
        try requireMethod(allowed)
    }

    func requireMethod(_ allowed: [HTTPRequest.Method]) throws {
        guard allowed.contains(method) || (method == .head && allowed.contains(.get)) else {
            throw CouchError.methodNotAllowed(allowed.map(\.rawValue).joined(separator: ","))
        }
    }

    /// 401 unless the request comes from a server admin.
    func requireServerAdmin() throws {
        guard user.isServerAdmin else {
            if user.name == nil { throw CouchError.unauthorized }
            // CouchDB answers a signed-in user who is not an admin with 401, not 403.
            throw CouchError(status: 401, error: "unauthorized", reason: "You are not a server admin.")
        }
    }
}
