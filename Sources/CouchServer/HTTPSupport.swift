import CouchEngine
import CouchJSON
import CouchProtocol
import HTTPServing
import Foundation
import HTTPTypes
import Hummingbird

/// The parts of an HTTP request the CouchDB API looks at, decoded once.
struct APIRequest {
    let method: HTTPRequest.Method
    let headers: HTTPFields
    /// Percent-decoded path segments.
    let path: [String]
    /// Query parameters, percent-decoded; the last value wins for repeated names.
    var query: [String: String]
    var body: [UInt8]
    var user: UserContext
    /// The client's address (see `ClientAddress`), for login throttling; "in-process" for
    /// the server's own calls.
    var client = "in-process"
    /// Whether the client went away (its connection closed): long scans stop.
    var clientGone: @Sendable () -> Bool = { false }
    /// The host the client asked for (HTTP/1.1's `Host`), nil for the server's own calls.
    var authority: String?
    /// The request target as the client sent it: the path and query, escaped.
    var target = ""
    /// How many `_rewrite`s led to this request (`[chttpd] rewrite_limit` bounds them).
    var rewrites = 0

    /// The query string's parameters in their order, repeated names kept (`query` keeps the last).
    var queryPairs: [(String, String)] {
        CouchURL.orderedParameters(target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) })
    }

    func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headers[$0] }
    }

    /// A `Location` for `path` (escaped) on this server: absolute, as CouchDB answers
    /// (`http://127.0.0.1:5984/db/doc`): the host a proxy names in `X-Forwarded-Host` (or
    /// the header `[chttpd] x_forwarded_host` names), else the request's `Host`; `https` when
    /// `X-Forwarded-Ssl: on` or `X-Forwarded-Proto: https` says so. The path alone for a
    /// request without a host (the server's own calls).
    func location(_ path: String, scheme: String) -> String {
        let names = ForwardedHeaders.names.withLock { $0 }
        let forwarded = header(names.host).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let host = forwarded.flatMap({ $0.isEmpty ? nil : $0 }) ?? authority, !host.isEmpty,
            !host.contains(where: { $0 == "/" || $0 == " " || $0 == "@" || $0 == "\r" || $0 == "\n" || $0 == "," })
        else { return path }
        var scheme = scheme
        if header(names.ssl) == "on" || header(names.proto) == "https" { scheme = "https" }
        return scheme + "://" + host + path
    }

    /// `/db/doc[/attachment]` escaped as CouchDB writes it in a `Location` (`_design/` and
    /// `_local/` keep their slash).
    static func documentPath(_ db: String, _ id: String, attachment: String? = nil) -> String {
        var path = "/" + CouchURL.encode(db) + "/"
        if let prefix = ["_design/", "_local/"].first(where: { id.hasPrefix($0) }) {
            path += prefix + CouchURL.encode(String(id.dropFirst(prefix.count)))
        } else {
            path += CouchURL.encode(id)
        }
        if let attachment { path += "/" + CouchURL.encode(attachment) }
        return path
    }

    /// Whether `If-None-Match` names `etag` (or `*`): a list, weak (`W/`) tags matching too.
    func ifNoneMatch(_ etag: String) -> Bool {
        guard let header = header("If-None-Match") else { return false }
        return header.split(separator: ",").contains { tag in
            var tag = tag.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == etag || tag == "*"
        }
    }

    /// 415 unless a sent `Content-Type` is JSON, as CouchDB's `validate_ctype` for query
    /// bodies (a body sent without one is read as JSON).
    func requireJSONContentType() throws {
        guard let type = header("Content-Type") else { return }
        guard type.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
        else {
            throw CouchError(status: 415, error: "bad_content_type", reason: "Content-Type must be application/json")
        }
    }

    /// The body parsed as JSON, or 400 `bad_request` if it is not JSON.
    func json() throws -> JSON {
        guard !body.isEmpty else { throw CouchError.badRequest("Request body is empty; a JSON body is required") }
        do {
            return try JSON.parse(body)
        } catch {
            // CouchDB's words exactly (clients match them).
            throw CouchError.badRequest("invalid UTF-8 JSON")
        }
    }

    /// The body as a JSON object, or 400.
    func jsonObject() throws -> JSONObject {
        guard case let .object(object) = try json() else {
            throw CouchError.badRequest("Request body must be a JSON object")
        }
        return object
    }

    func bool(_ name: String, default value: Bool = false) throws -> Bool {
        guard let raw = query[name] else { return value }
        switch raw {
        case "true": return true
        case "false": return false
        default:
            throw CouchError(status: 400, error: "query_parse_error", reason: "Invalid boolean parameter: \"\(raw)\"")
        }
    }

    /// A count parameter (`skip`, `limit`, ...): a non-negative integer up to
    /// `ClientCount.largest`, so that no arithmetic on it can overflow; otherwise CouchDB's 400
    /// `query_parse_error`.
    func int(_ name: String) throws -> Int? {
        guard let raw = query[name] else { return nil }
        guard let value = ClientCount.parse(raw) else {
            let integer = raw.first == "-" ? raw.dropFirst() : Substring(raw)
            guard !integer.isEmpty, integer.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw CouchError(
                    status: 400, error: "query_parse_error", reason: "Invalid value for integer: \"\(raw)\"")
            }
            // CouchDB's words for a negative count; one beyond lt's range also names the parameter.
            let range = raw.first == "-" ? "" : " (\(name): \(ClientCount.range))"
            throw CouchError(
                status: 400, error: "query_parse_error",
                reason: "Invalid value for positive integer: \"\(raw)\"\(range)")
        }
        return value
    }

    /// A query parameter holding JSON (`startkey`, `keys`, `open_revs`, ...).
    func jsonParam(_ name: String) throws -> JSON? {
        guard let raw = query[name] else { return nil }
        do { return try JSON.parse(raw) } catch {
            throw CouchError.badRequest("Invalid JSON in query parameter \(name)")
        }
    }
}

