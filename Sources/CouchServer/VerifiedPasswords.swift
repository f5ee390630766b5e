import CouchEngine
import Foundation

/// Passwords verified recently, so that Basic auth on every request (as devices and the
/// replicator send it) pays a full PBKDF2 run once, not once per request: CouchDB's
/// `couch_passwords_cache`. An entry is keyed by a SHA-256 of name, password and stored key
/// (never the password itself), so a changed password or salt misses; it lasts while it is
/// used and goes after `maxIdle` without use, as CouchDB's `[couch_passwords_cache] max_idle`
/// (600 s). A value type with the time passed in, tested without a clock.
struct VerifiedPasswords: Sendable {
    /// How long an entry lasts without being used.
    static let maxIdle: TimeInterval = 600
    /// Past this many entries, each insertion first drops the idle ones.
    static let pruneAbove = 10_000

    private var entries: [[UInt8]: (context: UserContext, lastUsed: Date)] = [:]

    var count: Int { entries.count }

    /// The user a verified key belongs to, its last use moved to `now`; nil when unknown or idle
    /// too long.
    mutating func lookup(_ key: [UInt8], now: Date) -> UserContext? {
        guard let entry = entries[key] else { return nil }
        guard now.timeIntervalSince(entry.lastUsed) < Self.maxIdle else {
            entries[key] = nil
            return nil
        }
        entries[key]?.lastUsed = now
        return entry.context
    }

    /// Remembers a key whose password was just verified.
    mutating func insert(_ key: [UInt8], _ context: UserContext, now: Date) {
        if entries.count > Self.pruneAbove {
            entries = entries.filter { now.timeIntervalSince($0.value.lastUsed) < Self.maxIdle }
        }
        entries[key] = (context, now)
    }
}
