import CouchEngine
import CouchProtocol
import HTTPServing
public import Hummingbird
public import Logging
import NIOConcurrencyHelpers

/// What the database listener knows of a request as it passes the middleware
/// (`CouchMiddleware.swift`): where it comes from, who asks, and its body.
public struct CouchRequestContext: RequestContext {
    /// The listener's part: the core storage and the peer's address.
    var listener: ClientRequestContext
    public var coreContext: CoreRequestContextStorage {
        get { listener.coreContext }
        _modify { yield &listener.coreContext }  // in place: the router sets parameters per request
    }
    /// The peer's IP address (the connection's, before any proxy header is considered).
    public var peerAddress: String? { listener.peerAddress }
    /// The client: the peer, or for a trusted proxy the address it names (`ClientAddress`);
    /// set by `CouchRequestLog`.
    var client = ""
    /// Who asks (`CouchAuthentication`); anonymous until then.
    var user = UserContext.anonymous
    /// The body, collected within the size limit and decoded (`CouchRequestBody`).
    var body: [UInt8] = []
    /// For the server's own requests (`CouchAPI.perform`): who asks, trusted without credentials.
    var inProcessUser: UserContext?
    /// For an owner of a shared database, their namespace there (`DatabaseAccess`): the route
    /// table answers them through `OwnerRequest`.
    var owner: OwnerNamespace?
    /// How many `_rewrite`s this request went through (`CouchRouteResponder`).
    var rewrites = 0
    /// What the inner steps learn that the outer ones report. Middleware passes the context on
    /// as a value, so a step's changes reach only the steps after it; this is shared by every
    /// copy of one request's context.
    let facts = NIOLockedValueBox(RequestFacts())

    public init(source: ApplicationRequestContextSource) {
        listener = ClientRequestContext(source: source)
    }

    /// A context for a request that did not come through a listener (fuzzing, tests).
    public init(peerAddress: String?, logger: Logger) {
        listener = ClientRequestContext(peerAddress: peerAddress, logger: logger)
    }
}

/// What one request's inner steps found out for the steps around them: who it turned out to be
/// (for the access log) and how long its body took to read (`X-CouchDB-Body-Time`).
struct RequestFacts: Sendable {
    var user: String?
    var bodyTime = Duration.zero
    /// The family of the route that answered (the first, when a rewrite led to another).
    var family: RouteFamily?
}
