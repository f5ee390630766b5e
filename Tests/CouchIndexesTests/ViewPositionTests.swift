import CouchCollation
import CouchEngine
import CouchIndexes
import CouchJSON
import Foundation
import GRDB
import LTTestSupport
import Testing

/// `offset` is counted from the per-block row counts kept beside each view (`ViewPositions`),
/// not by walking the rows: checked against the position of the key in the whole view, read
/// in order, through builds, updates, deletions, purges, and an index built before the
/// blocks existed.
@Suite("View row positions (offset)")
struct ViewPositionTests {
    /// Keys of every type, equivalent strings of other bytes, and one key emitted far more
    /// often than a block holds (a block that cannot be split).
    static func key(_ random: inout SeededRandom) -> JSON {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return .int(Int.random(in: -50...50, using: &random))
        case 1: return .double(Double(Int.random(in: -1000...1000, using: &random)) / 7)
        case 2: return ["a", "A", "é", "e\u{301}", "f", "_", "-", "ß", "日本", "🙂"].randomElement(using: &random).map(JSON.string)!
        case 3: return [.int(Int.random(in: 0..<5, using: &random)), .string("x\(Int.random(in: 0..<20, using: &random))")]
        case 4: return "hot"
        case 5: return [.null, .bool(false), .bool(true)].randomElement(using: &random)!
        default: return .string("k\(Int.random(in: 0..<3_000, using: &random))")
        }
    }

    static let view = ViewDefinition(code: "positions", map: { doc in
        (doc["keys"]?.arrayValue ?? []).map { (key: $0, value: JSON.int(1)) }
    })

    static func document(_ id: String, _ random: inout SeededRandom) -> DocumentInput {
        let count = Int.random(in: 0...3, using: &random)
        return DocumentInput(id: id, body: ["keys": .array((0..<count).map { _ in key(&random) })])
    }

    /// Every query's offset and total against the rows of the whole view read in order.
    static func check(_ db: DocumentDatabase, _ random: inout SeededRandom, queries: Int) async throws {
        var everything = ViewQuery()
        everything.reduce = false
        let all = try await db.views.query(view, everything)
        let rows = all.rows.map { (key: $0["key"]!, id: $0["id"]!.stringValue!) }
        #expect(all.totalRows == rows.count)
        #expect(all.offset == 0)
        func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        /// Rows before (key, id) in the direction asked.
        func before(_ key: JSON, _ id: String?, descending: Bool) -> Int {
            rows.filter { row in
                let order = JSON.collate(row.key, key)
                if descending { return order > 0 || (order == 0 && id.map { precedes($0, row.id) } ?? false) }
                return order < 0 || (order == 0 && id.map { precedes(row.id, $0) } ?? false)
            }.count
        }
        for _ in 0..<queries {
            var query = ViewQuery()
            query.reduce = false
            query.descending = Bool.random(using: &random)
            query.skip = [0, 0, 3, 5_000].randomElement(using: &random)!
            query.limit = 5
            // A key that is there or one that may not be.
            let key = Bool.random(using: &random) && !rows.isEmpty ? rows.randomElement(using: &random)!.key : Self.key(&random)
            let expected: Int
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                query.key = key
                expected = before(key, nil, descending: query.descending)
            case 1:
                query.startKey = key
                if Bool.random(using: &random), let id = rows.randomElement(using: &random)?.id { query.startKeyDocID = id }
                expected = before(key, query.startKeyDocID, descending: query.descending)
            default:
                let keys = [key, Self.key(&random)]
                query.keys = keys
                let asked = query.descending ? keys.reversed() : keys
                let first = asked.first { key in rows.contains { JSON.collate($0.key, key) == 0 } } ?? asked.last!
                expected = before(first, nil, descending: query.descending)
            }
            let answer = try await db.views.query(view, query)
            #expect(answer.offset == min(expected + query.skip, rows.count), "\(query.key ?? query.startKey ?? .null) keys \(query.keys ?? []) descending \(query.descending) skip \(query.skip)")
            #expect(answer.totalRows == rows.count)
        }
    }

    @Test("Offsets match the key's position through builds, updates, deletions and purges", arguments: [1, 2, 3] as [UInt64])
    func offsetsFollowChanges(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url)
        let db = try await store.create("positions")
        var random = SeededRandom(seed: seed)
        // Enough rows for many blocks, in several batches of the index update.
        _ = try await db.update((0..<3_000).map { Self.document("d\($0)", &random) }, newEdits: true)
        try await Self.check(db, &random, queries: 60)
        for round in 0..<3 {
            // Rewrites, deletions and purges move rows between blocks and empty some.
            var edits: [DocumentInput] = []
            for i in Set((0..<400).map { _ in Int.random(in: 0..<3_000, using: &random) }) {
                guard let rev = try await db.winningRevision(id: "d\(i)")?.rev else { continue }
                var input = Bool.random(using: &random) ? Self.document("d\(i)", &random) : DocumentInput(id: "d\(i)", deleted: true)
                input.rev = rev
                edits.append(input)
            }
            _ = try await db.update(edits + (0..<500).map { Self.document("n\(round)-\($0)", &random) }, newEdits: true)
            for i in (0..<100).map({ _ in Int.random(in: 0..<500, using: &random) }) {
                if let rev = try await db.winningRevision(id: "n\(round)-\(i)")?.rev { _ = try await db.purge([(id: "n\(round)-\(i)", revs: [rev])]) }
            }
            try await Self.check(db, &random, queries: 60)
        }
        // Many blocks, none counted below zero, together every row.
        let (blocks, negative, counted, rows) = try await db.reading { db in
            let table = try #require(try String.fetchOne(db, sql: "SELECT name FROM sqlite_master WHERE name LIKE 'view%blocks'"))
            return (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) WHERE rows < 0") ?? 0,
                try Int.fetchOne(db, sql: "SELECT sum(rows) FROM \(table)") ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.dropLast("_blocks".count))") ?? 0)
        }
        #expect(blocks > 4 && negative == 0 && counted == rows)
    }

    @Test("An index built before positions were kept gets them at its next update, counted from its rows")
    func indexBuiltBeforePositions() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url)
        let db = try await store.create("older")
        var random = SeededRandom(seed: 41)
        _ = try await db.update((0..<2_500).map { Self.document("d\($0)", &random) }, newEdits: true)
        try await Self.check(db, &random, queries: 10)
        // As an earlier lt left it: the rows without their blocks and triggers.
        try await db.writing { db in
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE name LIKE 'view%blocks'") {
                try db.execute(sql: "DROP TABLE \(table)")
            }
            for trigger in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger'") {
                try db.execute(sql: "DROP TRIGGER \(trigger)")
            }
        }
        // Counted by walking the rows until a write updates the index.
        try await Self.check(db, &random, queries: 20)
        _ = try await db.update((0..<300).map { Self.document("late\($0)", &random) }, newEdits: true)
        try await Self.check(db, &random, queries: 40)
        let blocks = try await db.reading { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE name LIKE 'view%blocks'") ?? 0
        }
        #expect(blocks == 1)
    }
}
