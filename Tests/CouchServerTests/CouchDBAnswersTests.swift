import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import MIMEMultipart
import NIOHTTP1
import Testing

/// Single requests whose answers differed from Apache CouchDB 3.4.3's (issue 23), each checked
/// against what CouchDB 3.4.3 answered to the same request (noted beside it).
@Suite("Answers as CouchDB 3.4.3 gives them")
struct CouchDBAnswersTests {
    @Test("Unknown resources, illegal names and ids, the URL's document id, _bulk_get without rev")
    func namesAndResources() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        // CouchDB: 404 {"error":"not_found","reason":"missing"}; writing one: 400 illegal_docid.
        let unknown = try await s.request(.GET, "/db/_no_such_endpoint")
        #expect(unknown.status == 404 && unknown.json["error"] == "not_found")
        let write = try await s.request(.PUT, "/db/_no_such_endpoint", json: [:])
        #expect(write.status == 400 && write.json["error"] == "illegal_docid")
        // CouchDB: PUT /_leading is 400 illegal_database_name; GET is 404 "Database does not exist."
        let create = try await s.request(.PUT, "/_leading")
        #expect(create.status == 400 && create.json["error"] == "illegal_database_name")
        #expect(try await s.request(.GET, "/_leading").status == 404)
        // CouchDB: the URL names the document; a different `_id` in the body is ignored.
        let put = try await s.request(.PUT, "/db/urlid", json: ["_id": "other", "a": 1])
        #expect(put.status == 201 && put.json["id"] == "urlid")
        #expect(try await s.request(.GET, "/db/other").status == 404)
        // CouchDB: _bulk_get without `rev` answers every leaf; a missing document, rev "undefined".
        let first = try await s.request(.PUT, "/db/c", json: ["n": 1]).json["rev"]?.stringValue ?? ""
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "c", "_rev": .string("2-" + String(repeating: "a", count: 32)), "_revisions": ["start": 2, "ids": [.string(String(repeating: "a", count: 32)), "ffff"]]],
        ]])
        let bulk = try await s.request(.POST, "/db/_bulk_get", json: ["docs": [["id": "c"], ["id": "nope"]]])
        let leaves = bulk.json["results"]?[0]?["docs"]?.arrayValue?.compactMap { $0["ok"]?["_rev"]?.stringValue } ?? []
        #expect(Set(leaves) == [first, "2-" + String(repeating: "a", count: 32)], "\(bulk.text)")
        #expect(bulk.json["results"]?[1]?["docs"]?[0]?["error"]?["rev"] == "undefined")
    }

    @Test("Issue 41's HTTP rows: the client's X-Couch-Request-ID comes back, Location is absolute, all_or_nothing is 417 and writes nothing, an empty id is illegal_docid")
    func requestIDsAndRefusals() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        // CouchDB: the answer carries the id the client gave; one that is not an id gets a new one.
        let named = try await s.request(.PUT, "/db/d1", json: ["a": 1], headers: [("X-Couch-Request-ID", "abc123")])
        #expect(named.headers.first(name: "X-Couch-Request-ID") == "abc123")
        // CouchDB: Location is absolute, from the request's Host: http://127.0.0.1:5984/db/d1.
        #expect(named.headers.first(name: "Location") == "http://127.0.0.1:\(s.port)/db/d1")
        #expect(try await s.request(.PUT, "/db2").headers.first(name: "Location") == "http://127.0.0.1:\(s.port)/db2")
        let odd = try await s.request(.GET, "/db/d1", headers: [("X-Couch-Request-ID", "bad id; " + String(repeating: "x", count: 70))])
        let fresh = odd.headers.first(name: "X-Couch-Request-ID") ?? ""
        #expect(fresh.count == 10 && fresh.allSatisfy(\.isHexDigit))
        // CouchDB: 417 [{"id":"x","rev":"0-","error":"not_implemented","reason":"all_or_nothing is not supported"}].
        let all = try await s.request(.POST, "/db/_bulk_docs", json: ["all_or_nothing": true, "docs": [["_id": "x"]]])
        #expect(all.status == 417)
        #expect(all.json == [["id": "x", "rev": "0-", "error": "not_implemented", "reason": "all_or_nothing is not supported"]])
        #expect(try await s.request(.GET, "/db/x").status == 404)
        // CouchDB: 400 {"error":"illegal_docid","reason":"Document id must not be empty"}.
        let empty = try await s.request(.POST, "/db", json: ["_id": ""])
        #expect(empty.status == 400 && empty.json == ["error": "illegal_docid", "reason": "Document id must not be empty"])
    }

    @Test("_find and _index: use_index null or [], bad bookmarks, invalid index definitions, _index routes")
    func mango() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "a", "n": 1], ["_id": "b", "n": 2]]])
        // CouchDB's own Mango suite sends `"use_index": null`; `[]` once crashed lt.
        for useIndex: JSON in [.null, [], "_design/none"] {
            let found = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "use_index": useIndex])
            #expect(found.status == 200 && found.json["docs"]?.arrayValue?.count == 2, "\(useIndex.text): \(found.text)")
        }
        // CouchDB: empty names are names of no index (a warning); three names are refused.
        let empty = try await s.request(.POST, "/db/_find", json: ["selector": [:], "use_index": ["", "x"]])
        #expect(empty.status == 200 && empty.json["warning"]
            == "_design/, x was not used because it is not a valid index for this query.\nNo matching index found, create an index to optimize query time.",
            "\(empty.text)")
        #expect(try await s.request(.POST, "/db/_find", json: ["selector": [:], "use_index": ["a", "b", "c"]]).json["error"] == "invalid_index_name")
        let bookmark = try await s.request(.POST, "/db/_find", json: ["selector": [:], "bookmark": "bad-bookmark"])
        #expect(bookmark.status == 400 && bookmark.json["error"] == "invalid_bookmark")
        #expect(bookmark.json["reason"] == #"Invalid bookmark value: "bad-bookmark""#)
        // Definitions CouchDB refuses with 400.
        let bad: [JSON] = [
            ["index": ["fields": [""]]],
            ["index": ["fields": [["n": "asc"], ["m": "desc"]]]],
            ["index": ["fields": [["n": 2]]]],
            ["index": ["fields": ["n"]], "name": ""],
            ["index": ["fields": ["n"]], "name": true],
            ["index": ["fields": ["n"]], "ddoc": "_design/"],
            ["index": ["fields": ["n"]], "type": "geo"],
            ["index": ["fields": ["n"]], "type": .null],
            ["index": ["fields": ["n"], "selector": ["n": 1]]],  // an unknown key (CouchDB: invalid_key)
            ["index": ["fields": ["n"]], "bogus": 1],
        ]
        for body in bad {
            #expect(try await s.request(.POST, "/db/_index", json: body).status == 400, "\(body.text)")
        }
        #expect(try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["n"]], "ddoc": "dd", "name": "idx"]).status == 200)
        // allow_fallback (mango_cursor:create): an unusable use_index falls back with a warning, or is refused.
        let fallback = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "sort": ["n"], "use_index": "_design/none"])
        #expect(fallback.status == 200 && fallback.json["docs"]?.arrayValue?.count == 2
                && fallback.json["warning"]?.stringValue?.hasPrefix("_design/none was not used because") == true, "\(fallback.text)")
        let strict = try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "use_index": "_design/none", "allow_fallback": false])
        #expect(strict.status == 400 && strict.json["error"] == "invalid_index")
        #expect(try await s.request(.POST, "/db/_find", json: ["selector": ["m": 1], "allow_fallback": false]).json["error"] == "invalid_index")
        #expect(try await s.request(.POST, "/db/_find", json: ["selector": ["n": ["$gt": 0]], "allow_fallback": false]).status == 200)
        // _explain shows the view arguments CouchDB would pass (mrargs).
        let explained = try await s.request(.POST, "/db/_explain", json: ["selector": ["n": ["$gt": 0]]]).json
        #expect(explained["mrargs"]?["start_key"] == [0] && explained["mrargs"]?["end_key"] == ["<MAX>"] && explained["index"]?["name"] == "idx")
        // Routes: unknown paths 404, known paths with another method 405.
        #expect(try await s.request(.PUT, "/db/_index/a").status == 404)
        #expect(try await s.request(.GET, "/db/_index/a/b/c/d").status == 404)
        #expect(try await s.request(.GET, "/db/_index/_bulk_delete").status == 405)
        #expect(try await s.request(.GET, "/db/_index/dd/json/idx").status == 405)
        #expect(try await s.request(.GET, "/db/_index/_design/dd/json/idx").status == 405)
        #expect(try await s.request(.DELETE, "/db/_index/dd/json/missing").status == 404)
        #expect(try await s.request(.DELETE, "/db/_index/_design/dd/json/idx").json["ok"] == true)
    }

    @Test("Request bodies sent gzip-compressed are read (IBM's SDK sends them); other codings are 415")
    func compressedBodies() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let body = try AttachmentEncoding.gzip(JSON.object(["docs": [["_id": "z", "n": 1]]]).bytes)
        let bulk = try await s.request(.POST, "/db/_bulk_docs", body: body, headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        #expect(bulk.status == 201, "\(bulk.text)")
        #expect(try await s.request(.GET, "/db/z").json["n"] == 1)
        let brotli = try await s.request(.POST, "/db/_bulk_docs", body: [1, 2, 3], headers: [("Content-Type", "application/json"), ("Content-Encoding", "br")])
        #expect(brotli.status == 415)
        let broken = try await s.request(.POST, "/db/_bulk_docs", body: [1, 2, 3], headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        #expect(broken.status == 400)
    }

    @Test("Compressed attachments: att_encoding_info, the attachment ETag and 304, gzip only where accepted; a gzip part larger than its declared length is refused")
    func attachmentEncoding() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let text = Array(String(repeating: "hello world ", count: 100).utf8)
        #expect(try await s.request(.PUT, "/db/a/t.txt", body: text, headers: [("Content-Type", "text/plain")]).status == 201)
        // CouchDB 3.4.3: stubs show `encoding`/`encoded_length` only with att_encoding_info=true.
        #expect(try await s.request(.GET, "/db/a").json["_attachments"]?["t.txt"]?["encoding"] == nil)
        let info = try await s.request(.GET, "/db/a?att_encoding_info=true").json["_attachments"]?["t.txt"]
        #expect(info?["encoding"] == "gzip" && info?["length"] == .int(text.count) && (info?["encoded_length"]?.intValue ?? 0) < text.count)
        // CouchDB: the ETag is the digest's base64; If-None-Match with it is 304; `q=0` refuses gzip.
        let plain = try await s.request(.GET, "/db/a/t.txt", headers: [("Accept-Encoding", "gzip;q=0")])
        #expect(plain.body == text && plain.headers.first(name: "Content-Encoding") == nil)
        let etag = plain.headers.first(name: "ETag") ?? ""
        #expect(etag.hasPrefix("\"") && !etag.contains("md5-"))
        #expect(try await s.request(.GET, "/db/a/t.txt", headers: [("If-None-Match", etag)]).status == 304)
        // A compressed part that decodes past the length it declares is refused, not expanded.
        let bomb = try AttachmentEncoding.gzip([UInt8](repeating: 0, count: 200_000))
        let doc: JSON = ["_attachments": ["b.txt": ["content_type": "text/plain", "follows": true, "encoding": "gzip", "length": 10]]]
        let body = Multipart.build([([("Content-Type", "application/json")], doc.bytes), ([], bomb)], boundary: "xyz")
        let refused = try await s.request(.PUT, "/db/bomb", body: body, headers: [("Content-Type", "multipart/related; boundary=\"xyz\"")])
        #expect(refused.status == 413, "\(refused.text)")
        #expect(try await s.request(.GET, "/db/bomb").status == 404)
    }

    @Test("A read that shows conflicts has no ETag, so a cached copy cannot hide their resolution")
    func conflictsAreNotCached() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let first = try await s.request(.PUT, "/db/x", json: ["n": 1]).json["rev"]?.stringValue ?? ""
        _ = try await s.request(.PUT, "/db/x?rev=\(first)", json: ["n": 2])
        let branch = "2-" + String(repeating: "c", count: 32)
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "x", "_rev": .string(branch), "_revisions": ["start": 2, "ids": [.string(String(repeating: "c", count: 32)), .string(String(first.dropFirst(2)))]]],
        ]])
        let conflicted = try await s.request(.GET, "/db/x?conflicts=true")
        #expect(conflicted.json["_conflicts"] != nil && conflicted.headers.first(name: "ETag") == nil)
        let winner = conflicted.json["_rev"]?.stringValue ?? ""
        let loser = conflicted.json["_conflicts"]?[0]?.stringValue ?? ""
        // A client holding the winner's ETag from a plain read still gets the conflicts: an
        // answer with metadata is never "not modified" (the winning revision did not change).
        let revalidated = try await s.request(.GET, "/db/x?conflicts=true", headers: [("If-None-Match", "\"\(winner)\"")])
        #expect(revalidated.status == 200 && revalidated.json["_conflicts"] != nil, "\(revalidated.status) \(revalidated.text)")
        #expect(try await s.request(.DELETE, "/db/x?rev=\(loser)").status == 200)
        let resolved = try await s.request(.GET, "/db/x?conflicts=true")
        #expect(resolved.status == 200 && resolved.json["_conflicts"] == nil && resolved.json["_rev"] == .string(winner))
        // Without metadata the ETag and 304 stay.
        let plain = try await s.request(.GET, "/db/x")
        #expect(plain.headers.first(name: "ETag") == "\"\(winner)\"")
        #expect(try await s.request(.GET, "/db/x", headers: [("If-None-Match", "\"\(winner)\"")]).status == 304)
    }

    @Test("Replication: a refused request creates nothing; _scheduler shows _replicator jobs in CouchDB's shape, credentials removed")
    func replicationAnswers() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/src")
        _ = try await s.request(.PUT, "/src/a", json: ["n": 1])
        let refused = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "never", "create_target": true, "filter": "nope/none"])
        #expect(refused.status >= 400, "\(refused.text)")
        #expect(try await s.request(.GET, "/never").status == 404, "a refused replication created its target")

        let secret = TestServer.admin.1
        let source = "http://\(TestServer.admin.0):\(secret)@127.0.0.1:\(s.port)/src"
        _ = try await s.request(.PUT, "/_replicator")
        #expect(try await s.request(.PUT, "/_replicator/job", json: ["source": .string(source), "target": "copy", "create_target": true, "continuous": true]).status == 201)
        #expect(try await eventually(30) { try await s.request(.GET, "/copy/a").status == 200 })
        let docs = try await s.request(.GET, "/_scheduler/docs")
        let one = try await s.request(.GET, "/_scheduler/docs/_replicator/job")
        let jobs = try await s.request(.GET, "/_scheduler/jobs")
        for reply in [docs, one, jobs] { #expect(!reply.text.contains(secret), "\(reply.text)") }
        #expect(one.json["state"] == "running" && one.json["doc_id"] == "job" && one.json["database"] == "_replicator", "\(one.text)")
        #expect(one.json["source"] == .string("http://127.0.0.1:\(s.port)/src/"))
        #expect((one.json["info"]?["docs_written"]?.intValue ?? 0) >= 1 && one.json["error_count"] == 0)
        #expect(try await s.request(.GET, "/_scheduler/docs/_replicator/none").status == 404)
    }

    @Test("Issue 41's HTTP rows, part 2: X-HTTP-Method-Override, temporary views 410, attachment ranges 206/416, attachment names, JSONP")
    func httpRowsPartTwo() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        // CouchDB (method_override_test.exs): a POST overridden to PUT writes; to DELETE deletes;
        // the header on a GET is ignored.
        let put = try await s.request(.POST, "/db/fnord", json: ["bob": "connie"], headers: [("X-HTTP-Method-Override", "PUT")])
        #expect(put.status == 201)
        #expect(try await s.request(.GET, "/db/fnord").json["bob"] == "connie")
        let rev = put.json["rev"]?.stringValue ?? ""
        #expect(try await s.request(.POST, "/db/fnord?rev=\(rev)", headers: [("X-HTTP-Method-Override", "DELETE")]).status == 200)
        #expect(try await s.request(.GET, "/db/fnord").status == 404)
        #expect(try await s.request(.GET, "/db/fnord2", headers: [("X-HTTP-Method-Override", "PUT")]).status == 404)
        #expect(try await s.request(.POST, "/db/fnord3", json: [:], headers: [("X-HTTP-Method-Override", "PATCH")]).status != 201)
        // CouchDB: 410 {"error":"gone","reason":"Temporary views are not supported in CouchDB"}.
        let temporary = try await s.request(.POST, "/db/_temp_view", json: ["map": "function(doc){emit(null)}"])
        #expect(temporary.status == 410 && temporary.json == ["error": "gone", "reason": "Temporary views are not supported in CouchDB"])

        // attachment_ranges_test.exs, on "This is a base64 encoded text" (29 bytes).
        let text = "This is a base64 encoded text"
        _ = try await s.request(.PUT, "/db/bin_doc", json: ["_attachments": ["foo.txt": [
            "content_type": "application/octet-stream", "data": .string(Data(text.utf8).base64EncodedString())]]])
        func ranged(_ range: String) async throws -> TestServer.Reply {
            try await s.request(.GET, "/db/bin_doc/foo.txt", headers: [("Range", range)])
        }
        for (range, status, body, contentRange) in [
            ("bytes=0-28", 206, text, "bytes 0-28/29"), ("bytes=0-", 200, text, nil), ("bytes=0-,0-,0-", 200, text, nil),
            ("bytes:0-", 200, text, nil), ("bytes=2-", 206, String(text.dropFirst(2)), "bytes 2-28/29"),
            ("bytes=0-3", 206, "This", "bytes 0-3/29"), ("bytes=10-15", 206, "base64", "bytes 10-15/29"),
            ("bytes=-3", 206, "ext", "bytes 26-28/29"), ("bytes=0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1", 200, text, nil),
        ] as [(String, Int, String, String?)] {
            let reply = try await ranged(range)
            #expect(reply.status == status && reply.text == body, "\(range): \(reply.status) \(reply.text)")
            #expect(reply.headers.first(name: "Content-Range") == contentRange, "\(range)")
        }
        for range in ["bytes=5-3", "bytes=300-310"] {
            let reply = try await ranged(range)
            #expect(reply.status == 416 && reply.json["error"] == "requested_range_not_satisfiable", "\(range)")
        }
        let two = try await ranged("bytes=0-3,10-15")
        let type = two.headers.first(name: "Content-Type") ?? ""
        #expect(two.status == 206 && type.hasPrefix("multipart/byteranges; boundary="))
        #expect(two.text.contains("Content-Range: bytes 0-3/29\r\n\r\nThis\r\n--") && two.text.contains("Content-Range: bytes 10-15/29\r\n\r\nbase64\r\n--"))
        #expect(try await s.request(.GET, "/db/bin_doc/foo.txt").headers.first(name: "Accept-Ranges") == "bytes")

        // attachment_names_test.exs: a leading underscore is refused everywhere, whole requests.
        let underscored: JSON = ["_id": "bin_doc2", "_attachments": ["_foo.txt": ["content_type": "text/plain", "data": "VGhpcw=="]]]
        let reason: JSON = "Attachment name '_foo.txt' starts with prohibited character '_'"
        for reply in [
            try await s.request(.PUT, "/db/bin_doc2", json: underscored), try await s.request(.POST, "/db", json: underscored),
            try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "fine"], underscored]]),
        ] {
            #expect(reply.status == 400 && reply.json["reason"] == reason, "\(reply.text)")
        }
        #expect(try await s.request(.GET, "/db/fine").status == 404)
        // attachments_test.exs: deleting at a revision the document never had.
        let garbage = try await s.request(.DELETE, "/db/bin_doc/foo.txt?rev=4-garbage")
        #expect(garbage.status == 409 && garbage.json == ["error": "not_found", "reason": "missing_rev"], "\(garbage.text)")

        // jsonp_test.exs: off by default; on, JSON answers (streamed ones too) come as a call.
        #expect(try await s.request(.GET, "/db/bin_doc?callback=cb").headers.first(name: "Content-Type") == "application/json")
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/allow_jsonp", json: "true")
        let called = try await s.request(.GET, "/db/bin_doc?callback=jsonp_no_chunk")
        #expect(called.status == 200 && called.headers.first(name: "Content-Type") == "application/javascript")
        #expect(called.text.hasPrefix("/* CouchDB */jsonp_no_chunk(") && called.text.hasSuffix(");\n"), "\(called.text)")
        let inner = called.text.dropFirst("/* CouchDB */jsonp_no_chunk(".count).dropLast(3)
        #expect(try JSON.parse(Array(inner.utf8))["_id"] == "bin_doc")
        #expect(try await s.request(.GET, "/db/bin_doc?callback=jsonp_no_chunk%22").status == 400)
        let changes = try await s.request(.GET, "/db/_changes?callback=jsonp_chunk")
        #expect(changes.text.hasSuffix(");\n"), "\(changes.text)")
        let feed = changes.text.dropFirst("/* CouchDB */jsonp_chunk(".count).dropLast(3)
        #expect(changes.headers.first(name: "Content-Type") == "application/javascript" && (try? JSON.parse(Array(feed.utf8)))?["results"] != nil, "\(changes.text)")

        // changes_test.exs: the heartbeat's two refusals, in CouchDB's words.
        let negative = try await s.request(.GET, "/db/_changes?feed=continuous&heartbeat=-1000")
        #expect(negative.status == 400 && negative.json["reason"] == "The heartbeat value should be a positive integer (in milliseconds).")
        let word = try await s.request(.GET, "/db/_changes?feed=continuous&heartbeat=a1000")
        #expect(word.status == 400 && word.json["reason"] == "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
        // changes_async_test.exs, COUCHDB-1852: an EventSource's Last-Event-ID wins over since.
        _ = try await s.request(.PUT, "/events")
        for _ in 0..<4 { _ = try await s.request(.POST, "/events", json: ["bop": "foom"]) }
        let all = try await s.request(.GET, "/events/_changes").json["results"]?.arrayValue ?? []
        let second = try #require(all.count == 4 ? all[1]["seq"]?.stringValue : nil)
        let events = try await s.request(.GET, "/events/_changes?feed=eventsource&timeout=100&since=0",
                                         headers: [("Accept", "text/event-stream"), ("Last-Event-ID", second)])
        #expect(events.text.components(separatedBy: "data: ").count - 1 == 2, "\(events.text)")
    }

    @Test("Found by CouchDB's own suite: functions ending in a semicolon compile, a view POST's body carries its parameters, _uuids is never cached")
    func foundByCouchDBSuite() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "a", "integer": 1], ["_id": "b", "integer": 2], ["_id": "c", "integer": 3]]])
        // view_update_seq_test.exs and others: `function (doc) {...};` is CouchDB's usual design document.
        let ddoc: JSON = ["views": [
            "summate": ["map": "function (doc) {emit(doc.integer, doc.integer)};", "reduce": "function (keys, values) { return sum(values); };"],
            "some": ["map": "function(doc) { emit(doc._id, null) } ; \n "],
            "commented": ["map": "function(doc) { emit(doc._id, 1) } // by id"],
        ]]
        #expect(try await s.request(.PUT, "/db/_design/test", json: ddoc).status == 201)
        let summed = try await s.request(.GET, "/db/_design/test/_view/summate")
        #expect(summed.status == 200 && summed.json["rows"]?[0]?["value"] == 6, "\(summed.text)")
        #expect(try await s.request(.GET, "/db/_design/test/_view/commented").json["total_rows"] == 3)
        // view_test.exs: {"keys": [...], "limit": 1} in the body is one row.
        let posted = try await s.request(.POST, "/db/_design/test/_view/some", json: ["keys": ["a", "b"], "limit": 1])
        #expect(posted.status == 200 && posted.json["rows"]?.arrayValue?.count == 1, "\(posted.text)")
        let reversed = try await s.request(.POST, "/db/_design/test/_view/summate", json: ["descending": true, "reduce": false, "startkey": 2, "update_seq": true])
        #expect(reversed.json["rows"]?.arrayValue?.compactMap { $0["key"]?.intValue } == [2, 1] && reversed.json["update_seq"] != nil, "\(reversed.text)")
        // all_docs_test.exs, design_docs_query_test.exs: a parameter in the query string wins over the body's.
        let colliding = try await s.request(.POST, "/db/_all_docs?limit=1", json: ["keys": ["a", "b"], "limit": 2])
        #expect(colliding.json["rows"]?.arrayValue?.count == 1, "\(colliding.text)")
        let collidingView = try await s.request(.POST, "/db/_design/test/_view/some?limit=1", json: ["keys": ["a", "b"], "limit": 2])
        #expect(collidingView.json["rows"]?.arrayValue?.count == 1, "\(collidingView.text)")
        // invalid_docids_test.exs: an id with a leading underscore is illegal_docid, in _bulk_docs for the whole request.
        let underscore = try await s.request(.POST, "/db", json: ["_id": "_invalid"])
        #expect(underscore.status == 400 && underscore.json == ["error": "illegal_docid", "reason": "Only reserved document ids may start with underscore."])
        let number = try await s.request(.POST, "/db", json: ["_id": 1])
        #expect(number.status == 400 && number.json == ["error": "illegal_docid", "reason": "Document id must be a string"])
        let bulk = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "fine2"], ["_id": "_invalid"]]])
        #expect(bulk.status == 400 && bulk.json["error"] == "illegal_docid")
        #expect(try await s.request(.GET, "/db/fine2").status == 404)
        // basics_test.exs: DELETE without a revision: 404 when the document is not there, 409 when it is.
        #expect(try await s.request(.DELETE, "/db/doc-does-not-exist").status == 404)
        #expect(try await s.request(.DELETE, "/db/a").status == 409)
        // basics_test.exs: `+` in a document id in the path is a space ([chttpd] decode_plus_to_space,
        // true by default); %2B is a plus; with the setting false, `+` is itself.
        #expect(try await s.request(.PUT, "/db/test+doc+2", json: [:]).json["id"] == "test doc 2")
        #expect(try await s.request(.GET, "/db/test%20doc%202").status == 200)
        #expect(try await s.request(.PUT, "/db/plus%2Bsign", json: [:]).json["id"] == "plus+sign")
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/decode_plus_to_space", json: "false")
        #expect(try await s.request(.GET, "/db/plus+sign").status == 200)
        _ = try await s.request(.DELETE, "/_node/_local/_config/chttpd/decode_plus_to_space")
        // uuids_test.exs: CouchDB's cache-busting headers.
        let uuids = try await s.request(.GET, "/_uuids")
        #expect(uuids.headers.first(name: "Cache-Control")?.contains("no-cache") == true)
    }

    @Test("Found by CouchDB's own suite, part 2: partition limits and ids, Location headers behind a proxy, X-CouchDB-Body-Time, replication answers (history, since_seq, doc_ids, cancel by id)")
    func foundByCouchDBSuitePartTwo() async throws {
        let s = try TestServer()
        defer { s.stop() }
        // partition_size_limit_test.exs: a full partition takes no growing write (403
        // partition_overflow), but deletions, shrinking edits, replicated revisions and other
        // partitions still go in.
        _ = try await s.request(.PUT, "/p?partitioned=true")
        #expect(try await s.request(.PUT, "/_node/_local/_config/couchdb/max_partition_size", json: "10240").status == 200)
        let big = String(repeating: "0", count: 1024)
        let fill = try await s.request(.POST, "/p/_bulk_docs", json: ["docs": .array((1...15).map { ["_id": .string("foo:\($0)"), "value": .string(big)] })])
        #expect(fill.status == 201)
        let refused = try await s.request(.PUT, "/p/foo:bar", json: ["value": "stuff"])
        #expect(refused.status == 403 && refused.json == ["error": "partition_overflow", "reason": "Partition limit exceeded due to update on 'foo:bar'"])
        let mixed = try await s.request(.POST, "/p/_bulk_docs", json: ["docs": [["_id": "foo:x"], ["_id": "baz:x"]]])
        #expect(mixed.json[0]?["error"] == "partition_overflow" && mixed.json[1]?["ok"] == true, "\(mixed.text)")
        let first = try await s.request(.GET, "/p/foo:1").json
        #expect(try await s.request(.PUT, "/p/foo:1?rev=\(first["_rev"]!.stringValue!)", json: ["value": ""]).status == 201)
        #expect(try await s.request(.PUT, "/p/foo:bar?new_edits=false", json: ["_rev": "1-23202479633c2b380f79507a776743d5", "value": "stuff"]).status == 201)
        _ = try await s.request(.PUT, "/_node/_local/_config/couchdb/max_partition_size", json: "0")
        #expect(try await s.request(.PUT, "/p/foo:more", json: ["value": "stuff"]).status == 201)
        // partition_crud_test.exs: ids without a partition refuse a whole _bulk_docs; _bulk_get names them.
        let noPartition = try await s.request(.POST, "/p/_bulk_docs", json: ["docs": [["_id": "foo1"]]])
        #expect(noPartition.status == 400 && noPartition.json == ["error": "illegal_docid", "reason": "Doc id must be of form partition:id"])
        let bulkGet = try await s.request(.POST, "/p/_bulk_get", json: ["docs": [["id": "foo1"]]])
        #expect(bulkGet.json["results"]?[0]?["docs"]?[0]?["error"] == ["id": "foo1", "rev": .null, "error": "illegal_docid", "reason": "Doc id must be of form partition:id"])
        #expect(try await s.request(.GET, "/p/_partition").status == 400)
        #expect(try await s.request(.GET, "/p/_partition/foo/_all_docs?partition=bar").json["reason"] == "Conflicting value for `partition` in query string")
        _ = try await s.request(.PUT, "/_node/_local/_config/query_server_config/partition_query_limit", json: "5")
        #expect(try await s.request(.GET, "/p/_partition/foo/_all_docs?limit=6").json["reason"] == "Limit is too large, must not exceed 5")
        #expect(try await s.request(.GET, "/p/_partition/foo/_all_docs?limit=5").json["rows"]?.arrayValue?.count == 5)

        // http_test.exs, attachments_test.exs: Location names the proxy's host and the attachment.
        _ = try await s.request(.PUT, "/db")
        let proxied = try await s.request(.PUT, "/db/doc%0A", json: [:], headers: [("X-Forwarded-Host", "mysite.com"), ("X-Forwarded-Proto", "https")])
        #expect(proxied.headers["Location"] == ["https://mysite.com/db/doc%0A"], "\(proxied.headers)")
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/x_forwarded_host", json: "X-Host")
        #expect(try await s.request(.PUT, "/db/d2", json: [:], headers: [("X-Host", "mysite2.com")]).headers["Location"] == ["http://mysite2.com/db/d2"])
        let rev = proxied.json["rev"]!.stringValue!
        let attached = try await s.request(.PUT, "/db/doc%0A/a%20b.txt?rev=\(rev)", body: Array("hi".utf8), headers: [("Content-Type", "text/plain")])
        #expect(attached.headers["Location"].first?.hasSuffix("/db/doc%0A/a%20b.txt") == true, "\(attached.headers)")
        let removed = try await s.request(.DELETE, "/db/doc%0A/a%20b.txt?rev=\(attached.json["rev"]!.stringValue!)")
        #expect(removed.status == 200 && removed.headers["Location"].isEmpty)
        // basics_test.exs: every answer says how long its body took to read.
        #expect(try await s.request(.HEAD, "/db/d2?open_revs=all").headers["X-CouchDB-Body-Time"].first != nil)

        // replication_test.exs: the history accumulates, counters carry on, nothing new is
        // no_changes; since_seq starts where it says; doc_ids answers counts; cancel by id.
        _ = try await s.request(.PUT, "/src")
        for i in 0..<5 { _ = try await s.request(.PUT, "/src/d\(i)", json: ["i": .int(i)]) }
        let one = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "tgt", "create_target": true])
        _ = try await s.request(.PUT, "/src/d9", json: [:])
        let two = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "tgt"])
        #expect(one.json["history"]?.arrayValue?.count == 1 && two.json["history"]?.arrayValue?.count == 2, "\(two.text)")
        #expect(two.json["history"]?[0]?["docs_written"] == 6 && two.json["no_changes"] == nil)
        let three = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "tgt"])
        #expect(three.json["no_changes"] == true && three.json["history"]?.arrayValue?.count == 2, "\(three.text)")
        let changes = try await s.request(.GET, "/src/_changes").json["results"]?.arrayValue ?? []
        let since = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "fresh", "create_target": true, "since_seq": changes[3]["seq"]!])
        let fresh = try await s.request(.GET, "/fresh").json["doc_count"]
        #expect(since.json["history"]?[0]?["docs_written"] == 2 && fresh == 2, "\(since.text)")
        let byID = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "ids", "create_target": true, "doc_ids": ["d1", "d2"]])
        #expect(byID.json["docs_written"] == 2 && byID.json["start_time"]?.stringValue != nil, "\(byID.text)")
        let live = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "tgt", "continuous": true])
        let jobID = live.json["_local_id"]!
        #expect(try await s.request(.POST, "/_replicate", json: ["replication_id": jobID, "cancel": true]).status == 200)
        #expect(try await s.request(.POST, "/_replicate", json: ["replication_id": jobID, "cancel": true]).status == 404)
    }

    @Test("Found by CouchDB's own suite, part 3: form uploads (same-site only), strict attachments, revision checks, batch mode, COPY, design options, include_docs links, view parameter checks, paths")
    func foundByCouchDBSuitePartThree() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let created = try await s.request(.PUT, "/db/form", json: [:])
        let rev = created.json["rev"]!.stringValue!
        // attachments_test.exs, form_submit_test.exs: an HTML form's file upload, only from a
        // page of this host (the Referer), only as multipart/form-data.
        let form = Array("------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(rev)\r\n------TF\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"file.txt\"\r\nContent-Type: text/plain\r\n\r\ncontents of file.txt\r\n\r\n------TF--".utf8)
        let formType = ("Content-Type", "multipart/form-data; boundary=----TF")
        let crossSite = try await s.request(.POST, "/db/form", body: form, headers: [formType, ("Referer", "http://evil.example/page")])
        #expect(crossSite.status == 400 && crossSite.json["reason"] == "Referer header must match host.")
        #expect(try await s.request(.POST, "/db/form", body: form, headers: [formType]).json["reason"] == "Referer header required.")
        // Rights come first: a stranger learns nothing of the document (nor of the Referer rule).
        #expect(try await s.request(.POST, "/db/form", body: form, auth: .none, headers: [formType]).status == 401)
        let uploaded = try await s.request(.POST, "/db/form", body: form, headers: [formType, ("Referer", "http://127.0.0.1:\(s.port)/")])
        #expect(uploaded.status == 201, "\(uploaded.text)")
        #expect(try await s.request(.GET, "/db/form").json["_attachments"]?["file.txt"]?["length"] == 22)
        let urlencoded = try await s.request(.POST, "/db/form", body: Array("a=b".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Referer", "http://127.0.0.1:\(s.port)/")])
        #expect(urlencoded.status == 415 && urlencoded.json["reason"] == "Content-Type must be multipart/form-data")
        // attachments_test.exs: base64 that is not base64 is refused; a stub naming another revpos is missing.
        let badData: JSON = ["_attachments": ["foo.txt": ["content_type": "text/plain", "data": "notBase64Encoded="]]]
        #expect(try await s.request(.PUT, "/db/bad", json: badData).status == 400)
        let stubbed = try await s.request(.PUT, "/db/stub", json: ["_attachments": ["foo.txt": ["content_type": "text/plain", "data": "aGk="]]])
        let stubRev = stubbed.json["rev"]!
        let wrongPos = try await s.request(.PUT, "/db/stub", json: ["_rev": stubRev, "_attachments": ["foo.txt": ["stub": true, "revpos": 10]]])
        #expect(wrongPos.status == 412 && wrongPos.json["error"] == "missing_stub")
        #expect(try await s.request(.PUT, "/db/stub", json: ["_rev": stubRev, "_attachments": ["foo.txt": ["stub": true]]]).status == 201)
        // conflicts_test.exs, etags_head_test.exs: If-Match against the body's _rev; weak ETags match.
        let mismatch = try await s.request(.PUT, "/db/stub", json: ["_rev": "1-abc"], headers: [("If-Match", "\"2-def\"")])
        #expect(mismatch.status == 400 && mismatch.json["reason"] == "Document rev and etag have different values")
        let etag = try await s.request(.GET, "/db/form").headers["ETag"].first ?? ""
        #expect(try await s.request(.GET, "/db/form", headers: [("If-None-Match", "W/" + etag)]).status == 304)
        // batch_save_test.exs, bulk_docs_test.exs: batch mode drops a conflict silently (202);
        // a conflict row in _bulk_docs has no rev.
        #expect(try await s.request(.PUT, "/db/form?batch=ok", json: ["x": 1]).status == 202)
        let current = try await s.request(.GET, "/db/form").json
        let pair = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [
            ["_id": "form", "_rev": current["_rev"]!, "v": 2], ["_id": "form", "_rev": current["_rev"]!, "_deleted": true],
        ]])
        #expect(pair.json.arrayValue?.filter { $0["rev"] != nil }.count == 1 && pair.json.arrayValue?.filter { $0["error"] == "conflict" }.count == 1, "\(pair.text)")
        // copy_doc_test.exs: COPY stays on this server.
        let away = try await s.request(HTTPMethod(rawValue: "COPY"), "/db/stub", headers: [("Destination", "http://localhost:5984/db/x")])
        #expect(away.status == 400 && away.json["reason"] == "Destination URL must be relative.")

        // design_options_test.exs: include_design maps design documents too; local_seq gives _local_seq.
        _ = try await s.request(.PUT, "/db/_design/fu", json: ["options": ["include_design": true, "local_seq": true], "views": [
            "data": ["map": "function (doc) { if (doc._id.indexOf('_design/') === 0) { emit(null, doc._id); } }"],
            "with_seq": ["map": "function (doc) { emit(doc._local_seq, null); }"],
        ]])
        #expect(try await s.request(.GET, "/db/_design/fu/_view/data").json["rows"]?[0]?["value"] == "_design/fu")
        let seqs = try await s.request(.GET, "/db/_design/fu/_view/with_seq").json["rows"]?.arrayValue ?? []
        #expect(!seqs.isEmpty && seqs.allSatisfy { $0["key"]?.intValue != nil })
        // view_include_docs_test.exs: an emitted _rev picks the revision; conflicts=true adds _conflicts.
        let first = try await s.request(.PUT, "/db/linked", json: ["n": 1])
        let firstRev = first.json["rev"]!
        _ = try await s.request(.PUT, "/db/linked", json: ["_rev": firstRev, "n": 2, "prev": firstRev])
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["new_edits": false, "docs": [["_id": "linked", "_rev": "2-00000000000000000000000000000000", "n": 3]]])
        _ = try await s.request(.PUT, "/db/_design/links", json: ["views": ["prev": ["map": "function (doc) { if (doc.prev) { emit(doc._id, {_rev: doc.prev}); } }"],
                                                                          "same": ["map": "function (doc) { if (doc._id === 'linked') { emit(doc._id, null); } }"]]])
        let linked = try await s.request(.GET, "/db/_design/links/_view/prev?include_docs=true").json["rows"]?[0]?["doc"]
        #expect(linked?["_rev"] == firstRev && linked?["n"] == 1, "\(String(describing: linked))")
        let withConflicts = try await s.request(.GET, "/db/_design/links/_view/same?include_docs=true&conflicts=true").json["rows"]?[0]?["doc"]
        #expect(withConflicts?["_conflicts"]?.arrayValue?.count == 1, "\(String(describing: withConflicts))")
        // view_multi_key_design_test.exs, view_errors_test.exs: keys with a range is a query_parse_error;
        // a query body must be JSON.
        let both = try await s.request(.POST, "/db/_design/links/_view/same?startkey=0", json: ["keys": ["linked"]])
        #expect(both.status == 400 && both.json["reason"] == "`keys` is incompatible with `key`, `start_key` and `end_key`", "\(both.text)")
        #expect(try await s.request(.POST, "/db/_design/links/_view/same", json: ["keys": 1]).json["reason"] == "`keys` member must be an array.")
        #expect(try await s.request(.POST, "/db/_all_docs", body: Array("{}".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")]).status == 415)
        // design_paths_test.exs, invalid_docids_test.exs: _design%2F is the design document; a _local id is one segment.
        // (The client follows CouchDB's 301 to /db/_design/fu.)
        let redirected = try await s.request(.GET, "/db/_design%2Ffu")
        #expect(redirected.status == 200 && redirected.json["_id"] == "_design/fu", "\(redirected.status) \(redirected.text)")
        for path in ["/db/_local/a/b", "/db/_local%2F"] {
            #expect(try await s.request(.PUT, path, json: [:]).json["error"] == "bad_request", "\(path)")
        }
    }

    @Test("/_up as CouchDB 3.4.3 answers it in and out of maintenance mode (what load balancers and lt's own failover read)")
    func upInMaintenanceMode() async throws {
        let s = try TestServer()
        defer { s.stop() }
        // CouchDB 3.4.3, a node of a three-node cluster, with curl (2026-11-28): 200 {"status":"ok",
        // "seeds":{...}} (the seedlist's nodes; `{}` without one, chttpd_misc:handle_up_req);
        // `maintenance_mode` true: 404 {"status":"maintenance_mode"}; nolb: 404 {"status":"nolb"};
        // back to false: 200 again, at once; `GET /` answered 200 all along.
        let ok = try await s.request(.GET, "/_up")
        #expect(ok.status == 200 && ok.json == ["status": "ok", "seeds": [:]], "\(ok.text)")
        for (value, status) in [("true", "maintenance_mode"), ("nolb", "nolb")] {
            #expect(try await s.request(.PUT, "/_node/_local/_config/couchdb/maintenance_mode", json: .string(value)).status == 200)
            let up = try await s.request(.GET, "/_up")
            #expect(up.status == 404 && up.json == ["status": .string(status)], "\(value): \(up.status) \(up.text)")
            // Only the health check says so: requests are still answered.
            #expect(try await s.request(.GET, "/").status == 200)
        }
        #expect(try await s.request(.PUT, "/_node/_local/_config/couchdb/maintenance_mode", json: "false").status == 200)
        #expect(try await s.request(.GET, "/_up").status == 200)
    }
}

