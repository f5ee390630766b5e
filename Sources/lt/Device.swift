import ArgumentParser
import CommandSupport
import CouchJSON
import CouchProtocol
import Foundation
import Logging
import TrackerApp
import TrackerKit

/// `lt device`: a Location Tracker device in a terminal, keeping its state in a directory as a
/// phone keeps its app data (credentials in a 0600 file, the local databases, the server).
struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Run a Location Tracker device: register, log in, drive a route, import and export tracks, log out (state kept in --state).",
        subcommands: [
            Register.self, Login.self, Status.self, Sync.self, Drive.self, Import.self, Export.self, Logout.self,
        ])

    struct StateOptions: ParsableArguments {
        @Option(help: "The device's state directory (credentials, local databases, server).")
        var state: String = "./lt-device"

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var trust: TrustOptions

        var directory: URL { URL(fileURLWithPath: state, isDirectory: true) }
        var credentials: FileCredentialStore {
            FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
        }
        var settingsURL: URL { directory.appendingPathComponent("device.json") }

        func store() throws -> LocalStore { try LocalStore(directory: directory.appendingPathComponent("store")) }

        /// The server this device talks to, from its settings.
        func server() throws -> String {
            guard let data = try? Data(contentsOf: settingsURL),
                let server = (try? JSON.parse(Array(data)))?["server"]?.stringValue
            else {
                throw CommandFailure(
                    "No device in \(state): run `lt device register` or `lt device login` with --server first")
            }
            return server
        }

        func remember(server: String) throws {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data(JSON.object(["server": .string(server)]).bytes).write(to: settingsURL)
        }

        /// The stored login (and `--ca-file` trusted, for what comes next: syncing); an error
        /// telling how to get one when there is none.
        func loggedIn() throws -> Credentials {
            try trust.apply()
            guard let credentials = try self.credentials.load() else {
                throw CommandFailure(
                    "The device in \(state) is not logged in: run `lt device register` or `lt device login` first")
            }
            return credentials
        }

        func report(_ object: JSONObject, text: String) {
            print(json ? JSON.object(object).text : text)
        }
    }

    struct Account: ParsableArguments {
        @Option(help: "The server's application API, e.g. http://127.0.0.1:8080 (kept in the state directory).")
        var server: String?

        @Option(help: "User name.")
        var username: String

        @Option(help: "Password (only its hash is kept on the server; the device keeps none).")
        var password: String
    }

    /// Logs in and keeps what the login returned.
    static func login(_ state: StateOptions, _ account: Account, register: Bool) async throws {
        let server = try account.server ?? state.server()
        try state.trust.apply()
        let client = TrackerClient(baseURL: server)
        do {
            if register { try await client.register(username: account.username, password: account.password) }
            let credentials = try await client.login(
                username: account.username, password: account.password,
                device: ProcessInfo.processInfo.hostName)
            try state.remember(server: server)
            try state.credentials.save(credentials)
            _ = try state.store()
            state.report(
                [
                    "ok": true, "username": .string(credentials.username),
                    "database": .string(credentials.databaseName),
                    "host": .string(credentials.databaseHost), "api_key": .string(credentials.apiKey),
                ],
                text:
                    "\(register ? "registered and logged in" : "logged in") as \(credentials.username); locations go to \(credentials.databaseName) on \(credentials.databaseHost)"
            )
        } catch let failure as TrackerKitError where failure.isServerAnswer {
            throw CommandFailure("The server answered \(failure)")
        } catch let untrusted as CouchProtocolError where untrusted.isUntrustedPeer {
            throw CommandFailure("\(untrusted)")
        }
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register a user, then log this device in.")
        @OptionGroup var state: StateOptions
        @OptionGroup var account: Account
        func run() async throws { try await Device.login(state, account, register: true) }
    }

    struct Login: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Log this device in (a fresh API key for it).")
        @OptionGroup var state: StateOptions
        @OptionGroup var account: Account
        func run() async throws { try await Device.login(state, account, register: false) }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Who the device is, and what it holds locally (works offline).")
        @OptionGroup var state: StateOptions
        func run() async throws {
            let credentials = try state.credentials.load()
            let store = try state.store()
            let locations = try await store.recentLocations(limit: Int.max).count
            let places = try await store.allPlaces().count
            let pending = try await store.pendingPush()
            var object: JSONObject = [
                "logged_in": .bool(credentials != nil), "locations": .int(locations), "places": .int(places),
                "pending": .int(pending),
            ]
            if let server = try? state.server() { object["server"] = .string(server) }
            if let credentials {
                object["username"] = .string(credentials.username)
                object["database"] = .string(credentials.databaseName)
            }
            let who = credentials.map { "logged in as \($0.username) (\($0.databaseName))" } ?? "logged out"
            state.report(
                object,
                text: "\(who); \(plural(locations, "location")) (\(pending) not pushed yet) and "
                    + "\(plural(places, "place")) stored on the device")
        }
    }

    struct Logout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log out: the device's credentials and local data go.")
        @OptionGroup var state: StateOptions
        func run() async throws {
            try state.credentials.delete()
            try await state.store().wipe()
            state.report(["ok": true], text: "logged out; local data removed")
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Write the device's own locations, oldest first, to standard output (GPX: a track segment per UTC day)."
        )
        @OptionGroup var state: StateOptions
        @Option(help: "geojson, csv or gpx.")
        var format: String = "geojson"

        func run() async throws {
            guard let export = ExportFormat(rawValue: format) else {
                throw ValidationError(
                    "--format must be \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            // The store gives them in the order they were recorded; an imported older track comes later.
            let locations = try await state.store().recentLocations(limit: Int.max).enumerated()
                .sorted { ($0.element.timestamp, $0.offset) < ($1.element.timestamp, $1.offset) }.map(\.element)
            var writer = ExportWriter(export)
            var out = writer.header
            for location in locations {
                out += writer.append(
                    user: location.username, time: location.timestamp,
                    record: export.record(
                        location.json, location.coordinate, location.timestamp, owner: location.username,
                        id: location.json["_id"]?.stringValue ?? ""))
            }
            out += writer.footer
            FileHandle.standardOutput.write(Data(out))
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Store a recorded track (GPX, GeoJSON or OwnTracks JSON) as this device's locations, then push them.",
            discussion: "Importing the same file again adds nothing: each position's id comes from its time and place.")
        @OptionGroup var state: StateOptions

        @Argument(help: "A .gpx, .geojson/.json or OwnTracks (.json, recorder .rec) file.")
        var file: String

        @Option(help: "gpx, geojson or owntracks (default: from the extension and content).")
        var format: String?

        @Flag(help: "Keep only what the app's location filter would have kept (accuracy, 15 m, 15 s).")
        var filter = false

        @Flag(help: "Store on the device only; push later.")
        var noPush = false

        func run() async throws {
            ProcessSetup.bootstrapLogging(level: .error)
            let credentials = try state.loggedIn()
            var chosen: TrackFile.Format?
            if let format {
                guard let known = TrackFile.Format(rawValue: format) else {
                    throw ValidationError(
                        "--format must be \(TrackFile.Format.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                chosen = known
            }
            let points: [TrackPoint]
            do {
                let url = URL(fileURLWithPath: file)
                points =
                    try chosen.map { try TrackFile.read(Data(contentsOf: url), format: $0) }
                    ?? TrackFile.read(contentsOf: url)
            } catch let failure as TrackerKitError {
                throw CommandFailure("\(file): \(failure)")
            }
            let store = try state.store()
            let session = "import-" + UUID().uuidString.lowercased()
            var monitor = LocationMonitor()
            var locations: [LocationDoc] = []
            var rejected = 0
            for point in points {
                let time = point.time ?? Date()
                if filter {
                    let fix = LocationFix(
                        coordinate: point.coordinate, horizontalAccuracy: point.accuracy ?? 0, timestamp: time)
                    guard monitor.consider(fix, inBackground: false) == .accepted else { rejected += 1; continue }
                }
                var location = LocationDoc(
                    coordinate: point.coordinate, timestamp: (time.timeIntervalSince1970 * 1000).rounded(),
                    username: credentials.username, background: false, sessionID: session)
                location.id = LocationDoc.importedID(location)
                locations.append(location)
            }
            let added = try await store.saveNew(locations)
            let sync = SyncManager(local: store, server: credentials.serverDatabase)
            if !noPush { await sync.pushNow() }
            let pushed = await sync.written[.push] ?? 0
            let pending = try await sync.pendingPush()
            let syncStatus = await sync.status
            state.report(
                [
                    "read": .int(points.count), "imported": .int(added), "already_there": .int(locations.count - added),
                    "rejected": .int(rejected), "pushed": .int(pushed), "pending": .int(pending),
                    "sync": .string(syncStatus.description),
                ],
                text:
                    "\(file): \(points.count) positions read, \(added) imported, \(locations.count - added) already on the device"
                    + (filter ? ", \(rejected) left out by the location filter" : "")
                    + "; pushed \(pushed), \(pending) still only on the device"
                    + (noPush ? "" : " (sync \(syncStatus))"))
        }
    }

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Pull this user's locations from the server and push what the device recorded; --continuous keeps following until Ctrl-C."
        )
        @OptionGroup var state: StateOptions

        @Flag(help: "Keep both directions running, following changes as they happen (until interrupted).")
        var continuous = false

        func run() async throws {
            ProcessSetup.bootstrapLogging(level: .error)
            let credentials = try state.loggedIn()
            let store = try state.store()
            let json = state.json
            let sync = SyncManager(local: store, server: credentials.serverDatabase) { status in
                if !json { FileHandle.standardError.write(Data("sync: \(status)\n".utf8)) }
            }
            if continuous {
                await sync.startContinuous()
                // Ctrl-C stops it cleanly: both replications checkpoint first.
                signal(SIGINT, SIG_IGN)
                let (interrupted, continuation) = AsyncStream.makeStream(of: Void.self)
                let interrupt = DispatchSource.makeSignalSource(signal: SIGINT)
                interrupt.setEventHandler { continuation.finish() }
                interrupt.resume()
                defer { interrupt.cancel() }
                for await _ in interrupted {}
                await sync.stopContinuous()
            } else {
                await sync.request(.pull)
                await sync.pushNow()
            }
            let written = await sync.written
            let pending = try await store.pendingPush()
            let status = await sync.status
            state.report(
                [
                    "pulled": .int(written[.pull] ?? 0), "pushed": .int(written[.push] ?? 0), "pending": .int(pending),
                    "sync": .string(status.description),
                ],
                text:
                    "pulled \(written[.pull] ?? 0), pushed \(written[.push] ?? 0); \(pending) still only on the device (sync \(status))"
            )
            if case .idle = status {} else { throw ExitCode(3) }
        }
    }
}
