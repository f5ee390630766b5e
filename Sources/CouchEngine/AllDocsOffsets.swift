import GRDB

/// The `offset` of `_all_docs` pages (documents before a page's start key), remembered for the
/// next page, as `PendingCounts` remembers `_changes`' `pending`. A client reading `_all_docs`
/// page by page (`startkey` = the last id of the page before; the application's exports and
/// sweeps, PouchDB's `allDocs` paging) asked SQLite to count every document before each page's
/// start, which walked the id index up to there: a whole read of a million documents in pages
/// of 2,000 spent most of its time counting. A remembered offset holds for the state of the
/// database it was taken in (update and purge sequences); the next page's offset is it plus
/// the documents between the two start keys, never a longer walk than counting afresh.
final class AllDocsOffsets: Sendable {
    /// Where a page starts: its start key, in one direction. Keys are equal by their bytes:
    /// Swift's `String` equality would take `é` and `e\u{301}` (two ids) for one.
    private struct Start: Equatable, Sendable {
        let descending: Bool
        let key: String

        static func == (a: Start, b: Start) -> Bool {
            a.descending == b.descending && a.key.utf8.elementsEqual(b.key.utf8)
        }
    }

    private let remembered = RememberedCounts<Start>()

    /// Non-deleted documents before `key` in the direction asked (ids below it ascending,
    /// above it descending), read in `db` (a snapshot in `state`).
    func offset(before key: String, descending: Bool, state: DocumentsState, _ db: GRDB.Database) throws -> Int {
        // Ids compare as SQLite's BINARY collation does: by their UTF-8 bytes.
        func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        let known = remembered.known(in: state)
            .filter {
                $0.position.descending == descending
                    && (descending ? !precedes($0.position.key, key) : !precedes(key, $0.position.key))
            }
            .max {
                descending ? precedes($1.position.key, $0.position.key) : precedes($0.position.key, $1.position.key)
            }
        let offset: Int
        if let known {
            let between =
                known.position.key.utf8.elementsEqual(key.utf8)
                ? 0
                : try Int.fetchOne(
                    db.cachedStatement(
                        sql: descending
                            ? "SELECT count(*) FROM docs WHERE deleted = 0 AND id > ? AND id <= ?"
                            : "SELECT count(*) FROM docs WHERE deleted = 0 AND id >= ? AND id < ?"),
                    arguments: descending ? [key, known.position.key] : [known.position.key, key]) ?? 0
            offset = known.count + between
        } else {
            offset =
                try Int.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT count(*) FROM docs WHERE deleted = 0 AND id \(descending ? ">" : "<") ?"),
                    arguments: [key]) ?? 0
        }
        remembered.remember(offset, at: Start(descending: descending, key: key), in: state)
        return offset
    }
}
