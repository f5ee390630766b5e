import CouchEngine
public import CouchJSON
import Crypto
public import Foundation
public import Logging

/// How a replication runs.
public struct ReplicationOptions: Sendable {
    /// Keep following the source's changes after catching up, until cancelled.
    public var continuous = false
    /// Create the target database if it does not exist.
    public var createTarget = false
    public var filter: ReplicationFilter?
    /// Start from this source sequence instead of the checkpoints' (CouchDB's `since_seq`).
    public var sinceSeq: JSON?
    /// Changes read per batch.
    public var batchSize = 1000
    /// Batches being diffed and fetched ahead of the one being written.
    public var pipelineDepth = 3
    /// Transient failures tolerated in a row before a one-shot replication gives up
    /// (continuous replications keep retrying, backing off up to `maxBackoff`).
    public var maxRetries = 10
    public var initialBackoff: Duration = .milliseconds(250)
    public var maxBackoff: Duration = .seconds(30)
    /// How long a continuous replication waits on the source's feed before asking again.
    public var heartbeat: Duration = .seconds(30)
    /// Checkpoints are written at most this often while batches flow (and always when the
    /// replication catches up, stops or is cancelled). An interruption repeats at most this
    /// much work; writing them after every batch would cost two extra writes per batch.
    public var checkpointInterval: Duration = .seconds(5)

    public init() {}
}

/// What a replication is doing, as apps show it (CouchDB's states; Couchbase Lite's
/// activity levels).
public enum ReplicationState: String, Sendable {
    case connecting, busy, idle, offline, stopped, error
}

/// A snapshot of a replication's progress.
public struct ReplicationStatus: Sendable {
    public var state: ReplicationState
    public var docsRead = 0
    public var docsWritten = 0
    public var docWriteFailures = 0
    public var missingChecked = 0
    public var missingFound = 0
    /// Changes the source still has for us, when it says.
    public var changesPending: Int?
    public var lastSeq: JSON?
    public var error: String?

    /// The counters under CouchDB's names, as `_active_tasks` and `_scheduler` show them.
    public var counters: JSONObject {
        [
            "revisions_checked": .int(missingChecked),
            "missing_revisions_found": .int(missingFound),
            "docs_read": .int(docsRead),
            "docs_written": .int(docsWritten),
            "doc_write_failures": .int(docWriteFailures),
            "changes_pending": changesPending.map(JSON.int) ?? .null,
            "checkpointed_source_seq": lastSeq ?? .null,
        ]
    }
}

/// The outcome of a replication run, in the shape of a CouchDB checkpoint history entry.
public struct ReplicationResult: Sendable {
    public var replicationID: String
    public var sessionID: String
    public var startSeq: JSON
    public var sourceLastSeq: JSON
    public var status: ReplicationStatus
    public var startTime: Date
    public var endTime: Date
    /// The checkpoint's history after this run, newest first (this run's entry alone when
    /// nothing was checkpointed).
    public var history: [JSON] = []
    /// A replication of listed documents (`doc_ids`), which CouchDB answers without history.
    public var byDocumentIDs = false
    /// The history entry this run resumed from: its counters are added to this run's in the
    /// new entry, as CouchDB's are.
    public var carried: JSONObject = [:]

    /// `POST /_replicate`'s answer, as CouchDB gives it: `{"ok":true,"session_id",...,
    /// "history":[...]}` (`"no_changes":true` when the source had nothing new), or for
    /// `doc_ids` the run's counts and times.
    public var json: JSON {
        if byDocumentIDs {
            if status.docsRead == 0 && status.docWriteFailures == 0 { return ["ok": true, "no_changes": true] }
            return [
                "ok": true,
                "start_time": .string(Replication.httpDate(startTime)),
                "end_time": .string(Replication.httpDate(endTime)),
                // Carried on from the checkpoint, as in the history (CouchDB's are).
                "docs_read": .int(status.docsRead + carriedCount("docs_read")),
                "docs_written": .int(status.docsWritten + carriedCount("docs_written")),
                "doc_write_failures": .int(status.docWriteFailures + carriedCount("doc_write_failures")),
            ]
        }
        var answer: JSONObject = ["ok": true]
        if startSeq == sourceLastSeq { answer["no_changes"] = true }
        answer["session_id"] = .string(sessionID)
        answer["source_last_seq"] = sourceLastSeq
        answer["replication_id_version"] = 3
        answer["history"] = .array(history.isEmpty ? [historyEntry] : history)
        return .object(answer)
    }

