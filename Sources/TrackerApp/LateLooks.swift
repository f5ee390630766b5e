/// When to look again at users' databases that changed, in case their changes feed did not yet
/// show everything: on a CouchDB cluster, a copy that a node lost (restarted with an empty
/// disk) is refilled by internal replication, which raises no `_db_updates` event, so what the
/// consolidator read from it while it was being refilled would otherwise wait for the user's
/// next write. Each database that changes is looked at again `delays[0]` after its last change,
/// then `delays[1]` after that, and so on. A value type: events in, databases to look at out.
struct LateLooks: Sendable {
    let delays: [Double]
    /// Databases remembered at most; beyond it new ones are not (the start-up sweep and the
    /// users' next writes still reach them).
    let limit: Int
    private(set) var pending: [String: (due: Double, step: Int)] = [:]

    init(delays: [Double], limit: Int = 200_000) {
        self.delays = delays
        self.limit = limit
    }

    /// `names` changed at `now` (seconds on any steady clock): their looks start over.
    mutating func changed(_ names: some Sequence<String>, at now: Double) {
        guard let first = delays.first else { return }
        for name in names where pending[name] != nil || pending.count < limit {
            pending[name] = (now + first, 0)
        }
    }

    /// The databases due for a look at `now`, each then waiting for its next delay (or forgotten
    /// after the last).
    mutating func due(at now: Double) -> [String] {
        let names = pending.filter { $0.value.due <= now }.map(\.key).sorted()
        for name in names {
            let step = pending[name]!.step + 1
            pending[name] = step < delays.count ? (now + delays[step], step) : nil
        }
        return names
    }

    /// Seconds from `now` until the next look is due; nil with none waiting.
    func wait(at now: Double) -> Double? {
        pending.values.map(\.due).min().map { max(0, $0 - now) }
    }
}
