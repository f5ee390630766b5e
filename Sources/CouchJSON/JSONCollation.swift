extension JSON {
    private var collationRank: Int {
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

    /// Orders two values as CouchDB's view collation does: null, false, true, numbers, strings,
    /// arrays (element-wise), objects (member-wise). Strings compare case-insensitively first and
    /// lowercase before uppercase on a tie, approximating ICU's root collation for Latin text.
    public static func collate(_ a: JSON, _ b: JSON) -> Int {
        let ra = a.collationRank, rb = b.collationRank
        if ra != rb { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case let (.string(x), .string(y)):
            return collateStrings(x, y)
        case let (.array(x), .array(y)):
            for (l, r) in zip(x, y) {
                let c = collate(l, r)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case let (.object(x), .object(y)):
            for (l, r) in zip(x.members, y.members) {
                let k = collateStrings(l.key, r.key)
                if k != 0 { return k }
                let c = collate(l.value, r.value)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            if case let .int(x) = a, case let .int(y) = b { return x == y ? 0 : (x < y ? -1 : 1) }
            let x = a.doubleValue ?? 0, y = b.doubleValue ?? 0
            return x == y ? 0 : (x < y ? -1 : 1)
        }
    }

    static func collateStrings(_ x: String, _ y: String) -> Int {
        if x == y { return 0 }
        let lx = x.lowercased(), ly = y.lowercased()
        if lx != ly { return lx < ly ? -1 : 1 }
        // Same letters: lowercase sorts first, as ICU does.
        for (cx, cy) in zip(x.unicodeScalars, y.unicodeScalars) where cx != cy {
            let xLower = cx.properties.isLowercase
            let yLower = cy.properties.isLowercase
            if xLower != yLower { return xLower ? -1 : 1 }
            return cx.value < cy.value ? -1 : 1
        }
        return x.unicodeScalars.count < y.unicodeScalars.count ? -1 : 1
    }
}
