import CouchEngine
import CouchJSON
import Foundation
import Geo
import LTTestSupport
import NIOHTTP1
import Testing
import TrackerKit

/// Cluster mode against a stand-in cluster: a second `lt serve --database-only` speaking the
/// CouchDB API on its own port, or, with LT_TEST_COUCHDB_URL, that real CouchDB (emptied first:
/// a throwaway instance). The tests use nothing of it that CouchDB lacks: databases,
/// `_security`, `_users`, documents, `_session`.
@Suite("Cluster mode", .serialized, .timeLimit(.minutes(3)))
struct ClusterModeTests {
    static func start() throws -> (cluster: TestServer, url: String) {
        let cluster = try TestServer.clusterStandIn()
        return (cluster, cluster.adminURL)
    }

    @Test("Users, keys and private databases on the cluster; devices write there directly with their keys and nowhere else; consolidation into the cluster's lt_locations_all; places and the map answered from this server's mirrors; a second instance serves the same users")
    func application() async throws {
        let (cluster, url) = try Self.start()
        defer { cluster.stop() }
        let control = try TestServer(extraArguments: ["--couchdb", url])
        defer { control.stop() }
        // Nothing of the application is stored by the control plane's own database port but the mirrors.
        let dbs = try await cluster.request(.GET, "/_all_dbs").json.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(["lt_users", "lt_places", "lt_locations_all", "lt_place_reports"]).isSubset(of: Set(dbs)))

        for user in ["ivy", "jon"] {
            #expect(try await control.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")]).status == 201)
        }
        let security = try await cluster.request(.GET, "/lt_locations_user_ivy/_security").json
        #expect(security["members"]?["roles"] == ["lt_owner_ivy"])
        #expect(try await cluster.request(.GET, "/lt_users/ivy").json["password_scheme"] == "pbkdf2")
        let login = try await control.app(.POST, "/api/login", json: ["username": "ivy", "password": "pw-ivy"]).json
        #expect(login["location_db_host"] == .string("127.0.0.1:\(cluster.port)") && login["location_db_name"] == "lt_locations_user_ivy")
        let ivy = TestServer.Auth.basic(login["api_key"]!.stringValue!, login["api_password"]!.stringValue!)
        let jonLogin = try await control.app(.POST, "/api/login", json: ["username": "jon", "password": "pw-jon"]).json
        let jon = TestServer.Auth.basic(jonLogin["api_key"]!.stringValue!, jonLogin["api_password"]!.stringValue!)

        // The device writes to the cluster with its key; not to another user's database, not to lt_locations_all.
        for i in 0..<20 {
            let doc: JSON = ["type": "Feature", "created_at": .int(1_700_000_000_000 + i * 60_000),
                             "geometry": ["type": "Point", "coordinates": [.double(-122.3 + Double(i) * 0.001), 37.49]], "properties": ["username": "ivy"]]
            #expect(try await cluster.request(.PUT, "/lt_locations_user_ivy/ivy-\(i)", json: doc, auth: ivy).status == 201)
        }
        #expect(try await cluster.request(.GET, "/lt_locations_user_ivy/ivy-0", auth: jon).status == 403)
        #expect(try await cluster.request(.PUT, "/lt_locations_user_jon/x", json: ["a": 1], auth: ivy).status == 403)
        #expect(try await cluster.request(.GET, "/lt_locations_all", auth: ivy).status == 403)

