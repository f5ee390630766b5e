import ArgumentParser
import AsyncHTTPClient
import CommandSupport
import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPServing
import LTServer
import NIOCore
import NIOHTTP1

/// `lt doctor`: checks this build, a data directory and the server running on it (or at a
/// URL), and says what to do about each finding.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check this lt, a data directory and the server running on it, and say what to do about each finding.",
        discussion: """
            Checked: this lt's build (JavaScript engine, memory allocator, SQLite); the data directory (writable, \
            server.json private, its databases and their size, free disk space); and the server running on it, asked \
            through <data>/control.sock (no password needed: the socket is its owner's only), or any server at --url with \
            an admin's credentials: its versions, open-file limit against its open databases and connections, JavaScript, \
            allocator, consolidation backlog, failing replications and disk space. Without a running server the open-file \
            limit is checked against the --max-open-databases that lt serve would start with here (LT_MAX_OPEN_DATABASES, \
            the --config file's max-open-databases). \
            Exit status: 1 when something needs fixing (a problem), 0 otherwise (warnings included).
            """)

    @Option(help: "The data directory (or LT_DATA, or the configuration file's `data`; default ./lt-data).")
    var data: String?

    @Option(
        help:
            "Check the server at this database API URL with an admin's credentials, e.g. http://admin:secret@127.0.0.1:5984 (or LT_DB_URL), instead of the one running on the data directory."
    )
    var url: String?

    @Option(help: "lt serve's YAML configuration file (or LT_CONFIG): its data directory and max-open-databases.")
    var config: String?

    @Flag(help: "Print one JSON object: every finding with its check, level, message and advice.")
    var json = false

    func run() async throws {
        let settings = try ServeSettings(configPath: config)
        let directory = URL(
            fileURLWithPath: settings.string("data", flag: data, default: "./lt-data")!, isDirectory: true
        ).standardizedFileURL
        var findings = [
            DoctorChecks.build(
                javascript: ServerResources.javascriptQueryServer() != nil, allocator: Allocator.description)
        ]
        let remote = url ?? ProcessInfo.processInfo.environment["LT_DB_URL"].flatMap { $0.isEmpty ? nil : $0 }
        // A server elsewhere: this machine's directory only when asked for.
        let local = remote == nil || data != nil
        let files = local ? DataDirectory.look(at: directory) : DataDirectory(path: directory.path)
        if local { findings += DoctorChecks.dataDirectory(files, space: DiskSpace(of: directory.path)) }

        var checked = "data directory \(directory.path)"
        let socket = ControlSocket.path(in: directory)
        var server: ServerFacts?
        if let remote {
            let client = try AdminClient(remote, environment: "LT_DB_URL")
            checked = "server \(client.server.serverURL)"
            do {
                server = try await ServerFacts.read { path in
                    let reply = try await client.server.send(
                        .GET, path, fromServerRoot: true, accept: "*/*", timeout: .seconds(30))
                    return (reply.status, reply.body)
                }
            } catch {
                findings.append(
                    DoctorChecks.unanswered(
                        client.server.serverURL, error,
                        advice: "is it running and reachable from here, and are the URL's credentials a server admin's?"
                    ))
            }
        } else if FileManager.default.fileExists(atPath: socket), access(socket, R_OK | W_OK) != 0 {
            findings.append(DoctorChecks.foreignSocket(socket))
        } else {
            switch await ServerFacts.throughControlSocket(of: directory) {
            case let .answered(facts):
                checked += " and the server running on it"
                server = facts
            case let .failed(error):
                findings.append(
                    DoctorChecks.unanswered(
                        "the server on \(directory.path)", error, advice: "its log says why (journalctl -u lt)"))
            case .absent:
                let budget = ServerResources.openDatabaseBudget()
                let configured = try settings.int("max-open-databases", flag: nil, default: budget)
                let perListener = try settings.int(
                    "max-connections", flag: nil, default: ConnectionLimits().maxConnections)
                let listeners = try settings.bool("database-only", flag: false) ? 1 : 2
                findings.append(
                    DoctorChecks.noServer(
                        directory: directory.path, held: files.exists && DataDirectory.isHeld(directory)))
                findings.append(
                    DoctorChecks.openFiles(
                        limit: ServerResources.openFileLimit, maxOpen: configured, isDefault: configured == budget,
                        databases: files.databases.count, connections: perListener.multipliedSaturating(by: listeners)))
            }
        }
        if let server {
            findings += DoctorChecks.server(
                server, thisVersion: LocationTrackerServer.version, databases: local ? files.databases.count : nil,
                largestDatabase: local ? files.largest : 0)
        }
        report(findings, where: checked)
        if findings.contains(where: { $0.level == .problem }) { throw ExitCode.failure }
    }

    func report(_ findings: [Finding], where place: String) {
        let problems = findings.filter { $0.level == .problem }.count
        let warnings = findings.filter { $0.level == .warning }.count
        if json {
            let object: JSON = [
                "checked": .string(place), "problems": .int(problems), "warnings": .int(warnings),
                "findings": .array(findings.map(\.json)),
            ]
            print(object.text)
            return
        }
        var lines = ["lt doctor: \(place)"]
        for finding in findings {
            lines.append(
                "  " + finding.level.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)
                    + finding.check.padding(toLength: 15, withPad: " ", startingAt: 0) + finding.message)
            if let advice = finding.advice { lines.append(String(repeating: " ", count: 26) + "→ " + advice) }
        }
        if problems + warnings == 0 {
            lines.append("nothing to do")
        } else {
            let counts = [
                problems > 0 ? plural(problems, "problem") : nil, warnings > 0 ? plural(warnings, "warning") : nil,
            ].compactMap { $0 }
            lines.append(counts.joined(separator: ", ") + ": see the advice (→) above")
        }
        print(lines.joined(separator: "\n"))
    }
}

