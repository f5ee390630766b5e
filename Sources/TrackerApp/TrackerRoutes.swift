import CouchJSON
import CouchProtocol
import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird

/// The application listener's routes: one table from URL to handler, the dashboard's files,
/// its sign-in session and the API (`/api/...`, described in `OpenAPI.swift`). Failures
/// become `{"error","reason"}` in `ApplicationErrors`.
extension TrackerHTTP {
    func makeRouter() -> Router<ClientRequestContext> {
        let router = Router(context: ClientRequestContext.self)
        router.add(middleware: ApplicationAccessLog(http: self))
        router.add(middleware: ApplicationErrors())
        for method in [HTTPRequest.Method.get, .head] {
            router.on("/", method: method) { _, _ in TrackerHTTP.redirect(to: "/dashboard/", status: .found) }
            router.on("/dashboard", method: method) { request, _ in
                request.uri.path.hasSuffix("/")
                    ? try dashboardFile(request) : TrackerHTTP.redirect(to: "/dashboard/", status: .movedPermanently)
            }
            router.on("/dashboard/**", method: method) { request, _ in try dashboardFile(request) }
            router.on("/app", method: method) { request, _ in
                request.uri.path.hasSuffix("/")
                    ? try phoneAppFile(request) : TrackerHTTP.redirect(to: "/app/", status: .movedPermanently)
            }
            router.on("/app/**", method: method) { request, _ in try phoneAppFile(request) }
        }
        let api = router.group("api")
        sessionRoutes(api)
        userRoutes(api)
        importRoutes(api)
        placeRoutes(api)
        analysisRoutes(api)
        return router
    }

    /// The dashboard's sign-in session (`/api/session`, like CouchDB's `/_session`).
    func sessionRoutes(_ api: RouterGroup<ClientRequestContext>) {
        api.post("session") { request, context in try await signIn(request, context) }
        api.get("session") { request, _ in
            // As CouchDB's GET /_session: 200 either way, with no name when nobody is signed in.
            guard let session = try await session(request) else {
                return TrackerHTTP.reply(["ok": true, "name": .null, "roles": []])
            }
            return TrackerHTTP.reply(
                sessionJSON(name: session.name, roles: session.roles, tracker: session.isTrackerUser))
        }
        api.delete("session") { request, _ in
            if let token = DashboardSessions.token(cookieHeader: request.headers[.cookie]) { sessions.end(token) }
            var response = TrackerHTTP.reply(["ok": true])
            response.headers[.setCookie] = DashboardSessions.setCookie(nil)
            return response
        }
    }

