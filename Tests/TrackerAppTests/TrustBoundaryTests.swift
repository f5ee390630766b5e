import AsyncHTTPClient
import CouchJSON
import CouchProtocol
import Foundation
import LTTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

/// Issue 40: one user, with an ordinary account, against another's data — in both modes, and in
/// cluster mode (a stand-in cluster, or the real CouchDB with LT_TEST_COUCHDB_URL). The
/// invariant of the property test: nothing bob does changes what alice, or an analyst, reads
/// about alice, and nothing bob reads holds anything of alice's. docs/security.md lists each
/// boundary with its test.
@Suite("Trust boundaries: one user against another", .serialized, .timeLimit(.minutes(5)))
struct TrustBoundaryTests {
    struct Account {
        var name: String
        var key: String
        var secret: String
        var db: String
        var auth: TestServer.Auth { .basic(key, secret) }
    }

    static let analyst = TestServer.Auth.basic("ann", "pw-ann")

    static func register(_ s: TestServer, _ name: String) async throws -> Account {
        let created = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")])
        #expect(created.status == 201, "\(created.text)")
        let login = try await s.app(.POST, "/api/login", json: ["username": .string(name), "password": .string("pw-\(name)")]).json
        return Account(name: name, key: login["api_key"]?.stringValue ?? "", secret: login["api_password"]?.stringValue ?? "",
                       db: login["location_db_name"]?.stringValue ?? "")
    }

    /// An analyst on the database server the application uses (the cluster in cluster mode).
    static func addAnalyst(_ s: TestServer) async throws {
        let made = try await (s.cluster ?? s).request(.PUT, "/_users/org.couchdb.user:ann", json: [
            "name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann",
        ])
        #expect(made.status == 201, "\(made.text)")
    }

    /// Where analysts read everyone's locations in this mode.
    static func analysisDB(_ mode: String) -> String { mode == "single-db" ? "lt_locations_all_envoy" : "lt_locations_all" }

    /// Writes `sentinel` as `user` and waits until the analysts' database holds it: everything
    /// the user wrote before is copied by then (consolidation copies a database in order).
    static func settle(_ s: TestServer, _ mode: String, _ user: Account, _ sentinel: String) async throws {
        let written = try await s.request(.PUT, "/\(user.db)/\(sentinel)", json: ["type": "Feature", "sentinel": true], auth: user.auth)
        #expect(written.status == 201, "\(written.text)")
        let copied = try await eventually(30) {
            try await (s.cluster ?? s).request(.GET, "/\(analysisDB(mode))/\(user.name):\(sentinel)").status == 200
        }
        #expect(copied, "\(user.name)'s \(sentinel) consolidated")
    }

    /// What alice and an analyst read about alice: her documents as she reads them, the
    /// analysts' export of her, and every row of everyone's export that says it is hers.
    static func aliceView(_ s: TestServer, _ alice: Account) async throws -> [String] {
        var view: [String] = []
        let own = try await s.request(.GET, "/\(alice.db)/_all_docs?include_docs=true&conflicts=true", auth: alice.auth).json["rows"]?.arrayValue ?? []
        for row in own {
            guard let doc = row["doc"], let id = doc["_id"]?.stringValue, !id.hasPrefix("_design/"), doc["sentinel"] == nil else { continue }
            view.append("own \(doc.text)")
        }
        let mine = try await s.app(.GET, "/api/analysis/locations?user=alice&format=csv", auth: analyst)
        view += mine.text.split(separator: "\n").map { "user-export \($0)" }
        let everyone = try await s.app(.GET, "/api/analysis/locations?format=geojson", auth: analyst).json["features"]?.arrayValue ?? []
        for feature in everyone where feature["properties"]?["username"] == "alice" || feature["id"]?.stringValue?.hasPrefix("alice:") == true {
            view.append("export \(feature.text)")
        }
        return view.sorted()
    }

    static let marker = "alice-secret-9f3c"

