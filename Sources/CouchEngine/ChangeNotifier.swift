import Foundation

/// Wakes tasks waiting for a database's update sequence to pass a value. Waiters cost one
/// continuation each and nothing while idle, so thousands of longpoll or continuous feeds
/// can wait on one server.
public final class ChangeNotifier: Sendable {
    private struct State {
        var latest: Int = 0
        var waiters: [UUID: (after: Int, continuation: CheckedContinuation<Int, Never>)] = [:]
    }
    private let state = Locked(State())
    /// Called after each commit (not for the sequence a database opens at).
    private let onCommit: (@Sendable () -> Void)?

    public init(onCommit: (@Sendable () -> Void)? = nil) {
        self.onCommit = onCommit
    }

    /// The last sequence published (committed).
    public var latest: Int { state.withLock { $0.latest } }

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
        let id = UUID()
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                        let immediate: Int? = self.state.withLock { state in
                            if state.latest > seq { return state.latest }
                            // Cancelled already: `onCancel` has run (or is waiting for this
                            // lock) and would not find the waiter, which would wait forever.
                            if Task.isCancelled { return -1 }
                            state.waiters[id] = (seq, continuation)
                            return nil
                        }
                        if let immediate { continuation.resume(returning: immediate) }
                    }
                    return result > seq
                } onCancel: {
                    let continuation = self.state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
                    continuation?.resume(returning: -1)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
