import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// End-to-end tests against a real `lt serve` over HTTP.
@Suite("CouchDB HTTP API", .serialized, .timeLimit(.minutes(3)))
struct HTTPAPITests {
    func withServer(extraArguments: [String] = [], _ body: (TestServer) async throws -> Void) async throws {
        let server = try TestServer(extraArguments: extraArguments)
        defer { server.stop() }
        try await body(server)
    }

    @Test("Server endpoints: welcome with a stable uuid, _up, _uuids, _all_dbs")
    func serverEndpoints() async throws {
        let directoryHolder = try TemporaryDirectory("lt-uuid")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        var firstUUID: JSON?
        for _ in 0..<2 {
            let server = try TestServer(dataDirectory: directory)
            let welcome = try await server.request(.GET, "/", auth: .none)
            #expect(welcome.status == 200 && welcome.json["couchdb"] == "Welcome")
            #expect(welcome.json["uuid"]?.stringValue?.count == 32)
            if let firstUUID { #expect(welcome.json["uuid"] == firstUUID) }  // stable across restarts
            firstUUID = welcome.json["uuid"]
            #expect(try await server.request(.GET, "/_up", auth: .none).json["status"] == "ok")
            #expect(try await server.request(.GET, "/_uuids?count=3").json["uuids"]?.arrayValue?.count == 3)
            // The system databases and the application's, created on first start.
            #expect(try await server.request(.GET, "/_all_dbs").json == ["_replicator", "_users", "lt_locations_all", "lt_place_reports", "lt_places", "lt_users"])
            #expect(try await server.request(.GET, "/_all_dbs", auth: .none).status == 401)
            server.stop()
        }
        // Only the hash of the admin password is on disk.
        let settings = try String(contentsOf: directory.appendingPathComponent("server.json"), encoding: .utf8)
        #expect(!settings.contains(TestServer.admin.1))
        #expect(settings.contains("-pbkdf2:sha256-"))
    }

    @Test("A path no route serves is CouchDB's error: the database missing, a method not routed, or nothing here")
    func unroutedPaths() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let nothing = try await s.request(.GET, "/lt_places/_all_docs/extra")
        #expect(nothing.status == 404 && nothing.json == ["error": "not_found", "reason": "missing"])
        let noDatabase = try await s.request(.GET, "/no_such_db/_design/d/_view")
        #expect(noDatabase.status == 404 && noDatabase.json["reason"] == "Database does not exist.")
        let view = try await s.request(.GET, "/lt_places/_design/d/_view")
        #expect(view.status == 404 && view.json["error"] == "not_found")
        let method = try await s.request(HTTPMethod(rawValue: "PROPFIND"), "/lt_places")
        #expect(method.status == 405 && method.json["error"] == "method_not_allowed")
        #expect(try await s.request(.GET, "/").status == 200)
    }

    @Test("Databases: create, info, duplicate, illegal name, delete")
    func databases() async throws {
        try await withServer { s in
            let created = try await s.request(.PUT, "/places")
            #expect(created.status == 201 && created.json == ["ok": true])
            #expect(try await s.request(.PUT, "/places").status == 412)
            let illegal = try await s.request(.PUT, "/Bad%20Name")
            #expect(illegal.status == 400 && illegal.json["error"] == "illegal_database_name")
            let info = try await s.request(.GET, "/places").json
            #expect(info["db_name"] == "places" && info["doc_count"] == 0 && info["instance_start_time"] == "0")
            #expect(info["update_seq"]?.stringValue != nil && info["sizes"]?["file"] != nil)
            #expect(try await s.request(.HEAD, "/places").status == 200)
            #expect(try await s.request(.GET, "/nope").status == 404)
            #expect(try await s.request(.DELETE, "/places").status == 200)
            #expect(try await s.request(.GET, "/places").status == 404)
            #expect(try await s.request(.PUT, "/a%2Fb").status == 201)  // slashes in database names
            #expect(try await s.request(.PUT, "/a%2Fb/c%2Fd", json: ["x": 1]).status == 201)  // and in document ids
            #expect(try await s.request(.GET, "/a%2Fb/c%2Fd").json["_id"] == "c/d")
        }
    }

