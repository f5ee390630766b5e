import Foundation
import Logging

/// All databases of one server: one SQLite file each under `<directory>/dbs/`.
///
/// Databases are opened on first use and closed again when more than `maxOpen` are open
/// (least recently used first), so a node with very many databases keeps no file handle or
/// task for an idle one, and creating one is a file with an empty schema.
public final class DatabaseStore: Sendable {
    public let directory: URL
    let maxOpen: Int
    let durability: Durability
    let logger: Logger
    /// Checks every database's writes (`validate_doc_update`); nil: no checks.
    let validator: (any WriteValidator)?

    private struct State {
        var open: [String: (database: Database, lastUse: UInt64)] = [:]
        var notifiers: [String: ChangeNotifier] = [:]
        var clock: UInt64 = 0
    }
    private let state = Locked(State())

    /// Which databases were created, updated or deleted (`_db_updates`).
    public let updates = DatabaseUpdates()

    /// System databases CouchDB allows despite the leading underscore.
    public static let systemDatabases: Set<String> = ["_users", "_replicator", "_global_changes"]

    public init(
        directory: URL, maxOpen: Int = 256, durability: Durability = .full, validator: (any WriteValidator)? = nil,
        logger: Logger = Logger(label: "lt.engine")
    ) throws {
        self.directory = directory
        self.validator = validator
        self.maxOpen = maxOpen
        self.durability = durability
        self.logger = logger
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("dbs"), withIntermediateDirectories: true)
    }

    /// CouchDB's rule: a lowercase letter, then lowercase letters, digits and `_$()+-/`;
    /// or one of the system databases.
    public static func isValidName(_ name: String) -> Bool {
        if systemDatabases.contains(name) { return true }
        guard let first = name.utf8.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"), name.utf8.count <= 238 else {
            return false
        }
        return name.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || "_$()+-/".utf8.contains(c)
        }
    }

    func path(for name: String) -> String {
        directory.appendingPathComponent("dbs").appendingPathComponent(
            name.replacingOccurrences(of: "/", with: "%2F") + ".sqlite").path
    }

    public func exists(_ name: String) -> Bool {
        DatabaseStore.isValidName(name) && FileManager.default.fileExists(atPath: path(for: name))
    }

    /// Creates a database; 412 `file_exists` if it exists, 400 for an illegal name.
    @discardableResult
    public func create(_ name: String) throws -> Database {
        guard DatabaseStore.isValidName(name) else { throw EngineError.illegalDatabaseName(name) }
        return try state.withLock { state in
            let path = path(for: name)
            if FileManager.default.fileExists(atPath: path) { throw EngineError.databaseExists }
            do {
                let database = try Database(
                    name: name, path: path, create: true, notifier: notifier(name, &state), durability: durability, validator: validator)
                remember(database, &state)
                updates.record(name, .created)
                return database
            } catch {
                removeFiles(path)
                throw error
            }
        }
    }

    /// Opens an existing database; 404 `not_found` if there is none.
    public func open(_ name: String) throws -> Database {
        try state.withLock { state in
            state.clock += 1
            if let entry = state.open[name] {
                state.open[name] = (entry.database, state.clock)
                return entry.database
            }
            guard DatabaseStore.isValidName(name) else { throw EngineError.databaseNotFound }
            let path = path(for: name)
            guard FileManager.default.fileExists(atPath: path) else { throw EngineError.databaseNotFound }
            let database = try Database(name: name, path: path, create: false, notifier: notifier(name, &state), durability: durability, validator: validator)
            remember(database, &state)
            return database
        }
    }

    /// Deletes a database and its files; 404 if there is none.
    public func delete(_ name: String) throws {
        try state.withLock { state in
            let path = path(for: name)
            guard DatabaseStore.isValidName(name), FileManager.default.fileExists(atPath: path) else {
                throw EngineError.databaseNotFound
            }
            if let entry = state.open.removeValue(forKey: name) { entry.database.close() }
            state.notifiers.removeValue(forKey: name)?.wakeAll()
            removeFiles(path)
            updates.record(name, .deleted)
        }
    }

    /// Names of all databases, sorted.
    public func allNames() -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("dbs").path)) ?? []
        return files.filter { $0.hasSuffix(".sqlite") }
            .map { String($0.dropLast(".sqlite".count)).replacingOccurrences(of: "%2F", with: "/") }
            .sorted()
    }

    /// The notifier of a database, shared by every open instance of it.
    private func notifier(_ name: String, _ state: inout State) -> ChangeNotifier {
        if let existing = state.notifiers[name] { return existing }
        let notifier = ChangeNotifier(onCommit: { [updates] in updates.record(name, .updated) })
        state.notifiers[name] = notifier
        return notifier
    }

    private func remember(_ database: Database, _ state: inout State) {
        state.clock += 1
        state.open[database.name] = (database, state.clock)
        guard state.open.count > maxOpen else { return }
        // Close the least recently used; callers still holding it finish their work first.
        if let oldest = state.open.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            state.open.removeValue(forKey: oldest.key)
        }
    }

    private func removeFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }
}
