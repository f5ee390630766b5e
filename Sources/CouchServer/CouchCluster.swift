public import AsyncHTTPClient
import CouchEngine
public import CouchJSON
public import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird
public import Logging
import NIOCore
import NIOHTTP1
import Replication

/// The Apache CouchDB cluster this server fronts in cluster mode, for what CouchDB cannot do
/// itself: per-owner access to a shared database. Owners' requests to a shared database are
/// rewritten into their namespace (as in embedded mode) and sent to the cluster with the
/// server's admin credentials; everyone else's requests to it pass through with their own
/// credentials, so the cluster's `_security` decides. Users and API keys are the cluster's
/// `_users` documents (`ClusterUsers`).
public struct CouchCluster: Sendable {
    /// Each node, as no one: each request carries the `Authorization` it is sent with.
    let servers: [CouchHTTPClient]
    /// Which nodes answer, shared with the application's client (`FailoverCouch`).
    let health: ClusterHealth
    /// The first node's `scheme://host:port`, without credentials.
    public var baseURL: String { servers[0].serverURL }
    let adminAuthorization: String
    let users: ClusterUsers
    /// Each shared database's `_security`, read from the cluster at most every 30 s.
    private let securities = Locked<[String: (security: JSONObject, read: ContinuousClock.Instant)]>([:])

    /// `url` carries the admin credentials: `http://ADMIN:PASSWORD@host:5984`.
    public init(url: String, client: HTTPClient = CouchHTTPClient.shared) throws(CouchError) {
        try self.init(urls: [url], health: nil, client: client)
    }

    /// Every node's URL with the same admin credentials; requests go to a node that answers
    /// (`health`: the application's view of the nodes, so both steer the same way), on
    /// connections of their own (`CouchHTTPClient.forwarding`), never queued behind the
    /// application's requests or behind each other.
    public init(
        urls: [String], health: ClusterHealth?, client: HTTPClient = CouchHTTPClient.forwarding
    ) throws(CouchError) {
        guard let first = urls.first else { throw .badRequest("The CouchDB cluster needs at least one node's URL") }
        let admin = try CouchHTTPClient.admin(url: first, http: client)
        adminAuthorization = admin.basicAuthorization ?? ""
        var servers: [CouchHTTPClient] = []
        for url in urls { servers.append(try CouchHTTPClient.admin(url: url, http: client).authenticated(as: nil)) }
        self.servers = servers
        self.health = health ?? ClusterHealth(nodes: servers.map(\.host))
        users = ClusterUsers()
    }

    /// Request headers a forwarded request keeps; `Authorization` is set per request.
    static let forwardedRequestHeaders: Set<String> = ["content-type", "accept", "if-none-match", "if-match"]
    /// Response headers passed back; the body's framing is this server's own.
    static let returnedResponseHeaders: Set<String> = [
        "content-type", "etag", "location", "cache-control", "x-couch-update-newrev", "x-couch-request-id",
    ]

