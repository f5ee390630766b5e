import AsyncHTTPClient
import CouchEngine
import CouchJSON
import Foundation
import MIMEMultipart
import NIOCore
import NIOHTTP1

/// A CouchDB-compatible database over HTTP: `lt serve`, Apache CouchDB, or anything that
/// speaks the replication protocol. Credentials come from the URL (`http://user:pw@host/db`)
/// or are passed in, and go out as basic auth.
public struct RemoteEndpoint: ReplicationEndpoint {
    /// How credentials go to the peer.
    public enum Authentication: Sendable {
        /// `Authorization: Basic` on every request.
        case basic
        /// Log in once with `POST /_session` and send the `AuthSession` cookie; log in again
        /// when the server answers 401 (an expired session).
        case cookie
    }

    /// The database URL without credentials, no trailing slash.
    public let url: String
    let authorization: String?
    let credentials: (user: String, password: String)?
    let authentication: Authentication
    private let sessionCookie = Locked<String?>(nil)
    let client: HTTPClient
    /// Whether `_bulk_get` works on this peer; probed on first use (false: never try it).
    private let bulkGetSupported: Locked<Bool?>

    /// The HTTP client replications share. Connection attempts are not retried inside the
    /// client: a peer that is down fails the request at once, and the replicator's own
    /// backoff decides when to try again (and reports the replication as offline meanwhile).
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(10)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// - Parameter bulkGet: use `_bulk_get` when the peer has it (false: always fetch with
    ///   per-document `open_revs`, as for peers without it).
    public init(url: String, username: String? = nil, password: String? = nil, authentication: Authentication = .basic,
                bulkGet: Bool = true, client: HTTPClient = RemoteEndpoint.sharedClient) throws {
        bulkGetSupported = Locked(bulkGet ? nil : false)
        guard var components = URLComponents(string: url), let scheme = components.scheme, ["http", "https"].contains(scheme),
              components.host != nil else {
            throw ReplicationError(.fatal, "Not an http(s) database URL: \(url)")
        }
        let user = username ?? components.user.map { $0.removingPercentEncoding ?? $0 }
        let pass = password ?? components.password.map { $0.removingPercentEncoding ?? $0 }
        components.user = nil
        components.password = nil
        var text = components.string ?? url
        while text.hasSuffix("/") { text.removeLast() }
        self.url = text
        if let user, let pass {
            authorization = "Basic " + Data("\(user):\(pass)".utf8).base64EncodedString()
            credentials = (user, pass)
        } else {
            authorization = nil
            credentials = nil
        }
        self.authentication = authentication
        self.client = client
    }

    public var displayName: String { url }

    /// The server's root URL and the database's path segment.
    var serverURL: String {
        guard let slash = url.range(of: "/", options: .backwards), slash.lowerBound > url.index(url.startIndex, offsetBy: 8) else { return url }
        return String(url[..<slash.lowerBound])
    }

    struct Reply {
        var status: Int
        var body: [UInt8]
        var contentType = ""
        var json: JSON { (try? JSON.parse(body)) ?? .null }
    }

    /// One request; network failures become transient errors, error statuses are returned.
    func send(_ method: HTTPMethod, _ path: String, json: JSON? = nil, base: String? = nil, accept: String = "application/json",
              timeout: TimeAmount = .seconds(120)) async throws -> Reply {
        guard authentication == .cookie, credentials != nil else {
            return try await execute(method, path, json: json, base: base, accept: accept, timeout: timeout, auth: authorization.map { ("Authorization", $0) })
        }
        var cookie = sessionCookie.withLock { $0 }
        if cookie == nil { cookie = try await logIn() }
        let reply = try await execute(method, path, json: json, base: base, accept: accept, timeout: timeout, auth: cookie.map { ("Cookie", $0) })
        guard reply.status == 401 else { return reply }
        // The session expired: log in again once.
        let fresh = try await logIn()
        return try await execute(method, path, json: json, base: base, accept: accept, timeout: timeout, auth: fresh.map { ("Cookie", $0) })
    }

