import CouchJSON
import LTTestSupport
import Testing
@testable import TrackerApp

/// The consolidator's following lane (`Consolidator.FollowStateMachine`) and its retry queue,
/// event by event: no network, no clock, no waiting.
@Suite("Consolidator's following lane (the state machine, without network or clock)")
struct ConsolidatorFollowTests {
    typealias Machine = Consolidator.FollowStateMachine

    /// An answer of `_db_updates`: each database with its type of update.
    static func updates(_ rows: [(String, String)], lastSeq: String?) -> JSON {
        var answer: JSONObject = ["results": .array(rows.map { ["db_name": .string($0.0), "type": .string($0.1)] })]
        if let lastSeq { answer["last_seq"] = .string(lastSeq) }
        return .object(answer)
    }

    static func user(_ name: String) -> String { Consolidator.prefix + name }

    @Test("Rounds: the first at once, the next no sooner than 100 ms after the answer; the feed's position carried on, kept when an answer has none")
    func rounds() {
        var machine = Machine(since: "now", lateLooks: [], remembersChanges: false)
        #expect(machine.nextRound <= 0)
        #expect(machine.updatesQuery(at: 0, retriesWaiting: false, disturbed: false) == ["since": "now", "feed": "longpoll", "timeout": "10000"])
        let names = machine.updatesArrived(Self.updates([(Self.user("b"), "updated"), (Self.user("a"), "updated")], lastSeq: "7-x"),
                                           at: 4.25, disturbed: false, due: [])
        #expect(names == [Self.user("a"), Self.user("b")])
        #expect(abs(machine.nextRound - 4.35) < 1e-9)
        #expect(machine.roundEnded(unwritten: [], taken: []) == .round)
        #expect(machine.updatesQuery(at: 4.35, retriesWaiting: false, disturbed: false)["since"] == "7-x")
        _ = machine.updatesArrived(Self.updates([], lastSeq: nil), at: 14.35, disturbed: false, due: [])
        #expect(machine.since == "7-x")
        #expect(machine.updatesFailed() == .pause(2))
    }

    @Test("Only users' databases that hold something new are read: not one just created, not one deleted, not another database")
    func whatARoundReads() {
        var machine = Machine(since: "0", lateLooks: [], remembersChanges: false)
        let names = machine.updatesArrived(Self.updates([
            (Self.user("new"), "created"), (Self.user("gone"), "deleted"), (Self.user("busy"), "updated"),
            ("lt_locations_all", "updated"), ("_users", "updated"), (Self.user("busy"), "updated"),
        ], lastSeq: "9"), at: 1, disturbed: false, due: [Self.user("flaky")])
        #expect(names == [Self.user("busy"), Self.user("flaky")], "the changed one once, and the one whose retry is due")
    }

