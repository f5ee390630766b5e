public import CouchJSON
import Foundation

/// The latest changes of databases that may be closed (users' databases), kept in memory, so
/// that `_changes` since a recent sequence is answered without opening the database or waiting
/// behind its writes.
///
/// Why: the consolidator reads every user database shortly after each write to it. With many
/// more active databases than can stay open, that read reopened a file the writes had just
/// closed and queued behind that database's writes; at 10,000 active users the reads cost
/// more than the writes and consolidation fell behind for good. From memory a read costs
/// microseconds.
///
/// Each database's record (its tail) covers every document whose latest change is after the
/// tail's `floor`: asked for changes since `floor` or later, it answers exactly as the database
/// would; asked for anything older, or for documents it does not hold (an attachment, a winner
/// that was not the revision written), it answers nil and the caller reads the database.
/// A tail starts when its database opens, at the database's sequence, and follows every commit;
/// a commit it cannot follow (a purge, a sequence it did not see) restarts it empty at the new
/// sequence. Memory is bounded: past `budget` bytes the oldest changes of all tails go first
/// (raising their tails' floors).
public final class RecentChanges: Sendable {
    /// One document's change, as a commit leaves it.
    public struct Change: Sendable {
        public var seq: Int
        public var id: String
        /// The winning revision first, then the other leaves (`style=all_docs`).
        public var leaves: [String]
        public var deleted: Bool
        /// The winning revision as `include_docs` shows it (JSON text); nil when the commit
        /// did not have it at hand.
        public var doc: [UInt8]?
        /// A later change of the same document came after it (so `_changes` skips it).
        var superseded = false

        var bytes: Int { 96 + id.utf8.count + leaves.reduce(0) { $0 + 16 + $1.utf8.count } + (doc?.count ?? 0) }
    }

    /// A page of changes, ready to answer `_changes` with.
    public struct Page: Sendable {
        public var rows: [JSON]
        public var lastSeq: String
        public var pending: Int
    }

    private struct Tail {
        /// The database's sequence strings' suffix (`-<tag>`): tells two databases of one name apart.
        var suffix: String
        /// Every document changed after this sequence is in `changes`.
        var floor: Int
        /// The database's update sequence this tail has seen.
        var seq: Int
        /// By increasing sequence; a document's earlier changes stay until compacted.
        var changes: [Change] = []
        /// Each document's latest sequence.
        var latest: [ExactID: Int] = [:]
    }

    private struct State {
        var tails: [String: Tail] = [:]
        /// Every change held, oldest first from `head` on, for trimming to the budget.
        var order: [(name: String, seq: Int, bytes: Int)] = []
        var head = 0
        var bytes = 0

        mutating func popOldest() -> (name: String, seq: Int, bytes: Int)? {
            guard head < order.count else { return nil }
            let oldest = order[head]
            head += 1
            if head >= 4096, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
            return oldest
        }
    }

    private let state = Locked(State())
    /// Most bytes of changes held, all databases together.
    public let budget: Int

    public init(budget: Int = 32 << 20) {
        self.budget = budget
    }

    /// Starts following a database that has just opened at `seq`, unless its tail is still
    /// current (opened before, closed, and nothing written since).
    func begin(_ name: String, suffix: String, seq: Int) {
        state.withLock { state in
            if let tail = state.tails[name], tail.suffix == suffix, tail.seq == seq { return }
            state.tails[name] = Tail(suffix: suffix, floor: seq, seq: seq)
        }
    }

    /// A commit took the database from sequence `before` to `after` with these changes (one
    /// per sequence step, in order); `complete` is false when it also changed documents in
    /// ways not listed (a purge). Ignored for a database not followed (or another one of the
    /// same name).
    func record(_ name: String, suffix: String, from before: Int, to after: Int, changes: [Change], complete: Bool) {
        guard before != after || !complete else { return }
        state.withLock { state in
            guard state.tails[name]?.suffix == suffix, var tail = state.tails.removeValue(forKey: name) else { return }
            defer { state.tails[name] = tail }  // taken out meanwhile: edited without a copy
            guard complete, tail.seq == before, changes.count == after - before else {
                tail = Tail(suffix: suffix, floor: after, seq: after)
                return
            }
            for change in changes {
                let id = ExactID(change.id)
                if let earlier = tail.latest[id] {
                    let index = tail.changes.partitionPoint { $0.seq < earlier }
                    if index < tail.changes.count, tail.changes[index].seq == earlier {
                        tail.changes[index].superseded = true
                    }
                }
                tail.changes.append(change)
                tail.latest[id] = change.seq
                state.order.append((name, change.seq, change.bytes))
                state.bytes += change.bytes
            }
            tail.seq = after
            if tail.changes.count >= 64, tail.changes.count > 2 * tail.latest.count {
                tail.changes.removeAll(where: \.superseded)
            }
            trim(&state, keeping: name, &tail)
        }
    }

