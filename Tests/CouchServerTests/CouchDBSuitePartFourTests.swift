import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// What CouchDB 3.4.3's own Elixir suite found last (issue 41), each as CouchDB answers it.
@Suite("Found by CouchDB's own suite, part 4")
struct CouchDBSuitePartFourTests {
    func user(_ name: String, password: String) -> JSON {
        ["_id": .string("org.couchdb.user:" + name), "name": .string(name), "type": "user", "roles": [], "password": .string(password)]
    }

    @Test("users_db_test.exs: [couch_httpd_auth] password_regexp judges new passwords, each rule with its reason; a value that is not a list of rules refuses every password")
    func passwordRules() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let rules = #"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#
        #expect(try await s.request(.PUT, "/_node/_local/_config/couch_httpd_auth/password_regexp", json: .string(rules)).status == 200)
        for (password, reason) in [
            ("funnybone", "Password does not conform to requirements."),
            ("funnnnnybone", "Password does not conform to requirements. Requirement 2."),
            ("FUNNNNNYBONE", "Password does not conform to requirements."),
            ("funnnnnyBONE", "Password does not conform to requirements. Req 4."),
            ("funnnnnyB0N3", "Password does not conform to requirements."),
        ] {
            // Server admins are held to the rules too, as in CouchDB.
            let refused = try await s.request(.PUT, "/_users/org.couchdb.user:jchris", json: user("jchris", password: password))
            #expect(refused.status == 400 && refused.json["error"] == "bad_request" && refused.json["reason"] == .string(reason), "\(password): \(refused.text)")
        }
        let accepted = try await s.request(.PUT, "/_users/org.couchdb.user:jchris", json: user("jchris", password: "funnnnnyB0N3!"))
        #expect(accepted.status == 201, "\(accepted.text)")
        #expect(try await s.request(.GET, "/_session", auth: .basic("jchris", "funnnnnyB0N3!")).json["userCtx"]?["name"] == "jchris")
        // A change that sets no password is not judged (the rules are for new passwords).
        var doc = try await s.request(.GET, "/_users/org.couchdb.user:jchris").json.objectValue ?? [:]
        doc["nickname"] = "jc"
        let edited = try await s.request(.PUT, "/_users/org.couchdb.user:jchris", json: .object(doc))
        #expect(edited.status == 201, "\(edited.text)")
        // `[chttpd_auth]` is read first, as CouchDB reads it.
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd_auth/password_regexp", json: #"[".{4,}"]"#)
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:ann", json: user("ann", password: "abcd")).status == 201)
        _ = try await s.request(.DELETE, "/_node/_local/_config/chttpd_auth/password_regexp")
        // Not a list, not Erlang, a rule that is no pattern: no password is taken.
        for broken in [#"{{".{10,}"}}"#, #"[{".{10,}"]"#, #"[{1, "x"}]"#, #"["(unclosed"]"#] {
            _ = try await s.request(.PUT, "/_node/_local/_config/couch_httpd_auth/password_regexp", json: .string(broken))
            let refused = try await s.request(.PUT, "/_users/org.couchdb.user:joe", json: user("joe", password: "Querty1234!"))
            #expect(refused.status == 403 && refused.json["reason"] == "Server cannot hash passwords at this time.", "\(broken): \(refused.text)")
        }
        // A pattern that backtracks for ever elsewhere is matched in linear time here.
        _ = try await s.request(.PUT, "/_node/_local/_config/couch_httpd_auth/password_regexp", json: #"["^(a+)+$"]"#)
        let long = String(repeating: "a", count: 50_000) + "!"
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:joe", json: user("joe", password: long)).status == 400)
    }

