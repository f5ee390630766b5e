public import Foundation
import NIOConcurrencyHelpers

/// At most `limit` events per client in any `window` (a sliding window): what an anonymous
/// client may do that costs the server real work and leaves something behind — registering a
/// user makes a database and runs a password hash. Clients are told apart by address
/// (`ClientAddress`). Memory is bounded: at most `capacity` clients, those whose last event is
/// oldest forgotten first.
public final class ClientRateLimit: Sendable {
    public let limit: Int
    public let window: TimeInterval
    let capacity: Int
    /// Each client's event times, oldest first, within the window.
    private let events = NIOLockedValueBox<[String: [Date]]>([:])

    public init(limit: Int, window: TimeInterval, capacity: Int = 100_000) {
        self.limit = limit
        self.window = window
        self.capacity = capacity
    }

    /// Counts one event of `client`: nil when it is allowed, otherwise the seconds until the
    /// next one is (and it is not counted).
    public func record(_ client: String, now: Date = Date()) -> Int? {
        let wait = events.withLockedValue { table -> TimeInterval? in
            var times = (table[client] ?? []).filter { now.timeIntervalSince($0) < window }
            if times.count >= limit {
                table[client] = times
                return window - now.timeIntervalSince(times[0])
            }
            if table[client] == nil, table.count >= capacity { forgetOldest(&table, now: now) }
            times.append(now)
            table[client] = times
            return nil
        }
        return wait.map { max(1, Int($0.rounded(.up))) }
    }

    /// Clients remembered (for tests).
    public var count: Int { events.withLockedValue { $0.count } }

    private func forgetOldest(_ table: inout [String: [Date]], now: Date) {
        table = table.filter { $0.value.last.map { now.timeIntervalSince($0) < window } ?? false }
        guard table.count >= capacity else { return }
        let cutoff = table.values.compactMap(\.last).sorted()[table.count / 4]
        table = table.filter { ($0.value.last ?? .distantPast) > cutoff }
    }
}
