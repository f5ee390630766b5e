import CouchEngine

/// How many of something each key holds at once, with a limit: connections per address,
/// changes feeds per user.
final class KeyedCounter: Sendable {
    private let held = Locked<[String: Int]>([:])

    /// Counts one more for `key`; false (and nothing counted) when it already holds `limit`.
    func enter(_ key: String, limit: Int) -> Bool {
        held.withLock { held in
            let current = held[key] ?? 0
            guard current < limit else { return false }
            held[key] = current + 1
            return true
        }
    }

    /// One fewer for `key`.
    func leave(_ key: String) {
        held.withLock { held in
            let left = (held[key] ?? 1) - 1
            held[key] = left > 0 ? left : nil
        }
    }
}
