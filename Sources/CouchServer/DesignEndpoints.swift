import CouchEngine
import CouchIndexes
import CouchJSON
import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird
import JavaScript
import Replication

/// Design documents' HTTP resources: views, `_info`, `_view_cleanup`, shows, lists, update
/// handlers, and the filter functions of `_changes`. JavaScript runs in the query server
/// processes; indexes are the engine's.
struct DesignEndpoints: Sendable {
    let api: CouchAPI

    /// The query server's functions, or 501 where this server has no JavaScript engine.
    func designFunctions() throws -> DesignFunctions {
        guard let javascript = api.options.javascript else {
            throw CouchError.notImplemented("JavaScript is not available on this server (build lt with Debian's duktape-dev)")
        }
        return DesignFunctions(queryServer: javascript)
    }

    /// A design document from the database's cache (`not_found` if there is none).
    func designDocument(_ db: DocumentDatabase, _ id: String) async throws -> JSONObject {
        guard let ddoc = try await db.designDocuments().first(where: { $0["_id"]?.stringValue == id }) else {
            throw CouchError.missing
        }
        return ddoc
    }

    /// `GET|POST /{db}/_design/{ddoc}/_view/{view}`: a JavaScript map function (run by the query
    /// server processes, batch by batch) with an optional reducer, indexed incrementally and
    /// persistently by the engine.
    func view(_ db: DocumentDatabase, _ ddocID: String, _ name: String, _ request: APIRequest, partition: String? = nil) async throws -> APIResponse {
        try request.requireMethod(.get, .post)
        let request = try Self.withBodyParameters(request)
        let result = try await runView(db, ddocID, name, request, partition: partition)
        var answer: JSONObject = result.reduced ? [:] : ["total_rows": .int(result.totalRows), "offset": .int(result.offset)]
        if try request.bool("update_seq") { answer["update_seq"] = .string(db.sequenceString(result.updateSeq)) }
        answer["rows"] = .array(result.rows)
        return .json(.object(answer))
    }

    /// Runs a view query as `_view` (and `_list`) parameters describe it; `partition` confines
    /// it to one partition's documents. A partitioned design document's views (the default in a
    /// partitioned database) answer only in a partition, the others only globally, as in CouchDB.
    func runView(_ db: DocumentDatabase, _ ddocID: String, _ name: String, _ request: APIRequest, partition: String? = nil) async throws -> ViewResult {
        let functions = try designFunctions()
        let ddoc = try await designDocument(db, ddocID)
        let view = try functions.view(ddoc, name)
        var query = try viewQuery(request)
        let partitioned = ddoc["options"]?["partitioned"]?.boolValue ?? db.isPartitioned
        if partitioned, partition == nil {
            throw CouchError(status: 400, error: "query_parse_error", reason: "`partition` parameter is mandatory for queries to this view.")
        }
        if !partitioned, partition != nil {
            throw CouchError(status: 400, error: "query_parse_error", reason: "`partition` parameter is not supported in this design doc")
        }
        query.idRange = partition.map(Partition.idRange)
        let stale = request.query["stale"] == "ok" || request.query["stale"] == "update_after"
            || request.query["update"] == "false" || request.query["update"] == "lazy"
        if let update = request.query["update"], !["true", "false", "lazy"].contains(update) {
            throw CouchError.badRequest("Invalid value for `update`: \(update) (true, false or lazy)")
        }
        let result = try await db.views.query(view, query, stale: stale)
        if request.query["update"] == "lazy" || request.query["stale"] == "update_after" {
            let logger = api.logger
            Task { do { try await db.views.update(view) } catch { logger.warning("view update failed: \(error)") } }
        }
        return result
    }

