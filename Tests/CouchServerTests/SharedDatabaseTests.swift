import AsyncHTTPClient
import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Replication
import Testing

@Suite("Owner namespaces of a shared database")
struct OwnerNamespaceTests {
    @Test("Every id round-trips through its owner's namespace and is invisible to every other owner", arguments: [1, 2, 3])
    func roundTrip(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let alphabet = Array("ab-_:;/0z\u{e9}\u{1F600}")
        func text(_ count: Int) -> String { String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }) }
        let owners = ["a", "ab", "a-b", "b", "a_b", "\u{e9};", "a b"].compactMap(OwnerNamespace.init(owner:))
        #expect(owners.count == 7)
        for _ in 0..<2000 {
            let id = (random.next() % 4 == 0 ? "_local/" : "") + text(Int(random.next() % 8))
            for owner in owners {
                let stored = owner.stored(id)
                #expect(owner.visible(stored) == id)
                // Raw (_all_docs) order: every stored id of the owner lies in [prefix, upperBound).
                if !id.hasPrefix("_local/") { #expect(stored >= owner.prefix && stored.utf8.lexicographicallyPrecedes(owner.upperBound.utf8)) }
                for other in owners where other != owner { #expect(other.visible(stored) == nil, "\(other.owner) sees \(stored)") }
            }
        }
    }

    @Test("Changes feed lines in the owner's ids, in lt's layout and in CouchDB's (rows ending `,\\r`); other owners' rows dropped")
    func changesLines() {
        let bob = OwnerNamespace(owner: "bob")!
        func visible(_ text: String) -> String? {
            OwnerRequest.visibleChangesLine(ArraySlice(Array(text.utf8)), bob).map { String(decoding: $0, as: UTF8.self) }
        }
        let row = #"{"seq":"1-g1","id":"\#(bob.stored("fix0"))","changes":[{"rev":"1-a"}]}"#
        let mine = #"{"seq":"1-g1","id":"fix0","changes":[{"rev":"1-a"}]}"#
        #expect(visible(row) == mine)
        #expect(visible(row + ",") == mine + ",")
        #expect(visible(row + ",\r") == mine + ",\r")  // CouchDB 3.4's normal feed
        #expect(visible(row + "\r") == mine + "\r")
        #expect(visible(#"{"seq":"2-g1","id":"\#(OwnerNamespace(owner: "amy")!.stored("fix0"))","changes":[]},\#r"#) == nil)
        #expect(visible("],\r") == "],\r")
    }

    @Test("An owner is the one role with the owner prefix; none or several give no owner access")
    func ownerFromRoles() {
        let shared = SharedDatabase(name: "s", ownerRolePrefix: "lt_owner_")
        #expect(shared.namespace(roles: ["lt_owner_amy"])?.owner == "amy")
        #expect(shared.namespace(roles: ["analyst"]) == nil)
        #expect(shared.namespace(roles: ["lt_owner_"]) == nil)
        #expect(shared.namespace(roles: ["lt_owner_amy", "lt_owner_ben"]) == nil)
        // A role an admin wrote by hand that names no valid owner gives no owner access (it
        // used to stop the server at the next request of that user: issue 40, row 7).
        #expect(shared.namespace(roles: ["lt_owner_x:y"]) == nil)
        #expect(shared.namespace(roles: ["lt_owner_x\u{0}y"]) == nil)
        #expect(OwnerNamespace(owner: "") == nil)
        #expect(OwnerNamespace(owner: ":") == nil)
    }
}

/// Single-database mode (`lt serve --mode single-db`) on a real server: every user replicates
/// into `lt_locations_all_envoy` and sees only their own documents there.
@Suite("Single-database mode", .serialized, .timeLimit(.minutes(3)))
struct SharedDatabaseTests {
    let db = "lt_locations_all_envoy"

