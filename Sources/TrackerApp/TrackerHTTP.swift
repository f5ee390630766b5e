import CouchJSON
import CouchProtocol
import HTTPServing
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// What the application's listener accepts.
public struct AppLimits: Sendable {
    /// Largest request body of the application API (413 `too_large` beyond it).
    public var maxBodySize = 1 << 20
    /// Reverse proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    public var clientAddress = ClientAddress()
    public init() {}
}

/// The application API of the original Location Tracker server, unchanged for its client:
/// `PUT /api/users/:id`, `POST /api/login`, `GET /api/places`.
public struct TrackerHTTP: Sendable {
    let service: TrackerService
    /// The database API's port, for the `location_db_host` a login returns (known once that
    /// listener is up, so asked for each time).
    let databasePort: @Sendable () -> Int
    let assets: DashboardAssets
    let sessions = DashboardSessions()
    let limits: AppLimits
    /// The consolidator of this server (database-per-user mode), for `GET /api/status`.
    let consolidator: Consolidator?

    public init(service: TrackerService, dashboard: DashboardOptions = DashboardOptions(), limits: AppLimits = AppLimits(),
                consolidator: Consolidator? = nil, databasePort: @escaping @Sendable () -> Int) {
        self.service = service
        assets = DashboardAssets(dashboard)
        self.limits = limits
        self.consolidator = consolidator
        self.databasePort = databasePort
    }

    /// Who is asking, for login throttling: the peer, or the client a trusted proxy names.
    func client(_ request: Request, _ context: ClientRequestContext) -> String {
        limits.clientAddress.client(peer: context.peerAddress, headers: request.headers)
    }

    public var responder: CallbackResponder<ClientRequestContext> {
        CallbackResponder { request, context in await self.respond(request, context) }
    }

