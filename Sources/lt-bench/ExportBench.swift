import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Logging

/// `lt-bench export`: what ordering an analyst's export by user and time costs. Everyone's
/// locations in `lt_locations_all` under ids that are not in time order; the export
/// (`/api/analysis/locations`, sorted in a temporary SQLite file, then streamed) in each format
/// beside reading the same documents unsorted (`_all_docs?include_docs=true`: the export's
/// own input), with the server's peak memory during each.
struct ExportBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "What ordering exports by user and time costs: each format beside an unsorted read of the same documents, and the server's memory."
    )

    @Option(help: "Locations in lt_locations_all.")
    var locations = 200_000

    @Option(help: "Users they belong to.")
    var users = 50

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (1...20_000_000).contains(locations), (1...100_000).contains(users) else {
            throw ValidationError("--locations 1…20,000,000, --users 1…100,000")
        }
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-export-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let admin = (user: "bench", password: "bench-password")
        let server = try await LTServeProcess.start(
            binary: lt.executable, directory: scratch, admin: admin, arguments: ["--tiles", "none"])
        defer { server.stop() }
        guard let applicationPort = server.applicationPort else {
            throw ValidationError("lt serve started without its application")
        }
        let adminAuthorization = "Basic " + Data("\(admin.user):\(admin.password)".utf8).base64EncodedString()
        let analystAuthorization = "Basic " + Data("ann:analyst-password".utf8).base64EncodedString()
        let database = try BenchConnection(host: "127.0.0.1", port: server.port)
        func send(_ method: String, _ path: String, _ body: JSON? = nil) throws {
            try database.expectSuccess(method, path, authorization: adminAuthorization, json: body)
        }
        print(
            "lt-bench export: \(locations) locations of \(users) users in lt_locations_all, ids not in time order; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(TLSBench.loadAverage())")
        try send(
            "PUT", "/_users/org.couchdb.user:ann",
            ["name": "ann", "type": "user", "roles": ["analyst"], "password": "analyst-password"])
        for start in stride(from: 0, to: locations, by: 5_000) {
            let docs: [JSON] = (start..<min(locations, start + 5_000)).map { i in
                guard case var .object(doc) = Bench.locationDocument(i) else { return .null }
                // A multiplicative hash of the index: ids in no relation to time or user.
                doc["_id"] = .string(
                    String(format: "loc-%08x-%d", UInt32(truncatingIfNeeded: UInt64(i) &* 2_654_435_761), i))
                if case var .object(properties)? = doc["properties"] {
                    properties["username"] = .string("user\(i % users)")
                    doc["properties"] = .object(properties)
                }
                return .object(doc)
            }
            try send("POST", "/lt_locations_all/_bulk_docs", .object(["docs": .array(docs)]))
        }

        /// One GET read to its end: seconds, bytes, and the server's peak memory meanwhile.
        func measure(
            _ port: Int, _ path: String, _ authorization: String
        ) throws -> (seconds: Double, bytes: Int, peak: Int) {
            let connection = try BenchConnection(host: "127.0.0.1", port: port)
            let sampler = PeakMemorySampler(pid: server.pid)
            let started = ContinuousClock.now
            let answer = try connection.send("GET", path, authorization: authorization)
            let seconds = started.duration(to: .now).seconds
            let peak = sampler.stop()
            guard answer.status == 200 else { throw ValidationError("GET \(path): \(answer.status)") }
            return (seconds, answer.body.count, peak)
        }
        /// The same documents in pages of 2,000, each starting after the last id of the one
        /// before (`startkey`, `skip=1`), as the export reads them.
        func pagedRead() throws -> Double {
            let connection = try BenchConnection(host: "127.0.0.1", port: server.port)
            let started = ContinuousClock.now
            var startKey: String?
            while true {
                var path = "/lt_locations_all/_all_docs?include_docs=true&limit=2000"
                if let startKey {
                    path +=
                        "&skip=1&startkey="
                        + (JSON.string(startKey).text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                }
                let answer = try connection.send("GET", path, authorization: adminAuthorization)
                guard answer.status == 200, let rows = try JSON.parse(answer.body)["rows"]?.arrayValue else {
                    throw ValidationError("GET \(path): \(answer.status)")
                }
                guard rows.count == 2000, let last = rows.last?["id"]?.stringValue else { break }
                startKey = last
            }
            return started.duration(to: .now).seconds
        }
        let idle = ServerProcessInfo.memory(server.pid)?.resident ?? 0
        // Warm the page cache.
        _ = try measure(server.port, "/lt_locations_all/_all_docs?include_docs=true", adminAuthorization)
        let read = try measure(server.port, "/lt_locations_all/_all_docs?include_docs=true", adminAuthorization)
        let paged = try pagedRead()
        func mib(_ bytes: Int) -> Double { Double(bytes) / 1_048_576 }
        func row(_ label: String, _ seconds: Double, _ rest: String) {
            print(
                label.padding(toLength: 46, withPad: " ", startingAt: 0)
                    + String(
                        format: "%10.0f   %10.0f   %5.2f×   ", Double(locations) / seconds,
                        Double(locations) / read.seconds, read.seconds / seconds) + rest)
        }
        print(String(format: "server resident memory before the reads: %.0f MiB", mib(idle)))
        print(
            "measure                                       locations/s     baseline   ratio   (baseline: one unsorted _all_docs read)"
        )
        row(
            "unsorted read, one request", read.seconds,
            String(format: "peak RSS %.0f MiB, %.1f MiB in %.2f s", mib(read.peak), mib(read.bytes), read.seconds))
        row("unsorted read, pages of 2,000 (startkey)", paged, String(format: "%.2f s", paged))
        for format in ["csv", "geojson", "gpx"] {
            let export = try measure(applicationPort, "/api/analysis/locations?format=\(format)", analystAuthorization)
            row(
                "export \(format), sorted by user and time", export.seconds,
                String(
                    format: "peak RSS %.0f MiB, %.1f MiB in %.2f s", mib(export.peak), mib(export.bytes), export.seconds
                ))
        }
    }
}