        // Consolidated on the cluster; counted on the map from this server's mirror.
        #expect(try await eventually(30) {
            (try await cluster.request(.GET, "/lt_locations_all/_all_docs?startkey=%22ivy:ivy-%22&endkey=%22ivy:ivy.%22").json["rows"]?.arrayValue?.count ?? 0) == 20
        }, "20 locations in the cluster's lt_locations_all")
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        #expect(try await eventually(30) {
            try await control.app(.GET, "/api/analysis/map?bbox=-123,37,-122,38", auth: admin).json["total"] == 20
        }, "the map counting them")
        // One user's map: counted from their own documents on the cluster, with the same answer shape, filters and errors.
        let ivysMap = try await control.app(.GET, "/api/analysis/map?user=ivy&bbox=-123,37,-122,38&points=100", auth: admin).json
        #expect(ivysMap["total"] == 20 && ivysMap["points"]?.arrayValue?.count == 20 && ivysMap["columns"] == 16)
        #expect(Set((ivysMap["points"]?.arrayValue ?? []).compactMap { $0[2]?.stringValue }) == Set((0..<20).map { "ivy-\($0)" }))
        let window = "from=\(1_700_000_000_000 + 5 * 60_000)&to=\(1_700_000_000_000 + 9 * 60_000)"
        #expect(try await control.app(.GET, "/api/analysis/map?user=ivy&\(window)", auth: admin).json["total"] == 5)
        #expect(try await control.app(.GET, "/api/analysis/map?user=jon", auth: admin).json["total"] == 0)  // no locations yet
        #expect(try await control.app(.GET, "/api/analysis/map?user=ivy&columns=0", auth: admin).status == 400)

        // Places: the original query, answered from the mirror of the cluster's lt_places, equals brute force.
        let places = (try await cluster.request(.GET, "/lt_places/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []).compactMap { row -> (String, Coordinate)? in
            guard let doc = row["doc"], let place = PlaceDoc(json: doc), let id = place.id else { return nil }
            return (id, place.coordinate)
        }
        #expect(places.count == 50)
        let center = Coordinate(lon: -122.30464079, lat: 37.49453457)
        let expected = Set(places.filter { Sphere.distance(center, $0.1) <= 4023.35 }.map(\.0))
        #expect(try await eventually(30) {
            let rows = try await control.app(.GET, "/api/places?lat=37.49453457&lon=-122.30464079&radius=4023.35&relation=contains&nearest=true&limit=200").json["rows"]?.arrayValue ?? []
            return Set(rows.compactMap { $0["id"]?.stringValue }) == expected
        }, "the places mirror")

        // A second instance in front of the same cluster: the same users, keys and places.
        let second = try TestServer(extraArguments: ["--couchdb", url])
        defer { second.stop() }
        let again = try await second.app(.POST, "/api/login", json: ["username": "ivy", "password": "pw-ivy"]).json
        #expect(again["location_db_host"] == .string("127.0.0.1:\(cluster.port)"))
        #expect(try await second.app(.PUT, "/api/users/ivy", json: ["password": "x"]).status == 409)
        #expect(try await second.app(.GET, "/api/keys", auth: ivy).json["keys"]?.arrayValue?.count == 2)
        #expect(try await control.app(.DELETE, "/api/users/jon", auth: .basic("jon", "pw-jon")).status == 200)
        #expect(try await cluster.request(.GET, "/lt_locations_user_jon").status == 404)
        #expect(try await second.app(.POST, "/api/login", json: ["username": "jon", "password": "pw-jon"]).status == 401)
    }

    @Test("The control plane killed during a stream of device writes and started again: every location reaches the cluster's lt_locations_all and the map exactly once")
    func restart() async throws {
        let (cluster, url) = try Self.start()
        defer { cluster.stop() }
        let directory = try TemporaryDirectory("lt-control-plane")
        defer { directory.cleanup() }
        var control = try TestServer(dataDirectory: directory.url, extraArguments: ["--couchdb", url])
        let ports = (database: control.port, app: control.appPort)
        defer { control.stop() }
        var keys: [String: TestServer.Auth] = [:]
        for user in ["u1", "u2", "u3"] {
            _ = try await control.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")])
            let login = try await control.app(.POST, "/api/login", json: ["username": .string(user), "password": .string("pw-\(user)")]).json
            keys[user] = .basic(login["api_key"]!.stringValue!, login["api_password"]!.stringValue!)
        }
        var written = 0
        for i in 0..<150 {
            if i == 50 { control.kill() }
            if i == 100 { control = try TestServer(dataDirectory: directory.url, ports: ports, extraArguments: ["--couchdb", url]) }
            let user = "u\(i % 3 + 1)"
            let doc: JSON = ["type": "Feature", "created_at": .int(1_700_000_000_000 + i * 1000),
                             "geometry": ["type": "Point", "coordinates": [.double(10 + Double(i) * 0.0001), 50]], "properties": ["username": .string(user)]]
            if try await cluster.request(.PUT, "/lt_locations_user_\(user)/w-\(i)", json: doc, auth: keys[user]!).status == 201 { written += 1 }
        }
        #expect(written == 150)
        // Each user's copies under their own name: u1:w-…, u2:w-…, u3:w-….
        func copies() async throws -> [JSON] {
            var rows: [JSON] = []
            for user in ["u1", "u2", "u3"] {
                rows += try await cluster.request(.GET, "/lt_locations_all/_all_docs?startkey=%22\(user):w-%22&endkey=%22\(user):w.%22&include_docs=true&conflicts=true")
                    .json["rows"]?.arrayValue ?? []
            }
            return rows
        }
        #expect(try await eventually(60) { try await copies().count == 150 }, "150 locations in the cluster's lt_locations_all")
        let docs = try await copies()
        #expect(docs.allSatisfy { $0["doc"]?["_conflicts"] == nil && $0["value"]?["rev"]?.stringValue?.hasPrefix("1-") == true })
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        #expect(try await eventually(60) {
            try await control.app(.GET, "/api/analysis/map?bbox=9,49,11,51", auth: admin).json["total"] == 150
        }, "the map counting 150")

        // Down longer than purge notices are kept: the instance starts its copy of lt_locations_all afresh.
        #expect(try await eventually(30) { try await control.request(.GET, "/lt_locations_all/_local/lt-purges-applied").status == 200 },
                "the copy's place in lt_purges")
        control.stop()
        let copy = try await DatabaseStore(directory: directory.url).open("lt_locations_all")
        let checkpoint = try await copy.local.get(id: "_local/lt-purges-applied")
        var aged = checkpoint
        aged["applied_at"] = .double(0)
        _ = try await copy.local.put(id: "_local/lt-purges-applied", rev: checkpoint["_rev"]?.stringValue, body: aged, deleted: false)
        _ = try await copy.update(DocumentInput(id: "only-in-the-copy", body: ["x": 1]))
        control = try TestServer(dataDirectory: directory.url, ports: ports, extraArguments: ["--couchdb", url])
        #expect(try await control.request(.GET, "/lt_locations_all/only-in-the-copy").status == 404)
        #expect(try await eventually(60) {
            try await control.app(.GET, "/api/analysis/map?bbox=9,49,11,51", auth: admin).json["total"] == 150
        }, "the copy pulled again")
    }
}
