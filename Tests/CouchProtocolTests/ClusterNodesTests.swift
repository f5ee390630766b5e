@testable import CouchProtocol
import CouchJSON
import HTTPTypes
import LTTestSupport
import Testing

@Suite("Failing over between a cluster's nodes (the state machine, without network or clock)")
struct ClusterNodesTests {
    @Test("Requests stay on a node while it answers, move on when it cannot be reached, try it again after a wait that doubles up to 30 s, and say each change once")
    func failover() {
        var nodes = ClusterNodes(nodes: ["a:5984", "b:5984", "c:5984"])
        #expect(nodes.choose(at: 0) == 0 && nodes.choose(at: 1) == 0)
        #expect(nodes.failed(0, reason: "connection refused", at: 10) == [.nodeDown(node: "a:5984", reason: "connection refused")])
        #expect(nodes.choose(at: 10) == 1 && nodes.choose(at: 11) == 1, "the next node, and it stays there")
        #expect(nodes.succeeded(1, at: 11).isEmpty)
        // b goes too: c; then c: nothing answers, said once, and nothing is tried before a wait.
        #expect(nodes.failed(1, reason: "no connection within 2 s", at: 12) == [.nodeDown(node: "b:5984", reason: "no connection within 2 s")])
        #expect(nodes.choose(at: 12) == 2)
        let all = nodes.failed(2, reason: "connection refused", at: 12.5)
        #expect(all.count == 2 && all[1] == .clusterUnreachable(reasons: ["a:5984: connection refused", "b:5984: no connection within 2 s", "c:5984: connection refused"]))
        #expect(nodes.unreachableSince == 12.5 && nodes.unreachableReason.contains("b:5984 (no connection within 2 s)"))
        #expect(nodes.choose(at: 10.9) == nil, "no node is due before its wait")
        // a is due first (down at 10, tried again from 11); failing again, its wait doubles.
        #expect(nodes.choose(at: 13) == 0)
        #expect(nodes.failed(0, reason: "connection refused", at: 13).isEmpty, "still down: nothing new to say")
        if case let .down(since, retryAt, failures, _) = nodes.health[0] { #expect(since == 10 && retryAt == 15 && failures == 2) } else { Issue.record("a is down") }
        // One request tries each due node once (`excluding`), then has none.
        #expect(nodes.choose(at: 14, excluding: [1]) == 2 && nodes.choose(at: 14, excluding: [1, 2]) == nil)
        // b answers: up again, the cluster back, requests stay on b.
        let back = nodes.succeeded(1, at: 20)
        #expect(back == [.nodeUp(node: "b:5984", downFor: 8), .clusterRecovered(node: "b:5984", unreachableFor: 7.5)])
        #expect(nodes.unreachableSince == nil && nodes.choose(at: 21) == 1 && nodes.choose(at: 100) == 1)
        // The wait never exceeds 30 s however often a node fails.
        for t in 0..<40 { _ = nodes.failed(0, reason: "gone", at: 200 + Double(t)) }
        if case let .down(_, retryAt, _, _) = nodes.health[0] { #expect(retryAt == 239 + 30) } else { Issue.record("a is down") }
    }

    @Test("A node whose health check refuses (maintenance mode, seeding) is withdrawn: never chosen, not brought back by an answer to a request already sent, only by its check answering 200")
    func withdrawn() {
        var nodes = ClusterNodes(nodes: ["a:5984", "b:5984", "c:5984"])
        #expect(nodes.checked(0, .ready, at: 1).isEmpty && nodes.checked(0, .unanswered, at: 1).isEmpty, "an up node's 200, or a slow check, changes nothing")
        #expect(nodes.checked(0, .refusing(status: "maintenance_mode"), at: 2) == [.nodeWithdrawn(node: "a:5984", status: "maintenance_mode")])
        #expect(nodes.choose(at: 2) == 1 && nodes.choose(at: 1000) == 1, "requests go to b, and a is never due")
        #expect(nodes.succeeded(0, at: 3).isEmpty && !nodes.isUp(0), "an answer to a request sent before does not end it")
        #expect(nodes.failed(0, reason: "connection refused", at: 4).isEmpty && !nodes.isUp(0))
        #expect(nodes.checked(0, .refusing(status: "seeding"), at: 5).isEmpty, "said once")
        #expect(nodes.checked(0, .unanswered, at: 6).isEmpty && !nodes.isUp(0))
        // b and c fail: nothing answers, and the 503 says why a is out.
        _ = nodes.failed(1, reason: "connection refused", at: 7)
        let all = nodes.failed(2, reason: "connection refused", at: 8)
        #expect(all.last == .clusterUnreachable(reasons: ["a:5984: its /_up answers seeding", "b:5984: connection refused", "c:5984: connection refused"]))
        #expect(nodes.unreachableReason.contains("a:5984 (its /_up answers seeding)"))
        #expect(nodes.choose(at: 7.9) == nil, "neither the withdrawn node nor one within its wait")
        #expect(nodes.choose(at: 8.5) == 1, "b once its wait is over, never a")
        // a's check answers 200: back, and the cluster with it; requests go to a.
        #expect(nodes.checked(0, .ready, at: 10) == [.nodeUp(node: "a:5984", downFor: 8), .clusterRecovered(node: "a:5984", unreachableFor: 2)])
        #expect(nodes.choose(at: 10) == 0)
        // A down node whose check answers 200 is back before any request tries it; one whose
        // check refuses becomes withdrawn, quietly (its going was said already).
        #expect(nodes.checked(1, .ready, at: 11) == [.nodeUp(node: "b:5984", downFor: 4)])
        #expect(nodes.checked(2, .refusing(status: "maintenance_mode"), at: 12).isEmpty)
        #expect(nodes.health[2] == .withdrawn(since: 8, status: "maintenance_mode"))
    }

    @Test("Whatever happens, no node is chosen before its wait, the cluster is unreachable exactly while every node is down, and each outage of a node is said down once and up once",
          arguments: [1 as UInt64, 2, 3, 4, 5])
    func invariants(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let count = Int.random(in: 1...4, using: &random)
        var nodes = ClusterNodes(nodes: (0..<count).map { "n\($0):5984" })
        var now = 0.0
        var said: [String: [String]] = [:]  // per node: "down"/"up" in order
        var unreachable = false
        for _ in 0..<2000 {
            now += Double.random(in: 0...2, using: &random)
            let tried = Set((0..<count).filter { _ in Int.random(in: 0..<5, using: &random) == 0 })
            guard let node = nodes.choose(at: now, excluding: tried) else {
                #expect(!(0..<count).contains { !tried.contains($0) && nodes.isUp($0) }, "nil only when no untried node is up")
                continue
            }
            #expect(!tried.contains(node))
            if case let .down(_, retryAt, _, _) = nodes.health[node] { #expect(retryAt <= now, "a down node only once its wait is over") }
            if case .withdrawn = nodes.health[node] { Issue.record("a withdrawn node is never chosen") }
            var changes = Bool.random(using: &random) ? nodes.succeeded(node, at: now) : nodes.failed(node, reason: "x", at: now)
            // Now and then a node's health check: ready, refusing (maintenance) or unanswered.
            if Int.random(in: 0..<4, using: &random) == 0 {
                let check: ClusterNodes.Check = [.ready, .refusing(status: "maintenance_mode"), .unanswered].randomElement(using: &random)!
                changes += nodes.checked(Int.random(in: 0..<count, using: &random), check, at: now)
            }
            for change in changes {
                switch change {
                case let .nodeDown(name, _), let .nodeWithdrawn(name, _): said[name, default: []].append("down")
                case let .nodeUp(name, _): said[name, default: []].append("up")
                case .clusterUnreachable: #expect(!unreachable); unreachable = true
                case .clusterRecovered: #expect(unreachable); unreachable = false
                }
            }
            #expect(unreachable == !(0..<count).contains { nodes.isUp($0) })
            #expect((nodes.unreachableSince != nil) == unreachable)
        }
        for (_, events) in said {
            #expect(zip(events, events.dropFirst()).allSatisfy { $0 != $1 }, "down and up alternate")
            #expect(events.first == "down")
        }
    }

    @Test("After a cut-off try, only what finds its first try when repeated is sent to another node: reads (by GET or POST), PUTs, and copies that keep their revisions")
    func repeatableRequests() {
        #expect(FailoverCouch.repeatable(.get, "/db/doc", body: nil))
        #expect(FailoverCouch.repeatable(.put, "/db", body: nil))
        #expect(FailoverCouch.repeatable(.put, "/db/doc", body: ["a": 1]))
        #expect(FailoverCouch.repeatable(.post, "/db/_all_docs", body: ["keys": []]))
        #expect(FailoverCouch.repeatable(.post, "/db/_bulk_docs", body: ["docs": [], "new_edits": false]))
        #expect(!FailoverCouch.repeatable(.post, "/db/_bulk_docs", body: ["docs": []]), "new revisions: a second try makes them again")
        #expect(!FailoverCouch.repeatable(.post, "/db", body: ["a": 1]), "a document without an id: a second try makes a second one")
        #expect(!FailoverCouch.repeatable(.delete, "/db/doc", body: nil))
    }
}
