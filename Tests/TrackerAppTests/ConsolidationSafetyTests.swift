import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPTypes
import JavaScript
import LTServer
import LTTestSupport
import Logging
import Testing
import TrackerApp

/// Consolidation never loses a location: not on a server without a JavaScript engine, and not
/// when `lt_locations_all` refuses a document (issue 22's F7). In process, on real SQLite files,
/// with the server's own validator and no query server at all.
@Suite("Consolidation safety", .timeLimit(.minutes(2)))
struct ConsolidationSafetyTests {
    /// A server without JavaScript: the validator has no query server, as `lt serve` built
    /// without Duktape (or with `--javascript off`) has.
    static func serverWithoutJavaScript(_ directory: URL) async throws -> (CouchAPI, TrackerService) {
        let store = try DatabaseStore(
            directory: directory.appendingPathComponent("data"),
            validator: DesignDocumentValidator(queryServer: nil, native: LocationTrackerServer.nativeValidators), connections: { _ in .single })
        let api = CouchAPI(store: store, settings: try ServerSettings.load(from: directory), options: CouchAPI.Options(), logger: Logger(label: "test"))
        try await api.prepareSystemDatabases()
        let service = TrackerService(couch: InProcessCouch(api: api), passwordIterations: 1, logger: Logger(label: "test"))
        try await service.prepare(places: [])
        return (api, service)
    }

    static func location(_ i: Int) -> JSON {
        ["type": "Feature", "created_at": .int(1_700_000_000_000 + i), "geometry": ["type": "Point", "coordinates": [-122.3, .double(37.4 + Double(i) / 1000)]]]
    }

