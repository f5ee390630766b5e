import AsyncHTTPClient
import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Replication
import Testing
import TrackerKit

/// The Location Tracker application on a real `lt serve`: the original client's API, private
/// databases reached with exactly the credentials a login returns, and who may read what.
@Suite("Location Tracker application", .serialized, .timeLimit(.minutes(3)))
struct TrackerAppTests {
    struct Login {
        var key: String
        var secret: String
        var db: String
        var host: String
    }

    func login(_ s: TestServer, _ user: String, _ password: String) async throws -> Login {
        let reply = try await s.app(.POST, "/api/login", json: ["username": .string(user), "password": .string(password)])
        #expect(reply.status == 200, "\(reply.text)")
        let json = reply.json
        return Login(key: json["api_key"]!.stringValue!, secret: json["api_password"]!.stringValue!,
                     db: json["location_db_name"]!.stringValue!, host: json["location_db_host"]!.stringValue!)
    }

    @Test("Register, log in, replicate a device's locations with the returned credentials, query places; errors as documented; embedded and in cluster mode", arguments: [false, true])
    func endToEnd(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        // The original client's registration body.
        let registered = try await s.app(.PUT, "/api/users/alice", json: ["username": "alice", "password": "wonderland", "type": "user", "_id": "alice"])
        #expect(registered.status == 201 && registered.json == ["ok": true, "id": "alice"])
        #expect(try await s.app(.PUT, "/api/users/alice", json: ["password": "again"]).json == ["error": "User already exists"])
        #expect(try await s.app(.PUT, "/api/users/alice", json: ["password": "again"]).status == 409)
        #expect(try await s.app(.PUT, "/api/users/Not%20A%20Name", json: ["password": "x"]).status == 400)
        #expect(try await s.app(.PUT, "/api/users/carol", json: ["username": "carol"]).status == 400)

        let alice = try await login(s, "alice", "wonderland")
        #expect(alice.db == "lt_locations_user_alice" && alice.host == "127.0.0.1:\(s.port)")
        // A device's local database, replicated with exactly what the login returned.
        let directory = try TemporaryDirectory("lt-device")
        defer { directory.cleanup() }
        let device = try await DatabaseStore(directory: directory.url).create("locations")
        for i in 0..<25 {
            _ = try await device.update(DocumentInput(id: "fix\(i)", body: [
                "type": "Feature", "created_at": .double(1_700_000_000_000 + Double(i)),
                "geometry": ["type": "Point", "coordinates": [.double(-122.3 + Double(i) * 0.001), 37.49]],
                "properties": ["username": "alice", "background": false],
            ]))
        }
        let target = try RemoteEndpoint(url: "http://\(alice.host)/\(alice.db)", username: alice.key, password: alice.secret)
        let result = try await Replication(source: LocalEndpoint(store: try DatabaseStore(directory: directory.url), name: "locations"),
                                           target: target).run()
        #expect(result.status.docsWritten == 25)
        let mine = try await s.request(.GET, "/\(alice.db)/_all_docs", auth: .basic(alice.key, alice.secret))
        #expect(mine.status == 200 && mine.json["total_rows"] == 26)  // 25 fixes and the geo design document
        if !cluster {  // CouchDB has no _geo; the embedded server indexes users' databases too
            let near = try await s.request(.GET, "/\(alice.db)/_design/points/_geo/pointidx?lat=37.49&lon=-122.3&radius=200",
                                           auth: .basic(alice.key, alice.secret))
            #expect(near.status == 200 && (near.json["rows"]?.arrayValue?.count ?? 0) > 0)
        }

        // Places: the original query, every row with the created_at the original client needs.
        let places = try await s.app(.GET, "/api/places?lat=37.49453457&lon=-122.30464079&radius=4023.35&relation=contains&nearest=true&include_docs=true")
        let rows = places.json["rows"]?.arrayValue ?? []
        #expect(places.status == 200 && !rows.isEmpty && rows.allSatisfy { $0["doc"]?["created_at"]?.doubleValue != nil })
        #expect(try await s.app(.GET, "/api/places?lat=1&lon=1&radius=1&limit=500").status == 400)
        // The API describes itself.
        let openAPI = try await s.app(.GET, "/api/openapi.json")
        #expect(openAPI.json["openapi"] == "3.1.0")
        #expect(Set(openAPI.json["paths"]?.objectValue?.keys ?? []) == [
            "/api/users/{id}", "/api/login", "/api/places", "/api/owntracks", "/api/analysis/locations", "/api/analysis/users", "/api/analysis/users/{name}/stats",
            "/api/places/version", "/api/places/{id}/adjustments", "/api/adjustments/mine", "/api/adjustments", "/api/adjustments/{id}/{decision}",
            "/api/openapi.json", "/api/keys", "/api/keys/{key}", "/api/places/{id}", "/api/session", "/api/me/locations", "/api/me/live", "/api/me/password", "/api/status",
            "/api/me/imports", "/api/me/imports/{id}", "/api/users/{id}/imports",
        ])
        // The copy in the repository (JSON is YAML) is the document the server serves.
        let file = try JSON.parse(Array(Data(contentsOf: Repository.root.appendingPathComponent("docs/openapi.yaml"))))
        #expect(openAPI.json == file, "docs/openapi.yaml is out of date: curl -s http://127.0.0.1:8080/api/openapi.json | python3 -m json.tool --indent 2 --no-ensure-ascii > docs/openapi.yaml")
    }

    @Test("A user changes their password with the current one: the old one stops working, devices' keys keep working, dashboard sessions end; another user's credentials change only their own; embedded and in cluster mode", arguments: [false, true])
    func passwordChange(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        for name in ["kim", "lee"] { _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")]) }
        let kim = try await login(s, "kim", "pw-kim")
        let signedIn = try await s.app(.POST, "/api/session", json: ["username": "kim", "password": "pw-kim"])
        let cookie = (signedIn.headers["Set-Cookie"].first ?? "").split(separator: ";").first.map(String.init) ?? ""
        #expect(signedIn.status == 200 && cookie.hasPrefix("lt_session="))
        let path = "/api/me/password"
        #expect(try await s.app(.PUT, path, json: ["current_password": "wrong", "new_password": "x"], auth: .basic("kim", "pw-kim")).status == 401)
        #expect(try await s.app(.PUT, path, json: ["current_password": "pw-kim", "new_password": ""], auth: .basic("kim", "pw-kim")).status == 400)
        #expect(try await s.app(.PUT, path, json: ["new_password": "x"], auth: .basic("kim", "pw-kim")).status == 400)
        #expect(try await s.app(.PUT, path, json: ["current_password": "pw-kim", "new_password": "x"]).status == 401)
        // Lee's own credentials change Lee's password, never Kim's (the user is the one authenticated).
        #expect(try await s.app(.PUT, path, json: ["current_password": "pw-kim", "new_password": "taken"], auth: .basic("lee", "pw-lee")).status == 401)
        let changed = try await s.app(.PUT, path, json: ["current_password": "pw-kim", "new_password": "new-kim"], auth: .basic(kim.key, kim.secret))
        #expect(changed.status == 200 && changed.json["ok"] == true)
        #expect(try await s.app(.POST, "/api/login", json: ["username": "kim", "password": "pw-kim"]).status == 401)
        #expect(try await s.app(.POST, "/api/login", json: ["username": "kim", "password": "new-kim"]).status == 200)
        #expect(try await s.app(.POST, "/api/login", json: ["username": "lee", "password": "pw-lee"]).status == 200)
        #expect(try await s.request(.GET, "/\(kim.db)", auth: .basic(kim.key, kim.secret)).status == 200, "the device's key keeps working")
        let session = try await s.app(.GET, "/api/session", auth: .cookie(cookie))
        #expect(session.json["name"] == .null, "the dashboard session ended")
    }

    @Test("One user's database is closed to other users, to anonymous requests and to stale keys; the consolidated database to users; embedded and in cluster mode", arguments: [false, true])
    func privacy(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        for name in ["alice", "bob"] { _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")]) }
        let alice = try await login(s, "alice", "pw-alice")
        let bob = try await login(s, "bob", "pw-bob")
        #expect(try await s.request(.PUT, "/\(alice.db)/secret", json: ["note": "mine"], auth: .basic(alice.key, alice.secret)).status == 201)
        let db = alice.db
        let reads: [(HTTPMethod, String, JSON?)] = [
            (.GET, "/\(db)", nil), (.GET, "/\(db)/secret", nil), (.GET, "/\(db)/_all_docs", nil), (.GET, "/\(db)/_changes", nil),
            (.POST, "/\(db)/_find", ["selector": [:]]), (.GET, "/\(db)/_design/points/_geo/pointidx?lat=0&lon=0&radius=1", nil),
            (.POST, "/\(db)/_bulk_get", ["docs": [["id": "secret"]]]), (.POST, "/\(db)/_revs_diff", ["secret": ["1-x"]]),
            (.PUT, "/\(db)/intruder", ["x": 1]), (.POST, "/\(db)/_bulk_docs", ["docs": [["_id": "intruder"]]]),
            (.GET, "/\(db)/secret/attachment", nil), (.GET, "/_all_dbs", nil),
            (.GET, "/lt_locations_all/_all_docs", nil), (.GET, "/lt_users/alice", nil),
        ]
        for (method, path, body) in reads {
            let asBob = try await s.request(method, path, json: body, auth: .basic(bob.key, bob.secret))
            // As CouchDB: a signed-in user is refused 403 by a database's _security, 401 by a server-admin endpoint.
            #expect(asBob.status == (path == "/_all_dbs" ? 401 : 403), "bob \(method) \(path): \(asBob.status)")
            let anonymous = try await s.request(method, path, json: body, auth: .none)
            #expect(anonymous.status == 401, "anonymous \(method) \(path): \(anonymous.status)")
        }
        #expect(try await s.request(.GET, "/\(db)/secret", auth: .basic(alice.key, "wrong")).status == 401)
        // Each login is a key of its own; the user's password itself opens no database.
        let second = try await login(s, "alice", "pw-alice")
        #expect(second.key != alice.key)
        #expect(try await s.request(.GET, "/\(db)/secret", auth: .basic(second.key, second.secret)).status == 200)
        #expect(try await s.request(.GET, "/\(db)/secret", auth: .basic("alice", "pw-alice")).status == 401)
        // Keys are listed per user without secrets, and revoked one by one by their user only.
        let listed = try await s.app(.GET, "/api/keys", auth: .basic("alice", "pw-alice"))
        #expect(Set(listed.json["keys"]?.arrayValue?.compactMap { $0["api_key"]?.stringValue } ?? []) == [alice.key, second.key])
        #expect(!listed.text.contains(alice.secret) && !listed.text.contains("derived_key"))
        #expect(try await s.app(.DELETE, "/api/keys/\(alice.key)", auth: .basic(bob.key, bob.secret)).status == 404)
        #expect(try await s.app(.DELETE, "/api/keys/\(alice.key)", auth: .basic(second.key, second.secret)).status == 200)
        // At once on lt; a real CouchDB may honour the revoked key until its credentials cache catches up.
        #expect(try await eventually(10) { try await s.request(.GET, "/\(db)/secret", auth: .basic(alice.key, alice.secret)).status == 401 })
        #expect(try await s.request(.GET, "/\(db)/secret", auth: .basic(second.key, second.secret)).status == 200)
        #expect(try await s.app(.GET, "/api/keys", auth: .basic(second.key, second.secret)).json["keys"]?.arrayValue?.count == 1)
        #expect(try await s.app(.GET, "/api/keys").status == 401)
        // Neither password nor key is stored readably.
        let stored = try await s.request(.GET, "/lt_users/alice")
        #expect(stored.json["password"] == nil && stored.json["derived_key"] != nil && !stored.text.contains("pw-alice"))
        let keyDoc = try await s.request(.GET, "/_users/org.couchdb.user:\(alice.key)")
        #expect(keyDoc.json["password"] == nil && !keyDoc.text.contains(alice.secret))
    }

    /// Waits (up to 10 s) until `lt_locations_all` has every (id, rev) pair.
    func consolidated(_ s: TestServer, _ expected: [String: String]) async throws -> Bool {
        for _ in 0..<100 {
            let all = try await s.request(.POST, "/lt_locations_all/_all_docs", json: ["keys": .array(expected.keys.sorted().map(JSON.string))])
            let revs = Dictionary(uniqueKeysWithValues: (all.json["rows"]?.arrayValue ?? []).compactMap { row -> (String, String)? in
                guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"]?.stringValue else { return nil }
                return (id, rev)
            })
            if revs == expected { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    @Test("Every user's locations reach lt_locations_all under <user>:<id> with the same revision, also after a restart; analysts can read them")
    func consolidation() async throws {
        let directory = try TemporaryDirectory("lt-consolidation")
        defer { directory.cleanup() }
        var s = try TestServer(dataDirectory: directory.url)
        var expected: [String: String] = [:]
        var logins: [String: Login] = [:]
        for name in ["alice", "bob"] {
            _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")])
            let login = try await login(s, name, "pw-\(name)")
            logins[name] = login
            let docs: [JSON] = (0..<20).map { i in
                ["_id": .string("\(name)-\(i)"), "type": "Feature", "geometry": ["type": "Point", "coordinates": [.double(-122.3 + Double(i) * 0.0001), 37.49]]]
            }
            let written = try await s.request(.POST, "/\(login.db)/_bulk_docs", json: ["docs": .array(docs)], auth: .basic(login.key, login.secret))
            for row in written.json.arrayValue ?? [] { expected["\(name):" + row["id"]!.stringValue!] = row["rev"]!.stringValue! }
        }
        // An edit and a deletion travel too.
        let alice = logins["alice"]!
        let edited = try await s.request(.PUT, "/\(alice.db)/alice-0", json: ["_rev": .string(expected["alice:alice-0"]!), "type": "Feature", "moved": true],
                                         auth: .basic(alice.key, alice.secret))
        expected["alice:alice-0"] = edited.json["rev"]!.stringValue!
        let deleted = try await s.request(.DELETE, "/\(alice.db)/alice-1?rev=\(expected["alice:alice-1"]!)", auth: .basic(alice.key, alice.secret))
        expected["alice:alice-1"] = deleted.json["rev"]!.stringValue!
        #expect(try await consolidated(s, expected))
        #expect(try await s.request(.GET, "/lt_locations_all/alice:alice-1").status == 404)  // deleted there too
        // The edit arrives with its history (one branch, no conflict), as replication would bring it.
        let copy = try await s.request(.GET, "/lt_locations_all/alice:alice-0?revs=true&conflicts=true").json
        #expect(copy["_revisions"]?["ids"]?.arrayValue?.count == 2 && copy["_conflicts"] == nil && copy["moved"] == true)

        // Written while the server is down? It cannot be; written after a restart, it arrives.
        s.stop()
        s = try TestServer(dataDirectory: directory.url)
        let restarted = s
        defer { restarted.stop() }
        let bob = logins["bob"]!
        let late = try await s.request(.PUT, "/\(bob.db)/bob-late", json: ["type": "Feature", "geometry": ["type": "Point", "coordinates": [-122.3, 37.49]]],
                                       auth: .basic(bob.key, bob.secret))
        expected["bob:bob-late"] = late.json["rev"]!.stringValue!
        #expect(try await consolidated(s, expected))
        // The consolidated geo index answers; an analyst may read, a user may not.
        let near = try await s.request(.GET, "/lt_locations_all/_design/points/_geo/pointidx?lat=37.49&lon=-122.3&radius=50&limit=200")
        let nearIDs = Set(near.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
        #expect(nearIDs.isSuperset(of: ["alice:alice-2", "bob:bob-0", "bob:bob-late"]))
        _ = try await s.request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        #expect(try await s.request(.GET, "/lt_locations_all/bob:bob-late", auth: .basic("ann", "pw-ann")).status == 200)
        #expect(try await s.request(.GET, "/lt_locations_all/bob:bob-late", auth: .basic(bob.key, bob.secret)).status == 403)
    }

    @Test("Deleting a user (with their password) removes their database, API keys and account; embedded and in cluster mode", arguments: [false, true])
    func deletion(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/eve", json: ["password": "pw-eve"])
        let eve = try await login(s, "eve", "pw-eve")
        #expect(try await s.request(.PUT, "/\(eve.db)/fix", json: ["n": 1], auth: .basic(eve.key, eve.secret)).status == 201)
        #expect(try await eventually { try await s.request(.GET, "/lt_locations_all/eve:fix").status == 200 }, "eve's fix consolidated")
        #expect(try await s.app(.DELETE, "/api/users/eve", auth: .basic("eve", "wrong")).status == 401)
        #expect(try await s.app(.DELETE, "/api/users/eve", auth: .basic(eve.key, eve.secret)).status == 403)  // a key is not the user
        let deleted = try await s.app(.DELETE, "/api/users/eve", auth: .basic("eve", "pw-eve"))
        #expect(deleted.status == 200 && deleted.json == ["ok": true, "id": "eve"])
        #expect(try await s.request(.GET, "/\(eve.db)").status == 404)
        #expect(try await s.request(.GET, "/lt_users/eve").status == 404)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:\(eve.key)").status == 404)
        #expect(try await s.request(.GET, "/_session", auth: .basic(eve.key, eve.secret)).status == 401)
        #expect(try await s.app(.POST, "/api/login", json: ["username": "eve", "password": "pw-eve"]).status == 401)
        // Her locations are kept for analysts under eve:, so the name is not free until an admin
        // purges them: a new eve would write into that namespace.
        let taken = try await s.app(.PUT, "/api/users/eve", json: ["password": "new"])
        #expect(taken.status == 409 && taken.json["reason"]?.stringValue?.contains("locations=purge") == true, "\(taken.json)")
        #expect(try await s.app(.DELETE, "/api/users/eve?locations=purge", auth: .basic("eve", "pw-eve")).status == 404)
        let purgedKept = try await s.app(.DELETE, "/api/users/eve?locations=purge", auth: .admin)
        #expect(purgedKept.status == 200 && purgedKept.json == ["ok": true, "id": "eve", "purged_locations": 1], "\(purgedKept.json)")
        #expect(try await s.app(.DELETE, "/api/users/eve?locations=purge", auth: .admin).status == 404)
        #expect(try await s.app(.PUT, "/api/users/eve", json: ["password": "new"]).status == 201)

        // An admin deletes a user with `lt users delete`, purging their consolidated locations.
        let again = try await login(s, "eve", "new")
        _ = try await s.request(.PUT, "/\(again.db)/trip", json: ["type": "Feature", "geometry": ["type": "Point", "coordinates": [1, 2]]],
                                auth: .basic(again.key, again.secret))
        for _ in 0..<100 where try await s.request(.GET, "/lt_locations_all/eve:trip").status != 200 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try await s.request(.GET, "/lt_locations_all/eve:trip").status == 200)
        func mapped() async throws -> JSON? { try await s.app(.GET, "/api/analysis/map?bbox=0,1,2,3&points=10", auth: .admin).json["total"] }
        #expect(try await eventually { try await mapped() == 1 }, "the trip on the analysts' map")
        let cli = try TestServer.runLT(["users", "delete", "eve", "--purge-locations",
                             "--app", "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.appPort)"])
        #expect(cli.status == 0 && cli.output.contains("deleted eve"), "\(cli.output)")
        let gone = try await s.request(.GET, "/lt_locations_all/eve:trip")
        #expect(gone.status == 404 && gone.json["reason"] == "missing")  // purged: no tombstone
        #expect(try await s.request(.GET, "/lt_users/eve").status == 404)
        // Off the map too: in cluster mode the instance's copy of lt_locations_all is purged as well.
        #expect(try await eventually { try await mapped() == 0 }, "the purged trip leaves the analysts' map")
    }

    @Test("OwnTracks HTTP mode: locations are stored once in the user's database; other messages are accepted; identity is checked; embedded and in cluster mode", arguments: [false, true])
    func ownTracks(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/frank", json: ["password": "pw-frank"])
        let frank = try await login(s, "frank", "pw-frank")
        let fix: JSON = ["_type": "location", "lat": 52.52, "lon": 13.405, "tst": 1_700_000_000, "acc": 12, "batt": 80, "tid": "fr",
                         "vel": 36, "cog": "north", "t": 7]
        for _ in 0..<2 {  // posted twice (OwnTracks retries), stored once
            let reply = try await s.app(.POST, "/api/owntracks?u=frank&d=phone", json: fix, auth: .basic(frank.key, frank.secret))
            #expect(reply.status == 200 && reply.json == [])
        }
        let stored = try await s.request(.GET, "/\(frank.db)/owntracks-phone-1700000000")
        #expect(stored.json["geometry"] == ["type": "Point", "coordinates": [13.405, 52.52]])
        #expect(stored.json["properties"]?["accuracy"] == 12 && stored.json["properties"]?["username"] == "frank")
        // OwnTracks' km/h as the m/s every location document holds; values of the wrong kind left out.
        #expect(stored.json["properties"]?["velocity"]?.doubleValue == 10 && stored.json["properties"]?["tracker_id"] == "fr")
        #expect(stored.json["properties"]?["course"] == .none && stored.json["properties"]?["trigger"] == .none)
        #expect(stored.json["_rev"]?.stringValue?.hasPrefix("1-") == true)
        // The user's own password with OwnTracks' identity headers.
        var headers: [(String, String)] = [("X-Limit-U", "frank"), ("X-Limit-D", "watch")]
        let second = try await s.request(.POST, "/api/owntracks", json: ["_type": "location", "lat": 52.5, "lon": 13.4, "tst": 1_700_000_060],
                                         auth: .basic("frank", "pw-frank"), headers: headers, base: "http://127.0.0.1:\(s.appPort)")
        #expect(second.status == 200)
        #expect(try await s.request(.GET, "/\(frank.db)/owntracks-watch-1700000060").status == 200)
        headers = [("X-Limit-U", "someone-else")]
        let impostor = try await s.request(.POST, "/api/owntracks", json: fix, auth: .basic(frank.key, frank.secret), headers: headers,
                                           base: "http://127.0.0.1:\(s.appPort)")
        #expect(impostor.status == 403)
        #expect(try await s.app(.POST, "/api/owntracks", json: fix, auth: .basic(frank.key, "wrong")).status == 401)
        #expect(try await s.app(.POST, "/api/owntracks", json: fix).status == 401)
        #expect(try await s.app(.POST, "/api/owntracks", json: ["_type": "transition", "event": "enter"], auth: .basic(frank.key, frank.secret)).json == [])
        #expect(try await s.app(.POST, "/api/owntracks", json: ["_type": "location", "lat": 95, "lon": 0, "tst": 1], auth: .basic(frank.key, frank.secret)).status == 400)
        #expect(try await s.request(.GET, "/\(frank.db)").json["doc_count"] == 3)  // two fixes and the geo design document
    }

    @Test("Analysts export locations as GeoJSON, CSV and GPX by user, time and area, and get per-user statistics; users cannot; embedded and in cluster mode", arguments: [false, true])
    func analysis(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/gina", json: ["password": "pw-gina"])
        let gina = try await login(s, "gina", "pw-gina")
        let fixes: [JSON] = [(0, 13.400, 52.500), (60_000, 13.401, 52.500), (120_000, 13.500, 52.600)].map { t, lon, lat in
            ["_id": .string("g\(t)"), "type": "Feature", "created_at": .double(1_700_000_000_000 + Double(t)),
             "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]], "properties": ["username": "gina", "accuracy": 5]]
        }
        _ = try await s.request(.POST, "/\(gina.db)/_bulk_docs", json: ["docs": .array(fixes)], auth: .basic(gina.key, gina.secret))
        _ = try await s.request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        let ann = TestServer.Auth.basic("ann", "pw-ann")
        let csv = try await s.app(.GET, "/api/analysis/locations?user=gina&format=csv", auth: ann)
        #expect(csv.status == 200 && csv.text.split(separator: "\n").count == 4 && csv.text.hasPrefix("id,username,timestamp,latitude,longitude,accuracy"))
        // A download names whose locations, which days and the format.
        #expect(csv.headers["Content-Disposition"] == ["attachment; filename=\"locations-gina.csv\""])
        let geojson = try await s.app(.GET, "/api/analysis/locations?user=gina&bbox=13.3,52.4,13.45,52.55", auth: ann)
        #expect(geojson.json["type"] == "FeatureCollection" && geojson.json["features"]?.arrayValue?.map { $0["id"] } == ["gina:g0", "gina:g60000"])
        let window = try await s.app(.GET, "/api/analysis/locations?user=gina&from=1700000030000&format=gpx", auth: ann)
        #expect(window.text.contains("<gpx") && window.text.components(separatedBy: "<trkpt ").count == 3)
        #expect(window.headers["Content-Disposition"] == ["attachment; filename=\"locations-gina-from-2023-11-14.gpx\""])
        let stats = try await s.app(.GET, "/api/analysis/users/gina/stats", auth: ann)
        #expect(stats.json["count"] == 3 && stats.json["first"] == 1_700_000_000_000.0)
        let distance = stats.json["distance_m"]?.doubleValue ?? 0
        #expect(distance > 13_000 && distance < 13_300)  // 68 m, then about 13.1 km
        // The overview of people: each with registration, devices and the location written last.
        _ = try await s.app(.PUT, "/api/users/hal", json: ["password": "pw-hal"])
        _ = try await s.app(.POST, "/api/login", json: ["username": "gina", "password": "pw-gina", "device": "Gina's tablet"])
        let people = try await s.app(.GET, "/api/analysis/users", auth: ann)
        let listed = people.json["users"]?.arrayValue ?? []
        #expect(people.status == 200 && listed.map { $0["name"] } == ["gina", "hal"] && people.json["next"] == .null, "\(people.text)")
        #expect(listed.first?["last"]?["time"] == 1_700_000_120_000.0 && listed.first?["last"]?["lat"] == 52.6 && listed.first?["last"]?["accuracy"] == 5)
        #expect(listed.first?["devices"]?.arrayValue?.map { $0["device"] } == [.null, "Gina's tablet"])
        #expect(!people.text.contains("key-"), "API keys' names are not listed")
        #expect(listed.last?["last"] == .null && listed.last?["registered"]?.doubleValue != nil)
        let page = try await s.app(.GET, "/api/analysis/users?limit=1", auth: ann).json
        #expect(page["users"]?.arrayValue?.map { $0["name"] } == ["gina"] && page["next"] == "gina")
        #expect(try await s.app(.GET, "/api/analysis/users?limit=1&after=gina", auth: ann).json["users"]?.arrayValue?.map { $0["name"] } == ["hal"])
        #expect(try await s.app(.GET, "/api/analysis/users?limit=0", auth: ann).status == 400)
        #expect(try await s.app(.GET, "/api/analysis/users?after=Not%20a%20name", auth: ann).status == 400)
        #expect(try await s.app(.GET, "/api/analysis/users", auth: .basic(gina.key, gina.secret)).status == 403)
        #expect(try await s.app(.GET, "/api/analysis/users").status == 401)
        // Everyone's locations, once consolidated.
        var everyone = 0
        for _ in 0..<50 where everyone < 3 {
            everyone = try await s.app(.GET, "/api/analysis/locations?format=csv", auth: ann).text.split(separator: "\n").count - 1
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(everyone == 3)
        #expect(try await s.app(.GET, "/api/analysis/locations", auth: .basic(gina.key, gina.secret)).status == 403)
        #expect(try await s.app(.GET, "/api/analysis/users/gina/stats").status == 401)
        #expect(try await s.app(.GET, "/api/analysis/locations?user=nobody", auth: ann).status == 404)
        #expect(try await s.app(.GET, "/api/analysis/locations?format=kml", auth: ann).status == 400)

        // The same through `lt analysis`, streamed to a file; times as ISO 8601 (1700000030000 ms).
        let app = "http://ann:pw-ann@127.0.0.1:\(s.appPort)"
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let file = directory.url.appendingPathComponent("gina.csv").path
        let exported = try TestServer.runLT(["analysis", "export", "--app", app, "--user", "gina", "--from", "2023-11-14T22:13:50Z",
                                             "--format", "csv", "--output", file])
        #expect(exported.status == 0, "\(exported.errors)")
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3 && lines.first?.hasPrefix("id,username,timestamp") == true && lines.dropFirst().map { $0.split(separator: ",")[0] }.sorted() == ["gina:g120000", "gina:g60000"])
        #expect(exported.errors.contains("wrote") && exported.errors.contains(file))
        let area = try TestServer.runLT(["analysis", "export", "--app", app, "--lat", "52.5", "--lon", "13.4", "--radius", "1000"])
        #expect(try JSON.parse(Array(area.output.utf8))["features"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted() == ["gina:g0", "gina:g60000"])
        // Negative coordinates are values, given after a space as a user types them.
        let everywhere = try TestServer.runLT(["analysis", "export", "--app", app, "--user", "gina", "--bbox", "-180,-90,180,90"])
        #expect(everywhere.status == 0 && (try? JSON.parse(Array(everywhere.output.utf8)))?["features"]?.arrayValue?.count == 3, "\(everywhere.errors)")
        let south = try TestServer.runLT(["analysis", "export", "--app", app, "--lat", "-33.9", "--lon", "-151.2", "--radius", "1000"])
        #expect(south.status == 0 && (try? JSON.parse(Array(south.output.utf8)))?["features"]?.arrayValue?.isEmpty == true, "\(south.errors)")
        let cliStats = try TestServer.runLT(["analysis", "stats", "gina", "--app", app])
        #expect(cliStats.status == 0 && (try? JSON.parse(Array(cliStats.output.utf8)))?["count"] == 3)
        // A user's own key is refused, with the server's reason; a half-given radius never leaves.
        let refused = try TestServer.runLT(["analysis", "export", "--app", "http://\(gina.key):\(gina.secret)@127.0.0.1:\(s.appPort)", "--output", file])
        #expect(refused.status != 0 && refused.errors.contains("403") && !refused.errors.contains("Usage:"), "\(refused.errors)")
        #expect(!FileManager.default.fileExists(atPath: file))  // no partial export left behind
        let halfRadius = try TestServer.runLT(["analysis", "export", "--app", app, "--lat", "52.5"])
        #expect(halfRadius.status != 0 && halfRadius.errors.contains("--radius"))
    }

    @Test("Every time the application stores is whole milliseconds written as a JSON integer, as the original's Date.now(): places seeded, imported and added, users, API keys, OwnTracks fixes")
    func integerTimestamps() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/iris", json: ["password": "pw-iris"])
        let iris = try await login(s, "iris", "pw-iris")
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        #expect(try await s.app(.POST, "/api/places", json: ["name": "Kiosk", "latitude": 37.5, "longitude": -122.3], auth: admin).status == 201)
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let file = directory.url.appendingPathComponent("new.geojson")
        try Data(#"{"type":"FeatureCollection","features":[{"type":"Feature","id":"bench-1","properties":{"name":"Bench"},"geometry":{"type":"Point","coordinates":[-122.31,37.51]}}]}"#.utf8).write(to: file)
        let imported = try TestServer.runLT(["places", "import", file.path, "--url", "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"])
        #expect(imported.status == 0, "\(imported.errors)")
        #expect(try await s.app(.POST, "/api/owntracks", json: ["_type": "location", "lat": 52.5, "lon": 13.4, "tst": 1_700_000_000],
                                auth: .basic(iris.key, iris.secret)).status == 200)
        // Read as bytes: a parsed value would not tell 1700000000000 from 1700000000000.0.
        for (db, least) in [("lt_places", 52), ("lt_users", 1), ("_users", 1), (iris.db, 1)] {
            let text = try await s.request(.GET, "/\(db)/_all_docs?include_docs=true").text
            let whole = text.components(separatedBy: #""created_at":"#).dropFirst().filter { $0.prefix { $0.isNumber }.count >= 10 && !$0.dropFirst($0.prefix { $0.isNumber }.count).hasPrefix(".") }
            let all = text.components(separatedBy: #""created_at":"#).count - 1
            #expect(all >= least && whole.count == all, "\(db): \(whole.count) of \(all) created_at values are whole integers")
        }
    }

    @Test("Exports are ordered by user, then time, whatever order the ids and writes were in; GPX has a track per user and a segment per UTC day; in both modes",
          arguments: ["db-per-user", "single-db"])
    func exportOrder(mode: String) async throws {
        let s = try TestServer(extraArguments: ["--mode", mode])
        defer { s.stop() }
        // Two users, five fixes each around midnight UTC (1700006400000 is 2023-11-15T00:00:00Z),
        // written in two batches out of time order, with ids whose order is not the time's.
        let midnight = 1_700_006_400_000
        let offsets = [-150_000, -30_000, 45_000, 90_000, 86_400_000 + 5_000]  // two on the 14th, two on the 15th, one on the 16th
        var expected: [(user: String, time: Int)] = []
        for user in ["hugo", "gina"] {
            _ = try await s.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")])
            let login = try await login(s, user, "pw-\(user)")
            let docs: [JSON] = offsets.enumerated().map { i, offset in
                ["_id": .string("\(user)-\(9 - i)"), "type": "Feature", "created_at": .int(midnight + offset),
                 "geometry": ["type": "Point", "coordinates": [.double(13.4 + Double(i) * 1e-3), 52.5]], "properties": ["username": .string(user)]]
            }
            for batch in [[docs[3], docs[0], docs[4]], [docs[2], docs[1]]] {
                let written = try await s.request(.POST, "/\(login.db)/_bulk_docs", json: ["docs": .array(batch)], auth: .basic(login.key, login.secret))
                #expect(written.status == 201)
            }
            expected += offsets.map { (user, midnight + $0) }
        }
        expected.sort { ($0.user, $0.time) < ($1.user, $1.time) }
        _ = try await s.request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        let ann = TestServer.Auth.basic("ann", "pw-ann")

        let consolidated = try await eventually {
            try await s.app(.GET, "/api/analysis/locations?format=csv", auth: ann).text.split(separator: "\n").count == 11
        }
        #expect(consolidated, "everyone's 10 locations in the export")
        let csv = try await s.app(.GET, "/api/analysis/locations?format=csv", auth: ann).text.split(separator: "\n").dropFirst()
        #expect(csv.map { line in let f = line.split(separator: ","); return "\(f[1]) \(Int(Double(f[2])!))" } == expected.map { "\($0.user) \($0.time)" })
        let geojson = try await s.app(.GET, "/api/analysis/locations?user=gina", auth: ann).json["features"]?.arrayValue ?? []
        #expect(geojson.compactMap { $0["properties"]?["created_at"]?.intValue } == expected.filter { $0.user == "gina" }.map(\.time))

        let gpx = try await s.app(.GET, "/api/analysis/locations?format=gpx", auth: ann)
        #expect(gpx.status == 200 && gpx.headers.first(name: "Content-Type") == "application/gpx+xml")
        let tracks = gpx.text.components(separatedBy: "<trk>").dropFirst()
        #expect(tracks.map { $0.hasPrefix("<name>gina</name>") } == [true, false] && tracks.last?.hasPrefix("<name>hugo</name>") == true, "\(gpx.text)")
        for track in tracks {  // per user: the 14th (2 fixes), the 15th (2), the 16th (1)
            #expect(track.components(separatedBy: "<trkseg>").dropFirst().map { $0.components(separatedBy: "<trkpt ").count - 1 } == [2, 2, 1])
        }
        let points = try TrackFile.read(Data(gpx.text.utf8))
        #expect(points.compactMap { $0.time.map { Int(($0.timeIntervalSince1970 * 1000).rounded()) } } == expected.map(\.time))

        // Nothing found is still a clear 404 (the export is sorted before the first byte is sent).
        let none = try await s.app(.GET, "/api/analysis/locations?user=nobody&format=gpx", auth: ann)
        #expect(none.status == 404 && none.json["error"] == "not_found")
    }

    @Test("Place corrections: users report, see only their own reports; admins approve (the place moves, old position kept, dataset version bumps) or reject, and undo either; embedded and in cluster mode", arguments: [false, true])
    func corrections(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        for name in ["hank", "ivy"] { _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")]) }
        let hank = try await login(s, "hank", "pw-hank")
        let hankAuth = TestServer.Auth.basic(hank.key, hank.secret)
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        let places = try await s.request(.GET, "/lt_places/_all_docs").json["rows"]?.arrayValue ?? []
        let ids = places.compactMap { $0["id"]?.stringValue }.filter { !$0.hasPrefix("_design/") && $0 != "dataset-release" }
        let (placeID, otherID) = (ids[0], ids[1])
        let original = try await s.request(.GET, "/lt_places/\(placeID)").json["geometry"]
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 1])

        let report = try await s.app(.POST, "/api/places/\(placeID)/adjustments", json: ["latitude": 37.5, "longitude": -122.3], auth: hankAuth)
        #expect(report.status == 201)
        let reportID = report.json["id"]!.stringValue!
        _ = try await s.app(.POST, "/api/places/\(otherID)/adjustments", json: ["latitude": 37.6, "longitude": -122.2], auth: .basic("hank", "pw-hank"))
        #expect(try await s.app(.POST, "/api/places/\(placeID)/adjustments", json: ["latitude": 95, "longitude": 0], auth: hankAuth).status == 400)
        #expect(try await s.app(.POST, "/api/places/nope/adjustments", json: ["latitude": 1, "longitude": 1], auth: hankAuth).status == 404)
        #expect(try await s.app(.POST, "/api/places/\(placeID)/adjustments", json: ["latitude": 1, "longitude": 1]).status == 401)
        // Submitters see their own reports only; the reports database is closed to users.
        #expect(try await s.app(.GET, "/api/adjustments/mine", auth: hankAuth).json["reports"]?.arrayValue?.count == 2)
        #expect(try await s.app(.GET, "/api/adjustments/mine", auth: .basic("ivy", "pw-ivy")).json["reports"]?.arrayValue?.count == 0)
        #expect(try await s.app(.GET, "/api/adjustments", auth: hankAuth).status == 403)  // reviewing is for admins
        #expect(try await s.request(.GET, "/lt_place_reports/_all_docs", auth: hankAuth).status == 403)
        // Admins review.
        let pending = try await s.app(.GET, "/api/adjustments", auth: admin).json["reports"]?.arrayValue ?? []
        #expect(pending.count == 2 && pending.allSatisfy { $0["reviewStatus"] == "submitted" && $0["submittedBy"] == "hank" })
        let approved = try await s.app(.POST, "/api/adjustments/\(reportID)/approve", auth: admin)
        #expect(approved.status == 200 && approved.json["dataVersion"] == 2)
        let moved = try await s.request(.GET, "/lt_places/\(placeID)").json
        #expect(moved["geometry"] == ["type": "Point", "coordinates": [-122.3, 37.5]] && moved["verified"] == true)
        #expect(moved["previousPositions"]?[0]?["geometry"] == original)
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 2])
        #expect(try await s.app(.POST, "/api/adjustments/\(reportID)/approve", auth: admin).status == 409)
        let otherReport = pending.first { $0["placeId"] == .string(otherID) }!["_id"]!.stringValue!
        // The same review from the command line.
        let appURL = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.appPort)"
        let listed = try TestServer.runLT(["places", "review", "--app", appURL])
        #expect(listed.status == 0 && listed.output.contains(otherReport) && !listed.output.contains(reportID))
        let rejected = try TestServer.runLT(["places", "review", "--app", appURL, "--reject", otherReport])
        #expect(rejected.status == 0 && rejected.output.contains("rejected"), "\(rejected.output)")
        #expect(try await s.app(.GET, "/api/adjustments?status=rejected", auth: admin).json["reports"]?.arrayValue?.count == 1)
        #expect(try await s.request(.GET, "/lt_places/\(otherID)").json["verified"] == nil)
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 2])

        // Import and export a GeoJSON FeatureCollection.
        let dbURL = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("lt-places-\(UUID().uuidString).geojson")
        defer { try? FileManager.default.removeItem(at: file) }
        let collection: JSON = ["type": "FeatureCollection", "features": [
            ["type": "Feature", "id": "fountain", "geometry": ["type": "Point", "coordinates": [-122.68, 45.52]], "properties": ["name": "Fountain"]],
            ["type": "Feature", "id": "statue", "geometry": ["type": "Point", "coordinates": [-122.67, 45.51]], "properties": ["name": "Statue"]],
        ]]
        try Data(collection.bytes).write(to: file)
        let imported = try TestServer.runLT(["places", "import", file.path, "--url", dbURL])
        #expect(imported.status == 0 && imported.output.contains("2 places: 2 new, 0 updated, 0 unchanged; places release 3"), "\(imported.output)")
        let fountain = try await s.request(.GET, "/lt_places/fountain").json
        #expect(fountain["created_at"] != nil)
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 3])
        // The same file again changes nothing, not even the release devices compare.
        let again = try TestServer.runLT(["places", "import", file.path, "--url", dbURL])
        #expect(again.status == 0 && again.output.contains("2 places: 0 new, 0 updated, 2 unchanged; places release unchanged"), "\(again.output)")
        #expect(try await s.request(.GET, "/lt_places/fountain").json["_rev"] == fountain["_rev"])
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 3])
        // An edited file updates its place in place (same id, same created_at) and bumps the release once.
        let movedFile: JSON = ["type": "FeatureCollection", "features": [
            ["type": "Feature", "id": "fountain", "geometry": ["type": "Point", "coordinates": [-122.69, 45.53]], "properties": ["name": "Fountain"]],
        ]]
        try Data(movedFile.bytes).write(to: file)
        let edited = try TestServer.runLT(["places", "import", file.path, "--url", dbURL])
        #expect(edited.status == 0 && edited.output.contains("1 place: 0 new, 1 updated, 0 unchanged; places release 4"), "\(edited.output)")
        let movedDoc = try await s.request(.GET, "/lt_places/fountain").json
        #expect(movedDoc["geometry"]?["coordinates"] == [-122.69, 45.53] && movedDoc["created_at"] == fountain["created_at"])
        // The server's own sample places imported again: all already there under their ids;
        // the one whose correction was approved above takes the file's position again (an
        // import is the admin's word on the places) and keeps the record of its old positions.
        let samples = try TestServer.runLT(["places", "import", Repository.root.appendingPathComponent("data/sample-places.json").path, "--url", dbURL])
        #expect(samples.status == 0 && samples.output.contains("50 places: 0 new, 1 updated, 49 unchanged; places release 5"), "\(samples.output)")
        let reverted = try await s.request(.GET, "/lt_places/\(placeID)").json
        #expect(reverted["geometry"] == original && reverted["previousPositions"] != nil, "\(reverted.text)")
        // A file the command cannot use is an error without usage lines.
        let missing = try TestServer.runLT(["places", "import", "/nonexistent.geojson", "--url", dbURL])
        #expect(missing.status != 0 && missing.errors.contains("cannot read /nonexistent.geojson") && !missing.errors.contains("Usage:"), "\(missing.errors)")
        let exported = try TestServer.runLT(["places", "export", "--url", dbURL])
        let features = (try? JSON.parse(Array(exported.output.utf8)))?["features"]?.arrayValue ?? []
        #expect(features.count == 52 && features.contains { $0["id"] == "statue" && $0["properties"]?["name"] == "Statue" })

        // Undo. The first approval cannot be taken back: the import has moved the place since.
        let stale = try await s.app(.POST, "/api/adjustments/\(reportID)/undo", auth: admin)
        #expect(stale.status == 409 && stale.json["reason"]?.stringValue?.contains("moved since") == true, "\(stale.text)")
        // A rejection undone waits for review again, with what was undone kept; approved, then undone,
        // the place is back where it was (no record of a move, not verified) and the release moves on.
        let otherOriginal = try await s.request(.GET, "/lt_places/\(otherID)").json["geometry"]
        let undone = try await s.app(.POST, "/api/adjustments/\(otherReport)/undo", auth: admin)
        #expect(undone.status == 200 && undone.json["reviewStatus"] == "submitted" && undone.json["dataVersion"] == .null)
        #expect(try await s.app(.POST, "/api/adjustments/\(otherReport)/undo", auth: admin).status == 409)
        let waiting = try await s.app(.GET, "/api/adjustments", auth: admin).json["reports"]?.arrayValue ?? []
        #expect(waiting.map { $0["_id"] } == [.string(otherReport)] && waiting.first?["undone"]?[0]?["reviewStatus"] == "rejected")
        let release = try await s.app(.GET, "/api/places/version").json["dataVersion"]?.intValue ?? 0
        #expect(try await s.app(.POST, "/api/adjustments/\(otherReport)/approve", auth: admin).status == 200)
        #expect(try await s.request(.GET, "/lt_places/\(otherID)").json["geometry"] == ["type": "Point", "coordinates": [-122.2, 37.6]])
        let back = try await s.app(.POST, "/api/adjustments/\(otherReport)/undo", auth: admin)
        #expect(back.status == 200 && back.json["dataVersion"]?.intValue == release + 2)
        let restored = try await s.request(.GET, "/lt_places/\(otherID)").json
        #expect(restored["geometry"] == otherOriginal && restored["previousPositions"] == nil && restored["verified"] == nil, "\(restored.text)")
        #expect(try await s.app(.POST, "/api/adjustments/\(otherReport)/undo", auth: hankAuth).status == 403)
        #expect(try await s.app(.POST, "/api/adjustments/nope/undo", auth: admin).status == 404)
    }

    @Test("Authorization matrix of the application API: anonymous, user A, user B, analyst and admin against every endpoint, in both modes, embedded and in front of a cluster",
          arguments: ["db-per-user", "single-db", "cluster", "cluster-single-db"])
    func authorizationMatrix(mode: String) async throws {
        let singleDatabase = mode.hasSuffix("single-db")
        let s = try TestServer(cluster: mode.hasPrefix("cluster"), extraArguments: singleDatabase ? ["--mode", "single-db"] : [])
        defer { s.stop() }
        for name in ["amy", "ben"] { _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")]) }
        let amy = try await login(s, "amy", "pw-amy")
        let ben = try await login(s, "ben", "pw-ben")
        _ = try await (s.cluster ?? s).request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"])
        let place = try await s.request(.GET, "/lt_places/_all_docs?startkey=%22place-%22&limit=1").json["rows"]?[0]?["id"]?.stringValue ?? ""
        let report = try await s.app(.POST, "/api/places/\(place)/adjustments", json: ["latitude": 1, "longitude": 1], auth: .basic(amy.key, amy.secret))
        let reportID = report.json["id"]?.stringValue ?? ""
        let who: [(String, TestServer.Auth)] = [
            ("anonymous", .none), ("amy", .basic(amy.key, amy.secret)), ("ben", .basic(ben.key, ben.secret)),
            ("analyst", .basic("ann", "pw-ann")), ("admin", .basic(TestServer.admin.0, TestServer.admin.1)),
        ]
        // Expected status for each caller, in the order of `who`.
        let matrix: [(HTTPMethod, String, JSON?, [Int])] = [
            (.GET, "/api/analysis/locations?user=amy", nil, [401, 403, 403, 200, 200]),
            (.GET, "/api/analysis/users/amy/stats", nil, [401, 403, 403, 200, 200]),
            (.GET, "/api/analysis/users", nil, [401, 403, 403, 200, 200]),
            (.GET, "/api/adjustments", nil, [401, 403, 403, 403, 200]),
            (.GET, "/api/adjustments/mine", nil, [401, 200, 200, 401, 401]),
            (.GET, "/api/keys", nil, [401, 200, 200, 401, 401]),
            (.POST, "/api/adjustments/\(reportID)/reject", nil, [401, 403, 403, 403, 200]),
            (.POST, "/api/adjustments/\(reportID)/undo", nil, [401, 403, 403, 403, 200]),
            (.POST, "/api/places/\(place)/adjustments", ["latitude": 2, "longitude": 2], [401, 201, 201, 401, 401]),
            (.POST, "/api/owntracks?u=amy", ["_type": "location", "lat": 1, "lon": 1, "tst": 5], [401, 200, 403, 401, 401]),
            (.DELETE, "/api/users/amy", nil, [401, 403, 403, 403, 200]),
        ]
        // The database everyone's locations are in: analysts read it, only the server writes it.
        let all = singleDatabase ? "lt_locations_all_envoy" : "lt_locations_all"
        let written = try await s.request(.PUT, "/\(all)/by-admin", json: ["x": 1])
        #expect(written.status == 201)
        let rev = written.json["rev"]?.stringValue ?? ""
        let analyst = TestServer.Auth.basic("ann", "pw-ann")
        #expect(try await s.request(.GET, "/\(all)/by-admin", auth: analyst).status == 200)
        #expect(try await s.request(.PUT, "/\(all)/by-analyst", json: ["x": 1], auth: analyst).status == 403)
        #expect(try await s.request(.DELETE, "/\(all)/by-admin?rev=\(rev)", auth: analyst).status == 403)
        #expect(try await s.request(.POST, "/\(all)/_bulk_docs", json: ["docs": [["_id": "by-analyst"]]], auth: analyst).json[0]?["error"] == "forbidden")
        for (method, path, body, expected) in matrix {
            for ((name, auth), status) in zip(who, expected) {
                let reply = try await s.app(method, path, json: body, auth: auth)
                #expect(reply.status == status, "\(name) \(method) \(path): \(reply.status) \(reply.text.prefix(120))")
            }
        }
        // Ben's own report list never shows Amy's reports.
        let bens = try await s.app(.GET, "/api/adjustments/mine", auth: .basic(ben.key, ben.secret)).json["reports"]?.arrayValue ?? []
        #expect(bens.allSatisfy { $0["submittedBy"] == "ben" })
    }

    @Test("Repeated failed logins are throttled per user and per client address, with 429, even for the right password afterwards; embedded and in cluster mode", arguments: [false, true])
    func throttling(cluster: Bool) async throws {
        let s = try TestServer(cluster: cluster)
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/dave", json: ["password": "right"])
        for _ in 0..<5 {
            #expect(try await s.app(.POST, "/api/login", json: ["username": "dave", "password": "wrong"]).status == 401)
        }
        let blocked = try await s.app(.POST, "/api/login", json: ["username": "dave", "password": "right"])
        #expect(blocked.status == 429 && blocked.json["error"] == "too_many_requests")
        // Other users from the same address are refused after 30 failures in all.
        for i in 0..<25 {
            #expect(try await s.app(.POST, "/api/login", json: ["username": .string("guess\(i)"), "password": "x"]).status == 401)
        }
        #expect(try await s.app(.POST, "/api/login", json: ["username": "nobody", "password": "x"]).status == 429)
    }
}
