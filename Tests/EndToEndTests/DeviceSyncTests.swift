import CouchEngine
import CouchJSON
import Foundation
import Geo
import LTTestSupport
import NIOHTTP1
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
        } catch let failure as TrackerKitError {
            #expect(failure.isServerAnswer && failure.status == 409 && failure.error == "User already exists")
        }
        await #expect(throws: TrackerKitError.self) { try await client.login(username: "dora", password: "wrong") }
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
        // Saved out of time order (as an import of an older track would be), two minutes apart
        // from 23:54:20 UTC, so the last three are on the next day.
        for i in [3, 0, 6, 1, 5, 2, 4] {
            try await local.save(LocationDoc(coordinate: Coordinate(lon: -122.3 + Double(i) * 1e-3, lat: 37.49), timestamp: 1_700_006_060_000 + Double(i) * 120_000,
                                             username: "eve", background: false, sessionID: "s"))
        }
        let csv = try TestServer.runLT(["device", "export", "--state", state, "--format", "csv"])
        let times = (0..<7).map { 1_700_006_060_000 + $0 * 120_000 }
        #expect(csv.status == 0 && csv.output.split(separator: "\n").dropFirst().map { Int(Double($0.split(separator: ",")[2])!) } == times)
        let geojson = try JSON.parse(Array(try TestServer.runLT(["device", "export", "--state", state]).output.utf8))
        #expect(geojson["type"] == "FeatureCollection" && geojson["features"]?.arrayValue?.compactMap { $0["properties"]?["timestamp"]?.intValue } == times)
        // GPX: one track named after the user, a segment per UTC day, oldest first; TrackerKit reads it back.
        let gpx = try TestServer.runLT(["device", "export", "--state", state, "--format", "gpx"]).output
        #expect(gpx.components(separatedBy: "<trk><name>eve</name>").count == 2 && gpx.components(separatedBy: "<trkseg>").count == 3
                && gpx.hasSuffix("</trkseg></trk>\n</gpx>\n"), "\(gpx)")
        let segments = gpx.components(separatedBy: "<trkseg>").dropFirst().map { $0.components(separatedBy: "<trkpt ").count - 1 }
        #expect(segments == [3, 4])  // 23:54:20, 23:56:20, 23:58:20 | 00:00:20 …
        let readBack = try TrackFile.read(Data(gpx.utf8))
        #expect(readBack.compactMap { $0.time.map { Int(($0.timeIntervalSince1970 * 1000).rounded()) } } == times)
        #expect(try TestServer.runLT(["device", "export", "--state", state, "--format", "kml"]).status != 0)
        s.stop()
        // Offline: the device still knows who it is.
        let status = try TestServer.runLT(["device", "status", "--state", state, "--json"])
        let statusJSON = try JSON.parse(Array(status.output.utf8))
        #expect(status.status == 0 && statusJSON["logged_in"] == true && statusJSON["username"] == "eve" && statusJSON["locations"] == 7)
        // The text, word for word (it once stopped after the account: an operator-precedence slip).
        let places = statusJSON["places"]?.intValue ?? -1, pending = statusJSON["pending"]?.intValue ?? -1
        let text = try TestServer.runLT(["device", "status", "--state", state]).output
        #expect(text == "logged in as eve (lt_locations_user_eve); 7 locations (\(pending) not pushed yet) and \(places) place\(places == 1 ? "" : "s") stored on the device\n",
                "\(text)")
        #expect(try TestServer.runLT(["device", "logout", "--state", state, "--json"]).status == 0)
        let after = try JSON.parse(Array(try TestServer.runLT(["device", "status", "--state", state, "--json"]).output.utf8))
        #expect(after["logged_in"] == false)
        let loggedOut = try TestServer.runLT(["device", "status", "--state", state]).output
        #expect(loggedOut.hasPrefix("logged out; ") && loggedOut.hasSuffix(" stored on the device\n"), "\(loggedOut)")
    }

    @Test("Places offline by region: every place near the device pulled page by page, pulled again when the release changes (moved and deleted places follow) or the device nears the edge; answers equal brute force")
    func placesRegion() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        // 450 more places on a grid around the original query point: more than two pages.
        let center = Coordinate(lon: -122.30464079, lat: 37.49453457)
        let grid: [JSON] = (0..<450).map { i in
            ["_id": .string("grid-\(i)"), "type": "Feature", "name": .string("grid \(i)"), "created_at": 1_700_000_000_000,
             "geometry": ["type": "Point", "coordinates": [.double(center.lon - 0.3 + Double(i % 30) * 0.02), .double(center.lat - 0.2 + Double(i / 30) * 0.027)]]]
        }
        #expect(try await s.request(.POST, "/lt_places/_bulk_docs", json: ["docs": .array(grid)]).status == 201)
        func serverPlaces() async throws -> [(id: String, coordinate: Coordinate)] {
            let rows = try await s.request(.GET, "/lt_places/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
            return rows.compactMap { row in row["doc"].flatMap(PlaceDoc.init(json:)).flatMap { p in p.id.map { ($0, p.coordinate) } } }
        }
        func within(_ radius: Double, of point: Coordinate, _ places: [(id: String, coordinate: Coordinate)]) -> Set<String> {
            Set(places.filter { Sphere.distance(point, $0.coordinate) <= radius }.map(\.id))
        }

        let directory = try TemporaryDirectory("lt-places-region")
        defer { directory.cleanup() }
        let store = try LocalStore(directory: directory.url.appendingPathComponent("store"))
        let cache = try await PlacesCache(client: TrackerClient(baseURL: "http://127.0.0.1:\(s.appPort)"), store: store, regionRadius: 20_000)
        #expect(await cache.covers(center) == false)
        #expect(try await cache.refresh(near: center))
        var all = try await serverPlaces()
        let region = within(20_000, of: center, all)
        #expect(region.count > 200)  // more than one page
        #expect(Set(try await store.allPlaces().compactMap(\.id)) == region)
        #expect(await cache.covers(center))
        // Nothing changed: no pull, even when asked to look at the release.
        #expect(try await cache.refresh(near: center, checkRelease: true) == false)
        let probe = Coordinate(lon: center.lon + 0.05, lat: center.lat - 0.03)
        let answer = await cache.near(probe)
        #expect(answer.complete && Set(answer.places.map { $0.place.id! }) == within(OfflinePlaces.defaultRadius, of: probe, all))
        for (a, b) in zip(answer.places, answer.places.dropFirst()) { #expect(a.distance <= b.distance + 0.01) }

        // A correction approved (the release changes) and a place deleted: the next pull follows both.
        let user = TrackerClient(baseURL: "http://127.0.0.1:\(s.appPort)")
        try await user.register(username: "mover", password: "pw-mover")
        let credentials = try await user.login(username: "mover", password: "pw-mover")
        let moved = Coordinate(lon: center.lon + 0.001, lat: center.lat + 0.001)
        let report = try await user.reportPosition(of: "grid-200", at: moved, credentials: credentials)
        #expect(try await s.app(.POST, "/api/adjustments/\(report)/approve", auth: admin).status == 200)
        let gone = try await s.request(.GET, "/lt_places/grid-201").json["_rev"]!.stringValue!
        #expect(try await s.request(.DELETE, "/lt_places/grid-201?rev=\(gone)").status == 200)
        #expect(try await cache.refresh(near: center) == false)  // the release was asked for a moment ago
        #expect(try await cache.refresh(near: center, checkRelease: true))
        let local = try await store.allPlaces()
        #expect(local.first { $0.id == "grid-200" }?.coordinate == moved)
        #expect(!local.contains { $0.id == "grid-201" })
        all = try await serverPlaces()
        #expect(Set(local.compactMap(\.id)) == within(20_000, of: center, all))

        // Past half the radius, the region moves with the device; outside it, answers say they are partial.
        let away = Coordinate(lon: center.lon + 0.15, lat: center.lat)
        #expect(try await cache.refresh(near: away))
        #expect(await cache.region?.center == away)
        s.stop()
        let far = Coordinate(lon: center.lon + 0.6, lat: center.lat)
        #expect(await cache.near(far).complete == false)
        #expect(await cache.near(away).complete)
        // The copy outlives the process: a new cache on the same store knows its region offline.
        let reopened = try await PlacesCache(client: TrackerClient(baseURL: "http://127.0.0.1:\(s.appPort)"), store: store, regionRadius: 20_000)
        let (reopenedRegion, reopenedCount) = (await reopened.region, await reopened.count)
        let (cacheRegion, cacheCount) = (await cache.region, await cache.count)
        #expect(reopenedRegion == cacheRegion && reopenedCount == cacheCount)
    }

    @Test("lt device import: GPX, GeoJSON and OwnTracks recordings stored once (importing again adds nothing), pushed to the user's database; the filter keeps what the app would; bad files are errors")
    func deviceImport() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let directory = try TemporaryDirectory("lt-device-import")
        defer { directory.cleanup() }
        let state = directory.url.appendingPathComponent("phone").path
        #expect(try s.registerDevice(state: state, username: "importer") == 0)
        // A GPX track: 20 points 10 m and 10 s apart (every other one is what the filter keeps).
        var gpx = "<gpx version=\"1.1\"><trk><trkseg>"
        for i in 0..<20 {
            gpx += "<trkpt lat=\"\(37.49 + Double(i) * 9e-5)\" lon=\"-122.3\"><time>2024-05-01T10:\(String(format: "%02d", i / 6)):\(String(format: "%02d", (i % 6) * 10))Z</time></trkpt>"
        }
        gpx += "</trkseg></trk></gpx>"
        let gpxFile = directory.url.appendingPathComponent("morning.gpx")
        try Data(gpx.utf8).write(to: gpxFile)
        let first = try TestServer.runLT(["device", "import", gpxFile.path, "--state", state, "--json"])
        let firstJSON = try JSON.parse(Array(first.output.utf8))
        #expect(first.status == 0 && firstJSON["read"] == 20 && firstJSON["imported"] == 20 && firstJSON["pushed"] == 20 && firstJSON["pending"] == 0)
        let again = try JSON.parse(Array(try TestServer.runLT(["device", "import", gpxFile.path, "--state", state, "--json"]).output.utf8))
        #expect(again["imported"] == 0 && again["already_there"] == 20 && again["pushed"] == 0)

        // OwnTracks recorder lines and a GeoJSON file, the second only on the device.
        let rec = directory.url.appendingPathComponent("2024-05.rec")
        try Data("""
            2024-05-02T08:00:00Z	*  	{"_type":"location","lat":37.6,"lon":-122.4,"tst":1714636800,"acc":10}
            2024-05-02T08:05:00Z	*  	{"_type":"location","lat":37.61,"lon":-122.41,"tst":1714637100,"acc":10}

            """.utf8).write(to: rec)
        #expect(try JSON.parse(Array(try TestServer.runLT(["device", "import", rec.path, "--state", state, "--json"]).output.utf8))["imported"] == 2)
        let geojson = directory.url.appendingPathComponent("walk.geojson")
        try Data(JSON.object(["type": "Feature", "geometry": ["type": "LineString", "coordinates": [[-122.5, 37.7], [-122.51, 37.71], [-122.52, 37.72]]],
                              "properties": ["coordTimes": ["2024-05-03T09:00:00Z", "2024-05-03T09:01:00Z", "2024-05-03T09:02:00Z"]]]).bytes).write(to: geojson)
        let local = try JSON.parse(Array(try TestServer.runLT(["device", "import", geojson.path, "--state", state, "--no-push", "--json"]).output.utf8))
        #expect(local["imported"] == 3 && local["pushed"] == 0 && local["pending"] == 3)

        // The filter: 10 m and 10 s apart is too close and too soon in the foreground: every other fix is kept.
        let filtered = try TestServer.runLT(["device", "import", gpxFile.path, "--state", directory.url.appendingPathComponent("other").path, "--json"])
        #expect(filtered.status != 0)  // that device is not logged in
        #expect(try TestServer.runLT(["device", "login", "--server", "http://127.0.0.1:\(s.appPort)", "--state", directory.url.appendingPathComponent("other").path,
                                      "--username", "importer", "--password", "pw-importer"]).status == 0)
        let kept = try JSON.parse(Array(try TestServer.runLT(["device", "import", gpxFile.path, "--state", directory.url.appendingPathComponent("other").path,
                                                             "--filter", "--no-push", "--json"]).output.utf8))
        #expect(kept["imported"] == 10 && kept["rejected"] == 10)

        let server = try await s.request(.GET, "/lt_locations_user_importer/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
        let docs = server.compactMap { $0["doc"] }.filter { $0["type"] == "Feature" }
        #expect(docs.count == 22)
        #expect(docs.allSatisfy { $0["properties"]?["username"] == "importer" && $0["properties"]?["session_id"]?.stringValue?.hasPrefix("import-") == true })
        #expect(docs.contains { $0["created_at"] == 1_714_636_800_000 })

        let bad = directory.url.appendingPathComponent("bad.gpx")
        try Data("<gpx><trk><trkseg><trkpt lat=\"100\" lon=\"0\"/></trkseg></trk></gpx>".utf8).write(to: bad)
        #expect(try TestServer.runLT(["device", "import", bad.path, "--state", state]).status != 0)
        #expect(try TestServer.runLT(["device", "import", "/nonexistent.gpx", "--state", state]).status != 0)
    }

    @Test("Continuous sync: what the device records reaches the server and what another device pushes arrives, with no requests; progress shows n/m; the server going away and coming back is ridden out")
    func continuousSync() async throws {
        let directory = try TemporaryDirectory("lt-device-continuous")
        defer { directory.cleanup() }
        var s = try TestServer(dataDirectory: directory.url.appendingPathComponent("server"))
        let ports = (database: s.port, app: s.appPort)
        defer { s.stop() }
        let client = TrackerClient(baseURL: "http://127.0.0.1:\(s.appPort)")
        try await client.register(username: "cleo", password: "pw-cleo")
        let credentials = try await client.login(username: "cleo", password: "pw-cleo")
        let phone = try LocalStore(directory: directory.url.appendingPathComponent("phone"))
        let statuses = Locked<[SyncManager.Status]>([])
        let sync = SyncManager(local: phone, server: credentials.serverDatabase) { status in statuses.withLock { $0.append(status) } }
        func location(_ i: Int) -> LocationDoc {
            LocationDoc(coordinate: Coordinate(lon: -122.3, lat: 37.49 + Double(i) * 1e-3), timestamp: 1_700_000_000_000 + Double(i) * 20_000,
                        username: "cleo", background: false, sessionID: "c")
        }
        func serverCount() async throws -> Int {
            let rows = try await s.request(.GET, "/lt_locations_user_cleo/_all_docs").json["rows"]?.arrayValue ?? []
            return rows.filter { !($0["id"]?.stringValue ?? "").hasPrefix("_design/") }.count
        }
        for i in 0..<300 { try await phone.save(location(i)) }
        await sync.startContinuous()
        #expect(await sync.isContinuous)
        #expect(try await eventually(30) { try await serverCount() == 300 }, "300 pushed within 30 s")
        // Progress as n/m (how many updates a quick push shows depends on timing; one at least).
        #expect(try await eventually(10) { statuses.withLock { $0.contains { if case let .syncing(.push, done, total?) = $0 { return done > 0 && total >= done } else { return false } } } },
                "\(statuses.withLock { $0 })")
        // Recorded later: goes by itself. Pushed by another device: arrives by itself.
        try await phone.save(location(300))
        #expect(try await eventually(30) { try await serverCount() == 301 }, "the new fix pushed within 30 s")
        let tablet = try LocalStore(directory: directory.url.appendingPathComponent("tablet"))
        try await tablet.save(location(1000))
        let tabletSync = SyncManager(local: tablet, server: credentials.serverDatabase)
        await tabletSync.request(.push)
        await tabletSync.waitUntilIdle()
        #expect(try await eventually(30) { try await phone.recentLocations(limit: 1000).count == 302 }, "the tablet's fix pulled within 30 s")
        // Pushes are recorded as the push replication reports them; the pulled fix may wait for the next checkpoint.
        #expect(try await eventually(10) { try await phone.pendingPush() <= 1 })

        // The server goes away: recorded meanwhile stays on the device, then goes when it is back.
        s.kill()
        for i in 301..<311 { try await phone.save(location(i)) }
        try await Task.sleep(for: .seconds(1))
        s = try TestServer(dataDirectory: directory.url.appendingPathComponent("server"), ports: ports)
        #expect(try await eventually(30) { try await serverCount() == 312 }, "the fixes recorded while the server was away pushed within 30 s")
        await sync.stopContinuous()
        #expect(await sync.isContinuous == false)
        #expect(try await phone.pendingPush() == 0)
        let written = await sync.written
        #expect((written[.push] ?? 0) >= 311 && (written[.pull] ?? 0) >= 1)
    }

    @Test("A device with no server at all still drives on its stored credentials, keeps everything, and `lt device sync` pushes it all once the server is back")
    func offlineDriveThenSync() async throws {
        let directory = try TemporaryDirectory("lt-device-offline-drive")
        defer { directory.cleanup() }
        var s = try TestServer(dataDirectory: directory.url.appendingPathComponent("server"))
        let ports = (database: s.port, app: s.appPort)
        defer { s.stop() }
        let state = directory.url.appendingPathComponent("phone").path
        #expect(try s.registerDevice(state: state, username: "otto") == 0)
        s.stop()
        let drive = try TestServer.runLT(["device", "drive", "--state", state, "--speed", "max", "--noise", "0m", "--json"])
        #expect(drive.status == 0)
        let summary = try JSON.parse(Array(drive.output.utf8))
        let kept = summary["accepted"]?.intValue ?? 0
        #expect(kept > 100 && summary["pending"]?.intValue == kept && summary["pushed"] == 0)
        #expect(summary["places_answers"]?["server"] == 0 && summary["places_answers"]?["device"]?.intValue == kept)
        let status = try JSON.parse(Array(try TestServer.runLT(["device", "status", "--state", state, "--json"]).output.utf8))
        #expect(status["pending"]?.intValue == kept && status["locations"]?.intValue == kept)
        #expect(try TestServer.runLT(["device", "sync", "--state", state, "--json"]).status != 0)  // still no server

        s = try TestServer(dataDirectory: directory.url.appendingPathComponent("server"), ports: ports)
        let synced = try TestServer.runLT(["device", "sync", "--state", state, "--json"])
        let syncJSON = try JSON.parse(Array(synced.output.utf8))
        #expect(synced.status == 0 && syncJSON["pushed"]?.intValue == kept && syncJSON["pending"] == 0)
        let rows = try await s.request(.GET, "/lt_locations_user_otto/_all_docs").json["rows"]?.arrayValue ?? []
        #expect(rows.filter { !($0["id"]?.stringValue ?? "").hasPrefix("_design/") }.count == kept)
    }
}