    /// Sends a request to the cluster (`authorization` nil: anonymous) and answers with its
    /// status, headers and body, the body streamed as it arrives (continuous feeds too).
    /// `Location` comes back as a path on this server.
    func send(
        _ method: HTTPRequest.Method, path: [String], query: [String: String], headers: HTTPFields, body: [UInt8],
        authorization: String?
    ) async throws -> APIResponse {
        var forwarded = headers.filter { Self.forwardedRequestHeaders.contains($0.name.canonicalName) }.map {
            ($0.name.rawName, $0.value)
        }
        if let authorization { forwarded.append(("Authorization", authorization)) }
        let sendsBody = !body.isEmpty || method == .put || method == .post
        let (response, server): (HTTPClientResponse, CouchHTTPClient)
        do {
            let (servers, forwarded) = (servers, forwarded)
            (response, server) = try await health.onSomeNode(
                readOnly: method == .get || method == .head, isAlive: { await servers[$0].upCheck() != .unanswered }
            ) { node in
                // The deadline covers the answer's head only (a long poll's head can wait for its
                // changes); a body, a continuous feed's too, streams for as long as it lasts.
                let response = try await servers[node].stream(
                    HTTPMethod(rawValue: method.rawValue), CouchURL.path(path) + CouchURL.query(query),
                    headers: forwarded,
                    body: sendsBody ? body : nil, contentType: headers[.contentType] ?? "application/json", accept: nil,
                    deadline: .now() + .seconds(300))
                return (response, servers[node])
            }
        } catch let error as CouchError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw CouchError(
                status: 503, error: "service_unavailable", reason: "The CouchDB cluster did not answer: \(error)")
        }
        let baseURL = server.serverURL
        var fields = HTTPFields()
        for (name, value) in response.headers where Self.returnedResponseHeaders.contains(name.lowercased()) {
            guard let fieldName = HTTPField.Name(name) else { continue }
            if fieldName == .location, value.hasPrefix(baseURL) {
                fields[fieldName] = String(value.dropFirst(baseURL.count))
            } else {
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        return APIResponse(
            status: HTTPResponse.Status(code: Int(response.status.code)), headers: fields,
            body: ResponseBody(asyncSequence: response.body))
    }

    /// A request as the cluster's admin, its JSON answer read whole.
    func adminJSON(
        _ method: HTTPRequest.Method, _ path: [String], query: [String: String] = [:]
    ) async throws -> (status: Int, json: JSON) {
        let response = try await send(
            method, path: path, query: query, headers: [:], body: [], authorization: adminAuthorization)
        let collector = BodyCollector()
        try await response.body.write(collector)
        let bytes = collector.bytes.withLock { $0 }
        return (Int(response.status.code), (try? JSON.parse(bytes)) ?? .null)
    }

    /// The `_security` of a database on the cluster (cached for 30 s); empty when unreadable.
    func security(of db: String) async -> JSONObject {
        let now = ContinuousClock.now
        if let known = securities.withLock({ $0[db] }), now - known.read < .seconds(30) { return known.security }
        let security = (try? await adminJSON(.get, [db, "_security"]))?.json.objectValue ?? [:]
        securities.withLock { $0[db] = (security, now) }
        return security
    }

    /// A user's `_users` document on the cluster (see `ClusterUsers`); nil for no such user, the
    /// 503 when the cluster cannot be asked.
    func user(_ name: String) async throws -> JSONObject? {
        try await users.document(name) { name in
            let (status, json) = try await adminJSON(.get, ["_users", "org.couchdb.user:" + name])
            guard status == 200 || status == 404 else {
                throw CouchError(
                    status: 503, error: "service_unavailable",
                    reason:
                        "The CouchDB cluster could not read the user (\(status) \(json["reason"]?.stringValue ?? ""))")
            }
            return json.objectValue.flatMap { $0["derived_key"] == nil ? nil : $0 }
        }
    }

    /// Follows the cluster's `_users` changes until cancelled, forgetting cached users as
    /// their documents change (as CouchDB's own authentication cache does).
    public func followUsers(logger: Logger) async {
        var since = "now"
        while !Task.isCancelled {
            do {
                let (status, json) = try await adminJSON(
                    .get, ["_users", "_changes"], query: ["feed": "longpoll", "since": since, "timeout": "30000"])
                guard status == 200, let last = json["last_seq"] else {
                    throw CouchError(status: status, error: "unavailable", reason: "\(json)")
                }
                for row in json["results"]?.arrayValue ?? [] {
                    if let id = row["id"]?.stringValue, id.hasPrefix("org.couchdb.user:") {
                        users.forget(String(id.dropFirst(17)))
                    }
                }
                if since == "now" { users.following(true) }
                since = last.stringValue ?? last.text
            } catch {
                // Without the feed nothing cached can be trusted: read every user afresh until it is back.
                users.following(false)
                since = "now"
                logger.warning("following the cluster's _users: \(error); again in 2 s")
                try? await Task.sleep(for: .seconds(2))
            }
        }
        users.following(false)
    }
}

/// Users' `_users` documents read from the cluster, remembered only while the cluster's
/// `_users` changes feed is followed (so a changed password, a revoked API key or a deleted
/// user takes effect as soon as the feed says so) and for at most a minute. Unknown names are
/// never remembered: a user registered a moment ago is found.
final class ClusterUsers: Sendable {
    private struct State {
        var documents: [String: (doc: JSONObject, read: ContinuousClock.Instant)] = [:]
        var following = false
        /// Counts forgotten users, so a read that overlapped a change is not remembered.
        var changes = 0
    }
    private let state = Locked(State())

    func document(_ name: String, read: (String) async throws -> JSONObject?) async throws -> JSONObject? {
        let now = ContinuousClock.now
        let (known, changes) = state.withLock { ($0.following ? $0.documents[name] : nil, $0.changes) }
        if let known, now - known.read < .seconds(60) { return known.doc }
        guard let doc = try await read(name) else { return nil }
        state.withLock { state in
            guard state.following, state.changes == changes else { return }
            if state.documents.count > 100_000 { state.documents.removeAll() }
            state.documents[name] = (doc, now)
        }
        return doc
    }

    func forget(_ name: String) {
        state.withLock { state in
            state.documents.removeValue(forKey: name)
            state.changes += 1
        }
    }

    func following(_ on: Bool) {
        state.withLock { state in
            if !on { state.documents.removeAll() }
            state.following = on
            state.changes += 1
        }
    }
}
