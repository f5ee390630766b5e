public import CouchJSON
public import CouchProtocol
import Foundation
import NIOConcurrencyHelpers
import HTTPTypes
public import Logging

/// Copies every location written to any user's database into `lt_locations_all` (under
/// `<user>:<id>`, same revision: `copy(of:in:)`), with one consumer for all users instead of one continuous replication each (the
/// original's design, which does not scale to many users). It follows `_db_updates` to learn
/// which user databases changed and copies their new changes in rounds: for each changed
/// database (several at a time) `_changes` since its checkpoint with the documents, and
/// `_bulk_get` of those revisions that need their history or attachments; then, for the whole round, one `_bulk_docs` with
/// `new_edits=false` into `lt_locations_all`, so a round of a thousand databases costs one
/// commit, not a thousand; the checkpoints (`_local` documents there) are saved beside the
/// rounds, together, at most once a second (`saveCheckpoints`).
/// On start it reads every checkpoint and, in a lane of its own beside the rounds, looks at
/// every user database once, which covers whatever changed while it was not running. Only
/// CouchDB API calls: it works the same against Apache CouchDB (this server answers an admin's
/// `_changes` of a user's database from memory, `RecentChanges`).
public final class Consolidator: Sendable {
    let couch: any CouchClient
    let logger: Logger
    static let prefix = "lt_locations_user_"
    static let checkpointPrefix = "_local/consolidated-"
    /// Changes read from one database per request.
    static let pageSize = 500
    /// How many user databases are read at the same time.
    static let parallelism = 16

    /// Where a database's copying stands: the last sequence copied and the `_local` document's revision.
    struct Checkpoint: Sendable {
        var seq: String
        var rev: String?
    }

    /// What the consolidator has done so far: rounds, databases and documents copied, and
    /// where a round's time went.
    public struct Statistics: Sendable {
        public var rounds = 0
        public var databasesRead = 0
        public var documentsCopied = 0
        /// Seconds spent reading users' databases, and writing `lt_locations_all`.
        public var readSeconds = 0.0
        public var writeSeconds = 0.0
        /// The slowest single database read, in seconds.
        public var slowestRead = 0.0
        /// User databases the start-up sweep has looked at.
        public var swept = 0
        /// How long the latest round took from hearing of the changes to having copied them:
        /// how far `lt_locations_all` lags behind the users' databases, in seconds.
        public var lastRoundSeconds = 0.0

        /// The work done since `earlier` (a snapshot of the same consolidator); the slowest
        /// read is the slowest so far.
        public func since(_ earlier: Statistics) -> Statistics {
            var done = self
            done.rounds -= earlier.rounds
            done.databasesRead -= earlier.databasesRead
            done.documentsCopied -= earlier.documentsCopied
            done.readSeconds -= earlier.readSeconds
            done.writeSeconds -= earlier.writeSeconds
            done.swept -= earlier.swept
            return done
        }
    }
    private let counters = NIOLockedValueBox(Statistics())
    /// A snapshot of the counters.
    public var statistics: Statistics { counters.withLockedValue { $0 } }

    /// A location that `lt_locations_all` refused: it is tried again, and its database's
    /// checkpoint stays before it until it is copied.
    public struct Refusal: Sendable {
        public var database: String
        public var id: String
        public var rev: String?
        public var error: String
        public var reason: String
    }

    /// Databases waiting to be read again, shared by the lanes.
    private let retries = NIOLockedValueBox(RetryQueue())
    /// Databases the start-up sweep has not looked at yet.
    private let sweepRemaining = NIOLockedValueBox(0)

    /// The first wait before reading a database again, doubled with each failure up to `longestRetry`.
    static let firstRetry = Duration.seconds(2)
    static let longestRetry = Duration.seconds(60)

