import LTTestSupport
@testable import Replication
import Testing
@testable import TrackerKit

/// `SyncManager.StateMachine`, event by event: which replications run and what the UI is
/// told, with no network, no store and no clock.
@Suite("Device sync's state machine (without network or clock)")
struct SyncStateMachineTests {
    typealias Machine = SyncManager.StateMachine

    @Test("Requests made while a run goes are remembered and run once after it, however many came; each direction on its own")
    func coalescing() {
        var machine = Machine()
        let first = machine.requested(.push)
        #expect(first)
        let shown = machine.runStarting(.push)
        #expect(shown == .syncing(.push, done: 0, total: nil))
        let meanwhile = (0..<3).map { _ in machine.requested(.push) }
        #expect(meanwhile == [false, false, false])
        let pull = machine.requested(.pull)
        #expect(pull, "a pull does not wait for a push")
        _ = machine.succeeded()
        let again = machine.runEnded(.push)
        #expect(again, "asked for meanwhile: runs again")
        _ = machine.runStarting(.push)
        let more = machine.runEnded(.push)
        #expect(!more, "nothing asked for during the second run")
        #expect(machine.runs[.push] == 2)
        let later = machine.requested(.push)
        #expect(later, "a request after the end starts a run")
    }

    @Test("In continuous mode requests start nothing; stopped, they do again; starting twice starts once")
    func continuous() {
        var machine = Machine()
        let starts = [machine.continuousStarting(), machine.continuousStarting()]
        #expect(starts == [true, false])
        let requests = [machine.requested(.push), machine.requested(.pull)]
        #expect(requests == [false, false])
        #expect(machine.runs == [.push: 1, .pull: 1])
        machine.continuousStopped()
        let after = machine.requested(.push)
        #expect(!machine.isContinuous && after)
    }

    @Test("A failure reaching the server shows offline, any other shows error; success shows idle")
    func outcomes() {
        var machine = Machine()
        for text in ["connect(descriptor:addr:size:): Connection refused (errno: 111)", "Timed out", "Network is unreachable", "unknown host"] {
            let shown = machine.failed(text)
            #expect(shown == .offline(text))
        }
        let refused = machine.failed("401 unauthorized: Name or password is incorrect.")
        #expect(refused == .error("401 unauthorized: Name or password is incorrect."))
        #expect(machine.status == refused)
        let done = machine.succeeded()
        #expect(done == .idle && machine.status == .idle)
    }

    @Test("Progress: revisions checked of how many, idle when caught up, offline while retrying; a stopped or failed replication's update shows nothing (its outcome does)")
    func progress() {
        var machine = Machine()
        var update = ReplicationStatus(state: .busy)
        update.missingChecked = 40
        update.changesPending = 80
        var shown = [machine.progress(update, .push)]
        update.changesPending = nil
        shown.append(machine.progress(update, .pull))
        shown.append(machine.progress(ReplicationStatus(state: .idle), .pull))
        var offline = ReplicationStatus(state: .offline)
        shown.append(machine.progress(offline, .pull))
        offline.error = "503 Service Unavailable"
        shown.append(machine.progress(offline, .pull))
        shown.append(machine.progress(ReplicationStatus(state: .stopped), .pull))
        shown.append(machine.progress(ReplicationStatus(state: .error), .pull))
        #expect(shown == [
            .syncing(.push, done: 40, total: 120), .syncing(.pull, done: 40, total: nil), .idle,
            .offline("the server cannot be reached"), .offline("503 Service Unavailable"), nil, nil,
        ])
        #expect(machine.status == .offline("503 Service Unavailable"))
    }

    @Test("Property: whatever the order of requests and ends, a direction never runs twice at once, and every request is followed by a run that starts after it")
    func property() {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<300 {
            var machine = Machine()
            var running: Set<SyncManager.Direction> = []
            // A request not yet served by a run that started after it.
            var unserved: Set<SyncManager.Direction> = []
            for _ in 0..<40 {
                let direction: SyncManager.Direction = Bool.random(using: &generator) ? .push : .pull
                if Bool.random(using: &generator) {
                    unserved.insert(direction)
                    if machine.requested(direction) {
                        #expect(!running.contains(direction))
                        running.insert(direction)
                        _ = machine.runStarting(direction)
                        unserved.remove(direction)
                    }
                } else if running.contains(direction) {
                    if machine.runEnded(direction) {
                        _ = machine.runStarting(direction)
                        unserved.remove(direction)
                    } else {
                        running.remove(direction)
                        #expect(!unserved.contains(direction), "a request was dropped")
                    }
                }
            }
        }
    }
}
