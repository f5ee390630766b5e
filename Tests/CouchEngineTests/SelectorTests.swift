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
            #expect(throws: CouchError.self) { _ = try Selector(json: try JSON.parse(bad)) }
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
