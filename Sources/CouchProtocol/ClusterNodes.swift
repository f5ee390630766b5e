/// Which of a CouchDB cluster's nodes to send the next request to, as a value-type state
/// machine: events (a request to a node succeeded, or could not reach it) return what changed
/// (a node down or up again, the whole cluster unreachable or back), and `choose` names the node
/// for a request at a time given by the caller — so failover is tested without network or clock.
///
/// Requests stay on one node while it answers (its connections stay warm); a node that cannot be
/// reached is left for a while (1 s, doubling to 30 s) and then tried again with the next request
/// that has no better choice; when every node is down and none is due for another try, there is
/// no node, and the caller answers at once instead of waiting on connections. A node whose health
/// check (`GET /_up`) answers but refuses — CouchDB's maintenance mode, or a node still being
/// seeded — is withdrawn: never chosen until its check answers 200 again, as a load balancer does.
public struct ClusterNodes: Sendable, Equatable {
    /// A node's state.
    public enum Health: Sendable, Equatable {
        case up
        /// Down since `since` (seconds), after `failures` failures in a row; tried again from `retryAt`.
        case down(since: Double, retryAt: Double, failures: Int, reason: String)
        /// Answering, but its health check says to send it nothing (`status`, e.g.
        /// `maintenance_mode`, `nolb`, `seeding`), since `since`.
        case withdrawn(since: Double, status: String)
    }

    /// What a node's health check (`GET /_up`) found.
    public enum Check: Sendable, Equatable {
        /// 200: take requests.
        case ready
        /// Answered, but not 200: the status it gave (`maintenance_mode`, `nolb`, `seeding`…).
        case refusing(status: String)
        /// No answer in time: left to the requests themselves to find (a slow check on a busy
        /// node is no reason to give it up).
        case unanswered
    }

    /// What an event changed, for the log and the metrics.
    public enum Change: Sendable, Equatable {
        case nodeDown(node: String, reason: String)
        /// The node's health check asks for no requests (`status`: why).
        case nodeWithdrawn(node: String, status: String)
        case nodeUp(node: String, downFor: Double)
        /// Every node is down: nothing can answer.
        case clusterUnreachable(reasons: [String])
        case clusterRecovered(node: String, unreachableFor: Double)
    }

    /// The nodes' names (`host:port`), in the order given.
    public let nodes: [String]
    public private(set) var health: [Health]
    /// The node requests go to while it answers.
    public private(set) var current = 0
    /// When the whole cluster became unreachable, while it is.
    public private(set) var unreachableSince: Double?

    static let firstWait = 1.0
    static let longestWait = 30.0

    public init(nodes: [String]) {
        precondition(!nodes.isEmpty, "a cluster has at least one node")
        self.nodes = nodes
        health = Array(repeating: .up, count: nodes.count)
    }

    public func isUp(_ node: Int) -> Bool { health[node] == .up }

    /// The node for a request at `now`: the current one while up, else the next one up, else the
    /// down node due soonest for another try if its time has come; nil when none may be tried.
    /// `excluding` leaves out nodes this request already failed on.
    public mutating func choose(at now: Double, excluding tried: Set<Int> = []) -> Int? {
        let order = (0..<nodes.count).map { (current + $0) % nodes.count }.filter { !tried.contains($0) }
        if let up = order.first(where: isUp) {
            current = up
            return up
        }
        let due = order.compactMap { node -> (node: Int, at: Double)? in
            guard case let .down(_, retryAt, _, _) = health[node], retryAt <= now else { return nil }
            return (node, retryAt)
        }.min { $0.at < $1.at }
        return due?.node
    }

    /// A request to `node` was answered (whatever its status): the node is up — unless it is
    /// withdrawn, which only its health check ends (a request already sent to it was answered).
    public mutating func succeeded(_ node: Int, at now: Double) -> [Change] {
        guard case let .down(since, _, _, _) = health[node] else { return [] }
        return cameBack(node, since: since, at: now)
    }

    /// `node`'s health check found `check`: a refusal withdraws the node, a 200 brings a
    /// withdrawn or down node back; no answer changes nothing.
    public mutating func checked(_ node: Int, _ check: Check, at now: Double) -> [Change] {
        switch (check, health[node]) {
        case (.unanswered, _), (.ready, .up):
            return []
        case let (.ready, .down(since, _, _, _)), let (.ready, .withdrawn(since, _)):
            return cameBack(node, since: since, at: now)
        case let (.refusing(status), .withdrawn(since, previous)):
            if status != previous { health[node] = .withdrawn(since: since, status: status) }
            return []
        case let (.refusing(status), .down(since, _, _, _)):
            health[node] = .withdrawn(since: since, status: status)
            return []
        case let (.refusing(status), .up):
            health[node] = .withdrawn(since: now, status: status)
            return [.nodeWithdrawn(node: nodes[node], status: status)] + becameUnreachable(at: now)
        }
    }

    mutating func cameBack(_ node: Int, since: Double, at now: Double) -> [Change] {
        health[node] = .up
        current = node
        var changes: [Change] = [.nodeUp(node: nodes[node], downFor: now - since)]
        if let unreachable = unreachableSince {
            unreachableSince = nil
            changes.append(.clusterRecovered(node: nodes[node], unreachableFor: now - unreachable))
        }
        return changes
    }

    /// A request could not reach `node` (`reason` says why): the node is down for a while, longer
    /// with each failure in a row. A withdrawn node stays withdrawn (its health check decides).
    public mutating func failed(_ node: Int, reason: String, at now: Double) -> [Change] {
        switch health[node] {
        case .up:
            health[node] = .down(since: now, retryAt: now + Self.firstWait, failures: 1, reason: reason)
            return [.nodeDown(node: nodes[node], reason: reason)] + becameUnreachable(at: now)
        case let .down(since, _, failures, _):
            let wait = min(Self.longestWait, Self.firstWait * Double(1 << min(failures, 16)))
            health[node] = .down(since: since, retryAt: now + wait, failures: failures + 1, reason: reason)
            return becameUnreachable(at: now)
        case .withdrawn:
            return []
        }
    }

    /// `.clusterUnreachable` when no node is up any more (once, until one is back).
    mutating func becameUnreachable(at now: Double) -> [Change] {
        guard unreachableSince == nil, !health.contains(.up) else { return [] }
        unreachableSince = now
        return [.clusterUnreachable(reasons: zip(nodes, health).map { "\($0): \(Self.why($1))" })]
    }

    /// Why a node takes no requests, for the log and the 503.
    static func why(_ health: Health) -> String {
        switch health {
        case .up: "up"
        case let .down(_, _, _, reason): reason
        case let .withdrawn(_, status): "its /_up answers \(status)"
        }
    }

    /// Why nothing can answer: each node with its last failure.
    public var unreachableReason: String {
        let reasons = zip(nodes, health).map { node, health -> String in
            health == .up ? node : "\(node) (\(Self.why(health)))"
        }
        return
            "The CouchDB cluster cannot be reached: \(reasons.joined(separator: ", ")). Try again when a node is back."
    }
}
