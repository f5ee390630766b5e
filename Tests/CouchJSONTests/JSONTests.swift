import CouchJSON
import Foundation
import LTTestSupport
import Testing

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
