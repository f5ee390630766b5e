import CouchEngine
import CouchIndexes
import CouchJSON
import Foundation
import LTTestSupport
import Testing

@Suite("Map/reduce view indexes")
struct ViewIndexTests {
    func withStore(_ body: (DatabaseStore, URL) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        try await body(try DatabaseStore(directory: directory.url), directory.url)
    }

    /// `function(doc) { if (doc.type == "fix") emit([doc.user, doc.day], doc.km) }`, natively.
    static let byUserDay = ViewDefinition(code: "by-user-day", map: { doc in
        guard doc["type"] == "fix" else { return [] }
        return [(key: [doc["user"] ?? .null, doc["day"] ?? .null], value: doc["km"] ?? .null)]
    }, reduce: .sum)

    func load(_ db: DocumentDatabase) async throws {
        var docs: [DocumentInput] = []
        for (i, (user, day, km)) in [("ann", 1, 3), ("ann", 1, 4), ("ann", 2, 5), ("bob", 1, 10), ("bob", 3, 1)].enumerated() {
            docs.append(DocumentInput(id: "f\(i)", body: ["type": "fix", "user": .string(user), "day": .int(day), "km": .int(km)]))
        }
        docs.append(DocumentInput(id: "other", body: ["type": "place"]))
        _ = try await db.update(docs, newEdits: true)
    }

    @Test("Rows come in key collation order; ranges, descending, limit, skip and include_docs work")
    func mapQueries() async throws {
        try await withStore { store, _ in
            let db = try await store.create("v")
            let keys: [JSON] = [.null, false, true, 2, 10, "A", "a", "b", [1], ["a": 1]]
            _ = try await db.update(keys.enumerated().map { DocumentInput(id: "k\($0.offset)", body: ["k": $0.element]) }, newEdits: true)
            let view = ViewDefinition(code: "by-k", map: { doc in [(key: doc["k"] ?? .null, value: 1)] })
            var query = ViewQuery()
            let all = try await db.views.query(view, query)
            #expect(all.rows.map { $0["key"]! } == [.null, false, true, 2, 10, "a", "A", "b", [1], ["a": 1]])
            #expect(all.totalRows == 10)
            query.startKey = "a"
            query.endKey = "b"
            query.inclusiveEnd = false
            #expect(try await db.views.query(view, query).rows.map { $0["key"]! } == ["a", "A"])
            query = ViewQuery()
            query.descending = true
            query.limit = 2
            query.skip = 1
            query.includeDocs = true
            let page = try await db.views.query(view, query)
            #expect(page.rows.map { $0["key"]! } == [[1], "b"])
            #expect(page.rows[0]["doc"]?["_id"] == "k8")
            query = ViewQuery()
            query.keys = [10, "A", "missing"]
            #expect(try await db.views.query(view, query).rows.map { $0["id"]! } == ["k4", "k5"])
        }
    }

    @Test("Documents whose ids are canonically equivalent but other bytes (é, e\u{301}) keep their own rows")
    func equivalentIDsKeepTheirRows() async throws {
        try await withStore { store, _ in
            let db = try await store.create("ids")
            _ = try await db.update([DocumentInput(id: "é", body: ["k": 1]), DocumentInput(id: "e\u{301}", body: ["k": 2])], newEdits: true)
            let view = ViewDefinition(code: "by-k-ids", map: { doc in [(key: doc["k"] ?? .null, value: doc["_id"] ?? .null)] })
            let rows = try await db.views.query(view, ViewQuery()).rows
            // Compared by bytes: Swift's == would take either id for the other.
            let pairs = rows.map { (Array(($0["id"]?.stringValue ?? "").utf8), $0["key"]?.intValue ?? 0) }
            #expect(pairs.count == 2)
            #expect(pairs.contains { $0.0 == Array("é".utf8) && $0.1 == 1 })
            #expect(pairs.contains { $0.0 == Array("e\u{301}".utf8) && $0.1 == 2 })
        }
    }

