/// Whether a CouchDB cluster's nodes have lately been down or restarted, from each node's uptime
/// read every few seconds (`/_node/<name>/_system`), as a value-type state machine: readings in,
/// what changed out. While a node is unreachable, and for `window` seconds after a node was last
/// seen unreachable or restarted, the cluster is *disturbed*: a node back (empty, or behind) is
/// refilled by internal replication, which raises no `_db_updates` event, so the consolidator
/// looks again at databases that changed (`LateLooks`) only then, not after every write.
public struct ClusterDisturbances: Sendable, Equatable {
    /// What a reading changed, for the log.
    public enum Change: Sendable, Equatable {
        case unreachable(node: String)
        /// The node's uptime went back: it restarted since the last reading.
        case restarted(node: String, uptime: Double)
        /// The node, first seen, started less than the window ago (it may still be refilling).
        case young(node: String, uptime: Double)
        case reachable(node: String)
    }

    /// How long after the last sign of trouble the cluster counts as disturbed (seconds).
    public let window: Double
    /// A node's uptime at a reading, and when that was.
    struct Reading: Sendable, Equatable {
        var uptime: Double
        var at: Double
    }
    private(set) var lastUptime: [String: Reading] = [:]
    private(set) var unreachable: Set<String> = []
    /// When trouble was last seen (seconds on the caller's clock).
    private(set) var lastTrouble: Double?

    /// Uptime is whole seconds, and read a moment after the clock: a node two seconds short is
    /// not taken to have restarted.
    static let rounding = 2.0

    public init(window: Double) {
        self.window = window
    }

    /// `node` answered with `uptime` seconds at `now`, or could not be asked (`nil`).
    public mutating func observed(_ node: String, uptime: Double?, at now: Double) -> Change? {
        guard let uptime else {
            lastTrouble = now
            return unreachable.insert(node).inserted ? .unreachable(node: node) : nil
        }
        let wasUnreachable = unreachable.remove(node) != nil
        let previous = lastUptime[node]
        lastUptime[node] = Reading(uptime: uptime, at: now)
        // Uptime counts on from the last reading: less than that by more than its rounding, and
        // the node started again in between. A node first seen less than `window` after its
        // start may be refilling still.
        let restarted = previous.map { uptime + Self.rounding < $0.uptime + (now - $0.at) } ?? (uptime < window)
        if restarted {
            lastTrouble = max(lastTrouble ?? -.infinity, now - (previous == nil ? uptime : 0))
            return previous == nil ? .young(node: node, uptime: uptime) : .restarted(node: node, uptime: uptime)
        }
        if wasUnreachable {
            lastTrouble = now
            return .reachable(node: node)
        }
        return nil
    }

    /// Whether a node is unreachable now, or was, or restarted, less than `window` ago.
    public func isDisturbed(at now: Double) -> Bool {
        !unreachable.isEmpty || lastTrouble.map { now - $0 < window } ?? false
    }
}
