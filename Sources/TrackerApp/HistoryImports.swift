public import CouchJSON
import CouchProtocol
import HTTPTypes
public import Foundation
public import HistoryImport
import Logging
import NIOConcurrencyHelpers
public import NIOCore

/// Imports of location history files into a user's locations (`POST /api/me/imports`, and
/// `lt import` through `POST /api/users/{name}/imports`): the upload is read as it arrives
/// (`HistoryReader`: a piece at a time, whatever its size), its locations written a batch at a
/// time into the user's database (their namespace of the shared database in single-database
/// mode; the cluster in cluster mode), from where consolidation carries them to
/// `lt_locations_all` like any device's. Each location's id comes from user, time and
/// position (`ImportedLocation.documentID`), and ids already stored are not written again: an
/// import repeated, overlapping or resumed after an interruption adds only what is missing.
/// Running and recent imports are kept, with their progress, for the pages to poll.
public final class HistoryImports: Sendable {
    /// How many locations are written at a time.
    public static let batchSize = 1000
    /// How many finished imports are remembered per user.
    static let kept = 20

    let service: TrackerService
    private let jobs = NIOLockedValueBox<[String: [ImportJob]]>([:])
    private let cancelled = NIOLockedValueBox<Set<String>>([])

    init(service: TrackerService) {
        self.service = service
    }

    /// What one import asked for.
    public struct Request: Sendable {
        /// The format, when the uploader names it (else detected from the first bytes).
        public var format: HistoryFormat?
        /// Read and count, write nothing.
        public var dryRun = false
        /// The file's name, for the list of imports.
        public var fileName: String?
        public var columns: CSVColumns.Names?

        public init(
            format: HistoryFormat? = nil, dryRun: Bool = false, fileName: String? = nil,
            columns: CSVColumns.Names? = nil
        ) {
            self.format = format
            self.dryRun = dryRun
            self.fileName = fileName
            self.columns = columns
        }
    }

    /// The imports of `user`, newest first.
    public func list(of user: String) -> [ImportJob] {
        jobs.withLockedValue { $0[user] ?? [] }.reversed()
    }

    /// Asks a running import of `user` to stop after its current batch; false when there is none by that id.
    public func cancel(_ id: String, of user: String) -> Bool {
        guard list(of: user).contains(where: { $0.id == id && $0.state == .running }) else { return false }
        cancelled.withLockedValue { _ = $0.insert(id) }
        return true
    }

    /// Runs one import of `body` for `user` to its end, and says what it did. A file that
    /// cannot be read further ends it as `failed` with the reason (what was written before
    /// stays, and is counted); the summary is returned either way.
    public func run(
        user: String, _ request: Request, body: some AsyncSequence<ByteBuffer, any Error> & Sendable
    ) async throws -> ImportJob {
        try await service.requireRegistered(user)
        var job = ImportJob(id: "import-" + Hex.random(bytes: 8), fileName: request.fileName, dryRun: request.dryRun)
        update(user, job)
        defer { cancelled.withLockedValue { _ = $0.remove(job.id) } }
        let db = service.locationDatabase(for: user)
        let namespace = service.mode == .singleDatabase ? try TrackerService.namespace(of: user) : nil
        var reader: HistoryReader?
        var pending: [(id: String, location: ImportedLocation)] = []
        var start: [UInt8] = []
        do {
            for try await chunk in body {
                if reader == nil {
                    start += chunk.readableBytesView
                    guard start.count >= HistoryFormat.detectionWindow else { continue }
                    reader = try open(&job, request, start)
                    try reader!.feed(start) { pending.append(($0.documentID(user: user), $0)) }
                    start = []
                } else {
                    try reader!.feed(chunk.readableBytesView) { pending.append(($0.documentID(user: user), $0)) }
                }
                job.bytesRead = reader!.bytesRead
                while pending.count >= Self.batchSize {
                    try await write(pending.prefix(Self.batchSize), &job, db: db, namespace: namespace, user: user)
                    pending.removeFirst(Self.batchSize)
                }
                job.skipped = reader!.skipped
                update(user, job)
                if cancelled.withLockedValue({ $0.contains(job.id) }) {
                    job.state = .cancelled
                    break
                }
            }
            if job.state == .running {
                if reader == nil {
                    reader = try open(&job, request, start)
                    try reader!.feed(start) { pending.append(($0.documentID(user: user), $0)) }
                }
                try reader!.finish { pending.append(($0.documentID(user: user), $0)) }
                job.bytesRead = reader!.bytesRead
                job.skipped = reader!.skipped
                while !pending.isEmpty {
                    let batch = pending.prefix(Self.batchSize)
                    try await write(batch, &job, db: db, namespace: namespace, user: user)
                    pending.removeFirst(batch.count)
                }
                job.state = .done
            }
        } catch let failure as HistoryReader.Failure {
            // What came before the damage is written; the rest of the file is not read.
            if !pending.isEmpty { try? await write(pending[...], &job, db: db, namespace: namespace, user: user) }
            job.state = .failed
            job.error = failure.description
            job.skipped = reader?.skipped ?? [:]
        } catch let failure as ImportJob.Refusal {
            job.state = .failed
            job.error = failure.reason
        } catch {
            job.state = .failed
            job.error = "\(error)"
            update(user, job.finished())
            throw error
        }
        job = job.finished()
        update(user, job)
        service.logger.info(
            "import \(job.id) for \(user): \(job.state.rawValue), \(job.written) written, \(job.duplicates) already there, \(job.skipped.values.reduce(0, +)) skipped"
        )
        return job
    }

