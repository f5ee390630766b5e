public import CouchJSON

/// How keys are ordered, as a CouchDB view's `options.collation` chooses.
public enum KeyCollation: String, Sendable, Hashable {
    /// CouchDB's default: null, false, true, numbers, strings, arrays (element-wise), objects
    /// (member-wise), with strings in ICU's root collation (the Unicode Collation Algorithm).
    case unicode
    /// `"collation": "raw"`: Erlang's term order of the decoded JSON, as CouchDB compares raw
    /// view keys: numbers, false, null, true, objects, arrays, then strings by their UTF-8 bytes.
    case raw

    /// The collation a view's `options` object asks for (`{"collation": "raw"}`); CouchDB
    /// takes anything else as the default.
    public init(viewOptions: JSON?) {
        self = viewOptions?["collation"]?.stringValue == "raw" ? .raw : .unicode
    }

    /// Names the format of stored collation keys (ICU's collator version included, as a new ICU
    /// orders some strings differently): indexes keyed under another format must be rebuilt.
    public static var storedFormat: String { "couch-collation-3/icu-" + ICUCollator.version }
    /// The ICU collator's version (its rules and data), as CouchDB reports its own.
    public static var collatorVersion: String { ICUCollator.version }
}

extension JSON {
    /// Orders two values as CouchDB's default view collation does (`couch_ejson_compare`):
    /// -1, 0 or 1. Strings that ICU finds equal (`é` and `e\u{301}`) compare equal.
    public static func collate(_ a: JSON, _ b: JSON) -> Int {
        let ra = a.unicodeRank, rb = b.unicodeRank
        if ra != rb { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case let (.string(x), .string(y)):
            return ICUCollator.compare(x, y)
        case let (.array(x), .array(y)):
            for (l, r) in zip(x, y) {
                let c = collate(l, r)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case let (.object(x), .object(y)):
            for (l, r) in zip(x.members, y.members) {
                let k = ICUCollator.compare(l.key, r.key)
                if k != 0 { return k }
                let c = collate(l.value, r.value)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            return compareNumbers(a, b)
        }
    }

    /// Orders two values by `collation`: -1, 0 or 1.
    public static func collate(_ a: JSON, _ b: JSON, _ collation: KeyCollation) -> Int {
        switch collation {
        case .unicode: return collate(a, b)
        case .raw:
            let x = a.collationKey(.raw), y = b.collationKey(.raw)
            return x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
        }
    }

    /// Numbers by value, exactly (integers beyond 2^53 too, as Erlang compares them).
    static func compareNumbers(_ a: JSON, _ b: JSON) -> Int {
        if case let .int(x) = a, case let .int(y) = b { return x == y ? 0 : (x < y ? -1 : 1) }
        let x = a.exactNumber, y = b.exactNumber
        if x.nearest != y.nearest { return x.nearest < y.nearest ? -1 : 1 }
        return x.remainder == y.remainder ? 0 : (x.remainder < y.remainder ? -1 : 1)
    }

    private var unicodeRank: Int {
        switch self {
        case .null: return 0
        case .bool(false): return 1
        case .bool(true): return 2
        case .int, .double: return 3
        case .string: return 4
        case .array: return 5
        case .object: return 6
        }
    }
}
