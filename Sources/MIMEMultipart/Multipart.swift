import Foundation

/// MIME multipart bodies, as CouchDB uses them for documents with attachment bodies
/// (`multipart/related` uploads) and for `open_revs` responses (`multipart/mixed`).
public enum Multipart {
    public struct Part: Sendable {
        /// Header values by lowercased name.
        public var headers: [String: String]
        public var body: [UInt8]
    }

    /// Why a body could not be split into parts.
    public struct MalformedBody: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The `boundary` parameter of a multipart content type.
    public static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else {
                continue
            }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// Splits a multipart body into parts.
    public static func parse(_ body: [UInt8], boundary: String) throws(MalformedBody) -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var positions: [Int] = []
        var searchFrom = 0
        while let found = find(delimiter, in: body, from: searchFrom) {
            positions.append(found)
            searchFrom = found + delimiter.count
        }
        guard positions.count >= 2 else { throw MalformedBody(description: "Malformed multipart body") }
        var parts: [Part] = []
        for (start, end) in zip(positions, positions.dropFirst()) {
            var partStart = start + delimiter.count
            // Skip the line break after the delimiter.
            if partStart + 1 < body.count, body[partStart] == 13, body[partStart + 1] == 10 {
                partStart += 2
            } else if partStart < body.count, body[partStart] == 10 {
                partStart += 1
            }
            var partEnd = end
            if partEnd >= 2, body[partEnd - 2] == 13, body[partEnd - 1] == 10 {
                partEnd -= 2
            } else if partEnd >= 1, body[partEnd - 1] == 10 {
                partEnd -= 1
            }
            guard partStart <= partEnd else { throw MalformedBody(description: "Malformed multipart body") }
            let slice = Array(body[partStart..<partEnd])
            let separator: [UInt8] = [13, 10, 13, 10]
            var headers: [String: String] = [:]
            var content = slice
            if let headerEnd = find(separator, in: slice, from: 0) {
                let headerText = String(decoding: slice[0..<headerEnd], as: UTF8.self)
                for line in headerText.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }) {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                        in: .whitespaces)
                }
                content = Array(slice[(headerEnd + 4)...])
            } else if slice.starts(with: [13, 10]) {
                content = Array(slice.dropFirst(2))
            }
            parts.append(Part(headers: headers, body: content))
        }
        return parts
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, from <= haystack.count - needle.count else { return nil }
        let first = needle[0]
        var i = from
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first {
                var matched = true
                for j in 1..<needle.count where haystack[i + j] != needle[j] {
                    matched = false
                    break
                }
                if matched { return i }
            }
            i += 1
        }
        return nil
    }

    /// Builds a multipart body from parts (headers, body).
    public static func build(_ parts: [(headers: [(String, String)], body: [UInt8])], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        for part in parts {
            out += Array("--\(boundary)\r\n".utf8)
            for (name, value) in part.headers { out += Array("\(name): \(value)\r\n".utf8) }
            out += Array("\r\n".utf8)
            out += part.body
            out += Array("\r\n".utf8)
        }
        out += Array("--\(boundary)--".utf8)
        return out
    }
}
