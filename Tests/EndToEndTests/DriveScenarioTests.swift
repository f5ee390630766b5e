import CouchJSON
import NIOHTTP1
import Foundation
import Geo
import LTTestSupport
import Testing
import TrackerKit

/// `lt device drive` against real `lt serve` processes: the issue's scenario end to end.
@Suite("Freeway Drive", .serialized, .timeLimit(.minutes(3)))
struct DriveScenarioTests {
    @Test("Freeway Drive with two offline windows, a background period and a server killed and restarted mid-drive: every kept fix in the user's database and lt_locations_all exactly once, places near each equal to brute force")
    func freewayDrive() async throws {
        let directory = try TemporaryDirectory("lt-drive")
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("server")
        var server = try TestServer(dataDirectory: data)
        let ports = (database: server.port, app: server.appPort)
        defer { server.stop() }
        let state = directory.url.appendingPathComponent("phone").path
        let trace = directory.url.appendingPathComponent("trace.jsonl")
        #expect(try server.registerDevice(state: state, username: "driver") == 0)

        // 48.5 minutes of route time at 250x: about 12 s, so the server is back (and the device has
        // pulled its region again) well before the second offline window even on a loaded machine.
        let drive = Process()
        drive.executableURL = TestServer.binary
        drive.arguments = ["device", "drive", "--state", state, "--speed", "250x", "--offline", "10m-15m,30m-34m", "--background", "20m-26m",
                           "--noise", "8m", "--seed", "7", "--trace", trace.path, "--json"]
        let output = Pipe()
        drive.standardOutput = output
        drive.standardError = FileHandle.nullDevice
        try drive.run()

        // Once the drive is 16 minutes in (online, foreground), the server dies and comes back.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, drive.isRunning, (try Self.traceLines(trace).last?["elapsed"]?.doubleValue ?? 0) < 16 * 60 {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(drive.isRunning, "the drive should still be running when the server is killed")
        server.kill()
        try await Task.sleep(for: .milliseconds(500))
        server = try TestServer(dataDirectory: data, ports: ports)
        let summaryData = output.fileHandleForReading.readDataToEndOfFile()
        drive.waitUntilExit()
        #expect(drive.terminationStatus == 0)
        let summary = try JSON.parse(Array(summaryData))
        let lines = try Self.traceLines(trace)

        // What the drive reports adds up.
        #expect(summary["fixes"]?.intValue == 2908)
        #expect(summary["accepted"]?.intValue == lines.count)
        #expect((summary["accepted"]?.intValue ?? 0) + (summary["rejected"]?.intValue ?? 0) == 2908)
        #expect(summary["pending"] == 0)
        #expect(summary["pushed"]?.intValue == lines.count)
        #expect((summary["server_failures"]?.intValue ?? 0) > 0, "fixes kept while the server was down find it unreachable")
        #expect(summary["places_seen"]?.intValue == 50)
        #expect(lines.contains { $0["online"] == false } && lines.allSatisfy { $0["online"] == true || $0["places_source"] == "device" })
        #expect(lines.contains { $0["background"] == true })
        // Kept fixes follow the original rules: more than 15 s apart, and 100 m apart in the
        // background; back in the foreground, the next fix counts as a first.
        for (a, b) in zip(lines, lines.dropFirst()) where !(a["background"] == true && b["background"] == false) {
            #expect(b["elapsed"]!.doubleValue! - a["elapsed"]!.doubleValue! > 15)
            if b["background"] == true {
                let from = Coordinate(lon: a["lon"]!.doubleValue!, lat: a["lat"]!.doubleValue!)
                #expect(Sphere.distance(from, Coordinate(lon: b["lon"]!.doubleValue!, lat: b["lat"]!.doubleValue!)) >= 100)
            }
        }

        // Every kept fix is in the user's database and in lt_locations_all, once.
        let ids = lines.compactMap { $0["id"]?.stringValue }
        #expect(Set(ids).count == ids.count)
        let userDocs = try await Self.locationIDs(server, "lt_locations_user_driver")
        #expect(userDocs.sorted() == ids.sorted())
        var everyone: [String] = []
        for _ in 0..<300 {
            everyone = try await Self.locationIDs(server, "lt_locations_all")
            if everyone.count >= ids.count { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(everyone.sorted() == ids.map { "driver:" + $0 }.sorted())

        // Places near each fix: the brute-force answer over the sample places.
        let places = try await server.request(.GET, "/lt_places/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
        let positions: [(id: String, coordinate: Coordinate)] = places.compactMap { row in
            guard let doc = row["doc"], let place = PlaceDoc(json: doc), let id = place.id else { return nil }
            return (id, place.coordinate)
        }
        #expect(positions.count == 50)
        for line in lines {
            let fix = Coordinate(lon: line["lon"]!.doubleValue!, lat: line["lat"]!.doubleValue!)
            var expected: Set<String> = []
            for place in positions where Sphere.distance(fix, place.coordinate) <= OfflinePlaces.defaultRadius { expected.insert(place.id) }
            let rows: [JSON] = line["places"]?.arrayValue ?? []
            let reportedIDs: [String] = rows.compactMap { $0["id"]?.stringValue }
            let distances: [Double] = rows.compactMap { $0["distance"]?.doubleValue }
            #expect(line["complete"] == true)
            #expect(Set(reportedIDs) == expected && reportedIDs.count == expected.count, "places near fix \(line["id"]?.text ?? "") (\(line["places_source"]?.text ?? ""))")
            for (id, distance) in zip(reportedIDs, distances) {
                let truth = positions.first { $0.id == id }.map { Sphere.distance(fix, $0.coordinate) } ?? -1
                #expect(abs(truth - distance) < 0.01)
            }
            // Nearest first (equal distances within a centimetre may come in either order).
            for (a, b) in zip(distances, distances.dropFirst()) { #expect(a <= b + 0.01) }
        }
    }

    @Test("A drive along a GPX route keeps the route's own times; bad routes and options are clear errors")
    func gpxRoute() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory("lt-drive-gpx")
        defer { directory.cleanup() }
        let state = directory.url.appendingPathComponent("phone").path
        #expect(try server.registerDevice(state: state, username: "gina") == 0)
        // Three points two minutes apart, about 1 km apart: 241 one-second fixes.
        let gpx = """
            <gpx version="1.1"><trk><trkseg>
            <trkpt lat="37.4900" lon="-122.3000"><time>2024-05-01T10:00:00Z</time></trkpt>
            <trkpt lat="37.4990" lon="-122.3000"><time>2024-05-01T10:02:00Z</time></trkpt>
            <trkpt lat="37.4990" lon="-122.2887"><time>2024-05-01T10:04:00Z</time></trkpt>
            </trkseg></trk></gpx>
            """
        let route = directory.url.appendingPathComponent("walk.gpx")
        try Data(gpx.utf8).write(to: route)
        let drive = try TestServer.runLT(["device", "drive", "--state", state, "--route", route.path, "--speed", "max", "--noise", "0m", "--json"])
        #expect(drive.status == 0)
        let summary = try JSON.parse(Array(drive.output.utf8))
        #expect(summary["fixes"] == 241 && summary["route_seconds"] == 240)
        // Exact positions, 7.5–8 m a second: a fix kept every 16 s (more than 15 s, more than 15 m).
        #expect(summary["accepted"] == 16 && summary["pending"] == 0 && summary["pushed"] == 16)
        #expect(drive.errors.isEmpty, "nothing but the JSON with --json: \(drive.errors)")
        // Piped without --json: plain progress lines on standard error, a tenth of the route each.
        let again = try TestServer.runLT(["device", "drive", "--state", state, "--route", route.path, "--speed", "max", "--noise", "0m"])
        let progress = again.errors.split(separator: "\n").filter { $0.contains(" kept ") && $0.contains(" pending ") }
        #expect(again.status == 0 && progress.count >= 10 && progress.first?.hasPrefix("0:00/4:00 online") == true && !again.errors.contains("\u{1B}"),
                "\(again.errors)")
        let bad = directory.url.appendingPathComponent("bad.gpx")
        try Data("<gpx><trk></trk></gpx>".utf8).write(to: bad)
        #expect(try TestServer.runLT(["device", "drive", "--state", state, "--route", bad.path]).status != 0)
        #expect(try TestServer.runLT(["device", "drive", "--state", state, "--speed", "fast"]).status != 0)
        #expect(try TestServer.runLT(["device", "drive", "--state", state, "--offline", "15m-10m"]).status != 0)
    }

    static func traceLines(_ url: URL) throws -> [JSON] {
        guard let data = try? Data(contentsOf: url) else { return [] }
        // The last line may be half written while the drive runs.
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
    }

    /// Location documents (not design documents) in a database.
    static func locationIDs(_ server: TestServer, _ db: String) async throws -> [String] {
        let rows = try await server.request(.GET, "/\(db)/_all_docs").json["rows"]?.arrayValue ?? []
        return rows.compactMap { $0["id"]?.stringValue }.filter { !$0.hasPrefix("_design/") }
    }
}
