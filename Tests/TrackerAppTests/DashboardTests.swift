import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The dashboard's server side against real `lt serve` processes: files, sign-in sessions, a
/// user's own locations (page and live stream) in both modes, place editing by admins.
@Suite("Dashboard API", .serialized, .timeLimit(.minutes(2)))
struct DashboardTests {
    /// Signs in; the session cookie's `name=value`.
    static func signIn(_ s: TestServer, _ name: String, _ password: String) async throws -> String? {
        let reply = try await s.app(.POST, "/api/session", json: ["username": .string(name), "password": .string(password)])
        guard reply.status == 200, let cookie = reply.headers.first(name: "Set-Cookie") else { return nil }
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
        return String(cookie.split(separator: ";")[0])
    }

    /// A location written by the user's device, as a replicator would (their API key, their database).
    static func put(_ s: TestServer, user: String, key: (String, String), id: String, lat: Double, time: Double) async throws {
        let doc: JSON = ["type": "Feature", "created_at": .double(time), "geometry": ["type": "Point", "coordinates": [-122.3, .double(lat)]],
                         "properties": ["username": .string(user)]]
        let database = s.process.arguments!.contains("single-db") ? "lt_locations_all_envoy" : "lt_locations_user_\(user)"
        let reply = try await s.request(.PUT, "/\(database)/\(id)", json: doc, auth: .basic(key.0, key.1))
        #expect(reply.status == 201, "\(reply.text)")
    }

