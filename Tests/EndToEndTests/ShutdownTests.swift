import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// SIGTERM (what `systemctl stop` sends): writes acknowledged before it are kept, and a
/// continuous replication checkpoints as it stops, so the next start resumes from there.
@Suite("Graceful shutdown", .serialized)
struct ShutdownTests {
    /// Writes `count` documents one by one with four clients until told to stop or the server
    /// goes; the ids the server acknowledged.
    static func burst(_ s: TestServer, _ db: String, prefix: String, stop: Locked<Bool>) async -> [String] {
        await withTaskGroup(of: [String].self) { group in
            for client in 0..<4 {
                group.addTask {
                    var acknowledged: [String] = []
                    var n = 0
                    while !stop.withLock({ $0 }) {
                        let id = "\(prefix)-\(client)-\(n)"
                        guard let answer = try? await s.request(.PUT, "/\(db)/\(id)", json: ["n": .int(n)], timeout: .seconds(10)) else { break }
                        if answer.status == 201 { acknowledged.append(id) }
                        n += 1
                    }
                    return acknowledged
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
    }

    @Test("SIGTERM during a write burst: every acknowledged write is there after the restart")
    func acknowledgedWritesSurvive() async throws {
        let directory = try TemporaryDirectory("lt-shutdown")
        defer { directory.cleanup() }
        let first = try TestServer(dataDirectory: directory.url)
        #expect(try await first.request(.PUT, "/burst").status == 201)
        let stop = Locked(false)
        async let written = Self.burst(first, "burst", prefix: "w", stop: stop)
        try await Task.sleep(for: .milliseconds(500))
        first.process.terminate()  // SIGTERM
        first.process.waitUntilExit()
        stop.withLock { $0 = true }
        let acknowledged = await written
        #expect(first.process.terminationReason == .exit && first.process.terminationStatus == 0, "stopped by \(first.process.terminationStatus)")
        #expect(acknowledged.count > 20)
        let second = try TestServer(dataDirectory: directory.url)
        defer { second.stop() }
        let stored = Set(try await second.request(.GET, "/burst/_all_docs").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
        let missing = acknowledged.filter { !stored.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) acknowledged writes lost, e.g. \(missing.prefix(3))")
    }

    @Test("SIGTERM while a continuous _replicator job copies a source being written: it checkpoints, and after the restart it resumes there instead of reading the source again")
    func replicationResumesFromItsCheckpoint() async throws {
        let source = try TestServer()
        defer { source.stop() }
        #expect(try await source.request(.PUT, "/src").status == 201)
        let directory = try TemporaryDirectory("lt-shutdown")
        defer { directory.cleanup() }
        let target = try TestServer(dataDirectory: directory.url)
        let sourceURL = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(source.port)/src"
        #expect(try await target.request(.PUT, "/_replicator/follow", json: [
            "source": .string(sourceURL), "target": "dst", "create_target": true, "continuous": true,
        ]).status == 201)
        // The source written all along; the target stopped while it copies.
        let stop = Locked(false)
        async let written = Self.burst(source, "src", prefix: "r", stop: stop)
        let copying = try await eventually(30) { (try? await target.request(.GET, "/dst").json["doc_count"]?.intValue ?? 0) ?? 0 > 200 }
        #expect(copying)
        // Read just before the signal: whatever is copied after it only loosens the bound below.
        let copiedBefore = try await target.request(.GET, "/dst").json["doc_count"]?.intValue ?? 0
        target.process.terminate()
        target.process.waitUntilExit()
        stop.withLock { $0 = true }
        let total = await written.count

        let restarted = try TestServer(dataDirectory: directory.url)
        defer { restarted.stop() }
        let caughtUp = try await eventually(60) { (try? await restarted.request(.GET, "/dst").json["doc_count"]?.intValue) == total }
        #expect(caughtUp, "the restarted replication did not catch up")
        let info = try await restarted.request(.GET, "/_scheduler/docs/_replicator/follow").json["info"]
        let read = info?["docs_read"]?.intValue ?? -1
        // What the source gained after the checkpoint, not the whole source again.
        #expect(read >= 0 && read <= total - copiedBefore + 100, "read \(read) after the restart; \(copiedBefore) of \(total) were copied before it")
    }
}