    @Test("view_errors_test.exs, reduce_builtin_test.exs: a reduce that does not shrink is reduce_overflow_error unless [query_server_config] reduce_limit is off; built-in reducers are named by their start")
    func reduceLimitAndBuiltinNames() async throws {
        guard let s = try await TestServer.withJavaScript() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let docs: [JSON] = (1...20).map { ["_id": .string(String(format: "d%02d", $0)), "integer": .int($0)] }
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": .array(docs)])
        let grows = "function (keys, values) { var chars = []; for (var i = 0; i < 1000; i++) { chars.push('wazzap'); } return chars; }"
        _ = try await s.request(.PUT, "/db/_design/big", json: ["views": ["big": ["map": "function (doc) { emit(doc.integer, doc.integer); }", "reduce": .string(grows)]]])
        let overflow = try await s.request(.GET, "/db/_design/big/_view/big")
        let row = overflow.json["rows"]?[0]
        #expect(overflow.status == 200 && row?["error"] == "reduce_overflow_error" && row?["key"] == .null, "\(overflow.text.prefix(300))")
        #expect(row?["reason"]?.stringValue?.hasPrefix("Reduce output must shrink more rapidly: input size: ") == true)
        // Grouped: every group's row says so.
        let grouped = try await s.request(.GET, "/db/_design/big/_view/big?group=true&limit=3").json["rows"]?.arrayValue ?? []
        #expect(grouped.count == 3 && grouped.allSatisfy { $0["error"] == "reduce_overflow_error" })
        for (setting, expectsArray) in [("false", true), ("log", true), ("true", false)] {
            #expect(try await s.request(.PUT, "/_node/_local/_config/query_server_config/reduce_limit", json: .string(setting)).status == 200)
            let value = try await s.request(.GET, "/db/_design/big/_view/big").json["rows"]?[0]?["value"]
            #expect((value?.arrayValue?.count == 1000) == expectsArray, "reduce_limit=\(setting)")
        }
        #expect(try await s.request(.PUT, "/_node/_local/_config/query_server_config/reduce_limit", json: "sometimes").status == 400)

        // Trailing characters after a built-in's name are CouchDB's "prefix test".
        let map = "function (doc) { emit(doc.integer, doc.integer); }"
        for trailing in ["\n", "orama", "\nare\nawesome", " "] {
            let ddoc: JSON = ["views": [
                "sum": ["map": .string(map), "reduce": .string("_sum" + trailing)],
                "count": ["map": .string(map), "reduce": .string("_count" + trailing)],
                "stats": ["map": .string(map), "reduce": .string("_stats" + trailing)],
            ]]
            let id = "_design/t\(trailing.unicodeScalars.map { String($0.value) }.joined(separator: "-"))"
            #expect(try await s.request(.PUT, "/db/" + id, json: ddoc).status == 201)
            #expect(try await s.request(.GET, "/db/\(id)/_view/sum").json["rows"]?[0]?["value"] == 210)
            #expect(try await s.request(.GET, "/db/\(id)/_view/count").json["rows"]?[0]?["value"] == 20)
            #expect(try await s.request(.GET, "/db/\(id)/_view/stats").json["rows"]?[0]?["value"]?["max"] == 20)
        }
        let unknown = try await s.request(.PUT, "/db/_design/bad", json: ["views": ["v": ["map": .string(map), "reduce": "_median"]]])
        #expect(unknown.status == 400 && unknown.json["reason"] == "`_median` is not a supported reduce function.")
    }

