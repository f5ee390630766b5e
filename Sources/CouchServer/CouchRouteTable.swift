import CouchEngine
import CouchJSON
import CouchProtocol
import Hummingbird
import NIOConcurrencyHelpers

/// One area's routes (`CouchRoutes.swift`): each registered for every method CouchDB routes,
/// with what the table checks before its handler runs — the methods it serves (CouchDB's 405
/// naming them), who may use it (`RouteAccess`), the family the request metrics label it by
/// (the area's, unless the route names its own) — and what it answers an owner of a shared
/// database (`OwnerRequest`), who reaches only the routes that say so.
struct CouchRouteTable {
    unowned let api: CouchAPI
    let routes: RouterGroup<CouchRequestContext>
    let family: RouteFamily
    /// Whether the routes are under `/{db}`.
    let underDatabase: Bool
    /// Where each route's declaration is kept, for the tests that check every route's rule.
    var declarations: RouteDeclarations? = nil

    /// The methods routed to handlers (a route answers CouchDB's 405 for those it does not
    /// serve); any other is 405 (`CouchRouteResponder`).
    static let methods: [HTTPRequest.Method] = [
        .get, .head, .put, .post, .delete, .patch, .options, .connect, .trace, HTTPRequest.Method("COPY")!,
    ]

    /// What an owner's request to a route answers, in the owner's namespace.
    typealias OwnerHandler = @Sendable (OwnerRequest) async throws -> APIResponse

    /// A route. `methods` (HEAD goes with GET) and `access` are checked in that order, as
    /// CouchDB's handlers do, before `handle` runs; a route without `owner` refuses owners of
    /// a shared database (403 naming the resource).
    func on(
        _ path: RouterPath, family: RouteFamily? = nil, methods: [HTTPRequest.Method]? = nil,
        access: RouteAccess = .handler, owner: OwnerHandler? = nil,
        _ handle: @escaping @Sendable (CouchAPI, inout APIRequest) async throws -> APIResponse
    ) {
        let family = family ?? self.family
        declarations?.add(
            RouteDeclaration(
                underDatabase: underDatabase, path: path.description, family: family,
                methods: methods?.map(\.rawValue), access: access, ownersMay: owner != nil))
        let handler: @Sendable (Request, CouchRequestContext) async throws -> Response = {
            [unowned api] request, context in
            // The route the client asked for names the family, not one a rewrite led to.
            context.facts.withLockedValue { if $0.family == nil { $0.family = family } }
            var request = APIRequest(request, context)
            if let namespace = context.owner {
                guard let owner else {
                    let resource = request.path.count > 1 ? request.path[1] : ""
                    throw CouchError.forbidden("\(resource) is not available to owners in a shared database")
                }
                let ownerRequest = OwnerRequest(api: api, db: request.path[0], namespace: namespace, request: request)
                return try await owner(ownerRequest).response
            }
            if let methods { try request.requireMethod(methods) }
            try await access.check(request, api)
            return try await handle(api, &request).response
        }
        for method in Self.methods { routes.on(path, method: method, use: handler) }
    }

    /// A route under `/{db}` whose handler needs the database open.
    func on(
        _ path: RouterPath, family: RouteFamily? = nil, methods: [HTTPRequest.Method]? = nil,
        access: RouteAccess = .handler, owner: OwnerHandler? = nil,
        database handle: @escaping @Sendable (CouchAPI, DocumentDatabase, inout APIRequest) async throws -> APIResponse
    ) {
        on(path, family: family, methods: methods, access: access, owner: owner) { api, request in
            try await handle(api, try await api.store.open(request.path[0]), &request)
        }
    }

    /// A design function's route (`/{db}/_design/{ddoc}/_*`): a reader of the database may call it.
    func on(
        _ path: RouterPath, family: RouteFamily? = nil,
        design handle: @escaping @Sendable (CouchAPI, DocumentDatabase, String, APIRequest) async throws -> APIResponse
    ) {
        on(
            path, family: family, access: .reader,
            database: { api, db, request in try await handle(api, db, "_design/\(request.path[2])", request) })
    }
}

/// Who may use a route: checked by the route table after the route's methods and before its
/// handler. Routes whose rule depends on the method or the content (a document read or write,
/// `_security`, `_revs_limit`, `_index`, `_bulk_docs`, partitions, `_session`) check it in
/// their handler (`.handler`); the table then lets everyone the authentication step let in
/// through.
package enum RouteAccess: Sendable, Equatable {
    /// The handler decides.
    case handler
    /// A reader of the database: a member, or anyone when it names no members (its admins, and
    /// server admins, always).
    case reader
    /// A writer of the database's documents (as a reader; `_users` and design documents have
    /// rules of their own, checked per document).
    case writer
    /// A server admin (CouchDB answers anyone else 401).
    case serverAdmin

    func check(_ request: APIRequest, _ api: CouchAPI) async throws {
        switch self {
        case .handler: return
        case .serverAdmin: try request.requireServerAdmin()
        case .reader, .writer:
            // A server admin may read and write every database: no need to open it here.
            guard !request.user.isServerAdmin else { return }
            let db = try await api.store.open(request.path[0])
            try request.user.authorize(self == .reader ? .read : .write, to: db)
        }
    }
}

/// One route as declared in the table: what the table checks before its handler.
package struct RouteDeclaration: Sendable, Equatable {
    /// Whether `path` follows `/{db}/`.
    package let underDatabase: Bool
    package let path: String
    package let family: RouteFamily
    /// The methods it serves by name (nil: the handler says).
    package let methods: [String]?
    package let access: RouteAccess
    package let ownersMay: Bool
}

/// The declarations of a route table as it is built (`CouchAPI.routeDeclarations()`).
package final class RouteDeclarations: Sendable {
    private let list = NIOLockedValueBox<[RouteDeclaration]>([])
    func add(_ route: RouteDeclaration) { list.withLockedValue { $0.append(route) } }
    var all: [RouteDeclaration] { list.withLockedValue { $0 } }
}
