/// The databases a store keeps open, by name, with when each was last used, and the choice of
/// which to close when there are too many.
///
/// Not least recently used: devices write periodically, so with more active databases than
/// room, the least recently used database is the one whose device is due next, and every
/// write would reopen one (a loop larger than the cache is LRU's worst case). Instead a random
/// database among those not used recently is closed. On such a loop a share h of the writes
/// then finds its database open, h = exp(-(active / open) × (1 - h)): about 45% with 7 open
/// per 10 active, next to nothing below 1 in 3 (where only a policy that keeps a fixed set
/// resident would do better); one used a moment ago (a write the consolidator is about to
/// read) stays. A few random probes, constant time, where a scan for the oldest cost time in
/// proportion to the number open on every open.
struct OpenDatabases<Value> {
    private struct Entry {
        var value: Value
        var lastUse: UInt64
        /// Where the name is in `names`.
        var slot: Int
    }
    private var entries: [String: Entry] = [:]
    /// The names of `entries`, for picking one at random.
    private var names: [String] = []
    /// Uses so far: a use's number orders it among the others.
    private(set) var clock: UInt64 = 0

    var count: Int { entries.count }

    /// The value kept under `name`, marked as used now.
    mutating func use(_ name: String) -> Value? {
        guard let value = entries[name]?.value else { return nil }
        clock += 1
        entries[name]?.lastUse = clock
        return value
    }

    /// The value kept under `name`, not marking it used.
    func peek(_ name: String) -> Value? { entries[name]?.value }

    /// Keeps `value` under `name`, used now.
    mutating func insert(_ name: String, _ value: Value) {
        clock += 1
        if let existing = entries[name] {
            entries[name] = Entry(value: value, lastUse: clock, slot: existing.slot)
        } else {
            entries[name] = Entry(value: value, lastUse: clock, slot: names.count)
            names.append(name)
        }
    }

    /// Stops keeping `name`; returns its value.
    @discardableResult
    mutating func remove(_ name: String) -> Value? {
        guard let entry = entries.removeValue(forKey: name) else { return nil }
        let last = names.removeLast()
        if entry.slot < names.count {
            names[entry.slot] = last
            entries[last]!.slot = entry.slot
        }
        return entry.value
    }

    /// Removes and returns one value to close, chosen at random among those not used within the
    /// last `recent` uses (after a few probes find none, the oldest probed goes).
    mutating func evict<G: RandomNumberGenerator>(sparing recent: UInt64, using generator: inout G) -> Value? {
        guard !names.isEmpty else { return nil }
        var chosen: String?
        var oldest = UInt64.max
        for _ in 0..<8 {
            let name = names[Int.random(in: 0..<names.count, using: &generator)]
            let lastUse = entries[name]!.lastUse
            if lastUse + recent <= clock {
                chosen = name
                break
            }
            if lastUse < oldest {
                oldest = lastUse
                chosen = name
            }
        }
        return chosen.flatMap { remove($0) }
    }

    /// The values last used within (`from`, `through`].
    func used(after from: UInt64, through: UInt64) -> [Value] {
        entries.values.filter { $0.lastUse > from && $0.lastUse <= through }.map(\.value)
    }
}
