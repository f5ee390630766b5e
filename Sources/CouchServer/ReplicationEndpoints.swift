import CouchEngine
import CouchJSON
import Foundation
import HTTPTypes
import Logging
import Replication

/// `/_replicate` (one-shot and continuous replications) and the `/_scheduler` views of them.
struct ReplicationEndpoints: Sendable {
    let api: CouchAPI

    /// `POST /_replicate`: one-shot (answers when done), continuous (starts a job), cancel.
    func replicate(_ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        guard request.user.name != nil else { throw CouchError.unauthorized }
        let body = try request.jsonObject()
        // `{"replication_id": id, "cancel": true}` cancels a running job by its id (its
        // `_local_id`), as CouchDB allows.
        if body["cancel"] == true, let id = body["replication_id"]?.stringValue, body["source"] == nil {
            try cancel(id, request)
            return .json(["ok": true, "_local_id": .string(id)])
        }
        let replicationRequest: ReplicationRequest
        do {
            replicationRequest = try ReplicationRequest(
                json: body, store: api.store, user: request.user, filters: api.filterResolver)
        } catch let error as ReplicationError {
            throw CouchError.badRequest(error.message)
        }
        if replicationRequest.usesLocalEndpoints { try request.requireServerAdmin() }
        let replication = Replication(
            source: replicationRequest.source, target: replicationRequest.target,
            options: replicationRequest.options, logger: api.logger)
        let id = try await mapReplicationErrors { try await replication.replicationID() }
        let jobID = id + (replicationRequest.options.continuous ? "+continuous" : "")
        if replicationRequest.cancel {
            try cancel(jobID, request)
            return .json(["ok": true, "_local_id": .string(jobID)])
        }
        if replicationRequest.options.continuous {
            if api.jobs.job(jobID) != nil {
                return .json(["ok": true, "_local_id": .string(jobID)], status: .accepted)
            }
            let logger = api.logger
            let jobs = api.jobs
            let task = Task {
                do { _ = try await replication.run() } catch { logger.error("replication \(jobID) stopped: \(error)") }
                jobs.remove(jobID)
            }
            jobs.add(
                .init(
                    id: jobID, replication: replication, task: task, continuous: true, user: request.user.name,
                    started: Date()))
            return .json(["ok": true, "_local_id": .string(jobID)], status: .accepted)
        }
        api.jobs.add(
            .init(
                id: jobID, replication: replication, task: nil, continuous: false, user: request.user.name,
                started: Date()))
        defer { api.jobs.remove(jobID) }
        let result = try await mapReplicationErrors { try await replication.run() }
        return .json(result.json)
    }

    /// Cancels a running job: its owner or a server admin may (404 when none runs).
    func cancel(_ id: String, _ request: APIRequest) throws {
        guard let job = api.jobs.job(id) else { throw CouchError.notFound("Replication \(id) is not running") }
        guard request.user.isServerAdmin || job.user == request.user.name else {
            throw CouchError.forbidden("Only the replication's owner or a server admin may cancel it")
        }
        _ = api.jobs.cancel(id)
    }

    /// Turns replication failures into CouchDB's answers.
    func mapReplicationErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as ReplicationError {
            switch error.kind {
            case .notFound: throw CouchError(status: 404, error: "db_not_found", reason: error.message)
            case .unauthorized: throw CouchError(status: 401, error: "unauthorized", reason: error.message)
            case .transient, .untrustedPeer:
                throw CouchError(status: 500, error: "replication_failed", reason: error.message)
            case .fatal: throw CouchError(status: 400, error: "bad_request", reason: error.message)
            }
        }
    }

    /// `/_scheduler/jobs` and `/_scheduler/docs`.
    func scheduler(_ request: APIRequest) async throws -> APIResponse {
        switch request.path.count > 1 ? request.path[1] : "" {
        case "jobs":
            let rows = api.jobs.schedulerJobs()
            return .json(["total_rows": .int(rows.count), "offset": 0, "jobs": .array(rows)])
        case "docs":
            // `/_scheduler/docs`, `/_scheduler/docs/_replicator`, `/_scheduler/docs/_replicator/{docid}`
            if request.path.count > 2, request.path[2] != ReplicatorDatabase.name || request.path.count > 4 {
                throw CouchError.databaseNotFound
            }
            if request.path.count == 4 {
                guard let row = try await api.replicatorDatabase.schedulerDocs(only: request.path[3]).first else {
                    throw CouchError(status: 404, error: "not_found", reason: "unknown")
                }
                return .json(row)
            }
            let rows = try await api.replicatorDatabase.schedulerDocs()
            return .json(["total_rows": .int(rows.count), "offset": 0, "docs": .array(rows)])
        default:
            throw CouchError.notFound("missing")
        }
    }
}
