import CouchJSON
import LTTestSupport
import Testing
@testable import Replication

/// The replicator's pipeline, event by event: no network, no clock, no sleeping.
@Suite("Replication's pipeline (without network or clock)")
struct PipelineStateMachineTests {
    typealias Machine = Replication.PipelineStateMachine

    @Test("One-shot: reads up to its depth ahead, writes in order, checkpoints the source's end once caught up, then finishes")
    func oneShot() {
        var machine = Machine(since: 0, depth: 2, continuous: false, checkpointInterval: .seconds(5))
        #expect(machine.next() == .read(from: 0))
        machine.changesRead(count: 10, lastSeq: 10)
        #expect(machine.next() == .read(from: 10))
        machine.changesRead(count: 10, lastSeq: 20)
        #expect(machine.next() == .writeOldest, "two batches ahead: the oldest is written before reading more")
        machine.batchWritten(lastSeq: 10, at: .seconds(1))
        #expect(machine.next() == .read(from: 20))
        machine.changesRead(count: 0, lastSeq: 25)  // the rest is filtered out: the source's end is 25
        #expect(machine.next() == .writeOldest)
        machine.batchWritten(lastSeq: 20, at: .seconds(2))
        #expect(machine.next() == .checkpoint(25), "caught up: the source's end, with nothing in flight")
        machine.checkpointSaved(25, at: .seconds(2))
        #expect(machine.next() == .finish)
        #expect(machine.since == 25)
        #expect(machine.unsavedProgress == Optional<JSON>.none)
    }

    @Test("Nothing new since the checkpoint: no checkpoint is written, the run just finishes")
    func nothingNew() {
        var machine = Machine(since: "7-abc", depth: 3, continuous: false, checkpointInterval: .seconds(5))
        #expect(machine.next() == .read(from: "7-abc"))
        machine.changesRead(count: 0, lastSeq: "7-abc")
        #expect(machine.next() == .finish)
    }

    @Test("A source that answers no last_seq when empty leaves the position where the last batch ended")
    func nullEnd() {
        var machine = Machine(since: 0, depth: 1, continuous: false, checkpointInterval: .seconds(5))
        _ = machine.next()
        machine.changesRead(count: 3, lastSeq: 3)
        #expect(machine.next() == .writeOldest)
        machine.batchWritten(lastSeq: 3, at: .seconds(1))
        #expect(machine.next() == .read(from: 3))
        machine.changesRead(count: 0, lastSeq: .null)
        #expect(machine.next() == .checkpoint(3))
    }

    @Test("While batches flow, a checkpoint is written at most once per interval, naming the last batch written")
    func checkpointInterval() {
        var machine = Machine(since: 0, depth: 1, continuous: false, checkpointInterval: .seconds(5))
        var checkpoints: [(JSON, Duration)] = []
        for i in 1...12 {
            let now = Duration.seconds(i)
            #expect(machine.next() == .read(from: .int(i - 1)))
            machine.changesRead(count: 1, lastSeq: .int(i))
            #expect(machine.next() == .writeOldest)
            machine.batchWritten(lastSeq: .int(i), at: now)
            if case let .checkpoint(seq) = machine.next() {
                checkpoints.append((seq, now))
                machine.checkpointSaved(seq, at: now)
            }
        }
        #expect(checkpoints.map(\.0) == [5, 10])
        #expect(machine.unsavedProgress == 12, "what a cancelled run saves on its way out")
    }

    @Test("Continuous: once caught up it checkpoints, waits on the source from there, and reads again when the source changes")
    func continuous() {
        var machine = Machine(since: 0, depth: 2, continuous: true, checkpointInterval: .seconds(5))
        _ = machine.next()
        machine.changesRead(count: 4, lastSeq: 4)
        #expect(machine.next() == .read(from: 4))
        machine.changesRead(count: 0, lastSeq: 4)
        #expect(machine.next() == .writeOldest)
        machine.batchWritten(lastSeq: 4, at: .seconds(1))
        #expect(machine.next() == .checkpoint(4))
        machine.checkpointSaved(4, at: .seconds(1))
        #expect(machine.next() == .waitForChanges(since: 4))
        #expect(machine.next() == .waitForChanges(since: 4), "still waiting until the source changes")
        machine.sourceChanged()
        #expect(machine.next() == .read(from: 4))
        machine.changesRead(count: 0, lastSeq: 4)
        #expect(machine.next() == .waitForChanges(since: 4), "a wait that timed out with nothing new: no checkpoint, wait again")
    }

    /// Plays a replication of `total` changes through the machine with the owner's choices
    /// made at random (batch sizes, how long writes take, filtered tails), checking after every
    /// step what must always hold.
    @Test("Seeded: never more batches ahead than the depth, batches written in the order read, checkpoints only forward and never past what is written, and the end checkpointed",
          arguments: 0..<40)
    func randomRuns(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let total = Int.random(in: 0...200, using: &random)
        let depth = Int.random(in: 1...4, using: &random)
        let filteredTail = Int.random(in: 0...5, using: &random)
        var machine = Machine(since: 0, depth: depth, continuous: false, checkpointInterval: .seconds(Int.random(in: 0...10, using: &random)))
        var readUpTo = 0, written = 0, now = Duration.zero
        var inFlight: [Int] = []  // the batches read, by their last sequence, oldest first
        var checkpoints: [Int] = []
        for step in 0... {
            try #require(step < 10_000, "the run ends")
            switch machine.next() {
            case let .read(from):
                #expect(from == .int(readUpTo))
                #expect(inFlight.count < depth)
                let count = min(Int.random(in: 1...30, using: &random), total - readUpTo)
                if count == 0 {
                    machine.changesRead(count: 0, lastSeq: .int(total + filteredTail))
                } else {
                    readUpTo += count
                    inFlight.append(readUpTo)
                    machine.changesRead(count: count, lastSeq: .int(readUpTo))
                }
            case .writeOldest:
                let oldest = try #require(inFlight.first)
                inFlight.removeFirst()
                now += .seconds(Int.random(in: 0...3, using: &random))
                written = oldest
                machine.batchWritten(lastSeq: .int(oldest), at: now)
            case let .checkpoint(seq):
                let value = try #require(seq.intValue)
                #expect(value <= (inFlight.isEmpty && readUpTo == total ? total + filteredTail : written), "never past what is written")
                #expect(value > (checkpoints.last ?? 0), "only forward")
                checkpoints.append(value)
                machine.checkpointSaved(seq, at: now)
            case .waitForChanges:
                Issue.record("a one-shot replication does not wait")
                return
            case .finish:
                #expect(inFlight.isEmpty)
                #expect(written == total)
                #expect(machine.since == .int(total == 0 && filteredTail == 0 ? 0 : total + filteredTail))
                #expect(machine.unsavedProgress == Optional<JSON>.none)
                #expect(checkpoints.last ?? 0 == (total + filteredTail), "the end is checkpointed")
                return
            }
        }
    }
}
