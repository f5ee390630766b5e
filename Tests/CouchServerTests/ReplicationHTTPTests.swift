import AsyncHTTPClient
import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Replication
import Testing

@Suite("Replication over HTTP", .serialized, .timeLimit(.minutes(3)))
struct ReplicationHTTPTests {
    func temporaryStore() throws -> (DatabaseStore, URL) {
        let url = try TemporaryDirectory("lt-rh").url
        return (try DatabaseStore(directory: url), url)
    }

    @Test("Push a local database to lt serve and pull it back, with attachments, deletions and conflicts")
    func pushAndPull() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let device = try await store.create("device")
        for i in 0..<250 { _ = try await device.update(DocumentInput(id: "loc\(i)", body: ["i": .int(i)])) }
        let gone = try await device.update(DocumentInput(id: "gone", body: [:]))
        _ = try await device.update(DocumentInput(id: "gone", rev: gone, deleted: true))
        _ = try await device.update(try DocumentInput(json: try JSON.parse(
            #"{"_id":"photo","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)))
        _ = try await device.update([
            try DocumentInput(json: try JSON.parse(#"{"_id":"c","_rev":"2-x","_revisions":{"start":2,"ids":["x","r"]},"v":1}"#)),
            try DocumentInput(json: try JSON.parse(#"{"_id":"c","_rev":"2-y","_revisions":{"start":2,"ids":["y","r"]},"v":2}"#)),
        ], newEdits: false)

        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(server.port)/cloud"
        var options = ReplicationOptions()
        options.createTarget = true
        options.batchSize = 100
        let push = try await Replication(source: LocalEndpoint(store: store, name: "device"), target: try RemoteEndpoint(url: url), options: options).run()
        #expect(push.status.docsWritten == 254 && push.status.docWriteFailures == 0)
        let info = try await server.request(.GET, "/cloud").json
        #expect(info["doc_count"] == 252 && info["doc_del_count"] == 1)
        #expect(try await server.request(.GET, "/cloud/photo/a.txt").text == "hello")
        #expect(try await server.request(.GET, "/cloud/c?conflicts=true").json["_conflicts"] == ["2-x"])
        // The server side changes; pull brings it back, and only that.
        _ = try await server.request(.PUT, "/cloud/from-server", json: ["made": "there"])
        let pull = try await Replication(source: try RemoteEndpoint(url: url), target: LocalEndpoint(store: store, name: "device")).run()
        #expect(pull.status.docsWritten == 1)
        #expect(try await device.document(id: "from-server")["made"] == "there")
        let again = try await Replication(source: LocalEndpoint(store: store, name: "device"), target: try RemoteEndpoint(url: url)).run()
        #expect(again.status.docsWritten == 0 && again.startSeq != 0)
        // Without _bulk_get (older peers): per-document open_revs as multipart, attachment
        // bodies as binary parts.
        var fallbackOptions = ReplicationOptions()
        fallbackOptions.createTarget = true
        let fallback = try await Replication(
            source: try RemoteEndpoint(url: url, bulkGet: false), target: LocalEndpoint(store: store, name: "fallback"), options: fallbackOptions).run()
        #expect(fallback.status.docsWritten == fallback.status.missingFound && fallback.status.docWriteFailures == 0)
        let copy = try await store.open("fallback")
        #expect(String(decoding: try await copy.attachment(docID: "photo", rev: nil, name: "a.txt").data, as: UTF8.self) == "hello")
        #expect(try await copy.conflicts.ids() == ["c"])
        #expect(try await copy.info()["doc_count"] == (try await server.request(.GET, "/cloud").json["doc_count"]))
        // Cookie sessions: one login, then the AuthSession cookie.
        _ = try await server.request(.PUT, "/cloud/by-cookie", json: [:])
        let cookiePull = try await Replication(
            source: try RemoteEndpoint(url: url, authentication: .cookie), target: LocalEndpoint(store: store, name: "device")).run()
        #expect(cookiePull.status.docsWritten == 1)
        // Wrong credentials fail at once instead of retrying.
        let bad = "http://admin:wrong@127.0.0.1:\(server.port)/cloud"
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: ReplicationError.self) {
            _ = try await Replication(source: try RemoteEndpoint(url: bad), target: LocalEndpoint(store: store, name: "device")).run()
        }
        #expect(start.duration(to: clock.now) < .seconds(5))
    }

    @Test("Documents the target rejects are counted as write failures, not fatal")
    func rejectedDocuments() async throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try await server.request(.PUT, "/_users/org.couchdb.user:alice", json: [
            "name": "alice", "type": "user", "roles": [], "password": "wonderland"])
        _ = try await server.request(.PUT, "/guarded")
        _ = try await server.request(.PUT, "/guarded/_security", json: [
            "admins": ["names": [], "roles": []], "members": ["names": ["alice"], "roles": []]])
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = try await store.create("phone")
        for i in 0..<5 { _ = try await local.update(DocumentInput(id: "p\(i)")) }
        _ = try await local.update(DocumentInput(id: "_design/app", body: ["language": "javascript"]))
        // alice is a member, not a database admin: she may not write design documents.
        let result = try await Replication(
            source: LocalEndpoint(store: store, name: "phone"),
            target: try RemoteEndpoint(url: "http://alice:wonderland@127.0.0.1:\(server.port)/guarded")).run()
        #expect(result.status.docsWritten == 5 && result.status.docWriteFailures == 1)
        #expect(try await server.request(.GET, "/guarded").json["doc_count"] == 5)
    }

    /// Found in review (session 33): the pull de-duplicated `_bulk_get`'s documents by
    /// id and revision as a Swift String, and two documents whose ids differ only in Unicode
    /// normalisation, written with the same body, have the same revision id.
    @Test("A pull over HTTP copies documents whose ids differ only in Unicode normalisation, with the same body and so the same revision")
    func pullNormalisationVariants() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/src")
        let composed = try await s.request(.PUT, "/src/%C3%A9", json: ["x": 1])
        let decomposed = try await s.request(.PUT, "/src/e%CC%81", json: ["x": 1])
        #expect(composed.json["rev"] == decomposed.json["rev"])
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let pulled = try await s.request(.POST, "/_replicate", json: ["source": .string("\(url)/src"), "target": "dst", "create_target": true])
        #expect(pulled.status == 200 && pulled.json["history"]?[0]?["docs_written"] == 2, "\(pulled.text)")
        #expect(try await s.request(.GET, "/dst").json["doc_count"] == 2)
        #expect(try await s.request(.GET, "/dst/e%CC%81").status == 200)
        #expect(try await s.request(.GET, "/dst/%C3%A9").status == 200)
    }

    @Test("POST /_replicate: one-shot, continuous with _active_tasks and _scheduler/jobs, cancel")
    func serverReplicate() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/a")
        for i in 0..<20 { _ = try await s.request(.PUT, "/a/d\(i)", json: ["i": .int(i)]) }
        let once = try await s.request(.POST, "/_replicate", json: ["source": "a", "target": "b", "create_target": true])
        #expect(once.status == 200 && once.json["ok"] == true)
        #expect(once.json["history"]?[0]?["docs_written"] == 20)
        #expect(try await s.request(.GET, "/b").json["doc_count"] == 20)
        let self_url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let viaHTTP = try await s.request(.POST, "/_replicate", json: ["source": .string("\(self_url)/a"), "target": .string("\(self_url)/c"),
                                                                        "create_target": true, "doc_ids": ["d1", "d2"]])
        // Listed documents: CouchDB answers the run's counts, without a history.
        #expect(viaHTTP.json["docs_written"] == 2 && viaHTTP.json["history"] == nil, "\(viaHTTP.text)")
        let live = try await s.request(.POST, "/_replicate", json: ["source": "a", "target": "b", "continuous": true])
        #expect(live.status == 202)
        let jobID = live.json["_local_id"]!.stringValue!
        #expect(jobID.hasSuffix("+continuous"))
        _ = try await s.request(.PUT, "/a/late", json: [:])
        var arrived = false
        for _ in 0..<60 where !arrived {
            arrived = try await s.request(.GET, "/b/late").status == 200
            if !arrived { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(arrived)
        let tasks = try await s.request(.GET, "/_active_tasks").json
        #expect(tasks.arrayValue?.first?["type"] == "replication" && tasks[0]?["continuous"] == true)
        #expect(try await s.request(.GET, "/_scheduler/jobs").json["jobs"]?[0]?["id"] == .string(jobID))
        let cancel = try await s.request(.POST, "/_replicate", json: ["source": "a", "target": "b", "continuous": true, "cancel": true])
        #expect(cancel.json["_local_id"] == .string(jobID))
        #expect(try await s.request(.GET, "/_active_tasks").json == [])
        #expect(try await s.request(.POST, "/_replicate", json: ["source": "missing", "target": "b"]).status == 404)
        #expect(try await s.request(.POST, "/_replicate", json: ["source": "a"]).status == 400)
        #expect(try await s.request(.POST, "/_replicate", json: ["source": "a", "target": "b"], auth: .none).status == 401)
    }

    @Test("10,000 documents with attachments cross a proxy that drops, cuts and delays connections: nothing lost, nothing duplicated, resumed from checkpoints")
    func faultyNetwork() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let proxy = try FaultyProxy(targetPort: server.port, faultRate: 0.25, seed: 7)
        defer { proxy.stop() }
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try await store.create("field")
        let count = 10_000
        for start in stride(from: 0, to: count, by: 1000) {
            let batch = try (start..<(start + 1000)).map { i -> DocumentInput in
                let data = Data("attachment of \(i) ".utf8 + Array(repeating: UInt8(i % 256), count: 64)).base64EncodedString()
                return try DocumentInput(json: try JSON.parse(
                    #"{"_id":"f\#(i)","i":\#(i),"_attachments":{"note.bin":{"content_type":"application/octet-stream","data":"\#(data)"}}}"#))
            }
            _ = try await source.update(batch, newEdits: true)
        }
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(proxy.port)/field"
        var options = ReplicationOptions()
        options.createTarget = true
        options.batchSize = 250
        options.maxRetries = 0  // every fault ends the run; the next run must resume, not start over
        options.initialBackoff = .milliseconds(20)
        options.maxBackoff = .milliseconds(200)
        options.checkpointInterval = .zero
        var runs: [ReplicationResult] = []
        var failedRuns = 0
        var totalRead = 0
        while runs.isEmpty && failedRuns < 200 {
            let replication = Replication(source: LocalEndpoint(store: store, name: "field"), target: try RemoteEndpoint(url: url), options: options)
            do {
                runs.append(try await replication.run())
            } catch {
                failedRuns += 1
            }
            totalRead += replication.status.docsRead
        }
        #expect(runs.count == 1, "no run completed in \(failedRuns) attempts")
        #expect(proxy.faultsInjected > 10)
        // Nothing lost, nothing duplicated: every document once, with its attachment, no conflicts.
        let info = try await server.request(.GET, "/field").json
        #expect(info["doc_count"] == .int(count))
        let changes = try await server.request(.GET, "/field/_changes?style=all_docs").json["results"]?.arrayValue ?? []
        #expect(changes.count == count && changes.allSatisfy { $0["changes"]?.arrayValue?.count == 1 })
        for i in [0, 4242, 9999] {
            let body = try await server.request(.GET, "/field/f\(i)/note.bin")
            #expect(body.body.starts(with: Array("attachment of \(i) ".utf8)))
        }
        // Interrupted runs resumed from their checkpoints instead of starting over.
        #expect(totalRead < 2 * count, "read \(totalRead) revisions for \(count) documents over \(failedRuns + runs.count) runs")
    }

    @Test("A continuous pull survives the server going away and coming back")
    func continuousSurvivesRestart() async throws {
        let directoryHolder = try TemporaryDirectory("lt-away")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        var server = try TestServer(dataDirectory: directory)
        let port = server.port
        _ = try await server.request(.PUT, "/feed")
        _ = try await server.request(.PUT, "/feed/before", json: [:])
        let (store, storeDirectory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(at: storeDirectory) }
        var options = ReplicationOptions()
        options.continuous = true
        options.createTarget = true
        options.initialBackoff = .milliseconds(100)
        options.maxBackoff = .milliseconds(500)
        options.heartbeat = .seconds(2)
        let replication = Replication(
            source: try RemoteEndpoint(url: "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(port)/feed"),
            target: LocalEndpoint(store: store, name: "mirror"), options: options)
        let seen = Locked<Set<ReplicationState>>([])
        let updates = replication.statusUpdates()
        let watcher = Task { for await status in updates { seen.withLock { _ = $0.insert(status.state) } } }
        defer { watcher.cancel() }
        let running = Task { try await replication.run() }
        #expect(try await eventually { (try? await store.open("mirror").winningRevision(id: "before")) != nil })
        server.stop()
        // Give the replicator time to notice (its next request fails) before the server returns.
        #expect(try await eventually { seen.withLock { $0.contains(.offline) } }, "states seen: \(seen.withLock { $0 })")
        server = try TestServer(dataDirectory: directory, extraArguments: ["--db-port", String(port)])
        let back = server
        defer { back.stop() }
        _ = try await server.request(.PUT, "/feed/after", json: [:])
        #expect(try await eventually(20) { (try? await store.open("mirror").winningRevision(id: "after")) != nil })
        running.cancel()
        _ = try? await running.value
    }


    @Test("_replicator documents run jobs, record their state, and continuous jobs survive a restart")
    func replicatorDatabase() async throws {
        let directoryHolder = try TemporaryDirectory("lt-rdb")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        var s = try TestServer(dataDirectory: directory)
        _ = try await s.request(.PUT, "/a")
        for i in 0..<10 { _ = try await s.request(.PUT, "/a/d\(i)", json: [:]) }
        #expect(try await s.request(.PUT, "/_replicator/once", json: ["source": "a", "target": "b", "create_target": true]).status == 201)
        let server = s
        #expect(try await eventually { try await server.request(.GET, "/_replicator/once").json["_replication_state"] == "completed" })
        #expect(try await s.request(.GET, "/b").json["doc_count"] == 10)
        #expect(try await s.request(.GET, "/_replicator/once").json["_replication_stats"]?["docs_written"] == 10)
        _ = try await s.request(.PUT, "/_replicator/live", json: ["source": "a", "target": "c", "create_target": true, "continuous": true])
        #expect(try await eventually { try await server.request(.GET, "/c").json["doc_count"] == 10 })
        let docs = try await s.request(.GET, "/_scheduler/docs").json["docs"]?.arrayValue ?? []
        #expect(docs.first { $0["doc_id"] == "once" }?["state"] == "completed")
        #expect(docs.first { $0["doc_id"] == "live" }?["state"] == "running")
        // Restart: the continuous job comes back and picks up new writes.
        s.stop()
        s = try TestServer(dataDirectory: directory)
        let restarted = s
        defer { restarted.stop() }
        _ = try await s.request(.PUT, "/a/after-restart", json: [:])
        #expect(try await eventually { try await restarted.request(.GET, "/c/after-restart").status == 200 })
        // Deleting the document stops the job.
        let rev = try await s.request(.GET, "/_replicator/live").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/_replicator/live?rev=\(rev)")
        #expect(try await eventually { try await restarted.request(.GET, "/_active_tasks").json == [] })
        _ = try await s.request(.PUT, "/a/after-delete", json: [:])
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await s.request(.GET, "/c/after-delete").status == 404)
    }

    @Test("lt replicate copies a local database to a server and reports JSON")
    func commandLine() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = try await store.create("tracks")
        for i in 0..<30 { _ = try await local.update(DocumentInput(id: "t\(i)")) }
        let process = Process()
        process.executableURL = TestServer.binary
        process.arguments = ["replicate", directory.appendingPathComponent("tracks").path,
                             "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(server.port)/tracks", "--create-target", "--json"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let result = try JSON.parse(Array(data))
        #expect(result["ok"] == true && result["history"]?[0]?["docs_written"] == 30)
        #expect(try await server.request(.GET, "/tracks").json["doc_count"] == 30)
    }
}
