import CouchJSON
@testable import CouchEngine
import Foundation
import Testing
import GRDB

/// The database's `sizes` come from a total the writer keeps (no scan per `GET /{db}`): after
/// any mix of writes, it must equal a fresh count of what the live documents keep.
@Suite("Live bytes kept by the writer")
struct LiveBytesTests {
    func scan(_ db: DocumentDatabase) async throws -> Int {
        try await db.reading { try RevisionStore.liveSize($0) }
    }

    func sizes(_ db: DocumentDatabase) async throws -> (file: Int, external: Int, active: Int) {
        let sizes = try await db.info()["sizes"]
        return (sizes?["file"]?.intValue ?? -1, sizes?["external"]?.intValue ?? -1, sizes?["active"]?.intValue ?? -1)
    }

    @Test("sizes.external equals a fresh count through edits, deletions, recreations, attachments, conflicts, purges and compaction", arguments: [5, 23, 88] as [UInt64])
    func runningTotalMatchesScan(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 4)
        var random = SeededRandom(seed: seed)
        let db = try await store.create("live")
        var revs: [String: Revision] = [:]
        func padding() -> String { String(repeating: "x", count: Int.random(in: 0...3_000, using: &random)) }
        for step in 0..<250 {
            let id = "doc-\(Int.random(in: 0..<30, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                // A write, or a recreation on top of a tombstone.
                revs[id] = try? await db.update(DocumentInput(id: id, rev: revs[id], body: ["pad": .string(padding())]))
            case 4:
                // With attachments: new, and kept as stubs by later edits of their own.
                let data = Data((0..<Int.random(in: 1...5_000, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) })
                var body: JSONObject = ["_attachments": ["a.bin": ["content_type": "application/octet-stream", "data": .string(data.base64EncodedString())]]]
                if let rev = revs[id] { body["_rev"] = .string(rev.description) }
                body["_id"] = .string(id)
                revs[id] = try? await db.update(try DocumentInput(json: .object(body)))
            case 5:
                guard let rev = revs[id] else { continue }
                revs[id] = try? await db.update(DocumentInput(id: id, rev: rev, deleted: true))
            case 6:
                // A replicated branch: it may win (a higher hash) or stay a conflict.
                let hash = Hex.string((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) })
                let doc = try DocumentInput(json: ["_id": .string(id), "_rev": .string("1-" + hash), "pad": .string(padding())])
                _ = try await db.update([doc], newEdits: false)
            case 7:
                // Purging a leaf: the document goes, or another branch wins.
                let leaves = (try? await db.openRevisions(id: id, revs: nil, latest: false, options: ReadOptions())) ?? []
                guard case let .ok(doc)? = leaves.randomElement(using: &random), let rev = doc["_rev"]?.stringValue.flatMap(Revision.init) else { continue }
                _ = try await db.purge([(id: id, revs: [rev])])
                revs[id] = nil
            case 8:
                if Int.random(in: 0..<8, using: &random) == 0 { try await db.compact() }
            default:
                _ = try await db.setRevsLimit(Int.random(in: 1...5, using: &random))
            }
            // The winner's revision as the writer last saw it may be another now (conflicts).
            if let winner = try? await db.document(id: id)["_rev"]?.stringValue.flatMap(Revision.init) { revs[id] = winner }
            let (file, external, active) = try await sizes(db)
            let counted = try await scan(db)
            #expect(external == counted, "step \(step) (seed \(seed))")
            #expect(active <= external && active < file, "step \(step): active \(active), external \(external), file \(file)")
        }
    }

    @Test("A database written before the total was kept counts it once, then keeps it")
    func countedOnceForOlderDatabases() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 4)
        let db = try await store.create("older")
        for i in 0..<20 { _ = try await db.update(DocumentInput(id: "d\(i)", body: ["n": .int(i), "text": .string(String(repeating: "y", count: i * 10))])) }
        let kept = try await sizes(db).external
        // As a database from before: no total in its meta table.
        _ = try await db.writing { try $0.execute(sql: "DELETE FROM meta WHERE key = 'live_bytes'") }
        #expect(try await sizes(db).external == kept)
        // Counted once, then kept (reading the database's information stores the count).
        #expect(try await db.reading { try DatabaseFile.meta($0, "live_bytes") } == String(kept))
        _ = try await db.update(DocumentInput(id: "d-new", body: ["n": 1]))
        #expect(try await sizes(db).external == (try await scan(db)))
    }
}
