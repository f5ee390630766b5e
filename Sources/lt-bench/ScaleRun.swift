import ArgumentParser
import CouchEngine
import CouchJSON
import Foundation

/// One server's part of `lt-bench scale`: registration, device logins, then the devices'
/// writes with the consolidation watcher and the probes beside them.
struct ScaleRun {
    let side: ScaleSide
    let plan: ScalePlan
    let registrationClients: Int
    let writeConnections: Int

    /// The figures by name (those that do not apply to this server are missing).
    func measure() async throws -> [ScaleFigure: Double] {
        var values: [ScaleFigure: Double] = [:]
        let diskBefore = side.diskBytes()
        if case .couchDB = side.kind {
            try await side.client.send("PUT", "/\(side.consolidated)", expect: 201)
        }
        // Users an earlier run kept are not registered again.
        let registered = side.kept ? try await side.registeredUsers() : []
        let missing = (0..<plan.users).filter { !registered.contains($0) }
        if !registered.isEmpty {
            print(
                "  \(registered.count) users registered by an earlier run (--keep); registering the other \(missing.count)"
            )
        }
        let registration = try await register(missing)
        let registrationLatencies = registration.latencies.sorted()
        if !missing.isEmpty {
            values[.registration] = Double(missing.count) / registration.seconds
            values[.registrationP99] = CompareWorkload.percentile(registrationLatencies, 0.99)
            print(
                String(
                    format: "  registered %d users in %.1f s (%.0f/s, p50 %.1f ms, p99 %.1f ms)", missing.count,
                    registration.seconds,
                    values[.registration] ?? 0, CompareWorkload.percentile(registrationLatencies, 0.5),
                    values[.registrationP99] ?? 0))
        }
        if let before = diskBefore, let after = side.diskBytes() {
            // With users kept from earlier runs: everything on disk over every user.
            values[.diskPerUser] =
                (registered.isEmpty ? (after - before) / Double(plan.users) : after / Double(plan.users)) / 1024
        }
        values[.memoryAfterRegistration] =
            Double(side.pids.compactMap(ServerProcessInfo.residentBytes).reduce(0, +)) / 1_048_576
        if side.pids.count > 1 {
            print(
                "  each process's RSS after registration: "
                    + zip(side.processNames, side.pids).map { name, pid in
                        "\(name) "
                            + String(format: "%.0f MiB", Double(ServerProcessInfo.residentBytes(pid) ?? 0) / 1_048_576)
                    }.joined(separator: ", "))
        }
        // In single-database mode there are no users' databases to look at.
        if let sweep = try await side.waitForSweep(databases: side.mode == .singleDB ? 0 : registered.count) {
            values[.sweep] = sweep
        }
        let devices = try await logIn()
        print("  \(devices.count) devices logged in")
        let writing = try await write(devices)
        values[.writesAchieved] = Double(plan.writes) / writing.seconds
        values[.writeP50] = CompareWorkload.percentile(writing.latencies, 0.5)
        values[.writeP99] = CompareWorkload.percentile(writing.latencies, 0.99)
        values[.consolidated] = Double(writing.lags.count) / Double(max(1, plan.writes - writing.failures)) * 100
        values[.lagP50] = CompareWorkload.percentile(writing.lags, 0.5)
        values[.lagP99] = CompareWorkload.percentile(writing.lags, 0.99)
        if !writing.places.isEmpty {
            values[.placesP50] = CompareWorkload.percentile(writing.places, 0.5)
            values[.placesP99] = CompareWorkload.percentile(writing.places, 0.99)
        }
        if !writing.pushes.isEmpty {
            values[.pushP50] = CompareWorkload.percentile(writing.pushes, 0.5)
            values[.pushP99] = CompareWorkload.percentile(writing.pushes, 0.99)
        }
        values[.writesFailed] = Double(writing.failures) / Double(plan.writes) * 100
        values[.cpuPerWrite] = writing.cpuSeconds / Double(plan.writes) * 1000
        values[.memoryWhileWriting] = Double(writing.peakMemory) / 1_048_576
        print(
            String(
                format: "  wrote %d locations at %.0f/s; %.1f%% consolidated within %d s of the end", plan.writes,
                values[.writesAchieved] ?? 0, values[.consolidated] ?? 0, plan.tail))
        return values
    }

