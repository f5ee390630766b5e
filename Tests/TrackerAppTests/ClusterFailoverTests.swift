import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOPosix
import Testing

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
    }
}