    /// Where consolidation stands: what waits to be copied and what keeps failing.
    public struct Status: Sendable {
        /// Databases the start-up sweep has still to look at.
        public var sweepRemaining: Int
        /// Databases waiting to be read again after a failure.
        public var retrying: Int
        /// Databases that could not be read at their last attempt.
        public var unreadable: [String]
        /// Locations `lt_locations_all` refused at their database's last attempt (at most 100).
        public var refused: [Refusal]
        public var statistics: Statistics

        /// `{"backlog": {...}, "unreadable": [...], "refused": [...], "copied": N, ...}`.
        public var json: JSON {
            [
                "ok": .bool(unreadable.isEmpty && refused.isEmpty),
                "backlog": ["sweep_remaining": .int(sweepRemaining), "databases_retrying": .int(retrying)],
                "unreadable": .array(unreadable.map(JSON.string)),
                "refused": .array(
                    refused.map { refusal in
                        [
                            "database": .string(refusal.database), "id": .string(refusal.id),
                            "rev": refusal.rev.map(JSON.string) ?? .null,
                            "error": .string(refusal.error), "reason": .string(refusal.reason),
                        ]
                    }),
                "rounds": .int(statistics.rounds), "documents_copied": .int(statistics.documentsCopied),
                "databases_swept": .int(statistics.swept),
            ]
        }
    }

    /// A snapshot of where consolidation stands.
    public var status: Status {
        let retries = self.retries.withLockedValue { $0.waiting }
        let refused = retries.values.flatMap(\.refusals).sorted { ($0.database, $0.id) < ($1.database, $1.id) }
        return Status(
            sweepRemaining: sweepRemaining.withLockedValue { $0 }, retrying: retries.count,
            unreadable: retries.filter(\.value.unreadable).map(\.key).sorted(), refused: Array(refused.prefix(100)),
            statistics: statistics)
    }

    /// Puts `db` in the retry queue: read again after a wait that doubles with each failure.
    func retryLater(_ db: String, refusals: [Refusal], unreadable: Bool) {
        let attempts = retries.withLockedValue { $0.failed(db, refusals: refusals, unreadable: unreadable, at: .now) }
        if attempts == 1 || attempts.isMultiple(of: 10) {
            let what =
                unreadable
                ? "could not be read"
                : "\(refusals.count) of its locations were refused by \(TrackerService.allLocationsDB) (first: \(refusals.first.map { "\($0.id): \($0.error) \($0.reason)" } ?? ""))"
            logger.warning("consolidation of \(db): \(what); its checkpoint stays, trying again (attempt \(attempts))")
        }
    }

    /// `db` was copied to its latest change: nothing of it waits any more.
    func copied(_ db: String) {
        retries.withLockedValue { $0.copied(db) }
    }

    /// When a changed database is looked at again though nothing says it changed (`LateLooks`).
    let lateLookDelays: [Double]
    /// Whether late looks are taken now: only while a cluster node is away or refilling; nil
    /// (this server's own engine) keeps no late looks at all.
    let disturbed: (@Sendable () -> Bool)?

