import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

@Suite("Real Apache CouchDB (LT_TEST_COUCHDB_URL)", .serialized,
       .enabled(if: LiveCouchDB.isSet, "skipped: LT_TEST_COUCHDB_URL is not set (docs/compatibility.md)"))
struct LiveCouchDBTests {
    /// Documents written to CouchDB before replicating (LT_TEST_COUCHDB_DOCS, default 5,000).
    static let count = Int(ProcessInfo.processInfo.environment["LT_TEST_COUCHDB_DOCS"] ?? "") ?? 5000
    static let notes = String(repeating: "Freeway Drive, Cupertino: 37.33, -122.03. ", count: 30)

    let couch = LiveCouchDB.endpoint

    func couchRequest(_ server: TestServer, _ method: HTTPMethod, _ path: String, json: JSON? = nil) async throws -> TestServer.Reply {
        try await server.request(method, path, json: json, auth: .basic(couch.user, couch.password),
                                 headers: [("Accept", "application/json")], timeout: .minutes(10), base: couch.base)
    }

    /// A database URL with credentials, as a replication endpoint.
    func couchURL(_ db: String) -> String {
        couch.base.replacingOccurrences(of: "://", with: "://\(couch.user):\(couch.password)@") + "/" + db
    }

    func ltURL(_ server: TestServer, _ db: String) -> String {
        "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(server.port)/\(db)"
    }

