import CouchJSON
import CouchServer
import HTTPTypes

/// The database the application runs on, spoken to only through CouchDB's HTTP API: the server
/// in this process (`InProcessCouch`) now, Apache CouchDB over HTTP in cluster mode. The
/// application never reaches into the engine, so whatever it does, a CouchDB cluster can do.
public protocol CouchClient: Sendable {
    /// One request as a server admin. `path` is percent-encoded as in a URL.
    func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply

    /// Who a name and password are to the database (`_session`): name and roles, or nil.
    func verify(name: String, password: String) async throws -> (name: String, roles: [String])?
}

/// A CouchDB answer: status and body.
public struct CouchReply: Sendable {
    public var status: Int
    public var body: [UInt8]
    public var json: JSON { (try? JSON.parse(body)) ?? .null }
    public var ok: Bool { (200..<300).contains(status) }
}

extension CouchClient {
    func request(_ method: HTTPRequest.Method, _ path: String, body: JSON? = nil) async throws -> CouchReply {
        try await request(method, path, query: [:], body: body)
    }
}

/// The CouchDB API of this process, called directly (no network, no credentials check).
public struct InProcessCouch: CouchClient {
    let api: CouchAPI

    public init(api: CouchAPI) {
        self.api = api
    }

    public func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply {
        let (status, bytes) = await api.perform(method, path, query: query, body: body)
        return CouchReply(status: status, body: bytes)
    }

    public func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
        guard let user = await api.verify(name: name, password: password) else { return nil }
        return (user.name ?? name, user.roles)
    }
}
