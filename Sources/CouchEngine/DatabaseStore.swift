import CouchJSON
import CSQLiteTuning
public import Foundation
public import Logging

/// All databases of one server: one SQLite file each under `<directory>/dbs/`.
///
/// Databases are opened on first use and closed again when more than `maxOpen` are open
/// (a random one among those not used recently: `OpenDatabases`), so a node with very many
/// databases keeps no file handle or task for an idle one, and creating one is a file with an
/// empty schema, built aside and renamed into place. Single-connection
/// databases that stay open but idle (not among the last `activeSet` used) give back their
/// page cache and statements now and then, so thousands of open ones cost little memory.
public final class DatabaseStore: Sendable {
    public let directory: URL
    /// `<directory>/dbs/`, as a string: a database's path is computed on every open, and
    /// Foundation's URL path appending asks the file system whether each part is a directory.
    private let databasesPath: String
    let maxOpen: Int
    let durability: Durability
    let logger: Logger
    /// Checks every database's writes (`validate_doc_update`); nil: no checks.
    let validator: (any WriteValidator)?
    /// The largest document body stored, in bytes of JSON (CouchDB's `max_document_size`);
    /// beyond it a write is refused with 413 `document_too_large`. Attachments do not count.
    public var maxDocumentSize: Int {
        get { documentSizeLimit.withLock { $0 } }
        set { documentSizeLimit.withLock { $0 = newValue } }
    }
    /// Shared with every open database, so a change applies to them at once.
    private let documentSizeLimit: Locked<Int>
    /// The size (bytes of its documents' winning bodies) beyond which a partition takes no
    /// more growing writes: 403 `partition_overflow`, as CouchDB's `max_partition_size`
    /// (deletions, shrinking edits and replicated revisions still go in). 0 turns it off.
    public var maxPartitionSize: Int {
        get { partitionSizeLimit.withLock { $0 } }
        set { partitionSizeLimit.withLock { $0 = newValue } }
    }
    private let partitionSizeLimit = Locked(DatabaseStore.defaultMaxPartitionSize)
    /// CouchDB 3's default `max_partition_size`: 10 GiB.
    public static let defaultMaxPartitionSize = 10 << 30
    /// CouchDB 3's default `max_document_size`: 8,000,000 bytes.
    public static let defaultMaxDocumentSize = 8_000_000
    /// How each database is opened, by name.
    let connections: @Sendable (String) -> Connections

    private struct State {
        var open = OpenDatabases<DocumentDatabase>()
        var notifiers: [String: ChangeNotifier] = [:]
        var random = SystemRandomNumberGenerator()
        /// The clock when idle databases last gave back memory.
        var sweptAt: UInt64 = 0
        /// Names being deleted: not found for opening, existing for creating, until gone.
        var deleting: Set<String> = []
        /// DocumentDatabase files opened (not found open) since the start.
        var filesOpened = 0
        /// Databases closed to keep at most `maxOpen` open, since the start.
        var evictions = 0
        /// Databases pushed out of `open` that something may still hold (a request writing):
        /// until such a one is gone, opening its name gives it back rather than a second
        /// connection to the file (users' databases are opened without file locks, and two
        /// connections writing one file would corrupt it).
        var evicted: [String: Evicted] = [:]
    }

    private struct Evicted {
        weak var database: DocumentDatabase?
    }

    /// How many times a database was not open when asked for, and its file was opened.
    public var filesOpened: Int { state.withLock { $0.filesOpened } }
    /// How many databases were closed to keep at most `maxOpen` open.
    public var evictions: Int { state.withLock { $0.evictions } }
    /// How many databases are open now.
    public var openCount: Int { state.withLock { $0.open.count } }
    /// The most databases kept open at once.
    public var maxOpenDatabases: Int { maxOpen }
    /// What the databases' writes record (group commits).
    let metrics: EngineMetrics
    /// Databases the store keeps a notifier for: the open ones, and closed ones someone still
    /// holds or waits on (see `forgetIfClosed`); not every database ever opened.
    public var rememberedDatabases: Int { state.withLock { $0.notifiers.count } }
    /// Databases used within this many of the latest uses keep their caches.
    static let activeSet: UInt64 = 512
    private let state = Locked(State())
    /// Serialises opening, creating and deleting one database name, without making every
    /// other database wait for it (opening a file is slow next to a dictionary lookup).
    private let nameLocks = (0..<64).map { _ in NSLock() }

    private func withNameLock<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
        var hasher = Hasher()
        hasher.combine(name)
        let lock = nameLocks[Int(UInt(bitPattern: hasher.finalize()) % UInt(nameLocks.count))]
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Which databases were created, updated or deleted (`_db_updates`).
    public let updates = DatabaseUpdates()
    /// The latest changes of the single-connection databases (those that may be closed), so
    /// that reading them does not reopen them.
    public let recentChanges: RecentChanges

