/// Percent-encoding as CouchDB's URLs need it, both ways: the one encoder every client in the
/// package uses and the decoder the server parses requests with.
///
/// Encoding escapes everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`):
/// a document id's `/`, `+`, `?`, `#`, `&`, `=`, `;` and `%` can never change what a URL means
/// (CouchDB reads `+` in a query as a space and `;` as a separator), and any escape is decoded
/// the same by every server.
public enum CouchURL {
    /// One path segment or query key or value, escaped.
    public static func encode(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `/a/b` from segments, each escaped (`/` alone for none).
    public static func path(_ segments: [String]) -> String {
        segments.isEmpty ? "/" : segments.map { "/" + encode($0) }.joined()
    }

    /// `?k=v&…` from parameters in the order given, escaped; empty for none.
    public static func query(_ parameters: [(String, String)]) -> String {
        parameters.isEmpty ? "" : "?" + parameters.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }

    /// `?k=v&…` from a dictionary, keys sorted (a stable URL for the same parameters).
    public static func query(_ parameters: [String: String]) -> String {
        query(parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    // MARK: Decoding

    /// Decodes `%XX` escapes (and `+` as space when `plusAsSpace`); invalid escapes stay as they are.
    public static func decode(_ s: Substring, plusAsSpace: Bool) -> String {
        decode(s.utf8, plusAsSpace: plusAsSpace)
    }

    /// Works on UTF-8 bytes throughout: query strings and paths are parsed on every request, and
    /// splitting a `String` walks grapheme clusters.
    public static func decode(_ s: Substring.UTF8View, plusAsSpace: Bool) -> String {
        let percent = UInt8(ascii: "%"), plus = UInt8(ascii: "+")
        guard s.contains(where: { $0 == percent || (plusAsSpace && $0 == plus) }) else { return String(Substring(s)) }
        return String(decoding: decodedBytes(s, plusAsSpace: plusAsSpace), as: UTF8.self)
    }

    /// The bytes percent-escapes (and `+`, with `plusAsSpace`) stand for.
    static func decodedBytes(_ s: Substring.UTF8View, plusAsSpace: Bool) -> [UInt8] {
        let percent = UInt8(ascii: "%"), plus = UInt8(ascii: "+")
        let input = Array(s)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            let byte = input[i]
            if byte == percent, i + 2 < input.count, let high = hexValue(input[i + 1]), let low = hexValue(input[i + 2])
            {
                bytes.append(high << 4 | low)
                i += 3
                continue
            }
            bytes.append(plusAsSpace && byte == plus ? UInt8(ascii: " ") : byte)
            i += 1
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A query string's parameters, decoded (`+` as space; `;` separates too, as in CouchDB's
    /// HTTP layer, mochiweb, and HTML 4). A repeated key keeps its last value.
    public static func parameters(_ raw: String?) -> [String: String] {
        var out: [String: String] = [:]
        for (name, value) in orderedParameters(raw) { out[name] = value }
        return out
    }

    /// A query string's parameters, decoded as `parameters` decodes them, in their order and
    /// with repeated keys kept.
    public static func orderedParameters(_ raw: String?) -> [(String, String)] {
        guard let raw, !raw.isEmpty else { return [] }
        return Substring(raw).utf8.split(
            omittingEmptySubsequences: true, whereSeparator: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") }
        ).map { pair in
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                return (
                    decode(pair[..<equals], plusAsSpace: true),
                    decode(pair[pair.index(after: equals)...], plusAsSpace: true)
                )
            }
            return (decode(pair, plusAsSpace: true), "")
        }
    }

    /// A path's segments, decoded (empty segments dropped).
    /// The index of the first segment of a path whose percent-decoded bytes are not valid
    /// UTF-8 (`segments` would hold U+FFFD there, and two different ids would read the same);
    /// nil when every one is valid.
    public static func firstInvalidSegment(_ raw: String) -> Int? {
        let percent = UInt8(ascii: "%")
        guard raw.utf8.contains(percent) else { return nil }
        for (index, segment) in Substring(raw).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
            .enumerated()
        where segment.contains(percent)
            && String(validating: decodedBytes(Substring(segment).utf8, plusAsSpace: false), as: UTF8.self) == nil
        {
            return index
        }
        return nil
    }

    public static func segments(_ raw: String) -> [String] {
        Substring(raw).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map {
            decode($0, plusAsSpace: false)
        }
    }
}