    @Test("Databases left over by a round are read at the next without waiting for news; a failed write pauses first")
    func leftOver() {
        var machine = Machine(since: "0", lateLooks: [], remembersChanges: false)
        _ = machine.updatesArrived(Self.updates([(Self.user("a"), "updated"), (Self.user("b"), "updated")], lastSeq: "2"), at: 1, disturbed: false, due: [])
        #expect(machine.roundEnded(unwritten: [Self.user("a")], taken: [Self.user("b")]) == .pause(2))
        // Not a long poll: the two are read again whatever the feed says.
        #expect(machine.updatesQuery(at: 3.1, retriesWaiting: false, disturbed: false) == ["since": "2"])
        let again = machine.updatesArrived(Self.updates([], lastSeq: "2"), at: 3.1, disturbed: false, due: [])
        #expect(again == [Self.user("a"), Self.user("b")])
        #expect(machine.roundEnded(unwritten: [], taken: [Self.user("b")]) == .round, "one the other lane holds: no pause")
        #expect(machine.updatesQuery(at: 3.2, retriesWaiting: false, disturbed: false)["feed"] == nil)
        _ = machine.updatesArrived(Self.updates([], lastSeq: "2"), at: 3.2, disturbed: false, due: [])
        #expect(machine.roundEnded(unwritten: [], taken: []) == .round)
        #expect(machine.updatesQuery(at: 3.3, retriesWaiting: true, disturbed: false)["timeout"] == "1000",
                "a retry's wait ends without news: the long poll is short")
    }

    @Test("On a cluster, changes are remembered always and looked at again later only while it is disturbed; the long poll ends by the next look")
    func lateLooks() {
        var machine = Machine(since: "0", lateLooks: [15, 120], remembersChanges: true)
        _ = machine.updatesArrived(Self.updates([(Self.user("a"), "updated")], lastSeq: "1"), at: 0, disturbed: false, due: [])
        _ = machine.roundEnded(unwritten: [], taken: [])
        // Quiet and not disturbed: a long poll of the usual length, and no look.
        #expect(machine.updatesQuery(at: 1, retriesWaiting: false, disturbed: false)["timeout"] == "10000")
        // Disturbed: the poll ends when a's look is due (14 s on), and the look reads it.
        #expect(machine.updatesQuery(at: 1, retriesWaiting: false, disturbed: true)["timeout"] == "10000")
        #expect(machine.updatesQuery(at: 10, retriesWaiting: false, disturbed: true)["timeout"] == "5000")
        #expect(machine.updatesQuery(at: 14.99, retriesWaiting: false, disturbed: true)["timeout"] == "100", "never a poll shorter than 100 ms")
        #expect(machine.updatesArrived(Self.updates([], lastSeq: "1"), at: 15, disturbed: true, due: []) == [Self.user("a")])
        _ = machine.roundEnded(unwritten: [], taken: [])
        // Its next look falls while the cluster is well again: taken off the schedule, not read.
        #expect(machine.updatesArrived(Self.updates([], lastSeq: "1"), at: 135, disturbed: false, due: []).isEmpty)
        _ = machine.roundEnded(unwritten: [], taken: [])
        #expect(machine.updatesQuery(at: 136, retriesWaiting: false, disturbed: true)["timeout"] == "10000", "nothing remembered any more")
    }

    @Test("Without a cluster nothing is remembered, disturbed or not")
    func noLateLooksEmbedded() {
        var machine = Machine(since: "0", lateLooks: [15], remembersChanges: false)
        _ = machine.updatesArrived(Self.updates([(Self.user("a"), "updated")], lastSeq: "1"), at: 0, disturbed: true, due: [])
        _ = machine.roundEnded(unwritten: [], taken: [])
        #expect(machine.updatesQuery(at: 10, retriesWaiting: false, disturbed: true)["timeout"] == "10000")
        #expect(machine.updatesArrived(Self.updates([], lastSeq: "1"), at: 20, disturbed: true, due: []).isEmpty)
    }

    @Test("A database that keeps failing waits 2 s, then twice as long each time, at most a minute; it is due only once its wait is over; copied, it waits no more")
    func retryBackOff() {
        var queue = Consolidator.RetryQueue()
        let start = ContinuousClock.now
        var now = start
        var waits: [Duration] = []
        for attempt in 1...8 {
            #expect(queue.failed("db", refusals: [], unreadable: true, at: now) == attempt)
            let due = queue.waiting["db"]!.due
            waits.append(now.duration(to: due))
            #expect(queue.due(at: due - .milliseconds(1)).isEmpty)
            #expect(queue.due(at: due) == ["db"])
            now = due
        }
        #expect(waits == [2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        let refusal = Consolidator.Refusal(database: "other", id: "x", rev: "1-a", error: "forbidden", reason: "no")
        #expect(queue.failed("other", refusals: [refusal], unreadable: false, at: now) == 1)
        #expect(queue.due(at: now + .seconds(2)) == ["db", "other"])
        queue.copied("db")
        #expect(queue.due(at: now + .seconds(120)) == ["other"])
        #expect(queue.waiting["other"]?.refusals.first?.id == "x" && queue.waiting["other"]?.unreadable == false)
    }

    @Test("Property: whatever the answers, a round reads each name once, in order, and never a database that is not a user's")
    func property() {
        var generator = SeededGenerator(seed: 45)
        for _ in 0..<200 {
            var machine = Machine(since: "0", lateLooks: [5, 50], remembersChanges: Bool.random(using: &generator))
            var now = 0.0
            for _ in 0..<20 {
                let pool = ["a", "b", "c"].map(Self.user) + ["lt_locations_all", "_users", "other"]
                let rows = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                    (pool.randomElement(using: &generator)!, ["created", "updated", "deleted"].randomElement(using: &generator)!)
                }
                let due = Bool.random(using: &generator) ? [Self.user("d")] : []
                now += Double.random(in: 0.1...30, using: &generator)
                let names = machine.updatesArrived(Self.updates(rows, lastSeq: "\(Int(now))"), at: now,
                                                   disturbed: Bool.random(using: &generator), due: due)
                #expect(names == Array(Set(names)).sorted())
                #expect(names.allSatisfy { $0.hasPrefix(Consolidator.prefix) })
                #expect(Set(due).isSubset(of: names))
                let changed = rows.filter { $0.0.hasPrefix(Consolidator.prefix) && $0.1 == "updated" }.map(\.0)
                #expect(Set(changed).isSubset(of: names))
                let left = names.filter { _ in Int.random(in: 0..<4, using: &generator) == 0 }
                _ = machine.roundEnded(unwritten: [], taken: left)
                #expect(machine.again == left)
            }
        }
    }
}
