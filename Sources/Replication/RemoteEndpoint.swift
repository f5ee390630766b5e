public import AsyncHTTPClient
public import CouchEngine
public import CouchJSON
public import CouchProtocol
import Foundation
import MIMEMultipart
import NIOCore
import NIOHTTP1

/// A CouchDB-compatible database over HTTP: `lt serve`, Apache CouchDB, or anything that
/// speaks the replication protocol. Credentials come from the URL (`http://user:pw@host/db`)
/// or are passed in, and go out as basic auth.
public struct RemoteEndpoint: ReplicationEndpoint {
    /// How credentials go to the peer (basic auth, or a `_session` cookie).
    public typealias Authentication = CouchHTTPClient.Authentication
    typealias Reply = CouchHTTPClient.Reply

    /// The database URL without credentials, no trailing slash.
    public var url: String { server.url }
    /// The peer, at the database's URL.
    let server: CouchHTTPClient
    /// Whether `_bulk_get` works on this peer; probed on first use (false: never try it).
    private let bulkGetSupported: Locked<Bool?>

    /// - Parameter bulkGet: use `_bulk_get` when the peer has it (false: always fetch with
    ///   per-document `open_revs`, as for peers without it).
    public init(
        url: String, username: String? = nil, password: String? = nil, authentication: Authentication = .basic,
        bulkGet: Bool = true, client: HTTPClient = CouchHTTPClient.shared
    ) throws {
        bulkGetSupported = Locked(bulkGet ? nil : false)
        do {
            server = try CouchHTTPClient(
                url: url, username: username, password: password, authentication: authentication, http: client)
        } catch {
            throw ReplicationError(.fatal, "Not an http(s) database URL: \(url)")
        }
    }

    public var displayName: String { url }

    /// A document's path after the database's URL: its id escaped, but a `_local/` or
    /// `_design/` prefix kept as a path segment, as CouchDB expects them.
    static func documentPath(_ id: String) -> String {
        for prefix in ["_local/", "_design/"] where id.hasPrefix(prefix) {
            return "/" + prefix + CouchURL.encode(String(id.dropFirst(prefix.count)))
        }
        return "/" + CouchURL.encode(id)
    }

    /// One request (`target`: the path after the database's URL, or after the server's with
    /// `fromServerRoot`); network failures become transient errors, error statuses are returned.
    func send(
        _ method: HTTPMethod, _ target: String, json: JSON? = nil, fromServerRoot: Bool = false,
        accept: String = "application/json",
        timeout: TimeAmount = .seconds(120)
    ) async throws -> Reply {
        do {
            return try await server.send(
                method, target, fromServerRoot: fromServerRoot, json: json, accept: accept, timeout: timeout)
        } catch let refused as CouchProtocolError where refused.isLoginRefused {
            throw failure(Reply(status: refused.status ?? 401, body: []), "log in to \(server.serverURL)")
        } catch {
            throw ReplicationError(
                (error as? CouchProtocolError)?.isUntrustedPeer == true ? .untrustedPeer : .transient,
                "\(method) \(displayName)\(target): \(error)")
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
        let root = try await send(.GET, "/", fromServerRoot: true)
        let name = url.split(separator: "/").last.map(String.init) ?? url
        if root.status == 200, let uuid = root.json["uuid"]?.stringValue { return "\(uuid)/\(name)" }
        return url
    }

    public func localDocument(_ id: String) async throws -> JSONObject? {
        let reply = try await send(.GET, RemoteEndpoint.documentPath(id))
        if reply.status == 404 { return nil }
        guard reply.status == 200, let object = reply.json.objectValue else { throw failure(reply, "read \(id)") }
        return object
    }

    public func saveLocalDocument(_ id: String, _ body: JSONObject) async throws {
        var body = body
        if let current = try await localDocument(id), let rev = current["_rev"] {
            body["_rev"] = rev
        } else {
            body.removeValue(forKey: "_rev")
        }
        body["_id"] = .string(id)
        let reply = try await send(.PUT, RemoteEndpoint.documentPath(id), json: .object(body))
        guard reply.status == 201 || reply.status == 200 else { throw failure(reply, "save checkpoint \(id)") }
    }

    public func changes(since: JSON, limit: Int, filter: ReplicationFilter?) async throws -> ChangesBatch {
        try await readChanges(feed: "normal", since: since, limit: limit, filter: filter, timeout: nil)
    }

    func readChanges(
        feed: String, since: JSON, limit: Int, filter: ReplicationFilter?, timeout: Duration?
    ) async throws -> ChangesBatch {
        // A string sequence goes out as it came (CouchDB's are opaque strings); others as JSON.
        let sinceParam = CouchURL.encode(since.stringValue ?? since.text)
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
            path += "&filter=" + CouchURL.encode(name)
            for (key, value) in queryParams.members {
                path += "&" + CouchURL.encode(key) + "=" + CouchURL.encode(value.stringValue ?? value.text)
            }
        case nil: break
        }
        let reply = try await send(
            body == nil ? .GET : .POST, path, json: body,
            timeout: .seconds(Int64((timeout?.components.seconds ?? 60) + 60)))
        guard reply.status == 200 else { throw failure(reply, "read changes") }
        let json = reply.json
        return ChangesBatch(
            entries: (json["results"]?.arrayValue ?? []).compactMap(ChangeEntry.init(row:)),
            lastSeq: json["last_seq"] ?? since, pending: json["pending"]?.intValue)
    }

