import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The application on a real three-node Apache CouchDB 3 cluster (n=3, CouchDB's default quorum
/// w=2/r=2) while a node fails: `lt serve` is given every node and fails over between them;
/// devices write their private databases through HAProxy, the address lt tells them
/// (`--device-couchdb`) — or, in single-database mode, the shared database through lt's
/// database port, which fails over the same way. During a burst of device syncs, logins, registrations, places
/// queries and exports, one node is killed (`kill -9`), partitioned away or wiped at a seeded
/// random moment; afterwards every acknowledged location must be in its database and
/// consolidated, and no request may have been answered 500. Each run prints its figures.
@Suite("A real three-node CouchDB cluster through node failures (LT_TEST_COUCHDB_CLUSTER)", .serialized,
       .enabled(if: LiveCluster.isSet,
                "skipped: LT_TEST_COUCHDB_CLUSTER, LT_TEST_COUCHDB_CLUSTER_PROXY and LT_TEST_COUCHDB_CLUSTER_DIR are not set (docs/scaling.md)"))
struct LiveClusterFailureTests {
    enum Fault: String, Sendable {
        /// `kill -9` of the node's Erlang VM; started again on its data after the outage.
        case kill
        /// The node's HTTP and distribution ports drop every packet for the outage (iptables).
        case block
        /// `kill -9`, its data deleted, started empty at once in maintenance mode; internal
        /// replication refills it (`rejoin` ends maintenance mode once it has).
        case wipe
    }

    @Test("kill -9 of a node at a seeded random moment during device syncs and consolidation: 0 acknowledged locations lost, consolidation catches up, no 500", arguments: 1...5)
    func killed(run: Int) async throws {
        var random = SeededRandom(seed: UInt64(run) * 7919)
        // Each node in turn (the one lt talks to first), then nodes drawn at random.
        let node = run <= 3 ? run : Int(random.next() % 3) + 1
        let outcome = try await Self.burst(fault: .kill, node: node, random: &random)
        outcome.check()
    }

    @Test("Single-database mode: kill -9 of each node in turn, the first included, while devices write the shared database through lt: 0 acknowledged locations lost, no 500", arguments: 1...3)
    func killedSingleDatabase(node: Int) async throws {
        var random = SeededRandom(seed: UInt64(node) * 104_729)
        let outcome = try await Self.burst(fault: .kill, node: node, mode: .singleDatabase, random: &random)
        outcome.check()
    }

    @Test("A node partitioned away (its ports dropping every packet), the first one included: the same guarantees")
    func partitioned() async throws {
        var random = SeededRandom(seed: 31)
        let outcome = try await Self.burst(fault: .block, node: 1, random: &random)
        outcome.check()
    }

    @Test("A node restarted with an empty disk as CouchDB's procedure says (in maintenance mode until internal replication has refilled it): the same guarantees, and once refilled it alone answers every acknowledged location")
    func wiped() async throws {
        var random = SeededRandom(seed: 47)
        let outcome = try await Self.burst(fault: .wipe, node: 2, random: &random)
        // Node 2 came back empty in maintenance mode: its /_up answered 404, so HAProxy sent
        // devices elsewhere and lt withdrew it; the other nodes left its copies out of reads,
        // writes and changes feeds (no partial copy read by the consolidator).
        outcome.check()
        #expect(outcome.log.contains("asks for no requests (its /_up answers maintenance_mode)"), "lt did not withdraw the node in maintenance mode")
        // Internal replication refills it; then it leaves maintenance mode (the script waits
        // for no replication job on any node for 5 s).
        try LiveCluster.control("rejoin", node: 2)
        // Refilled: node 2's own shard files of each user's database there and no longer
        // growing for 10 s (a file filled by internal replication is smaller than one written
        // batch by batch, so sizes are not compared across nodes), within two minutes.
        var refilled = false, last: [Int] = [], steadySince = Date()
        for _ in 0..<120 where !refilled {
            let sizes = outcome.databases.map { Self.localShardFiles(db: $0, node: 2).reduce(0, +) }
            if sizes != last { (last, steadySince) = (sizes, Date()) }
            refilled = sizes.allSatisfy { $0 > 0 } && Date().timeIntervalSince(steadySince) >= 10
            if !refilled { try await Task.sleep(for: .seconds(1)) }
        }
        #expect(refilled, "node 2's shard files did not fill again within two minutes: \(last)")
        // Proof from the node itself: with the two others killed, node 2 alone (r=1) has each one.
        try LiveCluster.control("kill", node: 1)
        try LiveCluster.control("kill", node: 3)
        var lost = 0
        do {
            for (db, ids) in outcome.acknowledgedIDs {
                let found = try await Self.present(Array(ids), in: db, through: LiveCluster.nodes[1], query: "?r=1")
                lost += ids.subtracting(found).count
            }
        } catch {
            Issue.record("reading node 2 alone: \(error)")
        }
        try LiveCluster.control("restart", node: 1)
        try LiveCluster.control("restart", node: 3)
        #expect(lost == 0, "\(lost) acknowledged locations not on the wiped node once refilled")
    }

    // MARK: - The burst

    /// Where the devices' locations live (`lt serve --mode`).
    enum Mode: Sendable {
        /// A private database each, written through the load balancer, consolidated by lt.
        case databasePerUser
        /// The shared `lt_locations_all_envoy`, written through lt (each user in their own
        /// namespace, `<user>:<id>` on the cluster): nothing to consolidate.
        case singleDatabase
    }

    struct Outcome {
        var fault: Fault
        var node: Int
        var mode: Mode
        var moment: Double
        var databases: [String]
        var acknowledged = 0
        var acknowledgedIDs: [String: Set<String>] = [:]
        var acceptedWithoutQuorum = 0
        var lost: [String] = []
        var notConsolidated = 0
        var consolidatedAfter: Double = 0
        var deviceAnswers: [String: Int] = [:]
        var appAnswers: [String: [String: Int]] = [:]
        var appFailures: [String] = []
        /// The application's slowest answers, in seconds, with when they were asked (seconds into the burst).
        var appSlowest: [(kind: String, seconds: Double, at: Double)] = []
        var log = ""

        func check() {
            print("""
                cluster \(fault.rawValue) node \(node)\(mode == .singleDatabase ? " (single-database mode)" : "") at \(String(format: "%.1f", moment)) s: \(acknowledged) locations acknowledged \
                (\(acceptedWithoutQuorum) with 202, fewer copies than w), \(lost.count) lost, \
                \(mode == .singleDatabase ? "nothing to consolidate (analysts read the shared database)" : "\(notConsolidated) not consolidated; all consolidated \(String(format: "%.1f", consolidatedAfter)) s after the writes stopped"); \
                devices' answers \(deviceAnswers.sorted { $0.key < $1.key }); application's \(appAnswers.sorted { $0.key < $1.key }); \
                its slowest \(appSlowest.map { "\($0.kind) \(String(format: "%.2f", $0.seconds)) s at \(String(format: "%.1f", $0.at)) s" })
                """)
            #expect(acknowledged > 1000, "too few writes acknowledged to mean anything")
            #expect(lost.isEmpty, "acknowledged but gone: \(lost.prefix(10))")
            #expect(notConsolidated == 0, "\(notConsolidated) acknowledged locations never reached lt_locations_all")
            for (kind, answers) in appAnswers {
                #expect(answers["500"] == nil, "\(kind) answered 500: \(appFailures)")
                let good = answers.filter { $0.key.hasPrefix("2") }.values.reduce(0, +)
                let all = answers.values.reduce(0, +)
                #expect(all > 0 && Double(good) >= Double(all) * 0.9, "\(kind): \(answers) \(appFailures)")
            }
            #expect(deviceAnswers["500"] == nil, "a device was answered 500")
            #expect(!log.contains(" 500 "), "the server logged a 500")
        }
    }

    /// A tally the concurrent writers and the application's client share.
    actor Tally {
        var acknowledged: [String: Set<String>] = [:]
        var withoutQuorum = 0
        var deviceAnswers: [String: Int] = [:]
        var appAnswers: [String: [String: Int]] = [:]
        var appFailures: [String] = []
        var appTimes: [(kind: String, seconds: Double, at: Double)] = []

        func acknowledge(_ db: String, _ ids: [String], status: Int) {
            acknowledged[db, default: []].formUnion(ids)
            if status == 202 { withoutQuorum += ids.count }
        }
        func device(_ answer: String) { deviceAnswers[answer, default: 0] += 1 }
        func app(_ kind: String, _ answer: String, _ text: String, seconds: Double, at: Double) {
            appTimes.append((kind, seconds, at))
            appAnswers[kind, default: [:]][answer, default: 0] += 1
            if !answer.hasPrefix("2"), appFailures.count < 12 { appFailures.append("\(kind) \(answer) \(text.prefix(200))") }
        }
    }

    struct Device: Sendable {
        var user: String
        var password: String
        var db: String
        var key: (String, String)
    }

    /// Devices writing where lt tells them and the application in use, `fault` done to `node`
    /// at a random moment 2–8 s in, undone 10 s later, writes going on 4 s more; then every
    /// acknowledged location is looked for in its database (and in `lt_locations_all`, with a
    /// database per user).
    static func burst(fault: Fault, node: Int, mode: Mode = .databasePerUser, random: inout SeededRandom) async throws -> Outcome {
        // Names new to the cluster each time (the seed decides the node and the moment).
        let run = String(UUID().uuidString.prefix(8)).lowercased()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lt-cluster-\(run).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let devicesWriteTo = mode == .singleDatabase ? ["--mode", "single-db"] : ["--device-couchdb", LiveCluster.withoutCredentials(LiveCluster.proxy)]
        let server = try TestServer(extraArguments: [
            "--couchdb", LiveCluster.nodes.joined(separator: ","),
            "--max-registrations-per-hour", "100000", "--password-iterations", "1000", "--log-level", "notice",
        ] + devicesWriteTo, logFile: log)
        defer { server.stop() }
        let admin = TestServer.Auth.basic(LiveCluster.admin.0, LiveCluster.admin.1)

        // Eight users, each with a device signed in: they are told the load balancer's address,
        // or lt's database port in single-database mode.
        let deviceBase = mode == .singleDatabase ? server.baseURL : LiveCluster.withoutCredentials(LiveCluster.proxy)
        var signedIn: [Device] = []
        for index in 0..<8 {
            let user = "c\(run)u\(index)", password = "pw-\(user)"
            let registered = try await server.app(.PUT, "/api/users/\(user)", json: ["password": .string(password)])
            #expect(registered.status == 201, "\(registered.text)")
            let login = try await server.app(.POST, "/api/login", json: ["username": .string(user), "password": .string(password)])
            #expect(login.json["location_db_host"]?.stringValue == URLComponents(string: deviceBase).map { "\($0.host ?? ""):\($0.port ?? 0)" })
            signedIn.append(Device(user: user, password: password, db: login.json["location_db_name"]?.stringValue ?? "",
                                  key: (login.json["api_key"]?.stringValue ?? "", login.json["api_password"]?.stringValue ?? "")))
        }

        let tally = Tally()
        let devices = signedIn
        let moment = 2 + Double(random.next() % 6000) / 1000
        let writes = Task {
            await withTaskGroup(of: Void.self) { group in
                for device in devices { group.addTask { await Self.write(device, to: deviceBase, mode: mode, tally: tally) } }
                group.addTask { await Self.use(server, devices: devices, run: run, admin: admin, tally: tally) }
            }
        }
        try await Task.sleep(for: .seconds(moment))
        switch fault {
        case .kill: try LiveCluster.control("kill", node: node)
        case .block: try LiveCluster.control("block", node: node)
        case .wipe: try LiveCluster.control("wipe", node: node)
        }
        try await Task.sleep(for: .seconds(10))
        switch fault {
        case .kill: try LiveCluster.control("restart", node: node)
        case .block: try LiveCluster.control("unblock", node: node)
        case .wipe: break
        }
        try await Task.sleep(for: .seconds(4))
        writes.cancel()
        _ = await writes.result
        let stopped = Date()

        var outcome = Outcome(fault: fault, node: node, mode: mode, moment: moment, databases: Array(Set(devices.map(\.db))).sorted())
        let acknowledged = await tally.acknowledged
        outcome.acknowledged = acknowledged.values.map(\.count).reduce(0, +)
        outcome.acknowledgedIDs = acknowledged
        outcome.acceptedWithoutQuorum = await tally.withoutQuorum
        outcome.deviceAnswers = await tally.deviceAnswers
        outcome.appAnswers = await tally.appAnswers
        outcome.appSlowest = Array(await tally.appTimes.sorted { $0.seconds > $1.seconds }.prefix(5))
        outcome.appFailures = await tally.appFailures

        // Each acknowledged location in its database (read through the load balancer).
        for (db, ids) in acknowledged {
            let found = try await Self.present(Array(ids), in: db)
            outcome.lost += ids.subtracting(found).sorted()
        }
        // And consolidated: `owner:id` in lt_locations_all, within a minute of the writes stopping.
        let patience: Double = 60
        let consolidatedIDs = mode == .singleDatabase ? [] : acknowledged.flatMap { db, ids in
            let owner = devices.first { $0.db == db }?.user ?? ""
            return ids.map { "\(owner):\($0)" }
        }
        var missing = consolidatedIDs
        while !missing.isEmpty, Date().timeIntervalSince(stopped) < patience {
            let found = try await Self.present(missing, in: "lt_locations_all")
            missing = missing.filter { !found.contains($0) }
            if !missing.isEmpty { try await Task.sleep(for: .milliseconds(250)) }
        }
        outcome.notConsolidated = missing.count
        outcome.consolidatedAfter = Date().timeIntervalSince(stopped)
        outcome.log = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return outcome
    }

    /// A device: batches of ten locations posted to its database at `base` until cancelled; a
    /// batch that fails is sent again (as TrackerKit does) after 250 ms. Acknowledged ids are
    /// tallied as the cluster stores them (`<user>:<id>` in the shared database).
    static func write(_ device: Device, to base: String, mode: Mode, tally: Tally) async {
        var batch = 0
        while !Task.isCancelled {
            let ids = (0..<10).map { "\(device.user)-\(batch)-\($0)" }
            var docs: [JSON] = []
            for (index, id) in ids.enumerated() {
                let time = 1_700_000_000_000 + batch * 10_000 + index
                let point: JSON = ["type": "Point", "coordinates": [.double(-122.3 + Double(index) / 1000), .double(37.5)]]
                docs.append(["_id": .string(id), "type": "Feature", "created_at": .int(time), "geometry": point])
            }
            var sent = false
            while !sent, !Task.isCancelled {
                do {
                    let reply = try await post(base + "/\(device.db)/_bulk_docs", json: ["docs": .array(docs)], auth: device.key)
                    await tally.device("\(reply.status)")
                    if reply.status == 201 || reply.status == 202 {
                        let rows = reply.json.arrayValue ?? []
                        let ok = rows.compactMap { $0["ok"] == .bool(true) ? $0["id"]?.stringValue : nil }
                        let stored = mode == .singleDatabase ? ok.map { "\(device.user):\($0)" } : ok
                        await tally.acknowledge(device.db, stored, status: reply.status)
                        sent = true
                    }
                } catch {
                    if Task.isCancelled { return }
                    await tally.device("no answer")
                }
                if !sent { try? await Task.sleep(for: .milliseconds(250)) }
            }
            batch += 1
            // About 140 locations a second from the eight: what three CouchDB nodes, lt and
            // this test sharing two cores keep consolidated within seconds.
            try? await Task.sleep(for: .milliseconds(500))
        }
    }

    /// The application in use meanwhile: logins, places near a point, registrations and an
    /// export, in turn, every 100 ms.
    static func use(_ server: TestServer, devices: [Device], run: String, admin: TestServer.Auth, tally: Tally) async {
        var step = 0
        let began = Date()
        while !Task.isCancelled {
            let device = devices[step % devices.count]
            let kind = ["login", "places", "registration", "export"][step % 4]
            let asked = Date()
            do {
                let reply: TestServer.Reply
                switch kind {
                case "login":
                    reply = try await server.app(.POST, "/api/login", json: ["username": .string(device.user), "password": .string(device.password)])
                case "places":
                    reply = try await server.app(.GET, "/api/places?lat=37.49&lon=-122.3&radius=5000")
                case "registration":
                    reply = try await server.app(.PUT, "/api/users/c\(run)r\(step)", json: ["password": "pw-new-user"])
                default:
                    reply = try await server.app(.GET, "/api/analysis/locations?user=\(device.user)&format=csv", auth: admin)
                }
                await tally.app(kind, "\(reply.status)", reply.text, seconds: Date().timeIntervalSince(asked), at: asked.timeIntervalSince(began))
            } catch {
                if Task.isCancelled { return }
                await tally.app(kind, "no answer", "\(error)", seconds: Date().timeIntervalSince(asked), at: asked.timeIntervalSince(began))
            }
            step += 1
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: - HTTP

    static func post(_ url: String, json: JSON, auth: (String, String)) async throws -> TestServer.Reply {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Authorization", value: TestServer.basic(auth.0, auth.1))
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: json.bytes))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
        let body = try await response.body.collect(upTo: 64 << 20)
        return TestServer.Reply(status: Int(response.status.code), headers: response.headers, body: Array(buffer: body))
    }

    /// Which of `ids` `db` holds (not deleted), asked as the admin through the load balancer
    /// or `node`.
    static func present(_ ids: [String], in db: String, through node: String = LiveCluster.proxy, query: String = "") async throws -> Set<String> {
        var found = Set<String>()
        let base = LiveCluster.withoutCredentials(node)
        for start in stride(from: 0, to: ids.count, by: 2000) {
            let keys = ids[start..<min(ids.count, start + 2000)].map { JSON.string($0) }
            let reply = try await post(base + "/\(db)/_all_docs" + query, json: ["keys": .array(keys)], auth: LiveCluster.admin)
            guard reply.status == 200 else { throw ReadFailed(description: "reading \(db): \(reply.status) \(reply.text.prefix(200))") }
            for row in reply.json["rows"]?.arrayValue ?? [] where row["error"] == nil && row["value"]?["deleted"] == nil {
                if let id = row["id"]?.stringValue { found.insert(id) }
            }
        }
        return found
    }

    struct ReadFailed: Error, CustomStringConvertible { var description: String }

    /// The sizes of `node`'s own shard files of `db` on its disk.
    static func localShardFiles(db: String, node: Int) -> [Int] {
        let shards = URL(fileURLWithPath: LiveCluster.directory).appendingPathComponent("node\(node)/data/shards")
        let ranges = (try? FileManager.default.contentsOfDirectory(atPath: shards.path)) ?? []
        return ranges.flatMap { range in
            let files = (try? FileManager.default.contentsOfDirectory(atPath: shards.appendingPathComponent(range).path)) ?? []
            return files.filter { $0.hasPrefix(db + ".") && $0.hasSuffix(".couch") }.compactMap { file in
                (try? FileManager.default.attributesOfItem(atPath: shards.appendingPathComponent(range).appendingPathComponent(file).path))?[.size] as? Int
            }
        }
    }
}
