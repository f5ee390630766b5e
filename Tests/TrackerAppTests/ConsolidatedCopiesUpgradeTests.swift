import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// A `lt_locations_all` written before copies were kept by owner (issue 40), on a real server
/// restarted on it: every old copy ends up where it belongs, once.
@Suite("Consolidated copies: the upgrade to copies kept by owner", .serialized, .timeLimit(.minutes(3)))
struct ConsolidatedCopiesUpgradeTests {
    @Test("Old copies: re-copied from their users' databases, a forgery under another's name dropped (the forger's comes back as his), a deleted user's kept, a nameless one under ~unowned; run twice, nothing changes")
    func upgradeFromIDsAsGiven() async throws {
        let directory = try TemporaryDirectory("lt-upgrade")
        defer { directory.cleanup() }
        var s = try TestServer(dataDirectory: directory.url)
        var logins: [String: TestServer.Auth] = [:]
        for name in ["alice", "bob"] {
            _ = try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")])
            let login = try await s.app(.POST, "/api/login", json: ["username": .string(name), "password": .string("pw-\(name)")]).json
            logins[name] = .basic(login["api_key"]?.stringValue ?? "", login["api_password"]?.stringValue ?? "")
        }
        func fix(_ who: String, _ lon: Double) -> JSON {
            ["type": "Feature", "geometry": ["type": "Point", "coordinates": [.double(lon), 52.5]], "properties": ["username": .string(who)]]
        }
        #expect(try await s.request(.PUT, "/lt_locations_user_alice/a1", json: fix("alice", 13.1), auth: logins["alice"]!).status == 201)
        #expect(try await s.request(.PUT, "/lt_locations_user_alice/a2", json: fix("alice", 13.2), auth: logins["alice"]!).status == 201)
        #expect(try await s.request(.PUT, "/lt_locations_user_bob/b1", json: fix("alice", 66.6), auth: logins["bob"]!).status == 201)  // claims alice
        #expect(try await s.request(.PUT, "/lt_locations_user_bob/b2", json: fix("bob", 13.4), auth: logins["bob"]!).status == 201)
        #expect(try await eventually(20) { try await s.request(.GET, "/lt_locations_all/bob:b2").status == 200 })

        // Make it as an earlier version left it: copies under their own ids, no mark.
        var legacy: [JSON] = []
        for (db, id) in [("alice", "a1"), ("alice", "a2"), ("bob", "b1"), ("bob", "b2")] {
            var doc = try await s.request(.GET, "/lt_locations_user_\(db)/\(id)").json.objectValue ?? [:]
            doc["_revisions"] = try await s.request(.GET, "/lt_locations_user_\(db)/\(id)?revs=true").json["_revisions"]
            legacy.append(.object(doc))
        }
        legacy.append(["_id": "gone-1", "_rev": "1-0123456789abcdef0123456789abcdef", "type": "Feature",
                       "geometry": ["type": "Point", "coordinates": [1.0, 1.0]], "properties": ["username": "carol"]])
        legacy.append(["_id": "anon-1", "_rev": "1-fedcba9876543210fedcba9876543210", "type": "Feature", "geometry": ["type": "Point", "coordinates": [2.0, 2.0]]])
        #expect(try await s.request(.POST, "/lt_locations_all/_bulk_docs", json: ["docs": .array(legacy), "new_edits": false]).status == 201)
        var keyed: JSONObject = [:]
        for row in try await s.request(.GET, "/lt_locations_all/_all_docs").json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue, id.contains(":"), let rev = row["value"]?["rev"] else { continue }
            keyed[id] = [rev]
        }
        #expect(try await s.request(.POST, "/lt_locations_all/_purge", json: .object(keyed)).status == 201)
        let mark = try await s.request(.GET, "/lt_locations_all/_local/lt-copies-by-owner")
        #expect(mark.status == 200)
        #expect(try await s.request(.DELETE, "/lt_locations_all/_local/lt-copies-by-owner?rev=\(mark.json["_rev"]?.stringValue ?? "")").status == 200)
        s.stop()

        s = try TestServer(dataDirectory: directory.url)
        func ids() async throws -> [String] {
            (try await s.request(.GET, "/lt_locations_all/_all_docs").json["rows"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }.filter { !$0.hasPrefix("_design/") }
        }
        let expected = ["alice:a1", "alice:a2", "bob:b1", "bob:b2", "carol:gone-1", "~unowned:anon-1"]
        let upgraded = try await eventually(30) { try await ids() == expected }
        let found = try await ids()
        #expect(upgraded, "\(found)")
        let forged = try await s.request(.GET, "/lt_locations_all/bob:b1").json
        #expect(forged["properties"]?["username"] == "bob" && forged["geometry"]?["coordinates"]?[0] == 66.6)
        let original = try await s.request(.GET, "/lt_locations_user_alice/a1").json
        #expect(try await s.request(.GET, "/lt_locations_all/alice:a1").json["_rev"] == original["_rev"])
        #expect(try await s.request(.GET, "/lt_locations_all/_local/lt-copies-by-owner").status == 200)
        // A kept user's name is not free until an admin purges their copies.
        #expect(try await s.app(.PUT, "/api/users/carol", json: ["password": "pw"]).status == 409)
        s.stop()

        s = try TestServer(dataDirectory: directory.url)
        defer { s.stop() }
        try await Task.sleep(for: .seconds(1))
        #expect(try await ids() == expected)
    }
}
