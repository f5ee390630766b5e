import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import GRDB
import Geo
import Logging
import TrackerKit

/// `lt-bench device`: what a device does per location. Saving accepted fixes in the device's
/// store (one commit each, as the app saves them) against raw SQLite inserts of the same JSON
/// with the same durability, the whole per-fix path offline (filter, save, places from the
/// device's copy), and the Freeway Drive end to end at maximum speed against a real `lt serve`
/// (started as a child process) until every kept fix is in `lt_locations_all`.
struct DeviceBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract:
            "Measure the device side: local saves against raw SQLite, the per-fix path, and the Freeway Drive end to end."
    )

    @Option(help: "Accepted fixes saved per local measurement.")
    var fixes = 2_000

    @Option(help: "Runs per measurement (the median is reported).")
    var runs = 3

    @Option(help: "Freeway Drive runs end to end against a server (each with a fresh user).")
    var drives = 3

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .error)
        let helper = try Bench.parse(["--durability", "full"])
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-device-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let locations = DeviceBench.fixes(fixes)
        print(
            "lt-bench device: \(fixes) accepted fixes per local run (one commit each, fsync on); median of \(runs) runs; \(drives) Freeway Drives"
        )

        // Baseline: the same JSON documents, one INSERT per transaction, WAL with synchronous=FULL.
        let bodies = locations.map { location -> (String, Data) in (location.id!, Data(location.json.bytes)) }
        let raw = try helper.median(runs) { run in
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            let queue = try DatabasePool(
                path: scratch.appendingPathComponent("raw-\(run).sqlite").path, configuration: configuration)
            try queue.write { db in try db.execute(sql: "CREATE TABLE docs(id TEXT PRIMARY KEY, body BLOB)") }
            let start = ContinuousClock.now
            for (id, body) in bodies {
                try queue.write { db in
                    try db.execute(sql: "INSERT INTO docs(id, body) VALUES (?, ?)", arguments: [id, body])
                }
            }
            return Double(bodies.count) / start.duration(to: .now).seconds
        }
        helper.report("raw SQLite inserts, one commit each (baseline)", raw, unit: "fixes/s")

        let saved = try await helper.medianAsync(runs) { run in
            let store = try LocalStore(directory: scratch.appendingPathComponent("store-\(run)"))
            let start = ContinuousClock.now
            for location in locations { try await store.save(location) }
            return Double(locations.count) / start.duration(to: .now).seconds
        }
        helper.report(
            "LocalStore.save (the device's store)", saved, unit: "fixes/s", ceiling: raw, baseline: "raw SQLite")

        // The whole per-fix path offline: filter, save, places near from the device's copy.
        let offline = try await helper.medianAsync(runs) { run in
            let store = try LocalStore(directory: scratch.appendingPathComponent("tracker-\(run)"))
            try await store.remember(DeviceBench.samplePlaces())
            let credentials = Credentials(
                username: "bench", apiKey: "k", apiPassword: "p", databaseName: "lt_locations_user_bench",
                databaseHost: "127.0.0.1:1", databaseProtocol: "http")
            let tracker = try await DeviceTracker(
                client: TrackerClient(baseURL: "http://127.0.0.1:1"), credentials: credentials, store: store)
            await tracker.setOnline(false, near: nil)
            let start = ContinuousClock.now
            for location in locations {
                let fix = LocationFix(
                    coordinate: location.coordinate, horizontalAccuracy: 5,
                    timestamp: Date(timeIntervalSince1970: location.timestamp / 1000))
                guard try await tracker.record(fix).decision == .accepted else {
                    throw ValidationError("bench fix rejected")
                }
            }
            return Double(locations.count) / start.duration(to: .now).seconds
        }
        helper.report(
            "DeviceTracker.record, offline (every step)", offline, unit: "fixes/s", ceiling: raw, baseline: "raw SQLite"
        )

        try await driveEndToEnd(scratch.appendingPathComponent("server"), helper: helper)
    }

    /// Fixes 30 m and 20 s apart along a line near the sample places: every one is kept.
    static func fixes(_ count: Int) -> [LocationDoc] {
        (0..<count).map { i in
            LocationDoc(
                id: String(format: "fix-%06d", i),
                coordinate: Coordinate(lon: -122.2 - Double(i % 2000) * 0.00034, lat: 37.45 + Double(i / 2000) * 0.001),
                timestamp: 1_700_000_000_000 + Double(i) * 20_000, username: "bench", background: false,
                sessionID: "bench")
        }
    }

    static func samplePlaces() throws -> [PlaceDoc] {
        try ServerResources.samplePlaces().enumerated().compactMap { i, json in
            guard var place = PlaceDoc(json: json) else { return nil }
            place.id = "place-\(i)"
            return place
        }
    }

    /// The Freeway Drive at maximum speed (8 m noise) against `lt serve` in a child process.
    func driveEndToEnd(_ directory: URL, helper: Bench) async throws {
        let server = try ChildServer(directory: directory)
        defer { server.stop() }
        let client = TrackerClient(baseURL: "http://127.0.0.1:\(server.appPort)")
        var drive = SimulatedDrive(route: try ShippedData.route("freeway-drive"))
        drive.noise = 8
        let steps = drive.steps()
        var driveTimes: [Double] = [], consolidatedTimes: [Double] = []
        var kept = 0
        for run in 0..<max(1, drives) {
            let user = "driver\(run)"
            try await client.register(username: user, password: "pw-\(user)")
            let credentials = try await client.login(username: user, password: "pw-\(user)")
            let store = try LocalStore(
                directory: directory.deletingLastPathComponent().appendingPathComponent("phone-\(run)"))
            let start = ContinuousClock.now
            let tracker = try await DeviceTracker(client: client, credentials: credentials, store: store)
            await tracker.start(near: steps[0].fix.coordinate)
            var ids: Set<String> = []
            for step in steps {
                if let id = try await tracker.record(step.fix).id { ids.insert(id) }
            }
            let (_, pending) = try await tracker.finish()
            guard pending == 0 else { throw ValidationError("\(pending) fixes were not pushed") }
            driveTimes.append(start.duration(to: .now).seconds)
            // Until every kept fix is in lt_locations_all (the server consolidates on its own).
            while try await server.missing(Set(ids.map { "\(user):\($0)" }), from: "lt_locations_all") > 0 {
                guard start.duration(to: .now) < .seconds(120) else {
                    throw ValidationError("fixes not consolidated within 120 s")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            consolidatedTimes.append(start.duration(to: .now).seconds)
            kept = ids.count
        }
        let median = { (values: [Double]) in values.sorted()[values.count / 2] }
        print(
            "Freeway Drive, \(steps.count) fixes (\(Int(drive.duration / 60)) min of route time), \(kept) kept, maximum speed:"
        )
        helper.report("  drive: every fix handled, all kept ones pushed", median(driveTimes) * 1000, unit: "ms")
        helper.report("  until all are in lt_locations_all", median(consolidatedTimes) * 1000, unit: "ms")
        helper.report("  fixes handled per second (drive)", Double(steps.count) / median(driveTimes), unit: "fixes/s")
    }
}

/// `lt serve` as a child process on ephemeral ports: the `lt` built beside `lt-bench`
/// (`swift build -c release` builds both).
final class ChildServer: Sendable {
    let process: Process
    let port: Int
    let appPort: Int
    static let admin = "bench:bench-password"

    init(directory: URL) throws {
        let process = Process()
        let bench = URL(fileURLWithPath: Bundle.main.executablePath ?? ProcessInfo.processInfo.arguments[0])
        let lt = bench.deletingLastPathComponent().appendingPathComponent("lt")
        guard FileManager.default.isExecutableFile(atPath: lt.path) else {
            throw ValidationError("\(lt.path) not found: build lt too (swift build -c release --product lt)")
        }
        process.executableURL = lt
        process.arguments = [
            "serve", "--data", directory.path, "--db-port", "0", "--port", "0", "--admin", ChildServer.admin,
            "--log-level", "error",
            "--max-registrations-per-hour", "1000000000",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = "", port = 0, appPort = 0
        while port == 0 || appPort == 0 {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { process.terminate(); throw ValidationError("lt serve did not start") }
            text += String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n") {
                guard let value = line.split(separator: ":").last.flatMap({ Int($0) }) else { continue }
                if line.contains("database API") { port = value }
                if line.contains("application API") { appPort = value }
            }
        }
        self.process = process
        self.port = port
        self.appPort = appPort
    }

    /// How many of `ids` the database lacks.
    func missing(_ ids: Set<String>, from db: String) async throws -> Int {
        let client = try Bench.Client(
            base: "http://127.0.0.1:\(port)",
            authorization: "Basic " + Data(ChildServer.admin.utf8).base64EncodedString())
        let body = try await client.send(
            "POST", "/\(db)/_all_docs", json: ["keys": .array(ids.sorted().map(JSON.string))], expect: 200)
        return (try JSON.parse(body))["rows"]?.arrayValue?.filter {
            $0["error"] != nil || $0["value"]?["deleted"] == true
        }.count ?? ids.count
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
