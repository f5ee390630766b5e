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
}
