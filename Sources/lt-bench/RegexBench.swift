import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import LinearRegex
import Logging

/// `lt-bench regex`: what matching `$regex` in linear time costs. The same patterns over the
/// same strings with `LinearRegex` (what `$regex` uses since issue 40) and Foundation's
/// `NSRegularExpression` (ICU, a backtracking engine: what it used before), in one process:
/// everyday patterns over the kind of strings location documents hold, and the patterns a
/// backtracking engine takes exponential time over, at growing lengths.
struct RegexBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "regex",
        abstract:
            "$regex matching: the linear-time engine beside ICU's backtracking one, on everyday and on catastrophic patterns; then _find over a real lt serve.",
        discussion:
            "With --documents N, also starts lt serve (--lt-binary: another lt, an earlier one to compare with) and times _find with each pattern over N documents beside _find matching every document by another condition, the same scan: the baseline."
    )

    @Option(help: "Strings matched per everyday pattern.")
    var strings = 20_000

    @Option(help: "Documents for the _find part (0: none).")
    var documents = 0

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (100...10_000_000).contains(strings) else { throw ValidationError("--strings 100…10,000,000") }
        guard (0...10_000_000).contains(documents) else { throw ValidationError("--documents 0…10,000,000") }
    }

    /// Strings like the fields of location documents: device ids, user names, times, captions
    /// (the same ones every run).
    static func subjects(_ count: Int) -> [String] {
        let words = [
            "phone", "tablet", "car", "bike", "home", "office", "gym", "station", "bridge at dusk", "lunch", "Café",
            "Straße",
        ]
        return (0..<count).map { i in
            switch i % 4 {
            case 0: return "owntracks-\(words[i % 6])-\(1_700_000_000 + (i &* 2_654_435_761) % 10_000_000)"
            case 1: return "user\(i % 997)_\(words[i % words.count])"
            case 2:
                return String(
                    format: "2026-%02d-%02dT%02d:%02d:%02dZ", i % 12 + 1, i % 28 + 1, i % 24, i % 60, (i * 7) % 60)
            default: return "\(words[i % words.count]) \(words[(i / 3) % words.count]) near \(i % 500) Market St"
            }
        }
    }

    static let everyday = [
        "^owntracks-", "phone|tablet", "^user[0-9]+_c", "(?i)café", "T1[0-9]:", "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "near .* St$", "\\bgym\\b",
    ]

    func run() async throws {
        try engines()
        if documents > 0 { try await find() }
    }

    /// `_find` with each everyday pattern over `documents` documents in a real `lt serve`,
    /// beside `{"v": {"$gt": null}}` (every document, the same full scan): the baseline.
    func find() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-regex-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let admin = (user: "bench", password: "bench-password")
        let server = try await LTServeProcess.start(
            binary: lt.executable, directory: scratch, admin: admin, arguments: ["--database-only"])
        defer { server.stop() }
        let authorization = "Basic " + Data("\(admin.user):\(admin.password)".utf8).base64EncodedString()
        let connection = try BenchConnection(host: "127.0.0.1", port: server.port)
        try connection.expectSuccess("PUT", "/regex", authorization: authorization)
        let values = Self.subjects(documents)
        for start in stride(from: 0, to: documents, by: 5_000) {
            let docs: [JSON] = (start..<min(documents, start + 5_000)).map {
                ["_id": .string(String(format: "d%08d", $0)), "v": .string(values[$0])]
            }
            try connection.expectSuccess(
                "POST", "/regex/_bulk_docs", authorization: authorization, json: ["docs": .array(docs)])
        }
        func query(_ selector: JSON) throws -> (seconds: Double, found: Int) {
            let body: JSON = ["selector": selector, "fields": ["_id"], "limit": .int(documents)]
            var best = Double.infinity, found = 0
            for _ in 0..<3 {
                let started = ContinuousClock.now
                let answer = try connection.send("POST", "/regex/_find", authorization: authorization, body: body.bytes)
                best = min(best, started.duration(to: .now).seconds)
                guard answer.status == 200 else {
                    throw ValidationError(
                        "_find: \(answer.status) \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
                }
                found = (try? JSON.parse(answer.body))?["docs"]?.arrayValue?.count ?? 0
            }
            return (best, found)
        }
        _ = try query(["v": ["$gt": nil]])  // warm the page cache
        let baseline = try query(["v": ["$gt": nil]])
        print(
            "  _find over \(documents.formatted()) documents of \(lt.executable.path), best of 3; baseline (every document, same scan): "
                + String(format: "%.3f s", baseline.seconds))
        for pattern in Self.everyday {
            let result = try query(["v": ["$regex": .string(pattern)]])
            print(
                "    " + pattern.padding(toLength: 28, withPad: " ", startingAt: 0)
                    + String(
                        format: "%.3f s  %.2f× the baseline's time, %d found", result.seconds,
                        result.seconds / baseline.seconds, result.found))
        }
    }

    func engines() throws {
        let subjects = Self.subjects(strings)
        print(
            "lt-bench regex: \(Self.everyday.count) everyday patterns over \(strings.formatted()) strings of location documents; then catastrophic ones"
        )
        func column(_ text: String, _ width: Int) -> String {
            text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0)
        }
        print("  " + column("pattern", 28) + column("linear /s", 14) + column("ICU /s", 14) + "linear ÷ ICU")
        var ratios: [Double] = []
        for pattern in Self.everyday {
            let linear = try LinearRegex(pattern)
            let icu = try NSRegularExpression(pattern: pattern)
            var found = (linear: 0, icu: 0)
            let linearTime = Self.time { for s in subjects where linear.matches(s) { found.linear += 1 } }
            let icuTime = Self.time {
                for s in subjects where icu.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil {
                    found.icu += 1
                }
            }
            let ratio = icuTime / linearTime
            ratios.append(ratio)
            print(
                "  " + column(pattern, 28) + column(String(format: "%.0f", Double(strings) / linearTime), 14)
                    + column(String(format: "%.0f", Double(strings) / icuTime), 14) + String(format: "%.2f×", ratio)
                    + (found.linear == found.icu
                        ? ""
                        : " (matches differ: \(found.linear) vs \(found.icu); ICU reads characters, CouchDB bytes)"))
        }
        let geometric = exp(ratios.map(log).reduce(0, +) / Double(ratios.count))
        print(String(format: "  geometric mean: the linear engine at %.2f× ICU's speed", geometric))
        print("  catastrophic for backtracking, ^(x+x+)+y$ over n x's (no match):")
        let linear = try LinearRegex("^(x+x+)+y$")
        let icu = try NSRegularExpression(pattern: "^(x+x+)+y$")
        for n in [12, 16, 20, 24] {
            let subject = String(repeating: "x", count: n)
            let linearTime = Self.time { for _ in 0..<1000 { _ = linear.matches(subject) } } / 1000
            let icuTime = Self.time {
                _ = icu.firstMatch(in: subject, range: NSRange(subject.startIndex..., in: subject))
            }
            print(
                String(
                    format: "    n=%2d  linear %9.1f µs   ICU %12.1f µs   (%.0f×)", n, linearTime * 1e6, icuTime * 1e6,
                    icuTime / linearTime))
        }
    }

    static func time(_ work: () -> Void) -> Double {
        let start = ContinuousClock.now
        work()
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
