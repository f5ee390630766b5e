import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import Replication
import Testing

func withStore(_ body: (DatabaseStore) async throws -> Void) async throws {
    let directory = try TemporaryDirectory("lt-repl")
    defer { directory.cleanup() }
    try await body(try DatabaseStore(directory: directory.url))
}

func replicate(_ store: DatabaseStore, _ from: String, _ to: String, _ configure: (inout ReplicationOptions) -> Void = { _ in }) async throws -> ReplicationResult {
    var options = ReplicationOptions()
    configure(&options)
    return try await Replication(source: LocalEndpoint(store: store, name: from), target: LocalEndpoint(store: store, name: to), options: options).run()
}

/// Everything replication must agree on: per document, the winner and its body, every leaf with
/// its deleted flag and full history.
func snapshot(_ db: DocumentDatabase) async throws -> [String: JSON] {
    var out: [String: JSON] = [:]
    var options = ChangesOptions()
    options.allLeaves = true
    for row in try await db.changes(options).rows {
        let id = row["id"]!.stringValue!
        var read = ReadOptions()
        read.revs = true
        let leaves = try await db.openRevisions(id: id, revs: nil, latest: false, options: read).compactMap { result -> JSON? in
            if case let .ok(doc) = result { return .object(doc) }
            return nil
        }.sorted { $0["_rev"]!.stringValue! < $1["_rev"]!.stringValue! }
        let winner = try await db.winningRevision(id: id)!
        out[id] = ["winner": .string(winner.rev.description), "deleted": .bool(winner.deleted), "leaves": .array(leaves)]
    }
    return out
}

@Suite("Replication between local databases")
struct ReplicationTests {
    @Test("Three replicas with random edits, deletes and conflicts converge after replicating in random orders")
    func convergence() async throws {
        var conflictsSeen = 0
        for seed in 0..<12 {
            try await withStore { store in
                var rng = SeededRandom(seed: UInt64(seed))
                let names = ["r0", "r1", "r2"]
                for name in names { try await store.create(name) }
                let ids = (0..<6).map { "doc\($0)" }
                for _ in 0..<60 {
                    let replica = try await store.open(names.randomElement(using: &rng)!)
                    let id = ids.randomElement(using: &rng)!
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0..<5:
                        let current = try await replica.winningRevision(id: id)
                        var input = DocumentInput(id: id, body: ["v": .int(Int.random(in: 0..<1000, using: &rng))])
                        if let current, !current.deleted { input.rev = current.rev }
                        _ = try? await replica.update(input)
                    case 5..<7:
                        if let current = try await replica.winningRevision(id: id), !current.deleted {
                            _ = try await replica.update(DocumentInput(id: id, rev: current.rev, deleted: true))
                        }
                    default:
                        let from = names.randomElement(using: &rng)!
                        let to = names.filter { $0 != from }.randomElement(using: &rng)!
                        _ = try await replicate(store, from, to)
                    }
                }
                for _ in 0..<2 {
                    for from in names { for to in names where to != from { _ = try await replicate(store, from, to) } }
                }
                let reference = try await snapshot(store.open("r0"))
                #expect(!reference.isEmpty)
                for name in names.dropFirst() {
                    let other = try await snapshot(store.open(name))
                    #expect(other == reference, "seed \(seed): \(name) differs from r0")
                }
                let conflicted = try await store.open("r0").conflicts.ids()
                conflictsSeen += conflicted.count
                for name in names.dropFirst() { #expect(try await store.open(name).conflicts.ids() == conflicted) }
            }
        }
        // The random histories must actually produce conflicts, or the test proves little.
        #expect(conflictsSeen >= 5, "only \(conflictsSeen) conflicted documents over all seeds")
    }

    @Test("A second run resumes from the checkpoint; filters carry only what they select")
    func checkpointsAndFilters() async throws {
        try await withStore { store in
            let source = try await store.create("src")
            for i in 0..<120 { _ = try await source.update(DocumentInput(id: "d\(i)", body: ["i": .int(i), "even": .bool(i % 2 == 0)])) }
            let first = try await replicate(store, "src", "dst") { $0.createTarget = true; $0.batchSize = 50 }
            #expect(first.status.docsWritten == 120 && first.startSeq == 0)
            for i in 120..<130 { _ = try await source.update(DocumentInput(id: "d\(i)", body: ["i": .int(i)])) }
            let second = try await replicate(store, "src", "dst")
            #expect(second.status.docsWritten == 10 && second.status.missingChecked == 10)
            #expect(second.startSeq == first.sourceLastSeq)
            let checkpoint = try await store.open("dst").local.get(id: "_local/\(second.replicationID)")
            #expect(checkpoint["session_id"] == .string(second.sessionID) && checkpoint["history"]?.arrayValue?.count == 2)
            let none = try await replicate(store, "src", "dst")
            #expect(none.status.docsWritten == 0)
            let ids = try await replicate(store, "src", "some") { $0.createTarget = true; $0.filter = .docIDs(["d1", "d7"]) }
            #expect(ids.status.docsWritten == 2)
            let even = try await replicate(store, "src", "evens") { $0.createTarget = true; $0.filter = .selector(["even": true]) }
            #expect(even.status.docsWritten == 60)
            #expect(try await store.open("evens").info()["doc_count"] == 60)
        }
    }

