import CouchJSON
import HTTPServing
import CouchEngine
import Foundation

/// Counts the longpoll, continuous and eventsource feeds each user has open, so that one user
/// (or one anonymous client) cannot hold unbounded listeners; server admins are not counted.
final class FeedCounter: Sendable {
    let limit: Int
    private let held = KeyedCounter()
    /// Every feed open now, server admins' too (for the metrics).
    private let openFeeds = Locked(0)
    /// How many feeds are open now.
    var count: Int { openFeeds.withLock { $0 } }

    init(limit: Int) {
        self.limit = limit
    }

    /// A feed held open while its `Slot` lives; 429 `too_many_requests` beyond the limit.
    final class Slot: Sendable {
        let counter: FeedCounter
        /// The user's key; nil for a server admin (not limited).
        let key: String?
        init(_ counter: FeedCounter, _ key: String?) {
            self.counter = counter
            self.key = key
            counter.openFeeds.withLock { $0 += 1 }
        }
        deinit { counter.close(key) }
    }

    func open(for request: APIRequest) throws -> Slot {
        guard !request.user.isServerAdmin else { return Slot(self, nil) }
        let key = request.user.name.map { "user:" + $0 } ?? "client:" + request.client
        guard held.enter(key, limit: limit) else {
            throw CouchError(
                status: 429, error: "too_many_requests",
                reason:
                    "\(limit) changes feeds (longpoll, continuous, eventsource) are open for this user already; close one first"
            )
        }
        return Slot(self, key)
    }

    fileprivate func close(_ key: String?) {
        openFeeds.withLock { $0 -= 1 }
        if let key { held.leave(key) }
    }
}
