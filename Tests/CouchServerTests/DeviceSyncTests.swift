import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing
import TrackerKit

/// TrackerKit's store and sync against a real `lt serve`, with the credentials a login returns.
@Suite("Device sync", .serialized, .timeLimit(.minutes(2)))
struct DeviceSyncTests {
    @Test("Fixes filtered on the device are pushed once, requests during a push are coalesced, a second device pulls them; no server means offline")
    func pushPullCoalesce() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/alice", json: ["password": "pw"])
        let login = try await s.app(.POST, "/api/login", json: ["username": "alice", "password": "pw"]).json
        let server = ServerDatabase(url: "http://\(login["location_db_host"]!.stringValue!)/\(login["location_db_name"]!.stringValue!)",
                                    apiKey: login["api_key"]!.stringValue!, apiPassword: login["api_password"]!.stringValue!)
        let directory = try TemporaryDirectory("lt-device-sync")
        defer { directory.cleanup() }
        let phone = try LocalStore(directory: directory.url.appendingPathComponent("phone"))
        let sync = SyncManager(local: phone, server: server)

        // A walk north, a fix every 10 s, 20 m apart: every other one is kept (15 s rule).
        var monitor = LocationMonitor()
        var kept = 0
        for i in 0..<40 {
            let fix = LocationFix(coordinate: Coordinate(lon: -122.3, lat: 37.49 + Double(i) * 20 / 111_195), horizontalAccuracy: 5,
                                  timestamp: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 10))
            guard monitor.consider(fix, inBackground: false) == .accepted else { continue }
            try await phone.save(LocationDoc(fix: fix, username: "alice", background: false, sessionID: "walk"))
            kept += 1
            await sync.request(.push)  // after each saved location, as the original app
        }
        await sync.waitUntilIdle()
        #expect(kept == 20)
        let pushes = await sync.runs[.push] ?? 0
        #expect(pushes >= 1 && pushes < kept, "requests made while a push ran were coalesced: \(pushes) runs for \(kept) requests")
        #expect(await sync.status == .idle)
        let remote = try await s.request(.GET, "/\(login["location_db_name"]!.stringValue!)/_all_docs", auth: .basic(server.apiKey, server.apiPassword))
        #expect((remote.json["rows"]?.arrayValue ?? []).filter { !($0["id"]?.stringValue ?? "").hasPrefix("_design/") }.count == kept)

        // Another device of the same user pulls them.
        let tablet = try LocalStore(directory: directory.url.appendingPathComponent("tablet"))
        let tabletSync = SyncManager(local: tablet, server: server)
        await tabletSync.request(.pull)
        await tabletSync.waitUntilIdle()
        let pulled = try await tablet.recentLocations(limit: 1000)
        #expect(pulled.count == kept && pulled.allSatisfy { $0.sessionID == "walk" })

        // No server: offline, and nothing lost locally.
        let nowhere = SyncManager(local: phone, server: ServerDatabase(url: "http://127.0.0.1:1/nowhere", apiKey: "k", apiPassword: "p"))
        await nowhere.request(.push)
        await nowhere.waitUntilIdle()
        guard case .offline = await nowhere.status else {
            Issue.record("expected offline, got \(await nowhere.status)")
            return
        }
        #expect(try await phone.recentLocations(limit: 1000).count == kept)
    }

    @Test("The device API client: register, login, places near a position (offline afterwards too), the places release, a position report; errors as the server gives them; credentials in a 0600 file")
    func client() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let client = TrackerClient(baseURL: "http://127.0.0.1:\(s.appPort)")
        try await client.register(username: "dora", password: "explorer")
        do {
            try await client.register(username: "dora", password: "again")
            Issue.record("registering twice succeeded")
        } catch let failure as TrackerClient.Failure {
            #expect(failure.status == 409 && failure.error == "User already exists")
        }
        await #expect(throws: TrackerClient.Failure.self) { try await client.login(username: "dora", password: "wrong") }
        let credentials = try await client.login(username: "dora", password: "explorer", device: "phone")
        #expect(credentials.databaseName == "lt_locations_user_dora" && credentials.databaseHost == "127.0.0.1:\(s.port)")

        // Places online, remembered, then answered offline the same way.
        let center = Coordinate(lon: -122.30464079, lat: 37.49453457)
        let online = try await client.places(near: center, radius: 4023.35)
        #expect(!online.isEmpty && online.allSatisfy { $0.id != nil && !$0.name.isEmpty })
        let directory = try TemporaryDirectory("lt-device-client")
        defer { directory.cleanup() }
        let local = try LocalStore(directory: directory.url.appendingPathComponent("store"))
        try await local.remember(online)
        let offline = OfflinePlaces(try await local.allPlaces()).near(center, radius: 4023.35)
        #expect(offline.map { $0.place.id } == online.map(\.id))

        let release = try await client.placesVersion()
        #expect(release >= 1)
        let report = try await client.reportPosition(of: online[0].id!, at: Coordinate(lon: -122.3, lat: 37.5), credentials: credentials)
        #expect(!report.isEmpty)

        let store = FileCredentialStore(url: directory.url.appendingPathComponent("state/credentials.json"))
        try store.save(credentials)
        #expect(try store.load() == credentials)
        let mode = try FileManager.default.attributesOfItem(atPath: store.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try store.delete()
        #expect(try store.load() == nil)
    }

    @Test("lt device: register, log in again, export, status (also with the server gone), log out; JSON answers; errors as exit codes")
    func deviceCommands() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let directory = try TemporaryDirectory("lt-device-cli")
        defer { directory.cleanup() }
        let state = directory.url.appendingPathComponent("phone").path
        let server = "http://127.0.0.1:\(s.appPort)"
        let registered = try TestServer.runLT(["device", "register", "--server", server, "--state", state, "--username", "eve", "--password", "pw", "--json"])
        #expect(registered.status == 0)
        let json = try JSON.parse(Array(registered.output.utf8))
        #expect(json["ok"] == true && json["database"] == "lt_locations_user_eve")
        // Later commands read the server from the state.
        let again = try TestServer.runLT(["device", "login", "--state", state, "--username", "eve", "--password", "pw", "--json"])
        let againJSON = try JSON.parse(Array(again.output.utf8))
        #expect(again.status == 0 && againJSON["api_key"] != json["api_key"])
        #expect(try TestServer.runLT(["device", "login", "--state", state, "--username", "eve", "--password", "wrong"]).status != 0)
        let mode = try FileManager.default.attributesOfItem(atPath: state + "/credentials.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // What the device recorded, exported in each format.
        let local = try LocalStore(directory: URL(fileURLWithPath: state).appendingPathComponent("store"))
        for i in 0..<7 {
            try await local.save(LocationDoc(coordinate: Coordinate(lon: -122.3 + Double(i) * 1e-3, lat: 37.49), timestamp: 1_700_000_000_000 + Double(i) * 60_000,
                                             username: "eve", background: false, sessionID: "s"))
        }
        let csv = try TestServer.runLT(["device", "export", "--state", state, "--format", "csv"])
        #expect(csv.status == 0 && csv.output.split(separator: "\n").count == 8)
        let geojson = try JSON.parse(Array(try TestServer.runLT(["device", "export", "--state", state]).output.utf8))
        #expect(geojson["type"] == "FeatureCollection" && geojson["features"]?.arrayValue?.count == 7)
        let gpx = try TestServer.runLT(["device", "export", "--state", state, "--format", "gpx"]).output
        #expect(gpx.components(separatedBy: "<wpt ").count == 8 && gpx.hasSuffix("</gpx>\n"))
        #expect(try TestServer.runLT(["device", "export", "--state", state, "--format", "kml"]).status != 0)
        s.stop()
        // Offline: the device still knows who it is.
        let status = try TestServer.runLT(["device", "status", "--state", state, "--json"])
        let statusJSON = try JSON.parse(Array(status.output.utf8))
        #expect(status.status == 0 && statusJSON["logged_in"] == true && statusJSON["username"] == "eve" && statusJSON["locations"] == 7)
        #expect(try TestServer.runLT(["device", "logout", "--state", state, "--json"]).status == 0)
        let after = try JSON.parse(Array(try TestServer.runLT(["device", "status", "--state", state, "--json"]).output.utf8))
        #expect(after["logged_in"] == false)
    }
}
