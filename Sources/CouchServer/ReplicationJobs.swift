import CouchEngine
import CouchJSON
import Foundation
import Logging
import Replication

/// Replications the server runs for `POST /_replicate`: one-shot ones while their request
/// waits, continuous ones until cancelled. Listed by `_active_tasks` and `_scheduler/jobs`.
final class ReplicationJobs: Sendable {
    struct Job: Sendable {
        let id: String
        let replication: Replication
        let task: Task<Void, Never>?
        let continuous: Bool
        let user: String?
        let started: Date
    }

    private let jobs = Locked<[String: Job]>([:])

    func add(_ job: Job) { jobs.withLock { $0[job.id] = job } }
    func remove(_ id: String) { jobs.withLock { _ = $0.removeValue(forKey: id) } }
    func job(_ id: String) -> Job? { jobs.withLock { $0[id] } }
    var all: [Job] { jobs.withLock { Array($0.values) }.sorted { $0.started < $1.started } }

    /// Stops and forgets a job; false when there is none.
    func cancel(_ id: String) -> Bool {
        guard let job = jobs.withLock({ $0.removeValue(forKey: id) }) else { return false }
        job.task?.cancel()
        return true
    }

    /// Cancels every job and waits, up to `grace`, for them to end (each checkpoints as it stops).
    func cancelAll(waiting grace: Duration) async {
        let tasks = jobs.withLock { state in
            defer { state.removeAll() }; return state.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for task in tasks { await task.value } }
            group.addTask { try? await Task.sleep(for: grace) }
            await group.next()
            group.cancelAll()
        }
    }

    /// `_active_tasks` rows.
    func activeTasks() -> [JSON] {
        all.map { job in
            var task: JSONObject = [
                "type": "replication",
                "replication_id": .string(job.id),
                "source": .string(job.replication.source.displayName),
                "target": .string(job.replication.target.displayName),
                "continuous": .bool(job.continuous),
                "started_on": .int(Int(job.started.timeIntervalSince1970)),
                "updated_on": .int(Int(Date().timeIntervalSince1970)),
                "user": job.user.map(JSON.string) ?? .null,
                "node": "lt@localhost",
                "pid": .string(job.id),
            ]
            let status = job.replication.status
            task.members += status.counters.members
            // The sequence the job has processed up to (CouchDB's `through_seq`).
            task["through_seq"] = status.lastSeq ?? 0
            return .object(task)
        }
    }

    /// A job's `info` object: its counters and last error.
    static func info(_ status: ReplicationStatus) -> JSONObject {
        var info = status.counters
        info["error"] = status.error.map(JSON.string) ?? .null
        return info
    }

    /// An endpoint URL as scheduler answers show it: without credentials (CouchDB drops the
    /// user-info part), ending in `/`. Text that is not a URL is shown as `*****`.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), let scheme = components.scheme else { return "*****" }
        guard scheme == "http" || scheme == "https" else { return url }
        components.user = nil
        components.password = nil
        components.query = nil
        var text = components.string ?? "*****"
        if !text.hasSuffix("/") { text += "/" }
        return text
    }

    /// `_scheduler/jobs` rows.
    func schedulerJobs() -> [JSON] {
        all.map { job in
            let status = job.replication.status
            let state: String
            switch status.state {
            case .error: state = "crashing"
            case .offline: state = "crashing"
            case .stopped: state = "completed"
            default: state = "running"
            }
            return [
                "id": .string(job.id),
                "database": .null,
                "doc_id": .null,
                "node": "lt@localhost",
                "source": .string(Self.redacted(job.replication.source.displayName)),
                "target": .string(Self.redacted(job.replication.target.displayName)),
                "user": job.user.map(JSON.string) ?? .null,
                "state": .string(state),
                "info": .object(Self.info(status)),
                "start_time": .string(ISO8601DateFormatter().string(from: job.started)),
                "history": [
                    ["type": "started", "timestamp": .string(ISO8601DateFormatter().string(from: job.started))]
                ],
            ]
        }
    }
}
