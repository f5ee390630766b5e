import CouchJSON
import HistoryImport
import LTTestSupport
import Testing

/// The streaming element finder against the whole-document parser: whatever the document and
/// wherever it is cut into pieces, the elements it gives are the chosen arrays' elements, in
/// order, and a document that is not whole is an error naming a byte.
@Suite("Streaming JSON elements")
struct JSONElementStreamTests {
    /// Every element of the arrays at `paths`, read in pieces cut at random places.
    static func stream(_ bytes: [UInt8], paths: [[String]], rng: inout SeededRandom) throws -> [(Int, JSON)] {
        var stream = JSONElementStream(paths: paths)
        var out: [(Int, JSON)] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...64, using: &rng))
            try stream.feed(bytes[start..<end]) { out.append(($0.path, try JSON.parse($0.bytes))) }
            start = end
        }
        try stream.finish()
        return out
    }

    /// A random JSON value of bounded depth (strings with escapes, brackets and quotes inside).
    static func value(_ rng: inout SeededRandom, depth: Int) -> JSON {
        switch Int.random(in: 0..<(depth > 0 ? 7 : 5), using: &rng) {
        case 0: return .int(Int.random(in: -1_000_000...1_000_000, using: &rng))
        case 1: return .double(Double.random(in: -1000...1000, using: &rng))
        case 2: return .string(["a", "b\"[{", "}]\\", "é ✓", "", "\\\"x"].randomElement(using: &rng)!)
        case 3: return [true, false].randomElement(using: &rng)! ? .bool(true) : .null
        case 4: return .bool(false)
        case 5: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in value(&rng, depth: depth - 1) })
        default:
            var object = JSONObject()
            for i in 0..<Int.random(in: 0...4, using: &rng) {
                object[["locations", "x", "data", "k\(i)", "[{"].randomElement(using: &rng)!] = value(&rng, depth: depth - 1)
            }
            return .object(object)
        }
    }

    @Test("Property: the elements of locations[] in a generated document, cut anywhere, are the parsed document's, in order", arguments: 0..<40)
    func matchesWholeParse(seed: Int) throws {
        var rng = SeededRandom(seed: UInt64(seed))
        var doc = JSONObject()
        doc["before"] = Self.value(&rng, depth: 3)
        let elements = (0..<Int.random(in: 0...30, using: &rng)).map { _ in Self.value(&rng, depth: 3) }
        doc["locations"] = .array(elements)
        doc["after"] = Self.value(&rng, depth: 3)
        let bytes = Array(JSON.object(doc).text.utf8)
        let found = try Self.stream(bytes, paths: [["locations"]], rng: &rng)
        #expect(found.map(\.1) == elements)
        #expect(found.allSatisfy { $0.0 == 0 })
    }

    @Test("A bare array, nested paths and two chosen arrays in one document")
    func pathsAndBareArrays() throws {
        var rng = SeededRandom(seed: 7)
        let bare = Array(#"[ {"a":1}, [2,3], "s,]", 4.5e1, true, null ]"#.utf8)
        #expect(try Self.stream(bare, paths: [[]], rng: &rng).map(\.1) == [["a": 1], [2, 3], "s,]", .double(45), true, .null])
        let two = Array(#"{"semanticSegments":[{"x":[1]}],"meta":{"semanticSegments":[9]},"rawSignals":[{"y":2},{"y":3}]}"#.utf8)
        let found = try Self.stream(two, paths: [["semanticSegments"], ["rawSignals"]], rng: &rng)
        #expect(found.map(\.0) == [0, 1, 1])
        #expect(found.map(\.1) == [["x": [1]], ["y": 2], ["y": 3]])
        let nested = Array(#"{"a":{"b":[{"c":1}]},"b":[0]}"#.utf8)
        #expect(try Self.stream(nested, paths: [["a", "b"]], rng: &rng).map(\.1) == [["c": 1]])
    }

    @Test("Truncated, malformed and oversized input is an error naming the byte; memory stays bounded")
    func badInput() throws {
        var rng = SeededRandom(seed: 3)
        let whole = Array(#"{"locations":[{"a":1},{"b":2}]}"#.utf8)
        for cut in 1..<whole.count {
            var elements = 0
            var stream = JSONElementStream(paths: [["locations"]])
            try stream.feed(whole[..<cut]) { _ in elements += 1 }
            #expect(throws: JSONElementStream.Failure.self) { try stream.finish() }
            #expect(elements <= 2)
        }
        #expect(throws: JSONElementStream.Failure.self) { try Self.stream(Array(#"{"locations":[}"#.utf8), paths: [["locations"]], rng: &rng) }
        #expect(throws: JSONElementStream.Failure.self) { try Self.stream(Array("{} {}".utf8), paths: [["locations"]], rng: &rng) }
        #expect(throws: JSONElementStream.Failure.self) { try Self.stream(Array("".utf8), paths: [[]], rng: &rng) }
        var small = JSONElementStream(paths: [["locations"]])
        small.maxElementBytes = 100
        let big = Array(#"{"locations":[{"a":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 1000) + Array(#""}]}"#.utf8)
        let failure = #expect(throws: JSONElementStream.Failure.self) { try small.feed(big) { _ in } }
        #expect(failure?.offset == 114)
        var deep = JSONElementStream(paths: [[]])
        deep.maxDepth = 50
        #expect(throws: JSONElementStream.Failure.self) { try deep.feed(Array(repeating: UInt8(ascii: "["), count: 1_000_000)) { _ in } }
        var longKey = JSONElementStream(paths: [["locations"]])
        longKey.maxKeyBytes = 10
        #expect(throws: JSONElementStream.Failure.self) { try longKey.feed(Array(#"{"abcdefghijklmnop":1}"#.utf8)) { _ in } }
    }
}