/// Member order of a document, as CouchDB 3.4.3 writes it (`couch_doc:to_json_obj`), checked
/// with curl against CouchDB 3.4.3 on the same three replicated revisions (session 36); the
/// contract suite's recorded fixture holds the order for `_changes` and `_bulk_get`.
@Suite("Answers as CouchDB 3.4.3 gives them: member order")
struct CouchDBMemberOrderTests {
    @Test("A document's members: the body, _deleted, _revisions, _revs_info, _conflicts, _deleted_conflicts, _local_seq, then _attachments")
    func memberOrder() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/order")
        let b = String(repeating: "b", count: 32), a = String(repeating: "a", count: 32)
        let written = try await s.request(.POST, "/order/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "d", "_rev": .string("2-" + b), "_revisions": ["start": 2, "ids": [.string(b), .string(a)]], "x": 1,
             "_attachments": ["a.txt": ["content_type": "text/plain", "revpos": 2, "data": "aGk="]]],
            ["_id": "d", "_rev": .string("1-" + String(repeating: "c", count: 32)), "y": 2],
            ["_id": "d", "_rev": .string("1-" + String(repeating: "d", count: 32)), "_deleted": true],
        ]])
        #expect(written.status == 201)
        let all = try await s.request(.GET, "/order/d?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&local_seq=true")
        // CouchDB 3.4.3 answered these keys, in this order.
        #expect(all.json.objectValue?.members.map(\.key)
            == ["_id", "_rev", "x", "_revisions", "_revs_info", "_conflicts", "_deleted_conflicts", "_local_seq", "_attachments"])
        let deleted = try await s.request(.GET, "/order/d?rev=1-\(String(repeating: "d", count: 32))&revs=true")
        #expect(deleted.json.objectValue?.members.map(\.key) == ["_id", "_rev", "_deleted", "_revisions"])
    }
}