/// One thing `lt doctor` found: which check, how bad, what, and what to do.
struct Finding: Equatable {
    enum Level: String { case ok, note, warning, problem }

    var check: String
    var level: Level
    var message: String
    var advice: String?

    var json: JSON {
        [
            "check": .string(check), "level": .string(level.rawValue), "message": .string(message),
            "advice": advice.map(JSON.string) ?? .null,
        ]
    }
}

/// What a data directory holds, looked at without opening a database.
struct DataDirectory {
    var exists = false
    var writable = false
    /// Whether `server.json` can be read by other users than its owner (it holds the admins'
    /// password hashes and the session secret).
    var settingsReadableByOthers = false
    /// Databases and their size on disk (file, write-ahead log and its index).
    var databases: [String: Int64] = [:]
    var path = ""

    var size: Int64 { databases.values.reduce(0, +) }
    var largest: Int64 { databases.values.max() ?? 0 }

    static func look(at directory: URL) -> DataDirectory {
        var found = DataDirectory(path: directory.path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else { return found }
        found.exists = true
        found.writable = access(directory.path, W_OK) == 0
        let settings = directory.appendingPathComponent("server.json").path
        if let mode = (try? FileManager.default.attributesOfItem(atPath: settings))?[.posixPermissions] as? Int {
            found.settingsReadableByOthers = mode & 0o077 != 0
        }
        let databases = directory.appendingPathComponent("dbs")
        for file in (try? FileManager.default.contentsOfDirectory(atPath: databases.path)) ?? [] {
            guard let name = DatabaseStore.databaseName(ofFile: file) else { continue }
            let size =
                (try? FileManager.default.attributesOfItem(atPath: databases.appendingPathComponent(file).path))?[.size]
                as? NSNumber
            found.databases[name, default: 0] += size?.int64Value ?? 0
        }
        return found
    }

    /// Whether another process holds the directory (`lt serve`, `lt backup`): its lock is taken
    /// and let go at once when free.
    static func isHeld(_ directory: URL) -> Bool {
        access(directory.path, W_OK) == 0 && (try? DirectoryLock(directory: directory)) == nil
    }
}

/// What a running server says about itself: its welcome, its metrics (absent from a server
/// that has none lt can read) and its replication jobs.
struct ServerFacts {
    var welcome: JSON
    var samples: [PrometheusSample]?
    var jobs: [JSON]
    var documents: [JSON]

