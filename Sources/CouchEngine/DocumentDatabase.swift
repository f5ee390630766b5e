public import CouchJSON
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
package import GRDB
import GRDBSQLite
import CSQLiteTuning

/// One CouchDB database: a SQLite file, in WAL mode with a pool of connections (concurrent
/// readers beside the writer), or, for the many small databases of a server with a database
/// per user, one connection holding the file exclusively (`Connections.single`): two file
/// descriptors instead of five, no shared-memory file, cheap to open, so such a server can keep
/// thousands open and reopen the rest.
///
/// Tables:
/// - `docs`: one row per document id with its revision tree, winning revision and latest
///   sequence (the unique index on `seq` is the changes index);
/// - `revs`: revision bodies (JSON, attachment stubs included), kept for non-leaf revisions
///   until compaction;
/// - `attachments`: attachment bodies by digest, stored once however many revisions share them,
///   with `att_refs` recording which revision uses which digest;
/// - `local_docs`: `_local` documents, outside the changes index;
/// - `meta`: counters, `_security`, `_revs_limit`, the database's uuid.
public final class DocumentDatabase: Sendable {
    public let name: String
    let pool: any DatabaseWriter
    let writer: WriteQueue
    /// Called when this instance goes away (its file closed), for its store to forget it.
    private let onClosed: (@Sendable () -> Void)?
    /// The write-ahead log's path, for a single-connection database this instance created (see `foldSmallLog`).
    private let logPath: String?
    public let notifier: ChangeNotifier
    /// A random tag, created with the database, that makes its sequence strings opaque and
    /// distinguishes two databases of the same name created at different times.
    public let uuid: String
    /// A partitioned database (CouchDB's `?partitioned=true`): every document id but design
    /// and local ones is `partition:rest`, and queries can be scoped to one partition.
    public let isPartitioned: Bool
    private let sequenceSuffix: String
    private let cachedMeta: Locked<CachedMeta>
    /// Checks writes before they are stored (`validate_doc_update`); nil: no checks.
    let validator: (any WriteValidator)?
    /// Largest document body stored (bytes of JSON); see `DatabaseStore.maxDocumentSize`.
    var maxDocumentSize: Int { documentSizeLimit.withLock { $0 } }
    /// The store's limit, shared with it (changed at run time through `_config`).
    private let documentSizeLimit: Locked<Int>
    /// See `DatabaseStore.maxPartitionSize`; shared with the store.
    var maxPartitionSize: Int { partitionSizeLimit.withLock { $0 } }
    private let partitionSizeLimit: Locked<Int>
    let designCache = Locked(DesignCache())
    /// Indexes kept in memory beside their tables (geo), by table name, each with the
    /// sequence it reflects.
    package let loadedIndexes = Locked<[String: (seq: Int, index: any LoadedIndex)]>([:])
    /// Index tables known to reflect every commit up to a sequence: an index whose sequence is
    /// the latest commit's is current without a look at its tables (`catchUp`).
    let currentIndexes = Locked<[String: Int]>([:])
    /// `pending` of the changes feed at positions clients read up to.
    let pendingCounts = PendingCounts()
    let allDocsOffsets = AllDocsOffsets()

    struct CachedMeta {
        var revsLimit: Int
        var security: JSONObject
    }

    /// The `_security` object a new database gets: admin-only, as in CouchDB 3.
    public static let defaultSecurity: JSONObject = [
        "members": ["roles": ["_admin"]],
        "admins": ["roles": ["_admin"]],
    ]