    @Test("rev_stemming_test.exs, changes_test.exs, attachment_views_test.exs, changes_async_test.exs, attachments_multipart_test.exs: revisions shown within _revs_limit, attachment options in _changes and views, feed=live, open_revs answered as multipart unless Accept rules it out")
    func readOptions() async throws {
        guard let s = try await TestServer.withJavaScript() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        var rev = try await s.request(.PUT, "/db/bar", json: ["n": 0]).json["rev"]!
        for n in 1..<8 { rev = try await s.request(.PUT, "/db/bar", json: ["_rev": rev, "n": .int(n)]).json["rev"]! }
        #expect(try await s.request(.GET, "/db/bar?revs=true").json["_revisions"]?["ids"]?.arrayValue?.count == 8)
        _ = try await s.request(.PUT, "/db/_revs_limit", body: Array("5".utf8), headers: [("Content-Type", "application/json")])
        // A history kept from before the lower limit is shown within it, before compaction and after.
        #expect(try await s.request(.GET, "/db/bar?revs=true").json["_revisions"]?["ids"]?.arrayValue?.count == 5)
        let leaves = try await s.request(.GET, "/db/bar?revs=true&open_revs=all", headers: [("Accept", "application/json")])
        #expect(leaves.json[0]?["ok"]?["_revisions"]?["ids"]?.arrayValue?.count == 5, "\(leaves.text)")

        // Attachments in _changes and in views: stubs, inline bodies, or their encoding.
        let text = Data("This is a base64 encoded text".utf8).base64EncodedString()
        _ = try await s.request(.PUT, "/db/att", json: ["k": 1, "_attachments": ["foo.txt": ["content_type": "text/plain", "data": .string(text)]]])
        _ = try await s.request(.PUT, "/db/_design/v", json: ["views": ["k": ["map": "function (doc) { if (doc.k) emit(doc.k, null); }"]]])
        for (query, expectData, expectEncoding) in [("", false, false), ("&attachments=true", true, false), ("&att_encoding_info=true", false, true)] {
            let change = try await s.request(.GET, "/db/_changes?include_docs=true&filter=_doc_ids&doc_ids=%5B%22att%22%5D" + query)
            let fromView = try await s.request(.GET, "/db/_design/v/_view/k?include_docs=true" + query)
            let fromAllDocs = try await s.request(.GET, "/db/_all_docs?include_docs=true&key=%22att%22" + query)
            for (name, attachment) in [
                ("_changes", change.json["results"]?[0]?["doc"]?["_attachments"]?["foo.txt"]),
                ("view", fromView.json["rows"]?[0]?["doc"]?["_attachments"]?["foo.txt"]),
                ("_all_docs", fromAllDocs.json["rows"]?[0]?["doc"]?["_attachments"]?["foo.txt"]),
            ] {
                #expect((attachment?["data"] == .string(text)) == expectData, "\(name)\(query): \(String(describing: attachment))")
                #expect((attachment?["stub"] == true) == !expectData, "\(name)\(query): \(String(describing: attachment))")
                #expect((attachment?["encoding"] == "gzip" && attachment?["encoded_length"]?.intValue != nil) == expectEncoding, "\(name)\(query)")
            }
        }

        // feed=live is CouchDB's other name for continuous.
        let live = try await s.request(.GET, "/db/_changes?feed=live&timeout=100")
        let lines = live.text.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
        #expect(live.status == 200 && lines.count == 4 && lines.last?["last_seq"] != nil, "\(live.text)")

        // open_revs: multipart unless the client's Accept leaves multipart/mixed out.
        for (accept, multipart) in [
            (nil, true), ("*/*", true), ("multipart/related,*/*;", true), ("application/json, multipart/mixed;q=0.5", true),
            ("application/json", false), ("text/html", false), ("multipart/*;q=0, */*", false), ("*/*, multipart/mixed;q=0", false),
        ] as [(String?, Bool)] {
            let reply = try await s.request(.GET, "/db/att?open_revs=all", headers: accept.map { [("Accept", $0)] } ?? [])
            let type = reply.headers["Content-Type"].first ?? ""
            #expect(type.hasPrefix("multipart/mixed; boundary=") == multipart, "Accept \(accept ?? "none"): \(type)")
            if !multipart { #expect(reply.json[0]?["ok"]?["_id"] == "att") }
        }
    }

    @Test("compact_test.exs, view_compaction_test.exs, partition_size_test.exs: sizes tell live data from the file, partitions add up to their database, compaction shrinks the file and a design document's views")
    func sizes() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db?partitioned=true")
        func info(_ path: String) async throws -> (file: Int, external: Int, active: Int) {
            let sizes = try await s.request(.GET, path).json["sizes"]
            return (sizes?["file"]?.intValue ?? -1, sizes?["external"]?.intValue ?? -1, sizes?["active"]?.intValue ?? -1)
        }
        let empty = try await info("/db")
        #expect(empty.external == 0 && empty.active == 0 && empty.file > 0)
        var revs: [String: JSON] = [:]
        let docs: [JSON] = (0..<200).map { ["_id": .string("p\($0 % 4):doc-\($0)"), "text": .string(String(repeating: "z", count: 500))] }
        for row in try await s.request(.POST, "/db/_bulk_docs", json: ["docs": .array(docs)]).json.arrayValue ?? [] {
            revs[row["id"]!.stringValue!] = row["rev"]
        }
        let attached = Data(String(repeating: "This is a text document to save", count: 30).utf8).base64EncodedString()
        _ = try await s.request(.PUT, "/db/foo:with-attachment", json: ["_attachments": ["foo.txt": ["content_type": "text/plain", "data": .string(attached)]]])
        let full = try await info("/db")
        #expect(full.active > 100_000 && full.active < full.file && full.external >= full.active, "\(full)")
        var partitions = 0
        for partition in ["p0", "p1", "p2", "p3", "foo"] { partitions += try await info("/db/_partition/\(partition)").external }
        #expect(partitions == full.external, "partitions \(partitions), database \(full.external)")
        // Deleting shrinks the live data at once; compaction then gives back the file.
        let deletions: [JSON] = revs.map { ["_id": .string($0.key), "_rev": $0.value, "_deleted": true] }
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": .array(deletions)])
        let deleted = try await info("/db")
        #expect(deleted.external < full.external / 10 && deleted.active < deleted.file, "\(deleted)")
        #expect(try await s.request(.POST, "/db/_compact", json: [:]).status == 202)
        #expect(try await eventually(30) { try await s.request(.GET, "/db").json["compact_running"] == false })
        let compacted = try await info("/db")
        #expect(compacted.file < deleted.file && compacted.active < compacted.file && compacted.external == deleted.external, "\(deleted) → \(compacted)")

        // A design document's views: their data within their pages; compacting them repacks the file.
        _ = try await s.request(.PUT, "/views")
        _ = try await s.request(.PUT, "/views/_design/foo", json: ["views": ["all": ["map": "function (doc) { emit(doc.n, doc.text); }"]]])
        let missing = try await s.request(.POST, "/views/_compact/nothing", json: [:])
        #expect(missing.status == 404)
        var viewRevs: [String: JSON] = [:]
        for round in 0..<3 {
            let docs: [JSON] = (0..<300).map { i in
                var doc: JSONObject = ["_id": .string("d\(i)"), "n": .int(i * 7 % 300), "text": .string(String(repeating: "v", count: 100 + round * 40))]
                if let rev = viewRevs["d\(i)"] { doc["_rev"] = rev }
                return .object(doc)
            }
            for row in try await s.request(.POST, "/views/_bulk_docs", json: ["docs": .array(docs)]).json.arrayValue ?? [] {
                viewRevs[row["id"]!.stringValue!] = row["rev"]
            }
        }
        // The index is there only if views are built (JavaScript); the sizes' rule holds either way.
        _ = try await s.request(.GET, "/views/_design/foo/_view/all?limit=1")
        let before = try await s.request(.GET, "/views/_design/foo/_info").json["view_index"]?["sizes"]
        #expect(try await s.request(.POST, "/views/_compact/foo", json: [:]).status == 202)
        #expect(try await eventually(30) { try await s.request(.GET, "/views/_design/foo/_info").json["view_index"]?["compact_running"] == false })
        let after = try await s.request(.GET, "/views/_design/foo/_info").json["view_index"]?["sizes"]
        let (fileBefore, fileAfter) = (before?["file"]?.intValue ?? 0, after?["file"]?.intValue ?? 0)
        if fileBefore > 0 {
            #expect((before?["active"]?.intValue ?? 0) < fileBefore && (after?["active"]?.intValue ?? 0) < fileAfter && fileAfter <= fileBefore, "\(String(describing: before)) → \(String(describing: after))")
        }
        // Every revision is kept by a view compaction (the database's compaction drops old ones).
        #expect(try await s.request(.GET, "/views/d1?revs_info=true").json["_revs_info"]?.arrayValue?.filter { $0["status"] == "available" }.count == 3)
    }
}
