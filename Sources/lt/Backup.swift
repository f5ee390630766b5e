import ArgumentParser
import AsyncHTTPClient
import CommandSupport
import CouchEngine
import CouchJSON
import Crypto
import Foundation
import LTServer
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// `lt backup`: a consistent snapshot of every database of a data directory in a new backup
/// directory, while `lt serve` runs on it (through its control socket) or not (directly).
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Back up every database of a data directory into a new directory, while lt serve keeps serving.",
        discussion: """
            Each database is copied as a consistent snapshot (SQLite's online backup, taken by the \
            running server through <data>/control.sock, or by this command when no server runs): \
            every write acknowledged before the backup started is in it. The backup holds \
            server.json (admins, session secret), config.json (changes made through /_node/_local/_config, when there are any), dbs/*.sqlite and manifest.json (each file's size \
            and SHA-256, checked by lt restore). It is written as PATH.partial-<pid> and renamed to \
            PATH when complete, so an interrupted backup never looks like one. --jobs databases are \
            copied at once.
            """)

    @Option(help: "The data directory to back up. (LT_DATA, default ./lt-data)")
    var data: String?

    @Option(help: "The backup directory to create; it must not exist.")
    var to: String

    @Option(
        help: "Databases copied at once: more is faster and takes more of the server's CPU from its clients meanwhile.")
    var jobs = 2

    func validate() throws {
        guard (1...64).contains(jobs) else { throw ValidationError("--jobs is from 1 to 64") }
    }

    func run() async throws {
        let directory = dataDirectory(data)
        let target = URL(fileURLWithPath: to, isDirectory: true).standardizedFileURL
        guard !FileManager.default.fileExists(atPath: target.path) else {
            throw CommandFailure("\(target.path) exists: a backup goes into a new directory (nothing was written)")
        }
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("dbs").path) else {
            throw CommandFailure("\(directory.path) is not an lt data directory (it has no dbs/)")
        }
        let source = try await BackupSource.open(directory)
        let partial = target.deletingLastPathComponent().appendingPathComponent(
            "\(target.lastPathComponent).partial-\(getpid())")
        do {
            try FileManager.default.createDirectory(
                at: partial.appendingPathComponent("dbs"), withIntermediateDirectories: true)
            _ = chmod(partial.path, 0o700)  // server.json and every user's data
            let started = ContinuousClock.now
            let manifest = try await copy(from: source, into: partial)
            try BackupManifest.write(manifest, to: partial)
            // On disk before it is named a backup (each file was synced as it was written; now
            // the directories' entries), and its name after.
            try Self.sync(directory: partial.appendingPathComponent("dbs"))
            try Self.sync(directory: partial)
            guard rename(partial.path, target.path) == 0 else {
                throw CommandFailure(
                    "cannot rename \(partial.path) to \(target.path): \(String(cString: strerror(errno)))")
            }
            try Self.sync(directory: target.deletingLastPathComponent())
            let seconds = started.duration(to: .now).seconds
            let total = manifest.databases.reduce(Int64(0)) { $0 + $1.bytes }
            print(
                "backed up \(plural(manifest.databases.count, "database")) (\(ProgressLine.size(total))) of \(directory.path) to \(target.path) in "
                    + String(format: "%.1f s", seconds) + (source.online ? ", while the server ran" : ""))
        } catch {
            try? FileManager.default.removeItem(at: partial)
            throw error
        }
    }

    /// Syncs a directory's entries (the files' names) to disk.
    static func sync(directory: URL) throws {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY)
        guard descriptor >= 0 else {
            throw CommandFailure("cannot open \(directory.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw CommandFailure("cannot sync \(directory.path) to disk: \(String(cString: strerror(errno)))")
        }
    }

    /// Every database's snapshot, `server.json` and `config.json` into `partial`, with progress.
    func copy(from source: BackupSource, into partial: URL) async throws -> BackupManifest {
        let settings = try await source.serverSettings()
        try settings.write(to: partial.appendingPathComponent("server.json"))
        _ = chmod(partial.appendingPathComponent("server.json").path, 0o600)
        if let changes = try await source.configurationChanges() {
            try changes.write(to: partial.appendingPathComponent("config.json"))
            _ = chmod(partial.appendingPathComponent("config.json").path, 0o600)
        }
        let names = try await source.databaseNames()
        let progress = ProgressLine(total: names.count, of: "databases")
        var manifest = BackupManifest(created: Date(), online: source.online, databases: [])
        var bytes: Int64 = 0
        var done = 0
        // `jobs` at a time: each database costs a few milliseconds beside its bytes (opening it,
        // a new file), which overlap.
        try await withThrowingTaskGroup(of: BackupManifest.Database?.self) { group in
            var next = names.makeIterator()
            func start() {
                guard let name = next.next() else { return }
                group.addTask {
                    let file = DatabaseStore.fileName(of: name)
                    guard
                        let copied = try await source.snapshot(
                            name, to: partial.appendingPathComponent("dbs").appendingPathComponent(file))
                    else {
                        return nil  // deleted since the list was taken
                    }
                    return .init(name: name, file: file, bytes: copied.bytes, sha256: copied.sha256)
                }
            }
            for _ in 0..<jobs { start() }
            while let result = try await group.next() {
                done += 1
                if let database = result {
                    bytes += database.bytes
                    manifest.databases.append(database)
                    progress.update(done: done, bytes: bytes, label: database.name)
                }
                start()
            }
        }
        manifest.databases.sort { $0.name < $1.name }
        progress.update(done: names.count, bytes: bytes)
        progress.finish()
        return manifest
    }
}