    /// Writes the source: documents with gzip-compressible text and binary attachments, a
    /// design document, conflicts (a second branch, as a replicator writes one) and deletions.
    func seed(_ server: TestServer, _ db: String) async throws {
        _ = try await couchRequest(server, .DELETE, "/\(db)")
        #expect(try await couchRequest(server, .PUT, "/\(db)").status == 201)
        var rng = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: Self.count, by: 500) {
            var docs: [JSON] = []
            for i in start..<min(start + 500, Self.count) {
                var doc: JSONObject = ["_id": .string(String(format: "fix-%05d", i)), "n": .int(i), "lat": .double(37 + Double(i) / 10_000), "lon": -122]
                var attachments = JSONObject()
                if i % 10 == 0 {
                    attachments["notes.txt"] = ["content_type": "text/plain", "data": .string(Data((Self.notes + "\(i)").utf8).base64EncodedString())]
                }
                if i % 25 == 0 {
                    let bytes = (0..<1024).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    attachments["photo.bin"] = ["content_type": "application/octet-stream", "data": .string(Data(bytes).base64EncodedString())]
                }
                if !attachments.isEmpty { doc["_attachments"] = .object(attachments) }
                docs.append(.object(doc))
            }
            #expect(try await couchRequest(server, .POST, "/\(db)/_bulk_docs", json: ["docs": .array(docs)]).status == 201)
        }
        _ = try await couchRequest(server, .PUT, "/\(db)/_design/app", json: [
            "views": ["by_n": ["map": "function (doc) { if (doc.n !== undefined) emit(doc.n, null); }"]],
        ])
        // Conflicts on 20 documents (a second branch written by another replica, as a
        // replicator writes it), deletions of 50.
        var branches: [JSON] = []
        for i in stride(from: 1, to: min(Self.count, 400), by: 20) {
            let id = String(format: "fix-%05d", i)
            branches.append(["_id": .string(id), "_rev": .string("2-" + String(repeating: "d", count: 32)), "n": .int(i), "branch": "device",
                             "_revisions": ["start": 2, "ids": [.string(String(repeating: "d", count: 32)), .string(String(repeating: "e", count: 32))]]])
        }
        _ = try await couchRequest(server, .POST, "/\(db)/_bulk_docs", json: ["docs": .array(branches), "new_edits": false])
        for i in stride(from: 3, to: min(Self.count, 500), by: 10) {
            let id = String(format: "fix-%05d", i)
            let rev = try await couchRequest(server, .GET, "/\(db)/\(id)").json["_rev"]?.stringValue ?? ""
            _ = try await couchRequest(server, .DELETE, "/\(db)/\(id)?rev=\(rev)")
        }
    }

    /// More edits for the incremental runs: body edits of documents with attachments, a new
    /// attachment, new documents, deletions, conflicts resolved by deleting the losing branch.
    func edit(_ server: TestServer, _ db: String) async throws {
        for i in stride(from: 0, to: min(Self.count, 300), by: 30) {
            let id = String(format: "fix-%05d", i)
            var doc = try await couchRequest(server, .GET, "/\(db)/\(id)").json.objectValue ?? [:]
            doc["edited"] = true
            _ = try await couchRequest(server, .PUT, "/\(db)/\(id)", json: .object(doc))
        }
        let doc = try await couchRequest(server, .GET, "/\(db)/fix-00010").json
        _ = try await server.request(.PUT, "/\(db)/fix-00010/track.json?rev=\(doc["_rev"]?.stringValue ?? "")", body: Array(#"{"points":[1,2,3]}"#.utf8),
                                     auth: .basic(couch.user, couch.password), headers: [("Content-Type", "application/json")], base: couch.base)
        let extra: [JSON] = (0..<20).map { ["_id": .string("late-\($0)"), "n": .int($0)] }
        _ = try await couchRequest(server, .POST, "/\(db)/_bulk_docs", json: ["docs": .array(extra)])
        for i in stride(from: 1, to: min(Self.count, 200), by: 20) {
            let id = String(format: "fix-%05d", i)
            let current = try await couchRequest(server, .GET, "/\(db)/\(id)?conflicts=true").json
            for loser in current["_conflicts"]?.arrayValue ?? [] {
                _ = try await couchRequest(server, .DELETE, "/\(db)/\(id)?rev=\(loser.stringValue ?? "")")
            }
        }
    }

    /// Every leaf of every document (deleted ones included), with history and attachment bodies.
    func snapshot(_ server: TestServer, base: String?, _ db: String) async throws -> [String: Set<String>] {
        let auth: TestServer.Auth = base == nil ? .admin : .basic(couch.user, couch.password)
        let changes = try await server.request(.GET, "/\(db)/_changes?style=all_docs", auth: auth, timeout: .minutes(5), base: base)
        let ids = (changes.json["results"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        var out: [String: Set<String>] = [:]
        for start in stride(from: 0, to: ids.count, by: 250) {
            let batch = ids[start..<min(start + 250, ids.count)].map { JSON.object(["id": .string($0)]) }
            let reply = try await server.request(.POST, "/\(db)/_bulk_get?revs=true&attachments=true", json: ["docs": .array(batch)],
                                                 auth: auth, headers: [("Accept", "application/json")], timeout: .minutes(5), base: base)
            for result in reply.json["results"]?.arrayValue ?? [] {
                let id = result["id"]?.stringValue ?? ""
                for doc in result["docs"]?.arrayValue ?? [] {
                    if let ok = doc["ok"] { out[id, default: []].insert(ReplicatorReplayTests.canonical(ok).text) }
                }
            }
        }
        return out
    }

    func expectSame(_ a: [String: Set<String>], _ b: [String: Set<String>], _ what: String) {
        #expect(a.count == b.count, "\(what): \(a.count) vs \(b.count) documents")
        var differing = 0
        for (id, leaves) in a where b[id] != leaves {
            differing += 1
            if differing <= 3 { Issue.record("\(what): \(id) differs: \(leaves) vs \(b[id] ?? [])") }
        }
        #expect(differing == 0, "\(what): \(differing) documents differ")
    }

    /// Runs CouchDB's own replicator (one-shot) and returns its answer.
    func couchReplicate(_ server: TestServer, source: String, target: String) async throws -> JSON {
        let reply = try await couchRequest(server, .POST, "/_replicate", json: ["source": .string(source), "target": .string(target), "create_target": true])
        #expect(reply.status == 200 && reply.json["ok"] == true, "\(reply.text)")
        return reply.json
    }

    /// The checkpoint a replication session left on one side.
    func checkpoint(_ server: TestServer, base: String?, _ db: String, session: String) async throws -> JSON? {
        let auth: TestServer.Auth = base == nil ? .admin : .basic(couch.user, couch.password)
        let locals = try await server.request(.GET, "/\(db)/_local_docs?include_docs=true", auth: auth, base: base).json
        return (locals["rows"]?.arrayValue ?? []).compactMap { $0["doc"] }.first { $0["session_id"]?.stringValue == session }
    }

    @Test("CouchDB 3.4's replicator pushes to lt and pulls from lt, one-shot then incremental: every document, revision tree, attachment byte and checkpoint equal")
    func couchReplicatorBothWays() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let source = "lt_live_source"
        try await seed(server, source)
        for round in 1...2 {
            if round == 2 { try await edit(server, source) }
            let expected = try await snapshot(server, base: couch.base, source)
            #expect(expected.count > Self.count && expected.values.contains { $0.count > 1 }, "the source is not what was written")
            // CouchDB pushes to lt.
            let push = try await couchReplicate(server, source: couchURL(source), target: ltURL(server, "from_couch"))
            #expect(push["history"]?[0]?["doc_write_failures"] == 0)
            expectSame(try await snapshot(server, base: nil, "from_couch"), expected, "round \(round): CouchDB → lt")
            if let session = push["session_id"]?.stringValue {
                let theirs = try await checkpoint(server, base: couch.base, source, session: session)
                let ours = try await checkpoint(server, base: nil, "from_couch", session: session)
                #expect(theirs != nil && ours.map(ReplicatorReplayTests.canonical) == theirs.map(ReplicatorReplayTests.canonical),
                        "round \(round): the checkpoint on lt differs from CouchDB's")
            }
            // CouchDB pulls from lt (the second round incrementally, from its checkpoint).
            if round == 1 { _ = try await couchRequest(server, .DELETE, "/back_from_lt") }
            let pull = try await couchReplicate(server, source: ltURL(server, "from_couch"), target: couchURL("back_from_lt"))
            #expect(pull["history"]?[0]?["doc_write_failures"] == 0)
            expectSame(try await snapshot(server, base: couch.base, "back_from_lt"), expected, "round \(round): lt → CouchDB")
            if round == 2 { #expect(pull["history"]?[0]?["start_last_seq"] != 0, "the second pull did not resume from its checkpoint") }
        }
        for db in [source, "back_from_lt"] { _ = try await couchRequest(server, .DELETE, "/\(db)") }
    }

    @Test("lt's own replicator (the server's and `lt replicate`) pulls from and pushes to CouchDB; continuous _replicator jobs run on both, shown by _scheduler without credentials")
    func ltReplicatorAndContinuousJobs() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let source = "lt_live_source2"
        try await seed(server, source)
        let expected = try await snapshot(server, base: couch.base, source)
        #expect(expected.count > Self.count, "the source is not what was written")
        let pull = try await server.request(.POST, "/_replicate", json: ["source": .string(couchURL(source)), "target": "pulled", "create_target": true],
                                            timeout: .minutes(10))
        #expect(pull.status == 200, "\(pull.text)")
        expectSame(try await snapshot(server, base: nil, "pulled"), expected, "lt pulls from CouchDB")
        _ = try await couchRequest(server, .DELETE, "/pushed_by_lt")
        let push = try await server.request(.POST, "/_replicate", json: ["source": "pulled", "target": .string(couchURL("pushed_by_lt")), "create_target": true],
                                            timeout: .minutes(10))
        #expect(push.status == 200, "\(push.text)")
        expectSame(try await snapshot(server, base: couch.base, "pushed_by_lt"), expected, "lt pushes to CouchDB")

        // `lt replicate` (the command line, a device's local store): from CouchDB, and back to it.
        let device = FileManager.default.temporaryDirectory.appendingPathComponent("lt-live-device-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: device) }
        _ = try await couchRequest(server, .DELETE, "/pushed_by_cli")
        let down = try TestServer.runLT(["replicate", couchURL(source), device.path + "/copy", "--create-target"])
        #expect(down.status == 0, "\(down.output) \(down.errors)")
        let up = try TestServer.runLT(["replicate", device.path + "/copy", couchURL("pushed_by_cli"), "--create-target"])
        #expect(up.status == 0, "\(up.output) \(up.errors)")
        expectSame(try await snapshot(server, base: couch.base, "pushed_by_cli"), expected, "lt replicate: CouchDB → a local store → CouchDB")

        // A continuous job in CouchDB's _replicator, into lt; new writes keep arriving.
        let job = "lt-live-\(UUID().uuidString.prefix(8))"
        _ = try await couchRequest(server, .PUT, "/_replicator/\(job)", json: [
            "source": .string(couchURL(source)), "target": .string(ltURL(server, "continuous")), "continuous": true, "create_target": true,
        ])
        _ = try await couchRequest(server, .PUT, "/\(source)/arrives-live", json: ["n": -1])
        let arrived = try await eventually(120) { try await server.request(.GET, "/continuous/arrives-live").status == 200 }
        #expect(arrived, "a write to CouchDB did not reach lt through the continuous job")
        let state = try await couchRequest(server, .GET, "/_scheduler/docs/_replicator/\(job)").json
        #expect(state["state"] == "running", "\(state.text)")
        let rev = try await couchRequest(server, .GET, "/_replicator/\(job)").json["_rev"]?.stringValue ?? ""
        _ = try await couchRequest(server, .DELETE, "/_replicator/\(job)?rev=\(rev)")

        // A continuous job in lt's _replicator, from CouchDB.
        _ = try await server.request(.PUT, "/_replicator", json: nil)
        let ours = try await server.request(.PUT, "/_replicator/from-couch", json: [
            "source": .string(couchURL(source)), "target": "live_copy", "continuous": true, "create_target": true,
        ])
        #expect(ours.status == 201, "\(ours.text)")
        _ = try await couchRequest(server, .PUT, "/\(source)/arrives-live-2", json: ["n": -2])
        let copied = try await eventually(120) { try await server.request(.GET, "/live_copy/arrives-live-2").status == 200 }
        #expect(copied)
        let scheduler = try await server.request(.GET, "/_scheduler/docs/_replicator/from-couch")
        #expect(scheduler.json["state"] == "running" && (scheduler.json["info"]?["docs_written"]?.intValue ?? 0) > 0, "\(scheduler.text)")
        let jobs = try await server.request(.GET, "/_scheduler/jobs")
        #expect(!scheduler.text.contains(couch.password) && !jobs.text.contains(couch.password))
        for db in [source, "pushed_by_lt", "pushed_by_cli"] { _ = try await couchRequest(server, .DELETE, "/\(db)") }
    }
}
