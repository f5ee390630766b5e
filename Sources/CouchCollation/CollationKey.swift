public import CouchJSON

extension JSON {
    /// Bytes whose plain byte order (memcmp, as SQLite compares BLOBs) is `collation`'s order
    /// of the values, so an index on them sorts and ranges as CouchDB's views do.
    ///
    /// Default collation: a type tag in CouchDB's order, then numbers as order-preserving IEEE
    /// doubles, strings as ICU sort keys (self-terminating: one 0 byte at the end), arrays and
    /// objects element by element with a 0 terminator. Raw: Erlang's term order (see
    /// `KeyCollation.raw`), strings as their bytes (0 escaped) with a terminator.
    public func collationKey(_ collation: KeyCollation = .unicode) -> [UInt8] {
        var out: [UInt8] = []
        appendCollationKey(to: &out, collation)
        return out
    }

    /// Appends `collationKey(collation)` to `out` (an index key of several fields).
    public func appendCollationKey(to out: inout [UInt8], _ collation: KeyCollation = .unicode) {
        switch collation {
        case .unicode: appendUnicodeKey(to: &out)
        case .raw: appendRawKey(to: &out)
        }
    }

    /// Type tags of the default collation. 0x00 ends arrays and objects, below every tag.
    enum UnicodeTag: UInt8 {
        case null = 1, `false`, `true`, number, string, array, object
    }

    private func appendUnicodeKey(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(UnicodeTag.null.rawValue)
        case .bool(false): out.append(UnicodeTag.false.rawValue)
        case .bool(true): out.append(UnicodeTag.true.rawValue)
        case .int, .double:
            out.append(UnicodeTag.number.rawValue)
            JSON.appendOrderedNumber(self, to: &out)
        case let .string(s):
            out.append(UnicodeTag.string.rawValue)
            ICUCollator.appendSortKey(s, to: &out)
        case let .array(items):
            out.append(UnicodeTag.array.rawValue)
            for item in items { item.appendUnicodeKey(to: &out) }
            out.append(0)
        case let .object(object):
            out.append(UnicodeTag.object.rawValue)
            for (key, value) in object.members {
                out.append(UnicodeTag.string.rawValue)
                ICUCollator.appendSortKey(key, to: &out)
                value.appendUnicodeKey(to: &out)
            }
            out.append(0)
        }
    }

    /// Type tags of raw collation, in Erlang's term order of what jiffy decodes JSON to:
    /// numbers, atoms (false, null, true: alphabetical), tuples (objects), lists (arrays),
    /// binaries (strings).
    enum RawTag: UInt8 {
        case number = 1, `false`, null, `true`, object, array, string
    }

    private func appendRawKey(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(RawTag.null.rawValue)
        case .bool(false): out.append(RawTag.false.rawValue)
        case .bool(true): out.append(RawTag.true.rawValue)
        case .int, .double:
            out.append(RawTag.number.rawValue)
            JSON.appendOrderedNumber(self, to: &out)
        case let .string(s):
            out.append(RawTag.string.rawValue)
            JSON.appendRawBytes(s, to: &out)
        case let .array(items):
            out.append(RawTag.array.rawValue)
            for item in items { item.appendRawKey(to: &out) }
            out.append(0)
        case let .object(object):
            // {[{K, V}, ...]}: a list of pairs, each its key's bytes then its value.
            out.append(RawTag.object.rawValue)
            for (key, value) in object.members {
                out.append(1)
                JSON.appendRawBytes(key, to: &out)
                value.appendRawKey(to: &out)
            }
            out.append(0)
        }
    }

    /// A string's UTF-8 bytes as Erlang compares binaries (byte by byte, a prefix first): 0
    /// escaped as 0 0xFF, then 0 0 (below any byte that could follow).
    static func appendRawBytes(_ s: String, to out: inout [UInt8]) {
        for byte in s.utf8 {
            out.append(byte)
            if byte == 0 { out.append(0xFF) }
        }
        out.append(contentsOf: [0, 0])
    }

    /// A number as its nearest double (order-preserving bits), then how far an integer is from
    /// that double (two bytes): integers beyond 2^53 keep their exact order, as Erlang compares
    /// them, and a number equal to a double (`1`, `1.0`) has the double's key.
    static func appendOrderedNumber(_ value: JSON, to out: inout [UInt8]) {
        let (nearest, remainder) = value.exactNumber
        var bits = (nearest == 0 ? 0.0 : nearest).bitPattern  // -0 and 0 collate equal
        bits = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
        let biased = UInt16(truncatingIfNeeded: remainder + 0x8000)
        out.append(UInt8(biased >> 8))
        out.append(UInt8(truncatingIfNeeded: biased))
    }

    /// The index range Mango reads for `$beginsWith` on a default-collation index, as CouchDB
    /// builds it: from the prefix itself (`low`, included) to the prefix followed by U+FFFF (the
    /// highest-sorting code point), included: `high` is the first key above it and keys that
    /// extend it (other fields of the index). The selector still checks each value's bytes.
    public static func stringPrefixRange(_ prefix: String) -> (low: [UInt8], high: [UInt8]) {
        (JSON.string(prefix).collationKey(), JSON.string(prefix + "\u{FFFF}").collationKey() + [0xFF])
    }
}

extension JSON {
    /// A number as the double nearest to it and the integer's distance from that double (at most
    /// 1,024 for 64-bit integers; 0 for doubles and integers up to 2^53): ordered pairwise, these
    /// order numbers exactly.
    var exactNumber: (nearest: Double, remainder: Int) {
        switch self {
        case let .int(n):
            let nearest = Double(n)
            return (nearest, Int(Int128(n) - Int128(nearest)))
        default:
            return (doubleValue ?? 0, 0)
        }
    }
}
