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
}