    /// Asks through `get` (a path from the server's root → status and body).
    static func read(_ get: (String) async throws -> (Int, [UInt8])) async throws -> ServerFacts {
        func json(_ path: String) async throws -> JSON {
            let (status, body) = try await get(path)
            let parsed = (try? JSON.parse(body)) ?? .null
            guard (200..<300).contains(status) else {
                throw CommandFailure(
                    "GET \(path): \(status) \(parsed["reason"]?.stringValue ?? parsed["error"]?.stringValue ?? "")")
            }
            return parsed
        }
        let welcome = try await json("/")
        let (status, metrics) = try await get("/_node/_local/_prometheus")
        let samples = status == 200 ? PrometheusSample.parse(String(decoding: metrics, as: UTF8.self)) : nil
        return ServerFacts(
            welcome: welcome, samples: samples, jobs: try await json("/_scheduler/jobs")["jobs"]?.arrayValue ?? [],
            documents: try await json("/_scheduler/docs")["docs"]?.arrayValue ?? [])
    }

    /// What the control socket of a data directory gave.
    enum LocalAnswer {
        case answered(ServerFacts)
        /// A server answered, with an error.
        case failed(any Error)
        /// No server answers there (no socket, one left by a process that ended, or a server
        /// from before lt doctor).
        case absent
    }

    /// The facts of the server running on `directory`, through its control socket.
    static func throughControlSocket(of directory: URL) async -> LocalAnswer {
        let socket = ControlSocket.path(in: directory)
        guard FileManager.default.fileExists(atPath: socket) else { return .absent }
        do {
            return .answered(
                try await read { (path: String) async throws -> (Int, [UInt8]) in
                    let target = "/server" + (path == "/" ? "" : path)
                    let response = try await ControlSocketClient.request(
                        socket, .GET, target, deadline: NIODeadline.now() + .seconds(30))
                    let body = try await response.body.collect(upTo: 64 << 20)
                    return (Int(response.status.code), Array(buffer: body))
                })
        } catch let failure as CommandFailure {
            return .failed(failure)
        } catch {
            return .absent
        }
    }
}

/// The checks, each from facts already gathered, so each can be tried on made-up ones.
enum DoctorChecks {
    static let mebibyte: Int64 = 1 << 20

    static func build(javascript: Bool, allocator: String) -> Finding {
        var parts = ["lt \(LocationTrackerServer.version)", "SQLite \(DatabaseStore.sqliteVersion)"]
        parts.append(javascript ? "JavaScript (Duktape)" : "no JavaScript engine")
        parts.append(shortName(ofAllocator: allocator))
        if !javascript {
            return Finding(
                check: "this lt", level: .warning,
                message: parts.joined(separator: ", ") + ": design documents' JavaScript answers 501 and "
                    + "writes to databases with JavaScript validation are refused",
                advice: "install Debian's duktape-dev (scripts/install-deps.sh) and build lt again")
        }
        if !allocator.hasPrefix("jemalloc") {
            return Finding(
                check: "this lt", level: .warning,
                message: parts.joined(separator: ", ") + ": more CPU and memory per open database than with jemalloc",
                advice: "install Debian's libjemalloc-dev (scripts/install-deps.sh) and build lt again")
        }
        return Finding(check: "this lt", level: .ok, message: parts.joined(separator: ", "))
    }

    static func dataDirectory(_ files: DataDirectory, space: DiskSpace?) -> [Finding] {
        guard files.exists else {
            return [
                Finding(
                    check: "data", level: .note,
                    message: "no data directory at \(files.path) (lt serve creates it on first start)")
            ]
        }
        var findings: [Finding] = []
        if !files.writable {
            findings.append(
                Finding(
                    check: "data", level: .problem, message: "\(files.path) is not writable by this user",
                    advice:
                        "run lt as the user the server runs as (sudo -u lt lt doctor …), or give that user the directory (chown -R)"
                ))
        }
        if files.settingsReadableByOthers {
            findings.append(
                Finding(
                    check: "data", level: .problem,
                    message:
                        "server.json (the admins' password hashes and the session secret) can be read by other users",
                    advice: "chmod 600 \(files.path)/server.json"))
        }
        findings.append(
            Finding(
                check: "data", level: .ok,
                message:
                    "\(plural(files.databases.count, "database")), \(ProgressLine.size(files.size)) in \(files.path)"))
        if let space { findings.append(disk(space, largestDatabase: files.largest)) }
        return findings
    }

