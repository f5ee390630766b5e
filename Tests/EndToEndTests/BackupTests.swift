import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `lt backup` and `lt restore` on real data directories: a backup taken while a real
/// `lt serve` keeps writing, restored, and a server started on the copy.
@Suite("Backup and restore")
struct BackupTests {
    /// Runs `lt` off the calling task's thread (a backup takes a moment; the writers keep going).
    static func lt(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do { continuation.resume(returning: try TestServer.runLT(arguments)) } catch { continuation.resume(throwing: error) }
            }
        }
    }

    @Test("A backup under continuous writes, restored: every write acknowledged before it began, with its revision; _security, _users, API keys and replication checkpoints work")
    func backupUnderWritesRestores() async throws {
        let directory = try TemporaryDirectory("lt-backup")
        defer { directory.cleanup() }
        let backup = directory.url.appendingPathComponent("backup")
        let restored = directory.url.appendingPathComponent("restored")
        let s = try TestServer()
        defer { s.stop() }

        // What must come back: a user with an API key, a _users user, a security object, a
        // replication's checkpoints, and enough data that the backup takes a while.
        #expect(try await s.app(.PUT, "/api/users/erin", json: ["password": "erin-pw-7713"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "erin", "password": "erin-pw-7713"]).json
        let key = try #require(login["api_key"]?.stringValue), secret = try #require(login["api_password"]?.stringValue)
        let userDB = try #require(login["location_db_name"]?.stringValue)
        #expect(try await s.request(.PUT, "/\(userDB)/fix-1", json: ["type": "Feature", "n": 1], auth: .basic(key, secret)).status == 201)
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:frank",
                                    json: ["name": "frank", "password": "frank-pw-2231", "roles": [], "type": "user"]).status == 201)
        #expect(try await s.request(.PUT, "/src").status == 201)
        let security: JSON = ["admins": ["names": [], "roles": []], "members": ["names": ["frank"], "roles": []]]
        #expect(try await s.request(.PUT, "/src/_security", json: security).status == 200)
        let padding = String(repeating: "p", count: 2_000)
        for batch in 0..<4 {
            let docs: [JSON] = (0..<1_000).map { .object(["_id": .string("d-\(batch)-\($0)"), "padding": .string(padding)]) }
            #expect(try await s.request(.POST, "/src/_bulk_docs", json: ["docs": .array(docs)]).status == 201)
        }
        // A change to the runtime configuration (kept in config.json).
        #expect(try await s.request(.PUT, "/_node/_local/_config/uuids/algorithm", json: "utc_random").status == 200)
        let replication: JSON = ["source": .string("\(s.adminURL)/src"), "target": .string("\(s.adminURL)/dst"), "create_target": true]
        let first = try await s.request(.POST, "/_replicate", json: replication)
        #expect(first.status == 200 && first.json["ok"] == true, "\(first.text)")

        // Writers: each remembers what the server acknowledged, and when.
        #expect(try await s.request(.PUT, "/live").status == 201)
        let stop = Locked(false)
        let acknowledged = Locked<[(id: String, rev: String, at: ContinuousClock.Instant)]>([])
        let writers = (0..<3).map { writer in
            Task {
                var n = 0
                while !stop.withLock({ $0 }) {
                    let id = "w\(writer)-\(n)"
                    n += 1
                    guard let answer = try? await s.request(.PUT, "/live/\(id)", json: ["n": .int(n)]), answer.status == 201,
                          let rev = answer.json["rev"]?.stringValue else { continue }
                    acknowledged.withLock { $0.append((id, rev, .now)) }
                }
            }
        }
        // Some writes acknowledged before the backup (however slow the machine is today).
        #expect(try await eventually(30) { acknowledged.withLock { $0.count } >= 20 })
        let backupStarted = ContinuousClock.now
        let run = try await Self.lt(["backup", "--data", s.dataDirectory.path, "--to", backup.path])
        try await Task.sleep(for: .milliseconds(200))
        stop.withLock { $0 = true }
        for writer in writers { await writer.value }
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output.contains("while the server ran"), "\(run.output)")
        let before = acknowledged.withLock { $0 }.filter { $0.at < backupStarted }
        #expect(before.count >= 20, "the writers were too slow to test anything")
        #expect(acknowledged.withLock { $0 }.count > before.count, "no write overlapped the backup")
        // The server kept serving: it still takes writes after the backup.
        #expect(try await s.request(.PUT, "/live/after", json: [:]).status == 201)

        let restore = try await Self.lt(["restore", "--from", backup.path, "--data", restored.path])
        #expect(restore.status == 0, "\(restore.errors)")
        s.stop()
        let r = try TestServer(dataDirectory: restored)
        defer { r.stop() }
        // Every write acknowledged before the backup began, with its revision.
        let rows = try await r.request(.POST, "/live/_all_docs", json: ["keys": .array(before.map { .string($0.id) })]).json["rows"]?.arrayValue ?? []
        let revs = Dictionary(uniqueKeysWithValues: rows.compactMap { row in row["id"]?.stringValue.map { ($0, row["value"]?["rev"]?.stringValue) } })
        let missing = before.filter { revs[$0.id] != $0.rev }
        #expect(missing.isEmpty, "\(missing.count) of \(before.count) acknowledged writes missing or changed: \(missing.prefix(3))")
        #expect(try await r.request(.GET, "/src").json["doc_count"] == 4_000)
        #expect(try await r.request(.GET, "/src/_security").json == security)
        #expect(try await r.request(.GET, "/_node/_local/_config/uuids/algorithm").json == "utc_random")
        // The user's API key and the _users user sign in as before.
        #expect(try await r.request(.GET, "/\(userDB)/fix-1", auth: .basic(key, secret)).status == 200)
        #expect(try await r.app(.POST, "/api/login", json: ["username": "erin", "password": "erin-pw-7713"]).status == 200)
        let session = try await r.request(.POST, "/_session", json: ["name": "frank", "password": "frank-pw-2231"], auth: .none)
        #expect(session.status == 200 && session.json["name"] == "frank", "\(session.text)")
        // The replication resumes from its checkpoint: nothing to copy again.
        let again = try await r.request(.POST, "/_replicate", json: [
            "source": .string("\(r.adminURL)/src"), "target": .string("\(r.adminURL)/dst"), "create_target": true,
        ])
        #expect(again.status == 200 && (again.json["no_changes"] == true || again.json["history"]?[0]?["docs_read"] == 0), "\(again.text)")
    }

    @Test("Offline backup; a target that exists, a non-empty restore directory and a damaged backup are refused and change nothing")
    func refusals() async throws {
        let directory = try TemporaryDirectory("lt-backup")
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("data")
        let s = try TestServer(dataDirectory: data)
        #expect(try await s.request(.PUT, "/notes").status == 201)
        #expect(try await s.request(.PUT, "/notes/a", json: ["text": "kept"]).status == 201)
        s.stop()
        // No server: the command opens the databases itself.
        let backup = directory.url.appendingPathComponent("backup")
        let offline = try await Self.lt(["backup", "--data", data.path, "--to", backup.path])
        #expect(offline.status == 0 && !offline.output.contains("while the server ran"), "\(offline.errors)")
        let manifest = try JSON.parse(Array(try Data(contentsOf: backup.appendingPathComponent("manifest.json"))))
        #expect(manifest["databases"]?.arrayValue?.contains { $0["name"] == "notes" } == true)
        // Nothing was changed through _config: no config.json to keep.
        #expect(!FileManager.default.fileExists(atPath: backup.appendingPathComponent("config.json").path))

        let again = try await Self.lt(["backup", "--data", data.path, "--to", backup.path])
        #expect(again.status != 0 && again.errors.contains("exists: a backup goes into a new directory"), "\(again.errors)")
        let notData = try await Self.lt(["backup", "--data", directory.url.appendingPathComponent("nothing").path, "--to", directory.url.appendingPathComponent("b2").path])
        #expect(notData.status != 0 && notData.errors.contains("is not an lt data directory"), "\(notData.errors)")
        #expect(!FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("b2").path))

        // Into a directory that holds something: refused, untouched.
        let busy = directory.url.appendingPathComponent("busy")
        try FileManager.default.createDirectory(at: busy, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: busy.appendingPathComponent("file.txt"))
        let intoBusy = try await Self.lt(["restore", "--from", backup.path, "--data", busy.path])
        #expect(intoBusy.status != 0 && intoBusy.errors.contains("is not empty"), "\(intoBusy.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: busy.path) == ["file.txt"])

        // A damaged file, a missing file, no manifest: refused before anything is written.
        let damaged = directory.url.appendingPathComponent("damaged")
        try FileManager.default.copyItem(at: backup, to: damaged)
        let file = damaged.appendingPathComponent("dbs/notes.sqlite")
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: file)
        let target = directory.url.appendingPathComponent("target")
        let fromDamaged = try await Self.lt(["restore", "--from", damaged.path, "--data", target.path])
        #expect(fromDamaged.status != 0 && fromDamaged.errors.contains("notes.sqlite does not match its SHA-256"), "\(fromDamaged.errors)")
        try FileManager.default.removeItem(at: file)
        let fromIncomplete = try await Self.lt(["restore", "--from", damaged.path, "--data", target.path])
        #expect(fromIncomplete.status != 0 && fromIncomplete.errors.contains("notes.sqlite is missing"), "\(fromIncomplete.errors)")
        // A manifest listing a database twice (it used to fail half-way with a raw file error).
        let twice = directory.url.appendingPathComponent("twice")
        try FileManager.default.copyItem(at: backup, to: twice)
        var listed = try JSON.parse(Array(try Data(contentsOf: twice.appendingPathComponent("manifest.json")))).objectValue ?? [:]
        let entries = listed["databases"]?.arrayValue ?? []
        listed["databases"] = .array(entries + entries.filter { $0["name"] == "notes" })
        try Data(JSON.object(listed).bytes).write(to: twice.appendingPathComponent("manifest.json"))
        let fromTwice = try await Self.lt(["restore", "--from", twice.path, "--data", target.path])
        #expect(fromTwice.status != 0 && fromTwice.errors.contains("lists the database notes twice"), "\(fromTwice.errors)")
        let notBackup = try await Self.lt(["restore", "--from", data.path, "--data", target.path])
        #expect(notBackup.status != 0 && notBackup.errors.contains("is not an lt backup"), "\(notBackup.errors)")
        #expect(!FileManager.default.fileExists(atPath: target.path))

        // The good one restores, and serves what it held.
        let before = try FileManager.default.contentsOfDirectory(atPath: backup.appendingPathComponent("dbs").path).sorted()
        let restore = try await Self.lt(["restore", "--from", backup.path, "--data", target.path])
        #expect(restore.status == 0, "\(restore.errors)")
        // Checking the backup left nothing in it (SQLite's -wal and -shm files of a read).
        #expect(try FileManager.default.contentsOfDirectory(atPath: backup.appendingPathComponent("dbs").path).sorted() == before)
        let r = try TestServer(dataDirectory: target)
        defer { r.stop() }
        #expect(try await r.request(.GET, "/notes/a").json["text"] == "kept")
    }
}