    /// `lateLooks`: after a database's last change, when to read its feed again anyway — 15 s,
    /// 2 and 10 minutes by default (one read each, only once the database is quiet) — when
    /// `disturbed` says so at the time (`ClusterWatch.isDisturbed` on a cluster; nil on this
    /// server's own engine, where nothing is refilled behind the feed and no change is remembered). Each late look is a read
    /// per database that changed: on a cluster taking sparse writes from many devices, looks at
    /// every change would be three reads more per location.
    public init(
        couch: any CouchClient, lateLooks: [Duration] = [.seconds(15), .seconds(120), .seconds(600)],
        disturbed: (@Sendable () -> Bool)? = nil, logger: Logger = Logger(label: "lt.consolidator")
    ) {
        self.couch = couch
        self.logger = logger
        self.disturbed = disturbed
        lateLookDelays = lateLooks.map(\.seconds)
        (saveSignals, saveWanted) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// User databases the start-up sweep takes at a time, and reads at once: few, so that it
    /// never holds up the copying of what changes now (each of its reads may open a file).
    static let sweepChunk = 64
    static let sweepParallelism = 4

    /// Rounds start at most this often: under a steady stream of writes each round then
    /// carries a tenth of a second of them, and `lt_locations_all` takes a few commits per
    /// second instead of one or two per handful of documents (each commit a sync, and one
    /// more update of its indexes). A write after a quiet spell is copied at once.
    static let roundInterval = Duration.milliseconds(100)

    /// Each user database's checkpoint, shared by the lanes (below).
    let checkpoints = NIOLockedValueBox<[String: Checkpoint]>([:])
    /// Databases copied past their saved checkpoint: the saving lane writes them
    /// (`ConsolidatorCheckpoints.swift`).
    let unsaved = NIOLockedValueBox<Set<String>>([])
    /// Wakes the saving lane; one signal is kept, so many rounds make one save.
    let saveWanted: AsyncStream<Void>.Continuation
    let saveSignals: AsyncStream<Void>
    /// The databases a lane is copying now: the other leaves them alone meanwhile.
    private let copying = NIOLockedValueBox<Set<String>>([])

    /// Runs until cancelled, in three lanes: one follows `_db_updates` and copies what changes
    /// now, in rounds; another looks at every user database once (what changed while the
    /// consolidator was not running), a few at a time — with 100,000 users the sweep takes
    /// minutes, and fresh locations do not wait for it; the third saves the checkpoints.
    /// Call it once per consolidator (the saving lane's signals have one reader).
    public func run() async {
        // Take the feed's position first, so nothing written during the sweep is missed.
        let position = try? await couch.request(.get, "/_db_updates", query: ["since": "now"], body: nil)
        let since = position.flatMap { $0.ok ? $0.json["last_seq"]?.stringValue : nil } ?? "now"
        let loaded = await loadCheckpoints()
        checkpoints.withLockedValue { $0 = loaded }
        let everyDatabase = await userDatabases()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.follow(since: since) }
            group.addTask { await self.sweep(everyDatabase) }
            group.addTask { await self.saveCheckpoints() }
        }
    }

    /// The lane that copies what changes now: the requests and the waits that
    /// `FollowStateMachine` decides.
    func follow(since start: String) async {
        let origin = ContinuousClock.now
        func now() -> Double { origin.duration(to: .now).seconds }
        var machine = FollowStateMachine(since: start, lateLooks: lateLookDelays, remembersChanges: disturbed != nil)
        while !Task.isCancelled {
            try? await Task.sleep(until: origin + .seconds(machine.nextRound))
            if Task.isCancelled { break }
            let waiting = retries.withLockedValue { !$0.waiting.isEmpty }
            let query = machine.updatesQuery(at: now(), retriesWaiting: waiting, disturbed: disturbed?() ?? false)
            let next: FollowStateMachine.Next
            do {
                let reply = try await couch.request(.get, "/_db_updates", query: query, body: nil)
                try reply.requireOK()
                let due = retries.withLockedValue { $0.due(at: .now) }
                let names = machine.updatesArrived(reply.json, at: now(), disturbed: disturbed?() ?? false, due: due)
                let roundStarted = ContinuousClock.now
                let (unwritten, taken) = await consolidate(names, parallelism: Consolidator.parallelism)
                let took = roundStarted.duration(to: .now).seconds
                counters.withLockedValue { $0.lastRoundSeconds = took }
                next = machine.roundEnded(unwritten: unwritten, taken: taken)
            } catch {
                logger.warning("consolidation: \(error); retrying")
                next = machine.updatesFailed()
            }
            if case let .pause(seconds) = next { try? await Task.sleep(for: .seconds(seconds)) }
        }
    }

    /// The lane that looks at every database once. A database the other lane is copying is
    /// skipped: that copy starts from the same checkpoint.
    /// Databases that cannot be read or whose locations are refused go to the retry queue,
    /// which the other lane works through.
    func sweep(_ names: [String]) async {
        var next = names[...]
        sweepRemaining.withLockedValue { $0 = names.count }
        while !next.isEmpty, !Task.isCancelled {
            var chunk = Array(next.prefix(Consolidator.sweepChunk))
            next = next.dropFirst(chunk.count)
            let count = chunk.count
            while !chunk.isEmpty, !Task.isCancelled {
                let (unwritten, _) = await consolidate(chunk, parallelism: Consolidator.sweepParallelism)
                chunk = unwritten
                if !chunk.isEmpty { try? await Task.sleep(for: .seconds(2)) }
            }
            counters.withLockedValue { $0.swept += count }
            sweepRemaining.withLockedValue { $0 -= count }
        }
    }

    /// Every checkpoint in `lt_locations_all`, read page by page.
    func loadCheckpoints() async -> [String: Checkpoint] {
        var checkpoints: [String: Checkpoint] = [:]
        var start = Consolidator.checkpointPrefix
        while !Task.isCancelled {
            let query = [
                "startkey": JSON.string(start).text,
                "endkey": JSON.string(Consolidator.checkpointPrefix + "\u{FFF0}").text,
                "include_docs": "true", "limit": "5000",
            ]
            guard
                let reply = try? await couch.request(
                    .get, "/\(TrackerService.allLocationsDB)/_local_docs", query: query, body: nil), reply.ok
            else {
                logger.warning("consolidation: cannot read checkpoints; every database is read from its start")
                return checkpoints
            }
            let rows = reply.json["rows"]?.arrayValue ?? []
            for row in rows {
                guard let id = row["id"]?.stringValue, let seq = row["doc"]?["seq"]?.stringValue else { continue }
                checkpoints[String(id.dropFirst(Consolidator.checkpointPrefix.count))] = Checkpoint(
                    seq: seq, rev: row["value"]?["rev"]?.stringValue)
            }
            guard rows.count == 5000, let last = rows.last?["id"]?.stringValue else { return checkpoints }
            start = last
        }
        return checkpoints
    }

    /// Every user database's name.
    func userDatabases() async -> [String] {
        guard let reply = try? await couch.request(.get, "/_all_dbs", query: [:], body: nil), reply.ok else {
            logger.error("consolidation: cannot list databases")
            return []
        }
        return (reply.json.arrayValue ?? []).compactMap(\.stringValue).filter { $0.hasPrefix(Consolidator.prefix) }
    }

    /// What one database contributes to a round.
    struct Batch: Sendable {
        var db: String
        var docs: [JSON]
        var lastSeq: String
        /// More changes wait after this page.
        var more: Bool
    }

    /// Copies the changes of `names` in rounds until none has more. Returns the databases whose
    /// changes could not be written to `lt_locations_all` at all (to be tried again shortly,
    /// even if they do not change again) and those left alone because the other lane is
    /// copying them. Databases that could not be read, or some of whose locations were
    /// refused, go to the retry queue; their checkpoints stay where they were.
    func consolidate(_ names: [String], parallelism: Int) async -> (unwritten: [String], taken: [String]) {
        let (claimed, taken) = copying.withLockedValue { copying -> ([String], [String]) in
            var claimed: [String] = [], taken: [String] = []
            for name in names {
                if copying.insert(name).inserted { claimed.append(name) } else { taken.append(name) }
            }
            return (claimed, taken)
        }
        defer { copying.withLockedValue { copying in for name in claimed { copying.remove(name) } } }
        var pending = claimed
        while !pending.isEmpty, !Task.isCancelled {
            let readStart = ContinuousClock.now
            let (batches, failed) = await withTaskGroup(of: (String, Read).self) { group -> ([Batch], [String]) in
                var next = pending.makeIterator()
                let since = { @Sendable (name: String) in self.checkpoints.withLockedValue { $0[name]?.seq } ?? "0" }
                for _ in 0..<parallelism {
                    guard let name = next.next() else { break }
                    group.addTask { (name, await self.read(name, since: since(name))) }
                }
                var batches: [Batch] = [], failed: [String] = []
                while let (name, read) = await group.next() {
                    switch read {
                    case let .batch(batch): batches.append(batch)
                    case .nothing: self.copied(name)
                    case .failed: failed.append(name)
                    }
                    if let name = next.next() { group.addTask { (name, await self.read(name, since: since(name))) } }
                }
                return (batches, failed)
            }
            for name in failed { retryLater(name, refusals: [], unreadable: true) }
            let writeStart = ContinuousClock.now
            let refused: [String: [Refusal]]
            do {
                refused = try await write(batches)
                let writeEnd = ContinuousClock.now
                counters.withLockedValue {
                    $0.rounds += 1
                    $0.databasesRead += batches.count
                    $0.documentsCopied +=
                        batches.reduce(0) { $0 + $1.docs.count } - refused.values.reduce(0) { $0 + $1.count }
                    $0.readSeconds += readStart.duration(to: writeStart).seconds
                    $0.writeSeconds += writeStart.duration(to: writeEnd).seconds
                }
            } catch {
                logger.warning("consolidation: \(error); retrying")
                return (pending.filter { !failed.contains($0) }, taken)
            }
            for (db, refusals) in refused { retryLater(db, refusals: refusals, unreadable: false) }
            for batch in batches where !batch.more && refused[batch.db] == nil { copied(batch.db) }
            pending = batches.filter { $0.more && refused[$0.db] == nil }.map(\.db)
        }
        return ([], taken)
    }

    /// The next page of a database's changes since `since`, with the documents.
    func read(_ db: String, since: String) async -> Read {
        let start = ContinuousClock.now
        defer {
            let took = start.duration(to: .now).seconds
            counters.withLockedValue { $0.slowestRead = max($0.slowestRead, took) }
        }
        // Whose the documents are is the database's name; a name that names no owner (a
        // database an admin made by hand) is not copied.
        guard let namespace = OwnerNamespace(owner: String(db.dropFirst(Consolidator.prefix.count))) else {
            logger.warning("consolidation: \(db) names no user; not copied")
            return .nothing
        }
        do {
            var since = since
            while true {
                // Gone meanwhile: nothing to copy.
                guard let changes = try await couch.changes(of: db, since: since, limit: Consolidator.pageSize) else {
                    return .nothing
                }
                let rows = changes.rows, last = changes.lastSeq
                // A checkpoint of an earlier database of the same name (deleted and created again)
                // does not apply: this server's sequences end in a 12-hex-digit tag of the database,
                // and a different tag means another database. Start over. (Apache CouchDB's
                // sequences are opaque and change shape with every update; they are left alone.)
                if since != "0", let tag = Consolidator.databaseTag(last), let old = Consolidator.databaseTag(since),
                    old != tag
                {
                    since = "0"
                    continue
                }
                var wanted: [DocumentRevision] = []
                var docs: [JSON] = []
                for row in rows {
                    guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/") else { continue }
                    let revs = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"] }
                    if let doc = row["doc"], Consolidator.isComplete(doc, revs: revs) {
                        docs.append(doc)
                        continue
                    }
                    wanted += revs.compactMap { $0.stringValue.map { DocumentRevision(id: id, rev: $0) } }
                }
                docs += try await couch.documents(wanted, from: db)
                if rows.isEmpty && last == since { return .nothing }
                return .batch(
                    Batch(
                        db: db, docs: docs.compactMap { Consolidator.copy(of: $0, in: namespace) }, lastSeq: last,
                        more: rows.count == Consolidator.pageSize))
            }
        } catch {
            logger.warning("consolidation of \(db): \(error); trying again")
            return .failed
        }
    }

    /// What reading a database gave.
    enum Read: Sendable {
        case batch(Batch)
        /// Nothing new, or the database is gone.
        case nothing
        /// It could not be read: to be tried again, even if it does not change again.
        case failed
    }

    /// Writes a round: every document (in chunks), then the checkpoints of the databases all
    /// of whose documents were stored, in one request. Returns the documents refused, by
    /// database: their databases keep their checkpoints (every document of theirs is written
    /// again at the next attempt, which changes nothing for those already stored).
    func write(_ batches: [Batch]) async throws -> [String: [Refusal]] {
        let all = TrackerService.allLocationsDB
        var owners: [String: [String]] = [:]  // document id -> databases that sent it
        for batch in batches {
            for doc in batch.docs { if let id = doc["_id"]?.stringValue { owners[id, default: []].append(batch.db) } }
        }
        var refused: [String: [Refusal]] = [:]
        let docs = batches.flatMap(\.docs)
        for start in stride(from: 0, to: docs.count, by: 5000) {
            let chunk = Array(docs[start..<min(docs.count, start + 5000)])
            for refusal in try await couch.storeReplicated(chunk, in: all) {
                for db in owners[refusal.id] ?? batches.map(\.db) {
                    refused[db, default: []].append(
                        Refusal(
                            database: db, id: refusal.id, rev: refusal.rev, error: refusal.error, reason: refusal.reason
                        ))
                }
            }
        }
        // A database that contributed no documents (a new user's, with only its design
        // document) moves only the checkpoint kept in memory: saving those cost a commit per
        // round all through registrations, and after a restart reading them again copies nothing.
        checkpoints.withLockedValue { checkpoints in
            for batch in batches where batch.docs.isEmpty {
                checkpoints[batch.db] = Checkpoint(seq: batch.lastSeq, rev: checkpoints[batch.db]?.rev)
            }
        }
        // The others move on at once; their checkpoints are saved beside the rounds.
        let copied = batches.filter { !$0.docs.isEmpty && refused[$0.db] == nil }
        guard !copied.isEmpty else { return refused }
        checkpoints.withLockedValue { checkpoints in
            for batch in copied {
                checkpoints[batch.db] = Checkpoint(seq: batch.lastSeq, rev: checkpoints[batch.db]?.rev)
            }
        }
        unsaved.withLockedValue { $0.formUnion(copied.map(\.db)) }
        saveWanted.yield()
        return refused
    }
}