    /// Free space: SQLite stops writing when the disk is full, and compacting a database
    /// writes a copy of it beside the original.
    static func disk(_ space: DiskSpace, largestDatabase: Int64) -> Finding {
        let share = space.total > 0 ? Double(space.free) / Double(space.total) : 1
        let message =
            "\(ProgressLine.size(space.free)) free of \(ProgressLine.size(space.total)) (\(Int((share * 100).rounded()))%)"
        let advice =
            "free space on that file system, or move the data to a larger one (lt backup, then lt restore there)"
        if space.free < 256 * mebibyte || space.free < largestDatabase {
            return Finding(
                check: "disk", level: .problem,
                message: message
                    + ": writes fail when it runs out, and compacting the largest database (\(ProgressLine.size(largestDatabase))) needs room for a copy of it",
                advice: advice)
        }
        if share < 0.1 || space.free < 1024 * mebibyte {
            return Finding(
                check: "disk", level: .warning, message: message + ": less than 10% or 1 GiB left", advice: advice)
        }
        return Finding(check: "disk", level: .ok, message: message)
    }

    /// A server that was found but could not be asked, and why.
    static func unanswered(_ server: String, _ error: any Error, advice: String) -> Finding {
        Finding(check: "server", level: .problem, message: "\(server) could not be asked: \(error)", advice: advice)
    }

    /// The control socket is there but not this user's (it is its server's user's only).
    static func foreignSocket(_ socket: String) -> Finding {
        Finding(
            check: "server", level: .warning,
            message: "\(socket) belongs to another user, so the server on it was not asked",
            advice:
                "run lt doctor as the user the server runs as (sudo -u lt lt doctor --data …), or give --url with an admin's credentials"
        )
    }

    static func noServer(directory: String, held: Bool) -> Finding {
        if held {
            return Finding(
                check: "server", level: .warning,
                message:
                    "a process holds \(directory) but its control socket does not answer (an lt serve from before lt doctor, or lt backup/restore at work)",
                advice: "check it over HTTP instead: lt doctor --url http://ADMIN:PASSWORD@127.0.0.1:5984")
        }
        return Finding(check: "server", level: .note, message: "no server is running on \(directory)")
    }

    /// Descriptors: two per open database (file and write-ahead log), one per connection, and
    /// some for everything else (lt serve refuses to start with fewer than 256 spare).
    static func openFiles(
        limit: Int, maxOpen: Int, isDefault: Bool, databases: Int, connections: Int? = nil, open: Int? = nil,
        evictions: Int? = nil
    ) -> Finding {
        let forDatabases = maxOpen.multipliedSaturating(by: 2)
        let raise =
            "raise the open-file limit (LimitNOFILE=65536 in the systemd unit, as deploy/lt.service has; ulimit -n in a shell)"
        if forDatabases > limit - 256 {
            return Finding(
                check: "open files", level: .problem,
                message:
                    "max-open-databases \(maxOpen) needs \(forDatabases) descriptors, more than the open-file limit \(limit) leaves (lt serve refuses to start)",
                advice: raise + ", or lower --max-open-databases to \(max(64, (limit - 256) / 2))")
        }
        var message = "limit \(limit)"
        if let open { message += ", \(open) in use" }
        if let connections {
            let needed = forDatabases.addingSaturating(connections)
            message +=
                "; needs up to \(needed == .max ? "more" : String(needed)) (2 for each of \(maxOpen) open databases, 1 for each of \(connections) connections)"
            if needed > limit {
                return Finding(
                    check: "open files", level: .warning,
                    message: message
                        + ", more than the limit: at full load new connections or databases would fail to open (EMFILE)",
                    advice: raise + ", or lower --max-open-databases or --max-connections")
            }
        }
        if connections == nil {
            message += "; \(forDatabases) for \(maxOpen) open databases (2 each), the rest for connections"
        }
        if let open, Double(open) > Double(limit) * 0.8 {
            return Finding(
                check: "open files", level: .warning, message: message + ": more than 80% of the limit in use now",
                advice: raise)
        }
        if isDefault, maxOpen < 2048, databases > maxOpen {
            let reopened = evictions.map { "; databases closed to make room so far: \($0)" } ?? ""
            return Finding(
                check: "open files", level: .warning,
                message: message
                    + ": \(plural(databases, "database")) but the limit allows only \(maxOpen) open at once, so busy ones are closed and reopened\(reopened)",
                advice: raise + "; with 65536, lt keeps 2048 open")
        }
        return Finding(check: "open files", level: .ok, message: message)
    }

