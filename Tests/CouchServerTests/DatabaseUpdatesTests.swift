import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

@Suite("_db_updates", .timeLimit(.minutes(3)))
struct DatabaseUpdatesTests {
    @Test("Created, updated and deleted databases, one row each; since, longpoll, other process's sequences, admins only")
    func feed() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/alpha")
        _ = try await s.request(.PUT, "/alpha/doc", json: ["n": 1])
        _ = try await s.request(.PUT, "/beta")
        _ = try await s.request(.DELETE, "/beta")
        let all = try await s.request(.GET, "/_db_updates")
        let rows = all.json["results"]?.arrayValue ?? []
        #expect(rows.contains { $0["db_name"] == "alpha" && $0["type"] == "updated" })
        #expect(rows.contains { $0["db_name"] == "beta" && $0["type"] == "deleted" })
        #expect(rows.filter { $0["db_name"] == "alpha" }.count == 1)
        let last = all.json["last_seq"]!.stringValue!
        #expect(try await s.request(.GET, "/_db_updates?since=\(last)").json["results"] == [])
        // A longpoll waits for the next commit anywhere.
        let writer = Task {
            try await Task.sleep(for: .milliseconds(300))
            _ = try await s.request(.PUT, "/alpha/later", json: ["n": 2])
        }
        let waited = try await s.request(.GET, "/_db_updates?feed=longpoll&since=\(last)&timeout=10000")
        _ = try await writer.value
        #expect(waited.json["results"]?.arrayValue?.map { $0["db_name"] } == ["alpha"])
        // A sequence from another process reads as the start.
        #expect((try await s.request(.GET, "/_db_updates?since=5-notthisone").json["results"]?.arrayValue?.count ?? 0) >= 2)
        #expect(try await s.request(.GET, "/_db_updates", auth: .none).status == 401)
    }
}
