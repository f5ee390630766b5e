import CouchEngine
import CouchProtocol
import Foundation
import Logging
import Replication
import TrackerApp

/// In cluster mode, this server's own copies of the cluster databases it needs geo indexes
/// for (CouchDB has none): `lt_places` and the analysts' database, kept by continuous pull
/// replications (checkpointed, so a restart resumes), with the cluster's purges followed.
struct ClusterMirrors {
    private let tasks: [Task<Void, Never>]

    /// Stops the replications and the purge follower.
    func cancel() { tasks.forEach { $0.cancel() } }

    /// Nothing to mirror without a cluster. Places are few and every device asks for them:
    /// they are brought up to date before this returns. Replications read from a node that
    /// answers, and move to another when theirs stops answering.
    static func start(
        _ cluster: FailoverCouch?, service: TrackerService, store: DatabaseStore, logger: Logger
    ) async throws -> ClusterMirrors {
        guard let cluster else { return ClusterMirrors(tasks: []) }
        var copied: (any Error)?
        for _ in 0..<3 {
            var options = ReplicationOptions()
            options.maxRetries = 3
            do {
                _ = try await replication(
                    TrackerService.placesDB, from: await cluster.answeringNodeURL(), into: store, options: options,
                    logger: logger
                ).run()
                copied = nil
                break
            } catch { copied = error }
        }
        if let copied { throw ServerStartFailure("cannot copy lt_places from the cluster: \(copied)") }
        let analysis = service.analysisDatabase
        if try await service.mirrorIsStale(analysis) {
            logger.notice(
                "this server's copy of \(analysis) was last brought up to date with the cluster's purges over \(Int(TrackerService.purgeRetention / 86400)) days ago: starting it afresh"
            )
            try await store.delete(analysis)
        }
        let mirrors = Task {
            await follow([TrackerService.placesDB, analysis], from: cluster, into: store, logger: logger)
        }
        // Purges on the cluster (deleted users' locations) reach this server's copy too.
        let purges = Task { await service.followPurges(into: analysis) }
        return ClusterMirrors(tasks: [mirrors, purges])
    }

    /// A pull replication of a cluster database into this server's store of the same name.
    static func replication(
        _ name: String, from clusterURL: String, into store: DatabaseStore,
        options: ReplicationOptions = ReplicationOptions(),
        logger: Logger
    ) throws -> Replication {
        guard let components = URLComponents(string: clusterURL), let scheme = components.scheme,
            let host = components.host
        else {
            throw ServerStartFailure("bad CouchDB URL")
        }
        let base = "\(scheme)://\(host):\(components.port ?? (scheme == "https" ? 443 : 80))"
        if !store.exists(name) { _ = try store.create(name) }
        var options = options
        options.checkpointInterval = .seconds(1)
        return Replication(
            source: try RemoteEndpoint(
                url: "\(base)/\(name)", username: components.user?.removingPercentEncoding,
                password: components.password?.removingPercentEncoding),
            target: LocalEndpoint(store: store, name: name), options: options, logger: logger)
    }

    /// Keeps the mirrors following, each from a node that answers: a replication that stops is
    /// started again after 5 s, and one whose node stops answering or is withdrawn (as the
    /// application's requests and health checks find) is started again from another node at
    /// once; while no node answers, none is started.
    static func follow(_ names: [String], from cluster: FailoverCouch, into store: DatabaseStore, logger: Logger) async
    {
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask {
                    while !Task.isCancelled {
                        let url = await cluster.answeringNodeURL()
                        // No node answers (the log says so once): look again in a second, rather
                        // than start and give up a replication in a loop.
                        guard cluster.isAnswering(url) else {
                            try? await Task.sleep(for: .seconds(1))
                            continue
                        }
                        let moved = await withTaskGroup(of: Bool.self) { race -> Bool in
                            race.addTask {
                                var options = ReplicationOptions()
                                options.continuous = true
                                do {
                                    _ = try await replication(
                                        name, from: url, into: store, options: options, logger: logger
                                    ).run()
                                } catch  where !Task.isCancelled {
                                    logger.warning("mirror of \(name): \(error); starting again in 5 s")
                                } catch {}  // moved to another node
                                return false
                            }
                            race.addTask {
                                while !Task.isCancelled, cluster.isAnswering(url) {
                                    try? await Task.sleep(for: .seconds(1))
                                }
                                return !Task.isCancelled
                            }
                            let first = await race.next() ?? false
                            race.cancelAll()
                            return first
                        }
                        if moved {
                            logger.notice(
                                "mirror of \(name): its node stopped answering; following the cluster through another")
                        } else {
                            try? await Task.sleep(for: .seconds(5))
                        }
                    }
                }
            }
        }
    }
}