    static func server(_ facts: ServerFacts, thisVersion: String, databases: Int?, largestDatabase: Int64) -> [Finding]
    {
        var findings: [Finding] = []
        let api = facts.welcome["version"]?.stringValue ?? "?"
        guard facts.welcome["vendor"]?["name"]?.stringValue == "LocationTracker" else {
            let vendor = facts.welcome["vendor"]?["name"]?.stringValue ?? "an unknown vendor"
            findings.append(
                Finding(
                    check: "server", level: .note,
                    message: "CouchDB \(api) from \(vendor), not lt: only its replications are checked"))
            return findings + replications(facts.jobs, facts.documents)
        }
        let version = facts.welcome["vendor"]?["version"]?.stringValue ?? "?"
        let samples = facts.samples ?? []
        let info = samples.first { $0.name == ApplicationMetric.buildInfo.rawValue }?.labels ?? [:]
        var about = "lt \(version) (CouchDB \(api) API)"
        if let mode = info["mode"] { about += ", \(mode)" }
        if let uptime = samples.first(where: { $0.name == HTTPMetric.uptime.rawValue })?.value {
            about += ", up \(duration(uptime))"
        }
        if version != thisVersion {
            findings.append(
                Finding(
                    check: "server", level: .warning, message: about + "; this command is lt \(thisVersion)",
                    advice: "restart the server to run the installed lt (systemctl restart lt)"))
        } else {
            findings.append(Finding(check: "server", level: .ok, message: about))
        }
        guard facts.samples != nil else {
            findings.append(
                Finding(
                    check: "metrics", level: .warning,
                    message: "its metrics could not be read, so limits, consolidation and disk were not checked"))
            return findings + replications(facts.jobs, facts.documents)
        }
        if info["javascript"] == "off" {
            findings.append(
                Finding(
                    check: "JavaScript", level: .warning,
                    message:
                        "off: design documents' JavaScript answers 501 and writes to databases with JavaScript validation are refused",
                    advice: "start it with --javascript on (LT_JAVASCRIPT) on an lt built with Duktape"))
        } else if info["javascript"] == "on" {
            findings.append(Finding(check: "JavaScript", level: .ok, message: "on"))
        }
        if let allocator = info["allocator"] {
            findings.append(
                allocator.hasPrefix("jemalloc")
                    ? Finding(check: "allocator", level: .ok, message: shortName(ofAllocator: allocator))
                    : Finding(
                        check: "allocator", level: .warning,
                        message:
                            "\(shortName(ofAllocator: allocator)): more CPU and memory per open database than with jemalloc",
                        advice:
                            "install Debian's libjemalloc-dev (scripts/install-deps.sh), build lt again and restart the server"
                    ))
        }
        let limit = count(samples.sum(HTTPMetric.maxFileDescriptors.rawValue))
        let maxOpen = count(samples.sum(CouchMetric.maxOpenDatabases.rawValue))
        if limit > 0, maxOpen > 0 {
            let connections =
                samples.contains { $0.name == ApplicationMetric.maxConnections.rawValue }
                ? count(samples.sum(ApplicationMetric.maxConnections.rawValue)) : nil
            findings.append(
                openFiles(
                    limit: limit, maxOpen: maxOpen, isDefault: true, databases: databases ?? 0,
                    connections: connections,
                    open: count(samples.sum(HTTPMetric.openFileDescriptors.rawValue)),
                    evictions: count(samples.sum(CouchMetric.databaseEvictions.rawValue))))
        }
        if samples.contains(where: { $0.name == ApplicationMetric.consolidationBacklog.rawValue }) {
            findings.append(
                consolidation(
                    sweep: count(samples.sum(ApplicationMetric.consolidationBacklog.rawValue, ["kind": "sweep"])),
                    retrying: count(samples.sum(ApplicationMetric.consolidationBacklog.rawValue, ["kind": "retrying"])),
                    unreadable: count(samples.sum(ApplicationMetric.consolidationUnreadable.rawValue)),
                    refused: count(samples.sum(ApplicationMetric.consolidationRefused.rawValue))))
        }
        let nodes = samples.filter { $0.name == ApplicationMetric.couchDBNodeUp.rawValue }.compactMap { sample in
            sample.labels["node"].map { ($0, sample.value > 0) }
        }
        let withdrawn = Dictionary(
            samples.filter { $0.name == ApplicationMetric.couchDBNodeWithdrawn.rawValue && $0.value > 0 }.compactMap {
                sample in
                sample.labels["node"].map { ($0, sample.labels["status"] ?? "not 200") }
            }, uniquingKeysWith: { first, _ in first })
        if !nodes.isEmpty { findings.append(clusterNodes(nodes, withdrawn: withdrawn)) }
        if databases == nil, samples.contains(where: { $0.name == ApplicationMetric.dataFreeBytes.rawValue }) {
            findings.append(
                disk(
                    DiskSpace(
                        free: Int64(count(samples.sum(ApplicationMetric.dataFreeBytes.rawValue))),
                        total: Int64(count(samples.sum(ApplicationMetric.dataFilesystemBytes.rawValue)))),
                    largestDatabase: largestDatabase))
        }
        return findings + replications(facts.jobs, facts.documents)
    }