    /// Alice's locations: five fixes, one with a photo, all carrying her marker.
    static func aliceWrites(_ s: TestServer, _ alice: Account) async throws -> (ids: [String], revs: [String: String], digest: String) {
        var revs: [String: String] = [:]
        for i in 0..<5 {
            var doc: JSON = ["type": "Feature", "created_at": .int(1_700_000_000_000 + i * 60_000),
                             "geometry": ["type": "Point", "coordinates": [.double(13.4 + Double(i) * 0.001), 52.5]],
                             "properties": ["username": "alice", "secret": .string(marker)]]
            if i == 0, case var .object(object) = doc {
                object["_attachments"] = ["photo.jpg": ["content_type": "image/jpeg", "data": .string(Data((marker + " photo bytes").utf8).base64EncodedString())]]
                doc = .object(object)
            }
            let written = try await s.request(.PUT, "/\(alice.db)/fix-\(i)", json: doc, auth: alice.auth)
            #expect(written.status == 201, "\(written.text)")
            revs["fix-\(i)"] = written.json["rev"]?.stringValue
        }
        let photo = try await s.request(.GET, "/\(alice.db)/fix-0", auth: alice.auth).json
        return ((0..<5).map { "fix-\($0)" }, revs, photo["_attachments"]?["photo.jpg"]?["digest"]?.stringValue ?? "")
    }

    static func hex(_ random: inout SeededRandom) -> String {
        (0..<16).map { _ in String(format: "%02x", Int(random.next() % 256)) }.joined()
    }

    @Test("Property: whatever ids, revisions, names, deletions, stubs and reads bob sends, alice's data and what analysts read of her stay as they were, and bob reads nothing of hers",
          arguments: [("db-per-user", false, UInt64(1)), ("single-db", false, 2), ("db-per-user", false, 3), ("single-db", false, 4),
                      ("db-per-user", true, 5), ("single-db", true, 6)])
    func nothingBobDoesReachesAlice(mode: String, cluster: Bool, seed: UInt64) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", mode])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        let bob = try await Self.register(s, "bob")
        try await Self.addAnalyst(s)
        let (ids, revs, digest) = try await Self.aliceWrites(s, alice)
        try await Self.settle(s, mode, alice, "sentinel-a")
        let before = try await Self.aliceView(s, alice)
        #expect(before.filter { $0.hasPrefix("own ") }.count == 5 && before.filter { $0.hasPrefix("export ") }.count == 5, "\(before)")

