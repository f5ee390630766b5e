import CouchJSON
import CouchProtocol
import HTTPServing
import Foundation
import Geo
import HTTPTypes
import Hummingbird

/// How the dashboard is served: the map tiles and where Leaflet comes from.
public struct DashboardOptions: Sendable {
    /// A Leaflet tile URL template; OpenStreetMap's by default.
    public var tileURL = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    public var tileAttribution =
        "&copy; <a href=\"https://www.openstreetmap.org/copyright\">OpenStreetMap</a> contributors"
    /// Where Debian's libjs-leaflet and libjs-leaflet.markercluster put their files (installed
    /// by scripts/install-deps.sh); when missing, the page says so and shows its lists only.
    public var leafletDirectory = "/usr/share/javascript/leaflet"

    public init() {}
}

/// What the dashboard serves, resolved once when the server starts: its own files, whether
/// Leaflet is there (Debian's files), the page's configuration and its content security policy.
struct DashboardAssets: Sendable {
    let pages: [String: [UInt8]]
    let config: JSON
    let contentSecurityPolicy: String
    let leafletDirectory: String
    /// The tile server's origin for a content security policy (" https://tile.example.org"; empty without tiles).
    let tileSource: String

    init(_ options: DashboardOptions) {
        leafletDirectory = options.leafletDirectory
        pages = TrackerHTTP.packageFiles(["index.html", "app.js", "app.css"], in: "Dashboard")
        func vendor(_ names: [String]) -> String? {
            names.first { FileManager.default.fileExists(atPath: options.leafletDirectory + "/" + $0) }.map {
                "vendor/" + $0
            }
        }
        let leaflet = vendor(["leaflet.min.js", "leaflet.js"])
        let cluster = vendor(["leaflet.markercluster.min.js", "leaflet.markercluster.js"])
        // Leaflet from this server only (no CDN at run time: a private server's page must not
        // depend on, or tell, a third party); without it the page says what to install.
        config = [
            "tiles": .string(options.tileURL), "attribution": .string(options.tileAttribution),
            "leaflet": leaflet.map(JSON.string) ?? .null,
            "leaflet_css": "vendor/leaflet.css",
            "markercluster": cluster.map(JSON.string) ?? .null,
            "markercluster_css": cluster != nil
                ? ["vendor/MarkerCluster.css", "vendor/MarkerCluster.Default.css"] : [],
            "place_radius": .double(4023.35),
        ]
        // Scripts and styles from this server, map tiles from the tile server, requests to this
        // server only; no framing. Leaflet positions everything with inline style attributes,
        // so those are allowed.
        var tiles = ""
        if let url = URL(
            string: options.tileURL.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "")),
            let scheme = url.scheme, let host = url.host
        {
            // `{s}.tile.example.org` (subdomains a, b, c): any subdomain of the rest.
            let allowed =
                options.tileURL.contains("{s}.")
                ? "*." + host.split(separator: ".").dropFirst().joined(separator: ".") : host
            tiles = " \(scheme)://\(allowed)"
        }
        tileSource = tiles
        contentSecurityPolicy =
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:\(tiles); "
            + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    }
}

/// The dashboard's files and its part of the API: sign-in with a session cookie, the signed-in
/// user's own locations (a page and a live stream), and place editing for admins.
extension TrackerHTTP {
    /// Answers `/dashboard/...`; nil for other paths.
    func dashboardFile(_ path: [String], acceptsGzip: Bool) -> Response? {
        guard path.first == "dashboard" else { return nil }
        let missing = TrackerHTTP.reply(["error": "not_found", "reason": "missing"], status: .notFound)
        if path.count >= 3, path[1] == "vendor" {
            return vendorFile(path[2...].joined(separator: "/"), acceptsGzip: acceptsGzip) ?? missing
        }
        if path.count == 2, path[1] == "config.json" { return TrackerHTTP.reply(assets.config) }
        let name = path.count == 1 ? "index.html" : path[1...].joined(separator: "/")
        guard let page = assets.pages[name] else { return missing }
        var response = TrackerHTTP.file(page, name: name, cache: false)
        if name == "index.html" {
            response.headers[HTTPField.Name("Content-Security-Policy")!] = assets.contentSecurityPolicy
            response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
            response.headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        }
        return response
    }

