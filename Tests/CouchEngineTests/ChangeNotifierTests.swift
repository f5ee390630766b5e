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

    @Test("Many waits with different timeouts share one timer: each ends at its own time, and a commit still wakes the others")
    func sharedTimer() async throws {
        let notifier = ChangeNotifier()
        let clock = ContinuousClock()
        let began = clock.now
        let timeouts = [120, 60, 240, 30, 180]
        let ended = await withTaskGroup(of: (Int, Duration, Bool).self) { group in
            for ms in timeouts {
                group.addTask { (ms, .zero, await notifier.wait(after: 0, timeout: .milliseconds(ms))) }
            }
            group.addTask { (100_000, .zero, await notifier.wait(after: 0, timeout: .seconds(30))) }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(400))
                notifier.publish(seq: 1)
                return (-1, .zero, false)
            }
            var out: [(Int, Duration, Bool)] = []
            for await result in group where result.0 >= 0 { out.append((result.0, began.duration(to: clock.now), result.2)) }
            return out
        }
        for (ms, took, woke) in ended {
            if ms == 100_000 {
                #expect(woke && took >= .milliseconds(390) && took < .seconds(5), "the long wait: \(took)")
            } else {
                #expect(!woke && took >= .milliseconds(ms - 10) && took < .milliseconds(ms + 350), "\(ms) ms: \(took)")
            }
        }
    }
}