    @Test("Attachments go across once; later revisions send stubs")
    func attachments() async throws {
        try await withStore { store in
            let source = try await store.create("a")
            let data = Data((0..<5000).map { UInt8($0 % 251) }).base64EncodedString()
            let r1 = try await source.update(try DocumentInput(json: try JSON.parse(
                #"{"_id":"photo","_attachments":{"p.bin":{"content_type":"application/octet-stream","data":"\#(data)"}}}"#)))
            _ = try await replicate(store, "a", "b") { $0.createTarget = true }
            let (_, copied) = try await store.open("b").attachment(docID: "photo", rev: nil, name: "p.bin")
            #expect(Data(copied).base64EncodedString() == data)
            _ = try await source.update(try DocumentInput(json: try JSON.parse(
                #"{"_id":"photo","_rev":"\#(r1)","caption":"x","_attachments":{"p.bin":{"stub":true}}}"#)))
            // The second revision's fetch carries a stub, not the body again.
            let endpoint = LocalEndpoint(store: store, name: "a")
            let docs = try await endpoint.fetch([FetchRequest(id: "photo", revs: [try await source.winningRevision(id: "photo")!.rev], attsSince: [r1])])
            #expect(docs.first?["_attachments"]?["p.bin"]?["stub"] == true)
            _ = try await replicate(store, "a", "b")
            #expect(try await store.open("b").document(id: "photo")["caption"] == "x")
        }
    }

    @Test("Conflicts replicate as branches and resolve to one winner everywhere")
    func conflictResolution() async throws {
        try await withStore { store in
            let a = try await store.create("a")
            let rev = try await a.update(DocumentInput(id: "d", body: ["v": 0]))
            _ = try await replicate(store, "a", "b") { $0.createTarget = true }
            let b = try await store.open("b")
            _ = try await a.update(DocumentInput(id: "d", rev: rev, body: ["v": 1, "from": "a"]))
            _ = try await b.update(DocumentInput(id: "d", rev: rev, body: ["v": 2, "from": "b"]))
            _ = try await replicate(store, "a", "b")
            _ = try await replicate(store, "b", "a")
            #expect(try await a.conflicts.ids() == ["d"])
            #expect(try await b.conflicts.ids() == ["d"])
            let resolved = try await b.conflicts.resolve(id: "d") { winner, losers in
                var merged = winner
                merged["v"] = .int(([winner] + losers).compactMap { $0["v"]?.intValue }.reduce(0, +))
                merged["from"] = "merge"
                return merged
            }
            #expect(resolved != nil)
            _ = try await replicate(store, "b", "a")
            #expect(try await a.conflicts.ids().isEmpty)
            #expect(try await a.document(id: "d")["v"] == 3)
            #expect(try await snapshot(a) == snapshot(b))
        }
    }

    @Test("Status updates report progress and end in stopped; a missing source is an error")
    func statusAndErrors() async throws {
        try await withStore { store in
            let source = try await store.create("s")
            for i in 0..<30 { _ = try await source.update(DocumentInput(id: "x\(i)")) }
            var options = ReplicationOptions()
            options.createTarget = true
            options.batchSize = 10
            let replication = Replication(source: LocalEndpoint(store: store, name: "s"), target: LocalEndpoint(store: store, name: "t"), options: options)
            let updates = replication.statusUpdates()
            let collector = Task { var states: [ReplicationStatus] = []; for await status in updates { states.append(status) }; return states }
            _ = try await replication.run()
            let states = await collector.value
            #expect(states.last?.state == .stopped && states.last?.docsWritten == 30)
            #expect(states.contains { $0.state == .busy })
            await #expect(throws: ReplicationError.self) { _ = try await replicate(store, "nope", "t") }
        }
    }

    @Test("Continuous replication follows new writes until cancelled")
    func continuous() async throws {
        try await withStore { store in
            let source = try await store.create("live")
            var options = ReplicationOptions()
            options.continuous = true
            options.createTarget = true
            let replication = Replication(source: LocalEndpoint(store: store, name: "live"), target: LocalEndpoint(store: store, name: "mirror"), options: options)
            let running = Task { try await replication.run() }
            for i in 0..<5 {
                _ = try await source.update(DocumentInput(id: "c\(i)"))
                try await Task.sleep(for: .milliseconds(50))
            }
            var copied = 0
            for _ in 0..<100 where copied < 5 {
                try await Task.sleep(for: .milliseconds(50))
                copied = (try? await store.open("mirror").info()["doc_count"]?.intValue) ?? 0
            }
            #expect(copied == 5)
            running.cancel()
            let result = try await running.value
            #expect(result.status.docsWritten == 5 && replication.status.state == .stopped)
        }
    }
}