/// Where a backup's snapshots come from: the running server (its control socket) or, when no
/// server holds the data directory, the databases opened here.
enum BackupSource {
    case server(socket: String)
    case files(DatabaseStore, DirectoryLock, URL)

    var online: Bool { if case .server = self { true } else { false } }

    /// The running server if its socket answers; otherwise the directory, locked for this command.
    static func open(_ directory: URL) async throws -> BackupSource {
        let socket = ControlSocket.path(in: directory)
        // Asked for its (small) settings file: the list of databases may be long, and is asked for once, later.
        if FileManager.default.fileExists(atPath: socket),
            let probe = try? await ControlSocketClient.request(
                socket, .GET, "/backup/server.json", deadline: .now() + .seconds(10)),
            (try? await probe.body.collect(upTo: 16 << 20)) != nil, probe.status == .ok
        {
            return .server(socket: socket)
        }
        let lock: DirectoryLock
        do { lock = try DirectoryLock(directory: directory) } catch let error as CouchError {
            throw CommandFailure(
                "\(error.reason), and its control socket \(socket) does not answer: is it an lt serve from before backups?"
            )
        }
        let store = try DatabaseStore(directory: directory, connections: LocationTrackerServer.connections)
        return .files(store, lock, directory)
    }

    func databaseNames() async throws -> [String] {
        switch self {
        case let .server(socket):
            let response = try await ControlSocketClient.request(
                socket, .GET, "/backup/databases", deadline: .now() + .minutes(5))
            let body = try await response.body.collect(upTo: 256 << 20)
            guard response.status == .ok,
                let names = (try? JSON.parse(Array(buffer: body)))?.arrayValue?.compactMap(\.stringValue)
            else {
                throw CommandFailure(
                    "the server's control socket answered \(response.status.code) to the list of databases")
            }
            return names
        case let .files(store, _, _):
            return store.allNames()
        }
    }

    func serverSettings() async throws -> Data {
        switch self {
        case let .server(socket):
            let response = try await ControlSocketClient.request(
                socket, .GET, "/backup/server.json", deadline: .now() + .minutes(1))
            let body = try await response.body.collect(upTo: 16 << 20)
            guard response.status == .ok else {
                throw CommandFailure("the server's control socket answered \(response.status.code) for server.json")
            }
            return Data(buffer: body)
        case let .files(_, _, directory):
            return try Data(contentsOf: directory.appendingPathComponent("server.json"))
        }
    }

    /// The changes made through `/_node/_local/_config` (`config.json`); nil when there are none.
    func configurationChanges() async throws -> Data? {
        switch self {
        case let .server(socket):
            let response = try await ControlSocketClient.request(
                socket, .GET, "/backup/config.json", deadline: .now() + .minutes(1))
            let body = try await response.body.collect(upTo: 16 << 20)
            if response.status == .notFound { return nil }
            guard response.status == .ok else {
                throw CommandFailure("the server's control socket answered \(response.status.code) for config.json")
            }
            return Data(buffer: body)
        case let .files(_, _, directory):
            return FileManager.default.contents(atPath: directory.appendingPathComponent("config.json").path)
        }
    }