    /// Registration, login, API keys, deletion; a user's own locations, photos and OwnTracks.
    func userRoutes(_ api: RouterGroup<ClientRequestContext>) {
        api.put("users/:name") { request, context in
            try await limitRegistrations(request, context)
            let body = try await json(request)
            return TrackerHTTP.reply(
                try await service.register(username: context.parameter("name"), password: body["password"]),
                status: .created)
        }
        api.delete("users/:name") { request, context in
            try await deleteUser(context.parameter("name"), request, context)
        }
        api.post("login") { request, context in
            let body = try await json(request)
            guard let username = body["username"]?.stringValue, let password = body["password"]?.stringValue else {
                throw TrackerService.Failure(400, "bad_request", "`username` and `password` strings are required")
            }
            let host = TrackerHTTP.hostname(request.head.authority)
            return TrackerHTTP.reply(
                try await service.login(
                    username: username, password: password, client: client(request, context),
                    host: "\(host):\(databasePort())", device: body["device"]?.stringValue))
        }
        api.get("keys") { request, context in
            TrackerHTTP.reply(try await service.apiKeys(of: try await requireUser(request, context)))
        }
        api.delete("keys/:key") { request, context in
            TrackerHTTP.reply(
                try await service.revokeKey(context.parameter("key"), of: try await requireUser(request, context)))
        }
        api.put("me/password") { request, context in
            let user = try await requireUser(request, context)
            let body = try await json(request)
            guard let current = body["current_password"]?.stringValue, let new = body["new_password"]?.stringValue
            else {
                throw TrackerService.Failure(
                    400, "bad_request", "`current_password` and `new_password` strings are required")
            }
            let from = client(request, context)
            try service.throttle.check(account: user, client: from)
            do {
                try await service.changePassword(username: user, current: current, new: new)
            } catch let failure as TrackerService.Failure where failure.status == 401 {
                service.throttle.failed(account: user, client: from)
                throw failure
            }
            sessions.end(user: user)
            var response = TrackerHTTP.reply(["ok": true])
            response.headers[.setCookie] = DashboardSessions.setCookie(nil)
            return response
        }
        api.get("me/locations") { request, context in
            try await myLocations(try await requireUser(request, context), request)
        }
        api.get("me/live") { request, context in
            let user = try await requireUser(request, context)
            let state = try await credentialState(request)
            return myLive(user) { try await credentialState(request) == state }
        }
        api.get("photos") { request, context in
            // A user's own photos; admins and analysts: everyone's, or one user's (?user=).
            let (user, owner) = try await photoScope(request, context)
            let limit = try TrackerHTTP.count(TrackerHTTP.query(request), "limit", default: 500, in: 1...5000)
            return TrackerHTTP.reply(try await service.reports.photos(user: user, visibleTo: owner, limit: limit))
        }
        api.get("photos/:id/:attachment") { request, context in
            let (user, _) = try await photoScope(request, context)
            let photo = try await service.reports.photo(
                id: context.parameter("id"), attachment: context.parameter("attachment"), user: user)
            var response = TrackerHTTP.file(photo.bytes, name: "", cache: false)
            response.headers[.contentType] = photo.contentType
            return response
        }
        api.post("owntracks") { request, context in
            let user = try await requireUser(request, context)
            // Identity as OwnTracks sends it: ?u=&d= or X-Limit-U / X-Limit-D; the user must be the authenticated one.
            let query = TrackerHTTP.query(request)
            let claimed = query["u"] ?? request.headers[HTTPField.Name("X-Limit-U")!] ?? user
            guard claimed == user else {
                throw TrackerService.Failure(403, "forbidden", "Credentials of \(user) cannot post as \(claimed)")
            }
            let device = query["d"] ?? request.headers[HTTPField.Name("X-Limit-D")!] ?? ""
            return TrackerHTTP.reply(
                try await service.ownTracks(user: user, device: device, message: try await json(request)))
        }
    }

    /// Places near a position, their release, their editing (admins) and the reports of wrong
    /// positions (users submit, admins review).
    func placeRoutes(_ api: RouterGroup<ClientRequestContext>) {
        api.get("places") { request, _ in
            let reply = try await service.places.nearby(query: TrackerHTTP.query(request))
            return TrackerHTTP.reply(bytes: reply.body, status: HTTPResponse.Status(code: reply.status))
        }
        api.get("places/version") { _, _ in TrackerHTTP.reply(try await service.places.placesVersion()) }
        api.post("places") { request, context in
            _ = try await requireRole(["_admin"], request, context, purpose: "Editing places is for admins")
            return try await editPlace(.post, nil, request)
        }
        for method in [HTTPRequest.Method.put, .delete] {
            api.on("places/:id", method: method) { request, context in
                _ = try await requireRole(["_admin"], request, context, purpose: "Editing places is for admins")
                return try await editPlace(request.method, context.parameter("id"), request)
            }
        }
        api.post("places/:id/adjustments") { request, context in
            let user = try await requireUser(request, context)
            return TrackerHTTP.reply(
                try await service.places.submitAdjustment(
                    place: context.parameter("id"), by: user, body: try await json(request)),
                status: .created)
        }
        api.get("adjustments/mine") { request, context in
            TrackerHTTP.reply(
                try await service.places.adjustments(submittedBy: try await requireUser(request, context), status: nil))
        }
        api.get("adjustments") { request, context in
            _ = try await requireRole(["_admin"], request, context, purpose: "Reviewing place reports is for admins")
            return TrackerHTTP.reply(
                try await service.places.adjustments(
                    submittedBy: nil, status: TrackerHTTP.query(request)["status"] ?? "submitted"))
        }
        api.post("adjustments/:id/:decision") { request, context in
            let decision = context.parameter("decision")
            guard ["approve", "reject", "undo"].contains(decision) else { throw HTTPError(.notFound) }
            let admin = try await requireRole(
                ["_admin"], request, context, purpose: "Reviewing place reports is for admins")
            if decision == "undo" {
                return TrackerHTTP.reply(
                    try await service.places.undoReview(report: context.parameter("id"), by: admin))
            }
            return TrackerHTTP.reply(
                try await service.places.review(
                    report: context.parameter("id"), approve: decision == "approve", by: admin))
        }
    }

