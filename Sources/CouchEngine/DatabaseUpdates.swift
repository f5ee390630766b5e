import Foundation

/// The server-wide record of which databases changed, for `_db_updates`: the latest event of
/// each database (created, updated, deleted), numbered by one counter. It lives in memory and
/// starts afresh with the process; sequence strings carry a per-process tag, so a consumer
/// that comes back after a restart can tell its `since` is from before and look at every
/// database once.
public final class DatabaseUpdates: Sendable {
    public enum Kind: String, Sendable { case created, updated, deleted }

    public struct Event: Sendable {
        public var name: String
        public var kind: Kind
        public var seq: Int
    }

    private struct State {
        var seq = 0
        var latest: [String: (kind: Kind, seq: Int)] = [:]
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
            return state.seq
        }
        notifier.publish(seq: seq, commit: false)
    }

    /// The current sequence.
    public var seq: Int { state.withLock { $0.seq } }

    /// Events after `seq`, oldest first, at most `limit`.
    public func events(after seq: Int, limit: Int = Int.max) -> [Event] {
        let all = state.withLock { state in
            state.latest.compactMap { name, event in event.seq > seq ? Event(name: name, kind: event.kind, seq: event.seq) : nil }
        }
        return Array(all.sorted { $0.seq < $1.seq }.prefix(limit))
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
