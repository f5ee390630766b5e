import HeapModule

/// When to look again at users' databases that changed, in case their changes feed did not yet
/// show everything: on a CouchDB cluster, a copy that a node lost (restarted with an empty
/// disk) is refilled by internal replication, which raises no `_db_updates` event, so what the
/// consolidator read from it while it was being refilled would otherwise wait for the user's
/// next write. Each database that changes is looked at again `delays[0]` after its last change,
/// then `delays[1]` after that, and so on. A value type: events in, databases to look at out.
///
/// The looks wait in a heap by due time, so a round costs the looks due then (and a change
/// its own insertion), not a pass over every database remembered: up to `limit` of them.
struct LateLooks: Sendable {
    let delays: [Double]
    /// Databases remembered at most; beyond it new ones are not (the start-up sweep and the
    /// users' next writes still reach them).
    let limit: Int
    /// Each remembered database's next look: when, which of the delays it follows, and the
    /// number of its entry in the heap (older entries of the same database are stale).
    private(set) var pending: [String: (due: Double, step: Int, entry: Int)] = [:]
    private var queue = Heap<Look>()
    private var entries = 0

    /// A look in the heap; stale once its database has moved on to a later entry.
    struct Look: Comparable, Sendable {
        var due: Double
        var entry: Int
        var name: String
        static func < (a: Look, b: Look) -> Bool { (a.due, a.entry) < (b.due, b.entry) }
        static func == (a: Look, b: Look) -> Bool { a.entry == b.entry }
    }

    init(delays: [Double], limit: Int = 200_000) {
        self.delays = delays
        self.limit = limit
    }

    /// `names` changed at `now` (seconds on any steady clock): their looks start over.
    mutating func changed(_ names: some Sequence<String>, at now: Double) {
        guard let first = delays.first else { return }
        for name in names where pending[name] != nil || pending.count < limit {
            schedule(name, at: now + first, step: 0)
        }
    }

    /// The databases due for a look at `now`, in name order, each then waiting for its next
    /// delay (or forgotten after the last).
    mutating func due(at now: Double) -> [String] {
        var names: [String] = []
        while let top = queue.min, top.due <= now {
            queue.removeMin()
            if pending[top.name]?.entry == top.entry { names.append(top.name) }
        }
        names.sort()
        for name in names {
            let step = pending[name]!.step + 1
            if step < delays.count { schedule(name, at: now + delays[step], step: step) } else { pending[name] = nil }
        }
        return names
    }

    /// Seconds from `now` until the next look is due; nil with none waiting.
    mutating func wait(at now: Double) -> Double? {
        dropStale()
        return queue.min.map { max(0, $0.due - now) }
    }

    private mutating func schedule(_ name: String, at due: Double, step: Int) {
        entries += 1
        pending[name] = (due, step, entries)
        queue.insert(Look(due: due, entry: entries, name: name))
        // A database that keeps changing leaves stale entries behind: rebuild the heap from
        // the live ones once they are outnumbered.
        if queue.count > 2 * pending.count + 1024 {
            queue = Heap(pending.map { Look(due: $0.value.due, entry: $0.value.entry, name: $0.key) })
        }
    }

    private mutating func dropStale() {
        while let top = queue.min, pending[top.name]?.entry != top.entry { queue.removeMin() }
    }
}
