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
    private let remembered = RememberedCounts<Int>()

    /// Documents whose latest change is after `seq`, read in `db` (a snapshot in `state`).
    func pending(after seq: Int, state: DocumentsState, _ db: GRDB.Database) throws -> Int {
        let known = remembered.known(in: state).filter { $0.position <= seq }.max { $0.position < $1.position }
        let pending: Int
        // From the nearest count before this position when the stretch between is the shorter
        // walk (sequences stand in for documents there); else all of the rest.
        if let known, seq - known.position <= state.updateSeq - seq {
            let between =
                known.position == seq
                ? 0
                : try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT count(*) FROM docs WHERE seq > ? AND seq <= ?"),
                    arguments: [known.position, seq]) ?? 0
            pending = known.count - between
        } else {
            pending =
                try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM docs WHERE seq > ?"), arguments: [seq])
                ?? 0
        }
        remembered.remember(pending, at: seq, in: state)
        return pending
    }
}
