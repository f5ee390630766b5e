import CouchEngine
import CouchJSON
import HTTPServing
import CouchProtocol
import Crypto
import Foundation
import Hummingbird

/// Checks credentials (basic auth and `AuthSession` cookies) against server admins and the
/// `_users` database, as CouchDB's `chttpd_auth` does.
///
/// Verifying a password costs a full PBKDF2 run, so a successful check is remembered while it
/// is used (`VerifiedPasswords`), and requests that arrive together with the same credentials
/// wait for one run instead of each starting their own; replication and repeated requests then
/// pay it once.
final class Authenticator: Sendable {
    let settings: Locked<ServerSettings>
    let store: DatabaseStore
    /// Cluster mode: users are the cluster's `_users` documents.
    let cluster: CouchCluster?
    /// How long a session cookie lasts (`[chttpd_auth] timeout`, changed at run time).
    var cookieLifetime: TimeInterval {
        get { lifetime.withLock { $0 } }
        set { lifetime.withLock { $0 = newValue } }
    }
    private let lifetime: Locked<TimeInterval>
    /// Failed password checks, shared with the application's listener.
    let throttle: LoginThrottle
    private let verified = Locked(VerifiedPasswords())
    /// Full PBKDF2 runs under way, by cache key: the requests that arrive meanwhile wait for it.
    private let verifying = Locked<[[UInt8]: Task<Bool, Never>]>([:])
    private let fullVerifications = Locked(0)
    /// Passwords checked with a full PBKDF2 run since the start (`lt_password_verifications_total`).
    var passwordVerifications: Int { fullVerifications.withLock { $0 } }

    init(
        settings: Locked<ServerSettings>, store: DatabaseStore, cluster: CouchCluster? = nil,
        cookieLifetime: TimeInterval = 600,
        throttle: LoginThrottle = LoginThrottle()
    ) {
        self.settings = settings
        self.throttle = throttle
        self.store = store
        self.cluster = cluster
        self.lifetime = Locked(cookieLifetime)
    }

    /// A user's stored credentials: admin hash or `_users` document fields.
    struct Credentials {
        var hash: Passwords.Hash
        var roles: [String]
        /// A user document with conflicts authenticates no one until they are resolved (CouchDB).
        var conflicted = false
    }

    static let conflictedUser = CouchError(
        status: 401, error: "unauthorized",
        reason: "User document conflicts must be resolved before the document is used for authentication purposes.")

    /// Nil for no such user; in cluster mode, the 503 when the cluster cannot say (so a login
    /// during an outage is not taken for wrong credentials).
    func credentials(for name: String) async throws -> Credentials? {
        if let hash = settings.withLock({ $0.admins[name] }) {
            return Credentials(hash: hash, roles: ["_admin"])
        }
        let found: JSONObject?
        if let cluster {
            found = try await cluster.user(name)
        } else {
            var options = ReadOptions()
            options.conflicts = true
            found = try? await store.open(UsersDatabase.authenticationDatabase).document(
                id: "org.couchdb.user:\(name)", options: options)
        }
        guard let doc = found, doc["derived_key"]?.stringValue != nil, doc["salt"]?.stringValue != nil else {
            return nil
        }
        let roles = doc["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return Credentials(
            hash: Passwords.Hash(stored: .object(doc), defaultIterations: 10, defaultPRF: "sha"), roles: roles,
            conflicted: !(doc["_conflicts"]?.arrayValue ?? []).isEmpty)
    }

    /// A user as their stored credentials make them now — the key of their password hash and
    /// their roles — to tell whether a feed's user is still who they were when it opened (a
    /// deleted or revoked account, a changed password, changed roles). Users without stored
    /// credentials (anonymous, the server itself) stay as they are; nil for one who is gone.
    func current(_ user: UserContext) async -> (key: String, user: UserContext)? {
        guard let name = user.name else { return ("", user) }
        guard let credentials = try? await credentials(for: name), !credentials.conflicted else { return nil }
        return (
            credentials.hash.salt + ":" + credentials.hash.derivedKey, UserContext(name: name, roles: credentials.roles)
        )
    }

    /// A check a long-lived answer makes before it sends more: whether `user` is still who
    /// they were (`current`) and, as they are now, may still `read` what `allowed` says.
    func stillValid(
        _ user: UserContext, _ allowed: @escaping @Sendable (UserContext) -> Bool
    ) async -> @Sendable () async -> Bool {
        let start = await current(user)
        return {
            guard let start, let now = await self.current(user), now.key == start.key else { return false }
            return allowed(now.user)
        }
    }

    /// Verifies a name and password; nil when they do not match.
    func login(name: String, password: String) async throws -> UserContext? {
        guard let credentials = try await credentials(for: name), !credentials.conflicted else {
            // Spend comparable time on unknown names so they cannot be told apart by timing.
            _ = await Passwords.verify(
                password,
                against: Passwords.Hash(
                    derivedKey: "", salt: "00", iterations: Passwords.defaultIterations / 10, prf: "sha256"))
            return nil
        }
        var hasher = SHA256()
        hasher.update(
            data: Array(name.utf8) + [0] + Array(password.utf8) + [0] + Array(credentials.hash.derivedKey.utf8))
        let cacheKey = Array(hasher.finalize())
        if let hit = verified.withLock({ $0.lookup(cacheKey, now: Date()) }) {
            // The password was checked before; the roles are the ones stored now.
            return UserContext(name: hit.name, roles: credentials.roles)
        }
        guard await verifyOnce(password, against: credentials.hash, key: cacheKey) else { return nil }
        let context = UserContext(name: name, roles: credentials.roles)
        verified.withLock { $0.insert(cacheKey, context, now: Date()) }
        return context
    }

