import CouchEngine
import CouchJSON
import Foundation
import GRDB
import Testing

/// A `docs` row keeps its revision tree empty when the tree is its winner alone
/// (`RevisionTree.stored`). Files written before that keep every tree as JSON; both must read
/// the same, through every reader of the tree.
@Suite("Revision trees as stored in docs rows")
struct StoredTreeTests {
    func doc(_ text: String) throws -> DocumentInput { try DocumentInput(json: try JSON.parse(text)) }

    /// The `docs` rows' stored trees, by id.
    func storedTrees(_ file: URL) throws -> [String: String] {
        let queue = try DatabaseQueue(path: file.path)
        return try queue.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, tree FROM docs").map { ($0[0] as String, $0[1] as String) })
        }
    }

    /// Every answer that reads a tree, for every document.
    func answers(_ db: DocumentDatabase, ids: [String]) async throws -> [String] {
        var read = ReadOptions()
        read.revs = true
        read.revsInfo = true
        read.conflicts = true
        read.deletedConflicts = true
        var out: [String] = []
        for id in ids {
            let document = try? await db.document(id: id, options: read)
            out.append(document.map { JSON.object($0).text } ?? "missing \(id)")
            let leaves = try await db.openRevisions(id: id, revs: nil, latest: true, options: read).map { revision -> String in
                switch revision {
                case .ok(let body): return JSON.object(body).text
                case .missing(let rev): return "missing \(rev)"
                }
            }
            out.append(leaves.joined(separator: "|"))
        }
        var changes = ChangesOptions()
        changes.allLeaves = true
        changes.includeDocs = true
        changes.read = read
        out.append(JSON.array(try await db.changes(changes).rows).text)
        var all = AllDocsOptions()
        all.includeDocs = true
        all.read = read
        out.append(JSON.array(try await db.allDocs(all).rows).text)
        let probe = ids.map { (id: $0, revs: [Revision(pos: 1, hash: "0123456789abcdef0123456789abcdef"), Revision(pos: 9, hash: "ff")]) }
        out.append(JSON.object(try await db.revsDiff(probe)).text)
        out.append(try await db.conflicts.ids().joined(separator: ","))
        return out
    }

    @Test("Written once, the tree is stored empty; answers are the same from rows in the older JSON form, and an edit of such a row continues its history")
    func elidedAndOlderForms() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let file = directory.url.appendingPathComponent("dbs/trees.sqlite")
        let ids = ["once", "edited", "gone", "replicated", "conflicted", "é"]
        var once: Revision?
        let before: [String]
        do {
            let store = try DatabaseStore(directory: directory.url, connections: { _ in .pool })
            let db = try await store.create("trees")
            once = try await db.update(try doc(#"{"_id":"once","n":1}"#))
            let edited = try await db.update(try doc(#"{"_id":"edited","n":1}"#))
            _ = try await db.update(try doc(#"{"_id":"edited","_rev":"\#(edited)","n":2}"#))
            let gone = try await db.update(try doc(#"{"_id":"gone","n":1}"#))
            _ = try await db.update(DocumentInput(id: "gone", rev: gone, deleted: true))
            _ = try await db.update(try doc(#"{"_id":"replicated","_rev":"5-aa","n":5}"#), newEdits: false)
            _ = try await db.update(try doc(#"{"_id":"conflicted","_rev":"1-aa","n":1}"#), newEdits: false)
            _ = try await db.update(try doc(#"{"_id":"conflicted","_rev":"1-bb","n":2}"#), newEdits: false)
            _ = try await db.update(try doc(#"{"_id":"é","_deleted":true}"#))
            before = try await answers(db, ids: ids)
        }
        let trees = try storedTrees(file)
        // One revision, no ancestor: empty, however it came (an edit, a replicated revision
        // at generation 5, a deletion as the first revision). More than one: JSON.
        #expect(trees["once"] == "" && trees["replicated"] == "" && trees["é"] == "")
        #expect(trees["edited"]?.hasPrefix("[[") == true && trees["gone"]?.hasPrefix("[[") == true && trees["conflicted"]?.hasPrefix("[[") == true)

        // The same rows as a file written before the empty form stores them.
        let queue = try DatabaseQueue(path: file.path)
        try await queue.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, winner, deleted FROM docs WHERE tree = ''")
            for row in rows {
                // Written out here, not by the code under test: `[[pos,"hash",-1,deleted]]`.
                let winner = (row[1] as String).split(separator: "-", maxSplits: 1)
                let old = #"[[\#(winner[0]),"\#(winner[1])",-1,\#(row[2] as Int)]]"#
                try db.execute(sql: "UPDATE docs SET tree = ? WHERE id = ?", arguments: [old, row[0] as String])
            }
        }
        try queue.close()
        #expect(try storedTrees(file).values.allSatisfy { !$0.isEmpty })

        let store = try DatabaseStore(directory: directory.url, connections: { _ in .pool })
        let db = try await store.open("trees")
        #expect(try await answers(db, ids: ids) == before)
        // An edit of a row in the JSON form of one revision: generation 2 on top of it, both kept.
        let second = try await db.update(try doc(#"{"_id":"once","_rev":"\#(once!)","n":2}"#))
        #expect(second.pos == 2)
        var read = ReadOptions()
        read.revs = true
        #expect(try await db.document(id: "once", options: read)["_revisions"]?["ids"]?.arrayValue?.count == 2)
        await #expect(throws: CouchError.conflict) { _ = try await db.update(try doc(#"{"_id":"once","_rev":"\#(once!)","n":3}"#)) }
        // A new document in the old file is stored the new way.
        _ = try await db.update(try doc(#"{"_id":"new","n":1}"#))
        #expect(try storedTrees(file)["new"] == "")
    }
}
