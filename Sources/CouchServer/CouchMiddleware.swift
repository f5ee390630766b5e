import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers

// The steps every request to the database listener passes, as Hummingbird middleware, in the
// order `CouchAPI.makeResponder` chains them (outermost first). Each has one job.

/// A `POST` with `X-HTTP-Method-Override` naming one of CouchDB's methods is that method, as
/// CouchDB lets clients that can only `POST` fake the others; with any other method the header
/// is ignored, as CouchDB ignores it.
struct CouchMethodOverride: RouterMiddleware {
    typealias Context = CouchRequestContext
    static let header = HTTPField.Name("X-HTTP-Method-Override")!
    static let overridable: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"]

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        try await next(Self.overridden(request), context)
    }

    static func overridden(_ request: Request) -> Request {
        guard request.method == .post, let name = request.headers[header], overridable.contains(name),
            let method = HTTPRequest.Method(name)
        else { return request }
        var head = request.head
        head.method = method
        return Request(head: head, body: request.body)
    }
}

/// Every request named and recorded: the client's address found (a trusted proxy's
/// `X-Forwarded-For` read), the answer given its `X-Couch-Request-ID` (the client's own id
/// for it when it sent one, as CouchDB's) and `X-CouchDB-Body-Time`, then one access log line
/// and the request metrics.
struct CouchRequestLog: RouterMiddleware {
    typealias Context = CouchRequestContext
    static let requestIDHeader = HTTPField.Name("X-Couch-Request-ID")!
    static let bodyTimeHeader = HTTPField.Name("X-CouchDB-Body-Time")!
    let accessLog: AccessLog
    let metrics: ServerMetrics
    let clientAddress: ClientAddress

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let inProcess = context.inProcessUser != nil
        var context = context
        context.client =
            inProcess ? "in-process" : clientAddress.client(peer: context.peerAddress, headers: request.headers)
        let requestID = AccessLog.clientRequestID(request.headers[Self.requestIDHeader]) ?? AccessLog.newRequestID()
        var status = 500
        defer {
            let duration = start.duration(to: .now)
            let (user, family) = context.facts.withLockedValue { ($0.user, $0.family) }
            (inProcess ? accessLog.inProcess : accessLog).record(
                method: request.method, path: request.uri.path, status: status, duration: duration,
                user: user, client: context.client, requestID: requestID)
            metrics.recordRequest(
                listener: inProcess ? "in_process" : "database", method: request.method, status: status,
                family: (family ?? .unrouted).rawValue, duration: duration)
        }
        var response = try await next(request, context)
        status = response.status.code
        let bodyTime = context.facts.withLockedValue { $0.bodyTime }.components
        response.headers[Self.bodyTimeHeader] = String(
            bodyTime.seconds * 1000 + bodyTime.attoseconds / 1_000_000_000_000_000)
        response.headers[Self.requestIDHeader] = requestID
        return response
    }
}

/// The server's `Server` header on every answer, CORS (preflights answered here, allowed
/// origins named on answers), and no body for `HEAD`.
struct CouchResponseHeaders: RouterMiddleware {
    typealias Context = CouchRequestContext
    /// The `Server` header, made once.
    static let server = "CouchDB/\(CouchAPI.version) (LocationTracker)"
    unowned let api: CouchAPI

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        // A CORS preflight (`OPTIONS` with an `Origin`) is answered here, before the body and credentials.
        var response =
            if request.method == .options && request.headers[.origin] != nil {
                api.preflight(request).response
            } else {
                try await next(request, context)
            }
        response.headers[.server] = Self.server
        if let origin = request.headers[.origin], api.corsAllows(origin, authority: request.head.authority) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "true"
            response.headers[.accessControlExposeHeaders] =
                "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"
        }
        if request.method == .head { response.body = ResponseBody() }
        return response
    }
}

