import CouchEngine
import Foundation

/// Passwords verified recently, so that Basic auth on every request (as devices and the
/// replicator send it) pays a full PBKDF2 run once, not once per request: CouchDB's
/// `couch_passwords_cache`. An entry is keyed by a SHA-256 of name, password and stored key
/// (never the password itself), so a changed password or salt misses; it lasts while it is
/// used and goes after `maxIdle` without use, as CouchDB's `[couch_passwords_cache] max_idle`
/// (600 s). At most `maxEntries` are kept, the least recently used going first, as its
/// `max_objects` (10,000). Every operation is O(1) amortised. A value type with the time
/// passed in, tested without a clock.
struct VerifiedPasswords: Sendable {
    /// How long an entry lasts without being used.
    static let maxIdle: TimeInterval = 600
    /// The most entries kept; past it the least recently used goes.
    static let maxEntries = 10_000

    private struct Entry: Sendable {
        var context: UserContext
        var lastUsed: Date
        /// Which record of `uses` is this entry's latest; older records are stale.
        var use: UInt64
    }

    private var entries: [[UInt8]: Entry] = [:]
    /// Every use in order, oldest first from `head`; a record whose `use` is no longer its
    /// entry's is skipped, and the array is compacted once stale records outnumber live ones.
    private var uses: [(key: [UInt8], use: UInt64)] = []
    private var head = 0
    private var nextUse: UInt64 = 0

    var count: Int { entries.count }

    /// The user a verified key belongs to, its last use moved to `now`; nil when unknown or idle
    /// too long.
    mutating func lookup(_ key: [UInt8], now: Date) -> UserContext? {
        guard let entry = entries[key] else { return nil }
        guard now.timeIntervalSince(entry.lastUsed) < Self.maxIdle else {
            entries[key] = nil
            return nil
        }
        record(key, entry.context, now: now)
        return entry.context
    }

    /// Remembers a key whose password was just verified, first dropping the entries idle too
    /// long and, at the bound, the least recently used.
    mutating func insert(_ key: [UInt8], _ context: UserContext, now: Date) {
        record(key, context, now: now)
        while head < uses.count {
            let (oldest, use) = uses[head]
            guard let entry = entries[oldest], entry.use == use else {
                head += 1
                continue
            }
            guard entries.count > Self.maxEntries || now.timeIntervalSince(entry.lastUsed) >= Self.maxIdle else {
                break
            }
            entries[oldest] = nil
            head += 1
        }
    }

    /// Notes a use of `key` at `now`: its entry and a record at the end of `uses`.
    private mutating func record(_ key: [UInt8], _ context: UserContext, now: Date) {
        nextUse += 1
        entries[key] = Entry(context: context, lastUsed: now, use: nextUse)
        uses.append((key, nextUse))
        if uses.count - head > 2 * entries.count + 64 {
            uses = uses[head...].filter { entries[$0.key]?.use == $0.use }
            head = 0
        }
    }
}
