import CouchEngine
import CouchJSON
import CouchProtocol
import HTTPTypes
import Hummingbird

/// The database listener: one chain of Hummingbird middleware (`CouchMiddleware.swift`) in
/// front of the URL table (`CouchRouteResponder`). The chain's type is fixed when it is built
/// (`MiddlewareFixedTypeBuilder`), so a request's path through it is direct calls.
struct CouchResponder<Steps: MiddlewareProtocol<Request, Response, CouchRequestContext>>: HTTPResponder {
    let steps: Steps
    let routes: CouchRouteResponder

    init(
        routes: CouchRouteResponder,
        @MiddlewareFixedTypeBuilder<Request, Response, CouchRequestContext> steps: () -> Steps
    ) {
        self.routes = routes
        self.steps = steps()
    }

    func respond(to request: Request, context: CouchRequestContext) async throws -> Response {
        try await steps.handle(request, context: context) { request, context in try await routes.route(request, context)
        }
    }
}

/// The URL table's answer (`CouchRoutes.swift`), a `_rewrite`'s new request served as the
/// client's own, and CouchDB's error where no route takes the request.
struct CouchRouteResponder: Sendable {
    let routes: RouterResponder<CouchRequestContext>
    let store: DatabaseStore

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
        if let name = DatabasePath.segments(request.uri.path).first, DatabaseStore.isValidName(name),
            !store.exists(name)
        {
            throw CouchError.databaseNotFound
        }
        guard CouchRouteTable.methods.contains(request.method) else {
            // As CouchDB names them: a database's methods, or a document's.
            let database = DatabasePath.segments(request.uri.path).count == 1
            throw CouchError.methodNotAllowed(database ? "DELETE,GET,HEAD,POST" : "DELETE,GET,HEAD,POST,PUT,COPY")
        }
        throw CouchError.notFound("missing")
    }
}
