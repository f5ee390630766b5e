import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Logging

/// `lt-bench scale`: the Location Tracker application's own workload over HTTP, against `lt serve`
/// (started as its own process, the whole application, durable) and, with `--couchdb`, against
/// Apache CouchDB set up as the original design had it: a `_users` document, a database, its
/// `_security` and geo design document for each user, and one continuous replication per user
/// into the consolidated database (`_replicator` documents). Then devices write locations at a
/// steady rate into their users' databases, as independent devices would (open loop: a slow
/// server does not slow the arrivals down), while a prober asks `/api/places` and another runs
/// a device's push cycle; the figures are registration, write latency, how long each location
/// took to reach the consolidated database, those probes' latencies, the server's CPU per
/// write, its memory and its disk per user. With `--mode single-db` lt keeps everyone's
/// locations in one shared database, which devices write through lt's database port.
struct ScaleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Measure the application's registration, device writes and consolidation, lt beside Apache CouchDB.",
        discussion: """
            lt: the lt beside lt-bench (or --lt-binary) runs as its own process on a scratch directory, \
            with the whole application (registration, login, consolidation, places). CouchDB (--couchdb, \
            admin credentials): users, databases and replications are named scale-* and removed before and \
            after; its password iterations (chttpd_auth/iterations) are set to --password-iterations for the \
            run and put back. Both servers get the same iteration count, so registration measures everything \
            but the password hash.
            """)

    @OptionGroup var peers: PeerOptions

    @Option(help: "Registered users (each gets a database).")
    var users = 10_000

    @Option(help: "Devices writing (one per user, the first users).")
    var devices = 10_000

    @Option(help: "Location writes per second, over all devices.")
    var rate = 1_000

    @Option(help: "Seconds of writing.")
    var seconds = 60

    @Option(help: "Seconds to wait after the writes for the last locations to be consolidated.")
    var tail = 60

    @Option(help: "Clients registering users at once.")
    var registrationClients = 8

    @Option(help: "Connections the devices' writes share (each write carries its own device's credentials).")
    var writeConnections = 128

    @Option(help: "/api/places queries per second while the devices write (lt only: CouchDB 3 has no geo).")
    var placesRate = 20

    @Option(help: "Device push cycles per second while the devices write.")
    var syncRate = 5

    @Option(
        help:
            "PBKDF2 iterations for the users' passwords and keys on both servers (lowered so registration measures the rest)."
    )
    var passwordIterations = 10

    @Flag(
        help:
            "Also measure lt in cluster mode in front of that CouchDB (lt serve --couchdb): registration, login, places and consolidation by lt, the data and the devices' writes on CouchDB. Its users, keys and databases there are named scale-c* and removed before and after; copies stay in its lt_locations_all."
    )
    var cluster = false

    @Option(
        name: .customLong("couchdb-cluster"),
        help:
            "A CouchDB cluster's nodes with admin credentials, comma-separated: also measure lt in cluster mode given every node (lt serve --couchdb URL1,URL2,…), each node's CPU and memory reported; the original design's side is not run on it (--couchdb for that)."
    )
    var couchdbCluster: String?

    @Option(
        name: .customLong("couchdb-proxy"),
        help:
            "With --couchdb-cluster: the load balancer in front of the nodes (e.g. HAProxy), where devices write and the consolidated database is watched (default: the first node)."
    )
    var couchdbProxy: String?

    @Option(
        help:
            "Where lt keeps the users' locations, on every lt side: db-per-user (a private database each, consolidated into lt_locations_all) or single-db (one shared database, lt_locations_all_envoy, which devices write through lt's database port; the watcher reads that database, on the cluster in cluster mode). The original design's side (--couchdb) always has a database per user."
    )
    var mode: ScaleMode = .dbPerUser

    @Option(
        help:
            "Keep the registered users in this directory (lt's data) and on the cluster, so that a later run with the same directory registers only the users missing (registering 100,000 users on three CouchDB nodes sharing two cores would take four hours)."
    )
    var keep: String?

    @Flag(help: "With --couchdb-cluster: measure the cluster side only (lt alone is not run).")
    var clusterOnly = false

    @Flag(
        help: "A short run (1,000 users and devices, 200 writes/s for 10 s) to record figures in CI, not to judge by.")
    var quick = false

    @Option(help: "Also write the figures as JSON to this file.")
    var json: String?

    func validate() throws {
        guard !cluster || peers.couchdb != nil else { throw ValidationError("--cluster needs --couchdb") }
        guard couchdbProxy == nil || couchdbCluster != nil, !clusterOnly || couchdbCluster != nil else {
            throw ValidationError("--couchdb-proxy and --cluster-only go with --couchdb-cluster")
        }
        if let couchdbCluster {
            for url in ScaleBench.nodes(couchdbCluster) + [couchdbProxy].compactMap({ $0 }) {
                _ = try Bench.Target(url: url)
            }
        }
        guard (1...10_000_000).contains(users) else {
            throw ValidationError("--users must be between 1 and 10,000,000")
        }
        guard (1...users).contains(devices) else { throw ValidationError("--devices must be between 1 and --users") }
        guard (1...100_000).contains(rate), (1...3_600).contains(seconds), (0...3_600).contains(tail) else {
            throw ValidationError("--rate must be 1–100,000, --seconds 1–3,600, --tail 0–3,600")
        }
        // Each write has two timestamps kept in arrays of this length.
        guard rate * seconds <= 10_000_000 else {
            throw ValidationError("--rate × --seconds must be at most 10,000,000 writes")
        }
        guard (1...256).contains(registrationClients), (1...1_000).contains(writeConnections) else {
            throw ValidationError("--registration-clients must be 1–256 and --write-connections 1–1,000")
        }
        guard (0...1_000).contains(placesRate), (0...1_000).contains(syncRate),
            (1...10_000_000).contains(passwordIterations)
        else {
            throw ValidationError("--places-rate and --sync-rate must be 0–1,000, --password-iterations 1–10,000,000")
        }
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let plan =
            quick
            ? ScalePlan(
                users: 1_000, devices: 1_000, rate: 200, seconds: 10, tail: 30, placesRate: placesRate,
                syncRate: syncRate)
            : ScalePlan(
                users: users, devices: devices, rate: rate, seconds: seconds, tail: tail, placesRate: placesRate,
                syncRate: syncRate)
        let kept = keep.map { URL(fileURLWithPath: $0) }
        let scratch =
            kept ?? FileManager.default.temporaryDirectory.appendingPathComponent("lt-bench-scale-\(UUID().uuidString)")
        defer { if kept == nil { try? FileManager.default.removeItem(at: scratch) } }
        let binary = peers.lt.executable
        let admin = (user: "bench", password: "bench-password")
        let mode = mode
        let arguments = [
            "--password-iterations", String(passwordIterations), "--tiles", "none", "--mode", mode.rawValue,
        ]
        // Each side's servers start when its turn comes, so none loads the machine during another's.
        var starts: [(name: String, start: () async throws -> (ScaleSide, LTServeProcess?))] =
            clusterOnly
            ? []
            : [
                (
                    "lt",
                    {
                        let server = try await LTServeProcess.start(
                            binary: binary, directory: scratch.appendingPathComponent("lt"), admin: admin,
                            arguments: arguments)
                        return (
                            try ScaleSide.lt(
                                server, admin: admin, data: scratch.appendingPathComponent("lt/data"),
                                kept: kept != nil, mode: mode), server
                        )
                    }
                )
            ]
        if let couchdb = peers.couchdb {
            // CouchDB's password iterations are changed at its own turn, and put back after it.
            let iterations = passwordIterations
            starts.append(
                ("CouchDB", { (try await ScaleSide.couchDB(couchdb, peers: peers, iterations: iterations), nil) }))
            if cluster {
                starts.append(
                    (
                        "lt+CouchDB",
                        {
                            let couchDB = try await ScaleSide.couchDB(couchdb, peers: peers, iterations: nil)
                            let server = try await LTServeProcess.start(
                                binary: binary, directory: scratch.appendingPathComponent("cluster"), admin: admin,
                                arguments: arguments + ["--couchdb", couchdb])
                            return (
                                ScaleSide.cluster(
                                    server, couchDB: couchDB, data: scratch.appendingPathComponent("cluster/data"),
                                    mode: mode), server
                            )
                        }
                    ))
            }
        }
        if let couchdbCluster {
            let nodes = ScaleBench.nodes(couchdbCluster)
            let proxy = couchdbProxy
            // Devices are told the load balancer's address, without the admin's credentials; in
            // single-database mode they write through lt, which keeps each to their own documents.
            let deviceAddress = mode == .singleDB ? nil : try proxy.map { try Bench.Target(url: $0).base }
            starts.append(
                (
                    "lt+\(nodes.count) CouchDB nodes",
                    {
                        let server = try await LTServeProcess.start(
                            binary: binary, directory: scratch.appendingPathComponent("nodes"), admin: admin,
                            arguments: arguments + ["--couchdb", nodes.joined(separator: ",")]
                                + (deviceAddress.map { ["--device-couchdb", $0] } ?? []))
                        return (
                            try await ScaleSide.couchDBCluster(
                                server, nodes: nodes, proxy: proxy, data: scratch.appendingPathComponent("nodes/data"),
                                kept: kept != nil, mode: mode), server
                        )
                    }
                ))
        }
        print(
            """
            lt-bench scale: \(plan.users) users, \(plan.devices) devices writing \(plan.rate) locations/s for \(plan.seconds) s \
            over \(writeConnections) connections, /api/places \(plan.placesRate)/s, device push cycles \(plan.syncRate)/s; \
            lt in \(mode.rawValue) mode; PBKDF2 iterations \(passwordIterations) on both
            machine: \(ProcessInfo.processInfo.activeProcessorCount) cores; load average at the start: \(CompareHeader.loadAverage()); lt built with \(Allocator.description)
            """)
        var results: [[ScaleFigure: Double]] = []
        var sides: [ScaleSide] = []
        for (name, start) in starts {
            print("— \(name) —")
            let (side, server) = try await start()
            defer { server?.stop() }
            sides.append(side)
            if !side.kept { try await side.cleanUp() }
            let run = ScaleRun(
                side: side, plan: plan, registrationClients: registrationClients, writeConnections: writeConnections)
            do {
                results.append(try await run.measure())
            } catch {
                // Leave the server as it was found, then report.
                if !side.kept { try? await side.cleanUp() }
                try? await side.restore()
                throw error
            }
            if !side.kept { try await side.cleanUp() }
            try await side.restore()
        }
        var table = CompareTable(sides: sides.map(\.name))
        print("")
        table.printHeading()
        for figure in ScaleFigure.allCases {
            var row = CompareTable.Row(figure: figure.figure)
            for (side, values) in zip(sides, results) { row.values[side.name] = values[figure] }
            table.add(row)
        }
        try table.finish(json: json, context: ["plan": plan.json, "mode": .string(mode.rawValue)])
    }
}