/// A response under construction: status, headers, body.
struct APIResponse {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: ResponseBody

    static func json(_ value: JSON, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> APIResponse {
        var bytes = value.bytes
        bytes.append(UInt8(ascii: "\n"))
        var headers = extra
        headers[.contentType] = "application/json"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "must-revalidate" }
        return APIResponse(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON body already written as bytes.
    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> APIResponse {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "must-revalidate"
        return APIResponse(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func error(_ error: CouchError, headers: HTTPFields = [:]) -> APIResponse {
        json(
            ["error": .string(error.error), "reason": .string(error.reason)],
            status: HTTPResponse.Status(code: error.status), headers: headers)
    }

    static func ok(status: HTTPResponse.Status = .ok) -> APIResponse {
        json(["ok": true], status: status)
    }

    var response: Response {
        Response(status: status, headers: headers, body: body)
    }
}

extension CouchError {
    static func methodNotAllowed(_ allowed: String) -> CouchError {
        CouchError(status: 405, error: "method_not_allowed", reason: "Only \(allowed) allowed")
    }
    static let unauthorized = CouchError(
        status: 401, error: "unauthorized", reason: "You are not authorized to access this db.")
    static let badCredentials = CouchError(status: 401, error: "unauthorized", reason: "Name or password is incorrect.")
    static let tooLarge = CouchError(status: 413, error: "too_large", reason: "the request entity is too large")
    static func notImplemented(_ reason: String) -> CouchError {
        CouchError(status: 501, error: "not_implemented", reason: reason)
    }
}

extension [UInt8] {
    /// Appends JSON values already written, separated by commas (an array's or object's members).
    mutating func appendJoined(_ parts: some Sequence<[UInt8]>) {
        for (index, part) in parts.enumerated() {
            if index > 0 { append(UInt8(ascii: ",")) }
            append(contentsOf: part)
        }
    }
}

/// Content codings a client accepts (`Accept-Encoding`).
enum AcceptEncoding {
    /// Whether `coding` is accepted: named or `*`, with a quality above zero.
    static func accepts(_ coding: String, header: String?) -> Bool {
        guard let header else { return false }
        for item in header.split(separator: ",") {
            let fields = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let name = fields.first, name == coding || name == "*" else { continue }
            let quality = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if quality > 0 { return true }
        }
        return false
    }
}

/// Media types a client accepts (`Accept`), judged as CouchDB's HTTP layer (mochiweb's
/// `accepts_content_type`) judges them: no header accepts everything; a type is accepted when
/// it, its `type/*` or `*/*` is listed with a quality above zero, and neither it nor its
/// `type/*` is refused with `q=0`.
enum AcceptHeader {
    static func accepts(_ type: String, header: String?) -> Bool {
        let type = type.lowercased()
        let superType = (type.split(separator: "/").first.map(String.init) ?? type) + "/*"
        var accepted = false
        for item in (header ?? "*/*").lowercased().split(separator: ",") {
            let fields = item.split(separator: ";").map { $0.filter { !$0.isWhitespace } }
            guard let name = fields.first else { continue }
            // mochiweb keeps a range's other parameters in its name (`text/html;level=1`).
            let others = fields.dropFirst().filter { !$0.hasPrefix("q=") }
            let range = ([name] + others).joined(separator: ";")
            let quality = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if quality > 0 {
                if range == "*/*" || range == type || range == superType { accepted = true }
            } else if range == type || range == superType {
                return false
            }
        }
        return accepted
    }
}

/// The request headers a proxy names the client's host and scheme in (`[chttpd]
/// x_forwarded_host`, `x_forwarded_proto`, `x_forwarded_ssl`; set by the runtime configuration).
enum ForwardedHeaders {
    static let names = Locked((host: "X-Forwarded-Host", proto: "X-Forwarded-Proto", ssl: "X-Forwarded-Ssl"))
}
