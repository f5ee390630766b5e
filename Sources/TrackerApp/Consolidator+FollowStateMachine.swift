import CouchJSON

extension Consolidator {
    /// The decisions of the lane that copies what changes now (`Consolidator.follow`), without
    /// I/O or a clock: given what `_db_updates` answered and when, which databases a round
    /// reads, what to ask the feed next and whether to pause. The lane makes the requests and
    /// waits; times are seconds on its steady clock, passed in. Tested event by event.
    struct FollowStateMachine: Sendable {
        /// Where the feed of database updates stands (its `last_seq`).
        private(set) var since: String
        /// Databases to read at the next round though nothing says they changed again: the
        /// other lane had them, or `lt_locations_all` could not be written.
        private(set) var again: [String] = []
        /// When the latest round started: when its `_db_updates` answer came.
        private var roundStarted: Double
        private var late: LateLooks
        /// Whether changes are remembered for late looks (a cluster: `disturbed` given).
        let remembersChanges: Bool

        init(since: String, lateLooks: [Double], remembersChanges: Bool) {
            self.since = since
            late = LateLooks(delays: lateLooks)
            self.remembersChanges = remembersChanges
            roundStarted = -Consolidator.roundInterval.seconds
        }

        /// When the next round may start: rounds start at most every `roundInterval`, so under
        /// a steady stream of writes each carries a tenth of a second of them.
        var nextRound: Double { roundStarted + Consolidator.roundInterval.seconds }

        /// What to ask `_db_updates` for a round starting at `now`. With databases to read again,
        /// whatever is there at once; otherwise a long poll, of 10 s, of 1 s while databases
        /// wait to be retried (their wait ends without news), and while the cluster is
        /// `disturbed` not past the next late look (at least 100 ms).
        mutating func updatesQuery(at now: Double, retriesWaiting: Bool, disturbed: Bool) -> [String: String] {
            var query = ["since": since]
            guard again.isEmpty else { return query }
            var timeout = retriesWaiting ? 1000 : 10000
            if disturbed, let wait = late.wait(at: now) { timeout = min(timeout, max(100, Int(wait * 1000))) }
            query["feed"] = "longpoll"
            query["timeout"] = String(timeout)
            return query
        }

        /// `_db_updates` answered at `now`: the databases the round reads, in name order. Those
        /// that changed (users' databases; not one just created, which holds nothing yet, nor
        /// one deleted), those to read again, those whose retry is `due`, and while the cluster
        /// is `disturbed` those whose late look is due. Changes are remembered always (on a
        /// cluster), so that trouble found later covers the minutes before it.
        mutating func updatesArrived(_ answer: JSON, at now: Double, disturbed: Bool, due retries: [String]) -> [String]
        {
            roundStarted = now
            var names = Set(
                (answer["results"]?.arrayValue ?? []).compactMap { row -> String? in
                    guard let name = row["db_name"]?.stringValue, name.hasPrefix(Consolidator.prefix),
                        row["type"] != "deleted", row["type"] != "created"
                    else { return nil }
                    return name
                })
            if remembersChanges {
                late.changed(names, at: now)
                let looks = late.due(at: now)
                if disturbed { names.formUnion(looks) }
            }
            names.formUnion(again)
            names.formUnion(retries)
            since = answer["last_seq"]?.stringValue ?? since
            return names.sorted()
        }

        /// What the lane does once a round is over.
        enum Next: Equatable, Sendable {
            /// The next round, when `nextRound` says.
            case round
            /// A pause of this many seconds first.
            case pause(Double)
        }

        /// The round ended: the databases whose changes `lt_locations_all` could not take at
        /// all (`unwritten`) and those the other lane was copying (`taken`) are read again at
        /// the next round; after a failed write, a pause first.
        mutating func roundEnded(unwritten: [String], taken: [String]) -> Next {
            again = unwritten + taken
            return unwritten.isEmpty ? .round : .pause(2)
        }

        /// `_db_updates` could not be read: the same question again after a pause.
        func updatesFailed() -> Next { .pause(2) }
    }

    /// Databases waiting to be read again (one could not be read, or a location of it was
    /// refused), each after a wait that starts at `firstRetry` and doubles with each failure up
    /// to `longestRetry`. Times are passed in; the consolidator keeps one under a lock, shared
    /// by its lanes.
    struct RetryQueue: Sendable {
        /// A database waiting to be read again.
        struct Retry: Sendable {
            var attempts: Int
            var due: ContinuousClock.Instant
            /// The documents refused at the last attempt (none when the database could not be read).
            var refusals: [Refusal]
            var unreadable: Bool
        }

        private(set) var waiting: [String: Retry] = [:]

        /// `db` failed at `now`: it waits, longer than after its previous failure. Returns which
        /// attempt failed (1 for the first).
        mutating func failed(
            _ db: String, refusals: [Refusal], unreadable: Bool, at now: ContinuousClock.Instant
        ) -> Int {
            let attempts = (waiting[db]?.attempts ?? 0) + 1
            let wait = min(Consolidator.longestRetry, Consolidator.firstRetry * (1 << min(attempts - 1, 10)))
            waiting[db] = Retry(attempts: attempts, due: now + wait, refusals: refusals, unreadable: unreadable)
            return attempts
        }

        /// The databases whose wait is over at `now`, in name order; they stay in the queue
        /// until copied, and wait longer if they fail again.
        func due(at now: ContinuousClock.Instant) -> [String] {
            waiting.filter { $0.value.due <= now }.map(\.key).sorted()
        }

        /// `db` was copied to its latest change: nothing of it waits any more.
        mutating func copied(_ db: String) {
            waiting[db] = nil
        }
    }
}
