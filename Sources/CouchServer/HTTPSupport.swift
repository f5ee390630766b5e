import CouchEngine
import CouchJSON
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
    let query: [String: String]
    var body: [UInt8]
    var user: UserContext
    /// The client's address (see `ClientAddress`), for login throttling; "in-process" for
    /// the server's own calls.
    var client = "in-process"

    func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headers[$0] }
    }

    /// The body parsed as JSON, or 400 `bad_request` if it is not JSON.
    func json() throws -> JSON {
        guard !body.isEmpty else { throw EngineError.badRequest("Request body is empty; a JSON body is required") }
        do {
            return try JSON.parse(body)
        } catch {
            throw EngineError.badRequest("invalid UTF-8 JSON: \(error)")
        }
    }

    /// The body as a JSON object, or 400.
    func jsonObject() throws -> JSONObject {
        guard case let .object(object) = try json() else { throw EngineError.badRequest("Request body must be a JSON object") }
        return object
    }

    func bool(_ name: String, default value: Bool = false) throws -> Bool {
        guard let raw = query[name] else { return value }
        switch raw {
        case "true": return true
        case "false": return false
        default: throw EngineError.badRequest("Invalid boolean parameter: \(name)=\(raw)")
        }
    }

    /// A count parameter (`skip`, `limit`, ...): a non-negative integer up to
    /// `ClientCount.largest`, so that no arithmetic on it can overflow; 400 naming it otherwise.
    func int(_ name: String) throws -> Int? {
        guard let raw = query[name] else { return nil }
        guard let value = ClientCount.parse(raw) else {
            throw EngineError.badRequest("Invalid value for integer parameter \(name): \(raw) (\(ClientCount.range))")
        }
        return value
    }

    /// A query parameter holding JSON (`startkey`, `keys`, `open_revs`, ...).
    func jsonParam(_ name: String) throws -> JSON? {
        guard let raw = query[name] else { return nil }
        do { return try JSON.parse(raw) } catch {
            throw EngineError.badRequest("Invalid JSON in query parameter \(name)")
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
        headers[.cacheControl] = "must-revalidate"
        return APIResponse(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON body already written as bytes.
    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> APIResponse {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "must-revalidate"
        return APIResponse(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func error(_ error: EngineError, headers: HTTPFields = [:]) -> APIResponse {
        json(["error": .string(error.error), "reason": .string(error.reason)],
             status: HTTPResponse.Status(code: error.status), headers: headers)
    }

    static func ok(status: HTTPResponse.Status = .ok) -> APIResponse {
        json(["ok": true], status: status)
    }

    var response: Response {
        Response(status: status, headers: headers, body: body)
    }
}

extension EngineError {
    static func methodNotAllowed(_ allowed: String) -> EngineError {
        EngineError(status: 405, error: "method_not_allowed", reason: "Only \(allowed) allowed")
    }
    static let unauthorized = EngineError(status: 401, error: "unauthorized", reason: "You are not authorized to access this db.")
    static let badCredentials = EngineError(status: 401, error: "unauthorized", reason: "Name or password is incorrect.")
    static let tooLarge = EngineError(status: 413, error: "too_large", reason: "the request entity is too large")
    static func notImplemented(_ reason: String) -> EngineError {
        EngineError(status: 501, error: "not_implemented", reason: reason)
    }
}

enum PercentDecoding {
    /// Decodes `%XX` escapes (and `+` as space when `plusAsSpace`); invalid escapes stay as they are.
    static func decode(_ s: Substring, plusAsSpace: Bool) -> String {
        decode(s.utf8, plusAsSpace: plusAsSpace)
    }

    /// Works on UTF-8 bytes throughout: query strings and paths are parsed on every request, and
    /// splitting a `String` walks grapheme clusters.
    static func decode(_ s: Substring.UTF8View, plusAsSpace: Bool) -> String {
        let percent = UInt8(ascii: "%"), plus = UInt8(ascii: "+")
        guard s.contains(where: { $0 == percent || (plusAsSpace && $0 == plus) }) else { return String(Substring(s)) }
        let input = Array(s)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            let byte = input[i]
            if byte == percent, i + 2 < input.count, let high = hexValue(input[i + 1]), let low = hexValue(input[i + 2]) {
                bytes.append(high << 4 | low)
                i += 3
                continue
            }
            bytes.append(plusAsSpace && byte == plus ? UInt8(ascii: " ") : byte)
            i += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func query(_ raw: String?) -> [String: String] {
        guard let raw, !raw.isEmpty else { return [:] }
        var out: [String: String] = [:]
        // `;` separates parameters too, as in CouchDB's HTTP layer (mochiweb) and HTML 4.
        for pair in Substring(raw).utf8.split(omittingEmptySubsequences: true, whereSeparator: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") }) {
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                out[decode(pair[..<equals], plusAsSpace: true)] = decode(pair[pair.index(after: equals)...], plusAsSpace: true)
            } else {
                out[decode(pair, plusAsSpace: true)] = ""
            }
        }
        return out
    }

    static func path(_ raw: String) -> [String] {
        Substring(raw).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map { decode($0, plusAsSpace: false) }
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
