@testable import CouchServer
import LTTestSupport
import Testing

/// `Range` headers as CouchDB reads them for attachments (`chttpd_db:parse_ranges` after
/// mochiweb's parser), and what any header at all may become.
@Suite("Byte ranges")
struct ByteRangesTests {
    @Test("CouchDB's cases")
    func couchDBCases() {
        let length = 29
        #expect(ByteRanges.parse(nil, length: length) == .whole)
        #expect(ByteRanges.parse("bytes=0-28", length: length) == .ranges([0...28]))
        #expect(ByteRanges.parse("bytes=0-", length: length) == .whole)
        #expect(ByteRanges.parse("bytes=2-,0-", length: length) == .whole)
        #expect(ByteRanges.parse("bytes:0-", length: length) == .whole)
        #expect(ByteRanges.parse("bytes=-3", length: length) == .ranges([26...28]))
        #expect(ByteRanges.parse("bytes=-300", length: length) == .ranges([0...28]))
        #expect(ByteRanges.parse("bytes=20-100", length: length) == .ranges([20...28]))
        #expect(ByteRanges.parse("bytes=5-3", length: length) == .unsatisfiable)
        #expect(ByteRanges.parse("bytes=300-310", length: length) == .unsatisfiable)
        #expect(ByteRanges.parse("bytes= 1-2 , 4-5", length: length) == .ranges([1...2, 4...5]))
        #expect(ByteRanges.parse("bytes=a-b", length: length) == .whole)
        #expect(ByteRanges.parse("bytes=-", length: length) == .whole)
        #expect(ByteRanges.parse("bytes=99999999999999999999-", length: length) == .whole)
        #expect(ByteRanges.parse("bytes=" + Array(repeating: "1-2", count: 10).joined(separator: ","), length: length) == .whole)
        #expect(ByteRanges.parse("bytes=0-0", length: 0) == .unsatisfiable)
    }

    @Test("Any header: ranges inside the body, at most nine, or the whole body, or 416", arguments: [1, 2, 3] as [UInt64])
    func anyHeader(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let alphabet = Array("bytes=0123456789-,  x")
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...64, using: &random)
            let header = String((0..<Int.random(in: 0...24, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
            switch ByteRanges.parse(header, length: length) {
            case .whole, .unsatisfiable: break
            case .ranges(let ranges):
                #expect((1...ByteRanges.most).contains(ranges.count), "\(header)")
                #expect(ranges.allSatisfy { $0.lowerBound >= 0 && $0.upperBound < length }, "\(header) of \(length)")
            }
        }
    }
}