    public func filterCode(_ name: String, queryParams: JSONObject) async throws -> String {
        let (ddocID, function) = try ReplicationFilter.designPath(name, queryParams)
        let reply = try await send(.GET, RemoteEndpoint.documentPath(ddocID))
        guard reply.status == 200 else { throw failure(reply, "read the filter's design document \(ddocID)") }
        var code: JSON? = reply.json
        for key in ReplicationFilter.codePath(name, function) { code = code?[key] }
        guard let text = code?.stringValue else {
            throw ReplicationError(.fatal, "\(ddocID) has no filter function \(function)")
        }
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
                    entries.append([
                        "id": .string(request.id), "rev": .string(rev.description),
                        "atts_since": .array(request.attsSince.map { .string($0.description) }),
                    ])
                }
            }
            let reply = try await send(
                .POST, "/_bulk_get?revs=true&latest=true&attachments=true", json: ["docs": .array(entries)])
            if reply.status == 200 {
                bulkGetSupported.withLock { $0 = true }
                var docs: [JSON] = []
                // By bytes: documents `é` and `e\u{301}` with the same body share a revision id,
                // and a Swift String would take one for the other's duplicate.
                var seen = Set<ExactID>()
                for result in reply.json["results"]?.arrayValue ?? [] {
                    for item in result["docs"]?.arrayValue ?? [] {
                        guard let doc = item["ok"], let id = doc["_id"]?.stringValue, let rev = doc["_rev"]?.stringValue
                        else { continue }
                        if seen.insert(ExactID(id + "\u{0}" + rev)).inserted { docs.append(doc) }
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
            let path =
                RemoteEndpoint.documentPath(request.id)
                + "?revs=true&latest=true&attachments=true&open_revs=\(CouchURL.encode(revs.text))&atts_since=\(CouchURL.encode(since.text))"
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
        guard reply.contentType.lowercased().hasPrefix("multipart/"),
            let boundary = Multipart.boundary(of: reply.contentType)
        else {
            return (reply.json.arrayValue ?? []).compactMap { $0["ok"] }
        }
        var docs: [JSON] = []
        for part in try parts(reply.body, boundary: boundary) {
            let type = part.headers["content-type"] ?? "application/json"
            if type.lowercased().hasPrefix("multipart/related"), let inner = Multipart.boundary(of: type) {
                let related = try parts(part.body, boundary: inner)
                guard let first = related.first, case var .object(doc) = (try? JSON.parse(first.body)) ?? .null else {
                    continue
                }
                var attachments = doc["_attachments"]?.objectValue ?? JSONObject()
                let following = attachments.members.filter { $0.value["follows"] == .bool(true) }.map(\.key)
                for (index, body) in related.dropFirst().enumerated() {
                    let named = body.headers["content-disposition"].flatMap(filename)
                    guard let name = named ?? (index < following.count ? following[index] : nil),
                        var attachment = attachments[name]?.objectValue
                    else { continue }
                    attachment.removeValue(forKey: "follows")
                    // Inline data is always the plain bytes: a gzip-encoded part is decoded.
                    var bytes = body.body
                    let encoding =
                        attachment.removeValue(forKey: "encoding")?.stringValue ?? body.headers["content-encoding"]
                    attachment.removeValue(forKey: "encoded_length")
                    if let encoding, encoding.lowercased() == "gzip" {
                        do { bytes = try AttachmentEncoding.gunzip(bytes, declaredLength: attachment["length"]) } catch
                        {
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
            return WriteFailure(
                id: row["id"]?.stringValue ?? "", error: error, reason: row["reason"]?.stringValue ?? "")
        }
    }
}