    /// The reader for the file whose first bytes are `start`: the format asked for, or the one
    /// its content shows.
    private func open(_ job: inout ImportJob, _ request: Request, _ start: [UInt8]) throws -> HistoryReader {
        let format: HistoryFormat
        if let asked = request.format {
            format = asked
        } else {
            switch HistoryFormat.detect(start) {
            case let .format(found): format = found
            case let .refused(reason): throw ImportJob.Refusal(reason: reason)
            case .unknown:
                throw ImportJob.Refusal(
                    reason: start.isEmpty
                        ? "The file is empty"
                        : "Not a location history this server reads (Google Takeout Records.json or Semantic Location History, an Android or iOS Timeline export, OwnTracks JSON or .rec, GPX, GeoJSON, CSV with a header)"
                )
            }
        }
        job.format = format
        return HistoryReader(format: format, columns: request.columns)
    }

    /// Writes the locations of `batch` whose ids are not stored yet (a deleted one counts as
    /// stored: an import never brings back what its owner deleted).
    private func write(
        _ batch: ArraySlice<(id: String, location: ImportedLocation)>, _ job: inout ImportJob, db: String,
        namespace: OwnerNamespace?, user: String
    ) async throws {
        var seen = Set<String>()
        var fresh: [(id: String, location: ImportedLocation)] = []
        for entry in batch {
            let stored = namespace?.stored(entry.id) ?? entry.id
            if seen.insert(stored).inserted { fresh.append((stored, entry.location)) } else { job.duplicates += 1 }
        }
        let found = try await service.couch.request(
            .post, "/\(db)/_all_docs", body: ["keys": .array(fresh.map { .string($0.id) })])
        guard found.ok else { throw service.failure(found, "read which imported locations exist") }
        let existing = Set(
            (found.json["rows"]?.arrayValue ?? []).compactMap { row -> String? in
                row["value"] != nil ? row["id"]?.stringValue : nil
            })
        let new = fresh.filter { !existing.contains($0.id) }
        job.duplicates += fresh.count - new.count
        guard !new.isEmpty else { return }
        if job.dryRun {
            job.written += new.count
            return
        }
        let format = job.format ?? .csv
        let docs = new.map { $0.location.document(user: user, id: $0.id, format: format) }
        let reply = try await service.couch.request(.post, "/\(db)/_bulk_docs", body: ["docs": .array(docs)])
        guard reply.ok else { throw service.failure(reply, "write imported locations") }
        for row in reply.json.arrayValue ?? [] {
            switch row["error"]?.stringValue {
            case nil: job.written += 1
            case "conflict": job.duplicates += 1  // written meanwhile (another import of the same file)
            case let error?: job.skipped["refused by the database: \(error)", default: 0] += 1
            }
        }
    }

    private func update(_ user: String, _ job: ImportJob) {
        jobs.withLockedValue { all in
            var list = all[user] ?? []
            if let index = list.firstIndex(where: { $0.id == job.id }) { list[index] = job } else { list.append(job) }
            if list.count > Self.kept, let done = list.firstIndex(where: { $0.state != .running }) {
                list.remove(at: done)
            }
            all[user] = list
        }
    }
}

/// One import: what it is reading, how far it got, and how it ended.
public struct ImportJob: Sendable, Equatable {
    public enum State: String, Sendable {
        case running, done, failed, cancelled
    }

    /// An upload refused before any location was read (not a history file).
    struct Refusal: Error {
        var reason: String
    }

    public var id: String
    public var fileName: String?
    public var dryRun: Bool
    public var format: HistoryFormat?
    public var state = State.running
    public var bytesRead = 0
    /// Locations stored (with `dryRun`: that would be).
    public var written = 0
    /// Locations already stored (an earlier import, or twice in this file).
    public var duplicates = 0
    /// Entries of the file that gave no location, by reason.
    public var skipped: [String: Int] = [:]
    public var error: String?
    public var started = Date()
    public var finishedAt: Date?

    init(id: String, fileName: String?, dryRun: Bool) {
        self.id = id
        self.fileName = fileName
        self.dryRun = dryRun
    }

    func finished() -> ImportJob {
        var job = self
        job.finishedAt = Date()
        return job
    }

    /// As the API answers it.
    public var json: JSON {
        var object: JSONObject = [
            "id": .string(id), "state": .string(state.rawValue), "dry_run": .bool(dryRun),
            "format": format.map { .string($0.rawValue) } ?? .null, "bytes_read": .int(bytesRead),
            "written": .int(written), "duplicates": .int(duplicates),
            "skipped": .object(
                JSONObject(skipped.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSON.int($0.value)) })),
            "started_at": .string(ISO8601DateFormatter().string(from: started)),
        ]
        if let fileName { object["file_name"] = .string(fileName) }
        if let error { object["error"] = .string(error) }
        if let finishedAt {
            object["finished_at"] = .string(ISO8601DateFormatter().string(from: finishedAt))
            object["seconds"] = .double((finishedAt.timeIntervalSince(started) * 1000).rounded() / 1000)
        }
        return .object(object)
    }
}