    /// Registers the users `indices`; the wall time and each registration's latency (ms).
    func register(_ indices: [Int]) async throws -> (seconds: Double, latencies: [Double]) {
        let latencies = Locked<[Double]>([])
        let (side, clients) = (side, registrationClients)
        let applicationPort = side.applicationPort
        let start = ContinuousClock.now
        try await Bench.onThreads(clients) { worker in
            let app = try applicationPort.map { try BenchConnection(host: side.host, port: $0) }
            let database = try BenchConnection(host: side.host, port: side.port)
            for k in stride(from: worker, to: indices.count, by: clients) {
                let started = ContinuousClock.now
                try side.register(indices[k], app: app, database: database)
                let done = latencies.withLock { latencies in
                    latencies.append(started.duration(to: .now).seconds * 1000)
                    return latencies.count
                }
                if done % 5_000 == 0 { FileHandle.standardError.write(Data("  registered \(done)\n".utf8)) }
            }
        }
        return (start.duration(to: .now).seconds, latencies.withLock { $0 })
    }

    /// Each device's credentials and database.
    func logIn() async throws -> [(authorization: String, database: String)] {
        let found = Locked([(authorization: String, database: String)?](repeating: nil, count: plan.devices))
        let (side, plan, clients) = (side, plan, registrationClients)
        let applicationPort = side.applicationPort
        try await Bench.onThreads(clients) { worker in
            let app = try applicationPort.map { try BenchConnection(host: side.host, port: $0) }
            for i in stride(from: worker, to: plan.devices, by: clients) {
                let device = try side.device(i, app: app)
                found.withLock { $0[i] = device }
            }
        }
        return found.withLock { $0.compactMap { $0 } }
    }

    struct Writing {
        var seconds: Double
        /// Each write's latency from when it was due (ms), sorted; likewise below.
        var latencies: [Double]
        /// For each location that reached the consolidated database: how long after its write was answered.
        var lags: [Double]
        var places: [Double]
        var pushes: [Double]
        var cpuSeconds: Double
        var peakMemory: Int
        /// Writes the server failed (an error status or a dropped connection).
        var failures: Int
    }

