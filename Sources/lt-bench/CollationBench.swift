import ArgumentParser
import CouchCollation
import CouchJSON
import Foundation

/// `lt-bench collation`: what ordering keys as CouchDB does costs on its own (issue 41). The
/// same view keys made into index keys by the default collation (ICU sort keys) and by raw
/// collation (the strings' bytes: the baseline, what a byte-ordered index costs), and the same
/// pairs compared by ICU and by their bytes, in one process.
struct CollationBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collation",
        abstract: "CouchDB's collation of view keys (ICU sort keys and comparisons) beside byte order, per key.")

    @Option(help: "Keys per measurement.")
    var keys = 200_000

    @Option(help: "Rounds; the best of each is reported.")
    var rounds = 3

    func validate() throws {
        guard (1000...10_000_000).contains(keys) else { throw ValidationError("--keys 1,000…10,000,000") }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds 1…20") }
    }

    /// Keys as location views emit them: user names, ISO times, place names (some accented),
    /// and `[user, day]` pairs (the same ones every run).
    static func viewKeys(_ count: Int) -> [JSON] {
        let places = [
            "Market St", "Café de Flore", "Straße 12", "Ørsted Park", "north gate", "Zürich HB", "東京駅", "São Paulo",
        ]
        return (0..<count).map { i in
            switch i % 4 {
            case 0: return .string("user\(i % 997)")
            case 1:
                return .string(
                    String(
                        format: "2026-%02d-%02dT%02d:%02d:%02dZ", i % 12 + 1, i % 28 + 1, i % 24, i % 60, (i * 7) % 60))
            case 2: return .string(places[i % places.count] + " \(i % 50)")
            default:
                return [.string("user\(i % 997)"), .string(String(format: "2026-%02d-%02d", i % 12 + 1, i % 28 + 1))]
            }
        }
    }

    func run() throws {
        let values = Self.viewKeys(keys)
        func best(_ body: () -> Int) -> (seconds: Double, check: Int) {
            var fastest = Double.infinity, check = 0
            for _ in 0..<rounds {
                let start = DispatchTime.now().uptimeNanoseconds
                check = body()
                fastest = min(fastest, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            }
            return (fastest, check)
        }
        let icuKeys = best { values.reduce(0) { $0 &+ $1.collationKey(.unicode).count } }
        let rawKeys = best { values.reduce(0) { $0 &+ $1.collationKey(.raw).count } }
        let pairs = zip(values, values.dropFirst() + values.prefix(1))
        let icuCompare = best { pairs.reduce(0) { $0 &+ JSON.collate($1.0, $1.1) } }
        let rawCompare = best { pairs.reduce(0) { $0 &+ JSON.collate($1.0, $1.1, .raw) } }
        func perKey(_ seconds: Double) -> String { String(format: "%.0f ns", seconds / Double(values.count) * 1e9) }
        print("collation: \(values.count) view keys (names, times, places, [user, day]), best of \(rounds)")
        print(
            "  index key, ICU (default)   \(perKey(icuKeys.seconds)) per key, \(icuKeys.check / values.count) bytes on average"
        )
        print(
            "  index key, raw (baseline)  \(perKey(rawKeys.seconds)) per key, \(rawKeys.check / values.count) bytes on average"
        )
        print(String(format: "  ICU / raw                  %.2f×", icuKeys.seconds / rawKeys.seconds))
        print("  compare, ICU (default)     \(perKey(icuCompare.seconds)) per pair")
        print("  compare, raw (baseline)    \(perKey(rawCompare.seconds)) per pair")
        print(String(format: "  ICU / raw                  %.2f×", icuCompare.seconds / rawCompare.seconds))
    }
}
