import CouchJSON
import CouchProtocol
import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Signed-in dashboard users: a random 256-bit token in an HttpOnly, SameSite=Strict cookie,
/// kept on the server only as its SHA-256 (a leaked session table opens nothing). A session
/// lasts `lifetime` from sign-in, however much it is used, and only while its account is as it
/// was then: `account` is a digest of the account's stored password hash and roles, compared
/// with the account's current state at every use (`TrackerHTTP.session(_:)`), so a deleted
/// account, a changed password or a removed role ends it. In memory: a restart signs everyone out.
final class DashboardSessions: Sendable {
    /// Who a session is.
    struct Session: Sendable {
        /// A tracker user's name, or the admin's/analyst's.
        var name: String
        var roles: Set<String>
        /// A tracker user (sees their own data), as opposed to an admin or analyst.
        var isTrackerUser: Bool
        /// The account's state at sign-in (`TrackerService.accountState`).
        var account: String
        var started: Date
    }

    static let cookieName = "lt_session"
    /// How long a session lasts from sign-in (the cookie's own lifetime too).
    static let lifetime: TimeInterval = 12 * 3600
    private let sessions = NIOLockedValueBox<[String: Session]>([:])
    /// The clock (tests give their own).
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date = Date.init) {
        self.now = now
    }

    /// Starts a session; returns the token for the cookie.
    func start(name: String, roles: Set<String>, isTrackerUser: Bool, account: String) -> String {
        let token = Hex.random(bytes: 32)
        let now = self.now()
        sessions.withLockedValue { table in
            if table.count > 10_000 {
                table = table.filter { now.timeIntervalSince($0.value.started) < DashboardSessions.lifetime }
            }
            table[DashboardSessions.digest(token)] = Session(
                name: name, roles: roles, isTrackerUser: isTrackerUser, account: account, started: now)
        }
        return token
    }

    /// The session of a token while within its lifetime (its account not yet checked).
    func session(_ token: String) -> Session? {
        let key = DashboardSessions.digest(token)
        let now = self.now()
        return sessions.withLockedValue { table -> Session? in
            guard let session = table[key] else { return nil }
            guard now.timeIntervalSince(session.started) < DashboardSessions.lifetime else {
                table.removeValue(forKey: key)
                return nil
            }
            return session
        }
    }

    func end(_ token: String) {
        _ = sessions.withLockedValue { $0.removeValue(forKey: DashboardSessions.digest(token)) }
    }

    /// Ends every session of a tracker user (their account was deleted).
    func end(user: String) {
        sessions.withLockedValue { table in table = table.filter { !($0.value.isTrackerUser && $0.value.name == user) }
        }
    }

    static func digest(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The session token in a `Cookie` header, if any.
    static func token(cookieHeader: String?) -> String? {
        guard let cookieHeader else { return nil }
        for part in cookieHeader.split(separator: ";") {
            let pair = part.trimmingCharacters(in: .whitespaces)
            if pair.hasPrefix(cookieName + "=") { return String(pair.dropFirst(cookieName.count + 1)) }
        }
        return nil
    }

    /// `Set-Cookie` for a token (nil: clear it); `secure` over HTTPS (`--tls-cert`, or a proxy saying
    /// `X-Forwarded-Proto: https`), so the browser never sends it in clear.
    static func setCookie(_ token: String?, secure: Bool = false) -> String {
        let flags = "Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
        guard let token else { return "\(cookieName)=; \(flags); Max-Age=0" }
        return "\(cookieName)=\(token); \(flags); Max-Age=\(Int(lifetime))"
    }
}