    public var historyEntry: JSON {
        [
            "session_id": .string(sessionID),
            "start_time": .string(Replication.httpDate(startTime)),
            "end_time": .string(Replication.httpDate(endTime)),
            "start_last_seq": startSeq,
            "end_last_seq": sourceLastSeq,
            "recorded_seq": sourceLastSeq,
            "missing_checked": .int(status.missingChecked + carriedCount("missing_checked")),
            "missing_found": .int(status.missingFound + carriedCount("missing_found")),
            "docs_read": .int(status.docsRead + carriedCount("docs_read")),
            "docs_written": .int(status.docsWritten + carriedCount("docs_written")),
            "doc_write_failures": .int(status.docWriteFailures + carriedCount("doc_write_failures")),
        ]
    }

    private func carriedCount(_ name: String) -> Int { carried[name]?.intValue ?? 0 }
}

/// One replication from a source to a target, following CouchDB's replication protocol:
/// compare checkpoints, read changes in batches, ask the target which revisions it lacks
/// (`_revs_diff`), fetch those with their history and only the attachments the target lacks,
/// write them as they are (`new_edits=false`), and checkpoint on both sides after each batch so
/// an interrupted run resumes where it stopped. Two-way sync is two replications.
public final class Replication: Sendable {
    public let source: any ReplicationEndpoint
    public let target: any ReplicationEndpoint
    public let options: ReplicationOptions
    let logger: Logger

    private struct State {
        var status = ReplicationStatus(state: .stopped)
        var observers: [UUID: AsyncStream<ReplicationStatus>.Continuation] = [:]
    }
    private let state = Locked(State())
    static let historyLimit = 50

    public init(
        source: any ReplicationEndpoint, target: any ReplicationEndpoint,
        options: ReplicationOptions = ReplicationOptions(),
        logger: Logger = Logger(label: "lt.replication")
    ) {
        self.source = source
        self.target = target
        self.options = options
        self.logger = logger
    }

    /// The current status.
    public var status: ReplicationStatus { state.withLock { $0.status } }

    /// Every status change from now on; the stream ends when the replication stops.
    public func statusUpdates() -> AsyncStream<ReplicationStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ReplicationStatus.self, bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        let current = state.withLock { state -> ReplicationStatus in
            state.observers[id] = continuation
            return state.status
        }
        continuation.yield(current)
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    private func update(_ change: (inout ReplicationStatus) -> Void) {
        let (status, observers) = state.withLock {
            state -> (ReplicationStatus, [AsyncStream<ReplicationStatus>.Continuation]) in
            change(&state.status)
            return (state.status, Array(state.observers.values))
        }
        for observer in observers {
            observer.yield(status)
            if status.state == .stopped || status.state == .error { observer.finish() }
        }
    }

    /// The replication id: a digest of both endpoints' identities and the filter, so the
    /// same replication finds its checkpoints again and a different one does not.
    public func replicationID() async throws -> String {
        let sourceID = try await retrying { try await self.source.identity() }
        let targetID = try await retrying { try await self.target.identity() }
        var md5 = Insecure.MD5()
        let filterID = try await options.filter?.identity(source: source) ?? ""
        // A start sequence makes another replication, as in CouchDB (its checkpoints are its own).
        let since = options.sinceSeq.map { "\nsince_seq:" + $0.text } ?? ""
        md5.update(data: Array("\(sourceID)\n\(targetID)\n\(filterID)\(since)".utf8))
        return Hex.string(md5.finalize())
    }

