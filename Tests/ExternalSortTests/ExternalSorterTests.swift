import ExternalSort
import LTTestSupport
import Testing

@Suite("ExternalSorter: rows out by group, then time, then as added")
struct ExternalSorterTests {
    /// Random rows (few groups, repeated times, several appends) against Swift's stable sort of
    /// the same rows, read back in pages of random size.
    @Test(arguments: 0..<12)
    func ordersLikeAStableSort(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        let groups = ["", "alice", "bob", "carol", "Émile", "zoë"]
        let sorter = try ExternalSorter()
        var added: [SortedRow] = []
        for _ in 0..<Int.random(in: 1...6, using: &random) {
            var batch: [SortedRow] = []
            for _ in 0..<Int.random(in: 0...700, using: &random) {
                let time = Double(Int.random(in: -5...40, using: &random)) * 1000 + (Bool.random(using: &random) ? 0.5 : 0)
                let body = (0..<Int.random(in: 1...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                batch.append(SortedRow(group: groups.randomElement(using: &random)!, time: time, body: body))
            }
            try await sorter.append(batch)
            added += batch
        }
        let expected = added.enumerated().sorted { a, b in
            (a.element.group, a.element.time, a.offset) < (b.element.group, b.element.time, b.offset)
        }.map(\.element)
        let pageSize = Int.random(in: 1...300, using: &random)
        var pages: [[SortedRow]] = []
        try await sorter.forEachPage(size: pageSize) { pages.append($0) }
        #expect(pages.flatMap { $0 } == expected)
        #expect(pages.dropLast().allSatisfy { $0.count == pageSize })
        #expect(try await sorter.count() == added.count)
    }

    @Test func nothingAddedVisitsNothing() async throws {
        let sorter = try ExternalSorter()
        var visits = 0
        try await sorter.forEachPage { _ in visits += 1 }
        #expect(visits == 0)
    }

    /// More rows than the 8 MiB page cache holds: SQLite spills them to its temporary file and
    /// still gives them back whole and in order.
    @Test func moreThanTheCacheHolds() async throws {
        let sorter = try ExternalSorter()
        let body = [UInt8](repeating: 7, count: 400)
        for chunk in 0..<10 {
            try await sorter.append((0..<5000).map { i in
                SortedRow(group: "user\(i % 3)", time: Double((i * 7919 + chunk * 104_729) % 50_000), body: body)
            })
        }
        var count = 0
        var previous: (String, Double)?
        var ordered = true
        try await sorter.forEachPage(size: 4096) { page in
            for row in page {
                if let previous, (row.group, row.time) < previous { ordered = false }
                previous = (row.group, row.time)
                ordered = ordered && row.body == body
            }
            count += page.count
        }
        #expect(count == 50_000)
        #expect(ordered)
    }
}