        var random = SeededRandom(seed: seed)
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        let pool = ids + ids.map { "alice:" + $0 } + ["bob:fix-0", "alice", "alice:", ":fix-0", "fix-0:alice", "x" + Self.hex(&random)]
        var leaks: [String] = []
        func check(_ reply: TestServer.Reply, _ what: String) {
            if reply.text.contains(Self.marker) || (!digest.isEmpty && reply.text.contains(digest)) { leaks.append("\(what): \(reply.text.prefix(300))") }
            if reply.status >= 500 { leaks.append("\(what): server error \(reply.status) \(reply.text.prefix(200))") }
        }
        for step in 0..<30 {
            let id = pick(pool)
            let encoded = CouchURL.encode(id)
            let claim: JSON = ["type": "Feature", "geometry": ["type": "Point", "coordinates": [9.0, 9.0]],
                               "properties": ["username": "alice", "forged": .int(step)]]
            switch random.next() % 9 {
            case 0:  // a document under alice's id, saying it is alice's
                check(try await s.request(.PUT, "/\(bob.db)/\(encoded)", json: claim, auth: bob.auth), "put \(id)")
            case 1:  // a replicated revision that would win over alice's (higher generation), maybe a deletion
                var doc = claim.objectValue!
                doc["_id"] = .string(id)
                doc["_rev"] = .string("\(2 + random.next() % 9)-\(Self.hex(&random))")
                if random.next() % 2 == 0 { doc["_deleted"] = true }
                check(try await s.request(.POST, "/\(bob.db)/_bulk_docs", json: ["docs": [.object(doc)], "new_edits": false], auth: bob.auth), "replicate \(id)")
            case 2:  // alice's very revision as the ancestor of a deletion
                let target = pick(ids)
                let parent = revs[target] ?? "1-00"
                let hash = String(parent.split(separator: "-").last ?? "")
                let doc: JSON = ["_id": .string(target), "_rev": .string("2-\(Self.hex(&random))"), "_deleted": true,
                                 "_revisions": ["start": 2, "ids": [.string(Self.hex(&random)), .string(hash)]]]
                check(try await s.request(.POST, "/\(bob.db)/_bulk_docs", json: ["docs": [doc], "new_edits": false], auth: bob.auth), "delete over \(target)")
            case 3:  // the same content as alice's, so the same revision id, then deleted
                let target = pick(ids)
                let doc = try await s.request(.GET, "/\(alice.db)/\(target)", auth: .admin).json
                var copy = doc.objectValue ?? [:]
                copy["_id"] = nil
                copy["_rev"] = nil
                copy["_attachments"] = nil
                let made = try await s.request(.PUT, "/\(bob.db)/\(target)", json: .object(copy), auth: bob.auth)
                check(made, "copy \(target)")
                if let rev = made.json["rev"]?.stringValue {
                    check(try await s.request(.DELETE, "/\(bob.db)/\(target)?rev=\(rev)", auth: bob.auth), "delete copy \(target)")
                }
            case 4:  // alice's photo by its digest
                let steal: JSON = ["_attachments": ["p.jpg": ["stub": true, "digest": .string(digest), "content_type": "image/jpeg", "length": 10]]]
                let stolen = try await s.request(.PUT, "/\(bob.db)/steal-\(step)", json: steal, auth: bob.auth)
                check(stolen, "stub with alice's digest")
                if stolen.status < 300 { leaks.append("a stub with alice's digest was accepted: \(stolen.text)") }
                check(try await s.request(.GET, "/\(bob.db)/steal-\(step)/p.jpg", auth: bob.auth), "read the stolen photo")
            case 5:  // reads by id, in bulk, by range, by query, and the feed
                check(try await s.request(.GET, "/\(bob.db)/\(encoded)?revs=true&open_revs=all", auth: bob.auth, headers: [("Accept", "application/json")]), "get \(id)")
                check(try await s.request(.POST, "/\(bob.db)/_bulk_get?revs=true&attachments=true", json: ["docs": .array(pool.map { ["id": .string($0)] })], auth: bob.auth), "bulk_get")
                check(try await s.request(.POST, "/\(bob.db)/_all_docs?include_docs=true", json: ["keys": .array(pool.map(JSON.string))], auth: bob.auth), "all_docs keys")
                check(try await s.request(.GET, "/\(bob.db)/_all_docs?include_docs=true&startkey=%22%22&endkey=%22%EF%BF%B0%22", auth: bob.auth), "all_docs range")
                check(try await s.request(.GET, "/\(bob.db)/_changes?include_docs=true&style=all_docs", auth: bob.auth), "changes")
                check(try await s.request(.POST, "/\(bob.db)/_find", json: ["selector": ["properties.secret": ["$exists": true]], "execution_stats": true], auth: bob.auth), "find")
                let revsDiff = JSONObject(pool.map { id -> (key: String, value: JSON) in (key: id, value: [.string("1-" + Self.hex(&random))]) })
                check(try await s.request(.POST, "/\(bob.db)/_revs_diff", json: .object(revsDiff), auth: bob.auth), "revs_diff")
            case 6:  // straight at alice's database (the shared one in single-db mode) with every id form
                check(try await s.request(.GET, "/\(alice.db)/\(CouchURL.encode("alice:fix-1"))", auth: bob.auth), "alice's stored id")
                check(try await s.request(.PUT, "/\(alice.db)/\(CouchURL.encode("alice:fix-1"))", json: claim, auth: bob.auth), "write alice's stored id")
                check(try await s.request(.GET, "/\(Self.analysisDB(mode))/\(CouchURL.encode("alice:fix-1"))", auth: bob.auth), "the analysts' database")
            case 7:  // local documents under alice's names
                check(try await s.request(.PUT, "/\(bob.db)/_local/\(CouchURL.encode(id))", json: ["x": 1], auth: bob.auth), "local \(id)")
                check(try await s.request(.GET, "/\(bob.db)/_local/\(CouchURL.encode("alice:checkpoint"))", auth: bob.auth), "alice's local")
            default:  // the application API with alice's name
                check(try await s.app(.GET, "/api/analysis/locations?user=alice", auth: bob.auth), "analysis as bob")
                check(try await s.app(.POST, "/api/owntracks?u=alice", json: ["_type": "location", "lat": 1, "lon": 1, "tst": 1_700_000_000], auth: bob.auth), "owntracks as alice")
                check(try await s.app(.GET, "/api/photos?user=alice", auth: bob.auth), "photos as bob")
                check(try await s.app(.DELETE, "/api/users/alice?locations=purge", auth: bob.auth), "delete alice")
            }
        }
        try await Self.settle(s, mode, bob, "sentinel-b")
        let after = try await Self.aliceView(s, alice)
        #expect(after == before, "alice's view changed:\n\(Set(after).symmetricDifference(before).sorted().joined(separator: "\n"))")
        #expect(leaks.isEmpty, "\(leaks.count) answers to bob held alice's data:\n\(leaks.joined(separator: "\n"))")
        // Bob's forged claims appear only as his own.
        let everyone = try await s.app(.GET, "/api/analysis/locations?format=csv", auth: Self.analyst).text.split(separator: "\n")
        #expect(!everyone.contains { $0.contains(",alice,") && $0.contains(",9.0,9.0") }, "a forged point shown as alice's")

