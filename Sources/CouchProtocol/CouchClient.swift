import AsyncHTTPClient
import CouchJSON
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// A CouchDB server spoken to only through CouchDB's HTTP API: the server in this process
/// (`InProcessCouch`, in CouchServer), or Apache CouchDB over HTTP (`HTTPCouch`, cluster mode).
/// The application uses nothing else, so whatever it does, a CouchDB cluster can do.
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

    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

extension CouchClient {
    /// One request without query parameters.
    public func request(_ method: HTTPRequest.Method, _ path: String, body: JSON? = nil) async throws -> CouchReply {
        try await request(method, path, query: [:], body: body)
    }
}

/// Apache CouchDB over HTTP (cluster mode), as the server admin named in its URL
/// (`http://admin:secret@couchdb.example:5984`). The application runs on it unchanged.
public struct HTTPCouch: CouchClient {
    /// `scheme://host:port`, without credentials.
    public let baseURL: String
    /// `host:port` as devices reach the cluster (what a login hands out).
    public let host: String
    public let scheme: String
    let authorization: String
    let http: HTTPClient

    /// The client cluster-mode requests share.
    static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        configuration.timeout.connect = .seconds(10)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// A URL with admin credentials; 400 `bad_request` when it has none or is not http(s).
    public init(url: String, http: HTTPClient? = nil) throws(CouchError) {
        let address: AdminURL
        address = try AdminURL(url)
        scheme = address.scheme
        host = address.host
        baseURL = address.baseURL
        authorization = address.authorization
        self.http = http ?? HTTPCouch.sharedClient
    }

    public func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply {
        try await send(method, path, query: query, body: body, authorization: authorization)
    }

    /// Who a name and password are, as the cluster's `GET /_session` says with them.
    public func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
        let reply = try await send(.get, "/_session", query: [:], body: nil,
                                   authorization: "Basic " + Data("\(name):\(password)".utf8).base64EncodedString())
        guard reply.ok, let user = reply.json["userCtx"]?["name"]?.stringValue else { return nil }
        return (user, (reply.json["userCtx"]?["roles"]?.arrayValue ?? []).compactMap(\.stringValue))
    }

    func send(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?, authorization: String) async throws -> CouchReply {
        var url = baseURL + path
        if !query.isEmpty {
            // Every reserved character escaped, `+` too (CouchDB reads it as a space).
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            url += "?" + query.sorted { $0.key < $1.key }.map { key, value in
                "\(key.addingPercentEncoding(withAllowedCharacters: allowed) ?? key)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)"
            }.joined(separator: "&")
        }
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method.rawValue)
        request.headers.add(name: "Authorization", value: authorization)
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.bytes))
        }
        let response = try await http.execute(request, timeout: .seconds(120))
        let bytes = try await response.body.collect(upTo: 512 << 20)
        return CouchReply(status: Int(response.status.code), body: Array(buffer: bytes))
    }
}
