import CouchJSON
import Foundation

/// Document ids the server makes (`_uuids`, a `POST` or `_bulk_docs` without `_id`), by
/// CouchDB's `[uuids] algorithm`. A value: the clock and the random bytes come in, so its
/// sequences are tested without either.
///
/// - `sequential` (CouchDB's default): a random 26-hex-digit prefix and a 6-digit counter
///   that grows by a random step; a new prefix when the counter nears its end. Ids made one
///   after another sort one after another, so the id index grows at its end.
/// - `random`: 32 random hex digits.
/// - `utc_random`: 14 hex digits of microseconds since 1970 (never going back, never equal),
///   then 18 random ones.
/// - `utc_id`: the same 14 digits, then `[uuids] utc_id_suffix`.
struct UUIDGenerator: Sendable, Equatable {
    enum Algorithm: String, Sendable, CaseIterable {
        case sequential, random
        case utcRandom = "utc_random"
        case utcID = "utc_id"
    }

    let algorithm: Algorithm
    let suffix: String
    private var prefix: String
    private var counter: Int
    /// The last timestamp used (`utc_*`): the next is later even when the clock is not.
    private var clock: Int64 = 0

    /// Where the counter of a prefix ends (CouchDB's `16#fff000`).
    static let counterEnd = 0xfff000

    /// A generator starting fresh; `random(n)` gives `n` random bytes.
    init(_ algorithm: Algorithm, suffix: String = "", random: (Int) -> [UInt8]) {
        self.algorithm = algorithm
        self.suffix = suffix
        prefix = Hex.string(random(13))
        counter = Self.step(random)
    }

    /// The next id, at `microseconds` since 1970.
    mutating func next(microseconds: Int64, random: (Int) -> [UInt8]) -> String {
        switch algorithm {
        case .random:
            return Hex.string(random(16))
        case .sequential:
            let id = prefix + Self.hex(Int64(counter), digits: 6)
            if counter >= Self.counterEnd {
                prefix = Hex.string(random(13))
                counter = Self.step(random)
            } else {
                counter += Self.step(random)
            }
            return id
        case .utcRandom, .utcID:
            clock = microseconds > clock ? microseconds : clock + 1
            return Self.hex(clock, digits: 14) + (algorithm == .utcID ? suffix : Hex.string(random(9)))
        }
    }

    /// A counter step: 1 to 4093 (CouchDB's `rand:uniform(16#ffd)`).
    private static func step(_ random: (Int) -> [UInt8]) -> Int {
        let bytes = random(2)
        return (Int(bytes[0]) << 8 | Int(bytes[1])) % 0xffd + 1
    }

    private static func hex(_ value: Int64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    /// Random bytes from the system's generator, eight from each draw (a draw is a system call).
    static func systemRandom(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let word = generator.next()
            withUnsafeBytes(of: word) { bytes.append(contentsOf: $0.prefix(count - bytes.count)) }
        }
        return bytes
    }
}
