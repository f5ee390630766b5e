/// A revision id, `N-<hash>`: generation `pos` and a hash. CouchDB and PouchDB both order
/// revisions of the same generation by comparing the hash strings.
public struct Revision: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let pos: Int
    public let hash: String
    /// The largest generation a revision id may have (18 digits): parsing stops there, so
    /// `pos + 1` of any parsed or replicated revision never overflows.
    public static let largestPosition = 999_999_999_999_999_999

    public init(pos: Int, hash: String) {
        self.pos = pos
        self.hash = hash
    }

    /// Parses `N-hash`; nil when the text is not a revision id. Works on UTF-8 bytes: this
    /// runs for every revision of every change, diff and fetch.
    public init?(_ text: String) {
        let utf8 = text.utf8
        var index = utf8.startIndex
        var pos = 0
        var digits = 0
        while index != utf8.endIndex, utf8[index] != UInt8(ascii: "-") {
            let byte = utf8[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 18 else { return nil }
            pos = pos * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
            index = utf8.index(after: index)
        }
        guard digits > 0, index != utf8.endIndex else { return nil }
        let hashStart = utf8.index(after: index)
        guard hashStart != utf8.endIndex, !utf8[hashStart...].contains(where: { $0 <= 0x20 }) else { return nil }
        self.pos = pos
        self.hash = String(text[hashStart...])
    }

    public var description: String { "\(pos)-\(hash)" }

    public static func < (lhs: Revision, rhs: Revision) -> Bool {
        lhs.pos != rhs.pos ? lhs.pos < rhs.pos : lhs.hash < rhs.hash
    }
}
