public import AsyncHTTPClient
public import CouchJSON
import Foundation
import NIOConcurrencyHelpers
public import NIOCore
public import NIOHTTP1
import NIOSSL

/// A CouchDB-compatible server over HTTP: the package's one HTTP client, which the replicator,
/// cluster mode, TrackerKit and the command line all use. It knows where the server is, who to
/// be (basic auth, or a `_session` cookie renewed when it expires) and how to send JSON;
/// paths are built with `CouchURL`.
public struct CouchHTTPClient: Sendable {
    /// How credentials go to the server.
    public enum Authentication: Sendable {
        /// `Authorization: Basic` on every request.
        case basic
        /// Log in once with `POST /_session` and send the `AuthSession` cookie; log in again
        /// when the server answers 401 (an expired session).
        case cookie
    }

    /// An answer read whole.
    public typealias Reply = CouchReply

    /// `scheme://host:port` and any path the URL had (`/db`), without credentials or a
    /// trailing slash.
    public let url: String
    /// `scheme://host:port`.
    public let serverURL: String
    /// `host:port`, the port filled in when the URL leaves it out.
    public let host: String
    public let scheme: String
    public private(set) var credentials: (user: String, password: String)?
    public let authentication: Authentication
    public let http: HTTPClient
    private var sessionCookie = NIOLockedValueBox<String?>(nil)

    /// The HTTP client everything shares. Connection attempts are not retried inside the
    /// client: a server that is down fails the request at once, and the caller's own backoff
    /// decides when to try again (the replicator reports itself offline meanwhile; a device
    /// answers from its own store instead of waiting out a connect timeout). HTTPS peers are
    /// verified against the system's CAs and `ClientTrust`'s.
    public static let shared = makeHTTPClient(retryingConnections: false, tls: ClientTrust.fixedConfiguration())

    /// Connection attempts retried until the request's deadline: for a server talking to the
    /// CouchDB cluster it fronts, where a node restarting should delay requests, not fail them.
    public static let retryingConnections = makeHTTPClient(
        retryingConnections: true, tls: ClientTrust.fixedConfiguration())

    /// A client like `shared` that also trusts the CA certificates in the PEM file at `path`
    /// (a device app's private CA or a self-signed test server), for `TrackerClient(baseURL:http:)`.
    public static func httpClient(trustingCAFile path: String) throws -> HTTPClient {
        makeHTTPClient(
            retryingConnections: false, tls: ClientTrust.tlsConfiguration(extra: try ClientTrust.certificates(in: path))
        )
    }

    /// Connections that fail at once (2 s to connect, no retry): for `FailoverCouch`, which
    /// goes to another node instead of waiting on one that is gone.
    public static let failingFast = makeHTTPClient(
        retryingConnections: false, tls: ClientTrust.fixedConfiguration(), connectTimeout: .seconds(2))

    /// Connections like `failingFast`, in a pool of their own as large as a listener's default
    /// connection limit (`lt serve --max-connections`, 2,048): for requests this server forwards
    /// for its clients (`CouchCluster`: devices' writes, reads and feeds in single-database
    /// mode). Each forwarded request has a client connection behind it, so none waits for a
    /// pooled connection — a client's held-open `_changes` feeds cannot queue other clients'
    /// requests, nor the application's own on `failingFast`. Idle ones close after 10 s.
    public static let forwarding = makeHTTPClient(
        retryingConnections: false, tls: ClientTrust.fixedConfiguration(), connectTimeout: .seconds(2),
        connectionsPerHost: 2_048, idleTimeout: .seconds(10))

    /// Connections of their own for health checks (`upCheck`), so a check never waits behind
    /// the requests it is checking on.
    static let probing = makeHTTPClient(
        retryingConnections: false, tls: ClientTrust.fixedConfiguration(), connectTimeout: .seconds(2))

