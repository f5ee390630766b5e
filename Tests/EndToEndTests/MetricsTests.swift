import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import HTTPServing
import LTServer
import LTTestSupport
import NIOHTTP1
import Testing

/// `/_node/_local/_prometheus`, `_stats` and `_system` on a real `lt serve`: admins only, and
/// the figures move by what the traffic between two readings did.
@Suite("Metrics")
struct MetricsTests {
    static func samples(_ s: TestServer) async throws -> [PrometheusSample] {
        let reply = try await s.request(.GET, "/_node/_local/_prometheus")
        #expect(reply.status == 200)
        #expect(reply.headers.first(name: "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let samples = PrometheusSample.parse(reply.text)
        // Every line that is not a comment is a sample: nothing the parser had to leave out.
        let lines = reply.text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(samples.count == lines.count && !samples.isEmpty)
        return samples
    }

    /// The metrics docs/deploying.md's table lists, by name (labels dropped).
    static func documentedMetrics() throws -> Set<String> {
        let text = try String(contentsOf: Repository.root.appendingPathComponent("docs/deploying.md"), encoding: .utf8)
        var names = Set<String>()
        for line in text.split(separator: "\n") where line.hasPrefix("| `lt_") {
            let first = line.dropFirst(2).prefix { $0 != "|" }
            for match in first.matches(of: /`(lt_[a-z_]+)/) { names.insert(String(match.output.1)) }
        }
        return names
    }

    @Test("Every metric the server exports is in docs/deploying.md's table, and every one there is exported (cluster mode's and jemalloc's only where they apply)")
    func documentedAndExported() async throws {
        let s = try TestServer()
        defer { s.stop() }
        // Traffic, so that the metrics made at their first use exist.
        #expect(try await s.app(.PUT, "/api/users/erin", json: ["password": "erin-pw-7731"]).status == 201)
        #expect(try await s.request(.PUT, "/metrics-db").status == 201)
        #expect(try await s.request(.PUT, "/metrics-db/a", json: ["n": 1]).status == 201)
        let reply = try await s.request(.GET, "/_node/_local/_prometheus")
        // Each family's `# TYPE` line names it (a histogram's samples add _bucket, _sum, _count).
        let exported = Set(reply.text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# TYPE ") else { return nil }
            return line.split(separator: " ").dropFirst(2).first.map(String.init)
        })
        let documented = try Self.documentedMetrics()
        #expect(documented.count >= 30, "\(documented.sorted())")
        for name in exported.sorted() {
            #expect(documented.contains(name), "\(name) is exported but not in docs/deploying.md's table")
        }
        let allocator = PrometheusSample.parse(reply.text).first { $0.name == "lt_build_info" }?.labels["allocator"] ?? ""
        var elsewhere: Set<String> = ["lt_couchdb_node_up", "lt_couchdb_node_withdrawn"]  // cluster mode's
        if !allocator.hasPrefix("jemalloc") { elsewhere.insert("lt_allocator_bytes") }
        for name in documented.subtracting(elsewhere).sorted() {
            #expect(exported.contains(name), "\(name) is in docs/deploying.md's table but not exported")
        }
    }

    /// Every metric name each layer lists, in its one list.
    static let listed: [String] = HTTPMetric.allCases.map(\.rawValue) + EngineMetric.allCases.map(\.rawValue)
        + CouchMetric.allCases.map(\.rawValue) + ApplicationMetric.allCases.map(\.rawValue)

    @Test("Each layer's one list of metric names (HTTPMetric, EngineMetric, CouchMetric, ApplicationMetric) is exactly docs/deploying.md's table, no name twice, and no source file names a metric outside them")
    func namesInOneList() throws {
        #expect(Set(Self.listed).count == Self.listed.count, "a name in two lists")
        let documented = try Self.documentedMetrics()
        #expect(Set(Self.listed) == documented,
                "listed, not documented: \(Set(Self.listed).subtracting(documented).sorted()); documented, not listed: \(documented.subtracting(Self.listed).sorted())")
        // A metric's name in a string anywhere else (a reader of samples, a typo) is one of them.
        let sources = Repository.root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        #expect(files.count > 100)
        let families = Set(Self.listed.map { String($0.split(separator: "_").prefix(2).joined(separator: "_")) })
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: /"(lt_[a-z_]+)"/) {
                let name = String(match.output.1)
                guard families.contains(String(name.split(separator: "_").prefix(2).joined(separator: "_"))),
                      !name.hasPrefix("lt_locations"), !name.hasPrefix("lt_place") else { continue }
                #expect(Self.listed.contains(name), "\(file.lastPathComponent) names \(name), which no list has")
            }
        }
    }

    @Test("Admins only: 401 without credentials and for a user; an unknown node is 404")
    func adminsOnly() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/dana", json: ["password": "dana-pw-5521"]).status == 201)
        for path in ["/_node/_local/_prometheus", "/_node/_local/_stats", "/_node/lt@localhost/_system"] {
            #expect(try await s.request(.GET, path, auth: .none).status == 401, "\(path)")
            let user = try await s.request(.GET, path, auth: .basic("dana", "dana-pw-5521"))
            #expect(user.status == 401 && user.json["error"] == "unauthorized", "\(path): \(user.text)")
            #expect(try await s.request(.GET, path).status == 200, "\(path)")
        }
        let elsewhere = try await s.request(.GET, "/_node/couchdb@other/_stats")
        #expect(elsewhere.status == 404 && elsewhere.json["error"] == "not_found")
        #expect(try await s.request(.GET, "/_node/_local/_stats/couchdb/no_such").status == 404)
        #expect(try await s.request(.POST, "/_node/_local/_prometheus", json: [:]).status == 405)
    }

    @Test("What the server runs with: lt_build_info's labels, its connections, the data directory's free space (statvfs, as df)")
    func buildAndDisk() async throws {
        let s = try TestServer(extraArguments: ["--max-connections", "300"])
        defer { s.stop() }
        let samples = try await MetricsTests.samples(s)
        let info = samples.filter { $0.name == "lt_build_info" }
        #expect(info.count == 1 && info.first?.value == 1)
        let labels = info.first?.labels ?? [:]
        #expect(labels["version"] == "0.1.0" && labels["couchdb_api"] == "3.4.3" && labels["mode"] == "db-per-user" && labels["durability"] == "full")
        #expect(labels["sqlite"]?.hasPrefix("3.") == true && labels["javascript"] != nil && labels["allocator"] != nil, "\(labels)")
        #expect(samples.sum("lt_max_connections") == 600)  // two listeners
        let free = samples.sum("lt_data_free_bytes"), size = samples.sum("lt_data_filesystem_bytes")
        var stats = statvfs()
        #expect(statvfs(s.dataDirectory.path, &stats) == 0)
        let expectedSize = Double(stats.f_blocks) * Double(stats.f_frsize)
        #expect(size == expectedSize && free > 0 && free <= size)
        #expect(abs(free - Double(stats.f_bavail) * Double(stats.f_frsize)) < 512 * 1024 * 1024)  // other writers on the disk meanwhile
    }

    @Test("Requests, group commits, feeds and replication jobs move the counters by what was done")
    func countersMove() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/m").status == 201)
        let before = try await Self.samples(s)
        let statsBefore = try await s.request(.GET, "/_node/_local/_stats").json

        for i in 0..<20 { #expect(try await s.request(.PUT, "/m/doc-\(i)", json: ["i": .int(i)]).status == 201) }
        for _ in 0..<5 { #expect(try await s.request(.GET, "/m/missing").status == 404) }
        let bulk: JSON = ["docs": .array((0..<30).map { .object(["_id": .string("bulk-\($0)")]) })]
        #expect(try await s.request(.POST, "/m/_bulk_docs", json: bulk).status == 201)
        #expect(try await s.request(.GET, "/m/_changes").status == 200)
        #expect(try await s.request(.POST, "/m/_find", json: ["selector": ["i": ["$gt": 10]]]).status == 200)
        for _ in 0..<3 { #expect(try await s.app(.GET, "/api/status").status == 401) }

        let after = try await Self.samples(s)
        func moved(_ name: String, _ labels: [String: String]) -> Double { after.sum(name, labels) - before.sum(name, labels) }
        let requests = "lt_http_requests_total"
        #expect(moved(requests, ["listener": "database", "method": "PUT", "status": "201"]) == 20)
        #expect(moved(requests, ["listener": "database", "method": "GET", "status": "404", "status_class": "4xx"]) == 5)
        #expect(moved(requests, ["listener": "database", "method": "POST", "status_class": "2xx"]) == 2)
        #expect(moved(requests, ["listener": "application", "status": "401"]) == 3)
        let timed = "lt_http_request_duration_seconds_count"
        #expect(moved(timed, ["listener": "database", "family": "documents"]) == 25)
        #expect(moved(timed, ["listener": "database", "family": "bulk"]) == 1)
        #expect(moved(timed, ["listener": "database", "family": "changes"]) == 1)
        #expect(moved(timed, ["listener": "database", "family": "find"]) == 1)
        #expect(moved(timed, ["listener": "application", "family": "app_api"]) == 3)
        // Buckets are cumulative and end in +Inf with the count.
        let infinite = after.sum("lt_http_request_duration_seconds_bucket", ["listener": "database", "family": "documents", "le": "+Inf"])
        #expect(infinite == after.sum(timed, ["listener": "database", "family": "documents"]))
        // 21 writes, each committed (20 one at a time; the bulk's 30 documents in one write).
        #expect(moved("lt_write_batch_size_count", [:]) >= 21 && moved("lt_write_batch_size_sum", [:]) >= 21)
        #expect(moved("lt_write_transaction_duration_seconds_count", [:]) == moved("lt_write_batch_size_count", [:]))
        #expect(after.sum("lt_write_queue_depth") == 0)
        #expect(after.sum("lt_open_databases") >= 1 && after.sum("lt_process_resident_memory_bytes") > 1_000_000)
        #expect(after.sum("lt_process_open_fds") > 0 && after.sum("lt_process_max_fds") >= after.sum("lt_process_open_fds"))

        // `_stats` in CouchDB's shape moved by the same amounts.
        let statsAfter = try await s.request(.GET, "/_node/_local/_stats").json
        func stat(_ json: JSON, _ path: String...) -> Int { path.reduce(json) { $0[$1] ?? .null }["value"]?.intValue ?? 0 }
        #expect(stat(statsAfter, "couchdb", "httpd_request_methods", "PUT") - stat(statsBefore, "couchdb", "httpd_request_methods", "PUT") == 20)
        #expect(stat(statsAfter, "couchdb", "httpd_status_codes", "404") - stat(statsBefore, "couchdb", "httpd_status_codes", "404") == 5)
        let time = try await s.request(.GET, "/_node/_local/_stats/couchdb/request_time").json
        #expect(time["type"] == "histogram" && (time["value"]?["n"]?.intValue ?? 0) >= 28, "\(time)")
        #expect(time["value"]?["percentile"]?.arrayValue?.count == 6)
        let system = try await s.request(.GET, "/_node/_local/_system").json
        #expect((system["memory"]?["resident"]?.intValue ?? 0) > 1_000_000 && system["uptime"]?.intValue != nil, "\(system)")

        // A feed held open shows while it is held.
        let feed = Task { try await s.request(.GET, "/m/_changes?feed=longpoll&since=now&timeout=4000") }
        #expect(try await eventually(10) { try await Self.samples(s).sum("lt_changes_feeds_open") == 1 })
        _ = try await feed.value
        #expect(try await eventually(10) { try await Self.samples(s).sum("lt_changes_feeds_open") == 0 })

        // A continuous replication: one running job, which has written the 50 documents.
        let replication: JSONObject = [
            "source": .string("\(s.adminURL)/m"), "target": .string("\(s.adminURL)/copy"), "create_target": true, "continuous": true,
        ]
        let job = try await s.request(.POST, "/_replicate", json: .object(replication))
        #expect(job.status == 202, "\(job.text)")
        #expect(try await eventually(30) {
            let now = try await Self.samples(s)
            return now.sum("lt_replication_jobs", ["state": "running"]) == 1 && now.sum("lt_replication_documents", ["kind": "written"]) == 50
        })
        var cancel = replication
        cancel["cancel"] = true
        #expect(try await s.request(.POST, "/_replicate", json: .object(cancel)).status == 200)
        #expect(try await Self.samples(s).sum("lt_replication_jobs") == 0)
    }
}
