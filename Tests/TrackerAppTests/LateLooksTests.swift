import LTTestSupport
import Testing
@testable import TrackerApp

/// `LateLooks` event by event, without a clock.
@Suite("Late looks at changed databases (the state machine, without network or clock)")
struct LateLooksTests {
    @Test("A database is looked at again after each delay from its last change, then forgotten; a change starts its looks over")
    func schedule() {
        var looks = LateLooks(delays: [60, 300])
        looks.changed(["a", "b"], at: 0)
        #expect(looks.due(at: 59).isEmpty)
        looks.changed(["b"], at: 30)  // b keeps changing: its first look moves
        #expect(looks.due(at: 60) == ["a"])
        #expect(looks.due(at: 89).isEmpty)
        #expect(looks.due(at: 90) == ["b"])
        #expect(looks.wait(at: 100) == 260, "a's second look, 300 s after its first")
        #expect(looks.due(at: 360) == ["a"])
        #expect(looks.due(at: 390) == ["b"])
        #expect(looks.pending.isEmpty && looks.wait(at: 400) == nil)
    }

    @Test("Never more than its limit of databases remembered; those already remembered still move")
    func bounded() {
        var looks = LateLooks(delays: [10], limit: 2)
        looks.changed(["a", "b", "c"], at: 0)
        #expect(looks.pending.count == 2)
        let kept = looks.pending.keys.sorted()
        looks.changed(kept, at: 5)
        #expect(looks.due(at: 14).isEmpty && looks.due(at: 15) == kept)
    }

    @Test("Seeded random changes and rounds: the heap gives exactly what a pass over every remembered database gives", arguments: [1, 2, 3, 4, 5])
    func sameAsTheSimpleModel(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let delays: [Double] = [15, 120, 600]
        var looks = LateLooks(delays: delays, limit: 40)
        // The model: every remembered database and its next look, scanned whole each round.
        var model: [String: (due: Double, step: Int)] = [:]
        var now = 0.0
        for _ in 0..<3_000 {
            now += Double(Int.random(in: 0...40, using: &random)) / 4
            if Bool.random(using: &random) {
                let names = (0..<Int.random(in: 1...6, using: &random)).map { _ in "db\(Int.random(in: 0..<60, using: &random))" }
                looks.changed(names, at: now)
                for name in names where model[name] != nil || model.count < 40 { model[name] = (now + delays[0], 0) }
            }
            let expected = model.filter { $0.value.due <= now }.map(\.key).sorted()
            for name in expected {
                let step = model[name]!.step + 1
                model[name] = step < delays.count ? (now + delays[step], step) : nil
            }
            #expect(looks.due(at: now) == expected)
            #expect(looks.wait(at: now) == model.values.map(\.due).min().map { max(0, $0 - now) })
            #expect(Set(looks.pending.keys) == Set(model.keys))
        }
    }

    @Test("A database that changes without pause leaves no growing heap behind: one look after it stops")
    func busyDatabase() {
        var looks = LateLooks(delays: [15])
        for i in 0..<100_000 { looks.changed(["busy"], at: Double(i) / 100) }
        #expect(looks.pending.count == 1)
        #expect(looks.due(at: 1_014).isEmpty && looks.due(at: 1_015) == ["busy"] && looks.pending.isEmpty)
    }
}