/// Every failure as CouchDB's `{"error","reason"}` with its status; a storage failure under a
/// database just deleted is that database missing; anything else a logged 500.
struct CouchErrors: RouterMiddleware {
    typealias Context = CouchRequestContext
    unowned let api: CouchAPI

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do { return try await next(request, context) } catch { return response(for: error, request) }
    }

    func response(for error: any Error, _ request: Request) -> Response {
        // Work stopped because its client went away: nobody reads this answer.
        if error is CancellationError {
            api.logger.debug("\(request.method) \(request.uri.path): stopped, the client went away")
            return APIResponse.error(
                CouchError(
                    status: 499, error: "client_closed_request", reason: "The client went away before the answer")
            ).response
        }
        if let error = error as? CouchError {
            if error.status >= 500 { api.logger.error("\(request.method) \(request.uri.path): \(error)") }
            return APIResponse.error(error).response
        }
        // Storage failing under a request to a database that no longer exists (it reached the
        // database just as it was deleted) is that database not existing, not a server failure.
        if let name = DatabasePath.segments(request.uri.path).first, DatabaseStore.isValidName(name),
            !api.store.exists(name)
        {
            return APIResponse.error(.databaseNotFound).response
        }
        api.logger.error("\(request.method) \(request.uri.path): \(error)")
        return APIResponse.error(CouchError(status: 500, error: "internal_server_error", reason: "\(error)")).response
    }
}

/// CouchDB's JSONP (`JSONP`): the callback a request names checked, and its answer, a failure's
/// too, wrapped in the call.
struct CouchJSONPCallback: RouterMiddleware {
    typealias Context = CouchRequestContext
    let jsonp: JSONP
    let errors: CouchErrors

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let callback = try jsonp.callback(request) else { return try await next(request, context) }
        var response: Response
        do { response = try await next(request, context) } catch { response = errors.response(for: error, request) }
        try await JSONP.wrap(&response, callback: callback)
        return response
    }
}

/// The body, collected up to the limit (413 beyond); a gzip-compressed one (IBM's SDK sends
/// them) decoded within the same limit, as CouchDB does; other codings refused.
struct CouchRequestBody: RouterMiddleware {
    typealias Context = CouchRequestContext
    /// `[chttpd] max_http_request_size`, changed at run time.
    let limit: Locked<Int>

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        try await read(request, into: &context)
        return try await next(request, context)
    }

    func read(_ request: Request, into context: inout CouchRequestContext) async throws {
        let maxBodySize = limit.withLock { $0 }
        var request = request
        let start = ContinuousClock.now
        defer { context.facts.withLockedValue { $0.bodyTime = start.duration(to: .now) } }
        do {
            // The server's own requests are not limited: it made their bodies itself.
            context.body = Array(
                buffer: try await request.collectBody(upTo: context.inProcessUser == nil ? maxBodySize : .max))
        } catch {
            throw CouchError.tooLarge
        }
        switch request.headers[.contentEncoding]?.lowercased() {
        case nil, "identity": break
        case "gzip":
            if !context.body.isEmpty {
                context.body = try AttachmentEncoding.gunzip(
                    context.body, limit: maxBodySize, what: "A request body sent with Content-Encoding: gzip")
            }
        case let other?:
            throw CouchError(status: 415, error: "bad_content_type", reason: "Unsupported Content-Encoding: \(other)")
        }
    }
}

/// Who asks: basic auth or the session cookie (`Authenticator`, failed passwords throttled),
/// from the client's address; a session cookie near its end renewed on a successful answer.
/// The server's own requests are its own user's, without credentials.
struct CouchAuthentication: RouterMiddleware {
    typealias Context = CouchRequestContext
    unowned let api: CouchAPI

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        var renew = false
        if let user = context.inProcessUser {
            context.user = user
        } else {
            (context.user, renew) = try await api.auth.authenticate(headers: request.headers, client: context.client)
        }
        context.facts.withLockedValue { $0.user = context.user.name }
        var response = try await next(request, context)
        if renew, let name = context.user.name, response.headers[.setCookie] == nil,
            let cookie = await api.auth.makeCookie(for: name)
        {
            response.headers[.setCookie] = api.auth.setCookieHeader(cookie)
        }
        return response
    }
}

/// Cluster mode: a request to a shared database by someone who is not one of its owners goes
/// to the cluster as it came, with the caller's own credentials (the cluster's `_security`
/// then decides; the server's own in-process requests read its local copy). The rest is
/// routed here.
struct ClusterPassThrough: RouterMiddleware {
    typealias Context = CouchRequestContext
    unowned let api: CouchAPI
    let cluster: CouchCluster

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let path = DatabasePath.segments(request.uri.path)
        guard context.inProcessUser == nil, let name = path.first,
            api.options.sharedDatabases.contains(where: { $0.name == name }),
            try await api.ownerAccess(name, context.user) == nil
        else {
            return try await next(request, context)
        }
        context.facts.withLockedValue { $0.family = .cluster }
        return try await cluster.send(
            request.method, path: path, query: CouchURL.parameters(request.uri.query), headers: request.headers,
            body: context.body,
            authorization: request.headers[.authorization]
        ).response
    }
}