    @Test("Built-in reducers: _count, _sum, _stats, _approx_count_distinct, with group and group_level")
    func reducers() async throws {
        try await withStore { store, _ in
            let db = try await store.create("r")
            try await load(db)
            var query = ViewQuery()
            #expect(try await db.views.query(Self.byUserDay, query).rows == [["key": .null, "value": 23]])
            query.groupLevel = 1
            #expect(try await db.views.query(Self.byUserDay, query).rows == [["key": ["ann"], "value": 12], ["key": ["bob"], "value": 11]])
            query.groupLevel = nil
            query.group = true
            #expect(try await db.views.query(Self.byUserDay, query).rows.count == 4)  // [ann,1] [ann,2] [bob,1] [bob,3]
            query = ViewQuery()
            query.reduce = false
            #expect(try await db.views.query(Self.byUserDay, query).rows.count == 5)
            // Rows with the same key are ordered by document id; *_docid narrows within a key.
            query.startKey = ["ann", 1]
            query.startKeyDocID = "f1"
            query.endKey = ["ann", 2]
            query.endKeyDocID = "f1"
            #expect(try await db.views.query(Self.byUserDay, query).rows.map { $0["id"]! } == ["f1"])
            query.endKeyDocID = nil
            #expect(try await db.views.query(Self.byUserDay, query).rows.map { $0["id"]! } == ["f1", "f2"])
            // Views with the same map code share one index, whatever their reducers.
            let code = "by-user"
            let userKM: MapFunction = { doc in doc["type"] == "fix" ? [(key: doc["user"] ?? .null, value: doc["km"] ?? .null)] : [] }
            let count = try await db.views.query(ViewDefinition(code: code, map: userKM, reduce: .count), ViewQuery())
            #expect(count.rows[0]["value"] == 5)
            let stats = try await db.views.query(ViewDefinition(code: code, map: userKM, reduce: .stats), ViewQuery())
            #expect(stats.rows[0]["value"] == ["sum": 23.0, "count": 5, "min": 1.0, "max": 10.0, "sumsqr": 151.0])
            let distinct = try await db.views.query(
                ViewDefinition(code: "users", map: { doc in [(key: doc["user"] ?? .null, value: 0)] }, reduce: .approxCountDistinct), ViewQuery())
            #expect(distinct.rows[0]["value"] == 3)  // distinct keys, as CouchDB counts: ann, bob, null (the place)
            var arrays = ViewQuery()
            arrays.group = true
            let vectors = try await db.views.query(
                ViewDefinition(code: "vectors", map: { doc in [(key: 0, value: [doc["km"] ?? 0, 1])] }, reduce: .sum), arrays)
            #expect(vectors.rows[0]["value"] == [23, 6])
        }
    }

    @Test("Indexes follow writes incrementally, skip documents whose map throws, and survive a restart")
    func incrementalAndPersistent() async throws {
        try await withStore { store, directory in
            let db = try await store.create("p")
            try await load(db)
            let calls = Locked(0)
            let failing = ViewDefinition(code: "counting", map: { doc in
                calls.withLock { $0 += 1 }
                if doc["_id"] == "f2" { throw CouchError.badRequest("boom") }
                return doc["km"].map { [(key: $0, value: JSON.int(1))] } ?? []
            }, reduce: .count)
            #expect(try await db.views.update(failing) == 1)
            #expect(try await db.views.query(failing, ViewQuery()).rows[0]["value"] == 4)
            #expect(calls.withLock { $0 } == 6)
            // One edit maps one document again.
            let rev = try await db.winningRevision(id: "f0")!.rev
            _ = try await db.update(DocumentInput(id: "f0", rev: rev, deleted: true))
            #expect(try await db.views.query(failing, ViewQuery()).rows[0]["value"] == 3)
            #expect(calls.withLock { $0 } == 6)  // a deleted document is not mapped
            _ = try await db.update(DocumentInput(id: "new", body: ["km": 7]))
            #expect(try await db.views.query(failing, ViewQuery()).rows[0]["value"] == 4)
            #expect(calls.withLock { $0 } == 7)
            // A new store on the same files finds the index built: nothing is mapped again.
            let reopened = try await DatabaseStore(directory: directory).open("p")
            #expect(try await reopened.views.query(failing, ViewQuery()).rows[0]["value"] == 4)
            #expect(calls.withLock { $0 } == 7)
        }
    }

