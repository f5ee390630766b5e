@testable import CouchEngine
import CouchJSON
import Foundation
import LTTestSupport
import Testing

@Suite("Recent changes kept in memory")
struct RecentChangesTests {
    /// Random writes of every kind (new documents, edits, deletions, replicated conflicts,
    /// attachments, purges, databases deleted and created again) on single-connection databases
    /// that keep being closed and reopened, with a budget small enough to trim often; after
    /// each step, random `_changes` reads: whenever the memory answers, its answer is the
    /// database's, row for row.
    @Test("Answers exactly as the database does, or not at all", arguments: [1, 2, 3] as [UInt64])
    func matchesTheDatabase(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 2, connections: { _ in .single }, recentChangesBudget: 6_000)
        let names = ["a", "b", "c"]
        for name in names { try await store.create(name) }
        var answered = 0, asked = 0
        for step in 0..<600 {
            let name = names[Int.random(in: 0..<names.count, using: &random)]
            let db = try await store.open(name)
            // Two ids CouchDB tells apart that Swift's String equality takes for one.
            let id = ["doc0", "doc1", "doc2", "doc3", "doc4", "doc5", "\u{e9}", "e\u{301}"][Int.random(in: 0..<8, using: &random)]
            let current = try? await db.document(id: id)
            let rev = current?["_rev"]?.stringValue.flatMap(Revision.init)
            switch Int.random(in: 0..<20, using: &random) {
            case 0..<8:  // create or edit
                var input = DocumentInput(id: id, rev: rev, body: ["step": .int(step), "n": .string(String(repeating: "x", count: step % 50))])
                if step % 7 == 0 { input.attachments = ["a.txt": ["content_type": "text/plain", "data": .string(Data("hi \(step)".utf8).base64EncodedString())]] }
                _ = try? await db.update(input)
            case 8..<10:  // delete
                if let rev { _ = try? await db.update(DocumentInput(id: id, rev: rev, deleted: true)) }
            case 10..<13:  // a replicated revision: often a conflict, sometimes the new winner
                let pos = (rev?.pos ?? 0) + Int.random(in: 0...1, using: &random)
                let new = Revision(pos: max(pos, 1), hash: randomHash(&random))
                var input = DocumentInput(id: id, rev: new, deleted: Int.random(in: 0..<5, using: &random) == 0, body: ["replicated": .int(step)])
                input.revisions = [new]
                _ = try await db.update([input], newEdits: false)
            case 13:  // several documents in one commit
                let inputs = (0..<3).map { DocumentInput(id: "batch\(step)-\($0)", body: ["i": .int($0)]) }
                _ = try await db.update(inputs, newEdits: true)
            case 14:  // purge a leaf
                if let rev { _ = try await db.purge([(id: id, revs: [rev])]) }
            case 15 where step % 5 == 0:  // the database deleted and created again
                try await store.delete(name)
                try await store.create(name)
            default:
                break
            }
            for _ in 0..<3 {
                let db = try await store.open(names[Int.random(in: 0..<names.count, using: &random)])
                let top = try await db.updateSeq()
                var options = ChangesOptions()
                // Half of the reads since a recent sequence (as the consolidator's), half since any.
                options.since = Bool.random(using: &random)
                    ? max(0, top - Int.random(in: 0...3, using: &random)) : Int.random(in: 0...(top + 1), using: &random)
                options.limit = Bool.random(using: &random) ? nil : Int.random(in: 1...4, using: &random)
                options.includeDocs = Bool.random(using: &random)
                options.allLeaves = Bool.random(using: &random)
                asked += 1
                guard let page = store.recentChanges.page(
                    db.name, since: options.since, limit: options.limit, includeDocs: options.includeDocs, allLeaves: options.allLeaves)
                else { continue }
                answered += 1
                let expected = try await db.changes(options)
                #expect(page.rows == expected.rows, "step \(step), \(db.name) since \(options.since) limit \(String(describing: options.limit))")
                #expect(page.lastSeq == db.sequenceString(expected.lastSeq))
                #expect(page.pending == expected.pending)
            }
        }
        // Most reads are recent enough to be answered from memory; the rest are not answered.
        #expect(answered > asked / 4, "answered \(answered) of \(asked)")
        #expect(answered < asked)
    }

    @Test("A database opened again after being closed keeps its record; one deleted loses it")
    func survivesClosingNotDeleting() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 1, connections: { _ in .single })
        let a = try await store.create("a")
        _ = try await a.update(DocumentInput(id: "x", body: ["v": 1]))
        try await store.create("b")  // closes a
        #expect(store.recentChanges.page("a", since: 0, limit: nil, includeDocs: true, allLeaves: false)?.rows.count == 1)
        let reopened = try await store.open("a")
        _ = try await reopened.update(DocumentInput(id: "y", body: ["v": 2]))
        let page = try #require(store.recentChanges.page("a", since: 0, limit: nil, includeDocs: true, allLeaves: false))
        #expect(page.rows.compactMap { $0["id"]?.stringValue } == ["x", "y"])
        #expect(page.rows[1]["doc"]?["v"] == 2)
        try await store.delete("a")
        #expect(store.recentChanges.page("a", since: 0, limit: nil, includeDocs: false, allLeaves: false) == nil)
    }
}