    /// The devices' writes on schedule (write n due at n / rate s), over shared connections,
    /// each with its device's credentials; meanwhile the watcher, the places prober and the
    /// push prober. Waits up to the tail for the last locations to be consolidated.
    func write(_ devices: [(authorization: String, database: String)]) async throws -> Writing {
        let (side, plan) = (side, plan)
        let total = plan.writes
        // Ids carry the run's tag: in cluster mode, copies of earlier runs stay in lt_locations_all.
        let prefix = "fix\(UInt32.random(in: 0...UInt32.max))-"
        let origin = ContinuousClock.now + .milliseconds(500)
        @Sendable func since(_ instant: ContinuousClock.Instant) -> Double { (instant - origin).seconds }
        let acknowledged = Locked([Double](repeating: .nan, count: total))
        let arrived = Locked([Double](repeating: .nan, count: total))
        let arrivedCount = Locked(0)
        let latencies = Locked<[Double]>([])
        let stopProbes = Locked(false)
        let stopWatcher = Locked(false)
        let next = Locked(0)
        let startSequence =
            try CompareWorkload.sequence(
                JSON.parse(try await side.client.send("GET", "/\(side.consolidated)", expect: 200))["update_seq"])
            ?? "now"

        let watcher = Task {
            try await Bench.onThreads(1) { _ in
                var connection = try BenchConnection(host: side.host, port: side.port)
                var sequence = startSequence
                while !stopWatcher.withLock({ $0 }) {
                    let path =
                        "/\(side.consolidated)/_changes?feed=longpoll&timeout=1000&limit=20000&since=\(sequence.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? sequence)"
                    let reply: (status: Int, body: [UInt8])
                    do {
                        reply = try connection.send("GET", path, authorization: side.target.authorization)
                        try Bench.Client.check(reply, 200, "GET", path)
                    } catch {
                        // A server under load may fail a feed request: ask again.
                        FileHandle.standardError.write(Data("  watcher: \(error)\n".utf8))
                        Thread.sleep(forTimeInterval: 0.1)
                        connection = try BenchConnection(host: side.host, port: side.port)
                        continue
                    }
                    let now = since(.now)
                    let json = try JSON.parse(reply.body)
                    var found = 0
                    arrived.withLock { arrived in
                        for row in json["results"]?.arrayValue ?? [] {
                            // lt keeps its copies as <user>:<id>; CouchDB's replications keep the ids.
                            guard let copy = row["id"]?.stringValue,
                                let id = copy.split(separator: ":", maxSplits: 1).last, id.hasPrefix(prefix),
                                let n = Int(id.dropFirst(prefix.count)), n >= 0, n < total, arrived[n].isNaN
                            else { continue }
                            arrived[n] = now
                            found += 1
                        }
                    }
                    arrivedCount.withLock { $0 += found }
                    sequence = CompareWorkload.sequence(json["last_seq"]) ?? sequence
                }
            }
        }
        let places = Task {
            try await probe(rate: plan.placesRate, stop: stopProbes, origin: origin) { connection, k in
                guard side.applicationPort != nil else { return false }
                let centre = ScaleRun.placeCentres[k % ScaleRun.placeCentres.count]
                let path = "/api/places?lat=\(centre.lat)&lon=\(centre.lon)&radius=5000"
                try Bench.Client.check(try connection.send("GET", path, authorization: ""), 200, "GET", path)
                return true
            }
        }
        let pushes = Task {
            try await probe(rate: plan.syncRate, stop: stopProbes, origin: origin, application: false) {
                connection, k in
                try ScaleRun.pushCycle(connection, device: devices[k % devices.count], cycle: k)
                return true
            }
        }

        let samplers = side.pids.map { PeakMemorySampler(pid: $0) }
        let cpuBefore = side.pids.map { ServerProcessInfo.cpuSeconds($0) ?? 0 }
        let failures = Locked(0)
        try await Bench.onThreads(writeConnections) { _ in
            var connection = try BenchConnection(host: side.host, port: side.writePort)
            while true {
                let n = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                if n >= total { return }
                let due = origin + .nanoseconds(Int64(Double(n) / Double(plan.rate) * 1e9))
                let wait = ContinuousClock.now.duration(to: due).seconds
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                let device = devices[(n &* 7_919) % devices.count]
                let path = "/\(device.database)/\(prefix)\(n)"
                // A server that fails a write (an error status, a dropped connection) is
                // counted, not waited for: a device would try again at its next sync.
                do {
                    let reply = try connection.send(
                        "PUT", path, authorization: device.authorization, body: ScaleRun.location(n))
                    guard reply.status == 201 || reply.status == 202 else {
                        ScaleRun.recordFailure(
                            failures,
                            "PUT \(path): \(reply.status) \(String(decoding: reply.body.prefix(200), as: UTF8.self))")
                        continue
                    }
                } catch {
                    ScaleRun.recordFailure(failures, "PUT \(path): \(error)")
                    connection = try BenchConnection(host: side.host, port: side.writePort)
                    continue
                }
                let now = ContinuousClock.now
                acknowledged.withLock { $0[n] = since(now) }
                latencies.withLock { $0.append((now - due).seconds * 1000) }
            }
        }
        let writeEnd = ContinuousClock.now
        let cpus = zip(side.pids, cpuBefore).map { pid, before in (ServerProcessInfo.cpuSeconds(pid) ?? before) - before
        }
        let peaks = samplers.map { $0.stop() }
        if side.pids.count > 1 {
            let wall = (writeEnd - origin).seconds
            var lines: [String] = []
            for (k, name) in side.processNames.enumerated() where k < cpus.count {
                let perWrite: Double = cpus[k] / Double(total) * 1000
                let share: Double = cpus[k] / wall * 100
                let resident: Double = Double(peaks[k]) / 1_048_576
                lines.append("\(name): " + String(format: "%.2f ms, %.0f%%, %.0f MiB", perWrite, share, resident))
            }
            print(
                "  each process (CPU ms per write, CPU share of the run, largest RSS): " + lines.joined(separator: "; ")
            )
        }
        let (cpu, peak) = (cpus.reduce(0, +), peaks.reduce(0, +))
        stopProbes.withLock { $0 = true }
        let placeLatencies = try await places.value
        let pushLatencies = try await pushes.value
        let tailEnd = ContinuousClock.now + .seconds(plan.tail)
        while ContinuousClock.now < tailEnd, arrivedCount.withLock({ $0 }) < total {
            try await Task.sleep(for: .milliseconds(100))
        }
        stopWatcher.withLock { $0 = true }
        try await watcher.value
        let lags = zip(acknowledged.withLock { $0 }, arrived.withLock { $0 }).compactMap { ack, arrival -> Double? in
            ack.isNaN || arrival.isNaN ? nil : max(0, arrival - ack) * 1000
        }
        return Writing(
            seconds: (writeEnd - origin).seconds, latencies: latencies.withLock { $0 }.sorted(), lags: lags.sorted(),
            places: placeLatencies.sorted(), pushes: pushLatencies.sorted(), cpuSeconds: cpu, peakMemory: peak,
            failures: failures.withLock { $0 })
    }

