import GRDB

/// How many changes are left after a position of the changes feed (a `_changes` page's
/// `pending`), remembered for the next page. A client reading the feed page by page (PouchDB,
/// a device's pull, CouchDB's replicator) asks for the count after each page's end; counted
/// anew each time, every page walked the rest of the feed's index, which made a whole pull of a
/// database quadratic in its size (a 300,000-document pull spent a fifth of the server's time
/// counting). A remembered count holds for the state of the database it was taken in (its
/// update and purge sequences, which every change to the documents table moves); the next
/// page's count is it less the documents between the two positions.
final class PendingCounts: Sendable {
    /// The state of a database's documents: every write moves the update sequence, a purge
    /// that removes a document the purge sequence.
    struct State: Equatable {
        let updateSeq: Int
        let purgeSeq: Int
    }

    private struct Count {
        let state: State
        let after: Int
        let pending: Int
    }

    /// A few positions at once: several clients may be reading the feed.
    private static let kept = 8
    private let counts = Locked<[Count]>([])

    /// Documents whose latest change is after `seq`, read in `db` (a snapshot in `state`).
    func pending(after seq: Int, state: State, _ db: GRDB.Database) throws -> Int {
        let known = counts.withLock { counts in
            counts.filter { $0.state == state && $0.after <= seq }.max { $0.after < $1.after }
        }
        let pending: Int
        // From the nearest count before this position when the stretch between is the shorter
        // walk (sequences stand in for documents there); else all of the rest.
        if let known, seq - known.after <= state.updateSeq - seq {
            let between = known.after == seq ? 0 : try Int.fetchOne(
                db.cachedStatement(sql: "SELECT count(*) FROM docs WHERE seq > ? AND seq <= ?"), arguments: [known.after, seq]) ?? 0
            pending = known.pending - between
        } else {
            pending = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM docs WHERE seq > ?"), arguments: [seq]) ?? 0
        }
        counts.withLock { counts in
            counts.removeAll { $0.state != state || $0.after == seq }
            counts.append(Count(state: state, after: seq, pending: pending))
            if counts.count > Self.kept { counts.removeFirst(counts.count - Self.kept) }
        }
        return pending
    }
}
