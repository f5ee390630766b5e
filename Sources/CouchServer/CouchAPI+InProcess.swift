public import CouchEngine
public import CouchJSON
public import CouchProtocol
import Foundation
import HTTPServing
public import HTTPTypes
import Hummingbird

extension CouchAPI {
    /// Performs a CouchDB API request in this process, as `user`, without a socket or a
    /// credentials check (through the same routes and steps as the listener's requests): how
    /// the application layer talks to the database it runs on. The request and answer are
    /// exactly those of the HTTP API (`path` percent-encoded as in a URL), so the same
    /// application code can run against Apache CouchDB over HTTP.
    public func perform(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String] = [:], body: JSON? = nil, user: UserContext = .system
    ) async -> (status: Int, body: [UInt8]) {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        let response: Response
        do {
            response = try await performTrusted(
                method, (path.hasPrefix("/") ? path : "/" + path) + CouchURL.query(query), headers: headers, body: body?.bytes ?? [], user: user)
        } catch {
            return (500, JSON.object(["error": "internal_server_error", "reason": .string("\(error)")]).bytes)
        }
        let collector = BodyCollector()
        do { try await response.body.write(collector) } catch {
            return (500, JSON.object(["error": "internal_server_error", "reason": .string("\(error)")]).bytes)
        }
        return (Int(response.status.code), collector.bytes.withLock { $0 })
    }
}

extension CouchAPI {
    /// Runs a request (`target`: its path and query, percent-encoded) through the routes and
    /// their middleware as `user`, trusted without credentials.
    func performTrusted(
        _ method: HTTPRequest.Method, _ target: String, headers: HTTPFields, body: [UInt8], user: UserContext,
        clientGone: @escaping @Sendable () -> Bool = { false }
    ) async throws -> Response {
        var head = HTTPRequest(method: method, scheme: nil, authority: nil, path: target)
        head.headerFields = headers
        var context = CouchRequestContext(peerAddress: nil, logger: logger)
        context.inProcessUser = user
        context.listener.clientGone = clientGone
        return try await pipeline.respond(to: Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body))), context: context)
    }

    /// Checks a name and password as the database API does (server admins, `_users`); the
    /// user with their roles, or nil.
    public func verify(name: String, password: String) async -> UserContext? {
        (try? await auth.login(name: name, password: password)) ?? nil
    }
}

/// Gathers a response body in memory (for in-process requests and rewritten answers).
final class BodyCollector: ResponseBodyWriter, Sendable {
    let bytes = Locked<[UInt8]>([])

    func write(_ buffer: ByteBuffer) async throws {
        bytes.withLock { $0 += buffer.readableBytesView }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
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
