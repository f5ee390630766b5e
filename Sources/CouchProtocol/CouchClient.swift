public import AsyncHTTPClient
public import CouchJSON
import Foundation
public import HTTPTypes
public import NIOHTTP1

/// A CouchDB server spoken to only through CouchDB's HTTP API: the server in this process
/// (`InProcessCouch`, in CouchServer), or Apache CouchDB over HTTP (`HTTPCouch`, cluster mode).
/// The application uses nothing else, so whatever it does, a CouchDB cluster can do.
public protocol CouchClient: Sendable {
    /// One request as a server admin. `path` is percent-encoded as in a URL.
    func request(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?
    ) async throws -> CouchReply

    /// Who a name and password are to the database (`_session`): name and roles, or nil.
    func verify(name: String, password: String) async throws -> (name: String, roles: [String])?

    /// A page of `db`'s changes after `since`, at most `limit` rows, each with every leaf
    /// revision and the winning document (`_changes?style=all_docs&include_docs=true`); nil
    /// when `db` does not exist. Answered over HTTP unless the client has a shorter way.
    func changes(of db: String, since: String, limit: Int) async throws -> DocumentChanges?

    /// The named revisions of documents of `db` with their revision histories and attachments
    /// inline (`_bulk_get?revs=true&attachments=true`): those found, in the order asked.
    func documents(_ wanted: [DocumentRevision], from db: String) async throws -> [JSON]

    /// Stores documents with the revisions they carry, as a replicator does (`_bulk_docs`
    /// with `new_edits: false`): the ones refused, with CouchDB's error and reason.
    func storeReplicated(_ docs: [JSON], in db: String) async throws -> [WriteRefusal]

    /// Which of `ids` name a document of `db`, deleted ones included (`_all_docs` with `keys`).
    func existing(_ ids: [String], in db: String) async throws -> Set<String>

    /// Stores new documents (`_bulk_docs`): one row per document, in order, as CouchDB answers
    /// them (`ok`, `id`, `rev`; or `id`, `error`, `reason`).
    func store(_ docs: [JSON], in db: String) async throws -> [JSON]
}

/// A CouchDB answer read whole: status, headers and body.
public struct CouchReply: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    public var json: JSON { (try? JSON.parse(body)) ?? .null }
    public var ok: Bool { (200..<300).contains(status) }
    public var contentType: String { headers["Content-Type"].first ?? "" }

    /// The answer's error as CouchDB states it (`{"error", "reason"}`, with the status).
    public var error: CouchError {
        CouchError(
            status: status, error: json["error"]?.stringValue ?? "http_\(status)",
            reason: json["reason"]?.stringValue ?? "")
    }

    /// Throws the answer's error unless it is a success.
    public func requireOK() throws(CouchError) {
        guard ok else { throw error }
    }

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8]) {
        self.status = status
        self.headers = headers
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
    let server: CouchHTTPClient
    /// `scheme://host:port`, without credentials.
    public var baseURL: String { server.serverURL }
    /// `host:port` as devices reach the cluster (what a login hands out).
    public var host: String { server.host }
    public var scheme: String { server.scheme }

    /// A URL with admin credentials; 400 `bad_request` when it has none or is not http(s).
    /// Connections are retried while a request's deadline allows (a cluster node restarting).
    public init(url: String, http: HTTPClient = CouchHTTPClient.retryingConnections) throws(CouchError) {
        server = try CouchHTTPClient.admin(url: url, http: http)
    }

    public func request(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?
    ) async throws -> CouchReply {
        try await server.send(
            HTTPMethod(rawValue: method.rawValue), path + CouchURL.query(query), json: body, maxBody: 512 << 20)
    }

    /// Who a name and password are, as the cluster's `GET /_session` says with them.
    public func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
        let reply = try await server.authenticated(as: (name, password)).send(.GET, "/_session")
        guard reply.ok, let user = reply.json["userCtx"]?["name"]?.stringValue else { return nil }
        return (user, (reply.json["userCtx"]?["roles"]?.arrayValue ?? []).compactMap(\.stringValue))
    }
}
