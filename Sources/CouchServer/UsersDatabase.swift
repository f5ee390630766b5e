public import CouchEngine
public import CouchJSON
import Logging

/// The authentication database's design document, `_users/_design/_auth`, as CouchDB keeps
/// one in every `_users` database (clients and CouchDB's own tools wait for it, and read its
/// rules). Its `validate_doc_update` states the rules for user documents; lt runs them in Swift
/// (`validate`, registered with `DesignDocumentValidator` by its source), so they hold with or
/// without a JavaScript engine. The request path applies the same rules before this one
/// (`DocumentEndpoints.prepareUserDocument`, which also hashes passwords).
public enum UsersDatabase {
    public static let designID = "_design/_auth"

    /// `[chttpd_auth] authentication_db`: where users log in from (`_users` unless set).
    static let configuredName = Locked("_users")
    static var authenticationDatabase: String { configuredName.withLock { $0 } }

    /// Whether a database holds user documents, with their rules (only admins list them; a user
    /// reads and changes only their own; passwords are hashed): `_users`, the configured
    /// authentication database, and any whose last path segment is `_users`, as in CouchDB.
    static func isUsersDatabase(_ name: String) -> Bool {
        name == "_users" || name.hasSuffix("/_users") || name == authenticationDatabase
    }

    /// CouchDB's rules for user documents, in lt's words (`check` is the same in Swift).
    public static let validationSource = """
        function (newDoc, oldDoc, userCtx, secObj) {
            // LocationTracker runs these rules in Swift (CouchServer/UsersDatabase.swift, `check`).
            function listed(group) {
                group = group || {};
                return (group.names || []).indexOf(userCtx.name) !== -1 ||
                    (group.roles || []).some(function (role) { return userCtx.roles.indexOf(role) !== -1; });
            }
            var admin = userCtx.roles.indexOf("_admin") !== -1 || listed((secObj || {}).admins);
            if (newDoc._deleted === true) {
                if (userCtx.roles.indexOf("_admin") !== -1 || (oldDoc && userCtx.name === oldDoc.name)) { return; }
                throw({forbidden: "Only admins may delete other user docs."});
            }
            if (newDoc.type !== "user") { throw({forbidden: "doc.type must be user"}); }
            if (!newDoc.name) { throw({forbidden: "doc.name is required"}); }
            if (!newDoc.roles) { throw({forbidden: "doc.roles must exist"}); }
            if (!Array.isArray(newDoc.roles)) { throw({forbidden: "doc.roles must be an array"}); }
            if (newDoc.roles.some(function (role) { return typeof role !== "string"; })) {
                throw({forbidden: "doc.roles can only contain strings"});
            }
            if (newDoc._id !== "org.couchdb.user:" + newDoc.name) {
                throw({forbidden: "Doc ID must be of the form org.couchdb.user:name"});
            }
            if (oldDoc && oldDoc.name !== newDoc.name) { throw({forbidden: "Usernames can not be changed."}); }
            if (newDoc.password_sha && !newDoc.salt) {
                throw({forbidden: "Users with password_sha must have a salt.See /_utils/script/couch.js for example code."});
            }
            if (newDoc.password_scheme && ["simple", "pbkdf2"].indexOf(newDoc.password_scheme) === -1) {
                throw({forbidden: "Password scheme `" + newDoc.password_scheme + "` not supported."});
            }
            if (newDoc.password_scheme === "pbkdf2") {
                if (typeof newDoc.iterations !== "number") { throw({forbidden: "iterations must be a number."}); }
                if (typeof newDoc.derived_key !== "string") { throw({forbidden: "derived_key must be a string."}); }
            }
            if (!admin) {
                if (oldDoc) {
                    if (userCtx.name !== newDoc.name) { throw({forbidden: "You may only update your own user document."}); }
                    var before = (oldDoc.roles || []).slice().sort(), after = newDoc.roles.slice().sort();
                    if (JSON.stringify(before) !== JSON.stringify(after)) { throw({forbidden: "Only _admin may edit roles"}); }
                } else if (newDoc.roles.length > 0) {
                    throw({forbidden: "Only _admin may set roles"});
                }
            }
            if (newDoc.roles.some(function (role) { return role !== "_metrics" && role.charAt(0) === "_"; })) {
                throw({forbidden: "No system roles (starting with underscore) in users db."});
            }
            if (newDoc.name.charAt(0) === "_") { throw({forbidden: "Username may not start with underscore."}); }
            if (newDoc.name.indexOf(":") !== -1) { throw({forbidden: "Character `:` is not allowed in usernames."}); }
        }
        """

    /// The design document written into a new `_users` database.
    public static var designDocument: JSONObject {
        ["language": "javascript", "validate_doc_update": .string(validationSource)]
    }

    /// `validationSource` as a validator (`DesignDocumentValidator.NativeFunction`).
    @Sendable public static func validate(
        _ write: ProposedWrite, _ user: UserContext, _ security: JSONObject
    ) -> CouchError? {
        check(write.newDocument, old: write.oldDocument, user: user, security: security)
    }