    /// Drops the oldest changes until the budget holds with an eighth to spare (so that a busy
    /// database trims once per few megabytes, not at every commit). `name`'s tail is being
    /// edited by the caller (taken out of the dictionary), so it is trimmed through `current`.
    /// Each tail is cut once, through the newest of its changes dropped: cutting it change by
    /// change moved the rest of its changes each time, a cost that grew with the tail (a
    /// 200,000-location import spent nearly a quarter of its time there).
    private func trim(_ state: inout State, keeping name: String, _ current: inout Tail) {
        guard state.bytes > budget else { return }
        var through: [String: Int] = [:]
        while state.bytes > budget - budget / 8, let oldest = state.popOldest() {
            state.bytes -= oldest.bytes
            through[oldest.name] = max(through[oldest.name] ?? oldest.seq, oldest.seq)
        }
        for (tailName, seq) in through {
            if tailName == name {
                RecentChanges.drop(through: seq, &current)
            } else if var tail = state.tails.removeValue(forKey: tailName) {
                RecentChanges.drop(through: seq, &tail)
                state.tails[tailName] = tail
            }
        }
    }

    private static func drop(through seq: Int, _ tail: inout Tail) {
        guard seq > tail.floor else { return }
        tail.floor = min(seq, tail.seq)
        let kept = tail.changes.partitionPoint { $0.seq <= seq }
        for change in tail.changes[..<kept] where !change.superseded {
            tail.latest[ExactID(change.id)] = nil
        }
        tail.changes.removeFirst(kept)
    }

    /// Stops following a database (deleted).
    func forget(_ name: String) {
        _ = state.withLock { $0.tails.removeValue(forKey: name) }
    }

    /// Stops following a database that closed with no change held: its tail would only say
    /// "nothing since", and the next open starts a new one at the file's sequence. With a
    /// million users each database ever opened kept a tail otherwise.
    func forgetIfEmpty(_ name: String) {
        state.withLock { state in
            if state.tails[name]?.changes.isEmpty == true { state.tails.removeValue(forKey: name) }
        }
    }

    /// `_changes` after `since` (at most `limit` rows), as the database would answer it; nil
    /// when this record does not cover it (not followed, `since` before the tail's floor, or a
    /// document wanted that is not held).
    public func page(_ name: String, since: Int, limit: Int?, includeDocs: Bool, allLeaves: Bool) -> Page? {
        let limit = limit ?? Int.max
        // The page's changes taken under the lock, the rest only counted: a page's cost does not
        // grow with the changes held after it (it filtered every one of them, each by a lookup,
        // while a large import ran ahead of the consolidator reading it).
        let found = state.withLock { state -> (suffix: String, seq: Int, changes: [Change], after: Int)? in
            guard let tail = state.tails[name], since >= tail.floor else { return nil }
            var index = tail.changes.partitionPoint { $0.seq <= since }
            var page: [Change] = []
            while index < tail.changes.count, page.count < limit {
                if !tail.changes[index].superseded { page.append(tail.changes[index]) }
                index += 1
            }
            let after = tail.changes[index...].count { !$0.superseded }
            return (tail.suffix, tail.seq, page, after)
        }
        guard let found else { return nil }
        let current = found.changes
        var rows: [JSON] = []
        for change in current.prefix(limit) {
            var row: JSONObject = ["seq": .string(String(change.seq) + found.suffix), "id": .string(change.id)]
            row["changes"] = .array((allLeaves ? change.leaves : [change.leaves[0]]).map { ["rev": .string($0)] })
            if change.deleted { row["deleted"] = true }
            if includeDocs {
                guard let doc = change.doc, let parsed = try? JSON.parse(doc) else { return nil }
                row["doc"] = parsed
            }
            rows.append(.object(row))
        }
        let lastSeq = rows.count < limit ? max(since, found.seq) : current[rows.count - 1].seq
        return Page(rows: rows, lastSeq: String(lastSeq) + found.suffix, pending: found.after)
    }
}