    /// What `GET /_up` says within `timeout`: refusing with the status it gives when 404 (CouchDB's
    /// `maintenance_mode`, `nolb` or `seeding`), no answer, or else ready — any other answer
    /// (200; 401 where `require_valid_user` covers `/_up`) is a node that takes requests.
    public func upCheck(within timeout: TimeAmount = .seconds(2)) async -> ClusterNodes.Check {
        guard
            let response = try? await Self.probing.execute(
                HTTPClientRequest(url: serverURL + "/_up"), timeout: timeout),
            let body = try? await response.body.collect(upTo: 1 << 16)
        else { return .unanswered }
        guard response.status == .notFound else { return .ready }
        let status = (try? JSON.parse(Array(buffer: body)))?["status"]?.stringValue
        return .refusing(status: status ?? "HTTP 404")
    }

    private static func makeHTTPClient(
        retryingConnections: Bool, tls: TLSConfiguration, connectTimeout: TimeAmount = .seconds(10),
        connectionsPerHost: Int = 16, idleTimeout: TimeAmount = .seconds(60)
    ) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        // Requests beyond `connectionsPerHost` wait for a connection of the pool to be free.
        configuration.connectionPool = .init(
            idleTimeout: idleTimeout, concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerHost)
        configuration.connectionPool.retryConnectionEstablishment = retryingConnections
        configuration.timeout.connect = connectTimeout
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// A server admin's URL, as cluster mode is given one (`http(s)://ADMIN:PASSWORD@host[:port]`);
    /// 400 `bad_request` without credentials.
    public static func admin(
        url: String, http: HTTPClient = CouchHTTPClient.shared
    ) throws(CouchError) -> CouchHTTPClient {
        let client = try? CouchHTTPClient(url: url, http: http)
        guard let client, client.credentials != nil else {
            throw .badRequest("The CouchDB URL must look like http://ADMIN:PASSWORD@host:5984")
        }
        return client
    }

    /// `url` is `http(s)://[user:password@]host[:port][/path]`; `username` and `password`,
    /// when given, win over the URL's. 400 `bad_request` for anything else.
    public init(
        url: String, username: String? = nil, password: String? = nil, authentication: Authentication = .basic,
        http: HTTPClient = CouchHTTPClient.shared
    ) throws(CouchError) {
        guard var components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            ["http", "https"].contains(scheme),
            let hostname = components.host, !hostname.isEmpty
        else {
            throw .badRequest("Not an http(s) URL: \(url)")
        }
        let user = username ?? components.user.map { $0.removingPercentEncoding ?? $0 }
        let pass = password ?? components.password.map { $0.removingPercentEncoding ?? $0 }
        credentials = user.flatMap { user in pass.map { (user, $0) } }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        var text = components.string ?? url
        while text.hasSuffix("/") { text.removeLast() }
        self.url = text
        self.scheme = scheme
        let bracketed = hostname.contains(":") ? "[\(hostname)]" : hostname
        host = "\(bracketed):\(components.port ?? (scheme == "https" ? 443 : 80))"
        serverURL = "\(scheme)://\(host)"
        self.authentication = authentication
        self.http = http
    }

    /// The same server as someone else (nil: no one), with a session of their own.
    public func authenticated(as credentials: (user: String, password: String)?) -> CouchHTTPClient {
        var copy = self
        copy.credentials = credentials
        copy.sessionCookie = NIOLockedValueBox(nil)
        return copy
    }