    // Kept in one piece (over 60 lines): the pipeline's state (the sequence reached, the last
    // checkpoint, the batches in flight) is shared by the loop, the checkpoint closure and the
    // error paths that checkpoint before giving up; split, it would be threaded through each.
    /// Runs the replication. One-shot: returns when the target has everything the source had
    /// at the start. Continuous: runs until the task is cancelled, then checkpoints and returns.
    /// Throws on errors retrying cannot fix (401/403, a missing database, too many failures).
    public func run() async throws -> ReplicationResult {
        let startTime = Date()
        let sessionID = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        update { $0 = ReplicationStatus(state: .connecting) }
        do {
            try await retrying { try await self.source.prepare(create: false) }
            // The id covers the filter, so a filter the source refuses fails here, before the
            // target is created: a refused replication leaves nothing behind.
            let repID = try await replicationID()
            try await retrying { try await self.target.prepare(create: self.options.createTarget) }
            let checkpointID = "_local/\(repID)"
            let sourceLog = try await retrying { try await self.source.localDocument(checkpointID) }
            let targetLog = try await retrying { try await self.target.localDocument(checkpointID) }
            let startSeq = options.sinceSeq ?? Replication.startSequence(source: sourceLog, target: targetLog)
            update { $0.lastSeq = startSeq }
            // As CouchDB: a run resumed from a checkpoint carries the counters on in its history
            // entry, so a checkpoint says what the replication did in all (`status` is this run's).
            let carried = options.sinceSeq == nil ? Replication.resumedEntry(source: sourceLog, target: targetLog) : nil
            var machine = PipelineStateMachine(
                since: startSeq, depth: options.pipelineDepth, continuous: options.continuous,
                checkpointInterval: options.checkpointInterval)
            logger.debug("replicating \(source.displayName) → \(target.displayName) from \(startSeq.text)")

            var history: [JSON] = []
            func result() -> ReplicationResult {
                var result = ReplicationResult(
                    replicationID: repID, sessionID: sessionID, startSeq: startSeq, sourceLastSeq: machine.since,
                    status: status, startTime: startTime, endTime: Date())
                if case .docIDs? = options.filter { result.byDocumentIDs = true }
                result.history = history
                result.carried = carried ?? [:]
                return result
            }
            let started = ContinuousClock.now
            func checkpoint(_ seq: JSON) async throws {
                history = try await writeCheckpoint(checkpointID, result: result(), previous: (sourceLog, targetLog))
                machine.checkpointSaved(seq, at: started.duration(to: .now))
            }

            do {
                // Batches flow through a pipeline: changes are read in order, each batch's
                // revs_diff and fetch run as their own task (up to `pipelineDepth` ahead), and
                // the writer takes them in order, so reading and writing overlap. The machine
                // says which step comes next; this loop does it.
                var fetching: [(batch: ChangesBatch, docs: Task<[JSON], any Error>)] = []
                defer { for item in fetching { item.docs.cancel() } }
                steps: while true {
                    try Task.checkCancellation()
                    switch machine.next() {
                    case let .read(from):
                        let batch = try await retrying {
                            try await self.source.changes(
                                since: from, limit: self.options.batchSize, filter: self.options.filter)
                        }
                        if !batch.entries.isEmpty {
                            fetching.append((batch, Task { try await self.diffAndFetch(batch) }))
                        }
                        machine.changesRead(count: batch.entries.count, lastSeq: batch.lastSeq)
                    case .writeOldest:
                        let (batch, pending) = fetching.removeFirst()
                        update {
                            $0.state = .busy; $0.changesPending = batch.pending
                        }
                        let docs = try await withTaskCancellationHandler {
                            try await pending.value
                        } onCancel: {
                            pending.cancel()
                        }
                        try await write(docs)
                        machine.batchWritten(lastSeq: batch.lastSeq, at: started.duration(to: .now))
                        update {
                            $0.lastSeq = batch.lastSeq; $0.changesPending = batch.pending
                        }
                    case let .checkpoint(seq):
                        try await checkpoint(seq)
                    case let .waitForChanges(since):
                        update {
                            $0.state = .idle; $0.changesPending = 0; $0.lastSeq = since
                        }
                        _ = try await retrying {
                            try await self.source.waitForChanges(since: since, timeout: self.options.heartbeat)
                        }
                        machine.sourceChanged()
                    case .finish:
                        break steps
                    }
                }
            } catch is CancellationError {
                if let seq = machine.unsavedProgress { try? await checkpoint(seq) }
            } catch {
                // Keep the progress made so far: the next run resumes from it.
                if let seq = machine.unsavedProgress { try? await checkpoint(seq) }
                throw error
            }
            let since = machine.since
            update {
                $0.state = .stopped; $0.lastSeq = since
            }
            if history.isEmpty {
                // Nothing new to checkpoint: the answer shows the history as it stands.
                history = targetLog?["history"]?.arrayValue ?? [result().historyEntry]
            }
            logger.debug(
                "replication \(repID) done: \(status.docsWritten) written, \(status.docWriteFailures) failures")
            return result()
        } catch {
            let message = "\(error)"
            update {
                $0.state = .error; $0.error = message
            }
            throw error
        }
    }

