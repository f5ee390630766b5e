import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird
import Logging

/// What the database listener knows of a request once it is through the middleware: where it
/// comes from, who asks, and its body.
public struct CouchRequestContext: RequestContext {
    /// The listener's part: the core storage and the peer's address.
    var listener: ClientRequestContext
    public var coreContext: CoreRequestContextStorage {
        get { listener.coreContext }
        _modify { yield &listener.coreContext }  // in place: the router sets parameters per request
    }
    /// The peer's IP address (the connection's, before any proxy header is considered).
    public var peerAddress: String? { listener.peerAddress }
    /// The client: the peer, or for a trusted proxy the address it names (`ClientAddress`).
    var client = ""
    /// Who asks (`CouchAuthentication`); anonymous until then.
    var user = UserContext.anonymous
    /// Whether the answer renews the session cookie.
    var renewSession = false
    /// The body, collected within the size limit and decoded (`CouchRequestBody`).
    var body: [UInt8] = []
    /// For the server's own requests (`CouchAPI.perform`): who asks, trusted without credentials.
    var inProcessUser: UserContext?
    /// How many `_rewrite`s this request went through (`CouchResponder.route`).
    var rewrites = 0
    /// How long reading the body took (CouchDB's `X-CouchDB-Body-Time` on every answer).
    var bodyTime = Duration.zero

    public init(source: ApplicationRequestContextSource) {
        listener = ClientRequestContext(source: source)
    }

    /// A context for a request that did not come through a listener (fuzzing, tests).
    public init(peerAddress: String?, logger: Logger) {
        listener = ClientRequestContext(peerAddress: peerAddress, logger: logger)
    }
}

/// The server's `Server` header on every answer, CORS (preflights answered here, allowed
/// origins named on answers), and no body for `HEAD`.
struct CouchResponseHeaders {
    unowned let api: CouchAPI
    /// The `Server` header, made once.
    static let server = "CouchDB/\(CouchAPI.version) (LocationTracker)"

    /// The answer to a CORS preflight (`OPTIONS` with an `Origin`), or nil for any other request.
    func preflight(_ request: Request) -> Response? {
        request.method == .options && request.headers[.origin] != nil ? api.preflight(request).response : nil
    }

    func finish(_ response: inout Response, _ request: Request) {
        response.headers[.server] = Self.server
        if let origin = request.headers[.origin], api.corsAllows(origin, authority: request.head.authority) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "true"
            response.headers[.accessControlExposeHeaders] = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"
        }
        if request.method == .head { response.body = ResponseBody() }
    }
}

/// Every failure as CouchDB's `{"error","reason"}` with its status; a storage failure under a
/// database just deleted is that database missing; anything else a logged 500.
struct CouchErrors {
    unowned let api: CouchAPI

    func response(for error: any Error, _ request: Request) -> Response {
        // Work stopped because its client went away: nobody reads this answer.
        if error is CancellationError {
            api.logger.debug("\(request.method) \(request.uri.path): stopped, the client went away")
            return APIResponse.error(CouchError(status: 499, error: "client_closed_request", reason: "The client went away before the answer")).response
        }
        if let error = error as? CouchError {
            if error.status >= 500 { api.logger.error("\(request.method) \(request.uri.path): \(error)") }
            return APIResponse.error(error).response
        }
        // Storage failing under a request to a database that no longer exists (it reached the
        // database just as it was deleted) is that database not existing, not a server failure.
        if let name = DatabasePath.segments(request.uri.path).first, DatabaseStore.isValidName(name), !api.store.exists(name) {
            return APIResponse.error(.databaseNotFound).response
        }
        api.logger.error("\(request.method) \(request.uri.path): \(error)")
        return APIResponse.error(CouchError(status: 500, error: "internal_server_error", reason: "\(error)")).response
    }
}

/// The body, collected up to the limit (413 beyond); a gzip-compressed one (IBM's SDK sends
/// them) decoded within the same limit, as CouchDB does; other codings refused.
struct CouchRequestBody {
    /// `[chttpd] max_http_request_size`, changed at run time.
    let limit: Locked<Int>