    /// The snapshot of `name` written to `file`: its size and SHA-256; nil if the database is gone.
    func snapshot(_ name: String, to file: URL) async throws -> (bytes: Int64, sha256: String)? {
        guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw CommandFailure("cannot create \(file.path)")
        }
        let output = try FileHandle(forWritingTo: file)
        defer { try? output.close() }
        var hash = SHA256()
        var bytes: Int64 = 0
        switch self {
        case let .server(socket):
            let path =
                "/backup/databases/" + (name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name)
            let response = try await ControlSocketClient.request(socket, .POST, path, deadline: .now() + .hours(6))
            if response.status == .notFound {
                try? FileManager.default.removeItem(at: file)
                return nil
            }
            guard response.status == .ok else {
                throw CommandFailure(
                    "the server could not snapshot \(name): \(String(buffer: try await response.body.collect(upTo: 1 << 20)))"
                )
            }
            for try await chunk in response.body {
                chunk.withUnsafeReadableBytes { hash.update(bufferPointer: $0) }
                try output.write(contentsOf: chunk.readableBytesView)
                bytes += Int64(chunk.readableBytes)
            }
            let expected = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
            guard expected == nil || expected == bytes else {
                throw CommandFailure("the snapshot of \(name) ended after \(bytes) of \(expected!) bytes")
            }
        case let .files(store, _, _):
            guard store.exists(name) else { return nil }
            let snapshot = try await store.snapshot(of: name)
            defer { try? FileManager.default.removeItem(at: snapshot) }
            let input = try FileHandle(forReadingFrom: snapshot)
            defer { try? input.close() }
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                hash.update(data: chunk)
                try output.write(contentsOf: chunk)
                bytes += Int64(chunk.count)
            }
        }
        try output.synchronize()
        return (bytes, hash.finalize().map { String(format: "%02x", $0) }.joined())
    }
}

/// A backup's `manifest.json`: when, and each database's file, size and SHA-256.
struct BackupManifest {
    struct Database {
        var name: String
        var file: String
        var bytes: Int64
        var sha256: String
    }

    static let format = "lt-backup"
    var created: Date
    var online: Bool
    var databases: [Database]

    var json: JSON {
        [
            "format": .string(Self.format), "version": 1,
            "created": .string(ISO8601DateFormatter().string(from: created)), "online": .bool(online),
            "databases": .array(
                databases.map { database in
                    [
                        "name": .string(database.name), "file": .string(database.file),
                        "bytes": .int(Int(database.bytes)), "sha256": .string(database.sha256),
                    ]
                }),
        ]
    }

    static func write(_ manifest: BackupManifest, to directory: URL) throws {
        try Data(manifest.json.bytes).write(to: directory.appendingPathComponent("manifest.json"))
    }

    /// The manifest of the backup in `directory`, or a `CommandFailure` saying why it is not one.
    static func read(from directory: URL) throws -> BackupManifest {
        let path = directory.appendingPathComponent("manifest.json")
        guard let data = FileManager.default.contents(atPath: path.path) else {
            throw CommandFailure("\(directory.path) is not an lt backup: it has no manifest.json")
        }
        guard let json = try? JSON.parse(Array(data)), json["format"]?.stringValue == format,
            json["version"]?.intValue == 1,
            let rows = json["databases"]?.arrayValue
        else {
            throw CommandFailure("\(path.path) is not an lt backup manifest (format lt-backup, version 1)")
        }
        let databases = try rows.map { row -> Database in
            guard let name = row["name"]?.stringValue, DatabaseStore.isValidName(name),
                let file = row["file"]?.stringValue,
                file == DatabaseStore.fileName(of: name), let bytes = row["bytes"]?.intValue,
                let sha256 = row["sha256"]?.stringValue
            else {
                throw CommandFailure("\(path.path): a database entry is damaged: \(row.text)")
            }
            return Database(name: name, file: file, bytes: Int64(bytes), sha256: sha256)
        }
        var seen = Set<String>()
        for database in databases where !seen.insert(database.name).inserted {
            throw CommandFailure(
                "\(path.path) lists the database \(database.name) twice: the manifest is damaged (nothing was changed)")
        }
        return BackupManifest(
            created: (json["created"]?.stringValue).flatMap { ISO8601DateFormatter().date(from: $0) } ?? Date(),
            online: json["online"] == true, databases: databases)
    }
}