    @Test("Deleting a database while many reads of it are under way answers at once and leaves the server answering")
    func deleteDuringReads() async throws {
        try await withServer { s in
            for round in 0..<15 {
                let name = "busy\(round)"
                #expect(try await s.request(.PUT, "/\(name)").status == 201)
                _ = try await s.request(.POST, "/\(name)/_bulk_docs", json: ["docs": .array((0..<50).map { ["_id": .string("d\($0)")] })])
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<12 {
                        group.addTask { try await s.request(.GET, "/\(name)/_all_docs?include_docs=true", timeout: .seconds(20)).status }
                    }
                    group.addTask { try await s.request(.DELETE, "/\(name)", timeout: .seconds(20)).status }
                    for try await status in group { #expect([200, 404].contains(status)) }
                }
                #expect(try await s.request(.GET, "/\(name)").status == 404)
            }
            #expect(try await s.request(.GET, "/", timeout: .seconds(5)).status == 200)
        }
    }

    @Test("Documents: MVCC, ETag, Location, conflicts, deletes, COPY")
    func documents() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            let put = try await s.request(.PUT, "/db/doc1", json: ["name": "first"])
            #expect(put.status == 201)
            let rev = put.json["rev"]!.stringValue!
            #expect(rev.hasPrefix("1-") && rev.count == 34)
            #expect(put.headers["ETag"].first == "\"\(rev)\"")
            #expect(put.headers["Location"].first?.hasSuffix("/db/doc1") == true)
            let stale = try await s.request(.PUT, "/db/doc1", json: ["name": "again"])
            #expect(stale.status == 409 && stale.json == ["error": "conflict", "reason": "Document update conflict."])
            let get = try await s.request(.GET, "/db/doc1")
            #expect(get.json == ["_id": "doc1", "_rev": .string(rev), "name": "first"])
            let notModified = try await s.request(.GET, "/db/doc1", headers: [("If-None-Match", "\"\(rev)\"")])
            #expect(notModified.status == 304)
            let post = try await s.request(.POST, "/db", json: ["x": 1])
            #expect(post.status == 201 && post.json["id"]?.stringValue?.count == 32)
            let update = try await s.request(.PUT, "/db/doc1?rev=\(rev)", json: ["name": "second"])
            let rev2 = update.json["rev"]!.stringValue!
            #expect(try await s.request(.DELETE, "/db/doc1").status == 409)
            let deleted = try await s.request(.DELETE, "/db/doc1?rev=\(rev2)")
            #expect(deleted.status == 200 && deleted.json["rev"]?.stringValue?.hasPrefix("3-") == true)
            #expect(try await s.request(.GET, "/db/doc1").json == ["error": "not_found", "reason": "deleted"])
            #expect(try await s.request(.GET, "/db/missing").json == ["error": "not_found", "reason": "missing"])
            let old = try await s.request(.GET, "/db/doc1?rev=\(rev)&revs=true&revs_info=true")
            #expect(old.json["name"] == "first" && old.json["_revisions"]?["start"] == 1)
            _ = try await s.request(.PUT, "/db/src", json: ["v": 1])
            let copy = try await s.request(HTTPMethod(rawValue: "COPY"), "/db/src", headers: [("Destination", "dst")])
            #expect(copy.status == 201)
            #expect(try await s.request(.GET, "/db/dst").json["v"] == 1)
        }
    }

    @Test("Replication endpoints: new_edits=false, _revs_diff, _bulk_get, open_revs, _local, _ensure_full_commit")
    func replicationEndpoints() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            let bulk = try await s.request(.POST, "/db/_bulk_docs", json: ["new_edits": false, "docs": [
                ["_id": "d", "_rev": "2-b", "_revisions": ["start": 2, "ids": ["b", "a"]], "v": "b"],
                ["_id": "d", "_rev": "2-c", "_revisions": ["start": 2, "ids": ["c", "a"]], "v": "c"],
            ]])
            #expect(bulk.status == 201 && bulk.json == [])
            let conflicted = try await s.request(.GET, "/db/d?conflicts=true")
            #expect(conflicted.json["_rev"] == "2-c" && conflicted.json["_conflicts"] == ["2-b"])
            let diff = try await s.request(.POST, "/db/_revs_diff", json: ["d": ["2-b", "3-x"], "e": ["1-z"]])
            #expect(diff.json == ["d": ["missing": ["3-x"], "possible_ancestors": ["2-c", "2-b"]], "e": ["missing": ["1-z"]]])
            let bulkGet = try await s.request(.POST, "/db/_bulk_get?revs=true", json: ["docs": [["id": "d", "rev": "2-b"], ["id": "nope"]]])
            let results = bulkGet.json["results"]!.arrayValue!
            #expect(results[0]["docs"]?[0]?["ok"]?["_revisions"] == ["start": 2, "ids": ["b", "a"]])
            #expect(results[1]["docs"]?.arrayValue?.first?["error"]?["error"] == "not_found")
            #expect(try await s.request(.GET, "/db/_bulk_get").status == 405)  // Cloudant Sync's probe
            // JSON when asked for (CouchDB answers multipart/mixed to a client whose Accept allows it).
            let openRevs = try await s.request(.GET, "/db/d?open_revs=all&revs=true", headers: [("Accept", "application/json")])
            #expect(openRevs.json.arrayValue?.count == 2)
            let multipart = try await s.request(.GET, "/db/d?open_revs=%5B%222-b%22,%223-q%22%5D", headers: [("Accept", "multipart/mixed")])
            #expect(multipart.headers["Content-Type"].first?.hasPrefix("multipart/mixed") == true)
            #expect(multipart.text.contains("\"_rev\":\"2-b\"") && multipart.text.contains("{\"missing\":\"3-q\"}"))
            let checkpoint: JSON = ["session_id": "s1", "source_last_seq": "5", "replication_id_version": 3,
                                    "history": [["session_id": "s1", "recorded_seq": "5"]]]
            let local = try await s.request(.PUT, "/db/_local/repid", json: checkpoint)
            #expect(local.status == 201 && local.json["rev"] == "0-1")
            #expect(try await s.request(.GET, "/db/_local/repid").json["history"]?[0]?["recorded_seq"] == "5")
            #expect(try await s.request(.GET, "/db/_all_docs").json["rows"]?.arrayValue?.count == 1)
            #expect(try await s.request(.GET, "/db/_local_docs").json["rows"]?.arrayValue?.count == 1)
            for i in 0..<6 { _ = try await s.request(.PUT, "/db/k\(i)", json: [:]) }
            let keys = try await s.request(.POST, "/db/_all_docs", json: ["keys": ["k3", "zz", "k1"], "include_docs": true])
            #expect(keys.json["rows"]?.arrayValue?.map { $0["id"] ?? $0["error"] ?? .null } == ["k3", "not_found", "k1"])
            #expect(keys.json["rows"]?[0]?["doc"]?["_id"] == "k3")
            let range = try await s.request(.GET, "/db/_all_docs?startkey=%22k4%22&endkey=%22k1%22&descending=true&skip=1&limit=2&inclusive_end=false")
            #expect(range.json["rows"]?.arrayValue?.map { $0["id"] } == ["k3", "k2"])
            let newestFirst = try await s.request(.GET, "/db/_changes?descending=true&limit=2")
            #expect(newestFirst.json["results"]?.arrayValue?.map { $0["id"] } == ["k5", "k4"])
            // PouchDB's and Cloudant Sync's checkpoint shapes are stored as they are.
            let pouch: JSON = ["last_seq": "5", "session_id": "p", "history": [["last_seq": "5", "session_id": "p"]], "replicator": "pouchdb", "version": 1]
            #expect(try await s.request(.PUT, "/db/_local/pouch", json: pouch).status == 201)
            #expect(try await s.request(.PUT, "/db/_local/android", json: ["lastSequence": "5"]).status == 201)
            var pouchBack = try await s.request(.GET, "/db/_local/pouch").json.objectValue!
            #expect(pouchBack.removeValue(forKey: "_id") == "_local/pouch" && pouchBack.removeValue(forKey: "_rev") == "0-1")
            #expect(JSON.object(pouchBack) == pouch)
            // As CouchDB 3: local documents have no conflict check; the next revision follows the given one.
            let later = try await s.request(.PUT, "/db/_local/pouch", json: ["_rev": "0-7"])
            #expect(later.status == 201 && later.json["rev"] == "0-8")
            // CouchDB's replicator writes checkpoints with `_revisions` starting at 0.
            let couchCheckpoint = try await s.request(.PUT, "/db/_local/couch", json: ["_rev": "0-1", "_revisions": ["start": 0, "ids": ["1"]], "history": []])
            #expect(couchCheckpoint.status == 201 && couchCheckpoint.json["rev"] == "0-2", "\(couchCheckpoint.text)")
            let commit = try await s.request(.POST, "/db/_ensure_full_commit", json: [:])
            #expect(commit.status == 201 && commit.json["instance_start_time"] == "0")
        }
    }

    @Test("Attachments: standalone PUT/GET/DELETE, stubs, multipart PUT")
    func attachments() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0, 1, 2, 3]
            let put = try await s.request(.PUT, "/db/photo/image.png", body: png, headers: [("Content-Type", "image/png")])
            #expect(put.status == 201)
            let get = try await s.request(.GET, "/db/photo/image.png")
            #expect(get.body == png && get.headers["Content-Type"].first == "image/png")
            let doc = try await s.request(.GET, "/db/photo")
            #expect(doc.json["_attachments"]?["image.png"]?["stub"] == true)
            #expect(doc.json["_attachments"]?["image.png"]?["length"] == 8)
            #expect(doc.json["_attachments"]?["image.png"]?["digest"]?.stringValue?.hasPrefix("md5-") == true)
            let rev = doc.json["_rev"]!.stringValue!
            let boundary = "abc123"
            var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n".utf8)
            body += JSON.object(["_id": "mp", "_attachments": ["a.txt": ["follows": true, "content_type": "text/plain", "length": 5]]]).bytes
            body += Array("\r\n--\(boundary)\r\n\r\nhello\r\n--\(boundary)--".utf8)
            let multipart = try await s.request(.PUT, "/db/mp", body: body, headers: [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")])
            #expect(multipart.status == 201)
            #expect(try await s.request(.GET, "/db/mp/a.txt").text == "hello")
            // open_revs as a replicator asks for it: each leaf a part; attachment bodies follow
            // in a nested multipart/related part.
            let openRevs = try await s.request(.GET, "/db/photo?open_revs=all&revs=true&attachments=true", headers: [("Accept", "multipart/mixed")])
            #expect(openRevs.status == 200)
            let raw = openRevs.body
            #expect(openRevs.text.contains("Content-Type: multipart/related; boundary="))
            #expect(openRevs.text.contains("\"follows\":true"))
            #expect(openRevs.text.contains("Content-Disposition: attachment; filename=\"image.png\""))
            #expect(raw.containsBytes(png))
            let related = try await s.request(.GET, "/db/mp?attachments=true", headers: [("Accept", "multipart/related")])
            #expect(related.headers["Content-Type"].first?.hasPrefix("multipart/related") == true)
            // text/plain is kept gzip-compressed, as CouchDB keeps it, and sent so with its encoding.
            #expect(related.text.contains("\"encoding\":\"gzip\""))
            #expect(related.text.contains("Content-Encoding: gzip"))
            let inline = try await s.request(.GET, "/db/mp?attachments=true")
            #expect(inline.json["_attachments"]?["a.txt"]?["data"] == .string(Data("hello".utf8).base64EncodedString()))
            let removed = try await s.request(.DELETE, "/db/photo/image.png?rev=\(rev)")
            #expect(removed.status == 200)
            #expect(try await s.request(.GET, "/db/photo/image.png").status == 404)
        }
    }

    @Test("_changes: normal, since, style=all_docs, doc_ids, selector, longpoll and continuous wake on writes")
    func changesFeeds() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            for i in 0..<5 { _ = try await s.request(.PUT, "/db/d\(i)", json: ["i": .int(i)]) }
            let all = try await s.request(.GET, "/db/_changes?style=all_docs&include_docs=true")
            #expect(all.json["results"]?.arrayValue?.count == 5 && all.json["pending"] == 0)
            let since = all.json["results"]![2]!["seq"]!.stringValue!
            let after = try await s.request(.GET, "/db/_changes?since=\(since)")
            #expect(after.json["results"]?.arrayValue?.map { $0["id"]!.stringValue! } == ["d3", "d4"])
            let ids = try await s.request(.POST, "/db/_changes?filter=_doc_ids", json: ["doc_ids": ["d1"]])
            #expect(ids.json["results"]?.arrayValue?.count == 1)
            let selected = try await s.request(.POST, "/db/_changes?filter=_selector", json: ["selector": ["i": ["$gte": 3]]])
            #expect(selected.json["results"]?.arrayValue?.count == 2)
            let lastSeq = all.json["last_seq"]!.stringValue!
            // longpoll waits for the next write.
            async let longpoll = s.request(.GET, "/db/_changes?feed=longpoll&since=\(lastSeq)&timeout=10000")
            try await Task.sleep(for: .milliseconds(300))
            _ = try await s.request(.PUT, "/db/late", json: [:])
            let woke = try await longpoll
            #expect(woke.json["results"]?.arrayValue?.map { $0["id"] } == ["late"])
            // continuous with a limit ends after that many rows, with last_seq.
            async let continuous = s.request(.GET, "/db/_changes?feed=continuous&since=now&limit=2&heartbeat=200")
            try await Task.sleep(for: .milliseconds(300))
            _ = try await s.request(.PUT, "/db/c1", json: [:])
            _ = try await s.request(.PUT, "/db/c2", json: [:])
            let lines = try await continuous.text.split(separator: "\n").compactMap { try? JSON.parse(String($0)) }
            #expect(lines.compactMap { $0["id"]?.stringValue } == ["c1", "c2"])
            #expect(lines.last?["last_seq"] != nil)
            let timedOut = try await s.request(.GET, "/db/_changes?feed=longpoll&since=now&timeout=200")
            #expect(timedOut.json["results"] == [])
        }
    }

    @Test("A thousand idle longpoll listeners cost nothing, and one write wakes them all")
    func manyIdleListeners() async throws {
        // A thousand connections from one address: beyond the default per-address share.
        try await withServer(extraArguments: ["--max-connections-per-address", "1200"]) { s in
            _ = try await s.request(.PUT, "/busy")
            var configuration = HTTPClient.Configuration()
            configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 1200)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let listeners = 1000
            let since = try await s.request(.GET, "/busy").json["update_seq"]!.stringValue!
            let woken = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<listeners {
                    group.addTask {
                        var request = HTTPClientRequest(url: s.baseURL + "/busy/_changes?feed=longpoll&timeout=60000&since=\(since)")
                        request.headers.add(name: "Authorization", value: TestServer.basic(TestServer.admin.0, TestServer.admin.1))
                        let response = try await client.execute(request, timeout: .seconds(90))
                        let body = try await response.body.collect(upTo: 1 << 20)
                        return (try JSON.parse(Array(buffer: body))["results"]?.arrayValue?.count) ?? 0
                    }
                }
                // Let every listener connect and park, then check the server still answers at once.
                try await Task.sleep(for: .seconds(3))
                let clock = ContinuousClock()
                let start = clock.now
                #expect(try await s.request(.GET, "/busy").status == 200)
                #expect(start.duration(to: clock.now) < .seconds(1))
                _ = try await s.request(.PUT, "/busy/wake", json: ["now": true])
                var total = 0
                for try await count in group { total += count }
                return total
            }
            try await client.shutdown()
            #expect(woken == listeners)
        }
    }

    @Test("Mango: _find with operators, sort, fields, paging; _index; _explain")
    func mango() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            var docs: [JSON] = []
            for i in 0..<40 { docs.append(["_id": .string("p\(i)"), "type": i % 2 == 0 ? "even" : "odd", "n": .int(i)]) }
            _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": .array(docs)])
            let find = try await s.request(.POST, "/db/_find", json: ["selector": ["type": "even", "n": ["$gte": 10]], "fields": ["n"], "limit": 5])
            #expect(find.json["docs"] == [["n": 10], ["n": 12], ["n": 14], ["n": 16], ["n": 18]])
            let bookmark = find.json["bookmark"]!
            let next = try await s.request(.POST, "/db/_find", json: ["selector": ["type": "even", "n": ["$gte": 10]], "fields": ["n"], "limit": 5, "bookmark": bookmark])
            #expect(next.json["docs"]?[0] == ["n": 20])
            let unsorted = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "sort": [["n": "desc"]]])
            #expect(unsorted.status == 400 && unsorted.json["error"] == "no_usable_index")
            let index = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["n"]], "name": "by-n", "ddoc": "idx"])
            #expect(index.json == ["result": "created", "id": "_design/idx", "name": "by-n"])
            #expect(try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["n"]], "name": "by-n", "ddoc": "idx"]).json["result"] == "exists")
            let sorted = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "sort": [["n": "desc"]], "limit": 2, "execution_stats": true])
            #expect(sorted.json["docs"]?.arrayValue?.map { $0["n"] } == [39, 38])
            #expect(sorted.json["execution_stats"]?["results_returned"] == 2)
            // A selective query reads only its key range of the index.
            let ranged = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gte": 35]], "execution_stats": true])
            #expect(ranged.json["docs"]?.arrayValue?.count == 5)
            #expect(ranged.json["execution_stats"]?["total_docs_examined"] == 5)
            #expect(ranged.json["execution_stats"]?["total_keys_examined"] == 5)
            #expect(ranged.json["warning"] == nil)
            // The index follows later writes.
            _ = try await s.request(.PUT, "/db/late", json: ["n": 100, "type": "even"])
            let late = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 39]]])
            #expect(late.json["docs"]?.arrayValue?.map { $0["_id"] } == ["late"])
            let scan = try await s.request(.POST, "/db/_find", json: ["selector": ["type": "odd"], "execution_stats": true])
            // 41 documents and the index's design document, which a full scan reads and (as in
            // CouchDB, since the selector does not match it) counts.
            #expect(scan.json["execution_stats"]?["total_docs_examined"] == 42 && scan.json["warning"] != nil)
            let indexes = try await s.request(.GET, "/db/_index")
            #expect(indexes.json["total_rows"] == 2 && indexes.json["indexes"]?[0]?["name"] == "_all_docs")
            let explain = try await s.request(.POST, "/db/_explain", json: ["selector": ["type": "odd"]])
            #expect(explain.json["selector"] == ["type": ["$eq": "odd"]])
            #expect(try await s.request(.DELETE, "/db/_index/idx/json/by-n").status == 200)
            #expect(try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$bad": 1]]]).status == 400)
        }
    }

    @Test("Bad input gets CouchDB-style errors and never a crash or a partial write")
    func badInput() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/db")
            let cases: [(HTTPMethod, String, [UInt8], Int, String)] = [
                (.PUT, "/db/x", Array("{not json".utf8), 400, "bad_request"),
                (.PUT, "/db/x", Array("[1,2]".utf8), 400, "bad_request"),
                (.PUT, "/db/x", Array(#"{"_rev":"nope"}"#.utf8), 400, "bad_request"),
                (.PUT, "/db/x", Array(#"{"_foo":1}"#.utf8), 400, "doc_validation"),
                (.PUT, "/db/_bad", Array("{}".utf8), 400, "illegal_docid"),
                (.POST, "/db/_bulk_docs", Array(#"{"docs":5}"#.utf8), 400, "bad_request"),
                (.GET, "/db/_all_docs?limit=-1", [], 400, "query_parse_error"),
                (.GET, "/db/_changes?feed=bogus", [], 400, "bad_request"),
                (.DELETE, "/db/_bulk_docs", [], 405, "method_not_allowed"),
                (.POST, "/db/_find", Array(#"{"selector":[]}"#.utf8), 400, "invalid_selector_json"),
                (.PUT, "/db/x", Array(String(repeating: "[", count: 100_000).utf8), 400, "bad_request"),
            ]
            for (method, path, body, status, error) in cases {
                let reply = try await s.request(method, path, body: body, headers: [("Content-Type", "application/json")])
                #expect(reply.status == status, "\(method) \(path)")
                #expect(reply.json["error"] == .string(error), "\(method) \(path): \(reply.text)")
                #expect(reply.json["reason"]?.stringValue != nil)
            }
            // As CouchDB (invalid_docids_test.exs): an id it cannot take refuses the whole batch.
            let mixed = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "good"], ["_id": "_bad"], ["_id": 5]]])
            #expect(mixed.status == 400 && mixed.json["error"] == "illegal_docid", "\(mixed.text)")
            let info = try await s.request(.GET, "/db").json
            #expect(info["doc_count"] == 0)
            #expect(try await s.request(.GET, "/").status == 200)  // still alive
        }
    }

    @Test("Maintenance: _dbs_info, _design_docs, _revs_limit, _purge, _compact, eventsource")
    func maintenance() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/m")
            let dbsInfo = try await s.request(.POST, "/_dbs_info", json: ["keys": ["m", "nope"]])
            #expect(dbsInfo.json[0]?["info"]?["db_name"] == "m" && dbsInfo.json[1]?["error"] == "not_found")
            _ = try await s.request(.PUT, "/m/_design/app", json: ["language": "javascript"])
            _ = try await s.request(.PUT, "/m/plain", json: ["v": 1])
            let design = try await s.request(.GET, "/m/_design_docs")
            #expect(design.json["rows"]?.arrayValue?.map { $0["id"] } == ["_design/app"])
            #expect(try await s.request(.GET, "/m/_revs_limit").json == 1000)
            #expect(try await s.request(.PUT, "/m/_revs_limit", json: 5).status == 200)
            #expect(try await s.request(.PUT, "/m/_revs_limit", json: "x").status == 400)
            #expect(try await s.request(.GET, "/m/_revs_limit").json == 5)
            // Compaction drops old revision bodies.
            var rev = try await s.request(.PUT, "/m/doc", json: ["n": 0]).json["rev"]!.stringValue!
            let first = rev
            for n in 1...3 { rev = try await s.request(.PUT, "/m/doc?rev=\(rev)", json: ["n": .int(n)]).json["rev"]!.stringValue! }
            #expect(try await s.request(.GET, "/m/doc?rev=\(first)").status == 200)
            #expect(try await s.request(.POST, "/m/_compact", json: [:]).status == 202)
            var compacted = false
            for _ in 0..<50 where !compacted {
                compacted = try await s.request(.GET, "/m/doc?rev=\(first)").status == 404
                if !compacted { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(compacted)
            #expect(try await s.request(.GET, "/m/doc").json["n"] == 3)
            // Purge: gone for good, purge_seq moves.
            let purge = try await s.request(.POST, "/m/_purge", json: ["plain": [.string(try await s.request(.GET, "/m/plain").json["_rev"]!.stringValue!)]])
            #expect(purge.status == 201 && purge.json["purged"]?["plain"]?.arrayValue?.count == 1)
            #expect(try await s.request(.GET, "/m/plain").json["reason"] == "missing")
            #expect(try await s.request(.GET, "/m").json["purge_seq"]?.stringValue?.hasPrefix("1-") == true)
            // eventsource: data lines with ids.
            let events = try await s.request(.GET, "/m/_changes?feed=eventsource&timeout=300")
            #expect(events.headers["Content-Type"].first == "text/event-stream")
            #expect(events.text.contains("data: {\"seq\"") && events.text.contains("\nid: "))
            #expect(try await s.request(.HEAD, "/m/doc").status == 200)
            #expect(try await s.request(.POST, "/m/_view_cleanup", json: [:]).status == 202)
        }
    }

    @Test("Large _changes answers are streamed in pages and stay one valid JSON document")
    func largeChanges() async throws {
        try await withServer { s in
            _ = try await s.request(.PUT, "/big")
            for start in stride(from: 0, to: 12_000, by: 4000) {
                _ = try await s.request(.POST, "/big/_bulk_docs", json: ["docs": .array((start..<(start + 4000)).map { ["_id": .string("b\($0)")] })])
            }
            let all = try await s.request(.GET, "/big/_changes")
            let rows = all.json["results"]?.arrayValue ?? []
            #expect(rows.count == 12_000 && Set(rows.compactMap { $0["id"]?.stringValue }).count == 12_000)
            #expect(all.json["last_seq"] == (try await s.request(.GET, "/big").json["update_seq"]) && all.json["pending"] == 0)
            let limited = try await s.request(.GET, "/big/_changes?limit=7000")
            #expect(limited.json["results"]?.arrayValue?.count == 7000)
            #expect(limited.json["last_seq"] == limited.json["results"]?[6999]?["seq"] && limited.json["pending"] == 5000)
            let rest = try await s.request(.GET, "/big/_changes?since=\(limited.json["last_seq"]!.stringValue!)")
            #expect(rest.json["results"]?.arrayValue?.count == 5000)
            // _all_docs streams the same way, in key order, with offset and ranges intact.
            let docs = try await s.request(.GET, "/big/_all_docs?include_docs=true")
            let ids = docs.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            #expect(ids.count == 12_000 && ids == ids.sorted() && docs.json["total_rows"] == 12_000)
            #expect(docs.json["rows"]?[11_999]?["doc"]?["_id"] == .string(ids[11_999]))
            let page = try await s.request(.GET, "/big/_all_docs?startkey=%22b5%22&limit=6000&descending=true")
            let pageIDs = page.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            #expect(pageIDs == Array(ids.filter { $0 <= "b5" }.reversed().prefix(6000)))
            #expect(pageIDs.count == 6000)
        }
    }

    @Test("Request bodies over the configured limit get 413")
    func bodyLimit() async throws {
        let server = try TestServer(extraArguments: ["--max-body-size", "1024"])
        defer { server.stop() }
        _ = try await server.request(.PUT, "/db")
        let big = try await server.request(.PUT, "/db/x", json: ["data": .string(String(repeating: "x", count: 4096))])
        #expect(big.status == 413 && big.json["error"] == "too_large")
    }
}