extension Consolidator {
    /// A user's document as `lt_locations_all` keeps it: under `<owner>:<id>`, and with the
    /// owner as its `properties.username`. The database a document came from says whose it
    /// is, never the document: a user writes whatever ids, revisions and names they like in
    /// their own database, and their copies can still only ever land beside their own. nil
    /// for what is not a document with an id. `naming` false leaves `properties` as they are.
    static func copy(of doc: JSON, in namespace: OwnerNamespace, naming: Bool = true) -> JSON? {
        guard case var .object(object) = doc, let id = object["_id"]?.stringValue else { return nil }
        object["_id"] = .string(namespace.stored(id))
        if naming, object["_deleted"] != true, case var .object(properties)? = object["properties"] {
            properties["username"] = .string(namespace.owner)
            object["properties"] = .object(properties)
        }
        return .object(object)
    }

    /// Whether a change's `doc` (from `include_docs`) can be copied as it is: the only leaf,
    /// a first revision (no history to carry) and no attachments (which `_changes` gives as
    /// stubs). New locations are all like that, so most databases cost one request; anything
    /// else is fetched with its history and attachments by `_bulk_get`.
    static func isComplete(_ doc: JSON, revs: [JSON]) -> Bool {
        guard revs.count == 1, let rev = doc["_rev"]?.stringValue, revs[0].stringValue == rev, rev.hasPrefix("1-")
        else { return false }
        return doc["_attachments"] == nil && doc["_deleted"] == nil
    }

    /// The database tag of one of this server's sequence strings (`N-<12 hex digits>`).
    static func databaseTag(_ seq: String) -> Substring? {
        let parts = seq.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, parts[1].count == 12, parts[1].allSatisfy(\.isHexDigit) else { return nil }
        return parts[1]
    }
}