    func read(_ request: Request, into context: inout CouchRequestContext) async throws {
        let maxBodySize = limit.withLock { $0 }
        var request = request
        let start = ContinuousClock.now
        defer { context.bodyTime = start.duration(to: .now) }
        do {
            // The server's own requests are not limited: it made their bodies itself.
            context.body = Array(buffer: try await request.collectBody(upTo: context.inProcessUser == nil ? maxBodySize : .max))
        } catch {
            throw CouchError.tooLarge
        }
        switch request.headers[.contentEncoding]?.lowercased() {
        case nil, "identity": break
        case "gzip":
            if !context.body.isEmpty {
                context.body = try AttachmentEncoding.gunzip(context.body, limit: maxBodySize, what: "A request body sent with Content-Encoding: gzip")
            }
        case let other?: throw CouchError(status: 415, error: "bad_content_type", reason: "Unsupported Content-Encoding: \(other)")
        }
    }
}

/// Who asks: basic auth or the session cookie (`Authenticator`, failed passwords throttled),
/// from which client address; a session cookie near its end renewed on a successful answer.
struct CouchAuthentication {
    unowned let api: CouchAPI

    func identify(_ request: Request, _ context: inout CouchRequestContext) async throws {
        if let user = context.inProcessUser {
            (context.user, context.client) = (user, "in-process")
            return
        }
        context.client = api.options.clientAddress.client(peer: context.peerAddress, headers: request.headers)
        (context.user, context.renewSession) = try await api.auth.authenticate(headers: request.headers, client: context.client)
    }

    func renewSession(_ response: inout Response, _ context: CouchRequestContext) async {
        guard context.renewSession, let name = context.user.name, response.headers[.setCookie] == nil,
              let cookie = await api.auth.makeCookie(for: name) else { return }
        response.headers[.setCookie] = api.auth.setCookieHeader(cookie)
    }
}

/// Cluster mode: a request to a shared database by someone who is not one of its owners goes
/// to the cluster as it came, with the caller's own credentials (the cluster's `_security`
/// then decides; the server's own in-process requests read its local copy). The rest is
/// routed here.
struct ClusterPassThrough {
    unowned let api: CouchAPI
    let cluster: CouchCluster

    /// The cluster's answer, or nil when the request is routed here.
    func answer(_ request: Request, _ context: CouchRequestContext) async throws -> Response? {
        let path = DatabasePath.segments(request.uri.path)
        guard context.inProcessUser == nil, let name = path.first, api.options.sharedDatabases.contains(where: { $0.name == name }),
              try await api.ownerAccess(name, context.user) == nil else {
            return nil
        }
        return try await cluster.send(
            request.method, path: path, query: CouchURL.parameters(request.uri.query), headers: request.headers, body: context.body,
            authorization: request.headers[.authorization]
        ).response
    }
}

/// `/{db}/...`: the name checked by CouchDB's rules (a `_` name other than the system
/// databases is none), and an owner's request to a shared database answered in the owner's
/// namespace (`OwnerRequest`) instead of by the routes.
struct DatabaseAccess {
    unowned let api: CouchAPI

    /// The owner's answer, or nil when the routes answer.
    func ownerAnswer(_ request: Request, _ context: CouchRequestContext) async throws -> Response? {
        let name = DatabasePath.segments(request.uri.path).first ?? ""
        if !DatabaseStore.isValidName(name) || (name.hasPrefix("_") && !DatabaseStore.systemDatabases.contains(name)) {
            // As CouchDB: creating such a database is an illegal name; anything else finds none.
            if request.method == .put, DatabasePath.segments(request.uri.path).count == 1 {
                throw CouchError.illegalDatabaseName(name)
            }
            throw CouchError.databaseNotFound
        }
        guard let namespace = try await api.ownerAccess(name, context.user) else { return nil }
        return try await api.ownerRequest(name, namespace, APIRequest(request, context)).response
    }
}

/// The database listener: the URL table (`CouchRoutes.swift`) behind the steps every request
/// passes, in order: the access log, CORS preflights, the body, authentication, in cluster mode
/// the pass-through, the route; errors as `{"error","reason"}`, then the headers every answer
/// gets. Each step is its own type with one job; they are called in turn here rather than
/// nested as middleware, so a request takes a flat path (nested, each layer was an async call
/// carrying the request and context on).
struct CouchResponder: HTTPResponder {
    let routes: RouterResponder<CouchRequestContext>
    let store: DatabaseStore
    let accessLog: AccessLog
    let metrics: ServerMetrics
    let headers: CouchResponseHeaders
    let errors: CouchErrors
    let body: CouchRequestBody
    let authentication: CouchAuthentication
    let cluster: ClusterPassThrough?
    let jsonp: JSONP