    /// `Authorization: Basic …` for the credentials, if any.
    public var basicAuthorization: String? {
        credentials.map { "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString() }
    }

    /// Sends a request and returns the answer's head with its body still streaming (feeds,
    /// downloads, pass-through). `target` is a path and query built with `CouchURL`, relative to
    /// `url` (or to `serverURL` when `fromServerRoot`). Transport failures are thrown as they
    /// come; error statuses are answers.
    public func stream(
        _ method: HTTPMethod, _ target: String, fromServerRoot: Bool = false, headers: [(String, String)] = [],
        body: [UInt8]? = nil, contentType: String = "application/json", accept: String? = "application/json",
        deadline: NIODeadline
    ) async throws -> HTTPClientResponse {
        try await stream(
            method, target, fromServerRoot: fromServerRoot, headers: headers,
            requestBody: body.map { .bytes(ByteBuffer(bytes: $0)) }, contentType: contentType, accept: accept,
            deadline: deadline)
    }

    /// `stream` with a request body of any kind: an upload streamed from a file, sent once
    /// (with basic authentication; a streamed body cannot be sent again after a cookie expires).
    public func stream(
        _ method: HTTPMethod, _ target: String, fromServerRoot: Bool = false, headers: [(String, String)] = [],
        requestBody body: HTTPClientRequest.Body?, contentType: String, accept: String? = "application/json",
        deadline: NIODeadline
    ) async throws -> HTTPClientResponse {
        func attempt(_ authorization: (String, String)?) async throws -> HTTPClientResponse {
            var request = HTTPClientRequest(url: (fromServerRoot ? serverURL : url) + target)
            request.method = method
            if let accept { request.headers.add(name: "Accept", value: accept) }
            for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
            if let authorization { request.headers.replaceOrAdd(name: authorization.0, value: authorization.1) }
            if let body {
                request.headers.replaceOrAdd(name: "Content-Type", value: contentType)
                request.body = body
            }
            do { return try await http.execute(request, deadline: deadline) } catch {
                throw ClientTrust.classify(error, server: serverURL)
            }
        }
        guard authentication == .cookie, credentials != nil else {
            return try await attempt(basicAuthorization.map { ("Authorization", $0) })
        }
        var cookie = sessionCookie.withLockedValue { $0 }
        if cookie == nil { cookie = try await logIn() }
        let response = try await attempt(cookie.map { ("Cookie", $0) })
        guard response.status == .unauthorized else { return response }
        // The session expired: log in again once.
        _ = try? await response.body.collect(upTo: 1 << 20)
        return try await attempt(try await logIn().map { ("Cookie", $0) })
    }

    /// Sends a request and reads the whole answer (at most `maxBody` bytes).
    public func send(
        _ method: HTTPMethod, _ target: String, fromServerRoot: Bool = false, headers: [(String, String)] = [],
        json: JSON? = nil, accept: String = "application/json", timeout: TimeAmount = .seconds(120),
        maxBody: Int = 1 << 30
    ) async throws -> Reply {
        let deadline = NIODeadline.now() + timeout
        let response = try await stream(
            method, target, fromServerRoot: fromServerRoot, headers: headers, body: json?.bytes,
            accept: accept, deadline: deadline)
        let body = try await response.body.collect(upTo: maxBody)
        return Reply(status: Int(response.status.code), headers: response.headers, body: Array(buffer: body))
    }

    /// `POST /_session`; returns the `AuthSession=...` cookie, or nil when the server set none.
    private func logIn() async throws -> String? {
        guard let credentials else { return nil }
        var request = HTTPClientRequest(url: serverURL + "/_session")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(
            ByteBuffer(
                bytes: JSON.object(["name": .string(credentials.user), "password": .string(credentials.password)]).bytes
            ))
        let response: HTTPClientResponse
        do { response = try await http.execute(request, timeout: .seconds(60)) } catch {
            throw ClientTrust.classify(error, server: serverURL)
        }
        _ = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else {
            throw CouchProtocolError.loginRefused(status: Int(response.status.code), server: serverURL)
        }
        let cookie = response.headers["Set-Cookie"].lazy.compactMap { header -> String? in
            let pair = header.split(separator: ";").first.map(String.init) ?? ""
            return pair.hasPrefix("AuthSession=") ? pair : nil
        }.first
        sessionCookie.withLockedValue { $0 = cookie }
        return cookie
    }
}
