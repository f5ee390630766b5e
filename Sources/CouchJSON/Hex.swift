/// Lowercase hexadecimal, as CouchDB writes digests, salts, uuids and sequence hashes.
public enum Hex {
    @usableFromInline static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Lowercase hex of a byte sequence. Inlinable, so that each caller's sequence type is
    /// specialized (every new revision id is made with it, from another module).
    @inlinable
    public static func string(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `count` bytes from the system's secure random source, in hex (tokens, salts, ids).
    public static func random(bytes count: Int) -> String {
        string((0..<count).map { _ in UInt8.random(in: 0...255) })
    }
}
