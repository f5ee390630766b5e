import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

@Suite("Authentication and _security", .serialized, .timeLimit(.minutes(3)))
struct SecurityTests {
    @Test("Users sign up, passwords are hashed, and _security decides who reads and writes")
    func usersAndSecurity() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let alice = TestServer.Auth.basic("alice", "wonderland")
        let bob = TestServer.Auth.basic("bob", "builder")
        // As CouchDB 3: `_users` is for admins; no anonymous sign-up.
        let anonymous = try await s.request(.PUT, "/_users/org.couchdb.user:mallory", json: [
            "name": "mallory", "type": "user", "roles": [], "password": "pw",
        ], auth: .none)
        #expect(anonymous.status == 401)
        for (name, password) in [("alice", "wonderland"), ("bob", "builder")] {
            let signup = try await s.request(.PUT, "/_users/org.couchdb.user:\(name)", json: [
                "_id": .string("org.couchdb.user:\(name)"), "name": .string(name), "type": "user", "roles": [], "password": .string(password),
            ])
            #expect(signup.status == 201, "\(signup.text)")
        }
        let stored = try await s.request(.GET, "/_users/org.couchdb.user:alice").json
        #expect(stored["password"] == nil)
        #expect(stored["password_scheme"] == "pbkdf2" && stored["pbkdf2_prf"] == "sha256")
        #expect(stored["derived_key"]?.stringValue?.count == 64 && (stored["iterations"]?.intValue ?? 0) >= 600_000)
        #expect(try await s.request(.GET, "/_session", auth: alice).json["userCtx"]?["name"] == "alice")
        #expect(try await s.request(.GET, "/_session", auth: .basic("alice", "wrong")).status == 401)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:alice", auth: bob).status == 403)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:alice", auth: alice).status == 403)
        // An admin may open `_users` to members; each then reaches only their own document.
        #expect(try await s.request(.PUT, "/_users/_security", json: ["members": ["names": ["alice", "bob"], "roles": []]]).status == 200)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:alice", auth: bob).status == 403)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:alice", auth: alice).status == 200)
        #expect(try await s.request(.GET, "/_users/_all_docs", auth: alice).status == 403)
        let escalate = try await s.request(.PUT, "/_users/org.couchdb.user:alice?rev=\(stored["_rev"]!.stringValue!)", json: [
            "_id": "org.couchdb.user:alice", "name": "alice", "type": "user", "roles": ["_admin"], "password": "x",
        ], auth: alice)
        #expect(escalate.status == 403)
        // The same rule for many documents (`_bulk_docs`) as for one: her own, yes; bob's, or her
        // own with a role added, refused document by document, and bob's left as it was.
        let bobBefore = try await s.request(.GET, "/_users/org.couchdb.user:bob").json
        var own = stored.objectValue ?? [:]
        own["password"] = "wonderland"  // hashed again: a new salt, a new revision
        let bulk = try await s.request(.POST, "/_users/_bulk_docs", json: ["docs": [
            .object(own),
            ["_id": "org.couchdb.user:bob", "_rev": bobBefore["_rev"] ?? .null, "name": "bob", "type": "user", "roles": [], "password": "stolen"],
            ["_id": "org.couchdb.user:alice", "_rev": stored["_rev"] ?? .null, "name": "alice", "type": "user", "roles": ["admins"]],
        ]], auth: alice)
        #expect(bulk.status == 201, "\(bulk.text)")
        #expect(bulk.json.arrayValue?.map { $0["error"] ?? "ok" } == ["ok", "forbidden", "forbidden"], "\(bulk.text)")
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:bob").json == bobBefore)
        #expect(bulk.json.arrayValue?.first?["rev"]?.stringValue?.hasPrefix("2-") == true)
        #expect(try await s.request(.GET, "/_session", auth: alice).json["userCtx"]?["name"] == "alice")
        #expect(try await s.request(.GET, "/_session", auth: .basic("bob", "stolen")).status == 401)
        #expect(try await s.request(.POST, "/_users/_bulk_docs", json: ["docs": [["_id": "org.couchdb.user:carl", "name": "carl"]]], auth: .none).status == 401)

