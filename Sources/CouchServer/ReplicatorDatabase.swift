import CouchEngine
import CouchJSON
import Foundation
import Logging
import Replication

/// Runs the replications described by documents in the `_replicator` database, as CouchDB 3's
/// scheduler does: a document starts a job; editing it restarts the job, deleting it stops it;
/// one-shot jobs record their terminal state in the document (`_replication_state`
/// `completed` or `failed`), continuous ones run until the document goes. The database is
/// followed through its changes feed from the start whenever the server starts, so jobs survive
/// restarts and resume from their checkpoints.
final class ReplicatorDatabase: Sendable {
    static let name = "_replicator"
    let store: DatabaseStore
    let jobs: ReplicationJobs
    let logger: Logger
    /// Runs filter functions of local sources.
    let filters: FilterResolver?

    private struct Running {
        var jobID: String
        var signature: JSON
        var task: Task<Void, Never>
    }
    private let running = Locked<[String: Running]>([:])
    private let follower = Locked<Task<Void, Never>?>(nil)

    init(store: DatabaseStore, jobs: ReplicationJobs, filters: FilterResolver?, logger: Logger) {
        self.filters = filters
        self.store = store
        self.jobs = jobs
        self.logger = logger
    }

    /// Starts following `_replicator`.
    func start() {
        let task = Task { await self.follow() }
        follower.withLock { $0 = task }
    }

    func stop() {
        follower.withLock { $0?.cancel() }
        for job in running.withLock({ state in
            defer { state.removeAll() }; return Array(state.values)
        }) { job.task.cancel() }
    }

    private func follow() async {
        var since = 0
        while !Task.isCancelled {
            do {
                let db = try await store.open(ReplicatorDatabase.name)
                var options = ChangesOptions()
                options.since = since
                options.includeDocs = true
                let page = try await db.changes(options)
                for row in page.rows {
                    guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/") else { continue }
                    if row["deleted"] == .bool(true) {
                        stopJob(for: id)
                    } else if let doc = row["doc"]?.objectValue {
                        handle(id, doc)
                    }
                }
                since = page.lastSeq
                _ = await db.notifier.wait(after: since, timeout: .seconds(60))
            } catch {
                logger.error("following _replicator failed: \(error); retrying")
                try? await Task.sleep(for: .seconds(2))
            }
        }
    }

    /// The part of a document that defines its replication (not its state fields).
    static func signature(_ doc: JSONObject) -> JSON {
        .object(JSONObject(doc.members.filter { !$0.key.hasPrefix("_") }))
    }

    private func handle(_ id: String, _ doc: JSONObject) {
        let state = doc["_replication_state"]?.stringValue
        if state == "completed" || state == "failed" { return }
        let signature = ReplicatorDatabase.signature(doc)
        if running.withLock({ $0[id]?.signature }) == signature { return }
        stopJob(for: id)
        let request: ReplicationRequest
        do {
            request = try ReplicationRequest(json: doc, store: store, user: .system, filters: filters)
        } catch {
            Task { await self.record(id, state: "failed", reason: "\(error)", stats: nil) }
            return
        }
        let replication = Replication(
            source: request.source, target: request.target, options: request.options, logger: logger)
        let jobID = "doc:\(id)"
        let task = Task {
            do {
                let result = try await replication.run()
                if !Task.isCancelled {
                    await self.record(id, state: "completed", reason: nil, stats: result.historyEntry)
                }
            } catch is CancellationError {
            } catch {
                if !Task.isCancelled { await self.record(id, state: "failed", reason: "\(error)", stats: nil) }
            }
            self.jobs.remove(jobID)
            self.running.withLock { state in
                if state[id]?.jobID == jobID { state.removeValue(forKey: id) }
            }
        }
        running.withLock { $0[id] = Running(jobID: jobID, signature: signature, task: task) }
        jobs.add(
            .init(
                id: jobID, replication: replication, task: task, continuous: request.options.continuous, user: nil,
                started: Date()))
    }

    private func stopJob(for id: String) {
        guard let job = running.withLock({ $0.removeValue(forKey: id) }) else { return }
        job.task.cancel()
        jobs.remove(job.jobID)
    }

    /// Writes a terminal state into the job's document, as CouchDB 3 does.
    private func record(_ id: String, state: String, reason: String?, stats: JSON?) async {
        do {
            let db = try await store.open(ReplicatorDatabase.name)
            var doc = try await db.document(id: id)
            doc["_replication_state"] = .string(state)
            doc["_replication_state_time"] = .string(ISO8601DateFormatter().string(from: Date()))
            if let reason { doc["_replication_state_reason"] = .string(reason) }
            if let stats { doc["_replication_stats"] = stats }
            var input = try DocumentInput(json: .object(doc.filter { !$0.key.hasPrefix("_replication") }))
            for (key, value) in doc.members where key.hasPrefix("_replication") { input.body[key] = value }
            _ = try await db.update(input, user: .system)
        } catch {
            logger.warning("could not record the state of _replicator/\(id): \(error)")
        }
    }

    /// `_scheduler/docs` rows: every replication document with its state, or only `id`'s.
    func schedulerDocs(only id: String? = nil) async throws -> [JSON] {
        let db = try await store.open(ReplicatorDatabase.name)
        var options = AllDocsOptions()
        options.includeDocs = true
        if let id {
            options.startKey = id
            options.endKey = id
        }
        var rows: [JSON] = []
        for row in try await db.allDocs(options).rows {
            guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/"), let doc = row["doc"] else { continue }
            let job = jobs.job("doc:\(id)")
            let state: String
            if let recorded = doc["_replication_state"]?.stringValue {
                state = recorded
            } else if let job {
                switch job.replication.status.state {
                case .error, .offline: state = "crashing"
                case .connecting: state = "initializing"
                default: state = "running"
                }
            } else {
                state = "pending"
            }
            func endpoint(_ value: JSON?) -> JSON {
                guard let url = value?.stringValue ?? value?["url"]?.stringValue else { return .null }
                return .string(ReplicationJobs.redacted(url))
            }
            var info: JSON = doc["_replication_stats"] ?? .null
            if let status = job?.replication.status { info = .object(ReplicationJobs.info(status)) }
            var row: JSONObject = [
                "database": "_replicator", "doc_id": .string(id), "id": .string(job?.id ?? id), "node": "lt@localhost",
            ]
            row["source"] = endpoint(doc["source"])
            row["target"] = endpoint(doc["target"])
            row["state"] = .string(state)
            row["info"] = info
            row["error_count"] = .int(state == "failed" || state == "crashing" ? 1 : 0)
            let started: JSON = job.map { .string(ISO8601DateFormatter().string(from: $0.started)) } ?? .null
            row["last_updated"] = doc["_replication_state_time"] ?? started
            row["start_time"] = started
            row["source_proxy"] = .null
            row["target_proxy"] = .null
            rows.append(.object(row))
        }
        return rows
    }
}

extension JSONObject {
    func filter(_ isIncluded: ((key: String, value: JSON)) -> Bool) -> JSONObject {
        JSONObject(members.filter(isIncluded))
    }
}