extension ScaleBench {
    /// The node URLs of `--couchdb-cluster`.
    static func nodes(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// Where lt keeps users' locations in a scale run (`lt serve --mode`).
enum ScaleMode: String, Sendable, ExpressibleByArgument, CaseIterable {
    /// A private database per user, consolidated into `lt_locations_all`.
    case dbPerUser = "db-per-user"
    /// One shared database, `lt_locations_all_envoy`, each user in their own namespace.
    case singleDB = "single-db"

    /// The database where every user's locations end up, which the run's watcher follows.
    var consolidated: String { self == .singleDB ? "lt_locations_all_envoy" : "lt_locations_all" }
}

/// The sizes of one scale run.
struct ScalePlan: Sendable {
    let users: Int
    let devices: Int
    let rate: Int
    let seconds: Int
    let tail: Int
    let placesRate: Int
    let syncRate: Int

    var writes: Int { rate * seconds }

    var json: JSON {
        [
            "users": .int(users), "devices": .int(devices), "rate": .int(rate), "seconds": .int(seconds),
            "places_rate": .int(placesRate), "sync_rate": .int(syncRate),
        ]
    }
}

/// One server of a scale run, and how the application's steps are done on it.
struct ScaleSide: Sendable {
    enum Kind: Sendable {
        /// `lt serve`: registration and login through its application API.
        case lt(applicationPort: Int)
        /// Apache CouchDB, set up as the original design did through its own API.
        case couchDB(previousIterations: String?)
        /// `lt serve --couchdb` in front of Apache CouchDB (cluster mode): registration, login,
        /// places and consolidation by lt; the data, and the devices' writes, on CouchDB.
        case cluster(applicationPort: Int)
    }

    let name: String
    let kind: Kind
    /// Where devices write and the consolidated database is read.
    let target: Bench.Target
    /// The server's processes (lt and each CouchDB node in cluster mode), for their CPU and memory.
    let pids: [Int32]
    /// What each of `pids` is, for the per-process figures.
    var processNames: [String] = []
    /// The database every user's locations are consolidated into.
    let consolidated: String
    /// The servers' data directories, for their size on disk.
    let dataDirectories: [String]
    /// Whether the run's users stay for the next run (`--keep`): only missing ones are registered.
    var kept = false
    /// Where lt keeps the locations (the original design's CouchDB: a database per user).
    var mode = ScaleMode.dbPerUser
    /// Where devices write and push, when not at `target`: lt's database port in single-database
    /// mode in front of CouchDB (it keeps each device to its own documents of the shared database).
    var devicePort: Int?

    /// The application API's port, where lt has one.
    var applicationPort: Int? {
        switch kind {
        case let .lt(port), let .cluster(port): port
        case .couchDB: nil
        }
    }

    var host: String { URLComponents(string: target.base)?.host ?? "127.0.0.1" }
    var port: Int { URLComponents(string: target.base)?.port ?? 5984 }
    /// The port devices write to (on `host`).
    var writePort: Int { devicePort ?? port }

    static func lt(
        _ server: LTServeProcess, admin: (user: String, password: String), data: URL, kept: Bool, mode: ScaleMode
    ) throws -> ScaleSide {
        ScaleSide(
            name: "lt", kind: .lt(applicationPort: server.applicationPort ?? 0),
            target: Bench.Target(base: "http://127.0.0.1:\(server.port)", user: admin.user, password: admin.password),
            pids: [server.pid], processNames: ["lt"], consolidated: mode.consolidated, dataDirectories: [data.path],
            kept: kept, mode: mode)
    }

    /// lt in cluster mode given every node of a CouchDB cluster; devices write through `proxy`
    /// (or the first node) — through lt in single-database mode. Its processes: each node, the
    /// proxy when it runs here, and lt.
    static func couchDBCluster(
        _ server: LTServeProcess, nodes: [String], proxy: String?, data: URL, kept: Bool, mode: ScaleMode
    ) async throws -> ScaleSide {
        let target = try Bench.Target(url: proxy ?? nodes[0])
        var pids: [Int32] = []
        var names: [String] = []
        var directories: [String] = []
        for (i, url) in nodes.enumerated() {
            let node = try Bench.Target(url: url)
            guard let port = URLComponents(string: node.base)?.port, let pid = ServerProcessInfo.pid(listeningOn: port)
            else {
                throw ValidationError("cannot find the process listening on \(node.base)")
            }
            pids.append(pid)
            names.append("CouchDB node \(i + 1)")
            if let directory = try await databaseDirectory(node, pid: pid) { directories.append(directory) }
        }
        if let proxy, let port = URLComponents(string: proxy)?.port, let pid = ServerProcessInfo.pid(listeningOn: port)
        {
            pids.append(pid)
            names.append("load balancer")
        }
        return ScaleSide(
            name: "lt+\(nodes.count) CouchDB nodes", kind: .cluster(applicationPort: server.applicationPort ?? 0),
            target: target,
            pids: pids + [server.pid], processNames: names + ["lt"], consolidated: mode.consolidated,
            dataDirectories: directories + [data.path], kept: kept, mode: mode,
            devicePort: mode == .singleDB ? server.port : nil)
    }

    /// A CouchDB node's data directory (its `database_dir`, relative to its working directory unless absolute).
    static func databaseDirectory(_ target: Bench.Target, pid: Int32) async throws -> String? {
        let client = try Bench.Client(base: target.base, authorization: target.authorization)
        guard
            let configured = try? JSON.parse(
                try await client.send("GET", "/_node/_local/_config/couchdb/database_dir", expect: 200)
            ).stringValue
        else { return nil }
        if configured.hasPrefix("/") { return configured }
        return (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")).map {
            "\($0)/\(configured)"
        } ?? configured
    }

    /// lt in cluster mode in front of the CouchDB of `couchDB` (its own side, measured before).
    static func cluster(_ server: LTServeProcess, couchDB: ScaleSide, data: URL, mode: ScaleMode) -> ScaleSide {
        ScaleSide(
            name: "lt+CouchDB", kind: .cluster(applicationPort: server.applicationPort ?? 0), target: couchDB.target,
            pids: couchDB.pids + [server.pid], processNames: ["CouchDB", "lt"], consolidated: mode.consolidated,
            dataDirectories: couchDB.dataDirectories + [data.path], mode: mode,
            devicePort: mode == .singleDB ? server.port : nil)
    }

    /// CouchDB as the original design used it; with `iterations`, its password iterations are
    /// set for the run (put back by `restore`).
    static func couchDB(_ url: String, peers: PeerOptions, iterations: Int?) async throws -> ScaleSide {
        let target = try Bench.Target(url: url)
        let pid = try peers.couchdbProcess(target)
        let client = try Bench.Client(base: target.base, authorization: target.authorization)
        var previous: String?
        if let iterations {
            previous = try? JSON.parse(try await client.send("GET", Self.iterationsSetting, expect: 200)).stringValue
            try await client.send("PUT", Self.iterationsSetting, json: .string(String(iterations)), expect: 200)
        }
        let directory = try await databaseDirectory(target, pid: pid)
        return ScaleSide(
            name: "CouchDB", kind: .couchDB(previousIterations: previous), target: target, pids: [pid],
            processNames: ["CouchDB"],
            consolidated: "scale-locations-all", dataDirectories: directory.map { [$0] } ?? [])
    }

    var client: Bench.Client { get throws { try Bench.Client(base: target.base, authorization: target.authorization) } }

    /// The user names: this prefix and the user's number in seven digits.
    var userPrefix: String {
        switch kind {
        case .lt: "u"  // lt's rule: a letter first
        case .couchDB: "scale-u"
        // Each mode's users of their own: a user of one mode does not work in the other.
        case .cluster: mode == .singleDB ? "scale-s" : "scale-c"
        }
    }

    func userName(_ i: Int) -> String { userPrefix + String(format: "%07d", i) }

    /// User `i`'s database on CouchDB as the original design names it (under the run's prefix).
    func couchDBDatabase(_ i: Int) -> String { String(format: "scale-locations-user-u%07d", i) }

    /// Registers user `i` as the application does, on a connection of its own.
    func register(_ i: Int, app: BenchConnection?, database: BenchConnection) throws {
        let name = userName(i)
        switch kind {
        case .lt, .cluster:
            guard let app else { throw BenchConnection.Failure(description: "no application connection") }
            let reply = try app.send(
                "PUT", "/api/users/\(name)", authorization: "",
                body: JSON.object(["password": .string("password-\(i)")]).bytes)
            try Bench.Client.check(reply, 201, "PUT", "/api/users/\(name)")
        case .couchDB:
            let auth = target.authorization
            let db = couchDBDatabase(i)
            let steps: [(String, String, JSON?, Int)] = [
                (
                    "PUT", "/_users/org.couchdb.user:\(name)",
                    ["name": .string(name), "type": "user", "roles": [], "password": .string("password-\(i)")], 201
                ),
                ("PUT", "/\(db)", nil, 201),
                (
                    "PUT", "/\(db)/_design/points",
                    [
                        "language": "javascript",
                        "st_indexes": [
                            "pointidx": [
                                "index":
                                    "function(doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); } }"
                            ]
                        ],
                    ], 201
                ),
                (
                    "PUT", "/\(db)/_security",
                    [
                        "admins": ["names": [], "roles": ["_admin"]],
                        "members": ["names": [.string(name)], "roles": []],
                    ], 200
                ),
                (
                    "PUT", "/_replicator/\(name)",
                    [
                        "source": [
                            "url": .string("\(target.base)/\(db)"), "headers": ["Authorization": .string(auth)],
                        ],
                        "target": [
                            "url": .string("\(target.base)/\(consolidated)"),
                            "headers": ["Authorization": .string(auth)],
                        ],
                        "continuous": true,
                    ], 201
                ),
            ]
            for (method, path, body, status) in steps {
                // No body where none is due: CouchDB closes the connection after a request whose body it did not read.
                try Bench.Client.check(
                    try database.send(method, path, authorization: auth, body: body?.bytes), status, method, path)
            }
        }
    }

    /// A device's credentials (an `Authorization` header) and database, as the app obtains
    /// them: lt's login issues an API key; with CouchDB the device uses the user's own name
    /// and password.
    func device(_ i: Int, app: BenchConnection?) throws -> (authorization: String, database: String) {
        let name = userName(i)
        switch kind {
        case .lt, .cluster:
            guard let app else { throw BenchConnection.Failure(description: "no application connection") }
            let reply = try app.send(
                "POST", "/api/login", authorization: "",
                body: JSON.object(["username": .string(name), "password": .string("password-\(i)")]).bytes)
            try Bench.Client.check(reply, 200, "POST", "/api/login")
            let json = try JSON.parse(reply.body)
            guard let key = json["api_key"]?.stringValue, let secret = json["api_password"]?.stringValue,
                let db = json["location_db_name"]?.stringValue
            else {
                throw BenchConnection.Failure(description: "login answered without a key")
            }
            // The run writes where the login sends devices: the deployment's path, not a shortcut.
            if let address = json["location_db_host"]?.stringValue,
                let port = address.split(separator: ":").last.flatMap({ Int($0) }), port != writePort
            {
                throw BenchConnection.Failure(
                    description: "login hands devices \(address), but the run writes to port \(writePort)")
            }
            return ("Basic " + Data("\(key):\(secret)".utf8).base64EncodedString(), db)
        case .couchDB:
            return ("Basic " + Data("\(name):password-\(i)".utf8).base64EncodedString(), couchDBDatabase(i))
        }
    }

    /// The users an earlier run registered (with `--keep`), by index: those whose private
    /// database exists, or in single-database mode whose `lt_users` document does.
    func registeredUsers() async throws -> Set<Int> {
        if case .couchDB = kind { return [] }  // the original design's side starts afresh every run
        let prefix = mode == .singleDB ? userPrefix : "lt_locations_user_" + userPrefix
        let range = "startkey=\(Self.quoted(prefix))&endkey=\(Self.quoted(prefix + "\u{FFF0}"))"
        let names: [JSON]
        if mode == .singleDB {
            // lt makes lt_users when it starts.
            names =
                (try JSON.parse(try await client.send("GET", "/lt_users/_all_docs?\(range)", expect: 200))["rows"]?
                .arrayValue ?? []).compactMap { $0["id"] }
        } else {
            names = try JSON.parse(try await client.send("GET", "/_all_dbs?\(range)", expect: 200)).arrayValue ?? []
        }
        return Set(
            names.compactMap { $0.stringValue.flatMap { $0.hasPrefix(prefix) ? Int($0.dropFirst(prefix.count)) : nil } }
        )
    }

    /// Waits until lt's start-up sweep (its consolidator's first look at every user's database)
    /// is over — it has looked at `databases` at least, the users an earlier run kept — printing
    /// how far it is; the seconds waited, nil if there was nothing to wait for.
    func waitForSweep(databases: Int) async throws -> Double? {
        guard let applicationPort else { return nil }
        let client = try Bench.Client(base: "http://\(host):\(applicationPort)", authorization: target.authorization)
        let started = ContinuousClock.now
        var lastPrint = started
        while true {
            let status = try JSON.parse(try await client.send("GET", "/api/status", expect: 200))
            let remaining = status["consolidation"]?["backlog"]?["sweep_remaining"]?.intValue ?? 0
            let swept = status["consolidation"]?["databases_swept"]?.intValue ?? 0
            if remaining == 0, swept >= databases {
                let waited = started.duration(to: .now).seconds
                return waited < 1 ? nil : waited
            }
            if lastPrint.duration(to: .now) >= .seconds(10) {
                lastPrint = .now
                print("  waiting for lt's start-up sweep: \(remaining) databases to look at")
            }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// Removes the run's users, databases and replications from CouchDB (lt's own are in its
    /// scratch directory). Replications first, so that none is left copying into a database gone.
    func cleanUp() async throws {
        switch kind {
        case .lt: return
        case .cluster: return try await cleanUpCluster()
        case .couchDB: break
        }
        let client = try client
        for (database, prefix) in [("_replicator", "scale-"), ("_users", "org.couchdb.user:scale-")] {
            let query = "startkey=\(Self.quoted(prefix))&endkey=\(Self.quoted(prefix + "\u{FFF0}"))"
            let rows =
                try JSON.parse(try await client.send("GET", "/\(database)/_all_docs?\(query)", expect: 200))["rows"]?
                .arrayValue ?? []
            try await deleteDocuments(rows, from: database)
        }
        try await deleteDatabases(prefix: "scale-")
    }

    /// Removes what lt made on the cluster for the run's users: their databases, their API keys
    /// and their application documents (the copies in `lt_locations_all` stay; their ids carry
    /// the run's tag).
    func cleanUpCluster() async throws {
        let client = try client
        let keys =
            "startkey=\(Self.quoted("org.couchdb.user:key-"))&endkey=\(Self.quoted("org.couchdb.user:key-\u{FFF0}"))&include_docs=true"
        let keyRows =
            try JSON.parse(try await client.send("GET", "/_users/_all_docs?\(keys)", expect: 200))["rows"]?.arrayValue
            ?? []
        let users =
            "startkey=\(Self.quoted(userPrefix))&endkey=\(Self.quoted(userPrefix + "\u{FFF0}"))&include_docs=true"
        let userRows =
            (try? JSON.parse(try await client.send("GET", "/lt_users/_all_docs?\(users)", expect: 200))["rows"]?
                .arrayValue) ?? []
        // Only the run's users' keys: the cluster may hold others.
        try await deleteDocuments(
            keyRows.filter { $0["doc"]?["lt_user"]?.stringValue?.hasPrefix(userPrefix) == true }, from: "_users")
        try await deleteDocuments(userRows, from: "lt_users")
        try await deleteDatabases(prefix: "lt_locations_user_" + userPrefix)
    }

    /// Deletes the documents of `_all_docs` rows, a thousand per `_bulk_docs`.
    func deleteDocuments(_ rows: [JSON], from database: String) async throws {
        let client = try client
        let deletions = rows.compactMap { row -> JSON? in
            guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"]?.stringValue else { return nil }
            return ["_id": .string(id), "_rev": .string(rev), "_deleted": true]
        }
        for batch in stride(from: 0, to: deletions.count, by: 1_000) {
            try await client.send(
                "POST", "/\(database)/_bulk_docs",
                json: ["docs": .array(Array(deletions[batch..<min(deletions.count, batch + 1_000)]))], expect: 201)
        }
    }

    /// Deletes every database whose name starts with `prefix`, eight at a time.
    func deleteDatabases(prefix: String) async throws {
        let client = try client
        let range = "startkey=\(Self.quoted(prefix))&endkey=\(Self.quoted(prefix + "\u{FFF0}"))"
        let names = (try JSON.parse(try await client.send("GET", "/_all_dbs?\(range)", expect: 200)).arrayValue ?? [])
            .compactMap(\.stringValue).filter { $0.hasPrefix(prefix) }
        let authorization = target.authorization
        try await client.concurrently(8, names.count) { connection, i in
            let reply = try connection.send("DELETE", "/\(names[i])", authorization: authorization)
            guard reply.status == 200 || reply.status == 202 || reply.status == 404 else {
                try Bench.Client.check(reply, 200, "DELETE", "/\(names[i])"); return
            }
        }
    }

    static let iterationsSetting = "/_node/_local/_config/chttpd_auth/iterations"

    /// Puts back what the run changed in the server's configuration.
    func restore() async throws {
        guard case let .couchDB(previous) = kind else { return }
        if let previous {
            try await client.send("PUT", Self.iterationsSetting, json: .string(previous), expect: 200)
        } else {
            try await client.send("DELETE", Self.iterationsSetting, expect: 200)
        }
    }

    /// The data directories' size in bytes (`du`), nil if unknown.
    func diskBytes() -> Double? {
        guard !dataDirectories.isEmpty else { return nil }
        let du = Process()
        du.executableURL = URL(fileURLWithPath: "/usr/bin/du")
        du.arguments = ["-sk", "-c"] + dataDirectories
        let pipe = Pipe()
        du.standardOutput = pipe
        du.standardError = FileHandle.nullDevice
        guard (try? du.run()) != nil else { return nil }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        du.waitUntilExit()
        // The last line is the total.
        return String(decoding: output, as: UTF8.self).split(separator: "\n").last?.split(separator: "\t").first.flatMap
        { Double($0) }.map { $0 * 1024 }
    }

    /// A JSON string as a query value (`startkey="…"`).
    static func quoted(_ text: String) -> String { CompareWorkload.queryValue(JSON.string(text).text) }
}