    /// The revisions of a batch that the target lacks (`_revs_diff`), fetched from the source
    /// with only the attachments the target lacks.
    private func diffAndFetch(_ batch: ChangesBatch) async throws -> [JSON] {
        let request = batch.entries.map { (id: $0.id, revs: $0.revs) }
        let checked = request.reduce(0) { $0 + $1.revs.count }
        let diff = try await retrying { try await self.target.revsDiff(request) }
        let found = diff.reduce(0) { $0 + $1.missing.count }
        update {
            $0.missingChecked += checked; $0.missingFound += found
        }
        var docs: [JSON] = []
        let chunkSize = max(1, min(options.batchSize, 1000))
        for chunk in stride(from: 0, to: diff.count, by: chunkSize) {
            let fetches = diff[chunk..<min(chunk + chunkSize, diff.count)].map {
                FetchRequest(id: $0.id, revs: $0.missing, attsSince: $0.possibleAncestors)
            }
            docs += try await retrying { try await self.source.fetch(fetches) }
        }
        let count = docs.count
        update { $0.docsRead += count }
        return docs
    }

    /// Writes fetched revisions as they are; rejected ones are counted, not fatal.
    private func write(_ docs: [JSON]) async throws {
        guard !docs.isEmpty else { return }
        let failures = try await retrying { try await self.target.write(docs) }
        for failure in failures { logger.warning("target rejected \(failure.id): \(failure.error) \(failure.reason)") }
        update {
            $0.docsWritten += docs.count - failures.count; $0.docWriteFailures += failures.count
        }
    }

    /// Retries transient failures with exponential backoff and jitter (`RetryBackoff`); other
    /// errors at once.
    @discardableResult
    func retrying<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var backoff = RetryBackoff(options)
        while true {
            do {
                let value = try await body()
                if backoff.failures > 0 {
                    update {
                        $0.state = .busy; $0.error = nil
                    }
                }
                return value
            } catch let error as ReplicationError where backoff.retries(error) {
                // A request cut short by cancellation is not a peer to wait for.
                if Task.isCancelled { throw CancellationError() }
                guard let wait = backoff.failed(jitter: Double.random(in: 0.5...1.5)) else { throw error }
                update {
                    $0.state = .offline; $0.error = error.message
                }
                logger.notice("retrying in \(wait): \(error.message)")
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Where to resume: the sequence recorded by the latest session both checkpoints share.
    static func startSequence(source: JSONObject?, target: JSONObject?) -> JSON {
        guard let source, let target else { return 0 }
        if let session = source["session_id"], session == target["session_id"] {
            return source["source_last_seq"] ?? source["last_seq"] ?? 0
        }
        let targetSessions = Set((target["history"]?.arrayValue ?? []).compactMap { $0["session_id"]?.stringValue })
        for entry in source["history"]?.arrayValue ?? [] {
            if let session = entry["session_id"]?.stringValue, targetSessions.contains(session) {
                return entry["recorded_seq"] ?? entry["last_seq"] ?? 0
            }
        }
        return 0
    }

    /// The history entry of the session a run resumes from (`startSequence`'s), or nil.
    static func resumedEntry(source: JSONObject?, target: JSONObject?) -> JSONObject? {
        guard let source, let target else { return nil }
        let history = source["history"]?.arrayValue ?? []
        if let session = source["session_id"], session == target["session_id"] { return history.first?.objectValue }
        let targetSessions = Set((target["history"]?.arrayValue ?? []).compactMap { $0["session_id"]?.stringValue })
        return history.first { $0["session_id"]?.stringValue.map(targetSessions.contains) == true }?.objectValue
    }

    /// Writes the checkpoint on the target, then the source (a read-only source is fine);
    /// returns the history written.
    @discardableResult
    private func writeCheckpoint(
        _ id: String, result: ReplicationResult, previous: (JSONObject?, JSONObject?)
    ) async throws -> [JSON] {
        var history = [result.historyEntry]
        let earlier = (previous.1?["history"]?.arrayValue ?? []).filter {
            $0["session_id"] != .string(result.sessionID)
        }
        history += earlier.prefix(Replication.historyLimit - 1)
        let body: JSONObject = [
            "session_id": .string(result.sessionID),
            "source_last_seq": result.sourceLastSeq,
            "replication_id_version": 3,
            "history": .array(history),
        ]
        try await retrying { try await self.target.saveLocalDocument(id, body) }
        do {
            try await retrying { try await self.source.saveLocalDocument(id, body) }
        } catch let error as ReplicationError where error.kind == .unauthorized {
            logger.notice(
                "cannot checkpoint on the source (\(error.message)); resuming will rely on the target's checkpoint")
        }
        return history
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