    /// The route's answer. With no route for the request (the router's endpoint path is then
    /// "NotFound"; a route's is its pattern), CouchDB's error instead of the router's own: the
    /// database missing, a method CouchDB does not route, or nothing here.
    func route(_ request: Request, _ context: CouchRequestContext) async throws -> Response {
        let response: Response
        do {
            response = try await routes.respond(to: request, context: context)
        } catch let rewritten as RewrittenRequest {
            // `_rewrite`: the new request is served as the client's own, with its identity and
            // rights (every route checks them again), counted against `[chttpd] rewrite_limit`.
            var head = request.head
            head.method = rewritten.method
            head.path = rewritten.target
            if let headers = rewritten.headers { head.headerFields = headers }
            var context = context
            context.rewrites += 1
            if let body = rewritten.body { context.body = body }
            return try await route(Request(head: head, body: request.body), context)
        }
        guard context.coreContext.endpointPath.value == "NotFound" else { return response }
        if let name = DatabasePath.segments(request.uri.path).first, DatabaseStore.isValidName(name), !store.exists(name) {
            throw CouchError.databaseNotFound
        }
        guard CouchRouteTable.methods.contains(request.method) else {
            // As CouchDB names them: a database's methods, or a document's.
            let database = DatabasePath.segments(request.uri.path).count == 1
            throw CouchError.methodNotAllowed(database ? "DELETE,GET,HEAD,POST" : "DELETE,GET,HEAD,POST,PUT,COPY")
        }
        throw CouchError.notFound("missing")
    }

    func respond(to request: Request, context: CouchRequestContext) async throws -> Response {
        let start = ContinuousClock.now
        let request = Self.methodOverridden(request)
        var context = context
        var response: Response
        if let preflight = headers.preflight(request) {
            response = preflight
        } else {
            var callback: String?
            do {
                callback = try jsonp.callback(request)
                response = try await answer(request, &context)
            } catch { response = errors.response(for: error, request) }
            if let callback { JSONP.wrap(&response, callback: callback) }
        }
        headers.finish(&response, request)
        response.headers[Self.bodyTimeHeader] = String(context.bodyTime.components.seconds * 1000 + context.bodyTime.components.attoseconds / 1_000_000_000_000_000)
        // As CouchDB: every answer names its request (the client's id for it when it gave one),
        // and the access log line does too.
        let requestID = AccessLog.clientRequestID(request.headers[Self.requestIDHeader]) ?? AccessLog.newRequestID()
        response.headers[Self.requestIDHeader] = requestID
        let inProcess = context.inProcessUser != nil
        let duration = start.duration(to: .now)
        (inProcess ? accessLog.inProcess : accessLog).record(
            method: request.method, path: request.uri.path, status: response.status.code, duration: duration,
            user: context.user.name, client: context.client, requestID: requestID)
        metrics.recordRequest(listener: inProcess ? "in_process" : "database", method: request.method, status: response.status.code,
                              family: RouteFamily.of(request.uri.path), duration: duration)
        return response
    }

    static let requestIDHeader = HTTPField.Name("X-Couch-Request-ID")!
    static let bodyTimeHeader = HTTPField.Name("X-CouchDB-Body-Time")!
    static let methodOverrideHeader = HTTPField.Name("X-HTTP-Method-Override")!
    static let overridableMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"]

    /// A `POST` with `X-HTTP-Method-Override` naming one of CouchDB's methods is that method,
    /// as CouchDB lets clients that can only `POST` fake the others; with any other method the
    /// header is ignored, as CouchDB ignores it.
    static func methodOverridden(_ request: Request) -> Request {
        guard request.method == .post, let name = request.headers[methodOverrideHeader], overridableMethods.contains(name),
              let method = HTTPRequest.Method(name) else { return request }
        var head = request.head
        head.method = method
        return Request(head: head, body: request.body)
    }

    /// The body read, the user identified (into `context`, for the access log), then the
    /// cluster's answer or the route's, with a renewed session cookie when one is due.
    func answer(_ request: Request, _ context: inout CouchRequestContext) async throws -> Response {
        try await body.read(request, into: &context)
        try await authentication.identify(request, &context)
        var response = if let passed = try await cluster?.answer(request, context) { passed } else { try await route(request, context) }
        await authentication.renewSession(&response, context)
        return response
    }
}