    func login(_ s: TestServer, _ user: String) async throws -> (key: String, secret: String, db: String, host: String) {
        _ = try await s.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")])
        let json = try await s.app(.POST, "/api/login", json: ["username": .string(user), "password": .string("pw-\(user)")]).json
        return (json["api_key"]!.stringValue!, json["api_password"]!.stringValue!, json["location_db_name"]!.stringValue!, json["location_db_host"]!.stringValue!)
    }

    func fixes(_ store: DatabaseStore, _ name: String, count: Int, owner: String) async throws {
        let device = try await store.create(name)
        for i in 0..<count {
            _ = try await device.update(DocumentInput(id: "fix\(i)", body: [
                "type": "Feature", "created_at": .double(1_700_000_000_000 + Double(i)),
                "geometry": ["type": "Point", "coordinates": [.double(-122.3 + Double(i) * 0.001), 37.49]],
                "properties": ["username": .string(owner)],
            ]))
        }
    }

    func ids(_ reply: TestServer.Reply, _ member: String = "rows", _ field: String = "id") -> [String] {
        (reply.json[member]?.arrayValue ?? []).compactMap { $0[field]?.stringValue }
    }

    @Test("Register, log in, push and pull with our replicator, same ids for two users without clashes; analysts and the geo index see everyone; deleting a user removes their documents; embedded and in front of a cluster",
          arguments: [false, true])
    func endToEnd(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", "single-db"])
        defer { s.stop() }
        let accounts = s.cluster ?? s  // where _users and the databases live
        let alice = try await login(s, "alice")
        let bob = try await login(s, "bob")
        #expect(alice.db == db && bob.db == db)
        let databases = try await accounts.request(.GET, "/_all_dbs").json.arrayValue ?? []
        #expect(databases.contains(.string(db)) && !databases.contains("lt_locations_user_alice"))

        // Each device pushes its fixes with exactly the credentials its login returned; both use the ids fix0...
        let directory = try TemporaryDirectory("lt-shared")
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url)
        try await fixes(store, "alice-device", count: 25, owner: "alice")
        try await fixes(store, "bob-device", count: 10, owner: "bob")
        for (login, local, count) in [(alice, "alice-device", 25), (bob, "bob-device", 10)] {
            let remote = try RemoteEndpoint(url: "http://\(login.host)/\(login.db)", username: login.key, password: login.secret)
            let pushed = try await Replication(source: LocalEndpoint(store: store, name: local), target: remote).run()
            #expect(pushed.status.docsWritten == count && pushed.status.docWriteFailures == 0)
            // Again: nothing new (checkpoints are the owner's own _local documents).
            let again = try await Replication(source: LocalEndpoint(store: store, name: local), target: remote).run()
            #expect(again.status.docsWritten == 0)
        }
        let aliceAuth = TestServer.Auth.basic(alice.key, alice.secret)
        let mine = try await s.request(.GET, "/\(db)/_all_docs", auth: aliceAuth)
        #expect(mine.status == 200 && Set(ids(mine)) == Set((0..<25).map { "fix\($0)" }), "\(mine.status) \(mine.text.prefix(300))")
        let changes = try await s.request(.GET, "/\(db)/_changes", auth: .basic(bob.key, bob.secret))
        #expect(Set(ids(changes, "results")) == Set((0..<10).map { "fix\($0)" }))

        // Pulled back into empty device databases: exactly each owner's documents, same revisions.
        for (login, count) in [(alice, 25), (bob, 10)] {
            let remote = try RemoteEndpoint(url: "http://\(login.host)/\(login.db)", username: login.key, password: login.secret)
            let fresh = "restore-\(count)"
            _ = try await store.create(fresh)
            let pulled = try await Replication(source: remote, target: LocalEndpoint(store: store, name: fresh)).run()
            #expect(pulled.status.docsWritten == count)
            let restored = try await store.open(fresh).allDocs(AllDocsOptions())
            #expect(restored.rows.count == count)
            let doc = try await store.open(fresh).document(id: "fix3")
            #expect(doc["properties"]?["username"] == .string(count == 25 ? "alice" : "bob"))
        }