    /// A view `POST`'s body members other than `keys` taken as query parameters, as CouchDB's
    /// `parse_body_and_query` takes them (`{"keys": [...], "limit": 1}`; the query string's
    /// win over the body's).
    static func withBodyParameters(_ request: APIRequest) throws -> APIRequest {
        guard request.method == .post, !request.body.isEmpty else { return request }
        var merged = request
        // Parameters whose query-string value is a plain string, not JSON.
        let plain: Set<String> = ["startkey_docid", "start_key_doc_id", "endkey_docid", "end_key_doc_id", "stale", "update"]
        for (name, value) in try request.jsonObject().members where name != "keys" && request.query[name] == nil {
            merged.query[name] = plain.contains(name) ? (value.stringValue ?? value.text) : value.text
        }
        return merged
    }

    /// `_view` query parameters, from the query string or a POST body.
    func viewQuery(_ request: APIRequest) throws -> ViewQuery {
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObject() : nil
        func param(_ names: String...) throws -> JSON? {
            for name in names {
                if let value = try request.jsonParam(name) { return value }
                if let value = body?[name] { return value }
            }
            return nil
        }
        var query = ViewQuery()
        query.key = try param("key")
        if let keys = try param("keys") {
            guard case let .array(list) = keys else { throw CouchError.badRequest("`keys` must be an array") }
            query.keys = list
        }
        query.startKey = try param("startkey", "start_key")
        query.endKey = try param("endkey", "end_key")
        query.startKeyDocID = request.query["startkey_docid"] ?? request.query["start_key_doc_id"]
        query.endKeyDocID = request.query["endkey_docid"] ?? request.query["end_key_doc_id"]
        query.inclusiveEnd = request.query["inclusive_end"] != "false"
        query.descending = try request.bool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        query.includeDocs = try request.bool("include_docs")
        if request.query["reduce"] != nil { query.reduce = try request.bool("reduce") }
        query.group = request.query["group"] == nil ? nil : try request.bool("group")
        query.groupLevel = try request.int("group_level")
        return query
    }

    /// `GET /{db}/_design/{ddoc}/_info`: the state of the design document's view index.
    func designInfo(_ db: DocumentDatabase, _ ddocID: String) async throws -> APIResponse {
        let ddoc = try await designDocument(db, ddocID)
        let signatures = DesignFunctions.viewNames(ddoc).compactMap { DesignFunctions.viewSignature(ddoc, $0) }
        let state = try await db.views.state(signatures: signatures)
        let signature = ViewDefinition.digest(signatures.sorted().joined(separator: ","))
        return .json(["name": .string(String(ddocID.dropFirst("_design/".count))), "view_index": [
            "signature": .string(signature), "language": .string(ddoc["language"]?.stringValue ?? "javascript"),
            "sizes": ["file": .int(state.bytes), "external": .int(state.bytes), "active": .int(state.bytes)],
            "update_seq": .int(state.updateSeq), "purge_seq": 0, "updater_running": false, "compact_running": false,
            "waiting_clients": 0, "waiting_commit": false, "updates_pending": ["minimum": .int(state.pending), "preferred": .int(state.pending), "total": .int(state.pending)],
        ]])
    }

    /// `POST /{db}/_view_cleanup`: drops view indexes no design document uses any more, and
    /// Mango indexes without their design document.
    func viewCleanup(_ db: DocumentDatabase) async throws {
        let ddocs = try await db.designDocuments()
        let live = Set(ddocs.flatMap { ddoc in DesignFunctions.viewNames(ddoc).compactMap { DesignFunctions.viewSignature(ddoc, $0) } })
        try await db.views.drop(except: live)
        try await db.mango.drop(except: try await api.mango.mangoIndexes(db))
    }

    // MARK: Shows, lists, updates

