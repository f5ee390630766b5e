import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Geo
import Logging
import TrackerKit

extension Device {
    /// `lt device drive`: a route replayed as GPS fixes through the app's logic (`DeviceTracker`).
    struct Drive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Drive a route: GPS fixes with noise through the location filter, stored, synced, places looked up.",
            discussion: """
                Route time runs one fix per second (routes without times at --vehicle-speed); --speed \
                compresses it. Windows are route times, as 10m-15m or 90s-2m30s, comma-separated. \
                Offline, nothing reaches the server: places come from the device's copy of its \
                region, and what was recorded is pushed when the network is back.
                """)

        @OptionGroup var state: StateOptions

        @Option(help: "freeway-drive (built in: Cupertino to San Francisco), or a GPX or GeoJSON file.")
        var route = "freeway-drive"

        @Option(help: "How much faster than route time: 20x, 1x, or max (no waiting).")
        var speed = "20x"

        @Option(help: "Windows of route time without a network, e.g. 10m-15m,30m-32m.")
        var offline: String?

        @Option(help: "Windows of route time with the app in the background, e.g. 30m-40m.")
        var background: String?

        @Option(help: "Typical GPS error, e.g. 8m (0m: exact positions).")
        var noise = "5m"

        @Option(help: "Seed of the noise: the same seed, the same fixes.")
        var seed: UInt64 = 1

        @Option(help: "Metres per second along routes without times.")
        var vehicleSpeed: Double = 25

        @Option(help: "Write one JSON line per kept fix (position, online, places near it) to this file.")
        var trace: String?

        func validate() throws {
            if speedFactor == nil { throw ValidationError("--speed is a factor like 20x or 1x, or max") }
            if noiseMetres == nil {
                throw ValidationError("--noise is a distance like 8m (or a plain number of metres)")
            }
            if vehicleSpeed <= 0 { throw ValidationError("--vehicle-speed must be positive") }
        }

        /// nil: invalid; .infinity: max.
        var speedFactor: Double? {
            if speed == "max" { return .infinity }
            let number = speed.hasSuffix("x") ? String(speed.dropLast()) : speed
            return Double(number).flatMap { $0 > 0 ? $0 : nil }
        }

        var noiseMetres: Double? {
            let number = noise.hasSuffix("m") ? String(noise.dropLast()) : noise
            return Double(number).flatMap { $0 >= 0 ? $0 : nil }
        }

        func run() async throws {
            ProcessSetup.bootstrapLogging(level: .error)
            let credentials = try state.loggedIn()
            let points = try ShippedData.route(route)
            var drive = SimulatedDrive(route: points)
            drive.vehicleSpeed = vehicleSpeed
            drive.noise = noiseMetres ?? 0
            drive.seed = seed
            drive.start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            let offlineWindows = try offline.map(SimulatedDrive.windows) ?? []
            let backgroundWindows = try background.map(SimulatedDrive.windows) ?? []
            let steps = drive.steps()

            let tracker = try await DeviceTracker(
                client: TrackerClient(baseURL: try state.server()), credentials: credentials, store: try state.store())
            let traceFile = try trace.map(Drive.openTrace)
            defer { try? traceFile?.close() }
            // Progress on standard error: a line redrawn in place on a terminal; piped, a plain
            // line at each tenth of the route and when the network goes or comes back; none with --json.
            let live = !state.json && isatty(STDERR_FILENO) == 1
            let plain = !state.json && !live
            var lastTenth = -1, wasOnline = true
            let factor = speedFactor ?? .infinity
            let clock = ContinuousClock()
            let began = clock.now
            var lastDraw = clock.now
            var offlineFixes = 0, backgroundFixes = 0

            await tracker.setOnline(!offlineWindows.contains { $0.contains(0) }, near: steps.first?.fix.coordinate)
            await tracker.start(near: steps.first?.fix.coordinate)
            for step in steps {
                if factor.isFinite {
                    let due = began + .milliseconds(Int64(step.elapsed / factor * 1000))
                    if due > clock.now { try await Task.sleep(until: due, clock: clock) }
                }
                let online = !offlineWindows.contains { $0.contains(step.elapsed) }
                let inBackground = backgroundWindows.contains { $0.contains(step.elapsed) }
                await tracker.setOnline(online, near: step.fix.coordinate)
                await tracker.setBackground(inBackground, near: step.fix.coordinate)
                if !online { offlineFixes += 1 }
                if inBackground { backgroundFixes += 1 }
                let outcome = try await tracker.record(step.fix)
                if let traceFile {
                    try Drive.trace(outcome, step: step, online: online, background: inBackground, to: traceFile)
                }
                if live, clock.now - lastDraw > .milliseconds(100) {
                    lastDraw = clock.now
                    await Drive.draw(tracker, step: step, of: drive.duration, online: online, background: inBackground)
                }
                let tenth = Int(step.elapsed / max(1, drive.duration) * 10)
                if plain, tenth > lastTenth || online != wasOnline {
                    (lastTenth, wasOnline) = (max(lastTenth, tenth), online)
                    let text = await Drive.progress(
                        tracker, step: step, of: drive.duration, online: online, background: inBackground)
                    FileHandle.standardError.write(Data((text + "\n").utf8))
                }
            }
            if live {
                await Drive.draw(
                    tracker, step: steps.last, of: drive.duration, online: true, background: false, finishing: true)
            }
            let (pushed, pending) = try await tracker.finish()
            if live { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
            try await report(
                tracker, drive: drive, pushed: pushed, pending: pending, offlineFixes: offlineFixes,
                backgroundFixes: backgroundFixes, wallSeconds: (clock.now - began).seconds)
        }

        /// The drive's summary: fixes kept and rejected (by reason), pushed and pending, places
        /// answers, sync state; as JSON with `--json`.
        func report(
            _ tracker: DeviceTracker, drive: SimulatedDrive, pushed: Int, pending: Int, offlineFixes: Int,
            backgroundFixes: Int, wallSeconds: Double
        ) async throws {
            let counters = await tracker.counters
            let syncStatus = await tracker.sync.status
            let summary: JSONObject = [
                "route": .string(route), "fixes": .int(counters.fixes), "accepted": .int(counters.accepted),
                "rejected": .int(counters.rejectedTotal),
                "rejected_by": .object(
                    JSONObject(counters.rejected.map { ($0.key.rawValue, JSON.int($0.value)) }.sorted { $0.0 < $1.0 })),
                "pushed": .int(pushed), "pending": .int(pending), "places_seen": .int(counters.placesSeen.count),
                "places_answers": ["server": .int(counters.serverAnswers), "device": .int(counters.deviceAnswers)],
                "server_failures": .int(counters.serverFailures), "region_pulls": .int(await tracker.places.pulls),
                "offline_fixes": .int(offlineFixes), "background_fixes": .int(backgroundFixes),
                "route_seconds": .double(drive.duration), "wall_seconds": .double(wallSeconds),
                "session_id": .string(tracker.sessionID), "sync": .string(syncStatus.description),
            ]
            state.report(
                summary,
                text: """
                    drove \(route): \(counters.fixes) fixes in \(Drive.minutes(drive.duration)) of route time (\(String(format: "%.1f", wallSeconds)) s)
                    kept \(counters.accepted), rejected \(counters.rejectedTotal) (\(counters.rejected.map { "\($0.value) \($0.key.rawValue)" }.sorted().joined(separator: ", ")))
                    pushed \(pushed), \(pending) still only on the device; sync \(syncStatus)
                    \(counters.placesSeen.count) places seen: \(counters.serverAnswers) answers from the server, \(counters.deviceAnswers) from the device; \(await tracker.places.pulls) region pulls
                    """)
        }

        /// One line of `--trace`: where the fix was kept, online or not, and the places answer.
        static func trace(
            _ outcome: DeviceTracker.Outcome, step: SimulatedDrive.Step, online: Bool, background: Bool,
            to file: FileHandle
        ) throws {
            guard let location = outcome.location else { return }
            let line: JSON = [
                "id": .string(outcome.id ?? ""), "elapsed": .double(step.elapsed),
                "lat": .double(location.coordinate.lat),
                "lon": .double(location.coordinate.lon), "timestamp": .double(location.timestamp),
                "online": .bool(online),
                "background": .bool(background), "places_source": .string(outcome.placesSource.rawValue),
                "complete": .bool(outcome.complete),
                "places": .array(
                    outcome.places.map { ["id": .string($0.place.id ?? ""), "distance": .double($0.distance)] }),
            ]
            try file.write(contentsOf: Data((line.text + "\n").utf8))
        }

        static func openTrace(_ path: String) throws -> FileHandle {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            guard let handle = FileHandle(forWritingAtPath: path) else { throw CommandFailure("cannot write \(path)") }
            return handle
        }

        static func draw(
            _ tracker: DeviceTracker, step: SimulatedDrive.Step?, of duration: TimeInterval, online: Bool,
            background: Bool, finishing: Bool = false
        ) async {
            let text = await progress(
                tracker, step: step, of: duration, online: online, background: background, finishing: finishing)
            FileHandle.standardError.write(Data(("\r\u{1B}[2K" + text).utf8))
        }

        /// Where the drive is: route time, network, fixes kept and rejected, what waits to be pushed, places seen.
        static func progress(
            _ tracker: DeviceTracker, step: SimulatedDrive.Step?, of duration: TimeInterval, online: Bool,
            background: Bool,
            finishing: Bool = false
        ) async -> String {
            let counters = await tracker.counters
            let pending = (try? await tracker.sync.pendingPush()) ?? 0
            let elapsed = step?.elapsed ?? 0
            return "\(finishing ? "finishing" : Drive.minutes(elapsed) + "/" + Drive.minutes(duration))"
                + " \(online ? "online" : "OFFLINE")\(background ? " background" : "")"
                + "  kept \(counters.accepted) rejected \(counters.rejectedTotal)  pending \(pending)"
                + "  places near: \(counters.placesSeen.count) seen"
        }

        static func minutes(_ seconds: TimeInterval) -> String {
            String(format: "%d:%02d", Int(seconds) / 60, Int(seconds) % 60)
        }
    }
}