    @Test("Files, sign-in and sign-out, own locations only (both modes), live updates, places edited by admins with the release bumped, cookie writes need the dashboard's header", arguments: ["db-per-user", "single-db"])
    func dashboard(mode: String) async throws {
        let s = try TestServer(extraArguments: ["--mode", mode, "--tiles", "none"])
        defer { s.stop() }
        // Files: the page, its script, the configuration; Leaflet from this server (Debian's files), never a CDN.
        #expect(try await s.app(.GET, "/").text.contains("<title>LocationTracker</title>"))  // redirected to /dashboard/
        let page = try await s.app(.GET, "/dashboard/")
        #expect(page.status == 200 && page.text.contains("<title>LocationTracker</title>") && page.headers.first(name: "Content-Type")!.hasPrefix("text/html"))
        let policy = page.headers.first(name: "Content-Security-Policy") ?? ""
        #expect(policy.contains("default-src 'self'") && policy.contains("frame-ancestors 'none'") && policy.contains("connect-src 'self'"))
        #expect(policy.contains("script-src 'self';") && !policy.contains("https://"), "\(policy)")
        #expect(page.headers.first(name: "X-Frame-Options") == "DENY")
        #expect(try await s.app(.GET, "/dashboard/app.js").headers.first(name: "Content-Type")!.hasPrefix("text/javascript"))
        let config = try await s.app(.GET, "/dashboard/config.json").json
        #expect(config["tiles"] == "none" && config["place_radius"] == 4023.35)
        // Debian's Leaflet is installed wherever the tests run (scripts/install-deps.sh).
        let leaflet = try #require(config["leaflet"]?.stringValue)
        #expect(leaflet.hasPrefix("vendor/") && config["markercluster"]?.stringValue?.hasPrefix("vendor/") == true)
        #expect(try await s.app(.GET, "/dashboard/" + leaflet).status == 200)
        #expect(try await s.app(.GET, "/dashboard/vendor/../../etc/passwd").status == 404)
        #expect(try await s.app(.GET, "/dashboard/secret.txt").status == 404)

        for user in ["ann", "ben"] { #expect(try await s.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)")]).status == 201) }
        var keys: [String: (String, String)] = [:]
        for user in ["ann", "ben"] {
            let login = try await s.app(.POST, "/api/login", json: ["username": .string(user), "password": .string("pw-\(user)")]).json
            keys[user] = (login["api_key"]!.stringValue!, login["api_password"]!.stringValue!)
        }
        for i in 0..<5 { try await Self.put(s, user: "ann", key: keys["ann"]!, id: "fix\(i)", lat: 37.4 + Double(i) * 0.01, time: 1_700_000_000_000 + Double(i) * 60_000) }
        // Ben uses the same ids: in single-db mode they must not mix.
        for i in 0..<3 { try await Self.put(s, user: "ben", key: keys["ben"]!, id: "fix\(i)", lat: 40.7, time: 1_700_000_000_000) }

        // Sign-in: a user, an admin; wrong passwords and API keys are not accepted here.
        #expect(try await Self.signIn(s, "ann", "wrong") == nil)
        #expect(try await Self.signIn(s, keys["ann"]!.0, keys["ann"]!.1) == nil)
        let ann = try #require(try await Self.signIn(s, "ann", "pw-ann"))
        let admin = try #require(try await Self.signIn(s, TestServer.admin.0, TestServer.admin.1))
        #expect(try await s.app(.GET, "/api/session").json == ["ok": true, "name": .null, "roles": []])
        let who = try await s.request(.GET, "/api/session", auth: .cookie(ann), base: "http://127.0.0.1:\(s.appPort)").json
        #expect(who["name"] == "ann" && who["kind"] == "user")

        // Her own locations, oldest first, with her ids; a time window; never ben's.
        let mine = try await s.request(.GET, "/api/me/locations", auth: .cookie(ann), base: "http://127.0.0.1:\(s.appPort)").json["locations"]?.arrayValue ?? []
        #expect(mine.map { $0["_id"]!.stringValue! } == ["fix0", "fix1", "fix2", "fix3", "fix4"])
        let window = try await s.request(.GET, "/api/me/locations?from=1700000060000&to=1700000120000&limit=1", auth: .cookie(ann),
                                         base: "http://127.0.0.1:\(s.appPort)").json["locations"]?.arrayValue ?? []
        #expect(window.map { $0["_id"]!.stringValue! } == ["fix2"])
        let newestTwo = try await s.request(.GET, "/api/me/locations?limit=2", auth: .cookie(ann), base: "http://127.0.0.1:\(s.appPort)").json["locations"]?.arrayValue ?? []
        #expect(newestTwo.map { $0["_id"]!.stringValue! } == ["fix3", "fix4"])
        #expect(try await s.request(.GET, "/api/me/locations", auth: .cookie(admin), base: "http://127.0.0.1:\(s.appPort)").status == 403)
        #expect(try await s.app(.GET, "/api/me/locations").status == 401)

        // Live: what her device pushes next arrives as a server-sent event; ben's does not.
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(s.appPort)/api/me/live")
        request.headers.add(name: "Cookie", value: ann)
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        #expect(response.headers.first(name: "Content-Type") == "text/event-stream")
        var stream = response.body.makeAsyncIterator()
        _ = try await stream.next()  // the opening comment: the feed is following now
        try await Self.put(s, user: "ben", key: keys["ben"]!, id: "fix9", lat: 40.8, time: 1_700_000_900_000)
        try await Self.put(s, user: "ann", key: keys["ann"]!, id: "fix9", lat: 37.9, time: 1_700_000_900_000)
        var received = ""
        while !received.contains("event: location") {
            guard let chunk = try await stream.next() else { break }
            received += String(buffer: chunk)
        }
        let line = received.split(separator: "\n").first { $0.hasPrefix("data: ") } ?? ""
        let data = (try? JSON.parse(Array(line.dropFirst(6).utf8))) ?? .null
        #expect(data["_id"] == "fix9" && data["geometry"]?["coordinates"]?[1] == 37.9, "\(received)")

        // Places: admins add, move and delete (each bumps the release); users cannot; bad input is a 400.
        let adminBase = "http://127.0.0.1:\(s.appPort)"
        let version = try await s.app(.GET, "/api/places/version").json["dataVersion"]!.intValue!
        let dashboardHeader = [("X-Requested-With", "lt-dashboard")]
        #expect(try await s.request(.POST, "/api/places", json: ["name": "Nowhere", "latitude": 1, "longitude": 2], auth: .cookie(admin), base: adminBase).status == 403)
        let created = try await s.request(.POST, "/api/places", json: ["name": "Depot", "latitude": 37.5, "longitude": -122.25], auth: .cookie(admin),
                                          headers: dashboardHeader, base: adminBase)
        #expect(created.status == 201 && created.json["dataVersion"]?.intValue == version + 1)
        let id = created.json["id"]!.stringValue!
        #expect(try await s.request(.PUT, "/api/places/\(id)", json: ["name": "Depot", "latitude": 95, "longitude": 0], auth: .cookie(admin),
                                    headers: dashboardHeader, base: adminBase).status == 400)
        #expect(try await s.request(.PUT, "/api/places/\(id)", json: ["name": "Depot 2", "latitude": 37.51, "longitude": -122.25], auth: .cookie(admin),
                                    headers: dashboardHeader, base: adminBase).status == 200)
        let stored = try await s.request(.GET, "/lt_places/\(id)").json
        #expect(stored["name"] == "Depot 2" && stored["geometry"]?["coordinates"]?[1] == 37.51 && stored["created_at"] != nil)
        #expect(try await s.request(.POST, "/api/places", json: ["name": "X", "latitude": 1, "longitude": 2], auth: .cookie(ann), headers: dashboardHeader, base: adminBase).status == 403)
        #expect(try await s.request(.DELETE, "/api/places/dataset-release", auth: .cookie(admin), headers: dashboardHeader, base: adminBase).status == 400)
        #expect(try await s.request(.DELETE, "/api/places/\(id)", auth: .cookie(admin), headers: dashboardHeader, base: adminBase).status == 200)
        #expect(try await s.request(.GET, "/lt_places/\(id)").status == 404)
        #expect(try await s.app(.GET, "/api/places/version").json["dataVersion"]?.intValue == version + 3)

        // Signing out ends the session; deleting the account ends its sessions too.
        #expect(try await s.request(.DELETE, "/api/session", auth: .cookie(admin), base: adminBase).headers.first(name: "Set-Cookie")?.contains("Max-Age=0") == true)
        #expect(try await s.request(.GET, "/api/session", auth: .cookie(admin), base: adminBase).json["name"] == .null)
        let ben = try #require(try await Self.signIn(s, "ben", "pw-ben"))
        #expect(try await s.app(.DELETE, "/api/users/ben", auth: .basic("ben", "pw-ben")).status == 200)
        #expect(try await s.request(.GET, "/api/me/locations", auth: .cookie(ben), base: adminBase).status == 401)
    }

    @Test("Map tiles: OpenStreetMap's with its attribution by default, any tile server with --tiles, each allowed by the page's content security policy")
    func tiles() async throws {
        let osm = try TestServer()
        defer { osm.stop() }
        let config = try await osm.app(.GET, "/dashboard/config.json").json
        #expect(config["tiles"] == "https://tile.openstreetmap.org/{z}/{x}/{y}.png")
        #expect(config["attribution"]?.stringValue?.contains("OpenStreetMap") == true)
        let policy = try await osm.app(.GET, "/dashboard/").headers.first(name: "Content-Security-Policy") ?? ""
        #expect(policy.contains("img-src 'self' data: blob: https://tile.openstreetmap.org;"), "\(policy)")
        let custom = try TestServer(extraArguments: ["--tiles", "https://{s}.tiles.example.org/{z}/{x}/{y}.png", "--tile-attribution", "Example"])
        defer { custom.stop() }
        #expect(try await custom.app(.GET, "/dashboard/config.json").json["attribution"] == "Example")
        let customPolicy = try await custom.app(.GET, "/dashboard/").headers.first(name: "Content-Security-Policy") ?? ""
        #expect(customPolicy.contains("https://*.tiles.example.org;"), "\(customPolicy)")
    }
}