        // New databases are admin-only until _security says otherwise.
        _ = try await s.request(.PUT, "/private")
        #expect(try await s.request(.GET, "/private", auth: alice).status == 403)
        #expect(try await s.request(.GET, "/private", auth: .none).status == 401)
        #expect(try await s.request(.PUT, "/other", auth: alice).status == 401)  // CouchDB: "You are not a server admin."
        let security: JSON = ["admins": ["names": [], "roles": []], "members": ["names": ["alice"], "roles": []]]
        #expect(try await s.request(.PUT, "/private/_security", json: security, auth: alice).status == 403)
        #expect(try await s.request(.PUT, "/private/_security", json: security).status == 200)
        #expect(try await s.request(.PUT, "/private/note", json: ["text": "hi"], auth: alice).status == 201)
        #expect(try await s.request(.GET, "/private/note", auth: alice).json["text"] == "hi")
        #expect(try await s.request(.GET, "/private/note", auth: bob).status == 403)
        #expect(try await s.request(.GET, "/private/_changes", auth: bob).status == 403)
        #expect(try await s.request(.POST, "/private/_bulk_docs", json: ["docs": [["_id": "x"]]], auth: bob).status == 403)
        #expect(try await s.request(.PUT, "/private/_design/app", json: ["views": [:]], auth: alice).status == 403)
        let bulkDesign = try await s.request(.POST, "/private/_bulk_docs", json: ["docs": [["_id": "_design/x"], ["_id": "y"]]], auth: alice)
        #expect(bulkDesign.json.arrayValue?.map { $0["error"] ?? "ok" } == ["forbidden", "ok"])

        // Roles count as stored now, not as when the password was last checked: granted, then taken away.
        _ = try await s.request(.PUT, "/private/_security", json: ["members": ["names": ["alice"], "roles": ["readers"]]])
        #expect(try await s.request(.GET, "/private/note", auth: bob).status == 403)  // bob's password is checked (and remembered) here
        var bobDoc = try await s.request(.GET, "/_users/org.couchdb.user:bob").json.objectValue ?? [:]
        bobDoc["roles"] = ["readers"]
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:bob", json: .object(bobDoc)).status == 201)
        #expect(try await s.request(.GET, "/private/note", auth: bob).status == 200)
        bobDoc = try await s.request(.GET, "/_users/org.couchdb.user:bob").json.objectValue ?? [:]
        bobDoc["roles"] = []
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:bob", json: .object(bobDoc)).status == 201)
        #expect(try await s.request(.GET, "/private/note", auth: bob).status == 403)

        // Cookie sessions.
        let login = try await s.request(.POST, "/_session", body: Array("name=alice&password=wonderland".utf8), auth: .none,
                                        headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(login.status == 200 && login.json["name"] == "alice")
        let setCookie = login.headers["Set-Cookie"].first ?? ""
        #expect(setCookie.hasPrefix("AuthSession=") && setCookie.contains("HttpOnly"))
        let cookie = String(setCookie.split(separator: ";")[0])
        #expect(try await s.request(.GET, "/private/note", auth: .cookie(cookie)).status == 200)
        #expect(try await s.request(.GET, "/_session", auth: .cookie(cookie)).json["userCtx"]?["name"] == "alice")
        let forged = "AuthSession=" + Data("alice:FFFFFFFF:00".utf8).base64EncodedString()
        #expect(try await s.request(.GET, "/private/note", auth: .cookie(forged)).status == 401)
        let bad = try await s.request(.POST, "/_session", json: ["name": "alice", "password": "nope"], auth: .none)
        #expect(bad.status == 401 && bad.json["error"] == "unauthorized")
        #expect(try await s.request(.DELETE, "/_session", auth: .cookie(cookie)).headers["Set-Cookie"].first?.contains("Max-Age=0") == true)
    }

    @Test("CORS is off by default and answers preflights for configured origins")
    func cors() async throws {
        let plain = try TestServer()
        defer { plain.stop() }
        let none = try await plain.request(.GET, "/", auth: .none, headers: [("Origin", "http://app.example")])
        #expect(none.headers["Access-Control-Allow-Origin"].isEmpty)
        let s = try TestServer(extraArguments: ["--cors-origins", "http://app.example"])
        defer { s.stop() }
        let preflight = try await s.request(.OPTIONS, "/db/_changes", auth: .none, headers: [
            ("Origin", "http://app.example"), ("Access-Control-Request-Method", "GET"),
        ])
        #expect(preflight.status == 204)
        #expect(preflight.headers["Access-Control-Allow-Origin"].first == "http://app.example")
        let get = try await s.request(.GET, "/", auth: .none, headers: [("Origin", "http://app.example")])
        #expect(get.headers["Access-Control-Allow-Credentials"].first == "true")
        let other = try await s.request(.GET, "/", auth: .none, headers: [("Origin", "http://evil.example")])
        #expect(other.headers["Access-Control-Allow-Origin"].isEmpty)
    }

