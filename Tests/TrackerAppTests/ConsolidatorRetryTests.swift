import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPTypes
import LTTestSupport
import Logging
import Testing
import TrackerApp

/// The consolidator on a real store and real SQLite files, in process, behind a client that
/// fails chosen requests.
@Suite("Consolidator retries", .timeLimit(.minutes(1)))
struct ConsolidatorRetryTests {
    /// Once armed, answers 500 to the next `_changes` of each user database; passes every
    /// other request through.
    final class Flaky: CouchClient {
        let inner: InProcessCouch
        let armed = Locked(false)
        let failed = Locked<Set<String>>([])
        init(_ inner: InProcessCouch) { self.inner = inner }
        func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply {
            if armed.withLock({ $0 }), path.hasPrefix("/lt_locations_user_"), path.hasSuffix("/_changes"), failed.withLock({ $0.insert(path).inserted }) {
                return CouchReply(status: 500, body: JSON.object(["error": "unknown", "reason": "injected"]).bytes)
            }
            return try await inner.request(method, path, query: query, body: body)
        }
        func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
            try await inner.verify(name: name, password: password)
        }
    }

    /// The application on a store of real SQLite files in `directory`, with `user` registered.
    static func application(in directory: TemporaryDirectory, user: String) async throws -> (api: CouchAPI, couch: InProcessCouch) {
        let store = try DatabaseStore(directory: directory.url.appendingPathComponent("data"), connections: { _ in .single })
        let api = CouchAPI(store: store, settings: try ServerSettings.load(from: directory.url), options: CouchAPI.Options(), logger: Logger(label: "test"))
        try await api.prepareSystemDatabases()
        let couch = InProcessCouch(api: api)
        let service = TrackerService(couch: couch, passwordIterations: 1, logger: Logger(label: "test"))
        try await service.prepare(places: [])
        _ = try await service.register(username: user, password: "secret-password")
        return (api, couch)
    }

    @Test("A user's database that could not be read is read again without waiting for another write to it")
    func unreadableIsRetried() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let (api, couch) = try await Self.application(in: directory, user: "alice")
        let flaky = Flaky(couch)
        let consolidation = Task { await Consolidator(couch: flaky).run() }
        defer { consolidation.cancel() }
        try await Task.sleep(for: .milliseconds(500))  // the start-up sweep has read alice's database
        flaky.armed.withLock { $0 = true }
        #expect(await api.perform(.put, "/lt_locations_user_alice/fix-1", body: ["type": "Feature", "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]]]).status == 201)
        var copied = 0
        for _ in 0..<80 where copied == 0 {
            try await Task.sleep(for: .milliseconds(100))
            copied = await api.perform(.get, "/lt_locations_all/alice:fix-1").status == 200 ? 1 : 0
        }
        #expect(copied == 1)
        #expect(flaky.failed.withLock { $0.contains("/lt_locations_user_alice/_changes") })
    }

    /// Once armed, answers the next `_changes` of each user database without its last change,
    /// as a cluster copy still being refilled does.
    final class Partial: CouchClient {
        let inner: InProcessCouch
        let armed = Locked(false)
        let shortened = Locked<Set<String>>([])
        init(_ inner: InProcessCouch) { self.inner = inner }
        func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply {
            let reply = try await inner.request(method, path, query: query, body: body)
            guard armed.withLock({ $0 }), path.hasPrefix("/lt_locations_user_"), path.hasSuffix("/_changes"), reply.status == 200,
                  var rows = reply.json["results"]?.arrayValue, !rows.isEmpty, shortened.withLock({ $0.insert(path).inserted }) else { return reply }
            rows.removeLast()
            let last = rows.last?["seq"] ?? .string(query["since"] ?? "0")
            return CouchReply(status: 200, body: JSON.object(["results": .array(rows), "last_seq": last, "pending": 0]).bytes)
        }
        func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
            try await inner.verify(name: name, password: password)
        }
    }

    @Test("A database whose changes feed did not yet show its last change is looked at again after its last change, with no further write, while the cluster is disturbed (a copy refilled by internal replication raises no event); not otherwise (a look at every change would be reads for nothing)",
          arguments: [true, false])
    func lateLook(disturbed: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let (api, couch) = try await Self.application(in: directory, user: "bea")
        let partial = Partial(couch)
        let consolidation = Task { await Consolidator(couch: partial, lateLooks: [.seconds(1)], disturbed: { disturbed }).run() }
        defer { consolidation.cancel() }
        try await Task.sleep(for: .milliseconds(500))  // the start-up sweep has read bea's database
        partial.armed.withLock { $0 = true }
        let fix: JSON = ["type": "Feature", "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]]]
        #expect(await api.perform(.put, "/lt_locations_user_bea/fix-1", body: fix).status == 201)
        var copied = false
        for _ in 0..<50 where !copied {
            try await Task.sleep(for: .milliseconds(100))
            copied = await api.perform(.get, "/lt_locations_all/bea:fix-1").status == 200
        }
        #expect(partial.shortened.withLock { $0.contains("/lt_locations_user_bea/_changes") }, "the feed was shortened once")
        #expect(copied == disturbed, disturbed ? "copied by the late look, without another write" : "no late look while the cluster is steady")
    }
}
