import CouchEngine
import CouchJSON
import CouchProtocol
import Hummingbird

// Middleware of the routes themselves (`CouchAPI.makeRouter`): they run for a request a route
// takes, and again for a `_rewrite`'s new request.

/// As CouchDB: an id (or attachment name) of bytes that are not UTF-8 is refused, not read as
/// U+FFFD, which would make different ids one (a database name fails its own check). Nothing is
/// stored under such an id: a read finds nothing; a write is refused.
struct ValidPathBytes: RouterMiddleware {
    typealias Context = CouchRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let segment = CouchURL.firstInvalidSegment(request.uri.path), segment > 0 {
            if request.method == .get || request.method == .head { throw CouchError.missing }
            throw CouchError(status: 400, error: "illegal_docid", reason: "Document id must be valid UTF-8")
        }
        return try await next(request, context)
    }
}

/// `/{db}/...`: the name checked by CouchDB's rules (a `_` name other than the system
/// databases is none), and an owner of a shared database marked as one (`CouchRequestContext.owner`):
/// the route table answers them in their namespace (`OwnerRequest`), on the routes that allow it.
struct DatabaseAccess: RouterMiddleware {
    typealias Context = CouchRequestContext
    unowned let api: CouchAPI

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        let path = DatabasePath.segments(request.uri.path)
        let name = path.first ?? ""
        if !DatabaseStore.isValidName(name) || (name.hasPrefix("_") && !DatabaseStore.systemDatabases.contains(name)) {
            // As CouchDB: creating such a database is an illegal name; anything else finds none.
            if request.method == .put, path.count == 1 { throw CouchError.illegalDatabaseName(name) }
            throw CouchError.databaseNotFound
        }
        context.owner = try await api.ownerAccess(name, context.user)
        return try await next(request, context)
    }
}