        // Stored under each owner's prefix; the shared geo index and analysts see everyone.
        let raw = try await s.request(.GET, "/\(db)/_all_docs")
        #expect(ids(raw).filter { $0.hasPrefix("alice:") }.count == 25 && ids(raw).filter { $0.hasPrefix("bob:") }.count == 10)
        if !cluster {  // CouchDB has no _geo; in front of a cluster the map below is answered from this server's copy
            let near = try await s.request(.GET, "/\(db)/_design/points/_geo/pointidx?lat=37.49&lon=-122.3&radius=50")
            #expect(Set(ids(near)) == ["alice:fix0", "bob:fix0"])
        }
        _ = try await accounts.request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        let mapped = try await eventually {
            let map = try await s.app(.GET, "/api/analysis/map?bbox=-123,37,-122,38&points=100", auth: .basic("ann", "pw-ann"))
            return map.json["total"] == 35
        }
        #expect(mapped, "the analysts' map counts every owner's locations")
        let export = try await s.app(.GET, "/api/analysis/locations?user=bob&format=csv", auth: .basic("ann", "pw-ann"))
        #expect(export.status == 200 && export.text.split(separator: "\n").count == 11)
        let stats = try await s.app(.GET, "/api/analysis/users/alice/stats", auth: .basic("ann", "pw-ann"))
        #expect(stats.json["count"] == 25)
        // OwnTracks posts land in the owner's part.
        let posted = try await s.app(.POST, "/api/owntracks?u=bob&d=phone", json: ["_type": "location", "lat": 37.5, "lon": -122.3, "tst": 1_700_000_000],
                                     auth: .basic(bob.key, bob.secret))
        #expect(posted.status == 200)
        #expect(try await s.request(.GET, "/\(db)/owntracks-phone-1700000000", auth: .basic(bob.key, bob.secret)).status == 200)
        // The analysts' overview of people: each owner's location written last, read from the
        // shared feed for that owner's ids only (bob's post was written after all of alice's), the
        // newest in time of those written last (bob's fix9 is a few ms newer than his post).
        let people = try await s.app(.GET, "/api/analysis/users", auth: .basic("ann", "pw-ann")).json["users"]?.arrayValue ?? []
        #expect(people.map { $0["name"] } == ["alice", "bob"])
        let aliceLast = people.first?["last"]
        #expect(aliceLast?["lat"] == 37.49 && (1_700_000_000_000...1_700_000_000_024).contains(aliceLast?["time"]?.doubleValue ?? 0), "\(aliceLast?.text ?? "")")
        #expect(people.last?["last"]?["time"] == 1_700_000_000_009.0 && people.last?["last"]?["lat"] == 37.49)
        #expect(try await s.app(.GET, "/api/analysis/users", auth: .basic(bob.key, bob.secret)).status == 403)

        // Places are the same in both modes.
        let places = try await s.app(.GET, "/api/places?lat=37.49453457&lon=-122.30464079&radius=4023.35&relation=contains&nearest=true")
        #expect(places.status == 200 && !(places.json["rows"]?.arrayValue ?? []).isEmpty)

