import CouchEngine
import CouchJSON
package import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird
import MIMEMultipart

extension CouchAPI {
    /// The shared database `name` and the namespace `user` works in there, when they reach it
    /// as an owner: a user with an owner role who is neither a server admin nor listed in the
    /// database's `_security` (members and admins see the database as it is stored). In
    /// cluster mode the `_security` is the cluster's.
    func ownerAccess(_ name: String, _ user: UserContext) async throws -> OwnerNamespace? {
        guard !user.isServerAdmin, let shared = options.sharedDatabases.first(where: { $0.name == name }),
            let namespace = shared.namespace(roles: user.roles)
        else { return nil }
        let security =
            if let cluster = options.cluster { await cluster.security(of: name) } else {
                try await store.open(name).security
            }
        if user.isListed(in: security["admins"]) || user.isListed(in: security["members"]) { return nil }
        return namespace
    }
}

/// One owner request to a shared database: the endpoints replicators and apps use (the route
/// table, `CouchRoutes.swift`, names which route answers an owner with which of them), each
/// rewritten into the owner's namespace, run as the server, and answered with the owner's ids.
/// Everything else (design documents, views, `_security`, ...) is refused by the table.
package struct OwnerRequest {
    let api: CouchAPI
    let db: String
    let namespace: OwnerNamespace
    let request: APIRequest

    // MARK: Forwarding

    /// Runs the rewritten request as the server: in this process, or on the cluster as its
    /// admin in cluster mode.
    func forward(
        method: HTTPRequest.Method? = nil, path: [String], query: [String: String]? = nil, body: [UInt8],
        json: Bool = true
    ) async throws -> APIResponse {
        var headers = request.headers
        headers[.authorization] = nil
        headers[.cookie] = nil
        // The body is decoded, and may be rewritten.
        headers[.contentEncoding] = nil
        headers[.contentLength] = nil
        if json {
            headers[.contentType] = "application/json"
            headers[.accept] = "application/json"
        }
        if let cluster = api.options.cluster {
            return try await cluster.send(
                method ?? request.method, path: [db] + path, query: query ?? request.query, headers: headers,
                body: body,
                authorization: cluster.adminAuthorization)
        }
        let response = try await api.performTrusted(
            method ?? request.method, CouchURL.path([db] + path) + CouchURL.query(query ?? request.query),
            headers: headers, body: body, user: .system,
            clientGone: request.clientGone)
        // The answer may be rewritten: its length is set when it is sent.
        var answerHeaders = response.headers
        answerHeaders[.contentLength] = nil
        return APIResponse(status: response.status, headers: answerHeaders, body: response.body)
    }

    func forward(
        method: HTTPRequest.Method? = nil, path: [String], query: [String: String]? = nil, json body: JSON
    ) async throws -> APIResponse {
        try await forward(method: method, path: path, query: query, body: body.bytes)
    }

    /// The response with its JSON body passed through `transform` (a body that is not JSON,
    /// an attachment, goes back untouched) and its `Location` in the owner's ids.
    func rewritten(_ response: APIResponse, _ transform: (JSON) throws -> JSON) async throws -> APIResponse {
        var response = response
        if let location = response.headers[.location], let found = location.range(of: "/\(db)/") {
            // `[scheme://host]/db/<stored id>[/<attachment>]`, `/db/_local/<stored id>`: on this
            // server, as the client asked for it (never the cluster's own address).
            var segments = location[found.upperBound...].split(
                separator: "/", maxSplits: 1, omittingEmptySubsequences: false
            ).map {
                CouchURL.decode($0, plusAsSpace: false)
            }
            if segments.first == "_local", segments.count == 2 { segments = ["_local/" + segments[1]] }
            response.headers[.location] = namespace.visible(segments[0]).map {
                request.location(
                    APIRequest.documentPath(db, $0, attachment: segments.count > 1 ? segments[1] : nil),
                    scheme: api.options.databaseScheme)
            }
        }
        let contentType = response.headers[.contentType] ?? ""
        guard contentType.hasPrefix("application/json") || contentType.hasPrefix("multipart/") else { return response }
        let bytes = try await collect(response.body)
        var out: [UInt8]
        if contentType.hasPrefix("multipart/") {
            out = try rewriteMultipart(bytes, contentType: contentType, transform)
        } else {
            guard let json = try? JSON.parse(bytes) else { return response }
            out = try transform(json).bytes
            out.append(10)
        }
        response.body = ResponseBody(byteBuffer: ByteBuffer(bytes: out))
        return response
    }

    func collect(_ body: ResponseBody) async throws -> [UInt8] {
        let collector = BodyCollector()
        try await body.write(collector)
        return collector.bytes.withLock { $0 }
    }

    /// Rewrites the JSON parts of a multipart body (nested `multipart/related` parts too).
    func rewriteMultipart(_ body: [UInt8], contentType: String, _ transform: (JSON) throws -> JSON) throws -> [UInt8] {
        guard let boundary = Multipart.boundary(of: contentType) else { return body }
        let parts = try Multipart.parse(body, boundary: boundary)
        let rebuilt = try parts.map { part -> (headers: [(String, String)], body: [UInt8]) in
            let type = part.headers["content-type"] ?? ""
            var content = part.body
            if type.hasPrefix("application/json"), let json = try? JSON.parse(content) {
                content = try transform(json).bytes
            } else if type.hasPrefix("multipart/") {
                content = try rewriteMultipart(content, contentType: type, transform)
            }
            return (
                part.headers.filter { $0.key != "content-length" }.sorted { $0.key < $1.key }.map {
                    ($0.key, $0.value)
                }, content
            )
        }
        return Multipart.build(rebuilt, boundary: boundary)
    }

    // MARK: Ids in and out

    func stored(_ id: String) throws -> String {
        if id.hasPrefix("_design/") {
            throw CouchError.forbidden("Design documents of a shared database are for its admins")
        }
        return namespace.stored(id)
    }

    func visibleDocument(_ doc: JSON) -> JSON? { OwnerRequest.visibleDocument(doc, namespace) }
    func visibleRow(_ row: JSON) -> JSON? { OwnerRequest.visibleRow(row, namespace) }

    /// A document with its `_id` made visible; nil when it is not the owner's.
    static func visibleDocument(_ doc: JSON, _ namespace: OwnerNamespace) -> JSON? {
        guard case var .object(object) = doc else { return doc }
        if let id = object["_id"]?.stringValue {
            guard let visible = namespace.visible(id) else { return nil }
            object["_id"] = .string(visible)
        }
        return .object(object)
    }

    /// A row, changes row or write result whose `id` (and `key`, `doc`) become visible; nil
    /// when it is not the owner's.
    static func visibleRow(_ row: JSON, _ namespace: OwnerNamespace) -> JSON? {
        guard case var .object(object) = row else { return row }
        for name in ["id", "key"] {
            if case let .string(id)? = object[name] {
                guard let visible = namespace.visible(id) else { return nil }
                object[name] = .string(visible)
            }
        }
        if let doc = object["doc"], doc != .null {
            object["doc"] = visibleDocument(doc, namespace) ?? .null
        }
        return .object(object)
    }

    /// A document the owner sends: `_id` into their namespace (generated when missing).
    func incomingDocument(_ doc: JSON, generateID: Bool) throws -> JSON {
        guard case var .object(object) = doc else { throw CouchError.badRequest("Document must be a JSON object") }
        if case let .string(id)? = object["_id"] {
            object["_id"] = .string(try stored(id))
        } else if object["_id"] != nil {
            throw CouchError.badRequest("Document id must be a string")
        } else if generateID {
            object.prepend("_id", .string(namespace.stored(Hex.random(bytes: 16))))
        }
        return .object(object)
    }

    /// A Mango selector whose conditions on `_id` are in stored ids, restricted to the owner's
    /// documents — that condition first, so the owner's own conditions (a `$regex`) never run
    /// on another owner's document, and the scan reads only the owner's ids (`idPrefixRange`).
    func ownedSelector(_ selector: JSON?) throws -> JSON {
        let own: JSON = ["_id": ["$beginsWith": .string(namespace.prefix)]]
        guard let selector else { return own }
        return ["$and": [own, try storedIDs(in: selector, isID: false)]]
    }

    private func storedIDs(in selector: JSON, isID: Bool) throws -> JSON {
        switch selector {
        case let .string(id) where isID:
            return .string(try stored(id))
        case let .array(items):
            return .array(try items.map { try storedIDs(in: $0, isID: isID) })
        case let .object(object):
            var out = JSONObject()
            for (key, value) in object.members {
                if isID, key == "$regex" {
                    throw CouchError.badRequest("$regex on _id is not available in a shared database; use $beginsWith")
                }
                let idValue =
                    key == "_id"
                    || (isID
                        && [
                            "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$beginsWith", "$not", "$and",
                            "$or", "$nor",
                        ].contains(key))
                out[key] = try storedIDs(in: value, isID: idValue)
            }
            return .object(out)
        default:
            return selector
        }
    }

    // MARK: Endpoints

    /// `/{db}`: its info, or a new document; creating or deleting it is for admins.
    func database() async throws -> APIResponse {
        switch request.method {
        case .get, .head: return try await info()
        case .post: return try await createDocument()
        default: throw CouchError.forbidden("Only admins create or delete a shared database")
        }
    }

    /// `/{db}/{id}[/{attachment}]`: an owner's document (not a `_` resource of the database).
    func plainDocument() async throws -> APIResponse {
        let id = request.path[1]
        if id.hasPrefix("_") { throw CouchError.forbidden("\(id) is not available to owners in a shared database") }
        return try await document(id: id, attachment: Array(request.path.dropFirst(2)))
    }

    /// `/{db}/_local/{id}`: an owner's local document (a replication checkpoint).
    func localDocument() async throws -> APIResponse {
        try await document(id: "_local/" + request.path.dropFirst(2).joined(separator: "/"), attachment: [])
    }

    /// DocumentDatabase info without the figures that describe other owners' documents.
    func info() async throws -> APIResponse {
        try await rewritten(try await forward(method: .get, path: [], body: [])) { info in
            var out = JSONObject()
            for key in [
                "db_name", "update_seq", "purge_seq", "instance_start_time", "compact_running", "disk_format_version",
            ] {
                if let value = info[key] { out[key] = value }
            }
            out["props"] = ["shared": true]
            return .object(out)
        }
    }

    func createDocument() async throws -> APIResponse {
        let doc = try incomingDocument(try request.json(), generateID: true)
        return try await rewritten(try await forward(path: [], json: doc)) { visibleRow($0) ?? .null }
    }

    func allDocs() async throws -> APIResponse {
        guard request.method == .get || request.method == .head || request.method == .post else {
            throw CouchError.methodNotAllowed("GET,HEAD,POST")
        }
        var query = request.query
        var body = request.method == .post && !request.body.isEmpty ? try request.jsonObject() : JSONObject()
        func storedKey(_ value: JSON, _ name: String) throws -> JSON {
            guard case let .string(id) = value else {
                throw CouchError.badRequest("\(name) must be a document id string")
            }
            return .string(try stored(id))
        }
        let keys = try body["keys"] ?? request.jsonParam("keys")
        if let keys {
            body["keys"] = .array(try DatabaseEndpoints.keyList(keys).map { try storedKey($0, "keys") })
            query["keys"] = nil
        }
        for name in ["key", "startkey", "start_key", "endkey", "end_key"] {
            if let value = try request.jsonParam(name) { query[name] = try storedKey(value, name).text }
        }
        if keys == nil, query["key"] == nil {
            let descending = try request.bool("descending")
            if query["startkey"] == nil, query["start_key"] == nil {
                query["startkey"] = JSON.string(descending ? namespace.upperBound : namespace.prefix).text
            }
            if query["endkey"] == nil, query["end_key"] == nil {
                query["endkey"] = JSON.string(descending ? namespace.prefix : namespace.upperBound).text
                query["inclusive_end"] = descending ? "true" : "false"
            }
        }
        let response = try await forward(method: .post, path: ["_all_docs"], query: query, json: .object(body))
        return try await rewritten(response) { result in
            guard case var .object(object) = result else { return result }
            // Totals and offsets count every owner's documents.
            object.removeValue(forKey: "total_rows")
            object.removeValue(forKey: "offset")
            object["rows"] = .array((object["rows"]?.arrayValue ?? []).compactMap(visibleRow))
            return .object(object)
        }
    }

    /// `_changes` of the owner's documents only, every feed type; rows stream through as the
    /// inner feed writes them, one line at a time.
    func changes() async throws -> APIResponse {
        guard request.method == .get || request.method == .post else { throw CouchError.methodNotAllowed("GET,POST") }
        var query = request.query
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObject() : JSONObject()
        var forwarded = JSONObject()
        switch query["filter"] {
        case nil:
            query["filter"] = "_selector"
            forwarded["selector"] = try ownedSelector(nil)
        case "_selector":
            guard let selector = body["selector"] else {
                throw CouchError.badRequest("Selector must be specified in POST payload")
            }
            forwarded["selector"] = try ownedSelector(selector)
        case "_doc_ids":
            guard case let .array(ids)? = try body["doc_ids"] ?? request.jsonParam("doc_ids") else {
                throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
            }
            forwarded["doc_ids"] = .array(
                try ids.map {
                    guard case let .string(id) = $0 else {
                        throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
                    }
                    return .string(try stored(id))
                })
            query["doc_ids"] = nil
        case let other?:
            throw CouchError.forbidden(
                "Filter \(other) is not available in a shared database; use _selector or _doc_ids")
        }
        // A waiting feed counts against the owner's share of open feeds (it runs as the server),
        // and ends once the owner is no longer who they were: a revoked key, a deleted user.
        let waiting = (query["feed"] ?? "normal") != "normal"
        let slot = waiting ? try api.feeds.open(for: request) : nil
        let shared = api.options.sharedDatabases.first { $0.name == db }
        let namespace = self.namespace
        let stillAllowed =
            waiting
            ? await api.auth.stillValid(request.user) { user in shared?.namespace(roles: user.roles) == namespace }
            : nil
        var response = try await forward(method: .post, path: ["_changes"], query: query, json: .object(forwarded))
        guard response.status == .ok else { return response }
        let inner = response.body
        response.body = ResponseBody { writer in
            withExtendedLifetime(slot) {}
            let lines = LineRewriter(inner: writer, check: stillAllowed) { line in
                OwnerRequest.visibleChangesLine(line, namespace)
            }
            do {
                try await inner.write(lines)
            } catch is LineRewriter.Refused {
                try await writer.finish(nil)
            }
        }
        return response
    }

    /// One line of a changes feed in the owner's ids: a row (maybe followed by a comma), a
    /// whole `{"results": [...]}` answer, or an event-stream `data:` line. Other lines
    /// (array brackets, heartbeats, `id:`) pass as they are; rows of other owners are dropped.
    package static func visibleChangesLine(_ line: ArraySlice<UInt8>, _ namespace: OwnerNamespace) -> [UInt8]? {
        let dataPrefix = Array("data: ".utf8)
        var content = line
        var lead: [UInt8] = []
        if content.starts(with: dataPrefix) {
            lead = dataPrefix
            content = content.dropFirst(dataPrefix.count)
        }
        // CouchDB ends its lines with `\r\n` (rows of a normal feed are `{...},\r`).
        var carriageReturn = false
        if content.last == UInt8(ascii: "\r") {
            carriageReturn = true
            content = content.dropLast()
        }
        var trailingComma = false
        if content.last == UInt8(ascii: ",") {
            trailingComma = true
            content = content.dropLast()
        }
        guard content.first == UInt8(ascii: "{"), let json = try? JSON.parse(Array(content)) else { return Array(line) }
        var out: JSON
        if case var .object(object) = json, let rows = object["results"]?.arrayValue {
            object["results"] = .array(rows.compactMap { visibleRow($0, namespace) })
            out = .object(object)
        } else if json["id"] != nil {
            guard let row = visibleRow(json, namespace) else { return nil }
            out = row
        } else {
            return Array(line)
        }
        return lead + out.bytes + (trailingComma ? [UInt8(ascii: ",")] : [])
            + (carriageReturn ? [UInt8(ascii: "\r")] : [])
    }

    func bulkDocs() async throws -> APIResponse {
        var body = try request.jsonObject()
        let docs = try DatabaseEndpoints.bulkDocsList(body)
        body["docs"] = .array(try docs.map { try incomingDocument($0, generateID: true) })
        return try await rewritten(try await forward(path: ["_bulk_docs"], json: .object(body))) { result in
            .array((result.arrayValue ?? []).compactMap(visibleRow))
        }
    }

    func bulkGet() async throws -> APIResponse {
        var body = try request.jsonObject()
        guard case let .array(docs)? = body["docs"] else { throw CouchError.badRequest("Missing JSON list of 'docs'.") }
        body["docs"] = .array(
            try docs.map { entry in
                guard case var .object(object) = entry, case let .string(id)? = object["id"] else { return entry }
                object["id"] = .string(try stored(id))
                return .object(object)
            })
        return try await rewritten(try await forward(path: ["_bulk_get"], json: .object(body))) { result in
            guard case var .object(object) = result else { return result }
            object["results"] = .array(
                (object["results"]?.arrayValue ?? []).compactMap { item -> JSON? in
                    guard case var .object(entry) = item, case let .string(id)? = entry["id"],
                        let visible = namespace.visible(id)
                    else { return nil }
                    entry["id"] = .string(visible)
                    entry["docs"] = .array(
                        (entry["docs"]?.arrayValue ?? []).map { answer -> JSON in
                            guard case var .object(answer) = answer else { return answer }
                            if let doc = answer["ok"] { answer["ok"] = visibleDocument(doc) ?? .null }
                            if case var .object(error)? = answer["error"] {
                                error["id"] = .string(visible)
                                answer["error"] = .object(error)
                            }
                            return .object(answer)
                        })
                    return .object(entry)
                })
            return .object(object)
        }
    }

    func revsDiff() async throws -> APIResponse {
        let body = try request.jsonObject()
        var forwarded = JSONObject()
        for (id, revs) in body.members { forwarded[try stored(id)] = revs }
        let path = Array(request.path.dropFirst())
        return try await rewritten(try await forward(path: path, json: .object(forwarded))) { result in
            guard case let .object(object) = result else { return result }
            var out = JSONObject()
            for (id, value) in object.members {
                if let visible = namespace.visible(id) { out[visible] = value }
            }
            return .object(out)
        }
    }

    func find() async throws -> APIResponse {
        try request.requireMethod(.post)
        var body = try request.jsonObject()
        body["selector"] = try ownedSelector(body["selector"])
        return try await rewritten(try await forward(path: ["_find"], json: .object(body))) { result in
            guard case var .object(object) = result, let docs = object["docs"]?.arrayValue else { return result }
            object["docs"] = .array(docs.compactMap(visibleDocument))
            return .object(object)
        }
    }

    /// A document or one of its attachments: GET, HEAD, PUT, DELETE.
    func document(id: String, attachment: [String]) async throws -> APIResponse {
        guard [.get, .head, .put, .delete].contains(request.method) else {
            throw CouchError.forbidden("\(request.method) is not available in a shared database")
        }
        let storedID = try stored(id)
        let path = storedID.hasPrefix("_local/") ? ["_local", String(storedID.dropFirst(7))] : [storedID] + attachment
        var body = request.body
        if request.method == .put, attachment.isEmpty {
            let contentType = request.header("Content-Type") ?? ""
            if contentType.lowercased().hasPrefix("multipart/related") {
                body = try rewriteMultipart(body, contentType: contentType) {
                    try self.incomingDocument($0, generateID: false)
                }
            } else if !body.isEmpty {
                body = try incomingDocument(try request.json(), generateID: false).bytes
            }
        }
        let response = try await forward(path: path, body: body, json: false)
        return try await rewritten(response) { result in
            if case let .array(revisions) = result {  // open_revs
                return .array(
                    revisions.map { answer in
                        guard case var .object(object) = answer, let doc = object["ok"] else { return answer }
                        object["ok"] = visibleDocument(doc) ?? .null
                        return .object(object)
                    })
            }
            if result["_id"] != nil { return visibleDocument(result) ?? .null }
            return visibleRow(result) ?? .null
        }
    }
}