    /// - Parameters:
    ///   - connections: a pool (concurrent readers) or a single connection.
    ///   - recentChanges: where to keep this database's latest changes, if anywhere.
    init(
        name: String, path: String, notifier: ChangeNotifier, durability: Durability,
        validator: (any WriteValidator)? = nil, connections: Connections = .pool, recentChanges: RecentChanges? = nil,
        maxDocumentSize: Locked<Int> = Locked(DatabaseStore.defaultMaxDocumentSize),
        maxPartitionSize: Locked<Int> = Locked(DatabaseStore.defaultMaxPartitionSize),
        metrics: EngineMetrics = EngineMetrics(),
        created: Bool = false, onClosed: (@Sendable () -> Void)? = nil
    ) throws {
        self.onClosed = onClosed
        self.name = name
        self.documentSizeLimit = maxDocumentSize
        self.partitionSizeLimit = maxPartitionSize
        self.notifier = notifier
        self.validator = validator
        let pool = try DatabaseFile.openConnections(
            path: path, name: name, durability: durability, connections: connections)
        self.pool = pool
        self.logPath = connections == .single && created ? path + "-wal" : nil
        let (uuid, meta, seq, partitioned) = try DatabaseFile.readMeta(pool)
        self.uuid = uuid
        self.isPartitioned = partitioned
        self.sequenceSuffix = "-" + uuid.prefix(12)
        self.cachedMeta = Locked(meta)
        let suffix = sequenceSuffix
        var onChanges: WriteQueue.ChangesListener?
        if let recentChanges {
            onChanges = { before, after, changes, complete in
                recentChanges.record(
                    name, suffix: suffix, from: before, to: after, changes: changes, complete: complete)
            }
        }
        self.writer = WriteQueue(
            pool: pool, metrics: metrics, onChanges: onChanges,
            onCommit: { [notifier] seq in notifier.publish(seq: seq) })
        recentChanges?.begin(name, suffix: suffix, seq: seq)
        notifier.publish(seq: seq, commit: false)
    }

    /// Runs `work` in one write transaction of the write queue (indexes' own tables).
    package func writing<T: Sendable>(_ work: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        try await writer.write { db, _ in try work(db) }
    }

    /// Reads in one consistent state. A pool reads in a snapshot transaction; a single
    /// connection runs the closure as it is, since nothing else runs on that connection
    /// meanwhile (no transaction and read-only pragmas around it: four statements less per
    /// read, and a user's database is read once per write by the consolidator).
    package func reading<T: Sendable>(_ body: @Sendable (GRDB.Database) throws -> T) async throws -> T {
        if isSingleConnection { return try await pool.unsafeRead(body) }
        return try await pool.read(body)
    }

    // MARK: Sequences

    /// The opaque sequence string for `seq`, as clients see it.
    public func sequenceString(_ seq: Int) -> String {
        String(seq) + sequenceSuffix
    }

    /// Parses a sequence a client passed back: our strings, plain integers, or `now` (-1).
    public func parseSequence(_ value: JSON) throws -> Int {
        try DocumentDatabase.parseSequence(value)
    }

    /// The same, for a database not at hand.
    public static func parseSequence(_ value: JSON) throws -> Int {
        switch value {
        case let .int(i): return max(0, i)
        case let .string(s):
            if s == "now" { return -1 }
            if let i = Int(s) { return max(0, i) }
            if let dash = s.firstIndex(of: "-"), let i = Int(s[s.startIndex..<dash]) { return max(0, i) }
            throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
        case .array(let parts) where !parts.isEmpty:
            return try parseSequence(parts[0])
        default:
            throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
        }
    }

    // MARK: Metadata

    public var revsLimit: Int { cachedMeta.withLock { $0.revsLimit } }
    public var security: JSONObject { cachedMeta.withLock { $0.security } }

    public func setRevsLimit(_ limit: Int) async throws {
        guard limit > 0 else { throw CouchError.badRequest("revs_limit must be a positive integer") }
        try await pool.write { db in try DatabaseFile.setMeta(db, "revs_limit", String(limit)) }
        cachedMeta.withLock { $0.revsLimit = limit }
    }

    public func setSecurity(_ security: JSONObject) async throws {
        // Through the group commit, so it shares a transaction with concurrent writes.
        try await writer.write { db, _ in try DatabaseFile.setMeta(db, "security", JSON.object(security).text) }
        cachedMeta.withLock { $0.security = security }
    }