    /// One PBKDF2 run for `key` however many requests ask at once: a device fleet whose entries
    /// are new (a restart) sends each device's requests together, and each would otherwise cost
    /// a full run.
    private func verifyOnce(_ password: String, against hash: Passwords.Hash, key: [UInt8]) async -> Bool {
        let (task, started) = verifying.withLock { running -> (Task<Bool, Never>, Bool) in
            if let task = running[key] { return (task, false) }
            let task = Task { await Passwords.verify(password, against: hash) }
            running[key] = task
            return (task, true)
        }
        let matched = await task.value
        if started {
            verifying.withLock { $0[key] = nil }
            fullVerifications.withLock { $0 += 1 }
        }
        return matched
    }

    /// `login` from a client, throttled: 429 while `client` must wait after failing (see
    /// `LoginThrottle`); failures and successes are counted.
    func login(name: String, password: String, client: String) async throws -> UserContext? {
        try throttle.check(account: name, client: client)
        guard let user = try await login(name: name, password: password) else {
            throttle.failed(account: name, client: client)
            if try await credentials(for: name)?.conflicted == true { throw Self.conflictedUser }
            return nil
        }
        throttle.succeeded(account: name, client: client)
        return user
    }

    /// Works out the user of a request from `client`. Throws 401 for wrong credentials (429
    /// while that client must wait); no credentials is the anonymous user. As in CouchDB, Basic
    /// credentials `_:_` (a client's way to be logged out) and a value without a colon are none,
    /// and a value that is not base64 is a bad request.
    func authenticate(headers: HTTPFields, client: String) async throws -> (UserContext, refreshCookie: Bool) {
        if let authorization = headers[.authorization], authorization.lowercased().hasPrefix("basic ") {
            let encoded = authorization.dropFirst("basic ".count).trimmingSpaces
            guard let data = Data(base64Encoded: String(encoded)) else {
                throw CouchError.badRequest("Authorization header has invalid base64 value")
            }
            let text = String(decoding: data, as: UTF8.self)
            if let colon = text.firstIndex(of: ":"), text != "_:_" {
                let name = String(text[..<colon])
                let password = String(text[text.index(after: colon)...])
                guard let user = try await login(name: name, password: password, client: client) else {
                    throw CouchError.badCredentials
                }
                return (user, false)
            }
        }
        if let cookie = Self.cookieValue(headers, name: "AuthSession") {
            if let (user, issued) = try await verifyCookie(cookie) {
                return (user, Date().timeIntervalSince(issued) > cookieLifetime * 0.1)
            }
            // An expired or forged cookie counts as no credentials, as in CouchDB.
        }
        return (.anonymous, false)
    }

    static func cookieValue(_ headers: HTTPFields, name: String) -> String? {
        for field in headers[values: .cookie] {
            for part in field.split(separator: ";") {
                let pair = part.trimmingSpaces
                if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
            }
        }
        return nil
    }

    /// `AuthSession` value: base64url of `name:HEXTIME:HMAC`, where the HMAC-SHA256 key is the
    /// server secret plus the user's password salt (a password change ends old sessions).
    func makeCookie(for name: String) async -> String? {
        guard let credentials = try? await credentials(for: name) else { return nil }
        let time = String(Int(Date().timeIntervalSince1970), radix: 16, uppercase: true)
        let payload = "\(name):\(time)"
        let mac = signature(payload, salt: credentials.hash.salt)
        return Self.base64url(Array("\(payload):\(mac)".utf8))
    }

    func signature(_ payload: String, salt: String) -> String {
        let secret = settings.withLock { $0.secret }
        let key = SymmetricKey(data: Array((secret + salt).utf8))
        return Hex.string(HMAC<SHA256>.authenticationCode(for: Array(payload.utf8), using: key))
    }

    func verifyCookie(_ value: String) async throws -> (UserContext, issued: Date)? {
        guard let bytes = Self.base64urlDecode(value), let text = String(bytes: bytes, encoding: .utf8) else {
            return nil
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 3 else { return nil }
        let mac = String(parts[parts.count - 1])
        let timeHex = String(parts[parts.count - 2])
        let name = parts[0..<(parts.count - 2)].joined(separator: ":")
        guard let time = Int(timeHex, radix: 16) else { return nil }
        let issued = Date(timeIntervalSince1970: TimeInterval(time))
        guard Date().timeIntervalSince(issued) < cookieLifetime, let credentials = try await credentials(for: name),
            !credentials.conflicted
        else {
            return nil
        }
        let expected = signature("\(name):\(timeHex)", salt: credentials.hash.salt)
        guard Passwords.constantTimeEquals(Array(expected.utf8), Array(mac.utf8)) else { return nil }
        return (UserContext(name: name, roles: credentials.roles), issued)
    }

    func setCookieHeader(_ value: String) -> String {
        "AuthSession=\(value); Version=1; Path=/; HttpOnly; Max-Age=\(Int(cookieLifetime)); SameSite=Lax"
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func base64urlDecode(_ text: String) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map(Array.init)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (header values are ASCII-delimited; cheaper
    /// than Foundation's character-set trimming on every request).
    var trimmingSpaces: Substring {
        let isSpace = { (c: Character) in c == " " || c == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
