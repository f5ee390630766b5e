import CouchJSON
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LTTestSupport
import NIOCore
import NIOPosix
import Testing
import NIOHTTP1

/// Cluster mode given several nodes: a real `lt serve` in front of a stand-in node (`lt serve
/// --database-only`) and a node that is not there, over real HTTP.
@Suite("Cluster mode across several nodes", .serialized)
struct ClusterFailoverTests {
    /// A port nothing listens on (bound, then let go).
    static func deadPort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 9
        try channel.close().wait()
        return port
    }

    @Test("A dead first node is passed over (logins, registration, places answer; devices are given the node that answers); with every node gone a 503 naming each node comes at once, the log says so, and when a node is back it says that too and everything answers again")
    func failover() async throws {
        let node = try TestServer(databaseOnly: true)
        let dead = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(try Self.deadPort())"
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lt-failover-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let s = try TestServer(extraArguments: ["--couchdb", "\(dead),\(node.adminURL)", "--log-level", "notice"], logFile: log)
        defer { s.stop() }
        var restarted: TestServer?
        defer { restarted?.stop(); node.stop() }

        #expect(try await s.app(.PUT, "/api/users/mia", json: ["password": "pw-mia"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "mia", "password": "pw-mia"])
        #expect(login.status == 200 && login.json["location_db_host"] == .string("127.0.0.1:\(node.port)"), "\(login.text)")
        #expect(try await s.app(.GET, "/api/places?lat=37.49&lon=-122.3&radius=5000").status == 200)
        let first = try String(contentsOf: log, encoding: .utf8)
        #expect(first.contains("cannot be reached (connection refused): requests go to the other nodes"), "\(first)")
        // lt doctor names the node that does not answer (exit 1), from the server's metrics.
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let doctor = try TestServer.runLT(["doctor", "--url", url])
        #expect(doctor.status == 1 && doctor.output.contains("node 127.0.0.1:\(URLComponents(string: dead)!.port!) does not answer; the application goes on through the other node"),
                "\(doctor.output)")

        // Every node gone: 503 at once, naming each node and why; the log says the cluster is unreachable.
        node.kill()
        let started = Date()
        let refused = try await s.app(.PUT, "/api/users/noa", json: ["password": "pw-noa"])
        let took = Date().timeIntervalSince(started)
        #expect(refused.status == 503 && refused.json["error"] == "service_unavailable", "\(refused.status) \(refused.text)")
        #expect(refused.json["reason"]?.stringValue?.contains("127.0.0.1:\(node.port)") == true && !refused.text.contains("errno"))
        #expect(took < 5, "answered in \(took) s")
        let login503 = try await s.app(.POST, "/api/login", json: ["username": "mia", "password": "pw-mia"])
        #expect(login503.status == 503, "\(login503.status) \(login503.text)")
        #expect(try String(contentsOf: log, encoding: .utf8).contains("the CouchDB cluster cannot be reached"))

        // The node back (same data, same port): within its wait (1 s, then 2 s...) it answers again.
        restarted = try TestServer(dataDirectory: node.dataDirectory, ports: (database: node.port, app: 0), databaseOnly: true)
        var back = 0
        for _ in 0..<60 where back != 200 {
            try await Task.sleep(for: .milliseconds(250))
            back = try await s.app(.POST, "/api/login", json: ["username": "mia", "password": "pw-mia"]).status
        }
        #expect(back == 200)
        #expect(try await s.app(.PUT, "/api/users/noa", json: ["password": "pw-noa"]).status == 201)
        let last = try String(contentsOf: log, encoding: .utf8)
        #expect(last.contains("the CouchDB cluster is reachable again through 127.0.0.1:\(node.port)"), "\(last)")
    }

    @Test("A node put into maintenance mode (its /_up answers 404, as CouchDB's does) is left alone within seconds — the log and lt doctor say so, requests go to the other node — and taken back when it is ready; with every node withdrawn, a 503 says why")
    func maintenanceMode() async throws {
        // Two stand-in nodes that do not share data (unlike a cluster's), each prepared with the
        // application's databases by an instance of its own first.
        let first = try TestServer(databaseOnly: true), second = try TestServer(databaseOnly: true)
        defer { first.stop(); second.stop() }
        try TestServer(extraArguments: ["--couchdb", second.adminURL]).stop()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lt-maintenance-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let s = try TestServer(extraArguments: ["--couchdb", "\(first.adminURL),\(second.adminURL)", "--log-level", "notice"], logFile: log)
        defer { s.stop() }
        func logSays(_ text: String) async throws -> Bool {
            for _ in 0..<40 {
                if try String(contentsOf: log, encoding: .utf8).contains(text) { return true }
                try await Task.sleep(for: .milliseconds(250))
            }
            return false
        }
        #expect(try await s.app(.PUT, "/api/users/ana", json: ["password": "pw-ana"]).status == 201)
        #expect(try await first.request(.GET, "/lt_locations_user_ana").status == 200, "on the first node while it is ready")

        // The operator drains the first node, as on CouchDB.
        #expect(try await first.request(.PUT, "/_node/_local/_config/couchdb/maintenance_mode", json: "true").status == 200)
        let up = try await first.request(.GET, "/_up", auth: .none)
        #expect(up.status == 404 && up.json["status"] == "maintenance_mode", "\(up.status) \(up.text)")
        #expect(try await logSays("CouchDB node 127.0.0.1:\(first.port) asks for no requests (its /_up answers maintenance_mode)"))
        let bo = try await s.app(.PUT, "/api/users/bo", json: ["password": "pw-bo"])
        #expect(bo.status == 201, "\(bo.status) \(bo.text)")
        #expect(try await second.request(.GET, "/lt_locations_user_bo").status == 200, "created through the second node")
        #expect(try await first.request(.GET, "/lt_locations_user_bo").status == 404, "nothing sent to the node in maintenance")
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        let doctor = try TestServer.runLT(["doctor", "--url", url])
        #expect(doctor.status == 0 && doctor.output.contains("node 127.0.0.1:\(first.port) (its /_up answers maintenance_mode) asks for no requests"), "\(doctor.output)")

        // Both withdrawn (the second as `nolb`): nothing may be sent, and the 503 says why.
        #expect(try await second.request(.PUT, "/_node/_local/_config/couchdb/maintenance_mode", json: "nolb").status == 200)
        #expect(try await logSays("127.0.0.1:\(second.port) asks for no requests (its /_up answers nolb)"))
        let refused = try await s.app(.PUT, "/api/users/cy", json: ["password": "pw-cy"])
        #expect(refused.status == 503 && refused.text.contains("its /_up answers maintenance_mode") && refused.text.contains("its /_up answers nolb"),
                "\(refused.status) \(refused.text)")

        // Meanwhile the mirrors wait for a node rather than start and give up in a loop (which
        // once wrote millions of log lines a minute).
        try await Task.sleep(for: .seconds(2))
        let mirrorLines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").filter { $0.contains("mirror of") }
        #expect(mirrorLines.count < 10, "\(mirrorLines.count) lines about the mirrors: \(mirrorLines.suffix(4))")

        // The second ready again: taken back by its check, and everything answers.
        #expect(try await second.request(.PUT, "/_node/_local/_config/couchdb/maintenance_mode", json: "false").status == 200)
        #expect(try await logSays("the CouchDB cluster is reachable again through 127.0.0.1:\(second.port)"))
        let cy = try await s.app(.PUT, "/api/users/cy", json: ["password": "pw-cy"])
        #expect(cy.status == 201, "\(cy.status) \(cy.text)")
        #expect(try await first.request(.GET, "/lt_locations_user_cy").status == 404)
    }

    @Test("A node that takes connections and never answers (frozen, or cut off after connecting) is given up within seconds by a health check, never waited on until the 120 s deadline")
    func silentNode() async throws {
        let node = try TestServer(databaseOnly: true)
        var nodeStopped = false
        defer { if !nodeStopped { node.stop() } }
        let silent = SilentListener()
        defer { silent.close() }
        let silentURL = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(silent.port)"
        let s = try TestServer(extraArguments: ["--couchdb", "\(node.adminURL),\(silentURL)"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/uma", json: ["password": "pw-uma"]).status == 201)

        // The answering node gone: requests go to the silent one, which accepts and says nothing.
        node.kill()
        nodeStopped = true
        let started = Date()
        let login = try await s.app(.POST, "/api/login", json: ["username": "uma", "password": "pw-uma"])
        let took = Date().timeIntervalSince(started)
        #expect(login.status == 503 && login.json["reason"]?.stringValue?.contains("127.0.0.1:\(silent.port)") == true, "\(login.status) \(login.text)")
        #expect(login.json["reason"]?.stringValue?.contains("stopped answering") == true, "\(login.text)")
        #expect(took < 8, "answered after \(took) s")
    }

    /// A port that takes connections (the kernel's backlog) and never reads or answers them.
    final class SilentListener: @unchecked Sendable {
        let descriptor: Int32
        let port: Int

        init() {
            (descriptor, port) = FaultyProxy.listen(backlog: 512)
        }

        func close() { _ = Glibc.close(descriptor) }
    }

    @Test("Single-database mode: the owners' way into the shared database on the cluster passes a dead first node over too")
    func sharedDatabase() async throws {
        let node = try TestServer(databaseOnly: true)
        defer { node.stop() }
        let dead = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(try Self.deadPort())"
        let s = try TestServer(extraArguments: ["--couchdb", "\(dead),\(node.adminURL)", "--mode", "single-db"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/ola", json: ["password": "pw-ola"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "ola", "password": "pw-ola"])
        let key = TestServer.Auth.basic(login.json["api_key"]?.stringValue ?? "", login.json["api_password"]?.stringValue ?? "")
        let db = login.json["location_db_name"]?.stringValue ?? ""
        let fix: JSON = ["type": "Feature", "created_at": 1_700_000_000_000, "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]]]
        let written = try await s.request(.PUT, "/\(db)/fix-1", json: fix, auth: key)
        #expect(written.status == 201, "\(written.status) \(written.text)")
        #expect(try await node.request(.GET, "/\(db)/ola:fix-1").status == 200, "stored under the owner's prefix on the live node")
        #expect(try await s.request(.GET, "/\(db)/fix-1", auth: key).status == 200)

        // Every node gone: the device is told the cluster cannot be reached (503), not that its
        // key is wrong (its user could not be looked up), and nothing is counted as a failed login.
        node.kill()
        let refused = try await s.request(.PUT, "/\(db)/fix-2", json: fix, auth: key)
        #expect(refused.status == 503 && refused.json["error"] == "service_unavailable", "\(refused.status) \(refused.text)")
        let read = try await s.request(.GET, "/\(db)/fix-1", auth: key)
        #expect(read.status == 503, "\(read.status) \(read.text)")
    }

    @Test("--device-couchdb: devices are told that address (a load balancer in front of the nodes) whichever node answers; one with credentials or a path is refused at start")
    func deviceAddress() async throws {
        let node = try TestServer(databaseOnly: true)
        defer { node.stop() }
        let dead = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(try Self.deadPort())"
        let s = try TestServer(extraArguments: ["--couchdb", "\(dead),\(node.adminURL)", "--device-couchdb", "https://couch.example.org:6984"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/ida", json: ["password": "pw-ida"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "ida", "password": "pw-ida"])
        #expect(login.json["location_db_host"] == "couch.example.org:6984" && login.json["location_db_host_protocol"] == "https", "\(login.text)")
        let page = try await s.app(.GET, "/app/")
        let policy = page.headers.first(name: "Content-Security-Policy") ?? ""
        #expect(page.status == 200 && policy.contains("connect-src 'self' https://couch.example.org:6984"), "the web app may sync with it: \(policy)")

        let data = FileManager.default.temporaryDirectory.appendingPathComponent("lt-device-url-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        for bad in ["https://user:pw@couch.example.org", "http://couch.example.org/db", "ftp://couch.example.org"] {
            let refused = try TestServer.runLT(["serve", "--data", data.path, "--couchdb", node.adminURL, "--device-couchdb", bad])
            #expect(refused.status != 0 && refused.errors.contains("--device-couchdb must be scheme://host[:port]"), "\(bad): \(refused.errors)")
        }
        let alone = try TestServer.runLT(["serve", "--data", data.path, "--device-couchdb", "https://couch.example.org"])
        #expect(alone.status != 0 && alone.errors.contains("--device-couchdb needs --couchdb"), "\(alone.errors)")
    }
}