    /// Cluster mode: the CouchDB nodes the server was given, which of them answer, and which
    /// ask for no requests (`withdrawn`: node → what its `/_up` says, e.g. `maintenance_mode`).
    static func clusterNodes(_ nodes: [(node: String, up: Bool)], withdrawn: [String: String] = [:]) -> Finding {
        let down = nodes.filter { !$0.up }.map(\.node).sorted()
        let resting = down.filter { withdrawn[$0] != nil }
        let gone = down.filter { withdrawn[$0] == nil }
        let named = down.map { node in withdrawn[node].map { "\(node) (its /_up answers \($0))" } ?? node }
        let others = nodes.count - down.count == 1 ? "node" : "\(nodes.count - down.count) nodes"
        if down.count == nodes.count {
            return Finding(
                check: "cluster", level: .problem,
                message: "no CouchDB node answers (\(named.joined(separator: ", "))): the application answers 503",
                advice:
                    "start the nodes again (or fix the network to them); the server goes on by itself when one answers")
        }
        if !gone.isEmpty {
            let alsoResting = resting.isEmpty ? "" : " (and \(resting.joined(separator: ", ")) asks for no requests)"
            return Finding(
                check: "cluster", level: .problem,
                message:
                    "CouchDB \(gone.count == 1 ? "node" : "nodes") \(gone.joined(separator: ", ")) \(gone.count == 1 ? "does" : "do") not answer\(alsoResting); the application goes on through the other \(others)",
                advice:
                    "start it again: requests go to the other nodes meanwhile, and its shards catch up by CouchDB's internal replication"
            )
        }
        if !resting.isEmpty {
            return Finding(
                check: "cluster", level: .warning,
                message:
                    "CouchDB \(resting.count == 1 ? "node" : "nodes") \(named.joined(separator: ", ")) \(resting.count == 1 ? "asks" : "ask") for no requests; the application goes on through the other \(others)",
                advice:
                    "a node in maintenance mode takes requests again when its [couchdb] maintenance_mode is false (once internal replication has refilled it: no internal_replication_jobs in /_node/_local/_system); one still seeding, by itself"
            )
        }
        return Finding(check: "cluster", level: .ok, message: "\(plural(nodes.count, "CouchDB node")), all answering")
    }

    static func consolidation(sweep: Int, retrying: Int, unreadable: Int, refused: Int) -> Finding {
        let list = "lt status --app http://ADMIN:PASSWORD@HOST:8080 lists them with the reasons"
        if unreadable > 0 || refused > 0 {
            var what: [String] = []
            if unreadable > 0 { what.append("\(plural(unreadable, "user database")) cannot be read") }
            if refused > 0 { what.append("lt_locations_all refuses \(plural(refused, "location"))") }
            return Finding(
                check: "consolidation", level: .problem,
                message: what.joined(separator: "; ") + ": analysts do not see those locations",
                advice: list + "; they are tried again with growing waits")
        }
        if retrying > 0 {
            return Finding(
                check: "consolidation", level: .warning,
                message: "\(plural(retrying, "user database")) waiting to be read again after a failure",
                advice: list)
        }
        if sweep > 0 {
            return Finding(
                check: "consolidation", level: .ok,
                message: "the start-up sweep has \(plural(sweep, "user database")) still to look at")
        }
        return Finding(check: "consolidation", level: .ok, message: "nothing waiting, nothing refused")
    }

