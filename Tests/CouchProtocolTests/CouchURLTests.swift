import CouchProtocol
import Foundation
import LTTestSupport
import Testing

/// Paths and query strings are decoded byte by byte on every request: what Foundation encodes
/// comes back unchanged, `+` is a space in queries only, and broken escapes are kept as written.
/// What `CouchURL` encodes decodes to itself and holds nothing but unreserved characters and escapes.
@Suite struct CouchURLTests {
    @Test func encodedTextIsUnreservedAndDecodesToItself() {
        var random = SeededRandom(seed: 11)
        let alphabet = Array("aZ09 -_.~/?&=+%#;:@!$'()*,é€😀\"\\\u{0}")
        for _ in 0..<2_000 {
            let text = String((0..<Int(random.next() % 24)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let encoded = CouchURL.encode(text)
            #expect(encoded.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Array("-._~%".utf8).contains(byte)
            })
            #expect(CouchURL.decode(Substring(encoded), plusAsSpace: true) == text)
            #expect(CouchURL.segments(CouchURL.path(["db", text, "x"])) == ["db"] + (text.isEmpty ? [] : [text]) + ["x"])
            #expect(CouchURL.parameters(String(CouchURL.query([("k", text), ("b", "1")]).dropFirst())) == ["k": text, "b": "1"])
        }
        #expect(CouchURL.encode("_design/a b+c") == "_design%2Fa%20b%2Bc")
        #expect(CouchURL.path([]) == "/" && CouchURL.query([String: String]()) == "")
        #expect(CouchURL.query(["z": "1", "a": "x;y"]) == "?a=x%3By&z=1")
    }

    @Test func encodedTextDecodesToItself() {
        var random = SeededRandom(seed: 9)
        let alphabet = Array("aZ09 -_.~/?&=+%#é€😀\"\\")
        for _ in 0..<2_000 {
            let text = String((0..<Int(random.next() % 24)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let encoded = text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(CouchURL.decode(Substring(encoded), plusAsSpace: false) == text)
            #expect(CouchURL.parameters("k=\(encoded)&x")["k"] == text)
        }
    }

    @Test func queriesPathsAndBrokenEscapes() {
        #expect(CouchURL.parameters("a=1+2&b=%2B&c&=e&&d=x=y") == ["a": "1 2", "b": "+", "c": "", "": "e", "d": "x=y"])
        #expect(CouchURL.segments("/db/_design%2Fx//doc+1/") == ["db", "_design/x", "doc+1"])
        #expect(CouchURL.decode("100%", plusAsSpace: false) == "100%")
        #expect(CouchURL.decode("%4g%41%a", plusAsSpace: false) == "%4gA%a")
        #expect(CouchURL.parameters(nil).isEmpty && CouchURL.parameters("").isEmpty)
    }
}
