import CouchJSON
import CouchProtocol
import ExternalSort
import Foundation
public import HTTPServing
import HTTPTypes
public import Hummingbird
import NIOCore

/// What the application's listener accepts.
public struct AppLimits: Sendable {
    /// Largest request body of the application API (413 `too_large` beyond it).
    public var maxBodySize = 1 << 20
    /// Reverse proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    public var clientAddress = ClientAddress()
    /// One info-level line per request (`--access-log`); off: at debug level.
    public var accessLog = true
    /// Where its requests are counted and timed (the database listener's, in `lt serve`); nil: nowhere.
    public var metrics: ServerMetrics?
    /// Registrations one address may make in an hour (`--max-registrations-per-hour`); server
    /// admins are not counted. 0: only admins register users.
    public var registrationsPerHour = 10
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
    /// The installable tracker app at `/app/`.
    let phoneApp = PhoneAppFiles()
    /// Location history imports, running and recent.
    let imports: HistoryImports
    let limits: AppLimits
    /// Registrations per address (`AppLimits.registrationsPerHour`).
    let registrations: ClientRateLimit
    /// The consolidator of this server (database-per-user mode), for `GET /api/status`.
    let consolidator: Consolidator?
    let accessLog: AccessLog
    /// Whether this listener serves TLS itself (`--tls-cert`): the dashboard's cookie is then
    /// `Secure`, as behind a proxy that says `X-Forwarded-Proto: https`.
    let servesTLS: Bool
    /// Every answer names its request (as the database API's `X-Couch-Request-ID`).
    static let requestIDHeader = HTTPField.Name("X-Request-ID")!

    public init(
        service: TrackerService, dashboard: DashboardOptions = DashboardOptions(), limits: AppLimits = AppLimits(),
        consolidator: Consolidator? = nil, servesTLS: Bool = false, databasePort: @escaping @Sendable () -> Int
    ) {
        self.service = service
        imports = HistoryImports(service: service)
        assets = DashboardAssets(dashboard)
        self.limits = limits
        registrations = ClientRateLimit(limit: limits.registrationsPerHour, window: 3600)
        self.consolidator = consolidator
        self.databasePort = databasePort
        self.servesTLS = servesTLS
        accessLog = AccessLog(logger: service.logger, listener: "application", enabled: limits.accessLog)
    }

    /// Who is asking, for login throttling: the peer, or the client a trusted proxy names.
    func client(_ request: Request, _ context: ClientRequestContext) -> String {
        limits.clientAddress.client(peer: context.peerAddress, headers: request.headers)
    }

    /// The listener's responder: the routes of `TrackerRoutes.swift` behind their middleware.
    public var responder: RouterResponder<ClientRequestContext> {
        makeRouter().buildResponder()
    }

    /// `GET /api/status`: the mode, and where consolidation stands (what waits to be copied
    /// into `lt_locations_all`, databases that cannot be read, locations it refused).
    func status() -> JSON {
        ["mode": .string(service.mode.rawValue), "consolidation": consolidator.map(\.status.json) ?? .null]
    }

    /// A count parameter of the application API (`limit`): absent, `default`; otherwise an
    /// integer within `range`, or 400 naming the parameter (never a silent default).
    static func count(
        _ query: [String: String], _ name: String, default value: Int, in range: ClosedRange<Int>
    ) throws -> Int {
        guard let text = query[name] else { return value }
        guard let count = Int(text), range.contains(count) else {
            throw TrackerService.Failure(
                400, "bad_request", "`\(name)` must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return count
    }

    static func query(_ request: Request) -> [String: String] {
        Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { $1 })
    }

    /// Admins and the `analyst` role only (basic auth, checked as the database checks it).
    func requireAnalyst(_ request: Request, _ context: ClientRequestContext) async throws {
        _ = try await requireRole(
            ["_admin", "analyst"], request, context, purpose: "Analysis is for admins and analysts")
    }

    /// Basic-auth credentials the database accepts, of a user with one of `roles`; the name.
    func requireRole(
        _ roles: Set<String>, _ request: Request, _ context: ClientRequestContext, purpose: String
    ) async throws -> String {
        guard let (name, secret) = TrackerHTTP.basicCredentials(request) else {
            if let session = try await session(request) {
                try TrackerHTTP.checkOrigin(request)
                guard !roles.isDisjoint(with: session.roles) else {
                    throw TrackerService.Failure(403, "forbidden", purpose)
                }
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
    func photoScope(_ request: Request, _ context: ClientRequestContext) async throws -> (user: String?, owner: String?)
    {
        if let (name, secret) = TrackerHTTP.basicCredentials(request) {
            // Basic auth: an admin or analyst, else a tracker user (an API key or their own password).
            let account = try await service.couch.verify(name: name, password: secret)
            if Set(account?.roles ?? []).isDisjoint(with: ["_admin", "analyst"]) {
                let user = try await requireUser(request, context)
                return (user, user)
            }
        } else if let session = try await session(request), session.isTrackerUser {
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
            if let session = try await session(request) {
                try TrackerHTTP.checkOrigin(request)
                guard session.isTrackerUser else {
                    throw TrackerService.Failure(
                        403, "forbidden", "Signed in as \(session.name), who is not a tracker user")
                }
                return session.name
            }
            throw TrackerService.Failure(
                401, "unauthorized", "Send basic auth: an API key and its password, or your own (or sign in)")
        }
        try service.throttle.check(account: name, client: client(request, context))
        guard let user = try await service.authenticate(name: name, secret: secret) else {
            service.throttle.failed(account: name, client: client(request, context))
            throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        service.throttle.succeeded(account: name, client: client(request, context))
        return user
    }

    /// Locations in the chosen format, ordered by user and then time: sorted first (a
    /// temporary file, `LocationReports.sortedExport`), so a filter that finds nothing is a 404,
    /// then streamed page by page.
    func exportResponse(_ filter: LocationFilter, _ format: ExportFormat) async throws -> Response {
        let sorted = try await service.reports.sortedExport(filter, format)
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.contentDisposition] = "attachment; filename=\"\(format.fileName(for: filter))\""
        let body = ResponseBody { writer in
            var export = ExportWriter(format)
            try await writer.write(ByteBuffer(bytes: export.header))
            try await sorted.forEachPage { rows in
                var out: [UInt8] = []
                for row in rows { out += export.append(user: row.group, time: row.time, record: row.body) }
                try await writer.write(ByteBuffer(bytes: out))
            }
            try await writer.write(ByteBuffer(bytes: export.footer))
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// The name and password of a basic `Authorization` header.
    static func basicCredentials(_ request: Request) -> (name: String, secret: String)? {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("basic "),
            let data = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
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
            throw TrackerService.Failure(
                413, "too_large", "The request body is larger than \(limits.maxBodySize) bytes")
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
