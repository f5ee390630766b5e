import Dispatch
import Foundation

/// Wakes tasks waiting for a database's update sequence to pass a value. Waiters cost one
/// continuation each and nothing while idle, so thousands of longpoll or continuous feeds
/// can wait on one server.
///
/// Timeouts share one dispatch timer per notifier, armed for the earliest deadline: a wait
/// costs a dictionary entry, not a task group with a sleeping child task and a timer of its
/// own (with a thousand listeners and hundreds of commits a second, those were most of the
/// listeners' cost, and every wake left a pending timer behind).
public final class ChangeNotifier: Sendable {
    private struct Waiter {
        var after: Int
        var deadline: DispatchTime?
        var continuation: CheckedContinuation<Int, Never>
    }
    private struct State {
        var latest: Int = 0
        var nextID: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        /// When the timer fires next (nil: not armed).
        var armed: DispatchTime?
        /// Made at the first wait with a timeout (most databases never have one).
        var timer: (any DispatchSourceTimer)?
    }
    private let state = Locked(State())
    /// Called after each commit (not for the sequence a database opens at).
    private let onCommit: (@Sendable () -> Void)?
    /// What a waiter is resumed with when its time is up.
    private static let timedOut = Int.min

    public init(onCommit: (@Sendable () -> Void)? = nil) {
        self.onCommit = onCommit
    }

    deinit {
        state.withLock { $0.timer?.cancel() }
    }

    /// Arms the timer for `deadline` (under the lock).
    private func arm(_ state: inout State, _ deadline: DispatchTime) {
        if state.timer == nil {
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
            timer.setEventHandler { [weak self] in self?.expire() }
            timer.resume()
            state.timer = timer
        }
        state.armed = deadline
        state.timer?.schedule(deadline: deadline, leeway: .milliseconds(5))
    }

    /// The last sequence published (committed).
    public var latest: Int { state.withLock { $0.latest } }

    /// Whether anyone waits for a sequence now.
    var hasWaiters: Bool { state.withLock { !$0.waiters.isEmpty } }

    /// Records a committed sequence and wakes every waiter it satisfies. `commit` is false
    /// for the sequence a database already had when it was opened.
    public func publish(seq: Int, commit: Bool = true) {
        if commit { onCommit?() }
        let ready: [CheckedContinuation<Int, Never>] = state.withLock { state in
            state.latest = max(state.latest, seq)
            let due = state.waiters.filter { $0.value.after < seq }
            for key in due.keys { state.waiters.removeValue(forKey: key) }
            return due.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: seq) }
    }

    /// Wakes every waiter (the database was deleted or the server is stopping).
    public func wakeAll() {
        let all = state.withLock { state in
            defer { state.waiters.removeAll() }
            return state.waiters.values.map(\.continuation)
        }
        for continuation in all { continuation.resume(returning: -1) }
    }

    /// Waits until a sequence greater than `seq` is published, or `timeout` passes.
    /// Returns true when there is something new.
    public func wait(after seq: Int, timeout: Duration) async -> Bool {
        let deadline = ChangeNotifier.deadline(after: timeout)
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                let immediate: Int? = state.withLock { state in
                    if state.latest > seq { return state.latest }
                    // Cancelled already: `onCancel` has run (or is waiting for this lock) and
                    // would not find the waiter, which would wait forever.
                    if Task.isCancelled { return -1 }
                    state.waiters[id] = Waiter(after: seq, deadline: deadline, continuation: continuation)
                    if let deadline, state.armed.map({ deadline < $0 }) ?? true { arm(&state, deadline) }
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            continuation?.resume(returning: -1)
        }
        return result > seq && result != ChangeNotifier.timedOut
    }

    /// The timer fired: waiters whose deadline has come are resumed, and the timer is armed
    /// for the earliest deadline left.
    private func expire() {
        let now = DispatchTime.now()
        let expired: [CheckedContinuation<Int, Never>] = state.withLock { state in
            var expired: [CheckedContinuation<Int, Never>] = []
            var earliest: DispatchTime?
            for (id, waiter) in state.waiters {
                guard let deadline = waiter.deadline else { continue }
                if deadline <= now {
                    expired.append(waiter.continuation)
                    state.waiters.removeValue(forKey: id)
                } else if earliest.map({ deadline < $0 }) ?? true {
                    earliest = deadline
                }
            }
            state.armed = nil
            if let earliest { arm(&state, earliest) }
            return expired
        }
        for continuation in expired { continuation.resume(returning: ChangeNotifier.timedOut) }
    }

    /// When a wait of `timeout` from now ends; nil for one too long to matter (years).
    static func deadline(after timeout: Duration) -> DispatchTime? {
        let (seconds, attoseconds) = timeout.components
        guard seconds < 10 * 365 * 86_400 else { return nil }
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        return .now() + .nanoseconds(Int(nanoseconds))
    }
}
