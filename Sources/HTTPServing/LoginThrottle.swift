import CouchJSON
import NIOConcurrencyHelpers
public import Foundation

/// Slows down password guessing without letting anyone lock the owner out.
///
/// Failed password checks are counted per (account, client), per client and per account.
/// Past a few free failures, each further one doubles how long that key must wait before the
/// next attempt (1 s, 2 s, 4 s … at most `longestWait`); a key forgets its failures after
/// `memory` without one. What is refused, and what never is:
/// - a client that failed for an account waits before trying that account again, and a
///   client that failed for many accounts waits before trying any;
/// - an account that fails from many clients (a distributed guess) slows down only the
///   clients that have failed themselves: a client with no failures of its own is never
///   refused because of what others did, so the owner, from their own device, gets in;
/// - API keys (random 128-bit secrets) and session cookies are not passwords: their holders
///   never wait because of an account's failures or their address's, only because of their
///   own failures with that key;
/// - a client that has logged in to an account before (the pair is remembered for `knownFor`)
///   is not refused for that account because of its address's failures for others: people
///   behind one NAT, or a carrier's, are not locked out by each other. Only its own failures
///   for that account make it wait.
///
/// One throttle is shared by the database API and the application API, so failures count
/// the same on both. Clients are told apart by address (`ClientAddress`, which takes the
/// `X-Forwarded-For` of trusted proxies only). Memory is bounded: at most `capacity` keys,
/// the longest forgotten first.
public final class LoginThrottle: Sendable {
    /// How the throttle behaves; the defaults suit a public server.
    public struct Policy: Sendable {
        /// Failures of one client for one account before it must wait.
        public var freePerAccountAndClient = 5
        /// Failures of one client (any accounts) before it must wait.
        public var freePerClient = 30
        /// Failures of one account (all clients) before clients that failed for it must wait.
        public var freePerAccount = 10
        /// The first wait, doubled with each further failure.
        public var firstWait: TimeInterval = 1
        /// The longest wait.
        public var longestWait: TimeInterval = 15 * 60
        /// How long a key remembers its failures after its last one.
        public var memory: TimeInterval = 60 * 60
        /// Most keys remembered.
        public var capacity = 100_000
        /// How long a successful (account, client) pair is remembered as known.
        public var knownFor: TimeInterval = 30 * 24 * 3600
        public init() {}
    }

    struct Entry {
        var failures: Int
        var last: Date
    }

    public let policy: Policy
    private let entries = NIOLockedValueBox<[String: Entry]>([:])
    /// (account, client) pairs that logged in, and when last.
    private let known = NIOLockedValueBox<[String: Date]>([:])

    public init(policy: Policy = Policy()) {
        self.policy = policy
    }

    /// Whether `client` may try a password for `account` now; throws 429 `too_many_requests`
    /// with the wait otherwise.
    public func check(account: String, client: String, now: Date = Date()) throws {
        let pair = Self.pairKey(account, client)
        let isKnown = known.withLockedValue { $0[pair].map { now.timeIntervalSince($0) < policy.knownFor } ?? false }
        let wait = entries.withLockedValue { table -> TimeInterval in
            var wait = remaining(table, pair, free: policy.freePerAccountAndClient, now: now)
            // A known pair answers only for its own failures, not its address's for others; so
            // does an API key (a random secret: guessing one is hopeless, spraying them harmless).
            if isKnown || LoginThrottle.isRandomSecret(account) { return wait }
            wait = max(wait, remaining(table, Self.clientKey(client), free: policy.freePerClient, now: now))
            // The account's own count applies only to clients that have failed for it themselves.
            if !LoginThrottle.isRandomSecret(account), (table[Self.pairKey(account, client)]?.failures ?? 0) > 0 {
                wait = max(wait, remaining(table, Self.accountKey(account), free: policy.freePerAccount, now: now))
            }
            return wait
        }
        if wait > 0 {
            let seconds = Int(wait.rounded(.up))
            throw CouchError(
                status: 429, error: "too_many_requests",
                reason: "Too many failed logins; try again in \(seconds) \(seconds == 1 ? "second" : "seconds")")
        }
    }

    /// Records a failed password check.
    public func failed(account: String, client: String, now: Date = Date()) {
        entries.withLockedValue { table in
            if table.count >= policy.capacity { forgetOldest(&table, now: now) }
            var keys = [Self.pairKey(account, client), Self.clientKey(client)]
            if !LoginThrottle.isRandomSecret(account) { keys.append(Self.accountKey(account)) }
            for key in keys {
                var entry =
                    table[key].flatMap { now.timeIntervalSince($0.last) < policy.memory ? $0 : nil }
                    ?? Entry(failures: 0, last: now)
                entry.failures = entry.failures.addingSaturating(1)
                entry.last = now
                table[key] = entry
            }
        }
    }

    /// Records a successful check: the client's failures for that account are forgotten, and
    /// the pair is known from now on.
    public func succeeded(account: String, client: String, now: Date = Date()) {
        let pair = Self.pairKey(account, client)
        entries.withLockedValue { _ = $0.removeValue(forKey: pair) }
        known.withLockedValue { known in
            if known[pair] == nil, known.count >= policy.capacity {
                let cutoff = known.values.sorted()[known.count / 4]
                known = known.filter { $0.value > cutoff && now.timeIntervalSince($0.value) < policy.knownFor }
            }
            known[pair] = now
        }
    }

    /// Seconds `key` must still wait (0: none).
    private func remaining(_ table: [String: Entry], _ key: String, free: Int, now: Date) -> TimeInterval {
        guard let entry = table[key], entry.failures >= free else { return 0 }
        let since = now.timeIntervalSince(entry.last)
        guard since < policy.memory else { return 0 }
        // 2^(failures beyond the free ones), without overflow: capped long before.
        let doublings = min(entry.failures - free, 40)
        let wait = min(policy.longestWait, policy.firstWait * pow(2, Double(doublings)))
        return max(0, wait - since)
    }

    /// Makes room: drops what is forgotten anyway, and if that is not enough, the quarter
    /// whose last failure is oldest.
    private func forgetOldest(_ table: inout [String: Entry], now: Date) {
        table = table.filter { now.timeIntervalSince($0.value.last) < policy.memory }
        guard table.count >= policy.capacity else { return }
        let cutoff = table.values.map(\.last).sorted()[table.count / 4]
        table = table.filter { $0.value.last > cutoff }
    }

    /// How many keys are remembered (for tests and statistics).
    public var count: Int { entries.withLockedValue { $0.count } }

    /// API keys are random 128-bit secrets, named `key-<hex>`: guessing one is hopeless, so
    /// failures for them never slow down the account's other clients.
    static func isRandomSecret(_ account: String) -> Bool { account.hasPrefix("key-") }

    static func pairKey(_ account: String, _ client: String) -> String { "p\u{0}\(account)\u{0}\(client)" }
    static func clientKey(_ client: String) -> String { "c\u{0}\(client)" }
    static func accountKey(_ account: String) -> String { "a\u{0}\(account)" }
}