    /// System databases CouchDB allows despite the leading underscore.
    public static let systemDatabases: Set<String> = ["_users", "_replicator", "_global_changes"]

    public init(
        directory: URL, maxOpen: Int = 256, durability: Durability = .full, validator: (any WriteValidator)? = nil,
        connections: @escaping @Sendable (String) -> Connections = { _ in .pool }, recentChangesBudget: Int = 32 << 20,
        maxDocumentSize: Int = DatabaseStore.defaultMaxDocumentSize, metrics: EngineMetrics = EngineMetrics(),
        logger: Logger = Logger(label: "lt.engine")
    ) throws {
        self.metrics = metrics
        self.documentSizeLimit = Locked(maxDocumentSize)
        self.recentChanges = RecentChanges(budget: recentChangesBudget)
        self.directory = directory
        self.databasesPath = directory.appendingPathComponent("dbs", isDirectory: true).path + "/"
        self.connections = connections
        _ = DatabaseStore.sqliteConfigured
        self.validator = validator
        self.maxOpen = maxOpen
        self.durability = durability
        self.logger = logger
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("dbs"), withIntermediateDirectories: true)
        // New databases are built here and renamed into `dbs/`; what a crash left is garbage
        // (the process holds the directory alone: `DirectoryLock`).
        try? FileManager.default.removeItem(at: scratch)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    /// Where new database files are built before they are renamed into `dbs/` (the same file
    /// system, so the rename is atomic).
    var scratch: URL { directory.appendingPathComponent("creating") }

    /// Removes the scratch directory if nothing is in it: for a command done with the store (a
    /// server keeps it). Nothing is created in it meanwhile: the caller holds the directory.
    public func removeScratchIfEmpty() {
        _ = rmdir(scratch.path)
    }