        // Bob leaves, purging his copies: only his go (issue 40, row 2).
        let left = try await s.app(.DELETE, "/api/users/bob?locations=purge", auth: .basic("bob", "pw-bob"))
        #expect(left.status == 200, "\(left.text)")
        #expect(try await Self.aliceView(s, alice) == before)
    }

    @Test("Row 6: an attachment stub naming another owner's digest is refused (missing_stub), in both modes and in front of a cluster",
          arguments: [("db-per-user", false), ("single-db", false), ("single-db", true)])
    func stubOfAnotherOwner(mode: String, cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", mode])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        let bob = try await Self.register(s, "bob")
        let (_, _, digest) = try await Self.aliceWrites(s, alice)
        #expect(digest.hasPrefix("md5-"))
        let stolen = try await s.request(.PUT, "/\(bob.db)/steal", json: [
            "_attachments": ["p.jpg": ["stub": true, "digest": .string(digest), "content_type": "image/jpeg", "length": 24]],
        ], auth: bob.auth)
        #expect(stolen.status == 412 && stolen.json["error"] == "missing_stub", "\(stolen.text)")
        #expect(try await s.request(.GET, "/\(bob.db)/steal/p.jpg", auth: bob.auth).status == 404)
        // Alice's own stub of her own photo still works (a later revision keeps it).
        let current = try await s.request(.GET, "/\(alice.db)/fix-0", auth: alice.auth).json
        var next = current.objectValue!
        next["note"] = "edited"
        let edited = try await s.request(.PUT, "/\(alice.db)/fix-0", json: .object(next), auth: alice.auth)
        #expect(edited.status == 201, "\(edited.text)")
    }

    @Test("Row 7: a role naming no valid owner (lt_owner_x:y, written by an admin) gives no access and never stops the server, in both modes and in front of a cluster",
          arguments: [("db-per-user", false), ("single-db", false), ("single-db", true)])
    func malformedOwnerRole(mode: String, cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", mode])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        _ = try await Self.aliceWrites(s, alice)
        for role in ["lt_owner_x:y", "lt_owner_alice:", "lt_owner_:alice"] {
            let name = "mal\(abs(role.hashValue) % 1000)"
            #expect(try await (s.cluster ?? s).request(.PUT, "/_users/org.couchdb.user:\(name)", json: [
                "name": .string(name), "type": "user", "roles": [.string(role)], "password": "pw-mal",
            ]).status == 201)
            for _ in 0..<3 {  // as a device retries
                let reply = try await s.request(.GET, "/\(Self.analysisDB(mode))/_all_docs", auth: .basic(name, "pw-mal"))
                #expect(reply.status == 403, "\(role): \(reply.text)")
                #expect(try await s.request(.GET, "/\(alice.db)/fix-1", auth: .basic(name, "pw-mal")).status == 403)
            }
        }
        #expect(try await s.request(.GET, "/").status == 200)
        #expect(s.process.isRunning)
    }

    @Test("Row 5: in the shared database an owner's query examines, counts and matches only their own documents; embedded and in front of a cluster",
          arguments: [false, true])
    func sharedQueriesStayInTheNamespace(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", "single-db"])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        let bob = try await Self.register(s, "bob")
        let docs: [JSON] = (0..<40).map { ["_id": .string("a\($0)"), "v": .string("7" + String(repeating: "a", count: 30))] }
        #expect(try await s.request(.POST, "/\(alice.db)/_bulk_docs", json: ["docs": .array(docs)], auth: alice.auth).status == 201)
        for i in 0..<3 { _ = try await s.request(.PUT, "/\(bob.db)/b\(i)", json: ["v": "1"], auth: bob.auth) }
        for selector: JSON in [["v": ["$regex": "^7(a+a+)+b$"]], ["v": ["$gt": nil]], ["_id": ["$gt": "a"]]] {
            let found = try await s.request(.POST, "/\(bob.db)/_find", json: ["selector": selector, "execution_stats": true], auth: bob.auth).json
            #expect(found["docs"]?.arrayValue?.contains { $0["v"]?.stringValue?.hasPrefix("7") == true } == false)
            #expect(found["execution_stats"]?["total_docs_examined"]?.intValue ?? 99 <= 3, "\(selector.text): \(found["execution_stats"]?.text ?? "")")
            #expect(found["execution_stats"]?["total_keys_examined"]?.intValue ?? 99 <= 3, "\(selector.text): \(found["execution_stats"]?.text ?? "")")
        }
        // The changes feed's selector runs on bob's documents only, too.
        let changes = try await s.request(.POST, "/\(bob.db)/_changes?filter=_selector", json: ["selector": ["v": ["$regex": "^7"]]], auth: bob.auth).json
        #expect(changes["results"]?.arrayValue?.isEmpty == true)
    }

    @Test("Single-db in front of a cluster: bob holding every continuous feed he may (100) holds up neither alice's writes and reads nor logins")
    func heldFeedsHoldUpNoOne() async throws {
        let s = try TestServer(cluster: true, extraArguments: ["--mode", "single-db"])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        let bob = try await Self.register(s, "bob")
        // A client of the test's own, so that bob's feeds are not queued on this side.
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 128)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let opened = NIOLockedValueBox(0)
        let feeds = (0..<100).map { _ in
            Task {
                var request = HTTPClientRequest(url: s.baseURL + "/\(bob.db)/_changes?feed=continuous&since=now&heartbeat=5000")
                request.headers.add(name: "Authorization", value: TestServer.basic(bob.key, bob.secret))
                let response = try await client.execute(request, timeout: .seconds(120))
                if response.status == .ok { opened.withLockedValue { $0 += 1 } }
                for try await _ in response.body {}  // held open until the client shuts down
            }
        }
        // Each feed answered: the server forwarded all 100 to the cluster at once.
        let allOpen = try await eventually(30) { opened.withLockedValue { $0 } == 100 }
        #expect(allOpen, "only \(opened.withLockedValue { $0 }) of bob's 100 feeds were answered: the others wait for a connection to the cluster")
        // Meanwhile alice writes, reads and signs in as usual.
        let answers = NIOLockedValueBox<[Int]>([])
        let alicesTurn = Task {
            let steps: [() async throws -> TestServer.Reply] = [
                { try await s.request(.PUT, "/\(alice.db)/fix-held", json: ["type": "Feature", "v": 1], auth: alice.auth) },
                { try await s.request(.GET, "/\(alice.db)/fix-held", auth: alice.auth) },
                { try await s.request(.POST, "/\(alice.db)/_bulk_docs", json: ["docs": [["_id": "fix-held-2", "v": 2]]], auth: alice.auth) },
                { try await s.request(.GET, "/\(alice.db)/_all_docs", auth: alice.auth) },
                { try await s.app(.POST, "/api/login", json: ["username": "alice", "password": "pw-alice"]) },
            ]
            for step in steps { let status = try await step().status; answers.withLockedValue { $0.append(status) } }
        }
        let served = try await eventually(10) { answers.withLockedValue { $0.count } == 5 }
        #expect(served, "alice's requests waited behind bob's feeds: \(answers.withLockedValue { $0 }) answered within 10 s")
        #expect(answers.withLockedValue { $0 }.allSatisfy { (200...202).contains($0) }, "\(answers.withLockedValue { $0 })")
        alicesTurn.cancel()
        try await client.shutdown()
        for feed in feeds { _ = await feed.result }
    }

    @Test("Row 4: a $regex that backtracking engines take exponential time over answers at once; the refused kinds say why")
    func regexIsBounded() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/redos")
        let docs: [JSON] = (0..<200).map { ["_id": .string("d\($0)"), "v": .string(String(repeating: "x", count: 48))] }
        _ = try await s.request(.POST, "/redos/_bulk_docs", json: ["docs": .array(docs)])
        // 17.5 s for 10 such documents before; the request times out after 30 s here.
        let found = try await s.request(.POST, "/redos/_find", json: ["selector": ["v": ["$regex": "^(x+x+)+y$"]]], timeout: .seconds(30))
        #expect(found.status == 200 && found.json["docs"]?.arrayValue?.isEmpty == true, "\(found.text)")
        let matched = try await s.request(.POST, "/redos/_find", json: ["selector": ["v": ["$regex": "^(x+x+)+$"]], "limit": 500], timeout: .seconds(30))
        #expect(matched.json["docs"]?.arrayValue?.count == 200)
        let refused = try await s.request(.POST, "/redos/_find", json: ["selector": ["v": ["$regex": "(x)\\1"]]])
        #expect(refused.status == 400 && refused.json["error"] == "bad_arg" && refused.json["reason"]?.stringValue?.contains("back-reference") == true, "\(refused.text)")
    }

    @Test("Row 3: a dashboard session ends with its account — a role taken away, a password changed, the account deleted — and survives an unrelated edit; embedded and in cluster mode",
          arguments: [false, true])
    func sessionsEndWithTheirAccount(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.cluster?.stop(); s.stop() }
        let users = s.cluster ?? s  // where the database's accounts are
        try await Self.addAnalyst(s)
        func signIn(_ name: String, _ password: String) async throws -> TestServer.Auth {
            let reply = try await s.app(.POST, "/api/session", json: ["username": .string(name), "password": .string(password)])
            #expect(reply.status == 200, "\(reply.text)")
            return .cookie(reply.headers.first(name: "Set-Cookie")?.split(separator: ";").first.map(String.init) ?? "")
        }
        func analysis(_ auth: TestServer.Auth) async throws -> Int { try await s.app(.GET, "/api/analysis/map?bbox=0,0,1,1", auth: auth).status }
        func editAnn(_ change: (inout JSONObject) -> Void) async throws {
            var doc = try await users.request(.GET, "/_users/org.couchdb.user:ann").json.objectValue ?? [:]
            change(&doc)
            let saved = try await users.request(.PUT, "/_users/org.couchdb.user:ann", json: .object(doc))
            #expect(saved.status == 201, "\(saved.text)")
        }
        // An unrelated edit of the account keeps the session.
        var cookie = try await signIn("ann", "pw-ann")
        #expect(try await analysis(cookie) == 200)
        try await editAnn { $0["note"] = "desk 4" }
        #expect(try await analysis(cookie) == 200)
        // The role taken away: the session is over at once.
        try await editAnn { $0["roles"] = [] }
        #expect(try await analysis(cookie) == 401)
        #expect(try await s.app(.GET, "/api/session", auth: cookie).json["name"] == .null)
        // The password changed.
        try await editAnn { $0["roles"] = ["analyst"] }
        cookie = try await signIn("ann", "pw-ann")
        try await editAnn { $0["password"] = "pw-ann-2" }
        #expect(try await analysis(cookie) == 401)
        // The account deleted (issue 40 row 3's reproduction: the export still answered 200).
        cookie = try await signIn("ann", "pw-ann-2")
        #expect(try await s.app(.GET, "/api/analysis/locations?format=csv", auth: cookie).status != 401)
        let rev = try await users.request(.GET, "/_users/org.couchdb.user:ann").json["_rev"]?.stringValue ?? ""
        #expect(try await users.request(.DELETE, "/_users/org.couchdb.user:ann?rev=\(rev)").status == 200)
        #expect(try await s.app(.GET, "/api/analysis/locations?format=csv", auth: cookie).status == 401)
        // A tracker user's session ends when an admin deletes the account, and stays ended when
        // the name is registered again (another password, another salt).
        _ = try await Self.register(s, "tess")
        let tess = try await signIn("tess", "pw-tess")
        #expect(try await s.app(.GET, "/api/me/locations", auth: tess).status == 200)
        #expect(try await s.app(.DELETE, "/api/users/tess", auth: .admin).status == 200)
        _ = try await s.app(.PUT, "/api/users/tess", json: ["password": "pw-tess"])
        #expect(try await s.app(.GET, "/api/me/locations", auth: tess).status == 401)
    }

    /// CPU seconds the process has used (user and system), from /proc.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return (Double(fields[11]) ?? 0) / 100 + (Double(fields[12]) ?? 0) / 100  // utime, stime in clock ticks
    }

    @Test("Row 4: a query whose client went away stops working (it used to hold a core for minutes)")
    func queryStopsWhenClientGoes() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/long")
        // Each document's match takes its whole budget (~10 million steps): minutes for all.
        let value = String(repeating: "x", count: 10_000)
        for batch in 0..<4 {
            let docs: [JSON] = (0..<100).map { ["_id": .string("d\(batch)-\($0)"), "v": .string(value)] }
            _ = try await s.request(.POST, "/long/_bulk_docs", json: ["docs": .array(docs)])
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let pid = s.process.processIdentifier
        let gaveUp = try? await s.request(.POST, "/long/_find", json: ["selector": ["v": ["$regex": "x{0,3000}y"]]],
                                          timeout: .seconds(1), http: client)
        #expect(gaveUp == nil, "the query should take far longer than a second")
        try await client.shutdown()
        try await Task.sleep(for: .seconds(2))
        let start = Self.cpuSeconds(pid)
        try await Task.sleep(for: .seconds(3))
        let spent = Self.cpuSeconds(pid) - start
        #expect(spent < 1.0, "the server spent \(spent) s of CPU in the 3 s after its client left")
    }

    /// A streamed answer read line by line in the background.
    final class Feed: Sendable {
        let lines = NIOLockedValueBox<[String]>([])
        let ended = NIOLockedValueBox(false)
        let task: Task<Void, Never>

        init(_ url: String, auth: (String, String), body: JSON? = nil) {
            let lines = self.lines, ended = self.ended
            task = Task {
                defer { ended.withLockedValue { $0 = true } }
                var request = HTTPClientRequest(url: url)
                request.headers.add(name: "Authorization", value: TestServer.basic(auth.0, auth.1))
                if let body {
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(bytes: body.bytes))
                }
                guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(60)), response.status == .ok else { return }
                var pending = ""
                do {
                    for try await chunk in response.body {
                        pending += String(buffer: chunk)
                        while let newline = pending.firstIndex(of: "\n") {
                            let line = String(pending[..<newline])
                            pending = String(pending[pending.index(after: newline)...])
                            if !line.isEmpty { lines.withLockedValue { $0.append(line) } }
                        }
                    }
                } catch {}
            }
        }
        var text: String { lines.withLockedValue { $0.joined(separator: "\n") } }
        var hasEnded: Bool { ended.withLockedValue { $0 } }
    }

    @Test("Row 8: a continuous feed stops once its API key is revoked or its user deleted, and streams nothing written after; in both modes and in cluster mode",
          arguments: [("db-per-user", false), ("single-db", false), ("single-db", true)])
    func feedsEndWithTheirCredential(mode: String, cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster, extraArguments: ["--mode", mode])
        defer { s.cluster?.stop(); s.stop() }
        let alice = try await Self.register(s, "alice")
        let second = try await s.app(.POST, "/api/login", json: ["username": "alice", "password": "pw-alice", "device": "old phone"]).json
        let key2 = (second["api_key"]?.stringValue ?? "", second["api_password"]?.stringValue ?? "")
        let feed = Feed("\(s.baseURL)/\(alice.db)/_changes?feed=continuous&include_docs=true&heartbeat=200&since=now", auth: key2)
        defer { feed.task.cancel() }
        try await Task.sleep(for: .milliseconds(500))
        _ = try await s.request(.PUT, "/\(alice.db)/before", json: ["n": "before-revocation"], auth: alice.auth)
        #expect(try await eventually(10) { feed.text.contains("before-revocation") }, "the feed streams while its key is valid")
        let revoked = try await s.app(.DELETE, "/api/keys/\(key2.0)", auth: alice.auth)
        #expect(revoked.status == 200, "\(revoked.text)")
        _ = try await s.request(.PUT, "/\(alice.db)/after", json: ["n": "after-revocation"], auth: alice.auth)
        #expect(try await eventually(10) { feed.hasEnded }, "the feed ends once its key is revoked")
        #expect(!feed.text.contains("after-revocation"), "nothing written after the revocation is streamed")

        // A deleted user's feed ends too.
        let other = Feed("\(s.baseURL)/\(alice.db)/_changes?feed=continuous&heartbeat=200&since=now", auth: (alice.key, alice.secret))
        defer { other.task.cancel() }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!other.hasEnded)
        #expect(try await s.app(.DELETE, "/api/users/alice", auth: .basic("alice", "pw-alice")).status == 200)
        #expect(try await eventually(10) { other.hasEnded }, "the feed of a deleted user ends")
    }

    @Test("Single-db: an owner's waiting feeds count against --max-feeds-per-user like anyone's (they run as the server inside)")
    func ownersFeedsAreCounted() async throws {
        let s = try TestServer(extraArguments: ["--mode", "single-db", "--max-feeds-per-user", "2"])
        defer { s.stop() }
        let alice = try await Self.register(s, "alice")
        let feeds = (0..<2).map { _ in Feed("\(s.baseURL)/\(alice.db)/_changes?feed=continuous&heartbeat=200&since=now", auth: (alice.key, alice.secret)) }
        defer { feeds.forEach { $0.task.cancel() } }
        try await Task.sleep(for: .milliseconds(500))
        let third = try await s.request(.GET, "/\(alice.db)/_changes?feed=longpoll&timeout=100&since=now", auth: alice.auth)
        #expect(third.status == 429 && third.json["error"] == "too_many_requests", "\(third.text)")
    }
}