    @Test("_users keeps CouchDB's rules and its _design/_auth: no system roles even from its database admins, no login while a user document has conflicts, `_:_` is no one, and another authentication database by configuration")
    func usersDatabaseRules() async throws {
        let s = try TestServer()
        defer { s.stop() }
        // The authentication database is born with its design document, as CouchDB's.
        #expect(try await s.request(.GET, "/_users/_design/_auth").json["validate_doc_update"]?.stringValue?.contains("doc.type must be user") == true)
        func user(_ name: String, roles: [JSON] = [], _ extra: JSONObject = [:]) -> JSON {
            var doc: JSONObject = ["_id": .string("org.couchdb.user:" + name), "name": .string(name), "type": "user", "roles": .array(roles), "password": .string("pw-" + name)]
            for (key, value) in extra { doc[key] = value }
            return .object(doc)
        }
        // Carol administers _users through its security object; she is no server admin.
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:carol", json: user("carol")).status == 201)
        #expect(try await s.request(.PUT, "/_users/_security", json: ["admins": ["names": ["carol"]]]).status == 200)
        let carol = TestServer.Auth.basic("carol", "pw-carol")
        let system = try await s.request(.PUT, "/_users/org.couchdb.user:dave", json: user("dave", roles: ["_admin"]), auth: carol)
        #expect(system.status == 403 && system.json["reason"] == "No system roles (starting with underscore) in users db.")
        let bulk = try await s.request(.POST, "/_users/_bulk_docs", json: ["docs": [user("dave", roles: ["_admin"])]], auth: carol)
        #expect(bulk.json[0]?["error"] == "forbidden", "\(bulk.text)")
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:dave", json: user("dave", roles: ["staff"]), auth: carol).status == 201)
        #expect(try await s.request(.GET, "/_session", auth: .basic("dave", "pw-dave")).json["userCtx"]?["roles"] == ["staff"])
        for (doc, reason) in [
            (user("joe:erlang"), "Character `:` is not allowed in usernames."),
            (user("_root"), "Username may not start with underscore."),
            (user("erin", ["roles": "staff"]), "doc.roles must be an array"),
            (user("erin", ["roles": [12]]), "doc.roles can only contain strings"),
            (user("erin", ["type": "robot"]), "doc.type must be user"),
        ] as [(JSON, String)] {
            let id = doc["_id"]!.stringValue!
            let refused = try await s.request(.PUT, "/_users/" + id, json: doc)
            #expect(refused.status == 403 && refused.json["reason"] == .string(reason), "\(id): \(refused.text)")
        }

        // A user document with conflicts logs no one in until they are resolved.
        let erin = try await s.request(.PUT, "/_users/org.couchdb.user:erin", json: user("erin"))
        #expect(erin.status == 201)
        #expect(try await s.request(.GET, "/_session", auth: .basic("erin", "pw-erin")).json["userCtx"]?["name"] == "erin")
        var branch = try await s.request(.GET, "/_users/org.couchdb.user:erin").json.objectValue ?? [:]
        branch["_rev"] = "1-00000000000000000000000000000000"
        branch["note"] = "replicated from elsewhere"
        let conflicting = try await s.request(.POST, "/_users/_bulk_docs", json: ["docs": [.object(branch)], "new_edits": false])
        #expect(conflicting.status == 201, "\(conflicting.text)")
        let refused = try await s.request(.GET, "/_session", auth: .basic("erin", "pw-erin"))
        #expect(refused.status == 401 && refused.json["reason"]?.stringValue?.contains("conflicts") == true, "\(refused.text)")

        // `_:_` is a client's way to be nobody; a value that is not base64 is a bad request.
        let nobody = try await s.request(.GET, "/_session", auth: .none, headers: [("Authorization", "Basic Xzpf")])
        #expect(nobody.status == 200 && nobody.json["userCtx"]?["name"] == .null)
        #expect(try await s.request(.GET, "/_session", auth: .none, headers: [("Authorization", "Basic %%%")]).status == 400)

        // [chttpd_auth] authentication_db: users log in from another database, with the same rules.
        #expect(try await s.request(.PUT, "/_node/_local/_config/chttpd_auth/authentication_db", json: "people").status == 200)
        #expect(try await s.request(.PUT, "/people").status == 201)
        #expect(try await s.request(.GET, "/people/_design/_auth").status == 200)
        #expect(try await s.request(.PUT, "/people/org.couchdb.user:frank", json: user("frank", roles: ["_admin"])).status == 403)
        #expect(try await s.request(.PUT, "/people/org.couchdb.user:frank", json: user("frank")).status == 201)
        #expect(try await s.request(.GET, "/people/org.couchdb.user:frank").json["password"] == nil)
        #expect(try await s.request(.GET, "/_session", auth: .basic("frank", "pw-frank")).json["userCtx"]?["name"] == "frank")
        #expect(try await s.request(.GET, "/_session", auth: .basic("dave", "pw-dave")).status == 401)  // _users is no longer asked
        #expect(try await s.request(.PUT, "/_node/_local/_config/chttpd_auth/authentication_db", json: "no/such!").status == 400)
    }
}