    /// Counts a failed request; the first few are printed.
    static func recordFailure(_ failures: Locked<Int>, _ description: String) {
        let count = failures.withLock { count in
            count += 1
            return count
        }
        if count <= 5 { FileHandle.standardError.write(Data("  failed: \(description)\n".utf8)) }
    }

    /// Runs `body` at `rate` per second (cycle k due at k / rate s) on a thread with its own
    /// connection (to the application API, or where devices write), until told to stop; each
    /// run's latency from when it was due (ms), or none if `body` says the probe does not apply
    /// to this server.
    func probe(
        rate: Int, stop: Locked<Bool>, origin: ContinuousClock.Instant, application: Bool = true,
        _ body: @escaping @Sendable (BenchConnection, Int) throws -> Bool
    ) async throws -> [Double] {
        guard rate > 0 else { return [] }
        let side = side
        let port: Int
        if application {
            guard let applicationPort = side.applicationPort else { return [] }
            port = applicationPort
        } else {
            port = side.writePort
        }
        let latencies = Locked<[Double]>([])
        let failures = Locked(0)
        try await Bench.onThreads(1) { _ in
            var connection = try BenchConnection(host: side.host, port: port)
            var k = 0
            while !stop.withLock({ $0 }) {
                let due = origin + .nanoseconds(Int64(Double(k) / Double(rate) * 1e9))
                let wait = ContinuousClock.now.duration(to: due).seconds
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                do {
                    guard try body(connection, k) else { return }
                    latencies.withLock { $0.append((ContinuousClock.now - due).seconds * 1000) }
                } catch {
                    // A failed probe counts as never answered: the largest latency there is.
                    ScaleRun.recordFailure(failures, "probe: \(error)")
                    latencies.withLock { $0.append(.infinity) }
                    connection = try BenchConnection(host: side.host, port: port)
                }
                k += 1
            }
        }
        return latencies.withLock { $0 }
    }

    /// One push cycle of a device, as a replicator pushes one new location: read the
    /// checkpoint, `_revs_diff`, `_bulk_docs` with `new_edits=false`, write the checkpoint.
    static func pushCycle(
        _ connection: BenchConnection, device: (authorization: String, database: String), cycle: Int
    ) throws {
        let db = "/\(device.database)"
        let checkpoint = "\(db)/_local/scale-push-checkpoint"
        let existing = try connection.send("GET", checkpoint, authorization: device.authorization)
        guard existing.status == 200 || existing.status == 404 else {
            try Bench.Client.check(existing, 200, "GET", checkpoint); return
        }
        let previous = existing.status == 200 ? try JSON.parse(existing.body)["_rev"] : nil
        let id = "push-\(cycle)"
        let hash = String(format: "%032x", cycle)
        let rev = "1-\(hash)"
        let diff = try connection.send(
            "POST", "\(db)/_revs_diff", authorization: device.authorization,
            body: JSON.object([id: [.string(rev)]]).bytes)
        try Bench.Client.check(diff, 200, "POST", "\(db)/_revs_diff")
        guard case var .object(document) = try JSON.parse(location(cycle)) else { return }
        document["_id"] = .string(id)
        document["_rev"] = .string(rev)
        document["_revisions"] = ["start": 1, "ids": [.string(hash)]]
        let written = try connection.send(
            "POST", "\(db)/_bulk_docs", authorization: device.authorization,
            body: JSON.object(["new_edits": false, "docs": [.object(document)]]).bytes)
        try Bench.Client.check(written, 201, "POST", "\(db)/_bulk_docs")
        var saved: JSONObject = ["last_seq": .int(cycle), "session_id": "scale"]
        if let previous { saved["_rev"] = previous }
        let put = try connection.send(
            "PUT", checkpoint, authorization: device.authorization, body: JSON.object(saved).bytes)
        try Bench.Client.check(put, 201, "PUT", checkpoint)
    }