    /// Waits until `id` is in `lt_locations_all`; whether it arrived.
    static func arrives(_ api: CouchAPI, _ id: String, within seconds: Double = 15) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if await api.perform(.get, "/lt_locations_all/\(id)").status == 200 { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    @Test("Without a JavaScript engine, every location still reaches lt_locations_all, which still refuses its readers' writes (native validation)")
    func withoutJavaScript() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let (api, service) = try await Self.serverWithoutJavaScript(directory.url)
        _ = try await service.register(username: "gus", password: "secret-password")
        let consolidator = Consolidator(couch: InProcessCouch(api: api))
        let consolidation = Task { await consolidator.run() }
        defer { consolidation.cancel() }
        for i in 0..<20 {
            #expect(await api.perform(.put, "/lt_locations_user_gus/fix-\(i)", body: Self.location(i)).status == 201)
        }
        for i in 0..<20 { #expect(try await Self.arrives(api, "gus:fix-\(i)"), "fix-\(i) never reached lt_locations_all") }
        #expect(consolidator.status.refused.isEmpty)
        // The read-only rule of lt_locations_all holds without JavaScript: an analyst's write is refused.
        #expect(await api.perform(.put, "/_users/org.couchdb.user:ann", body: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw"]).status == 201)
        let analyst = UserContext(name: "ann", roles: ["analyst"])
        let write = await api.perform(.put, "/lt_locations_all/by-analyst", body: ["x": 1], user: analyst)
        #expect(write.status == 403, "\(String(decoding: write.body, as: UTF8.self))")
    }

    @Test("A location lt_locations_all refuses is retried, its database's checkpoint stays before it, the refusal is reported, and it arrives once it can")
    func refusedIsRetriedNeverSkipped() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let (api, service) = try await Self.serverWithoutJavaScript(directory.url)
        _ = try await service.register(username: "hal", password: "secret-password")
        // A JavaScript validation function on a server without JavaScript: every write to
        // lt_locations_all is refused (500 javascript_unavailable) until it goes.
        let blocker = await api.perform(.put, "/lt_locations_all/_design/blocker", body: [
            "validate_doc_update": "function (newDoc) { if (newDoc.blocked) { throw({forbidden: 'blocked'}); } }",
        ])
        #expect(blocker.status == 201)
        let consolidator = Consolidator(couch: InProcessCouch(api: api))
        let consolidation = Task { await consolidator.run() }
        defer { consolidation.cancel() }
        for i in 0..<5 { #expect(await api.perform(.put, "/lt_locations_user_hal/fix-\(i)", body: Self.location(i)).status == 201) }
        // Refused and reported, never skipped: the checkpoint has not moved past them.
        var status = consolidator.status
        for _ in 0..<100 where status.refused.isEmpty {
            try await Task.sleep(for: .milliseconds(100))
            status = consolidator.status
        }
        #expect(status.refused.contains { $0.database == "lt_locations_user_hal" && $0.error == "javascript_unavailable" }, "\(status.json.text)")
        #expect(status.retrying >= 1 && status.json["ok"] == false)
        #expect(await api.perform(.get, "/lt_locations_all/hal:fix-0").status == 404)
        let checkpoint = await api.perform(.get, "/lt_locations_all/_local/consolidated-lt_locations_user_hal")
        #expect(checkpoint.status == 404, "the checkpoint moved past refused locations")
        // A later write of the same user does not carry the checkpoint past them either.
        #expect(await api.perform(.put, "/lt_locations_user_hal/fix-5", body: Self.location(5)).status == 201)
        try await Task.sleep(for: .milliseconds(500))
        #expect(await api.perform(.get, "/lt_locations_all/_local/consolidated-lt_locations_user_hal").status == 404)

        // The obstacle goes: every location arrives (at the next retry, within its backoff).
        let blockerDoc = await api.perform(.get, "/lt_locations_all/_design/blocker")
        let rev = (try? JSON.parse(blockerDoc.body))?["_rev"]?.stringValue ?? ""
        #expect(await api.perform(.delete, "/lt_locations_all/_design/blocker", query: ["rev": rev]).status == 200)
        for i in 0...5 { #expect(try await Self.arrives(api, "hal:fix-\(i)", within: 30), "fix-\(i) was lost") }
        for _ in 0..<50 where !consolidator.status.refused.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        #expect(consolidator.status.refused.isEmpty && consolidator.status.retrying == 0, "\(consolidator.status.json.text)")
        // The checkpoint is saved beside the rounds, within a second or so of the copy.
        #expect(try await Self.arrives(api, "_local/consolidated-lt_locations_user_hal", within: 5))
    }

    @Test("Checkpoints are saved beside the rounds, at most about once a second, and a restart after a save copies nothing again")
    func checkpointsSavedBesideRounds() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let (api, service) = try await Self.serverWithoutJavaScript(directory.url)
        _ = try await service.register(username: "ivy", password: "secret-password")
        let consolidator = Consolidator(couch: InProcessCouch(api: api))
        let consolidation = Task { await consolidator.run() }
        // A write every 50 ms for 2.5 s: a round each (rounds start at most every 100 ms).
        let started = ContinuousClock.now
        for i in 0..<50 {
            #expect(await api.perform(.put, "/lt_locations_user_ivy/fix-\(i)", body: Self.location(i)).status == 201)
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await Self.arrives(api, "ivy:fix-49"))
        try await Task.sleep(for: .milliseconds(2500))
        let elapsed = started.duration(to: .now).seconds
        let rounds = consolidator.statistics.rounds
        consolidation.cancel()
        _ = await consolidation.value
        // `_local` revisions count the saves: "0-N" after N saves.
        let checkpoint = await api.perform(.get, "/lt_locations_all/_local/consolidated-lt_locations_user_ivy")
        #expect(checkpoint.status == 200)
        let json = try JSON.parse(checkpoint.body)
        let saves = Int(json["_rev"]?.stringValue?.split(separator: "-").last ?? "") ?? 0
        #expect(rounds >= 10, "only \(rounds) rounds: the test did not make many rounds")
        #expect(saves >= 1 && Double(saves) <= elapsed + 2, "\(saves) checkpoint saves in \(elapsed) s and \(rounds) rounds")
        // The saved checkpoint covers every copy: a new consolidator finds nothing to copy.
        let again = Consolidator(couch: InProcessCouch(api: api))
        let second = Task { await again.run() }
        defer { second.cancel() }
        for _ in 0..<100 where again.status.sweepRemaining > 0 || again.statistics.swept == 0 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(again.statistics.swept >= 1 && again.statistics.documentsCopied == 0, "\(again.status.json.text)")
    }
}