    /// The rules that keep users apart, which hold in every users database whether or not it
    /// has its `_design/_auth` (`check` holds them all): the id names the user, only admins
    /// delete others' documents or set roles, a user changes only their own document, and no
    /// one is given a system role. The other shape rules (`type`, roles' types, user names'
    /// characters, password fields) come with the design document, as in CouchDB, whose own
    /// are in its `_design/_auth`.
    static func accessProblem(
        _ doc: JSONObject, old: JSONObject?, user: UserContext, security: JSONObject
    ) -> CouchError? {
        if doc["_deleted"] == true {
            if user.isServerAdmin || (old != nil && user.name != nil && user.name == old?["name"]?.stringValue) {
                return nil
            }
            return .forbidden("Only admins may delete other user docs.")
        }
        // A document names the user its id names: logins find users by id.
        guard let name = doc["name"]?.stringValue, doc["_id"] == .string("org.couchdb.user:" + name) else {
            return .forbidden("Doc ID must be of the form org.couchdb.user:name")
        }
        return rolesProblem(
            name: name, roles: (doc["roles"]?.arrayValue ?? []).compactMap(\.stringValue), old: old, user: user,
            security: security)
    }

    /// Who may write a user document's roles, and which: admins (server, or of the database)
    /// set them, a user keeps their own as they are, and no one gets a system role.
    static func rolesProblem(
        name: String, roles: [String], old: JSONObject?, user: UserContext, security: JSONObject
    ) -> CouchError? {
        if !(user.isServerAdmin || user.isListed(in: security["admins"])) {
            if let old {
                guard user.name != nil, user.name == name, user.name == old["name"]?.stringValue else {
                    return .forbidden("You may only update your own user document.")
                }
                let before = (old["roles"]?.arrayValue ?? []).compactMap(\.stringValue).sorted()
                guard before == roles.sorted() else { return .forbidden("Only _admin may edit roles") }
            } else if !roles.isEmpty {
                return .forbidden("Only _admin may set roles")
            }
        }
        if roles.contains(where: { $0 != "_metrics" && $0.hasPrefix("_") }) {
            return .forbidden("No system roles (starting with underscore) in users db.")
        }
        return nil
    }

    /// Why a user document may not be written (403 `forbidden`), or nil: CouchDB's rules, in
    /// its order and words. `doc` holds `_id` (and `_deleted` for a deletion).
    static func check(_ doc: JSONObject, old: JSONObject?, user: UserContext, security: JSONObject) -> CouchError? {
        if doc["_deleted"] == true {
            if user.isServerAdmin || (old != nil && user.name != nil && user.name == old?["name"]?.stringValue) {
                return nil
            }
            return .forbidden("Only admins may delete other user docs.")
        }
        guard doc["type"] == "user" else { return .forbidden("doc.type must be user") }
        guard let name = doc["name"]?.stringValue, !name.isEmpty else { return .forbidden("doc.name is required") }
        guard let rolesValue = doc["roles"], rolesValue != .null, rolesValue != false else {
            return .forbidden("doc.roles must exist")
        }
        guard let roleValues = rolesValue.arrayValue else { return .forbidden("doc.roles must be an array") }
        let roles = roleValues.compactMap(\.stringValue)
        guard roles.count == roleValues.count else { return .forbidden("doc.roles can only contain strings") }
        guard doc["_id"] == .string("org.couchdb.user:" + name) else {
            return .forbidden("Doc ID must be of the form org.couchdb.user:name")
        }
        if let old, old["name"] != doc["name"] { return .forbidden("Usernames can not be changed.") }
        if let sha = doc["password_sha"], sha.isTruthy, !(doc["salt"]?.isTruthy ?? false) {
            return .forbidden("Users with password_sha must have a salt.See /_utils/script/couch.js for example code.")
        }
        if let scheme = doc["password_scheme"], scheme.isTruthy, scheme != "simple", scheme != "pbkdf2" {
            return .forbidden("Password scheme `\(scheme.stringValue ?? scheme.text)` not supported.")
        }
        if doc["password_scheme"] == "pbkdf2" {
            guard doc["iterations"]?.isNumber == true else { return .forbidden("iterations must be a number.") }
            guard doc["derived_key"]?.stringValue != nil else { return .forbidden("derived_key must be a string.") }
        }
        if let problem = rolesProblem(name: name, roles: roles, old: old, user: user, security: security) {
            return problem
        }
        if name.hasPrefix("_") { return .forbidden("Username may not start with underscore.") }
        if name.contains(":") { return .forbidden("Character `:` is not allowed in usernames.") }
        return nil
    }

    /// Writes `_design/_auth` into `db` unless it has one (a new `_users`, or one from before).
    /// Its rules hold without it (the request path applies them), so a write that fails (a
    /// `max_document_size` below its size) is logged, not fatal.
    static func ensureDesignDocument(_ db: DocumentDatabase, logger: Logger) async {
        if (try? await db.document(id: designID)) != nil { return }
        do {
            _ = try await db.update(DocumentInput(id: designID, body: designDocument))
        } catch let error as CouchError where error.status == 409 {
            return  // written meanwhile
        } catch {
            logger.warning("\(db.name)/\(designID) was not written: \(error)")
        }
    }
}

extension JSON {
    /// JavaScript's truthiness: null, false, 0, NaN and "" are false.
    fileprivate var isTruthy: Bool {
        switch self {
        case .null: return false
        case .bool(let value): return value
        case .string(let text): return !text.isEmpty
        default:
            if let number = doubleValue { return number != 0 && !number.isNaN }
            return true
        }
    }
}
