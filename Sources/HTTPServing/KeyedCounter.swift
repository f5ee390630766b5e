import NIOConcurrencyHelpers

/// How many of something each key holds at once, with a limit: connections per address,
/// changes feeds per user.
public final class KeyedCounter: Sendable {
    public init() {}

    private let held = NIOLockedValueBox<[String: Int]>([:])

    /// Counts one more for `key`; false (and nothing counted) when it already holds `limit`.
    public func enter(_ key: String, limit: Int) -> Bool {
        held.withLockedValue { held in
            let current = held[key] ?? 0
            guard current < limit else { return false }
            held[key] = current + 1
            return true
        }
    }

    /// One fewer for `key`.
    public func leave(_ key: String) {
        held.withLockedValue { held in
            let left = (held[key] ?? 1) - 1
            held[key] = left > 0 ? left : nil
        }
    }
}
