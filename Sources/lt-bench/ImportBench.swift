import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Logging

/// `lt-bench import`: a Google Takeout `Records.json` of millions of points, laid out as
/// Takeout writes it (two-space indents, an `activity` list on many entries), imported with
/// `lt import` into a real `lt serve`, as a user would: its time, and the peak memory of the
/// server and of the command; then the same file again (it must add nothing), whose time is
/// the baseline the first is compared with.
struct ImportBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a generated multi-million-point Records.json with lt import, twice: time and peak memory.")

    @Option(help: "Points in the generated Records.json.")
    var points = 2_000_000

    @Option(help: "Keep the generated file here (reused when it exists) instead of a scratch copy.")
    var file: String?

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (1...50_000_000).contains(points) else { throw ValidationError("--points 1…50,000,000") }
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let records = file.map { URL(fileURLWithPath: $0) } ?? scratch.appendingPathComponent("Records.json")
        if !FileManager.default.fileExists(atPath: records.path) {
            let started = ContinuousClock.now
            try Self.writeRecords(points: points, to: records)
            print(String(format: "generated %@ in %.1f s", records.path, (ContinuousClock.now - started).seconds))
        }
        let size = (try FileManager.default.attributesOfItem(atPath: records.path)[.size] as? Int) ?? 0
        let admin = (user: "bench", password: "bench-password")
        let server = try await LTServeProcess.start(
            binary: lt.executable, directory: scratch, admin: admin, arguments: ["--tiles", "none"])
        defer { server.stop() }
        guard let applicationPort = server.applicationPort else {
            throw ValidationError("lt serve started without its application")
        }
        let app = "http://\(admin.user):\(admin.password)@127.0.0.1:\(applicationPort)"
        // The user registers through the API, as the app does (no credentials: anyone may).
        try BenchConnection(host: "127.0.0.1", port: applicationPort).expectSuccess(
            "PUT", "/api/users/amy", authorization: "", json: ["password": "pw-amy-secret"])
        print(
            "lt-bench import: \(points) points, \(ProgressLine.size(Int64(size))) Records.json; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(TLSBench.loadAverage())")

        func importOnce(_ label: String) throws -> (seconds: Double, written: Int, duplicates: Int) {
            let sampler = PeakMemorySampler(pid: server.pid)
            let command = Process()
            command.executableURL = lt.executable
            command.arguments = ["import", records.path, "--user", "amy", "--app", app, "--json"]
            let output = Pipe()
            command.standardOutput = output
            command.standardError = FileHandle.nullDevice
            let started = ContinuousClock.now
            try command.run()
            let commandPeak = PeakMemorySampler(pid: command.processIdentifier)
            let data = output.fileHandleForReading.readDataToEndOfFile()
            command.waitUntilExit()
            let seconds = (ContinuousClock.now - started).seconds
            let serverPeak = sampler.stop()
            let clientPeak = commandPeak.stop()
            let summary = (try? JSON.parse(Array(data))) ?? .null
            guard command.terminationStatus == 0, let totals = summary["totals"] else {
                throw ValidationError("lt import failed: \(String(decoding: data, as: UTF8.self).prefix(2000))")
            }
            let written = totals["written"]?.intValue ?? -1
            let duplicates = totals["duplicates"]?.intValue ?? -1
            print(
                String(
                    format:
                        "%@: %.1f s, %.0f points/s, %.0f MiB/s; written %d, already there %d; peak RSS server %.0f MiB, lt import %.0f MiB",
                    label, seconds, Double(points) / seconds, Double(size) / 1_048_576 / seconds, written, duplicates,
                    Double(serverPeak) / 1_048_576, Double(clientPeak) / 1_048_576))
            return (seconds, written, duplicates)
        }
        let first = try importOnce("first import ")
        let second = try importOnce("second import")
        print(
            String(
                format: "second/first time %.2f (the second adds %d documents)", second.seconds / first.seconds,
                second.written))
        if first.written + first.duplicates != points || second.written != 0 {
            throw ValidationError("the imports did not store each point once")
        }
    }

    /// A Records.json as Takeout lays it out, written a megabyte at a time. Three entries in four
    /// carry an `activity` list of three to six types; one in three has `timestampMs` (older exports) instead of
    /// `timestamp`.
    static func writeRecords(points: Int, to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw ValidationError("cannot write \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var out: [UInt8] = []
        out.reserveCapacity(1 << 21)
        out += Array("{\n  \"locations\": [".utf8)
        var random = SystemRandomNumberGenerator()
        var time: Int64 = 1_400_000_000_000
        var lat = 473_000_000
        var lon = 85_000_000
        let activities = ["STILL", "ON_FOOT", "WALKING", "IN_VEHICLE", "ON_BICYCLE", "UNKNOWN", "TILTING"]
        for i in 0..<points {
            time += Int64.random(in: 1_000...120_000, using: &random)
            lat += Int.random(in: -2_000...2_000, using: &random)
            lon += Int.random(in: -2_000...2_000, using: &random)
            var entry = i == 0 ? "{\n" : ", {\n"
            entry +=
                "    \"latitudeE7\": \(lat),\n    \"longitudeE7\": \(lon),\n    \"accuracy\": \(Int.random(in: 3...80, using: &random)),\n"
            let iso = isoUTC(time)
            if i % 4 != 3 {
                entry += "    \"activity\": [{\n      \"activity\": [{\n"
                let kinds = activities.shuffled(using: &random).prefix(Int.random(in: 3...6, using: &random))
                entry += kinds.map {
                    "        \"type\": \"\($0)\",\n        \"confidence\": \(Int.random(in: 1...100, using: &random))\n"
                }
                .joined(separator: "      }, {\n")
                entry += "      }],\n      \"timestamp\": \"\(iso)\"\n    }],\n"
            }
            entry += "    \"source\": \"WIFI\",\n    \"deviceTag\": 1978796627,\n"
            entry += i % 3 == 0 ? "    \"timestampMs\": \"\(time)\"\n  }" : "    \"timestamp\": \"\(iso)\"\n  }"
            out += Array(entry.utf8)
            if out.count >= 1 << 20 {
                try handle.write(contentsOf: out)
                out.removeAll(keepingCapacity: true)
            }
        }
        out += Array("]\n}\n".utf8)
        try handle.write(contentsOf: out)
    }

    /// `2022-01-12T17:18:24.190Z`.
    static func isoUTC(_ ms: Int64) -> String {
        let seconds = Int(ms / 1000)
        let days = seconds / 86_400
        let rest = seconds % 86_400
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, month, day, rest / 3600, rest % 3600 / 60, rest % 60,
            Int(ms % 1000))
    }
}
