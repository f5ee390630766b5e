import CouchEngine
import Foundation
import Testing

@Suite("Change notifier", .timeLimit(.minutes(1)))
struct ChangeNotifierTests {
    @Test("A wait in a task cancelled before it starts returns at once (it used to wait forever: nothing would wake it)")
    func cancelledBeforeWaiting() async throws {
        let notifier = ChangeNotifier()
        let answer = Locked<Bool?>(nil)
        // Not awaited: before the fix this task never finished, and the test must fail, not hang.
        Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let woke = await notifier.wait(after: 0, timeout: .seconds(30))
            answer.withLock { $0 = woke }
        }
        for _ in 0..<50 where answer.withLock({ $0 == nil }) { try await Task.sleep(for: .milliseconds(100)) }
        #expect(answer.withLock { $0 } == false)
    }

    @Test("A wait is woken by a later sequence, cancelled while waiting, or ends at its timeout")
    func wakes() async throws {
        let notifier = ChangeNotifier()
        let waiting = Task { await notifier.wait(after: 0, timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        notifier.publish(seq: 1)
        #expect(await waiting.value)
        let cancelled = Task { await notifier.wait(after: 1, timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        cancelled.cancel()
        #expect(await cancelled.value == false)
        let started = ContinuousClock.now
        #expect(await notifier.wait(after: 1, timeout: .milliseconds(200)) == false)
        #expect(started.duration(to: .now) >= .milliseconds(200))
    }
}