    /// Location n as the app writes it.
    static func location(_ n: Int) -> [UInt8] {
        let time: Double = 1_700_000_000_000 + Double(n) * 1_000
        let longitude: Double = -122.3 + Double(n % 1000) * 1e-4
        let latitude: Double = 37.3 + Double(n % 997) * 1e-4
        let geometry: JSON = ["type": "Point", "coordinates": [.double(longitude), .double(latitude)]]
        let properties: JSON = [
            "timestamp": .double(time), "background": .bool(n % 3 == 0), "accuracy": .double(5 + Double(n % 20)),
        ]
        return JSON.object([
            "type": "Feature", "created_at": .double(time), "geometry": geometry, "properties": properties,
        ]).bytes
    }

    /// Where the places prober asks from: around the sample places (Silicon Valley).
    static let placeCentres: [(lat: Double, lon: Double)] = (0..<64).map { (k: Int) -> (lat: Double, lon: Double) in
        let lat: Double = 37.30 + Double(k % 8) * 0.02
        let lon: Double = -122.10 + Double(k / 8) * 0.02
        return (lat, lon)
    }
}

/// The figures of a scale run, in the order they are printed.
enum ScaleFigure: CaseIterable {
    case registration, registrationP99, diskPerUser, memoryAfterRegistration, sweep, writesAchieved, writeP50, writeP99,
        writesFailed, consolidated, lagP50, lagP99, placesP50, placesP99, pushP50, pushP99, cpuPerWrite,
        memoryWhileWriting

    var figure: CompareFigure {
        switch self {
        case .registration: CompareFigure("registration", unit: "users/s")
        case .registrationP99: CompareFigure("registration latency p99", unit: "ms", better: .lower)
        case .diskPerUser: CompareFigure("disk per registered user", unit: "KiB", better: .lower)
        case .memoryAfterRegistration: CompareFigure("server RSS after registration", unit: "MiB", better: .lower)
        case .sweep:
            CompareFigure(
                "start-up sweep over every user's database (waited for before the writes)", unit: "s", better: .lower)
        case .writesAchieved: CompareFigure("location writes achieved", unit: "per s")
        case .writeP50: CompareFigure("write latency p50 (from when it was due)", unit: "ms", better: .lower)
        case .writeP99: CompareFigure("write latency p99", unit: "ms", better: .lower)
        case .writesFailed:
            CompareFigure("location writes failed (error status or dropped connection)", unit: "%", better: .lower)
        case .consolidated: CompareFigure("locations consolidated by the end of the tail", unit: "% of acknowledged")
        case .lagP50: CompareFigure("consolidation lag p50 (after the write's answer)", unit: "ms", better: .lower)
        case .lagP99: CompareFigure("consolidation lag p99", unit: "ms", better: .lower)
        case .placesP50: CompareFigure("/api/places p50 while writing", unit: "ms", better: .lower)
        case .placesP99: CompareFigure("/api/places p99 while writing", unit: "ms", better: .lower)
        case .pushP50: CompareFigure("device push cycle p50 while writing", unit: "ms", better: .lower)
        case .pushP99: CompareFigure("device push cycle p99 while writing", unit: "ms", better: .lower)
        case .cpuPerWrite: CompareFigure("server CPU per location write", unit: "ms", better: .lower)
        case .memoryWhileWriting: CompareFigure("server RSS, largest while writing", unit: "MiB", better: .lower)
        }
    }
}