        // Deleting Alice removes every document and checkpoint of hers, and nothing of Bob's.
        let deleted = try await s.app(.DELETE, "/api/users/alice", auth: .basic("alice", "pw-alice"))
        #expect(deleted.status == 200 && deleted.json["purged_locations"] == 25)
        let after = try await s.request(.GET, "/\(db)/_all_docs")
        #expect(ids(after).allSatisfy { !$0.hasPrefix("alice:") } && ids(after).filter { $0.hasPrefix("bob:") }.count == 11)
        let locals = try await s.request(.GET, "/\(db)/_local_docs")
        #expect(ids(locals).allSatisfy { !$0.hasPrefix("_local/alice:") } && ids(locals).contains { $0.hasPrefix("_local/bob:") })
        // In front of a cluster this server forgets the key when the cluster's _users feed
        // brings the deletion, a moment after it answered.
        #expect(try await eventually(5) { try await s.request(.GET, "/\(db)/fix0", auth: aliceAuth).status == 401 })
        // Off the analysts' map too (in front of a cluster: this server's copy is purged as well).
        let remapped = try await eventually {
            try await s.app(.GET, "/api/analysis/map?bbox=-123,37,-122,38&points=100", auth: .basic("ann", "pw-ann")).json["total"] == 11
        }
        #expect(remapped, "only Bob's 11 locations left on the map")
    }

    @Test("Ownership on every endpoint: another owner's documents do not exist for a user, cannot be changed, and never show up; embedded and in front of a cluster",
          arguments: [false, true])
    func ownership(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", "single-db"])
        defer { s.stop() }
        let amy = try await login(s, "amy")
        let ben = try await login(s, "ben")
        let amyAuth = TestServer.Auth.basic(amy.key, amy.secret)
        let benAuth = TestServer.Auth.basic(ben.key, ben.secret)
        let created = try await s.request(.PUT, "/\(db)/secret", json: ["note": "amy's"], auth: amyAuth)
        #expect(created.status == 201 && created.json["id"] == "secret")
        #expect(created.headers["Location"].first?.hasSuffix("/\(db)/secret") == true)
        let rev = created.json["rev"]!.stringValue!
        let attached = try await s.request(.PUT, "/\(db)/secret/note.txt?rev=\(rev)", body: Array("hello".utf8), auth: amyAuth,
                                           headers: [("Content-Type", "text/plain")])
        #expect(attached.status == 201)
        let amyRev = attached.json["rev"]!.stringValue!
        #expect(try await s.request(.GET, "/\(db)/secret/note.txt", auth: amyAuth).text == "hello")
        #expect(try await s.request(.GET, "/\(db)/secret", auth: amyAuth).json["_id"] == "secret")

        // To Ben, Amy's document does not exist, on every endpoint.
        #expect(try await s.request(.GET, "/\(db)/secret", auth: benAuth).status == 404)
        #expect(try await s.request(.GET, "/\(db)/secret/note.txt", auth: benAuth).status == 404)
        #expect(!(try await s.request(.GET, "/\(db)/secret?open_revs=all", auth: benAuth).text.contains("amy")))
        #expect(try await s.request(.DELETE, "/\(db)/secret?rev=\(amyRev)", auth: benAuth).status == 404)
        #expect(ids(try await s.request(.GET, "/\(db)/_all_docs", auth: benAuth)).isEmpty)
        #expect(try await s.request(.GET, "/\(db)/_all_docs?keys=%5B%22secret%22%5D", auth: benAuth).json["rows"]?[0]?["error"] == "not_found")
        #expect(ids(try await s.request(.GET, "/\(db)/_changes", auth: benAuth), "results").isEmpty)
        #expect(ids(try await s.request(.GET, "/\(db)/_changes?feed=longpoll&timeout=100", auth: benAuth), "results").isEmpty)
        #expect(ids(try await s.request(.POST, "/\(db)/_changes?filter=_doc_ids", json: ["doc_ids": ["secret"]], auth: benAuth), "results").isEmpty)
        #expect(try await s.request(.POST, "/\(db)/_find", json: ["selector": ["note": "amy's"]], auth: benAuth).json["docs"] == [])
        #expect(try await s.request(.POST, "/\(db)/_find", json: ["selector": ["_id": "secret"]], auth: benAuth).json["docs"] == [])
        let bulkGet = try await s.request(.POST, "/\(db)/_bulk_get", json: ["docs": [["id": "secret"]]], auth: benAuth)
        #expect(bulkGet.json["results"]?[0]?["docs"]?[0]?["error"]?["id"] == "secret" && !bulkGet.text.contains("amy"))
        #expect(try await s.request(.POST, "/\(db)/_revs_diff", json: ["secret": .array([.string(amyRev)])], auth: benAuth)
            .json == ["secret": ["missing": .array([.string(amyRev)])]])
        // Ben's own "secret" is a different document; Amy's stays as it was.
        #expect(try await s.request(.PUT, "/\(db)/secret", json: ["note": "ben's"], auth: benAuth).status == 201)
        let forged = try await s.request(.POST, "/\(db)/_bulk_docs", json: ["docs": [["_id": "secret", "_rev": .string(amyRev), "note": "overwritten"]]], auth: benAuth)
        #expect(forged.json[0]?["error"] == "conflict")
        let replicated = try await s.request(.POST, "/\(db)/_bulk_docs", json: ["new_edits": false, "docs": [["_id": "secret", "_rev": .string(amyRev), "note": "forged"]]], auth: benAuth)
        #expect(replicated.status == 201)
        let amys = try await s.request(.GET, "/\(db)/secret", auth: amyAuth)
        #expect(amys.json["note"] == "amy's" && amys.json["_rev"] == .string(amyRev))
        #expect(try await s.request(.GET, "/\(db)/secret", auth: benAuth).json["note"] != "amy's")
        // Continuous feed: rows of the owner only, in their ids.
        let feed = try await s.request(.GET, "/\(db)/_changes?feed=continuous&timeout=200", auth: amyAuth)
        let lines = feed.text.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
        #expect(lines.compactMap { $0["id"]?.stringValue } == ["secret"] && lines.last?["last_seq"] != nil)
        // _local documents (replication checkpoints) are per owner too.
        #expect(try await s.request(.PUT, "/\(db)/_local/checkpoint", json: ["seq": 1], auth: amyAuth).status == 201)
        #expect(try await s.request(.GET, "/\(db)/_local/checkpoint", auth: benAuth).status == 404)
        #expect(try await s.request(.GET, "/\(db)/_local/checkpoint", auth: amyAuth).json["_id"] == "_local/checkpoint")

        // What owners may not do in a shared database, and who else gets what.
        let refused: [(HTTPMethod, String, JSON?)] = [
            (.PUT, "/\(db)/_design/mine", ["views": [:]]), (.GET, "/\(db)/_design/points", nil),
            (.GET, "/\(db)/_design/points/_geo/pointidx?lat=0&lon=0&radius=1", nil), (.GET, "/\(db)/_security", nil),
            (.PUT, "/\(db)/_security", ["members": [:]]), (.POST, "/\(db)/_changes?filter=points/x", [:]),
            (.POST, "/\(db)/_bulk_docs", ["docs": [["_id": "_design/x"]]]), (.POST, "/\(db)/_purge", ["secret": []]),
            (.DELETE, "/\(db)", nil), (.GET, "/\(db)/_local_docs", nil),
        ]
        for (method, path, body) in refused {
            let reply = try await s.request(method, path, json: body, auth: benAuth)
            #expect(reply.status == 403, "ben \(method) \(path): \(reply.status) \(reply.text.prefix(100))")
            #expect(try await s.request(method, path, json: body, auth: .none).status == 401, "anonymous \(method) \(path)")
        }
        _ = try await (s.cluster ?? s).request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        let analyst = try await s.request(.GET, "/\(db)/_all_docs", auth: .basic("ann", "pw-ann"))
        #expect(Set(ids(analyst)).isSuperset(of: ["amy:secret", "ben:secret"]))
        if !cluster {  // CouchDB has no _geo
            #expect(try await s.request(.GET, "/\(db)/_design/points/_geo/pointidx?lat=0&lon=0&radius=1", auth: .basic("ann", "pw-ann")).status == 200)
        }
        #expect(try await s.request(.GET, "/\(db)", auth: benAuth).json["doc_count"] == nil)
    }
}
