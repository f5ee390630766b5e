import AsyncHTTPClient
import CouchJSON
import Foundation
import GRDB
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// Design documents against a real `lt serve`: validation on every write path, JavaScript
/// reduce with rereduce, CommonJS modules, filters for `_changes` and replication, `_info`,
/// `_view_cleanup`, shows, lists and update handlers.
@Suite("Design documents over HTTP", .serialized, .timeLimit(.minutes(3)))
struct DesignDocumentTests {
    /// A server, or nil where lt was built without JavaScript (never in CI).
    func javascriptServer(_ directory: URL? = nil) async throws -> TestServer? {
        try await TestServer.withJavaScript(dataDirectory: directory)
    }

    static let guardDoc: JSON = [
        "validate_doc_update": """
            function (newDoc, oldDoc, userCtx, secObj) {
                if (newDoc._deleted) { if (oldDoc && oldDoc.keep) { throw({forbidden: "kept documents cannot be deleted"}); } return; }
                if (typeof newDoc.km !== "number" || newDoc.km < 0) { throw({forbidden: "km must be a number >= 0"}); }
                if (newDoc.owner && newDoc.owner !== userCtx.name) { throw({unauthorized: "owner must be " + userCtx.name}); }
                if (oldDoc && oldDoc.locked) { throw({forbidden: "locked since " + oldDoc._rev}); }
                if (newDoc.crash) { null.crash(); }
                if (secObj.members.roles.indexOf("_admin") < 0) { throw({forbidden: "unexpected security object"}); }
            }
            """,
    ]

    @Test("validate_doc_update guards PUT, POST, _bulk_docs (also new_edits=false), attachments, deletes and replication; rejected writes change nothing")
    func validationOnEveryWritePath() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/v")
        #expect(try await s.request(.PUT, "/v/_design/guard", json: Self.guardDoc).status == 201)

        // PUT and POST: forbidden → 403, unauthorized → 401, any other exception → 500.
        #expect(try await s.request(.PUT, "/v/ok", json: ["km": 3, "owner": "admin"]).status == 201)
        let negative = try await s.request(.PUT, "/v/neg", json: ["km": -1])
        #expect(negative.status == 403 && negative.json == ["error": "forbidden", "reason": "km must be a number >= 0"])
        let owner = try await s.request(.POST, "/v", json: ["_id": "someone", "km": 1, "owner": "bob"])
        #expect(owner.status == 401 && owner.json == ["error": "unauthorized", "reason": "owner must be admin"])
        let crash = try await s.request(.PUT, "/v/crash", json: ["km": 1, "crash": true])
        #expect(crash.status == 500 && crash.json["reason"]?.stringValue?.contains("validate_doc_update in _design/guard") == true)
        // oldDoc is the revision being replaced.
        let locked = try await s.request(.PUT, "/v/locked", json: ["km": 1, "locked": true])
        let lockedRev = locked.json["rev"]!.stringValue!
        let edit = try await s.request(.PUT, "/v/locked", json: ["_rev": .string(lockedRev), "km": 2])
        #expect(edit.status == 403 && edit.json["reason"] == .string("locked since \(lockedRev)"))

