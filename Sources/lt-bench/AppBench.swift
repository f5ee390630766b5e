import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPTypes
import LTServer
import Logging
import TrackerApp

/// `lt-bench app`: the application at scale, in one process: many registered users, then a
/// steady stream of location writes spread over many of them, measuring how long each write
/// takes to be visible in `lt_locations_all`'s geo index (the consolidation lag), the server's resident memory,
/// and what a registration costs without its PBKDF2 part. The consolidator runs throughout, as
/// in `lt serve`.
struct AppBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Measure registration cost, consolidation lag and memory with many users.")

    @Option(help: "Registered users (each gets a database).")
    var users = 10_000

    @Option(help: "Users the writes are spread over.")
    var active = 10_000

    @Option(help: "Location writes per second.")
    var rate = 1_000

    @Option(help: "Seconds of writing.")
    var seconds = 60

    @Option(
        help: "PBKDF2 iterations for user passwords in this run (lowered so registration measures everything else).")
    var pbkdf2Iterations = 1

    @Option(help: "Databases kept open at once (the server's --max-open-databases; default as the server chooses).")
    var maxOpenDatabases: Int?

    @Option(help: "Most writes waiting for an answer at once (writes start on schedule, independently, like devices).")
    var inFlight = 512

    @Option(
        help:
            "full: every commit synced (survives power loss; the server's default); normal: survives a killed process.")
    var durability = "full"

    func run() async throws {
        ProcessSetup.runTasksOnEventLoops()
        ProcessSetup.bootstrapLogging(level: .error)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("lt-bench-app-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }  // on errors; normally removed below
        let maxOpen = maxOpenDatabases ?? ServerResources.openDatabaseBudget()
        try ServerResources.checkOpenDatabases(maxOpen)
        let dataDirectory = scratch.appendingPathComponent("data")
        let directoryLock = try DirectoryLock.forCommand(dataDirectory)
        defer { withExtendedLifetime(directoryLock) {} }
        let durabilityMode = try Durability.option(durability)
        let store = try DatabaseStore(
            directory: dataDirectory, maxOpen: maxOpen, durability: durabilityMode,
            connections: LocationTrackerServer.connections)
        var options = CouchAPI.Options()
        options.pbkdf2Iterations = pbkdf2Iterations
        let api = CouchAPI(
            store: store, settings: try ServerSettings.load(from: scratch), options: options,
            logger: Logger(label: "lt.bench"))
        try await api.prepareSystemDatabases()
        let couch = InProcessCouch(api: api)
        let service = TrackerService(
            couch: couch, passwordIterations: pbkdf2Iterations, logger: Logger(label: "lt.bench"))
        try await service.prepare(places: [])
        print(
            "lt-bench app: \(users) users, \(rate) writes/s over \(min(active, users)) of them for \(seconds) s, at most \(inFlight) in flight; "
                + "PBKDF2 iterations \(pbkdf2Iterations); \(maxOpen) databases open at most; durability \(durabilityMode.rawValue.lowercased()); \(Allocator.description)"
        )

        // The consolidator runs from the start, as in `lt serve`.
        let consolidator = Consolidator(couch: couch)
        let consolidation = Task { await consolidator.run() }
        try await register(service)
        // A steady stream of writes; arrival times come from lt_locations_all's changes feed.
        try await Task.sleep(for: .seconds(1))
        let lag = try await LagWatcher(api: api)
        let total = rate * seconds
        let cpuStart = AppBench.processCPUSeconds()
        let openedBefore = store.filesOpened
        let copiedBefore = consolidator.statistics
        let (achieved, latencies) = try await write(total, api: api, lag: lag)
        let cpuWriting = AppBench.processCPUSeconds() - cpuStart
        let opened = store.filesOpened - openedBefore
        // Wait for the tail to arrive (up to 30 s).
        for _ in 0..<300 where lag.written.withLock({ !$0.isEmpty }) { try await Task.sleep(for: .milliseconds(100)) }
        lag.task.cancel()
        print(String(format: "writes achieved                               %8.0f per s", achieved))
        print("write latency p50/p99/max                     " + AppBench.percentiles(latencies))
        print(
            String(
                format: "CPU while writing (writes, copying, watcher)  %8.2f ms per write (%.2f cores)",
                cpuWriting / Double(total) * 1000, cpuWriting / (Double(total) / achieved)))
        print(
            String(
                format: "database files opened while writing           %8.2f per write", Double(opened) / Double(total))
        )
        lag.report()
        await reportIndex(api, total: total)
        // This run's rounds (from the start of the writes to the end of the tail).
        let copied = consolidator.statistics.since(copiedBefore)
        print(
            String(
                format:
                    "consolidation: %d rounds, %.0f databases and %.0f documents per round; read %.0f ms, write %.0f ms per round; slowest read %.0f ms",
                copied.rounds, Double(copied.databasesRead) / Double(max(1, copied.rounds)),
                Double(copied.documentsCopied) / Double(max(1, copied.rounds)),
                copied.readSeconds * 1000 / Double(max(1, copied.rounds)),
                copied.writeSeconds * 1000 / Double(max(1, copied.rounds)), copied.slowestRead * 1000))
        print(
            String(
                format: "resident memory                               %8.0f MiB",
                Double(GeoBench.residentBytes()) / 1_048_576))
        // Stop the consolidator before removing its files (it may still be writing).
        consolidation.cancel()
        _ = await consolidation.value
        try? FileManager.default.removeItem(at: scratch)
    }

    /// Registers every user (database, `_security`, geo design document, user document) and
    /// prints the time each took.
    func register(_ service: TrackerService) async throws {
        let registrationStart = ContinuousClock.now
        for i in 0..<users {
            _ = try await service.register(username: AppBench.name(i), password: .string("password-\(i)"))
            if (i + 1) % 2000 == 0 { FileHandle.standardError.write(Data("  registered \(i + 1)\n".utf8)) }
        }
        let registration = registrationStart.duration(to: .now).seconds / Double(users) * 1000
        print(String(format: "registration (without PBKDF2)                 %8.2f ms each", registration))
    }

    /// Writes `total` locations over the active users, on schedule (write n at n / rate
    /// seconds), each on its own as independent devices would: a slow server does not slow the
    /// arrivals down, up to `inFlight` writes waiting at once. Returns the rate achieved and
    /// each write's latency (ms).
    func write(_ total: Int, api: CouchAPI, lag: LagWatcher) async throws -> (achieved: Double, latencies: [Double]) {
        let spread = min(active, users)
        let loadStart = ContinuousClock.now
        let latencies = Locked<[Double]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for n in 0..<total {
                let due = loadStart + .nanoseconds(Int64(Double(n) / Double(rate) * 1e9))
                if ContinuousClock.now < due { try await Task.sleep(until: due) }
                if n > 0, n % 10_000 == 0 {
                    let waiting = n - latencies.withLock { $0.count }
                    FileHandle.standardError.write(
                        Data("  started \(n) writes, \(waiting) waiting for an answer\n".utf8))
                }
                if running == inFlight {
                    try await group.next()
                    running -= 1
                }
                running += 1
                group.addTask {
                    let user = AppBench.name((n * 7919) % spread)
                    let id = "fix-\(n)"
                    let start = ContinuousClock.now
                    lag.written.withLock { $0[id] = start }
                    let doc: JSON = [
                        "type": "Feature", "created_at": .double(Date().timeIntervalSince1970 * 1000),
                        "geometry": [
                            "type": "Point", "coordinates": [.double(-122.3 + Double(n % 1000) * 1e-4), 37.49],
                        ],
                        "properties": ["username": .string(user)],
                    ]
                    let reply = await api.perform(.put, "/lt_locations_user_\(user)/\(id)", body: doc)
                    guard reply.status == 201 else {
                        throw ValidationError(
                            "write failed: \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
                    }
                    let now = ContinuousClock.now
                    latencies.withLock { $0.append(start.duration(to: now).seconds * 1000) }
                    lag.acknowledged.withLock { $0[id] = now }
                }
            }
            try await group.waitForAll()
        }
        return (Double(total) / loadStart.duration(to: .now).seconds, latencies.withLock { $0 })
    }

    /// Every write is in the geo index: a query around all of them finds each one.
    func reportIndex(_ api: CouchAPI, total: Int) async {
        let geo = await api.perform(
            .get, "/lt_locations_all/_design/points/_geo/pointidx",
            query: ["bbox": "-122.31,37.48,-122.19,37.50", "limit": "1", "stale": "ok"])
        let indexed =
            (try? JSON.parse(await api.perform(.get, "/lt_locations_all/_design/points/_geo_info/pointidx").body))?[
                "geo_index"]?["doc_count"]
        print("geo index: status \(geo.status), \(indexed?.text ?? "?") documents indexed (\(total) written)")
    }

    /// p50 / p99 / max of the values, in ms.
    static func percentiles(_ values: [Double]) -> String {
        let sorted = values.sorted()
        func at(_ p: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        return String(format: "%8.1f / %.1f / %.1f ms", at(0.5), at(0.99), sorted.last ?? .nan)
    }

    /// Follows `lt_locations_all`'s changes feed from before the first write and records, for
    /// each write that arrives, how long after it started (and after it was acknowledged) it
    /// was in the feed and then visible in the geo index.
    struct LagWatcher: Sendable {
        /// When each write not yet seen started, and when it was acknowledged.
        let written = Locked<[String: ContinuousClock.Instant]>([:])
        let acknowledged = Locked<[String: ContinuousClock.Instant]>([:])
        let arrivals = Locked<[Double]>([])
        let lags = Locked<[Double]>([])
        let lagsAfterAcknowledgement = Locked<[Double]>([])
        private(set) var task: Task<Void, Never>!

        init(api: CouchAPI) async throws {
            // From lt_locations_all's sequence before the first write (not `since=now`, which
            // the watcher's first request would resolve only when it runs, possibly after a copy).
            let start = try JSON.parse(await api.perform(.get, "/lt_locations_all").body)
            let startSequence = start["update_seq"]?.stringValue ?? start["update_seq"]?.text ?? "now"
            let watcher = self
            task = Task { await watcher.follow(api, since: startSequence) }
        }

        private func follow(_ api: CouchAPI, since startSequence: String) async {
            var since = startSequence
            while !Task.isCancelled {
                let reply = await api.perform(
                    .get, "/lt_locations_all/_changes", query: ["feed": "longpoll", "since": since, "timeout": "1000"])
                guard let json = try? JSON.parse(reply.body) else { continue }
                // Copies are kept as <user>:<id>: the id the write used is after the first colon.
                let arrivedIDs = (json["results"]?.arrayValue ?? []).compactMap {
                    $0["id"]?.stringValue?.split(separator: ":", maxSplits: 1).last.map(String.init)
                }
                let arrived = arrivedIDs.compactMap { id in written.withLock { $0.removeValue(forKey: id) } }
                let arrivedAcknowledged = arrivedIDs.compactMap { id in
                    acknowledged.withLock { $0.removeValue(forKey: id) }
                }
                since = json["last_seq"]?.stringValue ?? since
                guard !arrived.isEmpty else { continue }
                let seen = ContinuousClock.now
                arrivals.withLock { arrivals in arrivals += arrived.map { $0.duration(to: seen).seconds * 1000 } }
                // Visible in the geo index once a query (which first brings the index up to
                // date with the database) has answered: that is when a user could see it.
                let geo = await api.perform(
                    .get, "/lt_locations_all/_design/points/_geo/pointidx",
                    query: ["lat": "37.49", "lon": "-122.25", "radius": "100", "limit": "1"])
                guard geo.status == 200 else { continue }
                let now = ContinuousClock.now
                lags.withLock { lags in lags += arrived.map { $0.duration(to: now).seconds * 1000 } }
                lagsAfterAcknowledgement.withLock { lags in
                    lags += arrivedAcknowledged.map { $0.duration(to: now).seconds * 1000 }
                }
            }
        }

        func report() {
            let missing = written.withLock { $0.count }
            print("lag until in lt_locations_all's changes       " + AppBench.percentiles(arrivals.withLock { $0 }))
            print("lag until visible in the geo index p50/p99/max " + AppBench.percentiles(lags.withLock { $0 }))
            print(
                "  the same, from the write's acknowledgement    "
                    + AppBench.percentiles(lagsAfterAcknowledgement.withLock { $0 }))
            print(
                "writes not consolidated after 30 s                 \(missing)"
                    + (missing == 0
                        ? "" : " (" + written.withLock { $0.keys.sorted().prefix(5).joined(separator: ", ") } + ")"))
        }
    }

    static func name(_ i: Int) -> String { "user\(i)" }

    /// User and system CPU time of this process so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
