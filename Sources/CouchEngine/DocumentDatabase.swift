import CouchJSON
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GRDB
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
    let maxDocumentSize: Int
    let designCache = Locked(DesignCache())
    /// Indexes kept in memory beside their tables (geo), by table name, each with the
    /// sequence it reflects.
    package let loadedIndexes = Locked<[String: (seq: Int, index: any LoadedIndex)]>([:])

    struct CachedMeta {
        var revsLimit: Int
        var security: JSONObject
    }

    static let schema = """
        CREATE TABLE IF NOT EXISTS docs(
            id TEXT PRIMARY KEY NOT NULL,
            seq INTEGER NOT NULL,
            winner TEXT NOT NULL,
            deleted INTEGER NOT NULL,
            tree TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX IF NOT EXISTS docs_by_seq ON docs(seq);
        CREATE TABLE IF NOT EXISTS revs(
            doc_id TEXT NOT NULL,
            rev TEXT NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY(doc_id, rev)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS attachments(
            digest TEXT PRIMARY KEY NOT NULL,
            data BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS att_refs(
            doc_id TEXT NOT NULL,
            rev TEXT NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY(doc_id, rev, digest)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS att_refs_by_digest ON att_refs(digest);
        CREATE TABLE IF NOT EXISTS local_docs(
            id TEXT PRIMARY KEY NOT NULL,
            rev INTEGER NOT NULL,
            body BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS purges(
            purge_seq INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL,
            revs TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS meta(
            key TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        """

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
        maxDocumentSize: Int = DatabaseStore.defaultMaxDocumentSize
    ) throws {
        self.name = name
        self.maxDocumentSize = maxDocumentSize
        self.notifier = notifier
        self.validator = validator
        let pool = try DocumentDatabase.openConnections(path: path, name: name, durability: durability, connections: connections)
        self.pool = pool
        let (uuid, meta, seq, partitioned) = try DocumentDatabase.readMeta(pool)
        self.uuid = uuid
        self.isPartitioned = partitioned
        self.sequenceSuffix = "-" + uuid.prefix(12)
        self.cachedMeta = Locked(meta)
        let suffix = sequenceSuffix
        var onChanges: WriteQueue.ChangesListener?
        if let recentChanges {
            onChanges = { before, after, changes, complete in
                recentChanges.record(name, suffix: suffix, from: before, to: after, changes: changes, complete: complete)
            }
        }
        self.writer = WriteQueue(pool: pool, onChanges: onChanges, onCommit: { [notifier] seq in notifier.publish(seq: seq) })
        recentChanges?.begin(name, suffix: suffix, seq: seq)
        notifier.publish(seq: seq, commit: false)
    }

    /// The file's connections: a pool (concurrent readers beside the writer, WAL kept between
    /// opens), or one connection holding the file exclusively for the many small databases.
    static func openConnections(path: String, name: String, durability: Durability, connections: Connections) throws -> any DatabaseWriter {
        var config = Configuration()
        config.busyMode = .timeout(30)
        config.foreignKeysEnabled = false  // no foreign keys in the schema: one pragma less per open
        config.maximumReaderCount = 4
        config.label = name
        switch connections {
        case .pool:
            config.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = \(durability.rawValue)")
                // Keep the -wal and -shm files when the database closes, so reopening it creates
                // and deletes no files; the WAL is truncated to a small size at checkpoints.
                var persist: CInt = 1
                _ = withUnsafeMutablePointer(to: &persist) { sqlite3_file_control(db.sqliteConnection, nil, SQLITE_FCNTL_PERSIST_WAL, $0) }
                try db.execute(sql: "PRAGMA journal_size_limit = 65536")
            }
            return try DatabasePool(path: path, configuration: config)
        case .single:
            // Thousands of these: their queues share the default pool of threads (about one
            // per core, more while some wait for the disk) instead of each getting a thread of
            // its own whenever it has work: hundreds busy at once cost more in thread switches
            // than in writing. (Opening and closing files runs elsewhere: `DatabaseStore`.)
            config.targetQueue = DispatchQueue.global(qos: .default)
            config.prepareDatabase { db in
                // The only connection, in a process that holds the data directory (see
                // `DirectoryLock`): opened without file locks (SQLite's `unix-none` file system;
                // with locks, every open walked SQLite's list of all locked files, which with
                // thousands open cost more than the open), in exclusive mode so the WAL index
                // lives in its memory (no shared-memory file), writing ahead: a commit is one
                // sync where a rollback journal took three. Checkpoints come often, as there
                // may be thousands of these, each with its WAL; a small page cache. (Exclusive
                // mode first: a pragma that reads the schema before it would open the WAL the
                // shared-memory way.)
                try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
                _ = lt_sqlite_no_checkpoint_on_close(db.sqliteConnection)
                try db.execute(sql: "PRAGMA cache_size = -64")
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 64")
                try db.execute(sql: "PRAGMA journal_size_limit = 65536")
                try db.execute(sql: "PRAGMA synchronous = \(durability.rawValue)")
            }
            return try DatabaseQueue(path: DocumentDatabase.uriWithoutLocks(path), configuration: config)
        }
    }

    /// The database's uuid, cached metadata (`_revs_limit`, `_security`), update sequence and
    /// whether it is partitioned: one statement outside a transaction (one statement reads a
    /// consistent state), since an open is on the path of a write to a closed database.
    static func readMeta(_ pool: any DatabaseWriter) throws -> (uuid: String, meta: CachedMeta, seq: Int, partitioned: Bool) {
        try pool.unsafeRead { db -> (String, CachedMeta, Int, Bool) in
            var values: [String: String] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT key, value FROM meta WHERE key IN ('uuid', 'revs_limit', 'security', 'update_seq', 'partitioned')")
            while let row = try rows.next() { values[row[0]] = row[1] as String }
            guard let uuid = values["uuid"] else { throw CouchError.databaseNotFound }
            let revsLimit = values["revs_limit"].flatMap(Int.init) ?? 1000
            let security = try values["security"].flatMap { try JSON.parse($0).objectValue } ?? JSONObject()
            return (uuid, CachedMeta(revsLimit: revsLimit, security: security), values["update_seq"].flatMap(Int.init) ?? 0,
                    values["partitioned"] == "true")
        }
    }

    /// Writes a new, empty database file at `path` (which must not exist): built under
    /// `scratch` with neither journal nor syncs (nobody else can see it yet), synced once, then
    /// renamed into place and its directory synced. A database is there whole or not at all,
    /// and creating one costs two syncs instead of the eight of building it in place (a
    /// rollback journal to switch a new file to WAL, the WAL's own creation, the schema).
    static func createFile(at path: String, scratch: URL, partitioned: Bool = false) throws {
        let building = scratch.appendingPathComponent(UUID().uuidString + ".sqlite").path
        defer { try? FileManager.default.removeItem(atPath: building) }
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
            try db.execute(sql: "PRAGMA journal_mode = OFF")
            try db.execute(sql: "PRAGMA synchronous = OFF")
        }
        let queue = try DatabaseQueue(path: DocumentDatabase.uriWithoutLocks(building), configuration: config)
        try queue.inDatabase { db in
            try db.inTransaction {
                try db.execute(sql: DocumentDatabase.schema)
                try DocumentDatabase.setMeta(db, "uuid", UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
                try DocumentDatabase.setMeta(db, "created", String(Int(Date().timeIntervalSince1970 * 1_000_000)))
                try DocumentDatabase.setMeta(db, "security", JSON.object(DocumentDatabase.defaultSecurity).text)
                if partitioned { try DocumentDatabase.setMeta(db, "partitioned", "true") }
                return .commit
            }
            // Recorded in the file's header: every later open writes ahead.
            try db.execute(sql: "PRAGMA journal_mode = WAL")
        }
        try queue.close()
        try syncFile(building)
        guard rename(building, path) == 0 else {
            throw CouchError.internalError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        try syncFile((path as NSString).deletingLastPathComponent)
    }

    static func meta(_ db: GRDB.Database, _ key: String) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM meta WHERE key = ?"), arguments: [key])
    }

    static func setMeta(_ db: GRDB.Database, _ key: String, _ value: String) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)").execute(arguments: [key, value])
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

    package static func metaInt(_ db: GRDB.Database, _ key: String) throws -> Int {
        try meta(db, key).flatMap(Int.init) ?? 0
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
        try await pool.write { db in try DocumentDatabase.setMeta(db, "revs_limit", String(limit)) }
        cachedMeta.withLock { $0.revsLimit = limit }
    }

    public func setSecurity(_ security: JSONObject) async throws {
        // Through the group commit, so it shares a transaction with concurrent writes.
        try await writer.write { db, _ in try DocumentDatabase.setMeta(db, "security", JSON.object(security).text) }
        cachedMeta.withLock { $0.security = security }
    }

    /// DocumentDatabase information as `GET /{db}` returns it.
    public func info() async throws -> JSONObject {
        let (seq, docs, deleted, purgeSeq, pages, pageSize, free) = try await reading { db in
            (
                try DocumentDatabase.metaInt(db, "update_seq"),
                try DocumentDatabase.metaInt(db, "doc_count"),
                try DocumentDatabase.metaInt(db, "doc_del_count"),
                try DocumentDatabase.metaInt(db, "purge_seq"),
                try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096,
                try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            )
        }
        // Sizes from page counts, which SQLite keeps: no scan, however large the database.
        // `active` excludes free pages (what compaction would give back).
        let file = pages * pageSize
        let active = max(0, pages - free) * pageSize
        let info: JSONObject = [
            "db_name": .string(name),
            "purge_seq": .string(sequenceString(purgeSeq)),
            "update_seq": .string(sequenceString(seq)),
            "sizes": ["file": .int(file), "external": .int(active), "active": .int(active)],
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
        try await reading { db in try DocumentDatabase.metaInt(db, "update_seq") }
    }

    func close() {
        try? pool.close()
    }

    /// An SQLite URI for `path` on the `unix-none` file system (no file locks). URIs are on
    /// for every connection (CSQLiteTuning); the path is percent-encoded as a URI path.
    static func uriWithoutLocks(_ path: String) -> String {
        "file:" + (path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path) + "?vfs=unix-none"
    }

    /// Whether this database has a single connection (`Connections.single`).
    var isSingleConnection: Bool { pool is DatabaseQueue }

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

/// fsync of a file or directory.
private func syncFile(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CouchError.internalError("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    guard fsync(fd) == 0 else { throw CouchError.internalError("cannot sync \(path): \(String(cString: strerror(errno)))") }
}