    /// `POST /_session`; returns the `AuthSession=...` cookie, or nil when the server set none.
    private func logIn() async throws -> String? {
        guard let credentials else { return nil }
        var request = HTTPClientRequest(url: serverURL + "/_session")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: JSON.object(["name": .string(credentials.user), "password": .string(credentials.password)]).bytes))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .seconds(60))
            _ = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw ReplicationError(.transient, "POST \(serverURL)/_session: \(error)")
        }
        guard response.status == .ok else {
            throw failure(Reply(status: Int(response.status.code), body: []), "log in to \(serverURL)")
        }
        let cookie = response.headers["Set-Cookie"].lazy.compactMap { header -> String? in
            let pair = header.split(separator: ";").first.map(String.init) ?? ""
            return pair.hasPrefix("AuthSession=") ? pair : nil
        }.first
        sessionCookie.withLock { $0 = cookie }
        return cookie
    }

    private func execute(_ method: HTTPMethod, _ path: String, json: JSON?, base: String?, accept: String, timeout: TimeAmount,
                         auth: (String, String)?) async throws -> Reply {
        var request = HTTPClientRequest(url: (base ?? url) + path)
        request.method = method
        request.headers.add(name: "Accept", value: accept)
        if let auth { request.headers.add(name: auth.0, value: auth.1) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: json.bytes))
        }
        do {
            let response = try await client.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 1 << 30)
            return Reply(status: Int(response.status.code), body: Array(buffer: body), contentType: response.headers["Content-Type"].first ?? "")
        } catch {
            throw ReplicationError(.transient, "\(method) \(displayName)\(path): \(error)")
        }
    }

    /// Turns an unexpected status into the error kind the replicator acts on.
    func failure(_ reply: Reply, _ what: String) -> ReplicationError {
        let reason = reply.json["reason"]?.stringValue ?? String(decoding: reply.body.prefix(200), as: UTF8.self)
        switch reply.status {
        case 401, 403: return ReplicationError(.unauthorized, "\(what): \(reply.status) \(reason)")
        case 404: return ReplicationError(.notFound, "\(what): \(reason)")
        case 408, 429, 500...599: return ReplicationError(.transient, "\(what): \(reply.status) \(reason)")
        default: return ReplicationError(.fatal, "\(what): \(reply.status) \(reason)")
        }
    }

    static func encode(_ value: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#&=+")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    static func query(_ json: JSON) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#;")  // `;` separates parameters for CouchDB too
        return json.text.addingPercentEncoding(withAllowedCharacters: allowed) ?? json.text
    }

    public func prepare(create: Bool) async throws {
        let head = try await send(.GET, "")
        if head.status == 200 { return }
        if head.status == 404, create {
            let created = try await send(.PUT, "")
            if created.status == 201 || created.status == 202 || created.status == 412 { return }
            throw failure(created, "create \(displayName)")
        }
        throw failure(head, "open \(displayName)")
    }

    public func identity() async throws -> String {
        let root = try await send(.GET, "/", base: serverURL)
        let name = url.split(separator: "/").last.map(String.init) ?? url
        if root.status == 200, let uuid = root.json["uuid"]?.stringValue { return "\(uuid)/\(name)" }
        return url
    }

    public func localDocument(_ id: String) async throws -> JSONObject? {
        let reply = try await send(.GET, "/" + id)
        if reply.status == 404 { return nil }
        guard reply.status == 200, let object = reply.json.objectValue else { throw failure(reply, "read \(id)") }
        return object
    }

    public func saveLocalDocument(_ id: String, _ body: JSONObject) async throws {
        var body = body
        if let current = try await localDocument(id), let rev = current["_rev"] { body["_rev"] = rev } else { body.removeValue(forKey: "_rev") }
        body["_id"] = .string(id)
        let reply = try await send(.PUT, "/" + id, json: .object(body))
        guard reply.status == 201 || reply.status == 200 else { throw failure(reply, "save checkpoint \(id)") }
    }

    public func changes(since: JSON, limit: Int, filter: ReplicationFilter?) async throws -> ChangesBatch {
        try await readChanges(feed: "normal", since: since, limit: limit, filter: filter, timeout: nil)
    }

    func readChanges(feed: String, since: JSON, limit: Int, filter: ReplicationFilter?, timeout: Duration?) async throws -> ChangesBatch {
        // A string sequence goes out as it came (CouchDB's are opaque strings); others as JSON.
        let sinceParam = since.stringValue.map(RemoteEndpoint.encode) ?? RemoteEndpoint.query(since)
        var path = "/_changes?style=all_docs&feed=\(feed)&limit=\(limit)&since=\(sinceParam)"
        if let timeout { path += "&timeout=\(timeout.components.seconds * 1000)" }
        var body: JSON? = nil
        switch filter {
        case let .docIDs(ids)?:
            path += "&filter=_doc_ids"
            body = ["doc_ids": .array(ids.map(JSON.string))]
        case let .selector(selector)?:
            path += "&filter=_selector"
            body = ["selector": selector]
        case let .function(name, queryParams)?:
            path += "&filter=" + RemoteEndpoint.encode(name)
            for (key, value) in queryParams.members {
                path += "&" + RemoteEndpoint.encode(key) + "=" + RemoteEndpoint.encode(value.stringValue ?? value.text)
            }
        case nil: break
        }
        let reply = try await send(body == nil ? .GET : .POST, path, json: body, timeout: .seconds(Int64((timeout?.components.seconds ?? 60) + 60)))
        guard reply.status == 200 else { throw failure(reply, "read changes") }
        let json = reply.json
        return ChangesBatch(entries: (json["results"]?.arrayValue ?? []).compactMap(ChangeEntry.init(row:)), lastSeq: json["last_seq"] ?? since, pending: json["pending"]?.intValue)
    }

    public func filterCode(_ name: String, queryParams: JSONObject) async throws -> String {
        let (ddocID, function) = try ReplicationFilter.designPath(name, queryParams)
        let reply = try await send(.GET, "/" + ddocID.split(separator: "/").map { RemoteEndpoint.encode(String($0)) }.joined(separator: "/"))
        guard reply.status == 200 else { throw failure(reply, "read the filter's design document \(ddocID)") }
        var code: JSON? = reply.json
        for key in ReplicationFilter.codePath(name, function) { code = code?[key] }
        guard let text = code?.stringValue else { throw ReplicationError(.fatal, "\(ddocID) has no filter function \(function)") }
        return text
    }

    public func waitForChanges(since: JSON, timeout: Duration) async throws -> Bool {
        let batch = try await readChanges(feed: "longpoll", since: since, limit: 1, filter: nil, timeout: timeout)
        return !batch.entries.isEmpty
    }

    public func revsDiff(_ request: [(id: String, revs: [Revision])]) async throws -> [RevsDiffEntry] {
        var body = JSONObject()
        for (id, revs) in request { body.members.append((id, .array(revs.map { .string($0.description) }))) }
        let reply = try await send(.POST, "/_revs_diff", json: .object(body))
        guard reply.status == 200, case let .object(diff) = reply.json else { throw failure(reply, "_revs_diff") }
        return RevsDiffEntry.parse(diff)
    }

    public func fetch(_ requests: [FetchRequest]) async throws -> [JSON] {
        if bulkGetSupported.withLock({ $0 }) != false {
            var entries: [JSON] = []
            for request in requests {
                for rev in request.revs {
                    entries.append(["id": .string(request.id), "rev": .string(rev.description),
                                    "atts_since": .array(request.attsSince.map { .string($0.description) })])
                }
            }
            let reply = try await send(.POST, "/_bulk_get?revs=true&latest=true&attachments=true", json: ["docs": .array(entries)])
            if reply.status == 200 {
                bulkGetSupported.withLock { $0 = true }
                var docs: [JSON] = []
                var seen = Set<String>()
                for result in reply.json["results"]?.arrayValue ?? [] {
                    for item in result["docs"]?.arrayValue ?? [] {
                        guard let doc = item["ok"], let id = doc["_id"]?.stringValue, let rev = doc["_rev"]?.stringValue else { continue }
                        if seen.insert(id + "\u{0}" + rev).inserted { docs.append(doc) }
                    }
                }
                return docs
            }
            guard [400, 404, 405, 501].contains(reply.status) else { throw failure(reply, "_bulk_get") }
            bulkGetSupported.withLock { $0 = false }
        }
        // Peers without _bulk_get: one open_revs request per document, as CouchDB's replicator
        // falls back, asking for multipart/mixed (attachment bodies as binary parts).
        var docs: [JSON] = []
        for request in requests {
            let revs = JSON.array(request.revs.map { .string($0.description) })
            let since = JSON.array(request.attsSince.map { .string($0.description) })
            let path = "/\(RemoteEndpoint.encode(request.id))?revs=true&latest=true&attachments=true&open_revs=\(RemoteEndpoint.query(revs))&atts_since=\(RemoteEndpoint.query(since))"
            let reply = try await send(.GET, path, accept: "multipart/mixed, application/json")
            guard reply.status == 200 else { throw failure(reply, "open_revs \(request.id)") }
            docs += try RemoteEndpoint.openRevisionsDocuments(reply)
        }
        return docs
    }

    /// The documents of an `open_revs` answer: a JSON array (`[{"ok": doc}, {"missing": rev}]`)
    /// or `multipart/mixed`, whose parts are JSON documents or `multipart/related` documents
    /// followed by their attachment bodies (which go back inline, as base64).
    static func openRevisionsDocuments(_ reply: Reply) throws -> [JSON] {
        guard reply.contentType.lowercased().hasPrefix("multipart/"), let boundary = Multipart.boundary(of: reply.contentType) else {
            return (reply.json.arrayValue ?? []).compactMap { $0["ok"] }
        }
        var docs: [JSON] = []
        for part in try parts(reply.body, boundary: boundary) {
            let type = part.headers["content-type"] ?? "application/json"
            if type.lowercased().hasPrefix("multipart/related"), let inner = Multipart.boundary(of: type) {
                let related = try parts(part.body, boundary: inner)
                guard let first = related.first, case var .object(doc) = (try? JSON.parse(first.body)) ?? .null else { continue }
                var attachments = doc["_attachments"]?.objectValue ?? JSONObject()
                let following = attachments.members.filter { $0.value["follows"] == .bool(true) }.map(\.key)
                for (index, body) in related.dropFirst().enumerated() {
                    let named = body.headers["content-disposition"].flatMap(filename)
                    guard let name = named ?? (index < following.count ? following[index] : nil),
                          var attachment = attachments[name]?.objectValue else { continue }
                    attachment.removeValue(forKey: "follows")
                    // Inline data is always the plain bytes: a gzip-encoded part is decoded.
                    var bytes = body.body
                    let encoding = attachment.removeValue(forKey: "encoding")?.stringValue ?? body.headers["content-encoding"]
                    attachment.removeValue(forKey: "encoded_length")
                    if let encoding, encoding.lowercased() == "gzip" {
                        do { bytes = try AttachmentEncoding.gunzip(bytes, declaredLength: attachment["length"]) } catch {
                            throw ReplicationError(.transient, "open_revs: attachment \(name) is not valid gzip")
                        }
                    }
                    attachment["data"] = .string(Data(bytes).base64EncodedString())
                    attachments[name] = .object(attachment)
                }
                if !attachments.isEmpty { doc["_attachments"] = .object(attachments) }
                docs.append(.object(doc))
            } else if !type.contains("error=\"true\""), let doc = try? JSON.parse(part.body), doc["_id"] != nil {
                docs.append(doc)
            }
        }
        return docs
    }

    static func parts(_ body: [UInt8], boundary: String) throws -> [Multipart.Part] {
        do { return try Multipart.parse(body, boundary: boundary) } catch {
            throw ReplicationError(.transient, "open_revs: \(error.description)")
        }
    }

    /// The `filename` of a `Content-Disposition: attachment; filename="..."` header.
    static func filename(_ disposition: String) -> String? {
        guard let range = disposition.range(of: "filename=") else { return nil }
        var name = disposition[range.upperBound...].trimmingCharacters(in: .whitespaces)
        if let semicolon = name.firstIndex(of: ";") { name = String(name[..<semicolon]) }
        return name.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }

    public func write(_ documents: [JSON]) async throws -> [WriteFailure] {
        let reply = try await send(.POST, "/_bulk_docs", json: ["docs": .array(documents), "new_edits": false])
        guard reply.status == 201 || reply.status == 202 else { throw failure(reply, "_bulk_docs") }
        return (reply.json.arrayValue ?? []).compactMap { row in
            guard let error = row["error"]?.stringValue else { return nil }
            return WriteFailure(id: row["id"]?.stringValue ?? "", error: error, reason: row["reason"]?.stringValue ?? "")
        }
    }
}