    /// CouchDB's rule: a lowercase letter, then lowercase letters, digits and `_$()+-/`;
    /// or one of the system databases.
    public static func isValidName(_ name: String) -> Bool {
        if systemDatabases.contains(name) { return true }
        guard let first = name.utf8.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"),
            name.utf8.count <= 238
        else {
            return false
        }
        return name.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || "_$()+-/".utf8.contains(c)
        }
    }

    func path(for name: String) -> String {
        databasesPath + DatabaseStore.fileName(of: name)
    }

    /// Whether the database exists (one being deleted no longer does).
    public func exists(_ name: String) -> Bool {
        DatabaseStore.isValidName(name) && FileManager.default.fileExists(atPath: path(for: name))
            && !state.withLock { $0.deleting.contains(name) }
    }

    /// Creates a database; 412 `file_exists` if it exists, 400 for an illegal name, 500 with
    /// the reason when the file system refuses (out of descriptors or space: not "not found",
    /// which an unexplained failure on a missing database would otherwise read as).
    @discardableResult
    /// Creates a database; `partitioned` makes it a partitioned one (see `DocumentDatabase.isPartitioned`).
    public func create(_ name: String, partitioned: Bool = false) throws -> DocumentDatabase {
        guard DatabaseStore.isValidName(name) else { throw CouchError.illegalDatabaseName(name) }
        return try withNameLock(name) {
            let path = path(for: name)
            if FileManager.default.fileExists(atPath: path) || state.withLock({ $0.deleting.contains(name) }) {
                throw CouchError.databaseExists
            }
            let shared = state.withLock { state -> ChangeNotifier in self.notifier(name, &state) }
            do {
                try DatabaseFile.createFile(at: path, scratch: scratch, partitioned: partitioned)
                let database = try makeDatabase(name, path: path, notifier: shared, created: true)
                releaseInBackground(state.withLock { state -> DocumentDatabase? in remember(database, &state) })
                updates.record(name, .created)
                return database
            } catch let error as CouchError {
                removeFiles(path)
                throw error
            } catch {
                removeFiles(path)
                throw CouchError.internalError("Could not create the database: \(error)")
            }
        }
    }

    /// SQLite set up for many connections, once per process before its first use: page-cache
    /// memory is taken page by page as needed, not about 90 KB up front per connection; no
    /// memory statistics, whose process-wide mutex every allocation of every connection took
    /// (a tenth of all time, waiting, with thousands of databases being opened and written);
    /// file names may be URIs (how single connections choose the lock-free file system).
    private static let sqliteConfigured: Bool = lt_sqlite_configure_for_many_connections() == 0

    /// The database if it is open already (and marked as used).
    private func alreadyOpen(_ name: String) -> DocumentDatabase? {
        let (found, idle) = state.withLock { state -> (DocumentDatabase?, [DocumentDatabase]) in
            guard let database = state.open.use(name) else { return (nil, []) }
            return (database, idleDatabases(&state))
        }
        for db in idle { db.releaseIdleMemory() }
        return found
    }

    /// Opens an existing database; 404 `not_found` if there is none. Opening one that is not
    /// open yet reads its file and WAL (and closes the one it evicts): that
    /// happens on another thread, so the caller's (an event loop, in a server) goes on serving.
    public func open(_ name: String) async throws -> DocumentDatabase {
        if let found = alreadyOpen(name) { return found }
        return try await DatabaseStore.offThread { try self.openFile(name) }
    }

    /// Creates a database (as `create`), on another thread: creating the file syncs it.
    @discardableResult
    public func create(_ name: String, partitioned: Bool = false) async throws -> DocumentDatabase {
        try await DatabaseStore.offThread { try self.create(name, partitioned: partitioned) }
    }

    /// Runs blocking file work on a dispatch thread while the calling task waits without
    /// holding its own.
    static func offThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            fileQueue().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Queues for opening, creating and closing files: serial ones, each with a thread of its
    /// own when busy (not the default pool's few threads, which users' databases' queues share,
    /// and which a slow open would hold up), taken in turn, so a few files are handled at once.
    private static let fileQueues = (0..<8).map { DispatchQueue(label: "lt.files.\($0)") }
    private static let nextFileQueue = Locked(0)
    private static func fileQueue() -> DispatchQueue {
        fileQueues[
            nextFileQueue.withLock { next in
                next = (next + 1) % fileQueues.count
                return next
            }]
    }

    /// Lets go of an evicted database on a dispatch thread: its small log folded back into its
    /// file (`DocumentDatabase.foldSmallLog`), then, if nothing else holds it, it closes there
    /// (system calls and freeing its memory), not on the thread that opened another. Whoever
    /// lets go of it last, what the store kept for it goes then (`forgetIfClosed`).
    func releaseInBackground(_ database: DocumentDatabase?) {
        guard let database else { return }
        let folds = database.foldsLogOnClose
        let release: @Sendable () -> Void = {
            if folds { database.foldSmallLog() }
            withExtendedLifetime(database) {}
        }
        // Folding syncs: on queues of its own, so that opening databases never waits behind it.
        guard folds else { return DatabaseStore.fileQueue().async(execute: release) }
        DatabaseStore.foldQueues[
            DatabaseStore.nextFoldQueue.withLock { next in
                next = (next + 1) % DatabaseStore.foldQueues.count
                return next
            }
        ].async(execute: release)
    }

    /// Forgets a database's notifier and recent-changes tail once an instance of it has gone
    /// (its `onClosed`), unless another is open or held, or someone waits on the notifier: with
    /// a million users, every database ever opened kept both, ~0.5 KB each, for as long as the
    /// process ran. Under the name's lock, so that no open of the same name is between taking
    /// the notifier and keeping the database meanwhile.
    func forgetIfClosed(_ name: String) {
        withNameLock(name) {
            let forgotten = state.withLock { state -> Bool in
                guard state.open.peek(name) == nil, state.evicted[name]?.database == nil,
                    state.notifiers[name]?.hasWaiters != true
                else { return false }
                state.notifiers.removeValue(forKey: name)
                state.evicted.removeValue(forKey: name)
                return true
            }
            if forgotten { recentChanges.forgetIfEmpty(name) }
        }
    }

    private static let foldQueues = (0..<2).map { DispatchQueue(label: "lt.fold.\($0)", qos: .utility) }
    private static let nextFoldQueue = Locked(0)

    /// Opens an existing database; 404 `not_found` if there is none (blocking: see the async
    /// overload).
    public func open(_ name: String) throws -> DocumentDatabase {
        try alreadyOpen(name) ?? openFile(name)
    }

    /// Opens the file of a database that was not open when asked for.
    private func openFile(_ name: String) throws -> DocumentDatabase {
        guard DatabaseStore.isValidName(name) else { throw CouchError.databaseNotFound }
        return try withNameLock(name) {
            // Opened by another caller while this one waited for the name?
            if let database = state.withLock({ $0.open.peek(name) }) { return database }
            // Pushed out, but still held and open: take it back.
            if let (database, pushedOut) = state.withLock({ state -> (DocumentDatabase, DocumentDatabase?)? in
                guard let alive = state.evicted.removeValue(forKey: name)?.database else { return nil }
                return (alive, remember(alive, &state))
            }) {
                releaseInBackground(pushedOut)
                return database
            }
            let path = path(for: name)
            guard FileManager.default.fileExists(atPath: path), !state.withLock({ $0.deleting.contains(name) }) else {
                throw CouchError.databaseNotFound
            }
            let shared = state.withLock { state -> ChangeNotifier in self.notifier(name, &state) }
            let database = try makeDatabase(name, path: path, notifier: shared)
            releaseInBackground(
                state.withLock { state -> DocumentDatabase? in
                    state.filesOpened += 1
                    return remember(database, &state)
                })
            return database
        }
    }

    private func makeDatabase(
        _ name: String, path: String, notifier: ChangeNotifier, created: Bool = false
    ) throws -> DocumentDatabase {
        let connections = connections(name)
        return try DocumentDatabase(
            name: name, path: path, notifier: notifier, durability: durability, validator: validator,
            connections: connections, recentChanges: connections == .single ? recentChanges : nil,
            maxDocumentSize: documentSizeLimit,
            maxPartitionSize: partitionSizeLimit, metrics: metrics, created: created,
            onClosed: { [weak self] in
                // Later and elsewhere: the last reference may go while a lock of the store is held.
                guard let store = self else { return }
                DatabaseStore.fileQueue().async { store.forgetIfClosed(name) }
            })
    }

    /// Deletes a database and its files; 404 if there is none.
    ///
    /// Closing a pooled database waits until its readers are handed back, and an async read
    /// hands its reader back on the task's own executor, which may be this very thread (an
    /// event loop, in `lt serve`): so the close runs on another thread while this task waits
    /// without holding one. Meanwhile the name counts as gone for opening and as taken for
    /// creating.
    public func delete(_ name: String) async throws {
        let file = path(for: name)
        let database = try withNameLock(name) { () throws -> DocumentDatabase? in
            guard DatabaseStore.isValidName(name), FileManager.default.fileExists(atPath: file),
                !state.withLock({ $0.deleting.contains(name) })
            else {
                throw CouchError.databaseNotFound
            }
            let entry = state.withLock { state in
                state.deleting.insert(name)
                state.notifiers.removeValue(forKey: name)?.wakeAll()
                state.evicted.removeValue(forKey: name)
                return state.open.remove(name)
            }
            recentChanges.forget(name)
            return entry
        }
        defer { _ = state.withLock { $0.deleting.remove(name) } }
        if let database { _ = try? await DatabaseStore.offThread { database.close() } }
        withNameLock(name) {
            removeFiles(file)
            updates.record(name, .deleted)
        }
    }

    /// Names of all databases, sorted, listed on another thread: with a million databases the
    /// directory listing and the sort take seconds (4 s from a cold cache), which on an event
    /// loop held up everything else it serves (the consolidator's first `_all_dbs` delayed the
    /// server's start by as much).
    public func allNamesOffThread() async throws -> [String] {
        try await DatabaseStore.offThread { self.allNames() }
    }

    /// Names of all databases, sorted (blocking: see `allNamesOffThread`).
    public func allNames() -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: databasesPath)) ?? []
        return files.filter { $0.hasSuffix(".sqlite") }.compactMap(DatabaseStore.databaseName(ofFile:)).sorted()
    }

    /// The notifier of a database, shared by every open instance of it.
    private func notifier(_ name: String, _ state: inout State) -> ChangeNotifier {
        if let existing = state.notifiers[name] { return existing }
        let notifier = ChangeNotifier(onCommit: { [updates] in updates.record(name, .updated) })
        state.notifiers[name] = notifier
        return notifier
    }

    /// Every `activeSet` uses: the open single-connection databases not used since the last
    /// sweep, to give back their memory.
    private func idleDatabases(_ state: inout State) -> [DocumentDatabase] {
        let clock = state.open.clock
        guard clock - state.sweptAt >= DatabaseStore.activeSet else { return [] }
        let since = state.sweptAt
        state.sweptAt = clock
        return state.open.used(after: since - min(since, DatabaseStore.activeSet), through: since).filter(
            \.isSingleConnection)
    }

    /// Keeps `database` open; returns one it pushed out, if any (see `OpenDatabases.evict`),
    /// for the caller to release outside the lock (it closes when its last user lets go).
    private func remember(_ database: DocumentDatabase, _ state: inout State) -> DocumentDatabase? {
        state.open.insert(database.name, database)
        guard state.open.count > maxOpen,
            let pushedOut = state.open.evict(sparing: UInt64(max(1, maxOpen / 4)), using: &state.random)
        else { return nil }
        state.evicted[pushedOut.name] = Evicted(database: pushedOut)
        state.evictions += 1
        if state.evicted.count > 2 * max(64, maxOpen) {
            state.evicted = state.evicted.filter { $0.value.database != nil }
        }
        return pushedOut
    }

    private func removeFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }
}
