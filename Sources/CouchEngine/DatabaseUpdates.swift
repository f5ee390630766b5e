import Foundation

/// The server-wide record of which databases changed, for `_db_updates`: the latest event of
/// each database (created, updated, deleted), numbered by one counter. It lives in memory and
/// starts afresh with the process; sequence strings carry a per-process tag, so a consumer
/// that comes back after a restart can tell its `since` is from before and look at every
/// database once.
///
/// Events are kept in the order they happened (a log), each database's latest marked in a
/// dictionary, so asking for what changed after a sequence costs the answer's length (and a
/// binary search), not a pass over every database the server has: the consolidator asks every
/// round, and every commit records, under the same lock. Superseded events are dropped from
/// the log once they are half of it.
public final class DatabaseUpdates: Sendable {
    public enum Kind: String, Sendable { case created, updated, deleted }

    public struct Event: Sendable, Equatable {
        public var name: String
        public var kind: Kind
        public var seq: Int
    }

    private struct State {
        var seq = 0
        /// Each database's latest event.
        var latest: [String: (kind: Kind, seq: Int)] = [:]
        /// Events by increasing sequence, including superseded ones (not yet compacted).
        var log: [(seq: Int, name: String)] = []
    }
    private let state = Locked(State())
    /// Wakes waiting `_db_updates` feeds.
    public let notifier = ChangeNotifier()
    /// Distinguishes this process's sequence numbers from an earlier one's.
    public let epoch = String(UInt32.random(in: 0...UInt32.max), radix: 16)

    func record(_ name: String, _ kind: Kind) {
        let seq = state.withLock { state -> Int in
            state.seq += 1
            state.latest[name] = (kind, state.seq)
            state.log.append((state.seq, name))
            if state.log.count >= 1_024, state.log.count > 2 * state.latest.count {
                state.log.removeAll { state.latest[$0.name]?.seq != $0.seq }
            }
            return state.seq
        }
        notifier.publish(seq: seq, commit: false)
    }

    /// The current sequence.
    public var seq: Int { state.withLock { $0.seq } }

    /// Events after `seq`, oldest first, at most `limit`: each database's latest only.
    public func events(after seq: Int, limit: Int = Int.max) -> [Event] {
        state.withLock { state in
            var events: [Event] = []
            for entry in state.log[state.log.partitionPoint { $0.seq <= seq }...] where events.count < limit {
                guard let latest = state.latest[entry.name], latest.seq == entry.seq else { continue }
                events.append(Event(name: entry.name, kind: latest.kind, seq: entry.seq))
            }
            return events
        }
    }

    /// `N-<epoch>` as clients see sequences.
    public func sequenceString(_ seq: Int) -> String { "\(seq)-\(epoch)" }

    /// A `since` a client passed back: 0 unless it is this process's (`now` is the current one).
    public func parse(since text: String?) -> Int {
        guard let text, !text.isEmpty else { return 0 }
        if text == "now" { return seq }
        let parts = text.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, parts[1] == epoch, let n = Int(parts[0]) else { return 0 }
        return n
    }
}
