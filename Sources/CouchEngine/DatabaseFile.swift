import CouchJSON
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
package import GRDB
import GRDBSQLite
import CSQLiteTuning

/// The SQLite file behind a `DocumentDatabase`: its schema, its creation (whole or not at all),
/// its connections, and the `meta` table of counters and settings.
package enum DatabaseFile {
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

    /// The size a write-ahead log is cut back to after a checkpoint (`journal_size_limit`).
    static let logSizeLimit = 65_536

    /// The file's connections: a pool (concurrent readers beside the writer, WAL kept between
    /// opens), or one connection holding the file exclusively for the many small databases.
    static func openConnections(
        path: String, name: String, durability: Durability, connections: Connections
    ) throws -> any DatabaseWriter {
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
                _ = withUnsafeMutablePointer(to: &persist) {
                    sqlite3_file_control(db.sqliteConnection, nil, SQLITE_FCNTL_PERSIST_WAL, $0)
                }
                try db.execute(sql: "PRAGMA journal_size_limit = \(DatabaseFile.logSizeLimit)")
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
                try db.execute(sql: "PRAGMA journal_size_limit = \(DatabaseFile.logSizeLimit)")
                try db.execute(sql: "PRAGMA synchronous = \(durability.rawValue)")
            }
            return try DatabaseQueue(path: DatabaseFile.uriWithoutLocks(path), configuration: config)
        }
    }

    /// The database's uuid, cached metadata (`_revs_limit`, `_security`), update sequence and
    /// whether it is partitioned: one statement outside a transaction (one statement reads a
    /// consistent state), since an open is on the path of a write to a closed database.
    static func readMeta(
        _ pool: any DatabaseWriter
    ) throws -> (uuid: String, meta: DocumentDatabase.CachedMeta, seq: Int, partitioned: Bool) {
        try pool.unsafeRead { db -> (String, DocumentDatabase.CachedMeta, Int, Bool) in
            var values: [String: String] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql:
                    "SELECT key, value FROM meta WHERE key IN ('uuid', 'revs_limit', 'security', 'update_seq', 'partitioned')"
            )
            while let row = try rows.next() { values[row[0]] = row[1] as String }
            guard let uuid = values["uuid"] else { throw CouchError.databaseNotFound }
            let revsLimit = values["revs_limit"].flatMap(Int.init) ?? 1000
            let security = try values["security"].flatMap { try JSON.parse($0).objectValue } ?? JSONObject()
            return (
                uuid, DocumentDatabase.CachedMeta(revsLimit: revsLimit, security: security),
                values["update_seq"].flatMap(Int.init) ?? 0,
                values["partitioned"] == "true"
            )
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
        let queue = try DatabaseQueue(path: DatabaseFile.uriWithoutLocks(building), configuration: config)
        try queue.inDatabase { db in
            try db.inTransaction {
                try db.execute(sql: DatabaseFile.schema)
                try DatabaseFile.setMeta(
                    db, "uuid", UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
                try DatabaseFile.setMeta(db, "created", String(Int(Date().timeIntervalSince1970 * 1_000_000)))
                try DatabaseFile.setMeta(db, "security", JSON.object(DocumentDatabase.defaultSecurity).text)
                if partitioned { try DatabaseFile.setMeta(db, "partitioned", "true") }
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
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)").execute(arguments: [
            key, value,
        ])
    }

    package static func metaInt(_ db: GRDB.Database, _ key: String) throws -> Int {
        try meta(db, key).flatMap(Int.init) ?? 0
    }

    /// An SQLite URI for `path` on the `unix-none` file system (no file locks). URIs are on
    /// for every connection (CSQLiteTuning); the path is percent-encoded as a URI path.
    static func uriWithoutLocks(_ path: String) -> String {
        "file:" + (path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path) + "?vfs=unix-none"
    }
}

/// fsync of a file or directory.
private func syncFile(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CouchError.internalError("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    guard fsync(fd) == 0 else {
        throw CouchError.internalError("cannot sync \(path): \(String(cString: strerror(errno)))")
    }
}

extension DatabaseStore {
    /// The SQLite library's version this process runs on (`lt doctor`, `lt_build_info`).
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }
}