    /// Replications that fail, from the scheduler: jobs (`_replicate` ones too) and
    /// `_replicator` documents, each once.
    static func replications(_ jobs: [JSON], _ documents: [JSON]) -> [Finding] {
        let failing: Set<String> = ["crashing", "failed", "error"]
        var seen = Set<String>()
        var findings: [Finding] = []
        let jobsByID = Dictionary(
            jobs.compactMap { job in job["id"]?.stringValue.map { ($0, job) } }, uniquingKeysWith: { first, _ in first }
        )
        for entry in documents + jobs {
            let id = entry["id"]?.stringValue ?? entry["doc_id"]?.stringValue ?? "?"
            guard let state = entry["state"]?.stringValue, failing.contains(state), seen.insert(id).inserted else {
                continue
            }
            let name = entry["doc_id"]?.stringValue.map { "_replicator/\($0)" } ?? "job \(id)"
            // The job names a local target that the document's entry masks.
            func end(_ key: String) -> String {
                let shown = entry[key]?.stringValue ?? "?"
                return shown.hasPrefix("*") ? jobsByID[id]?[key]?.stringValue ?? shown : shown
            }
            let source = end("source"), target = end("target")
            let reason =
                entry["info"]?["error"]?.stringValue ?? entry["info"]?.stringValue ?? entry["error"]?.stringValue
                ?? "no reason given"
            // CouchDB's are Erlang terms over several lines.
            let error = reason.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            let count = entry["error_count"]?.intValue.map { ", \(plural($0, "error")) so far" } ?? ""
            findings.append(
                Finding(
                    check: "replication", level: .problem,
                    message: "\(name) (\(source) → \(target)) is \(state): \(error)\(count)",
                    advice: advice(forReplicationError: error, state: state)))
        }
        if findings.isEmpty {
            let running = Set((documents + jobs).compactMap { $0["id"]?.stringValue }).count
            findings.append(
                Finding(
                    check: "replication", level: .ok,
                    message: running == 0
                        ? "no replication jobs" : "\(plural(running, "replication job")), none failing"))
        }
        return findings
    }

    static func advice(forReplicationError error: String, state: String) -> String {
        let text = error.lowercased()
        let retry =
            state == "failed"
            ? "; a failed replication is not retried: fix it, then delete and create it again"
            : "; it is retried with growing waits"
        if text.contains("certificate") || text.contains("tls") || text.contains("ssl") {
            return "the peer's certificate is not trusted: give its CA with --ca-file (LT_CA_FILE) and restart" + retry
        }
        if text.contains("401") || text.contains("unauthorized") || text.contains("403") || text.contains("forbidden") {
            return "the peer refuses the credentials in the replication's URL: correct them in the _replicator document"
                + retry
        }
        if text.contains("404") || text.contains("not_found") || text.contains("not found")
            || text.contains("does not exist")
        {
            return "a database is missing: create it, or set \"create_target\": true" + retry
        }
        if text.contains("refused") || text.contains("resolve") || text.contains("unreachable")
            || text.contains("timed out") || text.contains("timeout")
            || text.contains("connect") || text.contains("reset")
        {
            return
                "the peer cannot be reached from this machine: is it running, and its host and port right? (curl its URL from here)"
                + retry
        }
        return "GET /_scheduler/docs (or /_scheduler/jobs) on the server shows its history" + retry
    }

    /// "jemalloc 5.3.0" of "jemalloc 5.3.0-0-g54eaed1d… (background_thread:true,…)".
    static func shortName(ofAllocator allocator: String) -> String {
        String(allocator.prefix { $0 != "-" && $0 != "(" }).trimmingCharacters(in: .whitespaces)
    }

    /// A count from a server's metrics (any number a peer sent): whole, 0 when not a number, at most 2^53.
    static func count(_ value: Double) -> Int {
        value.isFinite ? Int(value.rounded(.down).clamped(to: 0...9_007_199_254_740_992)) : 0
    }

    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down).clamped(to: 0...1e12))
        if whole < 120 { return "\(whole) s" }
        if whole < 7200 { return "\(whole / 60) min" }
        if whole < 172_800 { return "\(whole / 3600) h" }
        return "\(whole / 86400) days"
    }
}
