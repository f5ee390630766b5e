import CouchCollation
import CouchJSON
import LTTestSupport
import Testing

@Suite("CouchDB's collation of JSON values")
struct CollationTests {
    /// The order CouchDB's documentation gives for view keys ("Views Collation", CouchDB 3.4).
    static let documentedOrder: [JSON] = [
        .null, false, true, 1, 2, 3.0, 4, "a", "A", "aa", "b", "B", "ba", "bb",
        ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
        ["a": 1], ["a": 2], ["b": 1], ["b": 2], .object(JSONObject([("b", 2), ("a", 1)])), .object(JSONObject([("b", 2), ("c", 2)])),
    ]

    @Test("The order CouchDB's documentation gives, by comparison and by key bytes")
    func documentedOrder() {
        let keys = Self.documentedOrder
        for (i, a) in keys.enumerated() {
            for (j, b) in keys.enumerated() {
                let expected = i < j ? -1 : (i > j ? 1 : 0)
                #expect(JSON.collate(a, b) == expected, "\(a) vs \(b)")
                #expect(Self.order(a.collationKey(), b.collationKey()) == expected, "keys of \(a) vs \(b)")
            }
        }
    }

    @Test("Strings in ICU's root order: punctuation before digits before letters, accents beside their letter, canonical equivalents equal")
    func unicodeStrings() {
        // Each string sorts before the next (ICU root collation, as CouchDB 3.4.3 answered).
        let ascending = ["_", "-", ",", ";", ":", "!", "?", ".", "'", "\"", "(", "[", "{", "@", "*", "/", "&", "#", "%", "+", "<", "=", ">", "|", "~", "$",
                         "0", "1", "9", "a", "A", "á", "Å", "ä", "b", "e", "é", "ê", "f", "north", "z", "ω", "я", "א", "日"]
        for (a, b) in zip(ascending, ascending.dropFirst()) {
            #expect(JSON.collate(.string(a), .string(b)) == -1, "\(a) < \(b)")
            #expect(Self.order(JSON.string(a).collationKey(), JSON.string(b).collationKey()) == -1, "key of \(a) < \(b)")
        }
        #expect(JSON.collate("é", "e\u{301}") == 0)
        #expect(JSON.string("é").collationKey() == JSON.string("e\u{301}").collationKey())
        #expect(JSON.collate("été", "north") == -1)
    }

    @Test("Raw collation is Erlang's term order: numbers, false, null, true, objects, arrays, strings by bytes")
    func rawOrder() {
        let ascending: [JSON] = [-5, 0, 1.5, 2, false, .null, true, [:], ["a": 1], ["b": 0], [], [1], [1, 2], ["a"], "", "B", "a", "a\u{0}", "ab", "é"]
        for (a, b) in zip(ascending, ascending.dropFirst()) {
            #expect(JSON.collate(a, b, .raw) == -1, "\(a) < \(b)")
        }
        #expect(KeyCollation(viewOptions: ["collation": "raw"]) == .raw)
        #expect(KeyCollation(viewOptions: ["collation": "unicode"]) == .unicode)
        #expect(KeyCollation(viewOptions: nil) == .unicode)
    }

    @Test("Integers beyond 2^53 keep their exact order (Erlang compares them exactly); equal values are equal keys")
    func exactIntegers() {
        let ascending: [JSON] = [.int(Int.min), -9_007_199_254_740_993, .double(-9_007_199_254_740_992), 0, .double(9_007_199_254_740_992),
                                 9_007_199_254_740_993, .double(9_007_199_254_740_994), 9_007_199_254_740_995, .int(Int.max), .double(1e300)]
        for collation in [KeyCollation.unicode, .raw] {
            for (a, b) in zip(ascending, ascending.dropFirst()) {
                #expect(JSON.collate(a, b, collation) == -1, "\(a) < \(b)")
                #expect(Self.order(a.collationKey(collation), b.collationKey(collation)) == -1, "keys of \(a) < \(b)")
            }
            #expect(JSON.int(9_007_199_254_740_994).collationKey(collation) == JSON.double(9_007_199_254_740_994).collationKey(collation))
            #expect(JSON.int(1).collationKey(collation) == JSON.double(1).collationKey(collation))
        }
    }

    @Test("Property: key bytes order random values exactly as comparison does, in both collations")
    func keysFollowComparison() {
        var rng = SeededRandom(seed: 41)
        let pieces = ["", "a", "A", "e", "é", "e\u{301}", "E\u{301}", "-", "_", "1", "10", "z", "Z", " ", "\u{0}", "ß", "ss", "ﬀ", "😀", "日本", "ω", "\u{FFFF}", "\u{10FFFF}"]
        func string() -> String { (0..<Int.random(in: 0...3, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined() }
        func value(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<(depth > 2 ? 6 : 8), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int([Int.random(in: -3...3, using: &rng), 9_007_199_254_740_993, 9_007_199_254_740_994, -9_007_199_254_740_993, Int.max, Int.min]
                .randomElement(using: &rng)!)
            case 3: return .double([-0.0, 0.5, -1e300, 1e300, 2.5, 9_007_199_254_740_992, 9.223372036854775807e18].randomElement(using: &rng)!)
            case 4, 5: return .string(string())
            case 6: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in value(depth + 1) })
            default: return .object(JSONObject((0..<Int.random(in: 0...2, using: &rng)).map { _ in (string(), value(depth + 1)) }))
            }
        }
        for collation in [KeyCollation.unicode, .raw] {
            for _ in 0..<4000 {
                let a = value(0), b = value(0)
                let byComparison = JSON.collate(a, b, collation)
                let byKeys = Self.order(a.collationKey(collation), b.collationKey(collation))
                #expect(byComparison == byKeys, "\(collation): \(a) vs \(b)")
                #expect(JSON.collate(b, a, collation) == -byComparison, "antisymmetric: \(a) vs \(b)")
            }
        }
    }

    @Test("$beginsWith reads from the prefix to the prefix and U+FFFF, as CouchDB does")
    func prefixRange() {
        let range = JSON.stringPrefixRange("ab")
        for inside in ["ab", "abc", "abz", "abé", "ab日"] {
            let key = JSON.string(inside).collationKey()
            #expect(Self.order(range.low, key) <= 0 && Self.order(key, range.high) <= 0, "\(inside)")
        }
        for outside in ["aa", "b", "a", "ac"] {
            let key = JSON.string(outside).collationKey()
            #expect(Self.order(key, range.low) < 0 || Self.order(key, range.high) > 0, "\(outside)")
        }
    }

    @Test("The stored format names ICU's collator version")
    func storedFormat() {
        #expect(KeyCollation.storedFormat.hasPrefix("couch-collation-3/icu-"))
        #expect(KeyCollation.storedFormat.split(separator: "-").last!.split(separator: ".").count == 4)
    }

    static func order(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
    }
}
