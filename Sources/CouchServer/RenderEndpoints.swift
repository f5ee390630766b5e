import CouchEngine
import CouchIndexes
import CouchJSON
import CouchProtocol
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JavaScript

/// The design functions that answer HTTP themselves, as CouchDB 3 runs them: shows
/// (`_show`), lists (`_list`), update handlers (`_update`) and rewrites (`_rewrite`, the
/// declarative `rewrites` array or a JavaScript rewrite function). The functions run in the
/// query server processes; what they answer becomes the HTTP response as CouchDB's
/// `chttpd_external` makes it.
struct RenderEndpoints: Sendable {
    let api: CouchAPI
    var design: DesignEndpoints { api.design }

    // MARK: Shows

    /// `GET|POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]`: the function's answer for the
    /// document (null when there is none), with an ETag of the design document, the document,
    /// the request and the caller, so that an unchanged show answers 304.
    func show(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        try request.requireMethod(.get, .head, .post)
        let (functions, ddoc, docID, doc) = try await documentFunction(
            db, ddocID, rest, kind: "shows", error: "show_error")
        let etag = Self.etag(ddoc: ddoc, doc: doc, request)
        var headers = HTTPFields()
        headers[.eTag] = etag
        headers[.vary] = "Accept"
        if request.ifNoneMatch(etag) {
            return APIResponse(status: .notModified, headers: headers, body: ResponseBody())
        }
        let req = try await javascriptRequest(db, request, id: docID)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(
                designDocument: ddoc, path: ["shows", rest[1]], arguments: [doc.map(JSON.object) ?? .null, req])
        }
        guard answer[0] == "resp", let response = answer[1]?.objectValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected show answer")
        }
        var result = try Self.response(response)
        // As CouchDB: the function does not set these; a cache must see the negotiation.
        result.headers[.eTag] = etag
        result.headers[.vary] = "Accept"
        return result
    }

    /// What a show or update function `rest[1]` (`kind`: `shows`, `updates`) needs: the query
    /// server, its design document, and the document `rest[2...]` names (nil when the path
    /// names none, or it is missing or deleted), opened with its conflicts as CouchDB opens it.
    func documentFunction(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], kind: String, error: String
    ) async throws -> (DesignFunctions, JSONObject, String?, JSONObject?) {
        guard rest.count >= 2, !rest[1].isEmpty else {
            throw CouchError(status: 404, error: error, reason: "Invalid path.")
        }
        let functions = try design.designFunctions()
        let ddoc = try await design.designDocument(db, ddocID)
        guard ddoc[kind]?[rest[1]]?.stringValue != nil else { throw CouchError.missingKey([kind, rest[1]], in: ddoc) }
        guard rest.count > 2 else { return (functions, ddoc, nil, nil) }
        let id = rest[2...].joined(separator: "/")
        var options = ReadOptions()
        options.conflicts = true
        do {
            return (functions, ddoc, id, try await db.document(id: id, options: options))
        } catch let failure as CouchError where failure.status == 404 {
            return (functions, ddoc, id, nil)
        }
    }

    /// A show's ETag: the design document's and document's revisions, what the client accepts,
    /// the query, and who asks (a show may answer each of them differently).
    static func etag(ddoc: JSONObject, doc: JSONObject?, _ request: APIRequest) -> String {
        let parts: JSON = [
            ddoc["_rev"] ?? .null, doc?["_rev"] ?? .null, request.header("Accept").map(JSON.string) ?? .null,
            .string(request.target.firstIndex(of: "?").map { String(request.target[$0...]) } ?? ""),
            request.user.name.map(JSON.string) ?? .null, .array(request.user.roles.map(JSON.string)),
        ]
        return "\"" + Hex.string(Insecure.MD5.hash(data: parts.bytes)) + "\""
    }

    // MARK: Lists

    /// `GET|POST|OPTIONS /{db}/_design/{ddoc}/_list/{list}/[{other ddoc}/]{view}`: the rows of
    /// a view (or of `_all_docs`) rendered by a list function (`start`, `send`, `getRow`).
    func list(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        try request.requireMethod(.get, .head, .post, .options)
        guard rest.count == 3 || rest.count == 4 else {
            throw CouchError(status: 404, error: "list_error", reason: "Bad path.")
        }
        let functions = try design.designFunctions()
        let ddoc = try await design.designDocument(db, ddocID)
        guard ddoc["lists"]?[rest[1]]?.stringValue != nil else {
            throw CouchError.missingKey(["lists", rest[1]], in: ddoc)
        }
        let viewName = rest.count == 4 ? rest[3] : rest[2]
        let viewRequest = try DesignEndpoints.withBodyParameters(request)
        var head: JSONObject
        let rows: [JSON]
        if viewName == "_all_docs" {
            try request.user.authorize(.read, to: db)
            let body = request.method == .post ? try request.jsonObject() : nil
            let result = try await db.allDocs(try api.databases.allDocsOptions(request, body: body))
            head = ["total_rows": .int(result.totalRows), "offset": .int(result.offset)]
            rows = result.rows
        } else {
            let viewDDoc = rest.count == 4 ? "_design/\(rest[2])" : ddocID
            let result = try await design.runView(db, viewDDoc, viewName, viewRequest)
            head = result.reduced ? [:] : ["total_rows": .int(result.totalRows), "offset": .int(result.offset)]
            rows = result.rows
        }
        if try request.bool("update_seq") { head["update_seq"] = .string(db.sequenceString(try await db.updateSeq())) }
        let req = try await javascriptRequest(db, request, id: nil)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(
                designDocument: ddoc, path: ["lists", rest[1]], arguments: [.object(head), req, .array(rows)])
        }
        guard answer[0] == "list", let response = answer[1]?.objectValue, let chunks = answer[2]?.arrayValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected list answer")
        }
        return try Self.response(response, body: chunks.compactMap(\.stringValue).joined())
    }

    // MARK: Updates

    /// `/{db}/_design/{ddoc}/_update/{name}[/{docid}]` with any method but GET: the function
    /// returns `[doc, response]`; a document is saved (with the caller's rights and the
    /// database's validation) and the answer is 201 unless the function names a code.
    func update(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        let (functions, ddoc, docID, doc) = try await documentFunction(
            db, ddocID, rest, kind: "updates", error: "update_error")
        let req = try await javascriptRequest(db, request, id: docID)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(
                designDocument: ddoc, path: ["updates", rest[1]], arguments: [doc.map(JSON.object) ?? .null, req])
        }
        guard answer[0] == "up", var response = answer[2]?.objectValue else {
            throw CouchError(status: 500, error: "render_error", reason: "Unexpected update answer")
        }
        guard case let .object(newDoc)? = answer[1] else {
            if response["code"] == nil { response.prepend("code", 200) }
            return try Self.response(response)
        }
        // As CouchDB: the function names the document's id; none is an empty id.
        var input = try DocumentInput(json: .object(newDoc))
        if input.id == nil { input.id = "" }
        if input.id?.isEmpty == true {
            throw CouchError(status: 400, error: "bad_request", reason: "Document id must not be empty")
        }
        let rev = try await api.documents.writeDocument(db, input, request: request)
        if response["code"] == nil { response.prepend("code", 201) }
        var result = try Self.response(response)
        result.headers[HTTPField.Name("X-Couch-Id")!] = CouchURL.encode(input.id ?? "")
        result.headers[HTTPField.Name("X-Couch-Update-NewRev")!] = rev.description
        return result
    }

    // MARK: Rewrites

    /// `/{db}/_design/{ddoc}/_rewrite/...`: the request again at the path the design
    /// document's `rewrites` give (thrown as `RewrittenRequest`, which `CouchRouteResponder` serves
    /// with the caller's identity and rights), or the rewrite function's own answer.
    func rewrite(_ db: DocumentDatabase, _ ddocID: String, _ request: APIRequest) async throws -> APIResponse {
        let limit = api.config.integer("chttpd", "rewrite_limit", default: 100)
        guard request.rewrites < limit else { throw CouchError.badRequest("Exceeded rewrite recursion limit") }
        let ddoc = try await design.designDocument(db, ddocID)
        let prefix =
            "/" + CouchURL.encode(db.name) + "/_design/" + CouchURL.encode(String(ddocID.dropFirst("_design/".count)))
        switch ddoc["rewrites"] {
        case .array(let rules)?:
            let secure = api.config.value("chttpd", "secure_rewrites") != "false"
            let path = Array(request.path.dropFirst(4))
            guard
                let target = try RewriteRules(rules, secure: secure).resolve(
                    method: request.method.rawValue, path: path, query: request.queryPairs)
            else {
                throw CouchError.missing
            }
            throw RewrittenRequest(method: request.method, target: Self.target(prefix, target))
        case .string?:
            return try await rewriteFunction(db, ddoc, prefix, request)
        default:
            throw CouchError(status: 404, error: "rewrite_error", reason: "Invalid path.")
        }
    }

    /// A JavaScript rewrite function's answer: a path (with `method`, `query`, `headers`,
    /// `body`) to serve instead, or a response of its own (`code`, `headers`, `body`).
    func rewriteFunction(
        _ db: DocumentDatabase, _ ddoc: JSONObject, _ prefix: String, _ request: APIRequest
    ) async throws -> APIResponse {
        let functions = try design.designFunctions()
        let req = try await javascriptRequest(db, request, id: nil, forRewrite: true)
        let answer = try await DesignFunctions.translating {
            try await functions.queryServer.call(designDocument: ddoc, path: ["rewrites"], arguments: [req])
        }
        if answer == ["no_dispatch_rule"] {
            throw CouchError(status: 404, error: "rewrite_error", reason: "Invalid path.")
        }
        guard answer[0] == "ok", let rewrite = answer[1]?.objectValue else { throw Self.rewriteError("bad rewrite") }
        try Self.validate(rewrite)
        var given = HTTPFields()
        for (name, value) in rewrite["headers"]?.objectValue?.members ?? [] {
            if let field = HTTPField.Name(name), let text = value.stringValue { given[field] = text }
        }
        let body = rewrite["body"]?.stringValue.map { Array($0.utf8) }
        if let code = rewrite["code"]?.intValue {
            return APIResponse(
                status: HTTPResponse.Status(code: code), headers: given,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: body ?? request.body)))
        }
        var headers = request.headers
        for field in given { headers[field.name] = field.value }
        guard let path = rewrite["path"]?.stringValue else {
            throw Self.rewriteError("Rewrite result must produce a new path.")
        }
        let method = rewrite["method"]?.stringValue.flatMap { HTTPRequest.Method($0) } ?? request.method
        let query: [(String, String)] =
            rewrite["query"]?.objectValue.map { object in
                object.members.compactMap { member in member.value.stringValue.map { (member.key, $0) } }
            } ?? request.queryPairs
        let queryString = query.map { CouchURL.encode($0.0) + "=" + CouchURL.encode($0.1) }.joined(separator: "&")
        throw RewrittenRequest(
            method: method, target: Self.target(prefix, path + (queryString.isEmpty ? "" : "?" + queryString)),
            headers: headers, body: body)
    }

    /// A rewrite's `path[?query]`, relative to the design document (`prefix`), as an absolute
    /// target; the query string is kept out of the path's normalisation.
    static func target(_ prefix: String, _ relative: String) -> String {
        let question = relative.firstIndex(of: "?")
        return RewriteRules.normalized(prefix + "/" + relative[..<(question ?? relative.endIndex)])
            + (question.map { String(relative[$0...]) } ?? "")
    }

    static func rewriteError(_ reason: String) -> CouchError {
        CouchError(status: 500, error: "rewrite_error", reason: reason)
    }

    /// A rewrite function's answer checked as CouchDB checks it.
    static func validate(_ rewrite: JSONObject) throws {
        for (key, value) in rewrite {
            switch key {
            case "method":
                guard value.stringValue.flatMap({ HTTPRequest.Method($0) }) != nil else {
                    throw rewriteError("bad method")
                }
            case "path": guard value.stringValue != nil else { throw rewriteError("bad path") }
            case "body": guard value.stringValue != nil else { throw rewriteError("bad body") }
            case "headers", "query":
                guard let object = value.objectValue else { throw rewriteError("bad \(key)") }
                for member in object where member.value.stringValue == nil {
                    throw rewriteError("object key/value must be strings \(member.key)=\(member.value.text)")
                }
            case "code":
                guard let code = value.intValue, (200..<600).contains(code) else { throw rewriteError("bad code") }
            default: continue
            }
        }
    }

    // MARK: Responses and requests

    /// A show, list or update function's response object as HTTP, as CouchDB's
    /// `chttpd_external` reads it: `json` (sent as JSON), `body` (text/html; charset=utf-8) or
    /// `base64` (application/binary), `code`, `headers` (a `Content-Type` among them wins);
    /// any other member is an error. `body` is a list's chunks; with neither, the type is JSON.
    static func response(_ response: JSONObject, body listBody: String? = nil) throws -> APIResponse {
        var contentType = "application/json"
        var bytes: [UInt8] = Array((listBody ?? "").utf8)
        var json: JSON?
        var code = 200
        var extra: [(String, String)] = []
        for (key, value) in response {
            switch key {
            case "code":
                guard let number = value.intValue, (100...599).contains(number) else {
                    throw CouchError(status: 500, error: "render_error", reason: "Invalid status code \(value.text)")
                }
                code = number
            case "stop": continue
            case "json":
                json = value
                contentType = "application/json"
            case "body":
                if listBody == nil { bytes = Array((value.stringValue ?? value.text).utf8) }
                contentType = "text/html; charset=utf-8"
            case "base64":
                if listBody == nil { bytes = Array(Data(base64Encoded: value.stringValue ?? "") ?? Data()) }
                contentType = "application/binary"
            case "headers":
                for (name, header) in value.objectValue?.members ?? [] {
                    extra.append((name, header.stringValue ?? header.text))
                }
            default:
                throw CouchError(
                    status: 500, error: "external_response_error",
                    reason: "Invalid data from external server: \(key)=\(value.text)")
            }
        }
        if let json { bytes = json.bytes }
        var headers = HTTPFields()
        headers[.contentType] = contentType
        for (name, value) in extra {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        return APIResponse(
            status: HTTPResponse.Status(code: code), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// CouchDB's request object for design functions (`req`): the database's `info`, the
    /// request (`method`, `path`, `raw_path`, `query` with its JSON parameters parsed,
    /// `headers` as sent but credentials, `body`, `form`), the caller's `userCtx` and the
    /// database's `secObj`.
    /// A rewrite function's `req` has neither `info`, `uuid`, `id` nor `form` (CouchDB's
    /// `rewrite`): `forRewrite` leaves them out, and does not read the database's info.
    func javascriptRequest(
        _ db: DocumentDatabase, _ request: APIRequest, id: String?, forRewrite: Bool = false
    ) async throws -> JSON {
        var userContext = request.user.json.objectValue ?? JSONObject()
        userContext.prepend("db", .string(db.name))
        var headers = JSONObject()
        // HTTP/1.1's Host is the request's authority here, not one of its fields.
        if let host = request.authority { headers["Host"] = .string(host) }
        for field in request.headers where field.name != .authorization && field.name != .cookie {
            headers[field.name.rawName] = .string(field.value)
        }
        var query = JSONObject()
        for (name, value) in request.queryPairs {
            let parsed =
                ["key", "startkey", "endkey", "descending"].contains(name) ? try? JSON.parse(Array(value.utf8)) : nil
            query[name] = parsed ?? .string(value)
        }
        var form = JSONObject()
        if request.method == .post || request.method == .put,
            request.header("Content-Type")?.hasPrefix("application/x-www-form-urlencoded") == true
        {
            for (name, value) in CouchURL.orderedParameters(String(decoding: request.body, as: UTF8.self)) {
                form[name] = .string(value)
            }
        }
        let path = JSON.array(request.path.map(JSON.string))
        let target =
            request.target.isEmpty ? "/" + request.path.map(CouchURL.encode).joined(separator: "/") : request.target
        var req: JSONObject =
            forRewrite
            ? [:]
            : [
                "info": .object(try await db.info()),
                "uuid": .string(api.config.newID()),
                "id": id.map(JSON.string) ?? .null,
            ]
        let common: JSONObject = [
            "method": .string(request.method.rawValue),
            "requested_path": path,
            "path": path,
            "raw_path": .string(target),
            "query": .object(query),
            "headers": .object(headers),
            "body": request.body.isEmpty ? "undefined" : .string(String(decoding: request.body, as: UTF8.self)),
            "peer": .string(request.client == "in-process" || request.client.isEmpty ? "127.0.0.1" : request.client),
        ]
        req.members += common.members
        if !forRewrite { req["form"] = .object(form) }
        req["cookie"] = [:]
        req["userCtx"] = .object(userContext)
        req["secObj"] = .object(db.security)
        return .object(req)
    }
}

/// A `_rewrite` request's new form: `CouchRouteResponder` serves it as if the client had asked for
/// it (with the same identity), counting the rewrite.
struct RewrittenRequest: Error {
    var method: HTTPRequest.Method
    /// The path and query, escaped.
    var target: String
    /// The request's headers, changed by the rewrite (nil: unchanged).
    var headers: HTTPFields?
    /// A new body (nil: the request's).
    var body: [UInt8]?
}
