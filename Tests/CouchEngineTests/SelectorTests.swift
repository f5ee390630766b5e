import CouchEngine
import CouchJSON
import Testing

@Suite("Mango selectors")
struct SelectorTests {
    static let doc: JSON = try! JSON.parse("""
        {"_id":"p1","name":"Ann","age":31,"score":7.5,"tags":["a","b"],"loc":{"city":"Portland","zip":"97201"},
         "pets":[{"kind":"cat","age":3},{"kind":"dog","age":5}],"nothing":null,"flag":true,"map":{"k1":1,"x2":2}}
        """)

    func check(_ selector: String, _ expected: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let parsed = try Selector(json: try JSON.parse(selector))
        #expect(parsed.matches(Self.doc) == expected, "\(selector)", sourceLocation: sourceLocation)
    }

    @Test("Every operator matches as in CouchDB")
    func operators() throws {
        try check(#"{"name":"Ann"}"#, true)
        try check(#"{"name":{"$eq":"Bob"}}"#, false)
        try check(#"{"age":{"$gt":30,"$lt":32}}"#, true)
        try check(#"{"age":{"$gte":31,"$lte":31}}"#, true)
        try check(#"{"age":{"$ne":31}}"#, false)
        try check(#"{"missing":{"$ne":1}}"#, false)
        try check(#"{"missing":{"$exists":false}}"#, true)
        try check(#"{"nothing":{"$exists":true}}"#, true)
        try check(#"{"nothing":{"$type":"null"}}"#, true)
        try check(#"{"tags":{"$type":"array"}}"#, true)
        try check(#"{"age":{"$in":[1,31]}}"#, true)
        try check(#"{"tags":{"$in":["b","z"]}}"#, true)
        try check(#"{"tags":{"$nin":["z"]}}"#, true)
        try check(#"{"tags":{"$all":["a","b"]}}"#, true)
        try check(#"{"tags":{"$all":["a","c"]}}"#, false)
        try check(#"{"tags":{"$size":2}}"#, true)
        try check(#"{"age":{"$mod":[10,1]}}"#, true)
        try check(#"{"score":{"$mod":[2,1]}}"#, false)
        try check(#"{"name":{"$regex":"^A.n$"}}"#, true)
        try check(#"{"name":{"$beginsWith":"An"}}"#, true)
        try check(#"{"loc.city":"Portland"}"#, true)
        try check(#"{"loc":{"city":"Portland"}}"#, true)
        try check(#"{"pets":{"$elemMatch":{"kind":"dog","age":{"$gt":4}}}}"#, true)
        try check(#"{"pets":{"$elemMatch":{"kind":"dog","age":{"$gt":5}}}}"#, false)
        try check(#"{"pets":{"$allMatch":{"age":{"$gt":2}}}}"#, true)
        try check(#"{"tags":{"$elemMatch":{"$eq":"b"}}}"#, true)
        try check(#"{"map":{"$keyMapMatch":{"$beginsWith":"x"}}}"#, true)
        try check(#"{"$or":[{"name":"Bob"},{"age":31}]}"#, true)
        try check(#"{"$nor":[{"name":"Bob"},{"age":31}]}"#, false)
        try check(#"{"$and":[{"name":"Ann"},{"flag":true}]}"#, true)
        try check(#"{"$not":{"name":"Bob"}}"#, true)
        try check(#"{"age":{"$not":{"$lt":20}}}"#, true)
        try check(#"{"age":{"$gt":"a"}}"#, false)
        try check(#"{"name":{"$gt":5}}"#, true)  // strings collate after numbers, as in CouchDB
    }

    @Test("Malformed selectors are 400 errors")
    func rejectsBadInput() {
        for bad in [#"{"a":{"$bogus":1}}"#, #"{"a":{"$in":1}}"#, #"{"a":{"$mod":[0,1]}}"#, #"{"a":{"$regex":"("}}"#,
                    #"{"$or":{"a":1}}"#, #"{"a":{"$type":"integer"}}"#, #"[1]"#] {
            #expect(throws: EngineError.self) { _ = try Selector(json: try JSON.parse(bad)) }
        }
    }

    @Test("$not inverts and $in equals an $or of $eq, on random scalars")
    func algebraicProperties() throws {
        var rng = SeededRandom(seed: 5)
        let pool: [JSON] = [.null, .bool(true), .bool(false), .int(0), .int(1), .int(-3), .double(2.5), "a", "B", "b", [1], ["x": 1]]
        for _ in 0..<500 {
            let value = pool.randomElement(using: &rng)!
            let args = (0..<Int.random(in: 1...4, using: &rng)).map { _ in pool.randomElement(using: &rng)! }
            let doc: JSON = ["f": value]
            let inSelector = try Selector(json: ["f": ["$in": .array(args)]])
            let orSelector = try Selector(json: ["$or": .array(args.map { ["f": ["$eq": $0]] })])
            if value.arrayValue == nil {
                #expect(inSelector.matches(doc) == orSelector.matches(doc))
            }
            let cond = try Selector(json: ["f": ["$gt": args[0]]])
            let negated = try Selector(json: ["$not": ["f": ["$gt": args[0]]]])
            #expect(cond.matches(doc) != negated.matches(doc))
        }
    }
}

@Suite("JSON")
struct JSONTests {
    @Test("Parsing and writing round-trip and keep member order")
    func roundTrip() throws {
        let text = #"{"z":1,"a":[true,false,null,-0.5,1e3,"é\n\"\u0001"],"m":{"y":{},"x":[]},"big":12345678901234}"#
        let value = try JSON.parse(text)
        #expect(value.objectValue?.keys == ["z", "a", "m", "big"])
        #expect(try JSON.parse(value.text) == value)
        #expect(value["big"] == .int(12_345_678_901_234))
    }

    @Test("Random documents round-trip")
    func randomRoundTrip() throws {
        var rng = SeededRandom(seed: 11)
        func random(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int(Int.random(in: -1_000_000...1_000_000, using: &rng))
            case 3: return .double(Double.random(in: -1e6...1e6, using: &rng))
            case 4: return .string(String((0..<Int.random(in: 0...8, using: &rng)).map { _ in "aé\"\\\n😀 z".randomElement(using: &rng)! }))
            case 5: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in random(depth + 1) })
            default:
                var o = JSONObject()
                for i in 0..<Int.random(in: 0...4, using: &rng) { o["k\(i)"] = random(depth + 1) }
                return .object(o)
            }
        }
        for _ in 0..<500 {
            let value = random(0)
            #expect(try JSON.parse(value.text) == value)
        }
    }

    @Test("Malformed JSON is rejected, not crashed on")
    func rejectsMalformed() {
        for bad in ["", "{", "[1,]", "{\"a\"}", "tru", "01", "\"\\x\"", "\"\u{01}\"", "1 2", String(repeating: "[", count: 10_000)] {
            #expect(throws: JSONParseError.self) { _ = try JSON.parse(bad) }
        }
    }

    @Test("Index keys sort bytewise exactly as collation orders the values")
    func collationKeysPreserveOrder() {
        var rng = SeededRandom(seed: 21)
        let atoms: [JSON] = [.null, false, true, -1e300, -2, -0.5, 0, 0.25, 1, 3, 1e12, "", "a", "A", "aB", "Ab", "b", "ba", "z\u{0}", "é", [], [1], [1, 2], ["a"], [:], ["a": 1], ["a": 2], ["b": 0]]
        for _ in 0..<3000 {
            var a = atoms.randomElement(using: &rng)!
            var b = atoms.randomElement(using: &rng)!
            if Bool.random(using: &rng) { a = [a, atoms.randomElement(using: &rng)!]; b = [b, atoms.randomElement(using: &rng)!] }
            let byCollation = JSON.collate(a, b).signum()
            let ka = a.collationKey, kb = b.collationKey
            let byKey = ka == kb ? 0 : (ka.lexicographicallyPrecedes(kb) ? -1 : 1)
            #expect(byCollation == byKey, "\(a) vs \(b)")
        }
    }

    @Test("Collation orders types and strings as CouchDB views do")
    func collation() throws {
        let ordered: [JSON] = [.null, false, true, -1, 0, 2.5, 10, "a", "A", "aa", "b", "B", [1], [1, 2], ["a": 1]]
        for (i, a) in ordered.enumerated() {
            for (j, b) in ordered.enumerated() {
                let c = JSON.collate(a, b)
                #expect(c.signum() == (i < j ? -1 : i > j ? 1 : 0), "\(a) vs \(b)")
            }
        }
    }
}