    /// Leaflet from the system (Debian's packages), only the files the pages use; their
    /// gzipped copies when the package has them and the browser takes them. Nil: not one of them.
    func vendorFile(_ name: String, acceptsGzip: Bool) -> Response? {
        let allowed = [
            "leaflet.js", "leaflet.min.js", "leaflet.css", "leaflet.markercluster.js", "leaflet.markercluster.min.js",
            "MarkerCluster.css", "MarkerCluster.Default.css",
            "images/marker-icon.png", "images/marker-icon-2x.png", "images/marker-shadow.png", "images/layers.png",
            "images/layers-2x.png",
        ]
        let file = assets.leafletDirectory + "/" + name
        guard allowed.contains(name) else { return nil }
        if acceptsGzip, let zipped = FileManager.default.contents(atPath: file + ".gz") {
            var response = TrackerHTTP.file(Array(zipped), name: name, cache: true)
            response.headers[.contentEncoding] = "gzip"
            response.headers[.vary] = "Accept-Encoding"
            return response
        }
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        return TrackerHTTP.file(Array(data), name: name, cache: true)
    }

    /// The package's files `names` in its resource folder `folder`, by name (read once, at start).
    static func packageFiles(_ names: [String], in folder: String) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in names {
            if let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: folder),
                let data = FileManager.default.contents(atPath: url.path)
            {
                files[name] = Array(data)
            }
        }
        return files
    }

    static let contentTypes = [
        "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "png": "image/png",
        "webmanifest": "application/manifest+json", "svg": "image/svg+xml",
    ]

    static func file(_ bytes: [UInt8], name: String, cache: Bool) -> Response {
        var headers = HTTPFields()
        headers[.contentType] =
            contentTypes[String(name.split(separator: ".").last ?? "")] ?? "application/octet-stream"
        headers[.cacheControl] = cache ? "public, max-age=86400" : "no-cache"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    // MARK: Sessions

    /// `POST /api/session` {username, password}: a tracker user, or an admin or analyst.
    func signIn(_ request: Request, _ context: ClientRequestContext) async throws -> Response {
        let body = try await json(request)
        guard let name = body["username"]?.stringValue, let password = body["password"]?.stringValue else {
            throw TrackerService.Failure(400, "bad_request", "`username` and `password` strings are required")
        }
        try service.throttle.check(account: name, client: client(request, context))
        var session: (roles: Set<String>, tracker: Bool)?
        if let user = try await service.couch.verify(name: name, password: password),
            !Set(user.roles).isDisjoint(with: ["_admin", "analyst"])
        {
            session = (Set(user.roles), false)
        } else if !name.hasPrefix("key-"), try await service.authenticate(name: name, secret: password) == name {
            session = ([TrackerService.ownerRole(name)], true)
        }
        guard let session else {
            service.throttle.failed(account: name, client: client(request, context))
            throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        service.throttle.succeeded(account: name, client: client(request, context))
        guard
            let account = try await service.accountState(
                name: name, kind: session.tracker ? .trackerUser : .databaseUser)
        else {
            throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        let token = sessions.start(name: name, roles: session.roles, isTrackerUser: session.tracker, account: account)
        var response = TrackerHTTP.reply(sessionJSON(name: name, roles: session.roles, tracker: session.tracker))
        response.headers[.setCookie] = DashboardSessions.setCookie(
            token, secure: servesTLS || request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https")
        return response
    }

    func sessionJSON(name: String, roles: Set<String>, tracker: Bool) -> JSON {
        // `mode`: where a user's locations live, which the account page explains on deletion.
        [
            "ok": true, "name": .string(name), "roles": .array(roles.sorted().map(JSON.string)),
            "kind": .string(tracker ? "user" : roles.contains("_admin") ? "admin" : "analyst"),
            "mode": .string(service.mode.rawValue),
        ]
    }

    /// The session a request's cookie names, if live: within its lifetime, and its account as
    /// it was at sign-in (same password, same roles, still there). A session whose account
    /// changed or went is ended here.
    func session(_ request: Request) async throws -> DashboardSessions.Session? {
        guard let token = DashboardSessions.token(cookieHeader: request.headers[.cookie]),
            let session = sessions.session(token)
        else { return nil }
        guard
            try await service.accountState(
                name: session.name, kind: session.isTrackerUser ? .trackerUser : .databaseUser) == session.account
        else {
            sessions.end(token)
            return nil
        }
        return session
    }

    /// Who a request's cookie says it is, unchecked (for the access log).
    func claimedSession(_ request: Request) -> DashboardSessions.Session? {
        DashboardSessions.token(cookieHeader: request.headers[.cookie]).flatMap(sessions.session)
    }

    /// The state of the account a request is authenticated as (`TrackerService.accountState`):
    /// its session's, or its basic credentials' (an API key, a tracker user, an admin or analyst).
    /// A stream compares it with the state it started with, and stops when it changed.
    func credentialState(_ request: Request) async throws -> String? {
        if let (name, _) = TrackerHTTP.basicCredentials(request) {
            if name.hasPrefix("key-") { return try await service.accountState(name: name, kind: .apiKey) }
            if (try? TrackerService.validate(username: name)) != nil,
                let state = try await service.accountState(name: name, kind: .trackerUser)
            {
                return state
            }
            return try await service.accountState(name: name, kind: .databaseUser)
        }
        guard let session = try await session(request) else { return nil }
        return session.account
    }

    /// Cookie-authenticated writes must come from the dashboard's own scripts (a header a
    /// cross-site form cannot set), on top of the SameSite=Strict cookie.
    static func checkOrigin(_ request: Request) throws {
        guard
            request.method == .get || request.method == .head
                || request.headers[HTTPField.Name("X-Requested-With")!] == "lt-dashboard"
        else {
            throw TrackerService.Failure(
                403, "forbidden",
                "Requests authenticated by the dashboard's cookie must send X-Requested-With: lt-dashboard")
        }
    }

    // MARK: The signed-in user's locations

    /// `GET /api/me/locations?limit=&from=&to=`: the user's own newest locations, oldest first.
    func myLocations(_ user: String, _ request: Request) async throws -> Response {
        let query = TrackerHTTP.query(request)
        var filter = try LocationFilter(parameters: query.filter { ["from", "to"].contains($0.key) })
        filter.user = user
        let limit = try TrackerHTTP.count(query, "limit", default: 100, in: 1...10_000)
        if filter.from == nil, filter.to == nil, service.mode == .databasePerUser {
            // The newest written, from the end of the changes feed: no full read of a long history.
            let docs = try await service.reports.newestLocations(of: user, limit: limit)
            return TrackerHTTP.reply(["locations": .array(docs)])
        }
        var newest: [(doc: JSON, time: Double)] = []
        do {
            try await service.reports.forEachLocation(filter) { page in
                newest += page.map { ($0.doc, $0.time) }
                if newest.count > limit * 4 { newest = Array(newest.sorted { $0.time > $1.time }.prefix(limit)) }
            }
        } catch let failure as TrackerService.Failure where failure.status == 404 {}
        let rows = newest.sorted { $0.time > $1.time }.prefix(limit).reversed().map {
            service.reports.visible($0.doc, to: user)
        }
        return TrackerHTTP.reply(["locations": .array(Array(rows))])
    }

    /// `GET /api/me/live`: the user's new locations as server-sent events, as they arrive, while
    /// `stillAllowed` (checked before anything new is sent: a revoked key, a deleted account
    /// or an ended session ends the stream).
    func myLive(_ user: String, stillAllowed: @escaping @Sendable () async throws -> Bool) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let service = self.service
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(string: ": live\n\n"))
            var since = "now"
            while !Task.isCancelled {
                let page = try await service.reports.changes(of: user, since: since, timeout: 10_000)
                since = page.lastSeq
                guard try await stillAllowed() else { break }
                for doc in page.docs {
                    let event = "event: location\ndata: " + service.reports.visible(doc, to: user).text + "\n\n"
                    try await writer.write(ByteBuffer(string: event))
                }
                if page.docs.isEmpty { try await writer.write(ByteBuffer(string: ": keep-alive\n\n")) }
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    // MARK: Places (admins)

    /// `POST /api/places` (create), `PUT /api/places/:id` (name and position), `DELETE
    /// /api/places/:id`; every change bumps the places release so devices pull again.
    func editPlace(_ method: HTTPRequest.Method, _ id: String?, _ request: Request) async throws -> Response {
        if method == .delete, let id {
            return TrackerHTTP.reply(try await service.places.deletePlace(id))
        }
        let body = try await json(request)
        guard let name = body["name"]?.stringValue, !name.isEmpty, let lat = body["latitude"]?.doubleValue,
            let lon = body["longitude"]?.doubleValue,
            (-90...90).contains(lat), (-180...180).contains(lon)
        else {
            throw TrackerService.Failure(
                400, "bad_request", "A place needs a `name`, `latitude` (−90…90) and `longitude` (−180…180)")
        }
        let saved = try await service.places.savePlace(id: id, name: name, position: Coordinate(lon: lon, lat: lat))
        return TrackerHTTP.reply(saved, status: id == nil ? .created : .ok)
    }
}