    /// Exports, the all-locations map and statistics (admins and analysts); the server's
    /// status (admins); the API's own description.
    func analysisRoutes(_ api: RouterGroup<ClientRequestContext>) {
        api.get("analysis/locations") { request, context in
            try await requireAnalyst(request, context)
            let query = TrackerHTTP.query(request)
            let filter = try LocationFilter(parameters: query)
            guard let format = ExportFormat(rawValue: query["format"] ?? "geojson") else {
                throw TrackerService.Failure(400, "bad_request", "`format` must be geojson, csv or gpx")
            }
            if let user = filter.user { try await service.requireRegistered(user) }
            return try await exportResponse(filter, format)
        }
        api.get("analysis/map") { request, context in
            try await requireAnalyst(request, context)
            let reply = try await service.reports.locationGrid(query: TrackerHTTP.query(request))
            return TrackerHTTP.reply(bytes: reply.body, status: HTTPResponse.Status(code: reply.status))
        }
        api.get("analysis/users") { request, context in
            try await requireAnalyst(request, context)
            let query = TrackerHTTP.query(request)
            let limit = try TrackerHTTP.count(query, "limit", default: 50, in: 1...200)
            if let after = query["after"] { try TrackerService.validate(username: after) }
            return TrackerHTTP.reply(try await service.reports.people(limit: limit, after: query["after"]))
        }
        api.get("analysis/users/:name/stats") { request, context in
            try await requireAnalyst(request, context)
            let name = context.parameter("name")
            try TrackerService.validate(username: name)
            return TrackerHTTP.reply(try await service.reports.statistics(user: name))
        }
        api.get("status") { request, context in
            _ = try await requireRole(["_admin"], request, context, purpose: "The server's status is for admins")
            return TrackerHTTP.reply(status())
        }
        api.get("openapi.json") { _, _ in TrackerHTTP.reply(OpenAPI.document) }
    }

    /// Anonymous registrations are limited per address (each makes a database and runs a
    /// password hash); a server admin's are not. 429 with `Retry-After` beyond the limit.
    func limitRegistrations(_ request: Request, _ context: ClientRequestContext) async throws {
        // Only a server admin's name is worth a password check here (cheap to look up; a hash
        // for every anonymous attempt would be work the limit is there to spare), and that
        // check is throttled as everywhere, so this is no way to guess an admin's password.
        if let (name, secret) = TrackerHTTP.basicCredentials(request),
            try await service.couch.request(.get, "/_node/_local/_config/admins/" + CouchURL.encode(name)).ok
        {
            try service.throttle.check(account: name, client: client(request, context))
            guard let user = try await service.couch.verify(name: name, password: secret), user.roles.contains("_admin")
            else {
                service.throttle.failed(account: name, client: client(request, context))
                throw TrackerService.Failure(401, "unauthorized", "Name or password is incorrect.")
            }
            service.throttle.succeeded(account: name, client: client(request, context))
            return
        }
        guard limits.registrationsPerHour > 0 else {
            throw TrackerService.Failure(
                403, "forbidden",
                "Registration is closed on this server: a server admin registers users (PUT /api/users/NAME with an admin's basic auth)"
            )
        }
        if let seconds = registrations.record(client(request, context)) {
            var failure = TrackerService.Failure(
                429, "too_many_requests",
                "Too many registrations from this address (at most \(limits.registrationsPerHour) an hour); try again in \(seconds) second\(seconds == 1 ? "" : "s")"
            )
            failure.retryAfter = seconds
            throw failure
        }
    }

    /// `DELETE /api/users/:name`: the user themself (their own name and password), or a server
    /// admin; `?locations=purge` also purges the user's copies in `lt_locations_all` (theirs
    /// only: those under `<name>:`), and lets an admin purge those of a user deleted earlier.
    func deleteUser(_ name: String, _ request: Request, _ context: ClientRequestContext) async throws -> Response {
        guard let credentials = TrackerHTTP.basicCredentials(request) else {
            throw TrackerService.Failure(
                401, "unauthorized", "Deleting a user needs that user's name and password, or an admin's (basic auth)")
        }
        let purge = TrackerHTTP.query(request)["locations"] == "purge"
        if credentials.name != name {
            _ = try await requireRole(["_admin"], request, context, purpose: "Deleting another user is for admins")
            let answer = try await service.deleteUser(
                username: name, password: nil, asAdmin: true, purgeLocations: purge)
            sessions.end(user: name)
            return TrackerHTTP.reply(answer)
        }
        try service.throttle.check(account: name, client: client(request, context))
        do {
            let answer = try await service.deleteUser(
                username: name, password: credentials.secret, asAdmin: false, purgeLocations: purge)
            sessions.end(user: name)
            return TrackerHTTP.reply(answer)
        } catch let failure as TrackerService.Failure where failure.status == 401 {
            service.throttle.failed(account: name, client: client(request, context))
            throw failure
        }
    }

