import CouchEngine
import LTTestSupport
import Testing

/// Document ids are equal when their UTF-8 bytes are, as CouchDB compares them — never by
/// Swift's canonical equivalence — and hash alike when equal.
@Suite("Exact ids")
struct ExactIDTests {
    @Test("Equal exactly when the bytes are: canonically equivalent ids stay two; random ids agree with a byte comparison")
    func bytewise() {
        #expect(ExactID("é") != ExactID("e\u{301}"))
        #expect("é" == "e\u{301}")  // what String alone would do
        #expect(ExactID("imp-1") == ExactID(String(decoding: Array("imp-1".utf8), as: UTF8.self)))
        #expect(ExactID("") == ExactID(""))
        #expect(ExactID("a") != ExactID("ab"))
        var rng = SeededRandom(seed: 38)
        let alphabet: [String] = ["a", "b", "é", "e\u{301}", "-", "😀", "Å", "A\u{30A}"]
        for _ in 0..<2000 {
            let a = (0..<Int.random(in: 0...4, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }.joined()
            let b = (0..<Int.random(in: 0...4, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }.joined()
            let same = Array(a.utf8) == Array(b.utf8)
            #expect((ExactID(a) == ExactID(b)) == same, "\(a) / \(b)")
            if same { #expect(ExactID(a).hashValue == ExactID(b).hashValue) }
        }
        #expect(Set([ExactID("é"), ExactID("e\u{301}"), ExactID("é")]).count == 2)
    }
}
