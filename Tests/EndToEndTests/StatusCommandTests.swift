import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `lt status` and `GET /api/status` against a real server: what consolidation has copied,
/// what waits, and that only admins may ask.
@Suite("Status", .timeLimit(.minutes(2)))
struct StatusCommandTests {
    @Test("lt status prints the consolidation's progress and no failures (exit 0); /api/status is for admins; single-db mode says there is nothing to consolidate")
    func status() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/ida", json: ["password": "pw-ida"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "ida", "password": "pw-ida"]).json
        let key = login["api_key"]?.stringValue ?? "", secret = login["api_password"]?.stringValue ?? ""
        for i in 0..<3 {
            #expect(try await s.request(.PUT, "/lt_locations_user_ida/fix-\(i)", json: ["type": "Feature", "created_at": .int(i)], auth: .basic(key, secret)).status == 201)
        }
        let admin = TestServer.Auth.basic(TestServer.admin.0, TestServer.admin.1)
        var copied = 0
        for _ in 0..<100 where copied < 3 {
            copied = try await s.app(.GET, "/api/status", auth: admin).json["consolidation"]?["documents_copied"]?.intValue ?? 0
            if copied < 3 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(copied == 3)
        let appURL = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.appPort)"
        let printed = try TestServer.runLT(["status", "--app", appURL])
        #expect(printed.status == 0, "\(printed.errors)")
        let lines = printed.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(printed.output)")
        #expect(lines.first == "mode: db-per-user")
        #expect(lines.dropFirst().first.map { $0.hasPrefix("consolidation: 3 locations copied in ") && ($0.hasSuffix(" rounds") || $0.hasSuffix(" 1 round")) } == true, "\(printed.output)")
        #expect(Array(lines.dropFirst(2)) == ["  backlog: 0 databases still to look at since start-up, 0 databases waiting to be retried", "  no failures"])
        let json = try TestServer.runLT(["status", "--app", appURL, "--json"])
        #expect((try? JSON.parse(Array(json.output.utf8)))?["consolidation"]?["ok"] == true, "\(json.output)")
        #expect(try await s.app(.GET, "/api/status", auth: .basic(key, secret)).status == 403)
        #expect(try await s.app(.GET, "/api/status").status == 401)

        let shared = try TestServer(extraArguments: ["--mode", "single-db"])
        defer { shared.stop() }
        let single = try TestServer.runLT(["status", "--app", "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(shared.appPort)"])
        #expect(single.status == 0 && single.output.contains("consolidation: none in this mode"), "\(single.output)")
    }
}
