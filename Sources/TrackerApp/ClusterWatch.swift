import CouchJSON
public import CouchProtocol
import Foundation
import HTTPTypes
public import Logging
import NIOConcurrencyHelpers

/// Reads every node's uptime on a CouchDB cluster every few seconds (`/_membership`, then
/// `/_node/<name>/_system` through whichever node answers) and keeps `ClusterDisturbances`: the
/// consolidator asks `isDisturbed` before its late looks, which are needed only while a node is
/// away or refilling. Says in the log when a node becomes unreachable, restarts or is back.
public final class ClusterWatch: Sendable {
    let couch: any CouchClient
    let logger: Logger
    let interval: Duration
    /// Minutes of `window`, for the log.
    let windowMinutes: Int
    let state: NIOLockedValueBox<ClusterDisturbances>
    let origin = ContinuousClock.now

    /// `window`: how long after a node was away or restarted the cluster counts as disturbed —
    /// longer than the consolidator's last late look (10 minutes).
    public init(
        couch: any CouchClient, window: Duration = .seconds(660), interval: Duration = .seconds(5),
        logger: Logger = Logger(label: "lt.cluster")
    ) {
        self.couch = couch
        self.logger = logger
        self.interval = interval
        windowMinutes = Int(window.seconds / 60)
        state = NIOLockedValueBox(ClusterDisturbances(window: window.seconds))
    }

    var now: Double { origin.duration(to: .now).seconds }

    /// Whether a node is away, or was away or restarted within the window.
    public var isDisturbed: Bool {
        let now = now
        return state.withLockedValue { $0.isDisturbed(at: now) }
    }

    /// Reads the nodes' uptimes until cancelled.
    public func run() async {
        var known: [String] = []
        while !Task.isCancelled {
            // The cluster's nodes, and those the answering node is connected to: one missing
            // from those is away without asking it (asking would wait for Erlang to give up on it).
            var connected: Set<String> = []
            let membership = try? await couch.request(.get, "/_membership", query: [:], body: nil)
            if let membership, membership.ok {
                known = (membership.json["cluster_nodes"]?.arrayValue ?? []).compactMap(\.stringValue)
                connected = Set((membership.json["all_nodes"]?.arrayValue ?? []).compactMap(\.stringValue))
            }
            for node in known {
                guard connected.contains(node) else {
                    record(node, uptime: nil)
                    continue
                }
                let reply = try? await couch.request(.get, "/_node/\(node)/_system", query: [:], body: nil)
                let uptime = reply.flatMap { $0.ok ? $0.json["uptime"]?.doubleValue : nil }
                record(node, uptime: uptime)
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// One node's reading, and the log line for what it changed.
    func record(_ node: String, uptime: Double?) {
        let now = now
        let change = state.withLockedValue { $0.observed(node, uptime: uptime, at: now) }
        switch change {
        case let .unreachable(node)?:
            logger.warning(
                "CouchDB node \(node) cannot be reached: changed databases are looked at again later until it has been back for \(windowMinutes) minutes"
            )
        case let .restarted(node, uptime)?:
            logger.warning(
                "CouchDB node \(node) started \(Int(uptime)) s ago: internal replication refills it without telling the consolidator, so changed databases are looked at again later for \(windowMinutes) minutes"
            )
        case let .young(node, uptime)?:
            logger.notice(
                "CouchDB node \(node) has been up \(Int(uptime)) s: changed databases are looked at again later until it has been up \(windowMinutes) minutes, in case it is still being refilled"
            )
        case let .reachable(node)?:
            logger.notice("CouchDB node \(node) answers again")
        case nil:
            break
        }
    }
}