    /// A file of the dashboard (gzipped when the client takes it and the file exists so).
    func dashboardFile(_ request: Request) throws -> Response {
        let path = CouchURL.segments(request.uri.path)
        let gzip = request.headers[.acceptEncoding]?.contains("gzip") ?? false
        guard let file = dashboardFile(path, acceptsGzip: gzip) else {
            throw TrackerService.Failure(404, "not_found", "missing")
        }
        return file
    }

    static func redirect(to location: String, status: HTTPResponse.Status) -> Response {
        var response = Response(status: status)
        response.headers[.location] = location
        return response
    }
}

extension ClientRequestContext {
    /// A route's path parameter, percent-decoded (an id may hold any character).
    func parameter(_ name: String) -> String {
        CouchURL.decode(Substring(parameters.get(name) ?? ""), plusAsSpace: false)
    }
}

/// The application listener's access log line (`AccessLog`) for every request, after its
/// errors became answers: who asked is the name of the Basic credentials (a user or an API key,
/// never the secret) or of the dashboard session, unchecked, as the request claims it.
struct ApplicationAccessLog: RouterMiddleware {
    typealias Context = ClientRequestContext
    let http: TrackerHTTP

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let requestID = AccessLog.newRequestID()
        var status = 500
        defer {
            let family = request.uri.path.hasPrefix("/api/") ? "app_api" : "dashboard"
            let duration = start.duration(to: .now)
            http.limits.metrics?.recordRequest(
                listener: "application", method: request.method, status: status, family: family,
                duration: duration)
            if http.accessLog.isWritten {
                let user = TrackerHTTP.basicCredentials(request)?.name ?? http.claimedSession(request)?.name
                http.accessLog.record(
                    method: request.method, path: request.uri.path, status: status, duration: duration,
                    user: user, client: http.client(request, context), requestID: requestID)
            }
        }
        var response = try await next(request, context)
        status = response.status.code
        response.headers[TrackerHTTP.requestIDHeader] = requestID
        return response
    }
}

/// Every failure of the application listener as `{"error","reason"}` with its status: the
/// application's own (`TrackerService.Failure`), CouchDB's passed on, and a path the routes do
/// not know (404, or 405 with `Allow` when the API has the path with other methods).
struct ApplicationErrors: RouterMiddleware {
    typealias Context = ClientRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let failure as TrackerService.Failure {
            var response = TrackerHTTP.reply(failure.body, status: HTTPResponse.Status(code: failure.status))
            if let allow = failure.allow { response.headers[.allow] = allow.joined(separator: ", ") }
            if let seconds = failure.retryAfter { response.headers[.retryAfter] = String(seconds) }
            return response
        } catch let error as CouchError {
            return JSONErrors<Context>.response(for: error)
        } catch let error as HTTPError where error.status == .notFound {
            return try unrouted(request)
        } catch {
            return TrackerHTTP.reply(
                ["error": "Internal Server Error", "reason": .string("\(error)")], status: .internalServerError)
        }
    }

    /// No route: under `/api/`, 405 with the methods the API takes for the path, else 404.
    func unrouted(_ request: Request) throws -> Response {
        let path = CouchURL.segments(request.uri.path)
        guard path.first == "api" else {
            return TrackerHTTP.reply(["error": "not_found", "reason": "missing"], status: .notFound)
        }
        guard let methods = OpenAPI.methods(for: path), !methods.contains(request.method.rawValue) else {
            return TrackerHTTP.reply(
                ["error": "not_found", "reason": .string("\(request.uri.path) is not part of the API")],
                status: .notFound)
        }
        var response = TrackerHTTP.reply(
            [
                "error": "method_not_allowed",
                "reason": .string(
                    "\(request.uri.path) takes \(methods.sorted().joined(separator: ", ")), not \(request.method)"),
            ],
            status: .methodNotAllowed)
        response.headers[.allow] = methods.sorted().joined(separator: ", ")
        return response
    }
}
