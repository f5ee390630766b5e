import AsyncHTTPClient
import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

@Suite("Durability", .serialized, .timeLimit(.minutes(3)))
struct CrashTests {
    /// Users' databases are opened without file locks, so a data directory serves one process:
    /// a second `lt serve` on it, and `lt replicate` from a path in it, are refused with the
    /// reason while the first runs; once it has stopped (or been killed), they work.
    @Test("A data directory serves one process at a time: a second server and a local replication are refused while it runs")
    func directoryServesOneProcess() async throws {
        let directoryHolder = try TemporaryDirectory("lt-lock")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        let server = try TestServer(dataDirectory: directory)
        _ = try await server.request(.PUT, "/lt_locations_user_ann")
        _ = try await server.request(.PUT, "/lt_locations_user_ann/fix1", json: ["lat": 37.4, "lon": -122.3])

        let second = try TestServer.runLT(["serve", "--data", directory.path, "--db-port", "0", "--port", "0", "--admin", "a:b"])
        #expect(second.status != 0)
        #expect(second.errors.contains("in use by another lt process"))
        let copyDirectory = try TemporaryDirectory("lt-lock-copy")
        defer { copyDirectory.cleanup() }
        let copy = ["replicate", directory.appendingPathComponent("lt_locations_user_ann").path,
                    copyDirectory.url.appendingPathComponent("ann").path, "--create-target"]
        let refused = try TestServer.runLT(copy)
        #expect(refused.status != 0)
        #expect(refused.errors.contains("in use by another lt process"))

        server.kill()
        let copied = try TestServer.runLT(copy)
        #expect(copied.status == 0, "\(copied.errors)")
        #expect(try await DatabaseStore(directory: copyDirectory.url).open("ann").document(id: "fix1")["lat"] == 37.4)
        let restarted = try TestServer(dataDirectory: directory)
        defer { restarted.stop() }
        #expect(try await restarted.request(.GET, "/lt_locations_user_ann/fix1").status == 200)
    }

    /// Eight clients write as fast as they can; the server is killed with SIGKILL mid-stream.
    /// After a restart every write that had been acknowledged must be there with its revision.
    @Test("Every acknowledged write survives kill -9, in a shared database (WAL pool) and a user's (one connection without file locks, WAL)",
          arguments: ["crash", "lt_locations_user_crash"])
    func acknowledgedWritesSurviveSIGKILL(db: String) async throws {
        let directoryHolder = try TemporaryDirectory("lt-crash")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        let server = try TestServer(dataDirectory: directory)
        _ = try await server.request(.PUT, "/\(db)")
        let acknowledged = try await withThrowingTaskGroup(of: [(String, String)].self) { group in
            for client in 0..<8 {
                group.addTask {
                    var acked: [(String, String)] = []
                    var i = 0
                    while true {
                        let id = "c\(client)-\(i)"
                        let reply: TestServer.Reply
                        do {
                            if i % 10 == 9 {
                                reply = try await server.request(.POST, "/\(db)/_bulk_docs", json: ["docs": .array((0..<20).map {
                                    ["_id": .string("\(id)-b\($0)"), "lat": 37.4, "lon": -122.3]
                                })], timeout: .seconds(5))
                                if reply.status == 201 {
                                    for row in reply.json.arrayValue ?? [] {
                                        if let id = row["id"]?.stringValue, let rev = row["rev"]?.stringValue { acked.append((id, rev)) }
                                    }
                                }
                            } else {
                                reply = try await server.request(.PUT, "/\(db)/\(id)", json: ["lat": 37.4, "lon": -122.3, "i": .int(i)], timeout: .seconds(5))
                                if reply.status == 201, let rev = reply.json["rev"]?.stringValue { acked.append((id, rev)) }
                            }
                        } catch {
                            return acked  // the server is gone
                        }
                        i += 1
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(1500))
            server.kill()
            var all: [(String, String)] = []
            for try await part in group { all += part }
            return all
        }
        #expect(acknowledged.count > 50, "too few writes happened before the kill to mean anything")
        let restarted = try TestServer(dataDirectory: directory)
        defer { restarted.stop() }
        var missing = 0
        for chunk in stride(from: 0, to: acknowledged.count, by: 500) {
            let slice = acknowledged[chunk..<min(chunk + 500, acknowledged.count)]
            let reply = try await restarted.request(.POST, "/\(db)/_all_docs", json: ["keys": .array(slice.map { .string($0.0) })])
            for (row, expected) in zip(reply.json["rows"]?.arrayValue ?? [], slice) where row["value"]?["rev"] != .string(expected.1) {
                missing += 1
            }
        }
        #expect(missing == 0, "\(missing) of \(acknowledged.count) acknowledged writes were lost")
        let info = try await restarted.request(.GET, "/\(db)").json
        #expect((info["doc_count"]?.intValue ?? 0) >= acknowledged.count)
    }
}