    @Test("A document purged down to its last revision leaves every kind of index, rows counted again, even read without an update")
    func purgeLeavesIndexes() async throws {
        try await withStore { store, _ in
            let db = try await store.create("p")
            try await load(db)
            let byType = try MangoIndex(designDocument: "_design/m", name: "by-type", definition: ["fields": ["type"]])
            var find = FindQuery(selector: try Selector(json: ["type": "fix"]))
            var rows = ViewQuery()
            rows.reduce = false
            #expect(try await db.views.query(Self.byUserDay, rows).totalRows == 5)
            #expect(try await db.mango.find(find, index: byType).docs.count == 5)
            let rev = try #require(try await db.winningRevision(id: "f3")?.rev)
            _ = try await db.purge([(id: "f3", revs: [rev])])
            // Purged documents are not in the changes feed: only the purge can take them out.
            let stale = try await db.views.query(Self.byUserDay, rows, stale: true)
            #expect(stale.totalRows == 4 && !stale.rows.contains { $0["id"] == "f3" })
            find.update = false
            #expect(try await db.mango.find(find, index: byType).docs.compactMap { $0["_id"]?.stringValue } == ["f0", "f1", "f2", "f4"])
        }
    }

    @Test("An index known current answers without a look at its tables; dropped and asked again, it is built anew from every document")
    func currentAndDropped() async throws {
        try await withStore { store, _ in
            let db = try await store.create("p")
            try await load(db)
            let calls = Locked(0)
            let counting = ViewDefinition(code: "kms", map: { doc in
                calls.withLock { $0 += 1 }
                return doc["km"].map { [(key: $0, value: JSON.int(1))] } ?? []
            }, reduce: .count)
            let byType = try MangoIndex(designDocument: "_design/m", name: "by-type", definition: ["fields": ["type"]])
            let find = FindQuery(selector: try Selector(json: ["type": "fix"]))
            #expect(try await db.views.query(counting, ViewQuery()).rows.first?["value"] == 5)
            #expect(try await db.mango.find(find, index: byType).docs.count == 5)
            #expect(try await db.views.query(counting, ViewQuery()).rows.first?["value"] == 5)
            #expect(calls.withLock { $0 } == 6)
            // _view_cleanup with no index kept drops both; asked again, each is built anew.
            try await db.views.drop(except: [])
            try await db.mango.drop(except: [])
            #expect(try await db.views.query(counting, ViewQuery()).rows.first?["value"] == 5)
            #expect(calls.withLock { $0 } == 12)
            #expect(try await db.mango.find(find, index: byType).docs.count == 5)
            // A write after the index was current is indexed at the next query.
            _ = try await db.update(DocumentInput(id: "late", body: ["type": "fix", "km": 9]))
            #expect(try await db.views.query(counting, ViewQuery()).rows.first?["value"] == 6)
            #expect(try await db.mango.find(find, index: byType).docs.count == 6)
        }
    }

    @Test("Catch-ups racing each other and writes, batch after batch, leave every document in the index exactly once")
    func racingCatchUps() async throws {
        try await withStore { store, _ in
            let db = try await store.create("race")
            let byKm = ViewDefinition(code: "by-km", map: { doc in doc["km"].map { [(key: $0, value: JSON.int(1))] } ?? [] }, reduce: .count)
            _ = try await db.update((0..<3_500).map { DocumentInput(id: "a\($0)", body: ["km": .int($0)]) }, newEdits: true)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<3 { group.addTask { _ = try await db.views.update(byKm) } }
                group.addTask {
                    for round in 0..<5 {
                        _ = try await db.update((0..<300).map { DocumentInput(id: "b\(round)-\($0)", body: ["km": .int($0)]) }, newEdits: true)
                    }
                }
                try await group.waitForAll()
            }
            let result = try await db.views.query(byKm, ViewQuery())
            #expect(result.rows.first?["value"] == 5_000)
            var all = ViewQuery()
            all.reduce = false
            #expect(try await db.views.query(byKm, all).totalRows == 5_000)
        }
    }
}
