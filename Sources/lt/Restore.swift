import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import Crypto
import Foundation
import GRDB

/// `lt restore`: a backup made by `lt backup` into a new or empty data directory, checked whole
/// before anything is written.
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restore a backup made by lt backup into a new or empty data directory.",
        discussion: """
            Every file of the backup is checked first (its size and SHA-256 against manifest.json, \
            and SQLite's quick_check); a damaged backup is refused and nothing is written. The data \
            directory must not exist or be empty. Then start the server on it: lt serve --data DIR.
            """)

    @Option(help: "The backup directory (made by lt backup).")
    var from: String

    @Option(help: "The data directory to restore into: new or empty. (LT_DATA, default ./lt-data)")
    var data: String?

    func run() async throws {
        let backup = URL(fileURLWithPath: from, isDirectory: true).standardizedFileURL
        let directory = dataDirectory(data)
        let existing = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        guard existing.isEmpty else {
            throw CommandFailure(
                "\(directory.path) is not empty: lt restore writes only into a new or empty data directory (nothing was changed)"
            )
        }
        let manifest = try BackupManifest.read(from: backup)
        try verify(manifest, in: backup)
        let created = !FileManager.default.fileExists(atPath: directory.path)
        do {
            // Held while the files go in: a server started meanwhile waits for it.
            let lock = try DirectoryLock.forCommand(directory)
            defer { withExtendedLifetime(lock) {} }
            let staging = directory.appendingPathComponent(".restoring")
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            let progress = ProgressLine(total: manifest.databases.count, of: "databases copied")
            var bytes: Int64 = 0
            for (index, database) in manifest.databases.enumerated() {
                progress.update(done: index, bytes: bytes, label: database.name)
                try FileManager.default.copyItem(
                    at: backup.appendingPathComponent("dbs").appendingPathComponent(database.file),
                    to: staging.appendingPathComponent(database.file))
                bytes += database.bytes
            }
            progress.update(done: manifest.databases.count, bytes: bytes)
            progress.finish()
            try FileManager.default.copyItem(
                at: backup.appendingPathComponent("server.json"), to: staging.appendingPathComponent("server.json"))
            // Everything is in: into place by renames.
            try FileManager.default.moveItem(
                at: staging.appendingPathComponent("server.json"), to: directory.appendingPathComponent("server.json"))
            let changes = backup.appendingPathComponent("config.json")
            if FileManager.default.fileExists(atPath: changes.path) {
                try FileManager.default.copyItem(at: changes, to: staging.appendingPathComponent("config.json"))
                try FileManager.default.moveItem(
                    at: staging.appendingPathComponent("config.json"),
                    to: directory.appendingPathComponent("config.json"))
            }
            try FileManager.default.moveItem(at: staging, to: directory.appendingPathComponent("dbs"))
            _ = chmod(directory.path, 0o700)
        } catch {
            if created {
                try? FileManager.default.removeItem(at: directory)
            } else {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
                    try? FileManager.default.removeItem(at: directory.appendingPathComponent(entry))
                }
            }
            throw error
        }
        print(
            "restored \(plural(manifest.databases.count, "database")) from \(backup.path) (made \(ISO8601DateFormatter().string(from: manifest.created))) "
                + "into \(directory.path); start the server with: lt serve --data \(directory.path)")
    }

    /// Each file's size, SHA-256 and SQLite structure, and `server.json`; a `CommandFailure`
    /// naming the first that does not match.
    func verify(_ manifest: BackupManifest, in backup: URL) throws {
        let settings = backup.appendingPathComponent("server.json")
        guard let data = FileManager.default.contents(atPath: settings.path),
            (try? JSON.parse(Array(data)))?.objectValue != nil
        else {
            throw CommandFailure("the backup is damaged: \(settings.path) is missing or not JSON (nothing was changed)")
        }
        let progress = ProgressLine(total: manifest.databases.count, of: "databases checked")
        var bytes: Int64 = 0
        for (index, database) in manifest.databases.enumerated() {
            progress.update(done: index, bytes: bytes, label: database.name)
            let file = backup.appendingPathComponent("dbs").appendingPathComponent(database.file)
            func damaged(_ why: String) -> CommandFailure {
                CommandFailure("the backup is damaged: \(file.path) \(why) (nothing was changed)")
            }
            guard let input = FileHandle(forReadingAtPath: file.path) else { throw damaged("is missing or unreadable") }
            defer { try? input.close() }
            var hash = SHA256()
            var size: Int64 = 0
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                hash.update(data: chunk)
                size += Int64(chunk.count)
            }
            guard size == database.bytes else {
                throw damaged("has \(size) bytes, the manifest says \(database.bytes)")
            }
            let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
            guard digest == database.sha256 else { throw damaged("does not match its SHA-256 in manifest.json") }
            var configuration = Configuration()
            configuration.readonly = true
            // Reading a WAL database makes its -shm (and -wal) files beside it: the backup is
            // left as it was found.
            let sideFiles = ["-wal", "-shm"].map { file.path + $0 }.filter {
                !FileManager.default.fileExists(atPath: $0)
            }
            defer { for side in sideFiles { try? FileManager.default.removeItem(atPath: side) } }
            let check = try? DatabaseQueue(path: file.path, configuration: configuration).read { db in
                try String.fetchOne(db, sql: "PRAGMA quick_check")
            }
            guard check == "ok" else {
                throw damaged("is not a sound SQLite database (quick_check: \(check ?? "cannot open"))")
            }
            bytes += size
        }
        progress.update(done: manifest.databases.count, bytes: bytes)
        progress.finish()
    }
}
