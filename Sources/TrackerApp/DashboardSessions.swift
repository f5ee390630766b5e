import CouchJSON
import CouchProtocol
import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Signed-in dashboard users: a random 256-bit token in an HttpOnly, SameSite=Strict cookie,
/// kept on the server only as its SHA-256 (a leaked session table opens nothing), valid for
/// `lifetime` since last use. In memory: a restart signs everyone out.
final class DashboardSessions: Sendable {
    /// Who a session is.
    struct Session: Sendable {
        /// A tracker user's name, or the admin's/analyst's.
        var name: String
        var roles: Set<String>
        /// A tracker user (sees their own data), as opposed to an admin or analyst.
        var isTrackerUser: Bool
        var lastUse: Date
    }

    static let cookieName = "lt_session"
    let lifetime: TimeInterval = 12 * 3600
    private let sessions = NIOLockedValueBox<[String: Session]>([:])

    /// Starts a session; returns the token for the cookie.
    func start(name: String, roles: Set<String>, isTrackerUser: Bool) -> String {
        let token = Hex.random(bytes: 32)
        let now = Date()
        sessions.withLockedValue { table in
            if table.count > 10_000 { table = table.filter { now.timeIntervalSince($0.value.lastUse) < lifetime } }
            table[DashboardSessions.digest(token)] = Session(name: name, roles: roles, isTrackerUser: isTrackerUser, lastUse: now)
        }
        return token
    }

    /// The live session of a token, refreshed.
    func session(_ token: String) -> Session? {
        let key = DashboardSessions.digest(token)
        let now = Date()
        return sessions.withLockedValue { table -> Session? in
            guard var session = table[key] else { return nil }
            guard now.timeIntervalSince(session.lastUse) < lifetime else {
                table.removeValue(forKey: key)
                return nil
            }
            session.lastUse = now
            table[key] = session
            return session
        }
    }

    func end(_ token: String) {
        _ = sessions.withLockedValue { $0.removeValue(forKey: DashboardSessions.digest(token)) }
    }

    /// Ends every session of a tracker user (their account was deleted).
    func end(user: String) {
        sessions.withLockedValue { table in table = table.filter { !($0.value.isTrackerUser && $0.value.name == user) } }
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
        return "\(cookieName)=\(token); \(flags); Max-Age=\(12 * 3600)"
    }
}