        // _bulk_docs: each document on its own, also replicated revisions (new_edits=false).
        let bulk = try await s.request(.POST, "/v/_bulk_docs", json: ["docs": [["_id": "b1", "km": 1], ["_id": "b2", "km": -5]]])
        #expect(bulk.json[0]?["ok"] == true && bulk.json[1]?["error"] == "forbidden")
        let replicated = try await s.request(.POST, "/v/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "r1", "_rev": "1-abc", "km": 4], ["_id": "r2", "_rev": "1-def", "km": -4],
        ]])
        #expect(replicated.status == 201 && replicated.json.arrayValue?.count == 1)
        #expect(replicated.json[0]?["id"] == "r2" && replicated.json[0]?["error"] == "forbidden" && replicated.json[0]?["rev"] == "1-def")

        // Attachments: the document with its new attachment is validated too.
        let keep = try await s.request(.PUT, "/v/att", json: ["km": 1, "locked": true, "keep": true])
        let attachment = try await s.request(
            .PUT, "/v/att/note.txt?rev=\(keep.json["rev"]!.stringValue!)", body: Array("hello".utf8), headers: [("Content-Type", "text/plain")])
        #expect(attachment.status == 403)
        // Deletes: the validator sees {_deleted: true} and the old document.
        let delete = try await s.request(.DELETE, "/v/att?rev=\(keep.json["rev"]!.stringValue!)")
        #expect(delete.status == 403 && delete.json["reason"] == "kept documents cannot be deleted")

        // Nothing rejected was written.
        for id in ["neg", "someone", "crash", "b2", "r2"] {
            #expect(try await s.request(.GET, "/v/\(id)").status == 404, "\(id) was written")
        }
        #expect(try await s.request(.GET, "/v/locked").json["km"] == 1)
        #expect(try await s.request(.GET, "/v/att").json["_attachments"] == nil)
        #expect(try await s.request(.GET, "/v").json["doc_count"] == 6)  // guard, ok, locked, b1, r1, att

        // Replication into the guarded database: local and over HTTP, rejected documents are
        // counted as write failures and not stored.
        _ = try await s.request(.PUT, "/src")
        _ = try await s.request(.POST, "/src/_bulk_docs", json: ["docs": [["_id": "good", "km": 5], ["_id": "bad", "km": -5]]])
        let local = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": "v"])
        #expect(local.json["history"]?[0]?["docs_written"] == 1 && local.json["history"]?[0]?["doc_write_failures"] == 1)
        _ = try await s.request(.PUT, "/v2")
        _ = try await s.request(.PUT, "/v2/_design/guard", json: Self.guardDoc)
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let remote = try await s.request(.POST, "/_replicate", json: ["source": "src", "target": .string("\(url)/v2")])
        #expect(remote.json["history"]?[0]?["docs_written"] == 1 && remote.json["history"]?[0]?["doc_write_failures"] == 1)
        for db in ["v", "v2"] {
            #expect(try await s.request(.GET, "/\(db)/good").status == 200)
            #expect(try await s.request(.GET, "/\(db)/bad").status == 404)
        }
        // Design documents are written by admins and are not subject to validate_doc_update.
        #expect(try await s.request(.PUT, "/v/_design/other", json: ["km": -1]).status == 201)
        // Removing the validator lifts the rule at once.
        let guardRev = try await s.request(.GET, "/v/_design/guard").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/v/_design/guard?rev=\(guardRev)")
        #expect(try await s.request(.PUT, "/v/neg", json: ["km": -1]).status == 201)
    }

    @Test("JavaScript reduce with rereduce and group_level; CommonJS modules in views.lib; st_index; _info and _view_cleanup")
    func reduceModulesAndIndexes() async throws {
        let directory = try TemporaryDirectory("lt-ddoc")
        defer { directory.cleanup() }
        guard let s = try await javascriptServer(directory.url) else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/r")
        var docs: [JSON] = []
        for i in 0..<1200 {
            docs.append(["_id": .string(String(format: "d%04d", i)), "user": .string(["ann", "bob", "cy"][i % 3]), "day": .int(i % 7), "km": 2])
        }
        docs.append(["_id": "place", "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]]])
        _ = try await s.request(.POST, "/r/_bulk_docs", json: ["docs": .array(docs)])
        // A reduce that reports whether it was combined by rereduce: 1200 rows are reduced in
        // chunks, so the top value must come from rereduce (depth 1) and still count right.
        let reduce = """
            function (keys, values, rereduce) {
                if (rereduce) {
                    var n = 0, depth = 0;
                    for (var i = 0; i < values.length; i++) { n += values[i].n; depth = Math.max(depth, values[i].depth + 1); }
                    return {n: n, depth: depth};
                }
                return {n: values.length, depth: 0};
            }
            """
        let created = try await s.request(.PUT, "/r/_design/trips", json: [
            "views": [
                "lib": ["units": "exports.metres = function (km) { return km * 1000; };"],
                "by_user_day": ["map": "function (doc) { if (doc.user) { emit([doc.user, doc.day], doc.km); } }", "reduce": .string(reduce)],
                "metres": ["map": "function (doc) { var u = require('views/lib/units'); if (doc.km) { emit(doc._id, u.metres(doc.km)); } }", "reduce": "_sum"],
                "geo": ["map": "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); } }"],
            ],
        ])
        #expect(created.status == 201)
        let total = try await s.request(.GET, "/r/_design/trips/_view/by_user_day")
        #expect(total.json["rows"] == [["key": .null, "value": ["n": 1200, "depth": 1]]], "\(total.text)")
        let byUser = try await s.request(.GET, "/r/_design/trips/_view/by_user_day?group_level=1")
        #expect(byUser.json["rows"]?.arrayValue?.map { $0["value"]?["n"] } == [400, 400, 400])
        #expect(byUser.json["rows"]?.arrayValue?.map { $0["key"] } == [["ann"], ["bob"], ["cy"]])
        let grouped = try await s.request(.GET, "/r/_design/trips/_view/by_user_day?group=true&limit=2")
        #expect(grouped.json["rows"] == [["key": ["ann", 0], "value": ["n": 58, "depth": 0]], ["key": ["ann", 1], "value": ["n": 57, "depth": 0]]])
        #expect(try await s.request(.GET, "/r/_design/trips/_view/metres").json["rows"]?[0]?["value"] == 2_400_000)
        let geo = try await s.request(.GET, "/r/_design/trips/_view/geo")
        #expect(geo.json["rows"] == [["id": "place", "key": ["type": "Point", "coordinates": [-122.3, 37.5]], "value": .null]])
        // Errors CouchDB gives: several keys on a reduce view need group (one key is `key`,
        // as CouchDB 3.4.3 reads it); an unknown builtin is refused when the design document is written.
        #expect(try await s.request(.POST, "/r/_design/trips/_view/by_user_day", json: ["keys": [["ann", 1], ["bob", 1]]]).status == 400)
        #expect(try await s.request(.POST, "/r/_design/trips/_view/by_user_day", json: ["keys": [["ann", 1]]]).status == 200)
        let odd = try await s.request(.PUT, "/r/_design/odd", json: ["views": ["v": ["map": "function (doc) { emit(1, 1); }", "reduce": "_median"]]])
        #expect(odd.status == 400 && odd.json["reason"] == "`_median` is not a supported reduce function.")

        // _info reports the index; _view_cleanup drops indexes of views that changed.
        let info = try await s.request(.GET, "/r/_design/trips/_info")
        #expect(info.json["name"] == "trips" && info.json["view_index"]?["update_seq"] == 1202)
        #expect((info.json["view_index"]?["sizes"]?["active"]?.intValue ?? 0) > 0)
        #expect(try await s.request(.GET, "/r/_design/missing/_info").status == 404)
        func viewTables() throws -> Int {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: directory.url.appendingPathComponent("dbs/r.sqlite").path, configuration: configuration)
            return try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM view_indexes") ?? 0 }
        }
        #expect(try viewTables() == 3)  // by_user_day, metres, geo (odd/v failed before building)
        var trips = try await s.request(.GET, "/r/_design/trips").json.objectValue!
        trips["views"] = ["geo": ["map": "function (doc) { if (doc.geometry) { st_index(doc.geometry); } }"]]
        _ = try await s.request(.PUT, "/r/_design/trips", json: .object(trips))
        #expect(try await s.request(.POST, "/r/_view_cleanup", json: [:]).status == 202)
        #expect(try viewTables() == 0)  // the new geo view is not built yet
        #expect(try await s.request(.GET, "/r/_design/trips/_view/geo").json["total_rows"] == 1)
        #expect(try viewTables() == 1)
    }

    @Test("Filter functions and the _view filter select _changes rows and filtered replication; design functions compile once per revision")
    func filters() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/f")
        _ = try await s.request(.PUT, "/f/_design/app", json: [
            "lib": ["limits": "exports.at_least = function (doc, min) { return doc.km >= min; };"],
            "filters": [
                "long": "function (doc, req) { return require('lib/limits').at_least(doc, Number(req.query.min || 10)); }",
                "user": "function (doc, req) { return doc.user === req.query.user; }",
            ],
            "views": ["deleted_or_ann": ["map": "function (doc) { if (doc._deleted || doc.user === 'ann') { emit(doc._id, null); } }"]],
            // Each compilation makes a closure with an id of its own: the same id again is the
            // same compiled function (globals do not outlive a command, so no counter can).
            "shows": ["compiles": """
                (function () {
                    var compilation = Math.random().toString(36).slice(2);
                    return function (doc, req) { return compilation; };
                })()
                """],
        ])
        var docs: [JSON] = []
        for i in 0..<30 { docs.append(["_id": .string("t\(i)"), "user": .string(i % 2 == 0 ? "ann" : "bob"), "km": .int(i)]) }
        _ = try await s.request(.POST, "/f/_bulk_docs", json: ["docs": .array(docs)])
        let rev = try await s.request(.GET, "/f/t1").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/f/t1?rev=\(rev)")

        let long = try await s.request(.GET, "/f/_changes?filter=app/long&min=25")
        #expect(long.json["results"]?.arrayValue?.map { $0["id"] } == ["t25", "t26", "t27", "t28", "t29"])
        let limited = try await s.request(.GET, "/f/_changes?filter=app/long&min=25&limit=2")
        #expect(limited.json["results"]?.arrayValue?.map { $0["id"] } == ["t25", "t26"])
        let next = try await s.request(.GET, "/f/_changes?filter=app/long&min=25&since=\(limited.json["last_seq"]!.stringValue!)")
        #expect(next.json["results"]?.arrayValue?.map { $0["id"] } == ["t27", "t28", "t29"])
        let byView = try await s.request(.GET, "/f/_changes?filter=_view&view=app/deleted_or_ann&include_docs=true")
        let viewIDs = byView.json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(viewIDs.count == 16 && viewIDs.contains("t1") && !viewIDs.contains("t3"))
        #expect(byView.json["results"]?[0]?["doc"]?["user"] == "ann")
        #expect(try await s.request(.GET, "/f/_changes?filter=app/nope").status == 404)
        #expect(try await s.request(.GET, "/f/_changes?filter=nodesign").status == 400)

        // Filtered replication, local and over HTTP, with query_params.
        let local = try await s.request(.POST, "/_replicate", json: [
            "source": "f", "target": "f_bob", "create_target": true, "filter": "app/user", "query_params": ["user": "bob"],
        ])
        #expect(local.json["ok"] == true, "\(local.text)")
        #expect(try await s.request(.GET, "/f_bob").json["doc_count"] == 14)  // t3, t5, ... t29 (t1 deleted)
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let remote = try await s.request(.POST, "/_replicate", json: [
            "source": .string("\(url)/f"), "target": "f_long", "create_target": true, "filter": "app/long", "query_params": ["min": "28"],
        ])
        #expect(remote.json["ok"] == true, "\(remote.text)")
        #expect(try await s.request(.GET, "/f_long/_all_docs").json["rows"]?.arrayValue?.map { $0["id"] } == ["t28", "t29"])
        let byViewReplication = try await s.request(.POST, "/_replicate", json: [
            "source": "f", "target": "f_ann", "create_target": true, "filter": "_view", "query_params": ["view": "app/deleted_or_ann"],
        ])
        #expect(byViewReplication.json["history"]?[0]?["docs_written"] == 16, "\(byViewReplication.text)")  // 15 of ann's, t1's deletion
        #expect(try await s.request(.GET, "/f_ann").json["doc_count"] == 15)
        let missing = try await s.request(.POST, "/_replicate", json: ["source": "f", "target": "f_x", "create_target": true, "filter": "app/none"])
        #expect(missing.status >= 400)

        // A function compiles once per design document revision and query server process (two).
        var counts: Set<String> = []
        for _ in 0..<6 { counts.insert(try await s.request(.GET, "/f/_design/app/_show/compiles").text) }
        #expect((1...2).contains(counts.count), "\(counts)")
        var app = try await s.request(.GET, "/f/_design/app").json.objectValue!
        app["touched"] = true
        _ = try await s.request(.PUT, "/f/_design/app", json: .object(app))
        var after: Set<String> = []
        for _ in 0..<6 { after.insert(try await s.request(.GET, "/f/_design/app/_show/compiles").text) }
        #expect((1...2).contains(after.count) && after.isDisjoint(with: counts), "\(after) \(counts)")
    }

    @Test("Shows, lists and update handlers; an update handler's write is validated")
    func showsListsUpdates() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/h")
        _ = try await s.request(.PUT, "/h/_design/ui", json: [
            "validate_doc_update": "function (newDoc) { if (newDoc.km < 0) { throw({forbidden: 'negative'}); } }",
            "views": ["by_km": ["map": "function (doc) { if (doc.km !== undefined) { emit(doc.km, doc.name); } }"]],
            "shows": ["card": "function (doc, req) { return {json: {id: doc && doc._id, q: req.query.q, user: req.userCtx.name}, headers: {'X-Card': 'yes'}}; }"],
            "lists": ["csv": """
                function (head, req) {
                    start({headers: {'Content-Type': 'text/csv'}});
                    send('total=' + head.total_rows + '\\n');
                    var row;
                    while ((row = getRow())) { send(row.key + ',' + row.value + '\\n'); }
                    return 'end';
                }
                """],
            "updates": ["bump": """
                function (doc, req) {
                    if (!doc) { return [{_id: req.id || req.uuid, km: Number(req.query.km || 0)}, 'created']; }
                    doc.km += Number(req.form.by || req.query.by || 1);
                    return [doc, {code: 202, body: 'bumped to ' + doc.km}];
                }
                """],
        ])
        _ = try await s.request(.POST, "/h/_bulk_docs", json: ["docs": [["_id": "a", "km": 3, "name": "ann"], ["_id": "b", "km": 1, "name": "bob"]]])
        let card = try await s.request(.GET, "/h/_design/ui/_show/card/a?q=x")
        #expect(card.json == ["id": "a", "q": "x", "user": "admin"] && card.headers["X-Card"] == ["yes"])
        let list = try await s.request(.GET, "/h/_design/ui/_list/csv/by_km?descending=true")
        #expect(list.text == "total=2\n3,ann\n1,bob\nend" && list.headers["Content-Type"] == ["text/csv"])
        let created = try await s.request(.POST, "/h/_design/ui/_update/bump/c?km=5")
        #expect(created.status == 201 && created.text == "created" && created.headers["X-Couch-Update-NewRev"].first?.hasPrefix("1-") == true)
        let bumped = try await s.request(
            .PUT, "/h/_design/ui/_update/bump/c", body: Array("by=4".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(bumped.status == 202 && bumped.text == "bumped to 9")
        #expect(try await s.request(.GET, "/h/c").json["km"] == 9)
        let rejected = try await s.request(.POST, "/h/_design/ui/_update/bump/c?by=-20")
        #expect(rejected.status == 403 && rejected.json["reason"] == "negative")
        #expect(try await s.request(.GET, "/h/c").json["km"] == 9)
        #expect(try await s.request(.GET, "/h/_design/ui/_show/nope").status == 404)
    }

    @Test("One database's design functions cannot reach another's: the query server's state is private, its API and the built-ins read-only, globals do not outlive a command, no code is made at run time")
    func designFunctionsAreIsolated() async throws {
        guard let s = try await javascriptServer() else { return }
        defer { s.stop() }
        _ = try await s.request(.PUT, "/a")
        _ = try await s.request(.PUT, "/b")
        #expect(try await s.request(.PUT, "/a/_design/guard", json: ["validate_doc_update": "function (n) { if (!n.ok) { throw({forbidden: 'needs ok'}); } }"]).status == 201)
        _ = try await s.request(.PUT, "/a/_design/views", json: ["views": ["v": ["map": "function (doc) { emit(doc._id, 1); }"]]])
        _ = try await s.request(.PUT, "/a/one", json: ["ok": true])
        // b's admin writes functions that try to switch off a's validation (the query server's
        // cached design documents, as they were reachable before), to replace `emit` or a
        // built-in for everyone, to leave a global behind and to make code at run time.
        _ = try await s.request(.PUT, "/b/_design/evil", json: [
            "views": [
                "tamper": ["map": """
                    function (doc) {
                        for (var k in __lt.ddocs) { __lt.ddocs[k].funs["validate_doc_update"] = function () {}; }
                        emit(doc._id, 1);
                    }
                    """],
                "hijack": ["map": "function (doc) { emit = function () {}; JSON.stringify = function () { return '0'; }; Array.prototype.push = null; emit(doc._id, 2); }"],
                "leak": ["map": "function (doc) { leaked = doc._id; emit(doc._id, 3); }"],
                "escape": ["map": "function (doc) { var global = emit.constructor('return this')(); emit(doc._id, typeof global); }"],
            ],
        ])
        _ = try await s.request(.PUT, "/b/d", json: [:])
        for view in ["tamper", "hijack", "leak", "escape"] {
            for _ in 0..<3 { _ = try await s.request(.GET, "/b/_design/evil/_view/\(view)") }
        }
        #expect(try await s.request(.GET, "/b/_design/evil/_view/tamper").json["total_rows"] == 0)  // `__lt` is no name it can see
        #expect(try await s.request(.GET, "/b/_design/evil/_view/escape").json["total_rows"] == 0)  // Function refused
        // a is as it was: its validation still refuses, its view still emits.
        for i in 0..<4 {
            let refused = try await s.request(.PUT, "/a/x\(i)", json: [:])
            #expect(refused.status == 403 && refused.json["reason"] == "needs ok", "\(refused.text)")
        }
        _ = try await s.request(.PUT, "/a/two", json: ["ok": true])
        let rows = try await s.request(.GET, "/a/_design/views/_view/v").json["rows"]?.arrayValue ?? []
        #expect(rows.map { $0["id"] } == ["one", "two"] && rows.allSatisfy { $0["value"] == 1 })
        // A global one function left behind is gone before the next command.
        _ = try await s.request(.PUT, "/a/_design/reader", json: ["shows": ["peek": "function () { return typeof leaked; }"]])
        for _ in 0..<3 { #expect(try await s.request(.GET, "/a/_design/reader/_show/peek").text == "undefined") }
    }
}
