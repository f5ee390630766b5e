import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// Many listeners with the same filter share one read and one filter run per commit
/// (`SharedFeedReads`); each must still get exactly its own changes, in order, and listeners
/// whose filter answers differently (another user, other query parameters) must not share.
@Suite("Shared listener reads", .timeLimit(.minutes(3)))
struct SharedListenerTests {
    /// Reads a continuous feed until `count` rows arrived (or 20 s); the ids in order.
    static func collect(_ client: HTTPClient, _ s: TestServer, _ path: String, auth: TestServer.Auth, count: Int) async throws -> [String] {
        var request = HTTPClientRequest(url: s.baseURL + path)
        switch auth {
        case let .basic(name, password): request.headers.add(name: "Authorization", value: TestServer.basic(name, password))
        case .admin: request.headers.add(name: "Authorization", value: TestServer.basic(TestServer.admin.0, TestServer.admin.1))
        default: break
        }
        let response = try await client.execute(request, timeout: .seconds(60))
        #expect(response.status == .ok)
        var ids: [String] = []
        var buffer: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(20)
        for try await chunk in response.body {
            buffer += Array(buffer: chunk)
            while let newline = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<newline])
                buffer.removeFirst(newline + 1)
                if let id = (try? JSON.parse(line))?["id"]?.stringValue { ids.append(id) }
            }
            if ids.count >= count || ContinuousClock.now > deadline { break }
        }
        return ids
    }

    @Test("Forty listeners of two users with a JavaScript filter on req.userCtx and a query parameter each get exactly their own changes, in order")
    func sharedButCorrect() async throws {
        let s = try TestServer()
        defer { s.stop() }
        for name in ["una", "val"] {
            #expect(try await s.request(.PUT, "/_users/org.couchdb.user:\(name)", json: ["name": .string(name), "type": "user", "roles": [], "password": "pw"]).status == 201)
        }
        #expect(try await s.request(.PUT, "/shared").status == 201)
        #expect(try await s.request(.PUT, "/shared/_security", json: ["members": ["names": ["una", "val"], "roles": []]]).status == 200)
        #expect(try await s.request(.PUT, "/shared/_design/app", json: [
            "filters": ["mine": "function (doc, req) { return doc.owner === req.userCtx.name && doc.kind === req.query.kind; }"],
        ]).status == 201)
        let writes = 30
        // Per user and kind: what each listener must see.
        var expected: [String: [String]] = [:]
        for i in 0..<writes {
            let owner = i % 2 == 0 ? "una" : "val", kind = i % 3 == 0 ? "photo" : "fix"
            expected["\(owner)/\(kind)", default: []].append("doc-\(i)")
        }
        let since = try await s.request(.GET, "/shared").json["update_seq"]?.stringValue ?? "0"
        // Forty feeds at once: more connections than the shared client's pool opens to one host.
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let listeners = (0..<40).map { i in
            let user = i % 2 == 0 ? "una" : "val", kind = i % 4 < 2 ? "fix" : "photo"
            let count = expected["\(user)/\(kind)"]?.count ?? 0
            return ("\(user)/\(kind)", Task {
                try await Self.collect(client, s, "/shared/_changes?feed=continuous&since=\(since)&filter=app/mine&kind=\(kind)&heartbeat=1000",
                                       auth: .basic(user, "pw"), count: count)
            })
        }
        try await Task.sleep(for: .milliseconds(500))
        for i in 0..<writes {
            let owner = i % 2 == 0 ? "una" : "val", kind = i % 3 == 0 ? "photo" : "fix"
            #expect(try await s.request(.PUT, "/shared/doc-\(i)", json: ["owner": .string(owner), "kind": .string(kind)]).status == 201)
        }
        for (key, task) in listeners {
            let ids = try await task.value
            #expect(ids == expected[key], "\(key): \(ids)")
        }
    }

    @Test("Filtered feeds wait on their question's watcher: one that joins from before the watcher began, and one that began with it, both get each match, and nothing else")
    func watcherJoinedFromBefore() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/watched").status == 201)
        #expect(try await s.request(.PUT, "/watched/early", json: ["n": 0]).status == 201)
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let query = "filter=_doc_ids&doc_ids=%5B%22early%22%2C%22target%22%5D&heartbeat=500"
        let now = try await s.request(.GET, "/watched").json["update_seq"]?.stringValue ?? "0"
        // The first feed starts the watcher at the current position.
        let first = Task { try await Self.collect(client, s, "/watched/_changes?feed=continuous&since=\(now)&\(query)", auth: .admin, count: 1) }
        try await Task.sleep(for: .milliseconds(300))
        for i in 1...5 { #expect(try await s.request(.PUT, "/watched/other-\(i)", json: ["n": .int(i)]).status == 201) }
        // The second asks the same question from the start: before the watcher began.
        let second = Task { try await Self.collect(client, s, "/watched/_changes?feed=continuous&since=0&\(query)", auth: .admin, count: 2) }
        try await Task.sleep(for: .milliseconds(300))
        for i in 6...8 { #expect(try await s.request(.PUT, "/watched/other-\(i)", json: ["n": .int(i)]).status == 201) }
        #expect(try await s.request(.PUT, "/watched/target", json: ["n": 9]).status == 201)
        #expect(try await first.value == ["target"])
        #expect(try await second.value == ["early", "target"])
        // A longpoll with the filter answers at the match, not at the other commits.
        let poll = Task { try await s.request(.GET, "/watched/_changes?feed=longpoll&since=now&filter=_doc_ids&doc_ids=%5B%22late%22%5D&timeout=10000") }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await s.request(.PUT, "/watched/noise", json: ["n": 10]).status == 201)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await s.request(.PUT, "/watched/late", json: ["n": 11]).status == 201)
        let answer = try await poll.value.json
        #expect(answer["results"]?.arrayValue?.map { $0["id"] } == ["late"], "\(answer.text)")
    }
}
