@testable import CouchServer
import LTTestSupport
import Testing

/// CouchDB's id algorithms as a value: fed a clock and random bytes, checked without either.
@Suite("UUID generator")
struct UUIDGeneratorTests {
    /// Seeded random bytes: a failing seed replays.
    static func bytes(_ random: inout SeededRandom) -> (Int) -> [UInt8] {
        var copy = random
        defer { random = copy }
        let made = (0..<64).map { _ in UInt8.random(in: 0...255, using: &copy) }
        var at = 0
        return { count in
            defer { at = (at + count) % 32 }
            return Array(made[at..<(at + count)])
        }
    }

    @Test("sequential: 32 hex digits, increasing by 1 to 4093 within a prefix; a new prefix past the counter's end", arguments: [1, 2, 3] as [UInt64])
    func sequential(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var generator = UUIDGenerator(.sequential, random: Self.bytes(&random))
        var previous: String?
        var prefixes = 0
        for _ in 0..<20_000 {
            let id = generator.next(microseconds: 0, random: Self.bytes(&random))
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit))
            if let previous, previous.prefix(26) == id.prefix(26) {
                let step = Int(id.suffix(6), radix: 16)! - Int(previous.suffix(6), radix: 16)!
                #expect((1...4093).contains(step))
            } else {
                prefixes += 1
                #expect(Int(id.suffix(6), radix: 16)! <= 4093)
            }
            previous = id
        }
        // 20,000 ids of average step ~2,047 pass the counter's end (0xfff000) a few times.
        #expect((2...8).contains(prefixes))
    }

    @Test("utc_random and utc_id: time first, never equal or going back even when the clock does")
    func utc() {
        var random = SeededRandom(seed: 9)
        var utc = UUIDGenerator(.utcID, suffix: "frog", random: Self.bytes(&random))
        let clock: [Int64] = [1_700_000_000_000_000, 1_700_000_000_000_000, 1_699_999_999_000_000, 1_700_000_000_000_005, 1_800_000_000_000_000]
        let ids = clock.map { utc.next(microseconds: $0, random: Self.bytes(&random)) }
        #expect(ids.allSatisfy { $0.count == 18 && $0.hasSuffix("frog") })
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }, "\(ids)")
        #expect(ids[0] == String(1_700_000_000_000_000, radix: 16).leftPadded(14) + "frog")
        #expect(ids[3] == String(1_700_000_000_000_005, radix: 16).leftPadded(14) + "frog")
        var utcRandom = UUIDGenerator(.utcRandom, random: Self.bytes(&random))
        let first = utcRandom.next(microseconds: 5, random: Self.bytes(&random))
        let second = utcRandom.next(microseconds: 5, random: Self.bytes(&random))
        #expect(first.count == 32 && first.hasPrefix("00000000000005") && second.hasPrefix("00000000000006"))
    }

    @Test("The system's random bytes: as many as asked, eight from each draw, every byte value reachable")
    func systemRandomBytes() {
        for count in [0, 1, 2, 7, 8, 9, 13, 16, 100] {
            #expect(UUIDGenerator.systemRandom(count).count == count)
        }
        // 4,096 draws of 16 bytes: a byte position stuck at one value, or a value never seen,
        // would show (each value is missed by chance with probability ~e^-256).
        var seen = Set<UInt8>()
        var first = Set<UInt8>()
        for _ in 0..<4096 {
            let bytes = UUIDGenerator.systemRandom(16)
            seen.formUnion(bytes)
            first.insert(bytes[15])
        }
        #expect(seen.count == 256 && first.count == 256)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
