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

    func int(_ name: String) throws -> Int? {
        guard let raw = query[name] else { return nil }
        guard let value = Int(raw), value >= 0 else {
            throw EngineError.badRequest("Invalid value for integer parameter \(name): \(raw)")
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
        guard s.utf8.contains(UInt8(ascii: "%")) || (plusAsSpace && s.utf8.contains(UInt8(ascii: "+"))) else { return String(s) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        var iterator = Array(s.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%"), iterator.count >= 2,
               let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else if plusAsSpace, byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func query(_ raw: String?) -> [String: String] {
        guard let raw, !raw.isEmpty else { return [:] }
        var out: [String: String] = [:]
        for pair in raw.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = decode(parts[0], plusAsSpace: true)
            out[key] = parts.count > 1 ? decode(parts[1], plusAsSpace: true) : ""
        }
        return out
    }

    static func path(_ raw: String) -> [String] {
        raw.split(separator: "/", omittingEmptySubsequences: true).map { decode($0, plusAsSpace: false) }
    }
}
