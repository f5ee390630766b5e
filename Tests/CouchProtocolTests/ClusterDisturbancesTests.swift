@testable import CouchProtocol
import Testing

/// `ClusterDisturbances` reading by reading, without network or clock.
@Suite("Whether a cluster's nodes were lately away or restarted (the state machine, without network or clock)")
struct ClusterDisturbancesTests {
    @Test("Nodes long up and answering: never disturbed, however long they run and however their readings are spaced")
    func steady() {
        var state = ClusterDisturbances(window: 600)
        for step in 0..<200 {
            let now = 1_000 + Double(step) * 5 + Double(step % 3) * 0.4  // readings a little late now and then
            for (node, started) in [("a", -5_000.0), ("b", -9_000.0)] {
                // Uptime as CouchDB gives it: whole seconds, read a moment after the clock.
                #expect(state.observed(node, uptime: (now - started - 0.3).rounded(.down), at: now) == nil)
            }
            #expect(!state.isDisturbed(at: now))
        }
    }

    @Test("A node killed and started again between two readings: disturbed from the reading that sees its uptime go back, for the window")
    func restartBetweenReadings() {
        var state = ClusterDisturbances(window: 600)
        #expect(state.observed("a", uptime: 5_000, at: 0) == nil)
        #expect(state.observed("a", uptime: 5_005, at: 5) == nil)
        // Restarted at 7 s: at 10 s it has been up 3 s.
        #expect(state.observed("a", uptime: 3, at: 10) == .restarted(node: "a", uptime: 3))
        #expect(state.isDisturbed(at: 10) && state.isDisturbed(at: 609))
        #expect(state.observed("a", uptime: 8, at: 15) == nil, "counting on from its restart")
        #expect(!state.isDisturbed(at: 611))
    }

    @Test("A restart is seen even when the new uptime is larger than the last reading's, if less than the time since then")
    func restartAfterLongGap() {
        var steady = ClusterDisturbances(window: 60)
        #expect(steady.observed("a", uptime: 100, at: 0) == nil)
        // 300 s later it should be at 400; it says 150: it started again at 150 s.
        #expect(steady.observed("a", uptime: 150, at: 300) == .restarted(node: "a", uptime: 150))
        #expect(steady.isDisturbed(at: 359) && !steady.isDisturbed(at: 360))
    }

    @Test("A node first seen less than the window after its start is young: trouble from its start (it may still be refilling); one up longer is not")
    func firstSight() {
        var young = ClusterDisturbances(window: 600)
        #expect(young.observed("a", uptime: 100, at: 1_000) == .young(node: "a", uptime: 100))
        #expect(young.isDisturbed(at: 1_000) && young.isDisturbed(at: 1_499) && !young.isDisturbed(at: 1_500),
                "disturbed until the window after its start at 900 s")
        var old = ClusterDisturbances(window: 600)
        #expect(old.observed("a", uptime: 700, at: 1_000) == nil)
        #expect(!old.isDisturbed(at: 1_000))
    }

    @Test("An unreachable node: disturbed while it is away and for the window after it answers again; said once each way")
    func unreachable() {
        var state = ClusterDisturbances(window: 600)
        #expect(state.observed("a", uptime: 5_000, at: 0) == nil)
        #expect(state.observed("b", uptime: 5_000, at: 0) == nil)
        #expect(state.observed("b", uptime: nil, at: 5) == .unreachable(node: "b"))
        #expect(state.observed("b", uptime: nil, at: 10) == nil, "said once")
        #expect(state.isDisturbed(at: 2_000), "still away long after")
        // Back without having restarted (a partition healed): disturbed for the window from now.
        #expect(state.observed("b", uptime: 7_000, at: 2_000) == .reachable(node: "b"))
        #expect(state.isDisturbed(at: 2_599) && !state.isDisturbed(at: 2_600))
    }

    @Test("Back after a kill: the restart is what is said, and the window runs from that reading")
    func backRestarted() {
        var state = ClusterDisturbances(window: 600)
        #expect(state.observed("a", uptime: 5_000, at: 0) == nil)
        #expect(state.observed("a", uptime: nil, at: 5) == .unreachable(node: "a"))
        #expect(state.observed("a", uptime: 2, at: 20) == .restarted(node: "a", uptime: 2))
        #expect(state.isDisturbed(at: 619) && !state.isDisturbed(at: 620))
    }
}
