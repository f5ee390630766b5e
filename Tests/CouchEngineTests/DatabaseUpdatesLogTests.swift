@testable import CouchEngine
import LTTestSupport
import Testing

@Suite("The record behind _db_updates")
struct DatabaseUpdatesLogTests {
    @Test("Against a pass over every database: each database's latest event after any sequence, in order, limits respected, through compactions", arguments: [1, 2, 3] as [UInt64])
    func matchesNaive(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let updates = DatabaseUpdates()
        var latest: [String: DatabaseUpdates.Event] = [:]
        let kinds: [DatabaseUpdates.Kind] = [.created, .updated, .updated, .updated, .deleted]
        for step in 1...20_000 {
            // Few databases at first (many superseded events, so compactions), more later.
            let name = "db\(Int.random(in: 0..<(step < 10_000 ? 40 : 3_000), using: &random))"
            let kind = kinds[Int.random(in: 0..<kinds.count, using: &random)]
            updates.record(name, kind)
            latest[name] = DatabaseUpdates.Event(name: name, kind: kind, seq: step)
            if step % 97 == 0 {
                let after = Int.random(in: 0...step, using: &random)
                let limit = Bool.random(using: &random) ? Int.max : Int.random(in: 1...50, using: &random)
                let expected = Array(latest.values.filter { $0.seq > after }.sorted { $0.seq < $1.seq }.prefix(limit))
                #expect(updates.events(after: after, limit: limit) == expected, "step \(step), after \(after), limit \(limit)")
            }
        }
        #expect(updates.seq == 20_000)
    }
}
