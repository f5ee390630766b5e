import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import Foundation
import Logging

/// `lt-bench population`: one node with very many registered users (a million, each with a
/// database of their own). Registers them through the application API into a data directory
/// that is kept (so a later run measures it again without registering), then starts `lt serve`
/// on it as an operator would and measures what that many users cost: start-up time, memory,
/// open files against the budget, disk, the first request of users whose databases are not
/// open, and the consolidator's start-up sweep over every database.
struct PopulationBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "population",
        abstract: "Measure one lt node with very many registered users: start-up, memory, open files, disk.",
        discussion: """
            The data directory is kept: users already there are not registered again, so the run can be \
            repeated (or stopped and resumed) without the registration. Registration runs on a server started \
            with --durability normal and one PBKDF2 iteration (it builds the population; its rate is printed, \
            not judged); the measured server runs with the defaults (durable, every database budget as lt chooses).
            """)

    @Option(help: "The data directory (kept after the run).")
    var data: String

    @Option(help: "Registered users the directory should hold.")
    var users = 1_000_000

    @Option(help: "Clients registering at once.")
    var clients = 4

    @Option(help: "Users who, after the start, log in and write one location each (their databases are not open yet).")
    var visitors = 1_000

    @Option(
        help:
            "Seconds, at most, to watch the server after the visitors (memory, open files) while the consolidator's start-up sweep runs; the watch ends when the sweep does."
    )
    var watch = 60

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (1...10_000_000).contains(users) else {
            throw ValidationError("--users must be between 1 and 10,000,000")
        }
        guard (1...64).contains(clients) else { throw ValidationError("--clients must be between 1 and 64") }
        guard (0...users).contains(visitors) else { throw ValidationError("--visitors must be between 0 and --users") }
        guard (0...86_400).contains(watch) else {
            throw ValidationError("--watch must be between 0 and 86,400 seconds")
        }
    }

    static let admin = (user: "bench", password: "bench-password")

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let directory = URL(fileURLWithPath: data, isDirectory: true)
        let binary = lt.executable
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let logs = directory.appendingPathComponent("bench-logs")
        let registered = Self.registeredUsers(in: directory)
        print(
            "lt-bench population: \(users) users in \(directory.path) (\(registered) there already); machine: "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(CompareHeader.loadAverage()); open-file limit \(ServerResources.openFileLimit)"
        )
        if registered < users { try await register(from: registered, binary: binary, directory: directory, logs: logs) }
        try await measure(binary: binary, directory: directory, logs: logs)
    }

    /// Users whose database is in the directory (`lt_locations_user_*.sqlite`).
    static func registeredUsers(in directory: URL) -> Int {
        guard let directoryStream = opendir(directory.appendingPathComponent("dbs").path) else { return 0 }
        defer { closedir(directoryStream) }
        var count = 0
        while let entry = readdir(directoryStream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("lt_locations_user_"), name.hasSuffix(".sqlite") { count += 1 }
        }
        return count
    }

    static func userName(_ i: Int) -> String { String(format: "p%07d", i) }

    /// Registers users `from..<users` through the application API of a server started for it.
    func register(from first: Int, binary: URL, directory: URL, logs: URL) async throws {
        let server = try await LTServeProcess.start(
            binary: binary, directory: logs, admin: Self.admin, data: directory,
            arguments: [
                "--durability", "normal", "--password-iterations", "1", "--tiles", "none", "--log-level", "warning",
            ])
        defer { server.stop() }
        guard let port = server.applicationPort else { throw ValidationError("lt serve announced no application port") }
        let (users, clients) = (users, clients)
        let done = Locked(0)
        let start = ContinuousClock.now
        let pid = server.pid
        // Users are registered in order, a client each taking the next name; one already
        // there (a run stopped half-way registers its last few again) answers 409.
        let next = Locked(first)
        try await Bench.onThreads(clients) { _ in
            let connection = try BenchConnection(host: "127.0.0.1", port: port)
            while true {
                let i = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                if i >= users { return }
                let path = "/api/users/\(Self.userName(i))"
                let reply = try connection.send(
                    "PUT", path, authorization: "", body: JSON.object(["password": .string("password-\(i)")]).bytes)
                guard reply.status == 201 || reply.status == 409 else {
                    try Bench.Client.check(reply, 201, "PUT", path); return
                }
                let count = done.withLock { count in
                    count += 1
                    return count
                }
                if count % 20_000 == 0 {
                    let seconds = start.duration(to: .now).seconds
                    let line = String(
                        format: "  registered %d (%d in all) at %.0f/s; server RSS %.0f MiB, %d files open\n", count,
                        first + count,
                        Double(count) / seconds, Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576,
                        ServerProcessInfo.openFiles(pid) ?? -1)
                    FileHandle.standardError.write(Data(line.utf8))
                }
            }
        }
        let seconds = start.duration(to: .now).seconds
        print(
            String(
                format:
                    "registration: %d users in %.0f s (%.0f/s; durability normal, 1 PBKDF2 iteration, %d clients); server RSS at the end %.0f MiB",
                done.withLock { $0 }, seconds, Double(done.withLock { $0 }) / seconds, clients,
                Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576))
    }

    /// Starts the server on the population with its defaults and measures it.
    func measure(binary: URL, directory: URL, logs: URL) async throws {
        let disk = Self.diskUsage(directory.appendingPathComponent("dbs"))
        print(
            String(
                format: "disk: %.2f GiB in %d files under dbs/ (%.1f KiB per user)", Double(disk.bytes) / 1_073_741_824,
                disk.files,
                Double(disk.bytes) / Double(max(1, users)) / 1024))
        let server = try await LTServeProcess.start(
            binary: binary, directory: logs, admin: Self.admin, data: directory,
            arguments: ["--tiles", "none", "--log-level", "warning"],
            timeout: .seconds(600))
        defer { server.stop() }
        guard let port = server.applicationPort else { throw ValidationError("lt serve announced no application port") }
        let pid = server.pid
        let admin = Bench.Target(base: "http://127.0.0.1:\(port)", user: Self.admin.user, password: Self.admin.password)
            .authorization
        try Bench.Client.check(
            try BenchConnection(host: "127.0.0.1", port: port).send("GET", "/api/status", authorization: admin), 200,
            "GET", "/api/status")
        let ready = server.startup.seconds
        print(
            String(
                format: "start-up: listening after %.2f s; RSS %.0f MiB, %d files open; open-database budget %d", ready,
                Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576, ServerProcessInfo.openFiles(pid) ?? -1,
                ServerResources.openDatabaseBudget()))
        let peak = PeakMemorySampler(pid: pid)
        let mostFiles = Locked(0)
        let filesWatcher = Task.detached {
            while !Task.isCancelled {
                if let files = ServerProcessInfo.openFiles(pid) { mostFiles.withLock { $0 = max($0, files) } }
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        if visitors > 0 { try await visit(port: port, databasePort: server.port) }
        let swept0 = try Self.swept(port: port, admin: admin)
        let watchStart = ContinuousClock.now
        var swept1 = swept0
        while watchStart.duration(to: .now) < .seconds(watch) {
            try await Task.sleep(for: .seconds(10))
            swept1 = try Self.swept(port: port, admin: admin)
            let line = String(
                format: "  %4.0f s: swept %d, %d to go; RSS %.0f MiB, %d files open\n",
                watchStart.duration(to: .now).seconds,
                swept1.swept, swept1.remaining, Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576,
                ServerProcessInfo.openFiles(pid) ?? -1)
            FileHandle.standardError.write(Data(line.utf8))
            if swept1.remaining == 0 { break }
        }
        let sweptRate = Double(swept1.swept - swept0.swept) / watchStart.duration(to: .now).seconds
        filesWatcher.cancel()
        let peakBytes = peak.stop()
        print(
            String(
                format: "after %.0f s: RSS %.0f MiB (largest %.0f MiB), files open %d (most %d)",
                watchStart.duration(to: .now).seconds,
                Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576, Double(peakBytes) / 1_048_576,
                ServerProcessInfo.openFiles(pid) ?? -1, mostFiles.withLock { $0 }))
        if sweptRate > 0 {
            print(
                String(
                    format:
                        "consolidator's start-up sweep: %d databases looked at, %d to go; %.0f databases/s while watched (the whole sweep ≈ %.0f min)",
                    swept1.swept, swept1.remaining, sweptRate, Double(swept1.swept + swept1.remaining) / sweptRate / 60)
            )
        } else {
            print(
                "consolidator's start-up sweep: \(swept1.swept) databases looked at, \(swept1.remaining) to go (none while watched)"
            )
        }
    }

    /// `visitors` users spread over the population log in and write one location each, one
    /// after another: each opens a database that is not open.
    func visit(port: Int, databasePort: Int) async throws {
        let (users, visitors) = (users, visitors)
        let run = UInt32.random(in: 0...UInt32.max)
        let logins = Locked<[Double]>([])
        let writes = Locked<[Double]>([])
        try await Bench.onThreads(1) { _ in
            let app = try BenchConnection(host: "127.0.0.1", port: port)
            let database = try BenchConnection(host: "127.0.0.1", port: databasePort)
            for k in 0..<visitors {
                let i = (k &* 7_919 &+ 13) % users
                let name = Self.userName(i)
                let started = ContinuousClock.now
                let reply = try app.send(
                    "POST", "/api/login", authorization: "",
                    body: JSON.object(["username": .string(name), "password": .string("password-\(i)")]).bytes)
                try Bench.Client.check(reply, 200, "POST", "/api/login")
                let loggedIn = ContinuousClock.now
                let json = try JSON.parse(reply.body)
                guard let key = json["api_key"]?.stringValue, let secret = json["api_password"]?.stringValue,
                    let db = json["location_db_name"]?.stringValue
                else {
                    throw ValidationError("login answered without a key")
                }
                let path = "/\(db)/visit-\(run)-\(k)"  // a new id each run: the population is kept
                let written = try database.send(
                    "PUT", path, authorization: "Basic " + Data("\(key):\(secret)".utf8).base64EncodedString(),
                    body: ScaleRun.location(k))
                try Bench.Client.check(written, 201, "PUT", path)
                logins.withLock { $0.append((loggedIn - started).seconds * 1000) }
                writes.withLock { $0.append(loggedIn.duration(to: .now).seconds * 1000) }
            }
        }
        let (l, w) = (logins.withLock { $0.sorted() }, writes.withLock { $0.sorted() })
        print(
            String(
                format:
                    "%d users not seen since the start: login p50 %.1f / p99 %.1f ms; first write to their database p50 %.1f / p99 %.1f ms",
                visitors, CompareWorkload.percentile(l, 0.5), CompareWorkload.percentile(l, 0.99),
                CompareWorkload.percentile(w, 0.5), CompareWorkload.percentile(w, 0.99)))
    }

    /// The consolidator's sweep: databases looked at and still to look at (`/api/status`).
    static func swept(port: Int, admin: String) throws -> (swept: Int, remaining: Int) {
        let reply = try BenchConnection(host: "127.0.0.1", port: port).send("GET", "/api/status", authorization: admin)
        try Bench.Client.check(reply, 200, "GET", "/api/status")
        let consolidation = try JSON.parse(reply.body)["consolidation"]
        return (
            consolidation?["databases_swept"]?.intValue ?? 0,
            consolidation?["backlog"]?["sweep_remaining"]?.intValue ?? 0
        )
    }

    /// Bytes on disk (allocated blocks) and files under a directory, without following links.
    static func diskUsage(_ directory: URL) -> (bytes: Int, files: Int) {
        guard let stream = opendir(directory.path) else { return (0, 0) }
        defer { closedir(stream) }
        var (bytes, files) = (0, 0)
        var info = stat()
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name != ".", name != "..", lstat(directory.appendingPathComponent(name).path, &info) == 0 else {
                continue
            }
            bytes += Int(info.st_blocks) * 512
            files += 1
        }
        return (bytes, files)
    }
}
