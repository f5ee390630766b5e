extension JSON {
    /// Bytes whose plain byte order follows `JSON.collate`: a type tag in collation order, then
    /// an order-preserving body (numbers as flipped IEEE doubles, strings case-folded with a
    /// case tie-break, arrays and objects element-wise with a terminator). SQLite compares BLOBs
    /// with memcmp, so an index on these bytes sorts and ranges like CouchDB's view collation.
    public var collationKey: [UInt8] {
        var out: [UInt8] = []
        appendCollationKey(to: &out)
        return out
    }

    /// Type tags. 0x00 is reserved as the terminator of arrays and objects.
    enum KeyTag: UInt8 {
        case null = 1, `false`, `true`, number, string, array, object
    }

    public func appendCollationKey(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(KeyTag.null.rawValue)
        case .bool(false): out.append(KeyTag.false.rawValue)
        case .bool(true): out.append(KeyTag.true.rawValue)
        case .int, .double:
            out.append(KeyTag.number.rawValue)
            JSON.appendOrderedDouble(doubleValue ?? 0, to: &out)
        case let .string(s):
            out.append(KeyTag.string.rawValue)
            JSON.appendStringKey(s, to: &out)
        case let .array(items):
            out.append(KeyTag.array.rawValue)
            for item in items { item.appendCollationKey(to: &out) }
            out.append(0)
        case let .object(object):
            out.append(KeyTag.object.rawValue)
            for (key, value) in object.members {
                out.append(KeyTag.string.rawValue)
                JSON.appendStringKey(key, to: &out)
                value.appendCollationKey(to: &out)
            }
            out.append(0)
        }
    }

    static func appendOrderedDouble(_ value: Double, to out: inout [UInt8]) {
        var bits = (value == 0 ? 0.0 : value).bitPattern  // -0 and 0 collate equal
        bits = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    /// Case-folded text (0x00 escaped as 0x00 0xFF), a 0x00 0x01 terminator, then one byte per
    /// scalar marking uppercase (so "a" < "A" < "b", as ICU orders them), and the terminator again.
    static func appendStringKey(_ s: String, to out: inout [UInt8]) {
        appendEscaped(s.lowercased().utf8, to: &out)
        out.append(contentsOf: [0, 1])
        for scalar in s.unicodeScalars where scalar.properties.isUppercase || scalar.properties.isLowercase {
            out.append(scalar.properties.isUppercase ? 2 : 1)
        }
        out.append(contentsOf: [0, 1])
    }

    static func appendEscaped(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(byte)
            if byte == 0 { out.append(0xFF) }
        }
    }

    /// The smallest key above every key of a string starting with `prefix` (case-insensitively):
    /// for `$beginsWith` ranges.
    public static func stringPrefixRange(_ prefix: String) -> (low: [UInt8], high: [UInt8]) {
        var low: [UInt8] = [KeyTag.string.rawValue]
        appendEscaped(prefix.lowercased().utf8, to: &low)
        var high = low
        high.append(0xFF)
        return (low, high)
    }
}
