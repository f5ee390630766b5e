/// A document id compared and hashed by its UTF-8 bytes, as CouchDB compares ids. Swift's
/// `String` equality is canonical equivalence (`"é" == "e\u{301}"`), so a `Set<String>` or a
/// dictionary keyed by `String` takes two of CouchDB's ids for one: use this as the key.
public struct ExactID: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let id: String

    public init(_ id: String) { self.id = id }
    public init(stringLiteral id: String) { self.id = id }

    public var description: String { id }

    public static func == (a: ExactID, b: ExactID) -> Bool {
        let (x, y) = (a.id.utf8, b.id.utf8)
        guard x.count == y.count else { return false }
        // Native strings compare their bytes in place; others (bridged) a byte at a time.
        let inPlace = x.withContiguousStorageIfAvailable { p in
            y.withContiguousStorageIfAvailable { q in p.elementsEqual(q) }
        }
        return (inPlace ?? nil) ?? x.elementsEqual(y)
    }

    public func hash(into hasher: inout Hasher) {
        var id = id
        id.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