/// Passes a streamed body on line by line, each complete line through `transform` (nil
/// drops the line); what follows the last line break waits for the rest of its line. With a
/// `check`, nothing more is passed on once it says no: the writer throws `Refused`.
struct LineRewriter: ResponseBodyWriter {
    var inner: any ResponseBodyWriter
    let check: (@Sendable () async -> Bool)?
    let transform: (ArraySlice<UInt8>) -> [UInt8]?
    var pending: [UInt8] = []

    /// The check said no: the rest of the body is not sent.
    struct Refused: Error {}

    init(
        inner: any ResponseBodyWriter, check: (@Sendable () async -> Bool)? = nil,
        transform: @escaping (ArraySlice<UInt8>) -> [UInt8]?
    ) {
        self.inner = inner
        self.check = check
        self.transform = transform
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        pending += buffer.readableBytesView
        guard let lastBreak = pending.lastIndex(of: 10) else { return }
        var out: [UInt8] = []
        var start = 0
        while start <= lastBreak {
            let end = pending[start...lastBreak].firstIndex(of: 10)!
            if let line = transform(pending[start..<end]) {
                out += line
                out.append(10)
            }
            start = end + 1
        }
        pending.removeFirst(lastBreak + 1)
        if !out.isEmpty {
            if let check, await !check() { throw Refused() }
            try await inner.write(ByteBuffer(bytes: out))
        }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        if !pending.isEmpty, let line = transform(pending[...]) {
            try await inner.write(ByteBuffer(bytes: line))
        }
        try await inner.finish(trailingHeaders)
    }
}
