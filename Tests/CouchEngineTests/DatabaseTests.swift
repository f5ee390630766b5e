import CouchEngine
import CouchJSON
import Foundation
import Testing

@Suite("Engine on real SQLite files")
struct DatabaseTests {
    /// Runs `body` twice: with databases on a pool of WAL connections, and on one connection
    /// without file locks, writing ahead (how per-user databases are opened).
    func withStore(_ body: (DatabaseStore) async throws -> Void) async throws {
        for connections in [Connections.pool, .single] {
            let directory = try TemporaryDirectory()
            defer { directory.cleanup() }
            try await body(try DatabaseStore(directory: directory.url, maxOpen: 4, connections: { _ in connections }))
        }
    }

    func doc(_ text: String) throws -> DocumentInput { try DocumentInput(json: try JSON.parse(text)) }

    @Test("A _selector changes filter matches a deletion as its tombstone, as CouchDB does; an _id prefix alone needs no bodies")
    func selectorFilterSeesDeletions() async throws {
        try await withStore { store in
            let db = try await store.create("sel")
            let a = try await db.update(try doc(#"{"_id":"a:1","kind":"fix"}"#))
            _ = try await db.update(try doc(#"{"_id":"b:1","kind":"fix"}"#))
            _ = try await db.update(DocumentInput(id: "a:1", rev: a, deleted: true))
            _ = try await db.update(try doc(#"{"_id":"a:2","kind":"fix"}"#))
            func ids(_ selector: JSON) async throws -> [String] {
                var options = ChangesOptions()
                options.filter = .selector(try Selector(json: selector))
                return try await db.changes(options).rows.compactMap { $0["id"]?.stringValue }
            }
            #expect(try await ids(["_id": ["$beginsWith": "a:"]]) == ["a:1", "a:2"])
            #expect(try await ids(["_deleted": true]) == ["a:1"])
            #expect(try await ids(["kind": "fix"]) == ["b:1", "a:2"])
        }
    }

    @Test("Create, update, conflict and delete follow CouchDB's MVCC rules")
    func mvcc() async throws {
        try await withStore { store in
            let db = try await store.create("mvcc")
            let r1 = try await db.update(try doc(#"{"_id":"a","v":1}"#))
            #expect(r1.pos == 1 && r1.hash.count == 32)
            await #expect(throws: CouchError.conflict) { _ = try await db.update(try doc(#"{"_id":"a","v":2}"#)) }
            let r2 = try await db.update(try doc(#"{"_id":"a","_rev":"\#(r1)","v":2}"#))
            await #expect(throws: CouchError.conflict) { _ = try await db.update(try doc(#"{"_id":"a","_rev":"\#(r1)","v":3}"#)) }
            #expect(try await db.document(id: "a")["v"] == 2)
            // The old body is still readable until compaction.
            #expect(try await db.document(id: "a", rev: r1)["v"] == 1)
            let r3 = try await db.update(DocumentInput(id: "a", rev: r2, deleted: true))
            await #expect(throws: CouchError.deleted) { _ = try await db.document(id: "a") }
            let info = try await db.info()
            #expect(info["doc_count"] == 0 && info["doc_del_count"] == 1)
            // Recreating a deleted document extends the tombstone's branch.
            let r4 = try await db.update(try doc(#"{"_id":"a","v":4}"#))
            #expect(r4.pos == r3.pos + 1)
            try await db.compact()
            await #expect(throws: CouchError.missing) { _ = try await db.document(id: "a", rev: r1) }
            #expect(try await db.document(id: "a")["v"] == 4)
        }
    }

    @Test("Replicated revisions build conflicts; the winner and _conflicts match CouchDB")
    func replicatedConflicts() async throws {
        try await withStore { store in
            let db = try await store.create("repl")
            _ = try await db.update([
                try doc(#"{"_id":"d","_rev":"2-aaa","_revisions":{"start":2,"ids":["aaa","root"]},"side":"a"}"#),
                try doc(#"{"_id":"d","_rev":"2-bbb","_revisions":{"start":2,"ids":["bbb","root"]},"side":"b"}"#),
                try doc(#"{"_id":"d","_rev":"3-ccc","_revisions":{"start":3,"ids":["ccc","zzz","root"]},"_deleted":true}"#),
            ], newEdits: false)
            var options = ReadOptions()
            options.conflicts = true
            options.deletedConflicts = true
            options.revs = true
            let winner = try await db.document(id: "d", options: options)
            #expect(winner["_rev"] == "2-bbb")  // live beats a deleted higher generation; "bbb" > "aaa"
            #expect(winner["_conflicts"] == ["2-aaa"])
            #expect(winner["_deleted_conflicts"] == ["3-ccc"])
            #expect(winner["_revisions"] == ["start": 2, "ids": ["bbb", "root"]])
            // Replaying the same revisions is a no-op: no new sequence.
            let seq = try await db.updateSeq()
            _ = try await db.update([try doc(#"{"_id":"d","_rev":"2-aaa","_revisions":{"start":2,"ids":["aaa","root"]}}"#)], newEdits: false)
            #expect(try await db.updateSeq() == seq)
            let diff = try await db.revsDiff([("d", [Revision("2-aaa")!, Revision("3-new")!]), ("x", [Revision("1-a")!])])
            #expect(diff["d"]?["missing"] == ["3-new"])
            #expect(diff["x"]?["missing"] == ["1-a"])
            var changes = ChangesOptions()
            changes.allLeaves = true
            let page = try await db.changes(changes)
            #expect(page.rows.count == 1)
            #expect(page.rows[0]["changes"]?.arrayValue?.count == 3)
        }
    }

    @Test("Attachments are stored once, kept across edits as stubs, and served with CouchDB digests")
    func attachments() async throws {
        try await withStore { store in
            let db = try await store.create("atts")
            let data = Data("hello world".utf8).base64EncodedString()
            let r1 = try await db.update(try doc(#"{"_id":"a","_attachments":{"t.txt":{"content_type":"text/plain","data":"\#(data)"}}}"#))
            let r2 = try await db.update(try doc(#"{"_id":"a","_rev":"\#(r1)","x":1,"_attachments":{"t.txt":{"stub":true}}}"#))
            _ = try await db.update(try doc(#"{"_id":"b","_attachments":{"same.txt":{"content_type":"text/plain","data":"\#(data)"}}}"#))
            let (meta, bytes) = try await db.attachment(docID: "a", rev: nil, name: "t.txt")
            #expect(String(decoding: bytes, as: UTF8.self) == "hello world")
            // text/plain is stored gzip-compressed, as CouchDB stores it; the digest is of the
            // stored bytes and equals the one Apache CouchDB 3.4.3 gives the same upload.
            #expect(meta["digest"] == "md5-7mkg+nM0HN26sZkLN8KVSA==")
            #expect(meta["encoding"] == "gzip" && meta["length"] == 11 && meta["encoded_length"] == 31)
            #expect(meta["revpos"] == 1)
            let current = try await db.document(id: "a")
            #expect(current["_rev"] == .string(r2.description))
            #expect(current["_attachments"]?["t.txt"]?["stub"] == true)
            await #expect(throws: CouchError.self) {
                _ = try await db.update(try doc(#"{"_id":"c","_attachments":{"x":{"stub":true}}}"#))
            }
            var since = ReadOptions()
            since.attsSince = [r1]
            #expect(try await db.document(id: "a", options: since)["_attachments"]?["t.txt"]?["stub"] == true)
            var all = ReadOptions()
            all.attachments = true
            #expect(try await db.document(id: "a", options: all)["_attachments"]?["t.txt"]?["data"] == .string(data))
        }
    }

    @Test("Bulk writes are atomic per document; failures leave the database unchanged")
    func bulkAtomicity() async throws {
        try await withStore { store in
            let db = try await store.create("bulk")
            let results = try await db.update([
                try doc(#"{"_id":"ok1"}"#),
                DocumentInput(id: "_bad"),
                try doc(#"{"_id":"ok2"}"#),
                try doc(#"{"_id":"ok1"}"#),
            ], newEdits: true)
            #expect((try? results[0].get()) != nil)
            #expect(throws: CouchError.self) { try results[1].get() }
            #expect((try? results[2].get()) != nil)
            #expect(throws: CouchError.conflict) { try results[3].get() }
            let info = try await db.info()
            #expect(info["doc_count"] == 2)
            #expect(info["update_seq"]?.stringValue?.hasPrefix("2-") == true)
        }
    }

    /// A batch's stored rows are read in one go before it is written (`BatchRows`): what each
    /// write sees must still be what one write after another would see.
    @Test("A batch sees its own writes: an id twice, ids equal only as Swift strings, updates and conflicts of stored documents, an empty value")
    func batchReadsItsOwnWrites() async throws {
        try await withStore { store in
            let db = try await store.create("batch")
            let x = try await db.update(try doc(#"{"_id":"x","n":1}"#))
            _ = try await db.update(try doc(#"{"_id":"y","n":1}"#))
            let composed = "\u{e9}", decomposed = "e\u{301}"
            let twice = DocumentInput(id: "twice", body: ["n": 2])
            let results = try await db.update([
                try doc(#"{"_id":"twice","n":1}"#),
                DocumentInput(id: composed),
                try doc(#"{"_id":"x","_rev":"\#(x.description)","n":2}"#),
                twice,
                DocumentInput(id: decomposed),
                try doc(#"{"_id":"y","n":2}"#),
                try doc(#"{"_id":"empty","s":""}"#),
            ], newEdits: true)
            #expect((try? results[0].get()) != nil)
            #expect((try? results[1].get()) != nil)
            #expect(try results[2].get().pos == 2)
            #expect(throws: CouchError.conflict) { try results[3].get() }
            #expect((try? results[4].get()) != nil, "e + combining acute is another id than é")
            #expect(throws: CouchError.conflict) { try results[5].get() }
            #expect(try await db.document(id: "twice")["n"] == 1)
            #expect(try await db.document(id: "x")["n"] == 2)
            #expect(try await db.document(id: "y")["n"] == 1)
            #expect(try await db.document(id: "empty")["s"] == "")
            #expect(try await db.document(id: decomposed)["_id"]?.stringValue?.utf8.count == 3)
            #expect(try await db.info()["doc_count"] == 6)
            // The same batch again, as a client retrying it: every new document now conflicts.
            let again = try await db.update([DocumentInput(id: composed), DocumentInput(id: decomposed), DocumentInput(id: "empty")], newEdits: true)
            for result in again { #expect(throws: CouchError.conflict) { try result.get() } }
        }
    }

    /// `pending` is remembered between pages (`PendingCounts`); whatever happens between two
    /// pages (writes, deletions, purges, other readers elsewhere in the feed), each page's count
    /// must be the number of rows a read of the rest of the feed then gives.
    @Test("A _changes page's pending is the rest of the feed, page after page, across writes and purges", arguments: [1, 2, 3] as [UInt64])
    func pendingAcrossPages(seed: UInt64) async throws {
        try await withStore { store in
            var random = SeededRandom(seed: seed)
            let db = try await store.create("pending")
            var revs: [String: Revision] = [:]
            func write(_ id: String) async throws { revs[id] = try await db.update(DocumentInput(id: id, rev: revs[id], body: ["n": .int(revs.count)])) }
            for i in 0..<150 { try await write("doc-\(i)") }
            var positions = [0, 0, 0]  // three readers, each at its own place in the feed
            for step in 0..<400 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<5:
                    let reader = Int.random(in: 0..<positions.count, using: &random)
                    var options = ChangesOptions()
                    options.since = positions[reader]
                    options.limit = Int.random(in: 1...40, using: &random)
                    let page = try await db.changes(options)
                    var rest = ChangesOptions()
                    rest.since = page.lastSeq
                    let expected = try await db.changes(rest).rows.count
                    #expect(page.pending == expected, "step \(step), reader \(reader) after \(page.lastSeq)")
                    positions[reader] = page.rows.isEmpty ? 0 : page.lastSeq
                case 5..<7:
                    try await write("doc-\(Int.random(in: 0..<200, using: &random))")
                case 7:
                    guard let id = revs.keys.randomElement(using: &random), let rev = revs[id] else { continue }
                    revs[id] = try await db.update(DocumentInput(id: id, rev: rev, deleted: true))
                case 8:
                    guard let id = revs.keys.randomElement(using: &random), let rev = revs[id] else { continue }
                    _ = try await db.purge([(id: id, revs: [rev])])
                    revs[id] = nil
                default:
                    positions[Int.random(in: 0..<positions.count, using: &random)] = Int.random(in: 0...(try await db.updateSeq()), using: &random)
                }
            }
        }
    }

    /// `_all_docs` pages' `offset` (documents before the start key) against a fresh count,
    /// while readers page both ways from remembered positions and writes, deletions and purges
    /// change what lies before them; ids include ones whose UTF-8 order is not Swift's String order.
    @Test("all_docs offsets across pages equal a fresh count, ascending and descending, through writes, deletions and purges", arguments: [3, 17, 101] as [UInt64])
    func allDocsOffsetsAcrossPages(seed: UInt64) async throws {
        try await withStore { store in
            var random = SeededRandom(seed: seed)
            let db = try await store.create("offsets")
            // Keyed by the id's bytes: Swift's String equality would take "é" and "e\u{301}" for one id.
            var revs: [[UInt8]: Revision] = [:]
            let alphabet = ["a", "B", "é", "e\u{301}", "z", "~", "Ω", "0"]
            func id() -> String { (0..<Int.random(in: 1...3, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.joined() + "\(Int.random(in: 0..<40, using: &random))" }
            func write(_ id: String) async throws {
                revs[Array(id.utf8)] = try await db.update(DocumentInput(id: id, rev: revs[Array(id.utf8)], body: ["n": .int(revs.count)]))
            }
            for _ in 0..<150 { try await write(id()) }
            // Readers: a direction and the start key of their next page.
            var readers: [(descending: Bool, key: String?)] = [(false, nil), (true, nil), (false, nil)]
            for step in 0..<300 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:
                    let reader = Int.random(in: 0..<readers.count, using: &random)
                    var options = AllDocsOptions()
                    options.descending = readers[reader].descending
                    options.startKey = readers[reader].key ?? id()
                    options.limit = Int.random(in: 1...25, using: &random)
                    let (_, offset, rows) = try await db.allDocs(options)
                    // A fresh count: every live id, in the database's own order, before the key.
                    var all = AllDocsOptions()
                    all.descending = options.descending
                    let ids = try await db.allDocs(all).rows.compactMap { $0["id"]?.stringValue }
                    let start = options.startKey!
                    let expected = ids.filter { options.descending ? start.utf8.lexicographicallyPrecedes($0.utf8)
                                                                 : $0.utf8.lexicographicallyPrecedes(start.utf8) }.count
                    #expect(offset == expected, "step \(step), reader \(reader), start \(start), descending \(options.descending)")
                    readers[reader].key = rows.last?["id"]?.stringValue  // the next page starts there (skip=1 aside)
                case 6..<8:
                    try await write(id())
                case 8:
                    guard let key = revs.keys.randomElement(using: &random), let rev = revs[key] else { continue }
                    revs[key] = try await db.update(DocumentInput(id: String(decoding: key, as: UTF8.self), rev: rev, deleted: true))
                default:
                    guard let key = revs.keys.randomElement(using: &random), let rev = revs[key] else { continue }
                    _ = try await db.purge([(id: String(decoding: key, as: UTF8.self), revs: [rev])])
                    revs[key] = nil
                }
            }
        }
    }

    @Test("Changes, all_docs, local docs and purge")
    func feedsAndLocalDocs() async throws {
        try await withStore { store in
            let db = try await store.create("feeds")
            for i in 0..<30 { _ = try await db.update(try doc(#"{"_id":"doc\#(String(format: "%02d", i))","i":\#(i)}"#)) }
            var options = ChangesOptions()
            options.since = 10
            options.limit = 5
            let page = try await db.changes(options)
            #expect(page.rows.map { $0["id"]?.stringValue } == ["doc10", "doc11", "doc12", "doc13", "doc14"])
            #expect(page.pending == 15)
            var all = AllDocsOptions()
            all.startKey = "doc05"
            all.endKey = "doc07"
            all.inclusiveEnd = false
            let (total, offset, rows) = try await db.allDocs(all)
            #expect(total == 30 && offset == 5 && rows.count == 2)
            let rev = try await db.local.put(id: "_local/cp", rev: nil, body: ["last_seq": 5], deleted: false)
            #expect(rev == "0-1")
            // As CouchDB 3: no conflict check on local documents; the next revision follows the one given.
            #expect(try await db.local.put(id: "_local/cp", rev: "0-9", body: ["last_seq": 6], deleted: false) == "0-10")
            #expect(try await db.local.get(id: "_local/cp")["last_seq"] == 6)
            await #expect(throws: CouchError.self) {
                _ = try await db.local.put(id: "_local/cp", rev: "1-abc", body: [:], deleted: false)
            }
            #expect(try await db.changes(ChangesOptions()).rows.count == 30)  // local docs are not in changes
            let r = try await db.winningRevision(id: "doc00")!.rev
            let (purgeSeq, purged) = try await db.purge([("doc00", [r])])
            #expect(purgeSeq == 1 && purged["doc00"] == .array([.string(r.description)]))
            await #expect(throws: CouchError.missing) { _ = try await db.document(id: "doc00") }
        }
    }

    @Test("Many databases: creation is cheap and idle ones are closed")
    func manyDatabases() async throws {
        try await withStore { store in
            for i in 0..<40 {
                let db = try await store.create("user_\(i)")
                _ = try await db.update(try doc(#"{"_id":"x"}"#))
            }
            // Every character a name may have, `/` stored as `%2F` in the file name (which a
            // single connection's SQLite URI must keep, not decode), opened again after eviction.
            let odd = "team/a(b)+c$-1_x"
            _ = try await store.create(odd).update(try doc(#"{"_id":"x"}"#))
            #expect(store.allNames().count == 41)
            for i in 0..<40 { #expect(try await store.open("user_\(i)").info()["doc_count"] == 1) }
            #expect(try await store.open(odd).info()["doc_count"] == 1)
            #expect(throws: CouchError.databaseExists) { try store.create("user_1") }
            #expect(throws: CouchError.self) { try store.create("Bad") }
            try await store.delete("user_1")
            #expect(throws: CouchError.databaseNotFound) { try store.open("user_1") }
            // Built aside and renamed into place: nothing is left where they were built.
            #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.appendingPathComponent("creating").path).isEmpty)
        }
    }

    @Test("A database pushed out while still held is given back when asked for again, never opened twice")
    func evictedButHeld() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 1, connections: { _ in .single })
        var held: DocumentDatabase? = try await store.create("a")  // as a request writing to it would
        _ = try await held!.update(DocumentInput(id: "one", body: ["n": 1]))
        try await store.create("b")  // pushes a out
        let again = try await store.open("a")
        #expect(again === held)  // one connection to the file, not two
        _ = try await again.update(DocumentInput(id: "two", body: ["n": 2]))
        held = nil
        try await store.create("c")  // pushes a out; nothing holds it now, so it closes
        try await Task.sleep(for: .milliseconds(200))
        let reopened = try await store.open("a")
        #expect(try await reopened.allDocs(AllDocsOptions()).rows.compactMap { $0["id"]?.stringValue } == ["one", "two"])
    }

    @Test("A closed database leaves nothing behind in the store; one that a listener holds keeps waking it")
    func closedDatabasesForgotten() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 1, connections: { _ in .single })
        for i in 0..<40 { _ = try await store.create("d\(i)").update(DocumentInput(id: "x", body: ["n": .int(i)])) }
        // Folding and closing happen on queues of their own (each fold syncs): wait for them,
        // up to 20 s on a loaded machine.
        for _ in 0..<2_000 where store.rememberedDatabases > 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(store.rememberedDatabases <= 2)  // the open one, and one maybe still closing
        // A listener holds d0 and waits for its next change while d0 is pushed out and reopened.
        let held = try await store.open("d0")
        let seq = try await held.updateSeq()
        let woken = Task { await held.notifier.wait(after: seq, timeout: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
        try await store.create("e")  // pushes d0 out; the listener still holds it
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        _ = try await store.open("d0").update(DocumentInput(id: "y", body: ["n": 1]))
        #expect(await woken.value)
        #expect(start.duration(to: .now) < .seconds(5))  // woken by the write, not by the timeout
    }

    @Test("A new database's first writes are folded into its file when it is first pushed out; a reopened one's log is left as it is")
    func newDatabaseLogFoldedAtFirstClose() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 1, connections: { _ in .single })
        func logSize(_ name: String) throws -> Int {
            try FileManager.default.attributesOfItem(atPath: directory.url.appendingPathComponent("dbs/\(name).sqlite-wal").path)[.size] as? Int ?? -1
        }
        func settle(_ name: String) async throws {
            // The fold and the close run on a queue of their own: wait until the log is
            // empty, up to 20 s on a loaded machine.
            for _ in 0..<2_000 where (try? logSize(name)) != 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        _ = try await store.create("a").update(DocumentInput(id: "one", body: ["n": 1]))
        #expect(try logSize("a") > 0)  // written ahead, not yet in the file
        try await store.create("b")  // pushes a out: its log is folded, then it closes
        try await settle("a")
        #expect(try logSize("a") == 0)
        try await Task.sleep(for: .milliseconds(200))  // and closed, so the next open is a new one
        // Written again after a reopen: pushed out without a checkpoint, the log keeps the write.
        _ = try await store.open("a").update(DocumentInput(id: "two", body: ["n": 2]))
        try await store.create("c")
        try await Task.sleep(for: .milliseconds(200))
        #expect(try logSize("a") > 0)
        let reopened = try await store.open("a")
        #expect(try await reopened.allDocs(AllDocsOptions()).rows.compactMap { $0["id"]?.stringValue } == ["one", "two"])
    }

    @Test("A database half built when the process died is not a database: the next start removes it")
    func halfBuiltDatabase() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        do {
            let first = try DatabaseStore(directory: directory.url, connections: { _ in .single })
            _ = try await first.create("kept").update(try doc(#"{"_id":"x"}"#))
        }
        let stray = directory.url.appendingPathComponent("creating/0F1E2D3C.sqlite")
        try Data("SQLite format 3\u{0}".utf8).write(to: stray)
        let second = try DatabaseStore(directory: directory.url, connections: { _ in .single })
        #expect(!FileManager.default.fileExists(atPath: stray.path))
        #expect(second.allNames() == ["kept"])
        #expect(try await second.open("kept").info()["doc_count"] == 1)
    }

    @Test("Stemming to _revs_limit drops old bodies")
    func revsLimit() async throws {
        try await withStore { store in
            let db = try await store.create("stem")
            try await db.setRevsLimit(3)
            var rev = try await db.update(try doc(#"{"_id":"a","n":0}"#))
            for n in 1...6 { rev = try await db.update(try doc(#"{"_id":"a","_rev":"\#(rev)","n":\#(n)}"#)) }
            var options = ReadOptions()
            options.revs = true
            let current = try await db.document(id: "a", options: options)
            #expect(current["_revisions"]?["ids"]?.arrayValue?.count == 3)
            #expect(current["_revisions"]?["start"] == 7)
        }
    }
}
