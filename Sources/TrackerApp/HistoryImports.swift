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
    public static let batchSize = 2500
    /// How many batches may be being stored at once while the file is read on.
    static let batchesInFlight = 2
    /// How many finished imports are remembered per user.
    static let kept = 20
    /// How many imports one user may run at once (each holds a few megabytes while it runs).
    public static let runningPerUser = 2

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
        guard begin(user, job) else {
            throw TrackerService.Failure(
                429, "too_many_requests",
                "\(user) already has \(Self.runningPerUser) imports running: wait for one to end (GET /api/me/imports) or stop one (DELETE /api/me/imports/{id})"
            )
        }
        defer { cancelled.withLockedValue { _ = $0.remove(job.id) } }
        let db = service.locationDatabase(for: user)
        let namespace = service.mode == .singleDatabase ? try TrackerService.namespace(of: user) : nil
        var file = HistoryFile(format: request.format, columns: request.columns)
        var pending: [Pending] = []
        // Batches are stored while the next are read (two at most in flight, which the database
        // may commit together): the reading and the database each keep a core busy.
        var inFlight: [Task<BatchResult, any Error>] = []
        func submit(_ batch: [Pending]) async throws {
            if inFlight.count >= Self.batchesInFlight { job.add(try await inFlight.removeFirst().value) }
            let dryRun = job.dryRun
            inFlight.append(
                Task { try await self.write(batch, dryRun: dryRun, db: db, namespace: namespace, user: user) })
        }
        func drain() async throws {
            while !inFlight.isEmpty { job.add(try await inFlight.removeFirst().value) }
        }
        func take(_ location: ImportedLocation, _ format: HistoryFormat) {
            pending.append(Pending(id: location.documentID(user: user), location: location, format: format))
        }
        func progress() {
            job.bytesRead = file.bytesRead
            job.skipped = file.skipped
            job.format = file.format
            job.archive = file.isArchive
            job.entries = file.entries
        }
        do {
            for try await chunk in body {
                try chunk.withUnsafeReadableBytes { try file.feed($0, emit: take) }
                progress()
                while pending.count >= Self.batchSize {
                    try await submit(Array(pending.prefix(Self.batchSize)))
                    pending.removeFirst(Self.batchSize)
                }
                update(user, job)
                if cancelled.withLockedValue({ $0.contains(job.id) }) {
                    job.state = .cancelled
                    break
                }
            }
            if job.state == .running {
                try file.finish(emit: take)
                progress()
                while !pending.isEmpty {
                    let batch = Array(pending.prefix(Self.batchSize))
                    try await submit(batch)
                    pending.removeFirst(batch.count)
                }
                job.state = .done
            }
            try await drain()
        } catch let failure as HistoryReader.Failure {
            // What came before the damage is written; the rest of the file is not read.
            if !pending.isEmpty { try? await submit(pending) }
            try? await drain()
            progress()
            job.state = .failed
            job.error = failure.description
        } catch let refusal as HistoryFile.Refusal {
            job.state = .failed
            job.error = refusal.reason
        } catch {
            try? await drain()
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

    /// A location read and not yet written, with its id and the format of the file that held it.
    struct Pending: Sendable {
        var id: String
        var location: ImportedLocation
        var format: HistoryFormat
    }

    /// What writing one batch did.
    struct BatchResult: Sendable {
        var written = 0
        var duplicates = 0
        var refused: [String: Int] = [:]
    }

    /// Writes the locations of `batch` whose ids are not stored yet (a deleted one counts as
    /// stored: an import never brings back what its owner deleted).
    private func write(
        _ batch: [Pending], dryRun: Bool, db: String, namespace: OwnerNamespace?, user: String
    ) async throws -> BatchResult {
        var result = BatchResult()
        var seen = Set<String>()
        var fresh: [Pending] = []
        for var entry in batch {
            entry.id = namespace?.stored(entry.id) ?? entry.id
            if seen.insert(entry.id).inserted { fresh.append(entry) } else { result.duplicates += 1 }
        }
        let existing = try await service.couch.existing(fresh.map(\.id), in: db)
        let new = fresh.filter { !existing.contains($0.id) }
        result.duplicates += fresh.count - new.count
        guard !new.isEmpty else { return result }
        if dryRun {
            result.written += new.count
            return result
        }
        let docs = new.map { $0.location.document(user: user, id: $0.id, format: $0.format) }
        for row in try await service.couch.store(docs, in: db) {
            switch row["error"]?.stringValue {
            case nil: result.written += 1
            case "conflict": result.duplicates += 1  // written meanwhile (another import of the same file)
            case let error?: result.refused["refused by the database: \(error)", default: 0] += 1
            }
        }
        return result
    }

    /// Lists a new import of `user`, unless they already run as many as they may.
    private func begin(_ user: String, _ job: ImportJob) -> Bool {
        let running = jobs.withLockedValue { all -> Bool in
            guard (all[user] ?? []).count(where: { $0.state == .running }) < Self.runningPerUser else { return false }
            all[user, default: []].append(job)
            return true
        }
        return running
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

    public var id: String
    public var fileName: String?
    public var dryRun: Bool
    /// The format of a plain file (an archive's entries each have theirs).
    public var format: HistoryFormat?
    /// Whether the upload is a ZIP archive.
    public var archive = false
    /// An archive's entries that held location histories.
    public var entries: [HistoryFile.Entry] = []
    public var state = State.running
    public var bytesRead = 0
    /// Locations stored (with `dryRun`: that would be).
    public var written = 0
    /// Locations already stored (an earlier import, or twice in this file).
    public var duplicates = 0
    /// Entries of the file that gave no location, by reason (and locations the database refused).
    public var skipped: [String: Int] {
        get { read.merging(refused, uniquingKeysWith: +) }
        set { read = newValue }
    }
    /// What the reader skipped.
    private var read: [String: Int] = [:]
    /// Locations the database refused (a `validate_doc_update`), by its error.
    private var refused: [String: Int] = [:]
    public var error: String?
    public var started = Date()
    public var finishedAt: Date?

    init(id: String, fileName: String?, dryRun: Bool) {
        self.id = id
        self.fileName = fileName
        self.dryRun = dryRun
    }

    mutating func add(_ batch: HistoryImports.BatchResult) {
        written += batch.written
        duplicates += batch.duplicates
        refused.merge(batch.refused, uniquingKeysWith: +)
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
            "format": archive ? "zip" : format.map { .string($0.rawValue) } ?? .null, "bytes_read": .int(bytesRead),
            "written": .int(written), "duplicates": .int(duplicates),
            "skipped": .object(
                JSONObject(skipped.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSON.int($0.value)) })),
            "started_at": .string(ISO8601DateFormatter().string(from: started)),
        ]
        if let fileName { object["file_name"] = .string(fileName) }
        if archive {
            object["entries"] = .array(
                entries.map { entry in
                    var item: JSONObject = [
                        "name": .string(entry.name), "format": .string(entry.format.rawValue),
                        "locations": .int(entry.locations),
                    ]
                    if let error = entry.error { item["error"] = .string(error) }
                    return .object(item)
                })
        }
        if let error { object["error"] = .string(error) }
        if let finishedAt {
            object["finished_at"] = .string(ISO8601DateFormatter().string(from: finishedAt))
            object["seconds"] = .double((finishedAt.timeIntervalSince(started) * 1000).rounded() / 1000)
        }
        return .object(object)
    }
}