    /// DocumentDatabase information as `GET /{db}` returns it.
    public func info() async throws -> JSONObject {
        let (seq, docs, deleted, purgeSeq, pages, pageSize, free, live, kept) = try await reading { db in
            (
                try DatabaseFile.metaInt(db, "update_seq"),
                try DatabaseFile.metaInt(db, "doc_count"),
                try DatabaseFile.metaInt(db, "doc_del_count"),
                try DatabaseFile.metaInt(db, "purge_seq"),
                try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096,
                try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0,
                try RevisionStore.liveBytes(db),
                try DatabaseFile.meta(db, "live_bytes") != nil
            )
        }
        if !kept {
            // A database from before the total was kept was just counted: keep the count, so the
            // next `GET /{db}` does not scan again (the write queue stores what it counted).
            _ = try? await writer.write { db, context in
                try DatabaseFile.setMeta(db, "live_bytes", String(context.liveBytes))
                return true
            }
        }
        // No scan, however large the database: `file` from SQLite's page count; `external` the
        // bytes of the live documents (winning bodies and their attachments), a total the writer
        // keeps; `active` the same, within the pages in use (attachments several documents
        // share are stored once). Compaction gives back the rest (older revisions, free pages).
        let file = pages * pageSize
        let active = min(live, max(0, pages - free) * pageSize)
        let info: JSONObject = [
            "db_name": .string(name),
            "purge_seq": .string(sequenceString(purgeSeq)),
            "update_seq": .string(sequenceString(seq)),
            "sizes": ["file": .int(file), "external": .int(live), "active": .int(active)],
            "props": isPartitioned ? ["partitioned": true] : [:],
            "doc_del_count": .int(deleted),
            "doc_count": .int(docs),
            "disk_format_version": 8,
            "compact_running": false,
            "cluster": ["q": 1, "n": 1, "w": 1, "r": 1],
            "instance_start_time": "0",
        ]
        return info
    }

    /// The current update sequence number.
    public func updateSeq() async throws -> Int {
        try await reading { db in try DatabaseFile.metaInt(db, "update_seq") }
    }

    func close() {
        try? pool.close()
    }

    deinit { onClosed?() }

    /// Whether this database has a single connection (`Connections.single`).
    var isSingleConnection: Bool { pool is DatabaseQueue }

    /// Whether closing this database folds its log first (see `foldSmallLog`).
    var foldsLogOnClose: Bool { logPath != nil }

    /// Folds a small write-ahead log back into the file and empties it, for a single-connection
    /// database created by this instance and about to be closed (evicted). Those close without
    /// a checkpoint (see `DatabaseFile.openConnections`), so a new database would keep the few
    /// frames of its first writes in a log file beside its pages: a registered user who has not
    /// synced since is 40 KB of file and 24 KB of log, and most users of a server with many are
    /// such. Only at a new database's first close: folding at every eviction made the writes of
    /// 10,000 devices over 2,048 open databases wait behind checkpoints (write p50 4.6 → 97 ms,
    /// `lt-bench scale`). A log that grew to `DatabaseFile.logSizeLimit` is left as it is.
    func foldSmallLog() {
        guard let logPath else { return }
        var info = stat()
        guard stat(logPath, &info) == 0, info.st_size > 0, info.st_size < DatabaseFile.logSizeLimit else { return }
        try? pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// Gives back the page cache and prepared statements of a single-connection database
    /// that sits idle, on its own queue after whatever runs there now (nobody waits for it).
    /// Pools keep theirs.
    func releaseIdleMemory() {
        guard isSingleConnection else { return }
        pool.asyncWriteWithoutTransaction { db in db.releaseMemory() }
    }
}

/// How a database's SQLite file is opened.
public enum Connections: Sendable {
    /// WAL mode with a writer and up to four concurrent readers: for busy, shared databases.
    case pool
    /// One connection, reads and writes taking turns, without file locks (the process must
    /// hold the data directory's `DirectoryLock`): for the many small databases of a
    /// database-per-user server.
    case single
}

/// How hard SQLite works to make a commit durable. `full` fsyncs the WAL on every commit
/// (survives power loss); `normal` survives a killed process but may lose the last commits on
/// power loss.
public enum Durability: String, Sendable {
    case full = "FULL"
    case normal = "NORMAL"
}