    /// `GET|POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]`.
    func show(_ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.get, .post)
        let (_, answer) = try await callDocumentFunction(db, ddocID, rest, request, kind: "shows")
        guard answer[0] == "resp", let response = answer[1]?.objectValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected show answer")
        }
        return try functionResponse(response)
    }

    /// Calls the show or update function `rest[1]` (`kind`: `shows`, `updates`) with the
    /// document `rest[2...]` (null when there is none) and the request; returns the document
    /// id and the function's answer.
    private func callDocumentFunction(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest, kind: String
    ) async throws -> (String?, JSON) {
        guard rest.count >= 2 else { throw CouchError.notFound("missing \(kind) function name") }
        let functions = try designFunctions()
        let ddoc = try await designDocument(db, ddocID)
        guard ddoc[kind]?[rest[1]]?.stringValue != nil else { throw CouchError.missingKey([kind, rest[1]], in: ddoc) }
        let docID = rest.count > 2 ? rest[2...].joined(separator: "/") : nil
        var doc: JSON = .null
        if let docID, let found = try? await db.document(id: docID) { doc = .object(found) }
        let req = try await javascriptRequest(db, request, id: docID)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(designDocument: ddoc, path: [kind, rest[1]], arguments: [doc, req])
        }
        return (docID, answer)
    }

    /// `POST|PUT /{db}/_design/{ddoc}/_update/{name}[/{docid}]`: the function returns
    /// `[doc, response]`; a non-null doc is saved (with the caller's rights and validation).
    func updateHandler(_ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post, .put)
        let (docID, answer) = try await callDocumentFunction(db, ddocID, rest, request, kind: "updates")
        guard answer[0] == "up", let response = answer[2]?.objectValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected update answer")
        }
        var result = try functionResponse(response)
        if case let .object(newDoc)? = answer[1] {
            var input = try DocumentInput(json: .object(newDoc))
            if input.id == nil { input.id = docID ?? api.config.newID() }
            let rev = try await api.documents.writeDocument(db, input, request: request)
            result.headers[HTTPField.Name("X-Couch-Id")!] = input.id
            result.headers[HTTPField.Name("X-Couch-Update-NewRev")!] = rev.description
            if response["code"] == nil { result.status = .created }
        }
        return result
    }

    /// `GET|POST /{db}/_design/{ddoc}/_list/{list}/{view}` (or `.../{list}/{other ddoc}/{view}`):
    /// the view's rows rendered by a list function (`start`, `send`, `getRow`).
    func list(_ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.get, .post)
        guard rest.count == 3 || rest.count == 4 else { throw CouchError.notFound("bad list path: _list/{list}/[{ddoc}/]{view}") }
        let functions = try designFunctions()
        let ddoc = try await designDocument(db, ddocID)
        guard ddoc["lists"]?[rest[1]]?.stringValue != nil else { throw CouchError.missingKey(["lists", rest[1]], in: ddoc) }
        let viewDDoc = rest.count == 4 ? "_design/\(rest[2])" : ddocID
        let result = try await runView(db, viewDDoc, rest.count == 4 ? rest[3] : rest[2], request)
        var head: JSONObject = ["offset": .int(result.offset)]
        if !result.reduced { head.prepend("total_rows", .int(result.totalRows)) }
        let req = try await javascriptRequest(db, request, id: nil)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(
                designDocument: ddoc, path: ["lists", rest[1]], arguments: [.object(head), req, .array(result.rows)])
        }
        guard answer[0] == "list", var response = answer[1]?.objectValue, let chunks = answer[2]?.arrayValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected list answer")
        }
        response["body"] = .string(chunks.compactMap(\.stringValue).joined())
        return try functionResponse(response)
    }

    /// A show, list or update function's response object (`code`, `headers`, and `body`,
    /// `json` or `base64`) as HTTP.
    func functionResponse(_ response: JSONObject) throws -> APIResponse {
        var headers = HTTPFields()
        var bytes: [UInt8]
        var contentType = "text/html; charset=utf-8"
        if let json = response["json"] {
            bytes = json.bytes
            contentType = "application/json"
        } else if let base64 = response["base64"]?.stringValue {
            bytes = Array(Data(base64Encoded: base64) ?? Data())
            contentType = "application/binary"
        } else {
            bytes = Array((response["body"]?.stringValue ?? "").utf8)
        }
        headers[.contentType] = contentType
        for (name, value) in response["headers"]?.objectValue?.members ?? [] {
            if let field = HTTPField.Name(name), let text = value.stringValue { headers[field] = text }
        }
        let code = response["code"]?.intValue ?? 200
        guard (100...599).contains(code) else { throw CouchError(status: 500, error: "render_error", reason: "Invalid status code \(code)") }
        return APIResponse(status: HTTPResponse.Status(code: code), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// CouchDB's request object for design functions (`req`): query, headers, body, the
    /// caller's `userCtx`, the database's `info` and `secObj`.
    func javascriptRequest(_ db: DocumentDatabase, _ request: APIRequest, id: String?) async throws -> JSON {
        var userContext = request.user.json.objectValue ?? JSONObject()
        userContext.prepend("db", .string(db.name))
        var headers = JSONObject()
        for field in request.headers where field.name != .authorization && field.name != .cookie {
            headers[field.name.canonicalName] = .string(field.value)
        }
        let query = JSONObject(request.query.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSON.string($0.value)) })
        var form = JSONObject()
        if request.header("Content-Type")?.hasPrefix("application/x-www-form-urlencoded") == true {
            let pairs = CouchURL.parameters(String(decoding: request.body, as: UTF8.self)).sorted { $0.key < $1.key }
            form = JSONObject(pairs.map { (key: $0.key, value: JSON.string($0.value)) })
        }
        let path = JSON.array(request.path.map(JSON.string))
        return [
            "info": .object(try await db.info()),
            "id": id.map(JSON.string) ?? .null,
            "uuid": .string(Hex.random(bytes: 16)),
            "method": .string(request.method.rawValue),
            "requested_path": path,
            "path": path,
            "raw_path": .string("/" + request.path.joined(separator: "/")),
            "query": .object(query),
            "headers": .object(headers),
            "body": request.body.isEmpty ? "undefined" : .string(String(decoding: request.body, as: UTF8.self)),
            "peer": "127.0.0.1",
            "form": .object(form),
            "cookie": [:],
            "userCtx": .object(userContext),
            "secObj": .object(db.security),
        ]
    }

    /// Filter functions for replications from local databases: `req.query` is the
    /// replication's `query_params`.
    static func makeFilterResolver(_ javascript: QueryServer?) -> FilterResolver? {
        guard let javascript else { return nil }
        let functions = DesignFunctions(queryServer: javascript)
        return { db, name, queryParams in
            let (ddocID, function) = try ReplicationFilter.designPath(name, queryParams)
            guard let ddoc = try await db.designDocuments().first(where: { $0["_id"]?.stringValue == ddocID }) else {
                throw ReplicationError(.fatal, "The filter's design document \(ddocID) does not exist in \(db.name)")
            }
            if name == "_view" { return try functions.viewFilter(ddoc, function) }
            let req: JSON = [
                "info": .object(try await db.info()), "id": .null, "method": "GET", "query": .object(queryParams),
                "headers": [:], "body": "undefined", "form": [:], "cookie": [:],
                "userCtx": ["db": .string(db.name), "name": .null, "roles": ["_admin"]], "secObj": .object(db.security),
            ]
            return try functions.filter(ddoc, function, request: req)
        }
    }

    /// The `_changes` filter named by `filter=ddoc/name` or `filter=_view&view=ddoc/name`.
    func designFilter(_ db: DocumentDatabase, _ name: String, _ request: APIRequest) async throws -> DocumentFilter {
        let functions = try designFunctions()
        if name == "_view" {
            guard let view = request.query["view"], let slash = view.firstIndex(of: "/") else {
                throw CouchError.badRequest("`view` filter parameter is not provided.")
            }
            let ddoc = try await designDocument(db, "_design/" + view[..<slash])
            return try functions.viewFilter(ddoc, String(view[view.index(after: slash)...]))
        }
        guard let slash = name.firstIndex(of: "/") else {
            throw CouchError.badRequest("`filter` parameter is not correct: \(name) (use ddoc/name, _view, _doc_ids, _selector or _design)")
        }
        let ddoc = try await designDocument(db, "_design/" + name[..<slash])
        return try functions.filter(ddoc, String(name[name.index(after: slash)...]), request: try await javascriptRequest(db, request, id: nil))
    }
}
