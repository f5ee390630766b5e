import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Shows, lists and rewrites against a real `lt serve`, as CouchDB 3 answers them (the
/// behaviours CouchDB's own Elixir suite checks in `show_documents`, `list_views`, `rewrite`
/// and `rewrite_js`), and what a rewrite must never do: serve one user another's data.
@Suite("Shows, lists and rewrites over HTTP", .serialized, .timeLimit(.minutes(3)))
struct RenderFunctionTests {
    /// A server with JavaScript, or nil where lt was built without it (never in CI).
    func javascriptServer(_ arguments: [String] = []) async throws -> TestServer? {
        try await TestServer.withJavaScript(extraArguments: arguments)
    }

    static let renderDoc: JSON = [
        "views": ["by_n": ["map": "function (doc) { if (doc.n !== undefined) { emit(doc.n, doc.word); } }"]],
        "shows": [
            "provides": """
                function (doc, req) {
                    registerType("foo", "application/foo", "application/x-foo");
                    provides("html", function () { return "said " + doc.word; });
                    provides("foo", function () { return "foofoo"; });
                }
                """,
            "fail": "function (doc, req) { return doc._id; }",
            "no-etag": "function (doc, req) { return {headers: {Etag: 'mine'}, body: 'something'}; }",
            "mix": "function (doc, req) { start({'X-Start': 'yes'}); send('Hey '); return {headers: {'X-Own': 'too'}, body: 'Dude'}; }",
        ],
        "lists": [
            "plain": "function (head, req) { send('['); var row, sep = ''; while ((row = getRow())) { send(sep + row.key); sep = ','; } return ']'; }",
            "html": """
                function (head, req) {
                    provides("html", function () {
                        send("<ul>");
                        var row;
                        while ((row = getRow())) { send("<li>" + row.value + "</li>"); }
                        return "</ul>";
                    });
                }
                """,
            "late": "function (head, req) { getRow(); start({code: 400, headers: {'X-Late': 'set'}}); send('bad request'); }",
            "all": "function (head, req) { start({headers: {'Content-Type': 'application/json'}}); var rows = [], row; while ((row = getRow())) { rows.push(row); } head.rows = rows; return toJSON(head); }",
        ],
    ]

    @Test("Shows and lists negotiate the content type, answer 304 while nothing changed, and take headers and chunks as CouchDB does")
    func showsAndLists() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/r")
        #expect(try await s.request(.PUT, "/r/_design/t", json: Self.renderDoc).status == 201)
        _ = try await s.request(.POST, "/r/_bulk_docs", json: ["docs": [["_id": "a", "n": 1, "word": "plankton"], ["_id": "b", "n": 2, "word": "krill"]]])

        // provides/registerType: chosen by Accept (CouchDB's mimeparse order) or ?format=.
        let html = try await s.request(.GET, "/r/_design/t/_show/provides/a", headers: [("Accept", "text/html,application/atom+xml; q=0.9")])
        #expect(html.text == "said plankton" && html.headers["Content-Type"] == ["text/html; charset=utf-8"])
        let foo = try await s.request(.GET, "/r/_design/t/_show/provides/a", headers: [("Accept", "application/x-foo")])
        #expect(foo.text == "foofoo" && foo.headers["Content-Type"] == ["application/x-foo"])
        #expect(try await s.request(.GET, "/r/_design/t/_show/provides/a?format=foo").headers["Content-Type"] == ["application/foo"])
        let monkeys = try await s.request(.GET, "/r/_design/t/_show/provides/a", headers: [("Accept", "text/monkeys")])
        #expect(monkeys.status == 406 && monkeys.json["error"] == "not_acceptable")

        // ETag: the function cannot set it; an unchanged show is 304; a changed document is not.
        let first = try await s.request(.GET, "/r/_design/t/_show/no-etag/a")
        let etag = first.headers["ETag"].first ?? ""
        #expect(first.text == "something" && !etag.isEmpty && etag != "mine" && first.headers["Vary"] == ["Accept"])
        #expect(try await s.request(.GET, "/r/_design/t/_show/no-etag/a", headers: [("If-None-Match", etag)]).status == 304)
        let rev = try await s.request(.GET, "/r/a").json["_rev"]!.stringValue!
        _ = try await s.request(.PUT, "/r/a?rev=\(rev)", json: ["n": 1, "word": "plankton", "edited": true])
        let changed = try await s.request(.GET, "/r/_design/t/_show/no-etag/a", headers: [("If-None-Match", etag)])
        #expect(changed.status == 200 && changed.headers["ETag"].first != etag)

        // A show failing on a missing document is that document's 404; without a document id, the function's error.
        let missing = try await s.request(.GET, "/r/_design/t/_show/fail/nothing")
        #expect(missing.status == 404 && missing.json["error"] == "not_found")
        let noID = try await s.request(.GET, "/r/_design/t/_show/fail")
        #expect(noID.status == 500 && noID.json["error"] == "render_error")
        #expect(try await s.request(.GET, "/r/_design/t/_show/").json["reason"] == "Invalid path.")
        let mix = try await s.request(.GET, "/r/_design/t/_show/mix/a")
        #expect(mix.text == "Hey Dude" && mix.headers["X-Start"] == ["yes"] && mix.headers["X-Own"] == ["too"])

        // Lists: JSON unless a start() names another type; provides; headers of a start() made
        // before any chunk was sent still count; `_all_docs` is a list's source too.
        let plain = try await s.request(.GET, "/r/_design/t/_list/plain/by_n")
        #expect(plain.text == "[1,2]" && plain.headers["Content-Type"] == ["application/json"])
        let list = try await s.request(.GET, "/r/_design/t/_list/html/by_n?descending=true", headers: [("Accept", "text/html")])
        #expect(list.text == "<ul><li>krill</li><li>plankton</li></ul>" && list.headers["Content-Type"] == ["text/html; charset=utf-8"])
        let late = try await s.request(.GET, "/r/_design/t/_list/late/by_n")
        #expect(late.status == 400 && late.text == "bad request" && late.headers["X-Late"] == ["set"])
        let viaList = try await s.request(.GET, "/r/_design/t/_list/all/_all_docs")
        let allDocs = try await s.request(.GET, "/r/_all_docs")
        #expect(viaList.json["rows"] == allDocs.json["rows"] && viaList.json["total_rows"] == allDocs.json["total_rows"])
        #expect(try await s.request(.OPTIONS, "/r/_design/t/_list/plain/by_n").text == "[1,2]")
    }

    static let rewriteDoc: JSON = [
        "_attachments": ["foo.txt": ["content_type": "text/plain", "data": "VGhpcyBpcyBhIGJhc2U2NCBlbmNvZGVkIHRleHQ="]],
        "rewrites": [
            ["from": "foo", "to": "foo.txt"],
            ["from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"],
            ["from": "welcome/:name", "to": "_show/welcome", "query": ["name": ":name"]],
            ["from": "range/:start/:end", "to": "_view/by_n", "query": ["startkey": ":start", "endkey": ":end"], "formats": ["start": "int", "end": "int"]],
            ["from": "db/*", "to": "../../*"],
            ["from": "loop", "to": "_rewrite/loop"],
        ],
        "shows": ["welcome": "function (doc, req) { return 'Welcome ' + req.query.name; }"],
        "updates": ["hello": "function (doc, req) { if (!doc) { return [null, 'none']; } doc.world = 'hello'; return [doc, 'hello doc']; }"],
        "views": ["by_n": ["map": "function (doc) { if (doc.n !== undefined) { emit(doc.n, null); } }"]],
    ]

    @Test("Rewrites: the declarative array and a JavaScript function serve another resource; loops stop at rewrite_limit; climbing out of the database needs secure_rewrites off")
    func rewrites() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/w")
        #expect(try await s.request(.PUT, "/w/_design/t", json: Self.rewriteDoc).status == 201)
        _ = try await s.request(.POST, "/w/_bulk_docs", json: ["docs": .array((1...9).map { ["_id": .string("d\($0)"), "n": .int($0)] })])

        let file = try await s.request(.GET, "/w/_design/t/_rewrite/foo")
        #expect(file.text == "This is a base64 encoded text" && file.headers["Content-Type"] == ["text/plain"])
        let hello = try await s.request(.PUT, "/w/_design/t/_rewrite/hello/d1")
        #expect(hello.status == 201 && hello.text == "hello doc")
        #expect(try await s.request(.GET, "/w/d1").json["world"] == "hello")
        #expect(try await s.request(.GET, "/w/_design/t/_rewrite/welcome/user").text == "Welcome user")
        let range = try await s.request(.GET, "/w/_design/t/_rewrite/range/3/5")
        #expect(range.json["rows"]?.arrayValue?.map { $0["key"] } == [3, 4, 5])
        let meta = try await s.request(.GET, "/w/_design/t/_rewrite/db/_design/t?meta=true")
        #expect(meta.json["_id"] == "_design/t" && meta.json["_revs_info"] != nil)
        #expect(try await s.request(.GET, "/w/_design/t/_rewrite/no/rule").status == 404)

        // Loops end at [chttpd] rewrite_limit (100 unless set).
        #expect(try await s.request(.GET, "/w/_design/t/_rewrite/loop").status == 400)
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/rewrite_limit", json: "2")
        let loop = try await s.request(.GET, "/w/_design/t/_rewrite/loop")
        #expect(loop.status == 400 && loop.json["reason"] == "Exceeded rewrite recursion limit")
        for _ in 0..<4 { #expect(try await s.request(.GET, "/w/_design/t/_rewrite/foo").status == 200) }  // serial requests are not a loop

        // A rule leaving the database: refused while secure_rewrites is on (the default).
        _ = try await s.request(.PUT, "/w/_design/out", json: ["rewrites": [["from": "uuids", "to": "../../../_uuids"]]])
        let insecure = try await s.request(.GET, "/w/_design/out/_rewrite/uuids")
        #expect(insecure.status == 500 && insecure.json["error"] == "insecure_rewrite_rule")
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/secure_rewrites", json: "false")
        #expect(try await s.request(.GET, "/w/_design/out/_rewrite/uuids").json["uuids"]?.arrayValue?.count == 1)

        // JavaScript: a string is a path; an object may change the method, query, headers and
        // body, or answer itself with a code.
        _ = try await s.request(.PUT, "/w/_design/js", json: ["rewrites": """
            function (req) {
                if (req.path[4] === 'foo') { return '../t/foo.txt'; }
                if (req.path[4] === 'changes') {
                    return {path: '../../_changes', method: 'POST', query: {filter: '_doc_ids'},
                            headers: {'Content-Type': 'application/json'}, body: JSON.stringify({doc_ids: ['d2']})};
                }
                if (req.path[4] === 'status') { return {code: Number(req.query.status), body: '{"ok":1}', headers: {'X-Foo': 'bar'}}; }
            }
            """])
        #expect(try await s.request(.GET, "/w/_design/js/_rewrite/foo").text == "This is a base64 encoded text")
        let changes = try await s.request(.GET, "/w/_design/js/_rewrite/changes")
        #expect(changes.json["results"]?.arrayValue?.map { $0["id"] } == ["d2"])
        let status = try await s.request(.GET, "/w/_design/js/_rewrite/status?status=451")
        #expect(status.status == 451 && status.headers["X-Foo"] == ["bar"] && status.text == #"{"ok":1}"#)
        let none = try await s.request(.GET, "/w/_design/js/_rewrite/other")
        #expect(none.status == 404 && none.json["error"] == "rewrite_error")
    }

    @Test("A rewrite serves its caller as themselves: a user's design document cannot read, change or delete another user's data, nor reach server administration")
    func rewritesKeepEachUserToTheirData() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        for name in ["alice", "bob"] {
            _ = try await s.request(.PUT, "/_users/org.couchdb.user:\(name)", json: [
                "name": .string(name), "type": "user", "roles": [], "password": .string("pw-\(name)"),
            ])
            _ = try await s.request(.PUT, "/\(name)db")
            _ = try await s.request(.PUT, "/\(name)db/_security", json: ["admins": ["names": [.string(name)]], "members": ["names": [.string(name)]]])
        }
        let alice = TestServer.Auth.basic("alice", "pw-alice"), bob = TestServer.Auth.basic("bob", "pw-bob")
        #expect(try await s.request(.PUT, "/alicedb/secret", json: ["lat": 37.5, "lon": -122.3], auth: alice).status == 201)
        // Bob administers his own database, so he may write its design documents. Rules may leave
        // the database once an admin turns secure_rewrites off; JavaScript rewrites always may.
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/secure_rewrites", json: "false")
        let bobRules = try await s.request(.PUT, "/bobdb/_design/steal", json: [
            "rewrites": [
                ["from": "read", "to": "../../../alicedb/secret"],
                ["from": "all", "to": "../../../alicedb/_all_docs"],
                ["from": "changes", "to": "../../../alicedb/_changes"],
                ["from": "wipe", "to": "../../../alicedb/secret", "method": "DELETE"],
            ],
        ], auth: bob)
        #expect(bobRules.status == 201)
        let bobFunction = try await s.request(.PUT, "/bobdb/_design/js", json: ["rewrites": """
            function (req) {
                var what = req.path[4];
                if (what === 'overwrite') { return {path: '../../../alicedb/secret', method: 'PUT', body: '{"owned": true}', headers: {'Content-Type': 'application/json'}}; }
                if (what === 'admin') { return {path: '../../../_node/_local/_config/admins/bob', method: 'PUT', body: '"x"'}; }
                if (what === 'security') { return {path: '../../../alicedb/_security', method: 'PUT', body: '{"members": {"names": ["bob"]}}', headers: {'Content-Type': 'application/json'}}; }
            }
            """], auth: bob)
        #expect(bobFunction.status == 201)
        for path in ["steal/_rewrite/read", "steal/_rewrite/all", "steal/_rewrite/changes", "js/_rewrite/overwrite", "js/_rewrite/security"] {
            let attempt = try await s.request(.GET, "/bobdb/_design/\(path)", auth: bob)
            #expect(attempt.status == 403 && !attempt.text.contains("37.5"), "\(path): \(attempt.status) \(attempt.text)")
        }
        let wipe = try await s.request(.DELETE, "/bobdb/_design/steal/_rewrite/wipe", auth: bob)
        #expect(wipe.status == 403, "\(wipe.text)")
        let admin = try await s.request(.GET, "/bobdb/_design/js/_rewrite/admin", auth: bob)
        #expect(admin.status == 401 || admin.status == 403, "\(admin.status) \(admin.text)")
        // Nothing changed: Alice's document, her security object, Bob's roles.
        let secret = try await s.request(.GET, "/alicedb/secret", auth: alice)
        #expect(secret.json["lat"] == 37.5 && secret.json["owned"] == nil && secret.json["_rev"]?.stringValue?.hasPrefix("1-") == true)
        #expect(try await s.request(.GET, "/alicedb/_security").json["members"]?["names"] == ["alice"])
        #expect(try await s.request(.GET, "/_session", auth: bob).json["userCtx"]?["roles"] == [])
        // Alice cannot use Bob's design document at all: she does not read his database.
        #expect(try await s.request(.GET, "/bobdb/_design/steal/_rewrite/read", auth: alice).status == 403)
    }

    @Test("Single-database mode: a rewrite into the shared database answers in the caller's namespace; the shared database's own design functions are closed to owners")
    func rewritesInSharedMode() async throws {
        guard let s = try await javascriptServer(["--mode", "single-db"]) else { return }
        defer { s.stop() }
        let shared = "lt_locations_all_envoy"
        func login(_ user: String) async throws -> TestServer.Auth {
            _ = try await s.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")])
            let json = try await s.app(.POST, "/api/login", json: ["username": .string(user), "password": .string("pw-\(user)")]).json
            return .basic(json["api_key"]!.stringValue!, json["api_password"]!.stringValue!)
        }
        let alice = try await login("alice"), bob = try await login("bob")
        #expect(try await s.request(.PUT, "/\(shared)/mine", json: ["owner": "alice"], auth: alice).status == 201)
        #expect(try await s.request(.PUT, "/\(shared)/bobs", json: ["owner": "bob"], auth: bob).status == 201)
        // An admin's public database with rewrites into the shared one.
        _ = try await s.request(.PUT, "/_node/_local/_config/chttpd/secure_rewrites", json: "false")
        _ = try await s.request(.PUT, "/pub")
        _ = try await s.request(.PUT, "/pub/_security", json: ["members": ["roles": ["lt_owner_alice", "lt_owner_bob"]]])
        _ = try await s.request(.PUT, "/pub/_design/r", json: ["rewrites": [
            ["from": "all", "to": .string("../../../\(shared)/_all_docs")],
            ["from": "doc/:id", "to": .string("../../../\(shared)/:id")],
        ]])
        let all = try await s.request(.GET, "/pub/_design/r/_rewrite/all", auth: alice)
        #expect(all.status == 200 && all.json["rows"]?.arrayValue?.map { $0["id"] } == ["mine"], "\(all.text)")
        #expect(try await s.request(.GET, "/pub/_design/r/_rewrite/doc/bobs", auth: alice).status == 404)
        #expect(try await s.request(.GET, "/pub/_design/r/_rewrite/doc/mine", auth: bob).status == 404)
        #expect(try await s.request(.GET, "/pub/_design/r/_rewrite/doc/mine", auth: alice).json["owner"] == "alice")
        // The shared database's design documents are not an owner's to call.
        _ = try await s.request(.PUT, "/\(shared)/_design/open", json: ["rewrites": [["from": "all", "to": "_all_docs"]]])
        #expect(try await s.request(.GET, "/\(shared)/_design/open/_rewrite/all", auth: alice).status == 403)
    }
}
