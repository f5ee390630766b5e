import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `lt users create NAME --role analyst` against a real `lt serve`.
@Suite("lt users")
struct UsersCommandTests {
    @Test("An analyst made with lt users create reads everyone's locations and signs in to the dashboard; a taken name, a short password and another role are refused")
    func createAnalyst() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.app(.GET, "/api/analysis/locations", auth: .basic("ann", "analyst-pw-1")).status == 401)
        let created = try TestServer.runLT(["users", "create", "ann", "--role", "analyst", "--password", "analyst-pw-1", "--url", s.adminURL])
        #expect(created.status == 0 && created.output.hasPrefix("created analyst ann"), "\(created.output) \(created.errors)")
        #expect(try await s.app(.GET, "/api/analysis/locations", auth: .basic("ann", "analyst-pw-1")).status == 200)
        let session = try await s.app(.POST, "/api/session", json: ["username": "ann", "password": "analyst-pw-1"])
        #expect(session.status == 200 && session.json["roles"]?.arrayValue?.contains("analyst") == true, "\(session.text)")
        // Not a writer: lt_locations_all stays admins' alone.
        #expect(try await s.request(.PUT, "/lt_locations_all/x", json: ["a": 1], auth: .basic("ann", "analyst-pw-1")).status >= 400)

        let again = try TestServer.runLT(["users", "create", "ann", "--role", "analyst", "--password", "analyst-pw-2", "--url", s.adminURL])
        #expect(again.status != 0 && again.errors.contains("there is already an account named ann"), "\(again.errors)")
        let short = try TestServer.runLT(["users", "create", "bob", "--role", "analyst", "--password", "short", "--url", s.adminURL])
        #expect(short.status != 0 && short.errors.contains("at least 8 characters"), "\(short.errors)")
        let other = try TestServer.runLT(["users", "create", "bob", "--role", "admin", "--password", "analyst-pw-3", "--url", s.adminURL])
        #expect(other.status != 0 && other.errors.contains("analyst"), "\(other.errors)")
        let help = try TestServer.runLT(["users", "--help"]).output
        #expect(help.contains("lt users create NAME --role analyst"))
    }
}
