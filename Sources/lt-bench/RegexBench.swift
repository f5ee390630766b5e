import ArgumentParser
import Foundation
import LinearRegex

/// `lt-bench regex`: what matching `$regex` in linear time costs. The same patterns over the
/// same strings with `LinearRegex` (what `$regex` uses since issue 40) and Foundation's
/// `NSRegularExpression` (ICU, a backtracking engine: what it used before), in one process:
/// everyday patterns over the kind of strings location documents hold, and the patterns a
/// backtracking engine takes exponential time over, at growing lengths.
struct RegexBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "regex",
        abstract: "$regex matching: the linear-time engine beside ICU's backtracking one, on everyday and on catastrophic patterns.")

    @Option(help: "Strings matched per everyday pattern.")
    var strings = 20_000

    func validate() throws {
        guard (100...10_000_000).contains(strings) else { throw ValidationError("--strings 100…10,000,000") }
    }

    /// Strings like the fields of location documents: device ids, user names, times, captions.
    static func subjects(_ count: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        let words = ["phone", "tablet", "car", "bike", "home", "office", "gym", "station", "bridge at dusk", "lunch", "Café", "Straße"]
        return (0..<count).map { i in
            switch i % 4 {
            case 0: return "owntracks-\(words[i % 6])-\(1_700_000_000 + Int.random(in: 0..<10_000_000, using: &generator))"
            case 1: return "user\(i % 997)_\(words[i % words.count])"
            case 2: return String(format: "2026-%02d-%02dT%02d:%02d:%02dZ", i % 12 + 1, i % 28 + 1, i % 24, i % 60, (i * 7) % 60)
            default: return "\(words[i % words.count]) \(words[(i / 3) % words.count]) near \(i % 500) Market St"
            }
        }
    }

    static let everyday = [
        "^owntracks-", "phone|tablet", "^user[0-9]+_c", "(?i)café", "T1[0-9]:", "[0-9]{4}-[0-9]{2}-[0-9]{2}", "near .* St$", "\\bgym\\b",
    ]

    func run() throws {
        let subjects = Self.subjects(strings)
        print("lt-bench regex: \(Self.everyday.count) everyday patterns over \(strings.formatted()) strings of location documents; then catastrophic ones")
        print(String(format: "  %-28@ %14@ %14@ %8@", "pattern" as NSString, "linear /s" as NSString, "ICU /s" as NSString, "ratio" as NSString))
        var ratios: [Double] = []
        for pattern in Self.everyday {
            let linear = try LinearRegex(pattern)
            let icu = try NSRegularExpression(pattern: pattern)
            var found = (linear: 0, icu: 0)
            let linearTime = Self.time { for s in subjects where linear.matches(s) { found.linear += 1 } }
            let icuTime = Self.time {
                for s in subjects where icu.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil { found.icu += 1 }
            }
            let ratio = icuTime / linearTime
            ratios.append(ratio)
            print(String(format: "  %-28@ %14.0f %14.0f %7.2f×%@", pattern as NSString, Double(strings) / linearTime, Double(strings) / icuTime, ratio,
                         found.linear == found.icu ? "" : " (matches differ: \(found.linear) vs \(found.icu), ICU reads characters)"))
        }
        let geometric = exp(ratios.map(log).reduce(0, +) / Double(ratios.count))
        print(String(format: "  geometric mean: the linear engine at %.2f× ICU's speed", geometric))
        print("  catastrophic for backtracking, ^(x+x+)+y$ over n x's (no match):")
        let linear = try LinearRegex("^(x+x+)+y$")
        let icu = try NSRegularExpression(pattern: "^(x+x+)+y$")
        for n in [12, 16, 20, 24] {
            let subject = String(repeating: "x", count: n)
            let linearTime = Self.time { for _ in 0..<1000 { _ = linear.matches(subject) } } / 1000
            let icuTime = Self.time { _ = icu.firstMatch(in: subject, range: NSRange(subject.startIndex..., in: subject)) }
            print(String(format: "    n=%2d  linear %9.1f µs   ICU %12.1f µs   (%.0f×)", n, linearTime * 1e6, icuTime * 1e6, icuTime / linearTime))
        }
    }

    static func time(_ work: () -> Void) -> Double {
        let start = ContinuousClock.now
        work()
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
