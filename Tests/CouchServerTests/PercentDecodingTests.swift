@testable import CouchServer
import Foundation
import LTTestSupport
import Testing

/// Paths and query strings are decoded byte by byte on every request: what Foundation encodes
/// comes back unchanged, `+` is a space in queries only, and broken escapes are kept as written.
@Suite struct PercentDecodingTests {
    @Test func encodedTextDecodesToItself() {
        var random = SeededRandom(seed: 9)
        let alphabet = Array("aZ09 -_.~/?&=+%#é€😀\"\\")
        for _ in 0..<2_000 {
            let text = String((0..<Int(random.next() % 24)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let encoded = text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(PercentDecoding.decode(Substring(encoded), plusAsSpace: false) == text)
            #expect(PercentDecoding.query("k=\(encoded)&x")["k"] == text)
        }
    }

    @Test func queriesPathsAndBrokenEscapes() {
        #expect(PercentDecoding.query("a=1+2&b=%2B&c&=e&&d=x=y") == ["a": "1 2", "b": "+", "c": "", "": "e", "d": "x=y"])
        #expect(PercentDecoding.path("/db/_design%2Fx//doc+1/") == ["db", "_design/x", "doc+1"])
        #expect(PercentDecoding.decode("100%", plusAsSpace: false) == "100%")
        #expect(PercentDecoding.decode("%4g%41%a", plusAsSpace: false) == "%4gA%a")
        #expect(PercentDecoding.query(nil).isEmpty && PercentDecoding.query("").isEmpty)
    }
}
