/// The state of a database's documents: every write moves the update sequence, a purge that
/// removes a document the purge sequence. A count taken in one state holds until it changes.
struct DocumentsState: Equatable, Sendable {
    let updateSeq: Int
    let purgeSeq: Int
}

/// Counts of a page-by-page read, remembered with the state and position they were taken at,
/// so the next page's count can start from the nearest one instead of walking the index again
/// (`PendingCounts` for `_changes`, `AllDocsOffsets` for `_all_docs`). A few at once: several
/// clients may be reading.
final class RememberedCounts<Position: Equatable & Sendable>: Sendable {
    struct Count: Sendable {
        let state: DocumentsState
        let position: Position
        let count: Int
    }

    private static var kept: Int { 8 }
    private let counts = Locked<[Count]>([])

    /// The counts remembered in `state`.
    func known(in state: DocumentsState) -> [Count] {
        counts.withLock { $0.filter { $0.state == state } }
    }

    /// Remembers `count` at `position` in `state`, forgetting those of other states.
    func remember(_ count: Int, at position: Position, in state: DocumentsState) {
        counts.withLock { counts in
            counts.removeAll { $0.state != state || $0.position == position }
            counts.append(Count(state: state, position: position, count: count))
            if counts.count > Self.kept { counts.removeFirst(counts.count - Self.kept) }
        }
    }
}