    /// Answers one request of the application API (what `responder` does; public for
    /// harnesses that drive it without a listener).
    public func respond(_ request: Request, _ context: ClientRequestContext) async -> Response {
        let path = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).map {
            $0.removingPercentEncoding ?? String($0)
        }
        do {
            switch (request.method, path.first, path.dropFirst().first) {
            case (.get, nil, _), (.head, nil, _):
                var response = Response(status: .found)
                response.headers[.location] = "/dashboard/"
                return response
            case (.get, "dashboard", _), (.head, "dashboard", _):
                if path.count == 1, !request.uri.path.hasSuffix("/") {
                    var response = Response(status: .movedPermanently)
                    response.headers[.location] = "/dashboard/"
                    return response
                }
                let gzip = request.headers[.acceptEncoding]?.contains("gzip") ?? false
                return dashboardFile(path, acceptsGzip: gzip) ?? TrackerHTTP.reply(["error": "not_found", "reason": "missing"], status: .notFound)
            case (.post, "api", "session") where path.count == 2:
                return try await signIn(request, context)
            case (.get, "api", "session") where path.count == 2:
                // As CouchDB's GET /_session: 200 either way, with no name when nobody is signed in.
                guard let session = session(request) else { return TrackerHTTP.reply(["ok": true, "name": .null, "roles": []]) }
                return TrackerHTTP.reply(sessionJSON(name: session.name, roles: session.roles, tracker: session.isTrackerUser))
            case (.delete, "api", "session") where path.count == 2:
                if let token = DashboardSessions.token(cookieHeader: request.headers[.cookie]) { sessions.end(token) }
                var response = TrackerHTTP.reply(["ok": true])
                response.headers[.setCookie] = DashboardSessions.setCookie(nil)
                return response
            case (.get, "api", "me") where path.count == 3 && path[2] == "locations":
                return try await myLocations(try await requireUser(request, context), request)
            case (.get, "api", "photos") where path.count == 2 || path.count == 4:
                // A user's own photos; admins and analysts: everyone's, or one user's (?user=).
                let (user, owner) = try await photoScope(request, context)
                if path.count == 2 {
                    let limit = min(max(Int(TrackerHTTP.query(request)["limit"] ?? "500") ?? 500, 1), 5000)
                    return TrackerHTTP.reply(try await service.photos(user: user, visibleTo: owner, limit: limit))
                }
                let photo = try await service.photo(id: path[2], attachment: path[3], user: user)
                var response = TrackerHTTP.file(photo.bytes, name: "", cache: false)
                response.headers[.contentType] = photo.contentType
                return response
            case (.get, "api", "me") where path.count == 3 && path[2] == "live":
                return myLive(try await requireUser(request, context))
            case (.post, "api", "places") where path.count == 2:
                _ = try await requireRole(["_admin"], request, context, purpose: "Editing places is for admins")
                return try await editPlace(.post, nil, request)
            case (.put, "api", "places") where path.count == 3, (.delete, "api", "places") where path.count == 3:
                _ = try await requireRole(["_admin"], request, context, purpose: "Editing places is for admins")
                return try await editPlace(request.method, path[2], request)
            case (.put, "api", "users") where path.count == 3:
                let body = try await json(request)
                return TrackerHTTP.reply(try await service.register(username: path[2], password: body["password"]), status: .created)
            case (.delete, "api", "users") where path.count == 3:
                // The user themself (their own name and password), or a server admin; admins
                // may also purge the user's locations from lt_locations_all (?locations=purge).
                guard let credentials = TrackerHTTP.basicCredentials(request) else {
                    throw TrackerService.Failure(401, "unauthorized", "Deleting a user needs that user's name and password, or an admin's (basic auth)")
                }
                let purge = TrackerHTTP.query(request)["locations"] == "purge"
                if credentials.name != path[2] {
                    _ = try await requireRole(["_admin"], request, context, purpose: "Deleting another user is for admins")
                    let answer = try await service.deleteUser(username: path[2], password: nil, asAdmin: true, purgeLocations: purge)
                    sessions.end(user: path[2])
                    return TrackerHTTP.reply(answer)
                }
                try service.throttle.check(account: path[2], client: client(request, context))
                do {
                    let answer = try await service.deleteUser(username: path[2], password: credentials.secret, asAdmin: false, purgeLocations: purge)
                    sessions.end(user: path[2])
                    return TrackerHTTP.reply(answer)
                } catch let failure as TrackerService.Failure where failure.status == 401 {
                    service.throttle.failed(account: path[2], client: client(request, context))
                    throw failure
                }
            case (.get, "api", "analysis") where path.count == 3 && path[2] == "locations":
                try await requireAnalyst(request, context)
                let query = TrackerHTTP.query(request)
                let filter = try LocationFilter(parameters: query)
                guard let format = ExportFormat(rawValue: query["format"] ?? "geojson") else {
                    throw TrackerService.Failure(400, "bad_request", "`format` must be geojson, csv or gpx")
                }
                if let user = filter.user { try await service.requireRegistered(user) }
                return exportResponse(filter, format)
            case (.get, "api", "analysis") where path.count == 3 && path[2] == "map":
                try await requireAnalyst(request, context)
                let reply = try await service.locationGrid(query: TrackerHTTP.query(request))
                return TrackerHTTP.reply(bytes: reply.body, status: HTTPResponse.Status(code: reply.status))
            case (.get, "api", "analysis") where path.count == 5 && path[2] == "users" && path[4] == "stats":
                try await requireAnalyst(request, context)
                try TrackerService.validate(username: path[3])
                return TrackerHTTP.reply(try await service.statistics(user: path[3]))
            case (.get, "api", "status") where path.count == 2:
                _ = try await requireRole(["_admin"], request, context, purpose: "The server's status is for admins")
                return TrackerHTTP.reply(status())
            case (.get, "api", "openapi.json") where path.count == 2:
                return TrackerHTTP.reply(OpenAPI.document)
            case (.post, "api", "owntracks") where path.count == 2:
                let user = try await requireUser(request, context)
                // Identity as OwnTracks sends it: ?u=&d= or X-Limit-U / X-Limit-D; the user must be the authenticated one.
                let query = TrackerHTTP.query(request)
                let claimed = query["u"] ?? request.headers[HTTPField.Name("X-Limit-U")!] ?? user
                guard claimed == user else { throw TrackerService.Failure(403, "forbidden", "Credentials of \(user) cannot post as \(claimed)") }
                let device = query["d"] ?? request.headers[HTTPField.Name("X-Limit-D")!] ?? ""
                return TrackerHTTP.reply(try await service.ownTracks(user: user, device: device, message: try await json(request)))
            case (.post, "api", "login") where path.count == 2:
                let body = try await json(request)
                guard let username = body["username"]?.stringValue, let password = body["password"]?.stringValue else {
                    throw TrackerService.Failure(400, "bad_request", "`username` and `password` strings are required")
                }
                let host = TrackerHTTP.hostname(request.head.authority)
                let answer = try await service.login(
                    username: username, password: password, client: client(request, context),
                    host: "\(host):\(databasePort())", device: body["device"]?.stringValue)
                return TrackerHTTP.reply(answer)
            case (.get, "api", "keys") where path.count == 2:
                let user = try await requireUser(request, context)
                return TrackerHTTP.reply(try await service.apiKeys(of: user))
            case (.delete, "api", "keys") where path.count == 3:
                let user = try await requireUser(request, context)
                return TrackerHTTP.reply(try await service.revokeKey(path[2], of: user))
            case (.get, "api", "places") where path.count == 3 && path[2] == "version":
                return TrackerHTTP.reply(try await service.placesVersion())
            case (.post, "api", "places") where path.count == 4 && path[3] == "adjustments":
                let user = try await requireUser(request, context)
                return TrackerHTTP.reply(try await service.submitAdjustment(place: path[2], by: user, body: try await json(request)),
                                         status: .created)
            case (.get, "api", "adjustments") where path.count == 3 && path[2] == "mine":
                let user = try await requireUser(request, context)
                return TrackerHTTP.reply(try await service.adjustments(submittedBy: user, status: nil))
            case (.get, "api", "adjustments") where path.count == 2:
                _ = try await requireRole(["_admin"], request, context, purpose: "Reviewing place reports is for admins")
                return TrackerHTTP.reply(try await service.adjustments(submittedBy: nil, status: TrackerHTTP.query(request)["status"] ?? "submitted"))
            case (.post, "api", "adjustments") where path.count == 4 && (path[3] == "approve" || path[3] == "reject"):
                let admin = try await requireRole(["_admin"], request, context, purpose: "Reviewing place reports is for admins")
                return TrackerHTTP.reply(try await service.review(report: path[2], approve: path[3] == "approve", by: admin))
            case (.get, "api", "places") where path.count == 2:
                let reply = try await service.places(query: TrackerHTTP.query(request))
                return TrackerHTTP.reply(bytes: reply.body, status: HTTPResponse.Status(code: reply.status))
            case (_, "api", _):
                // A path of the API with another method: 405 with the methods it takes; any other path: 404.
                guard let methods = OpenAPI.methods(for: path), !methods.contains(request.method.rawValue) else {
                    throw TrackerService.Failure(404, "not_found", "\(request.uri.path) is not part of the API")
                }
                var failure = TrackerService.Failure(405, "method_not_allowed", "\(request.uri.path) takes \(methods.sorted().joined(separator: ", ")), not \(request.method)")
                failure.allow = methods.sorted()
                throw failure
            default:
                throw TrackerService.Failure(404, "not_found", "missing")
            }
        } catch let failure as TrackerService.Failure {
            var response = TrackerHTTP.reply(failure.body, status: HTTPResponse.Status(code: failure.status))
            if let allow = failure.allow { response.headers[.allow] = allow.joined(separator: ", ") }
            return response
        } catch let error as CouchError {
            return TrackerHTTP.reply(["error": .string(error.error), "reason": .string(error.reason)], status: HTTPResponse.Status(code: error.status))
        } catch {
            return TrackerHTTP.reply(["error": "Internal Server Error", "reason": .string("\(error)")], status: .internalServerError)
        }
    }

    /// `GET /api/status`: the mode, and where consolidation stands (what waits to be copied
    /// into `lt_locations_all`, databases that cannot be read, locations it refused).
    func status() -> JSON {
        ["mode": .string(service.mode.rawValue), "consolidation": consolidator.map(\.status.json) ?? .null]
    }

    static func query(_ request: Request) -> [String: String] {
        Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { $1 })
    }

    /// Admins and the `analyst` role only (basic auth, checked as the database checks it).
    func requireAnalyst(_ request: Request, _ context: ClientRequestContext) async throws {
        _ = try await requireRole(["_admin", "analyst"], request, context, purpose: "Analysis is for admins and analysts")
    }

    /// Basic-auth credentials the database accepts, of a user with one of `roles`; the name.
    func requireRole(_ roles: Set<String>, _ request: Request, _ context: ClientRequestContext, purpose: String) async throws -> String {
        guard let (name, secret) = TrackerHTTP.basicCredentials(request) else {
            if let session = session(request) {
                try TrackerHTTP.checkOrigin(request)
                guard !roles.isDisjoint(with: session.roles) else { throw TrackerService.Failure(403, "forbidden", purpose) }
                return session.name
            }
            throw TrackerService.Failure(401, "unauthorized", "\(purpose): send basic auth or sign in")
        }
        try service.throttle.check(account: name, client: client(request, context))
        guard let user = try await service.couch.verify(name: name, password: secret) else {
            service.throttle.failed(account: name, client: client(request, context))
            throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        service.throttle.succeeded(account: name, client: client(request, context))
        guard !roles.isDisjoint(with: user.roles) else { throw TrackerService.Failure(403, "forbidden", purpose) }
        return user.name
    }

    /// Whose photos a request may see: a tracker user their own (and is their owner); admins
    /// and analysts everyone's (nil) or one user's (`?user=`).
    func photoScope(_ request: Request, _ context: ClientRequestContext) async throws -> (user: String?, owner: String?) {
        if let (name, secret) = TrackerHTTP.basicCredentials(request) {
            // Basic auth: an admin or analyst, else a tracker user (an API key or their own password).
            let account = try await service.couch.verify(name: name, password: secret)
            if Set(account?.roles ?? []).isDisjoint(with: ["_admin", "analyst"]) {
                let user = try await requireUser(request, context)
                return (user, user)
            }
        } else if let session = session(request), session.isTrackerUser {
            return (session.name, session.name)
        }
        try await requireAnalyst(request, context)
        let user = TrackerHTTP.query(request)["user"].flatMap { $0.isEmpty ? nil : $0 }
        if let user {
            try TrackerService.validate(username: user)
            try await service.requireRegistered(user)
        }
        return (user, nil)
    }

    /// The application user behind basic auth: an API key and its password, or the user's own.
    func requireUser(_ request: Request, _ context: ClientRequestContext) async throws -> String {
        guard let (name, secret) = TrackerHTTP.basicCredentials(request) else {
            if let session = session(request) {
                try TrackerHTTP.checkOrigin(request)
                guard session.isTrackerUser else { throw TrackerService.Failure(403, "forbidden", "Signed in as \(session.name), who is not a tracker user") }
                return session.name
            }
            throw TrackerService.Failure(401, "unauthorized", "Send basic auth: an API key and its password, or your own (or sign in)")
        }
        try service.throttle.check(account: name, client: client(request, context))
        guard let user = try await service.authenticate(name: name, secret: secret) else {
            service.throttle.failed(account: name, client: client(request, context))
            throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        service.throttle.succeeded(account: name, client: client(request, context))
        return user
    }

    /// Locations streamed page by page in the chosen format.
    func exportResponse(_ filter: LocationFilter, _ format: ExportFormat) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        let service = self.service
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(string: format.header))
            var first = true
            try await service.forEachLocation(filter) { page in
                var out: [UInt8] = []
                for (doc, point, time) in page {
                    out += format.row(doc, point, time, first: first)
                    first = false
                }
                try await writer.write(ByteBuffer(bytes: out))
            }
            try await writer.write(ByteBuffer(string: format.footer))
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// The name and password of a basic `Authorization` header.
    static func basicCredentials(_ request: Request) -> (name: String, secret: String)? {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("basic "),
              let data = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// The host the client reached us by (the `Host` header without its port; IPv6 kept in brackets).
    static func hostname(_ authority: String?) -> String {
        guard let authority, !authority.isEmpty else { return "127.0.0.1" }
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") { return String(authority[...end]) }
        return authority.split(separator: ":").first.map(String.init) ?? "127.0.0.1"
    }

    /// The request body as a JSON object: 413 `too_large` beyond `limits.maxBodySize`, 400
    /// when it is not a JSON object.
    func json(_ request: Request) async throws -> JSONObject {
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: limits.maxBodySize) } catch is NIOTooManyBytesError {
            throw TrackerService.Failure(413, "too_large", "The request body is larger than \(limits.maxBodySize) bytes")
        }
        guard case let .object(object)? = try? JSON.parse(Array(buffer: buffer)) else {
            throw TrackerService.Failure(400, "bad_request", "The request body must be a JSON object")
        }
        return object
    }

    static func reply(_ json: JSON, status: HTTPResponse.Status = .ok) -> Response {
        reply(bytes: json.bytes + [10], status: status)
    }

    static func reply(bytes: [UInt8], status: HTTPResponse.Status) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
