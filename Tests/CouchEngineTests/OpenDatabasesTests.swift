@testable import CouchEngine
import LTTestSupport
import Testing

@Suite("Which open databases a store closes")
struct OpenDatabasesTests {
    @Test("Against a dictionary model: random inserts, uses, removals and evictions keep the same contents", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func matchesModel(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var open = OpenDatabases<Int>()
        var model: [String: Int] = [:]
        for step in 0..<3_000 {
            let name = "db\(Int.random(in: 0..<60, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                open.insert(name, step)
                model[name] = step
            case 4..<7:
                #expect(open.use(name) == model[name])
            case 7:
                #expect(open.remove(name) == model.removeValue(forKey: name))
            default:
                let evicted = open.evict(sparing: 10, using: &random)
                if model.isEmpty {
                    #expect(evicted == nil)
                } else {
                    let victim = try! #require(model.first { $0.value == evicted }?.key)
                    model[victim] = nil
                }
            }
            #expect(open.count == model.count)
        }
        for (name, value) in model { #expect(open.peek(name) == value) }
    }

    @Test("Periodic writers, more than fit: a share of them finds their database open (least-recently-used would find none), and the ones just used stay")
    func periodicUse() {
        var random = SeededRandom(seed: 42)
        var open = OpenDatabases<String>()
        let capacity = 700, active = 1_000, spared: UInt64 = 175
        var hits = 0, uses = 0, recentEvictions = 0
        var lastUse: [String: UInt64] = [:]
        for round in 0..<10 {
            for i in 0..<active {
                let name = "user\(i)"
                if open.use(name) != nil {
                    if round > 0 { hits += 1 }
                } else {
                    open.insert(name, name)
                    if open.count > capacity, let evicted = open.evict(sparing: spared, using: &random) {
                        if let last = lastUse[evicted], last + spared > open.clock { recentEvictions += 1 }
                    }
                }
                if round > 0 { uses += 1 }
                lastUse[name] = open.clock
                #expect(open.count <= capacity)
            }
        }
        let hitRate = Double(hits) / Double(uses)
        // Random replacement on a loop: h = exp(-(active / capacity) (1 - h)), about 0.45 here.
        #expect(hitRate > 0.3, "hit rate \(hitRate)")
        #expect(recentEvictions * 1_000 < uses, "\(recentEvictions) evictions of a database used within the last \(spared) uses")
    }
}
