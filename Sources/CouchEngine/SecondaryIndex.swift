public import CouchJSON
import Foundation
public import GRDB

/// A document changed since an index's checkpoint, holding its winning revision's stored bytes:
/// an index parses each document when it comes to it (`document()`), so a batch of thousands
/// costs its stored size in memory rather than that of as many parsed documents.
public struct ChangedDocument: Sendable {
    public let id: String
    public let seq: Int
    /// The winning revision's stored body, nil when it is deleted.
    let body: Data?
    let rev: String
    /// The encoded revision tree, for the losing leaves.
    let tree: String

    /// The winning body as CouchDB's index updater opens it (`_id`, `_rev`, then
    /// `_conflicts`/`_deleted_conflicts`, and with `localSeq` its `_local_seq`), or nil when it
    /// is deleted or a design document (which indexes drop unless a view's design document
    /// says `include_design`). Parsed anew at each call.
    public func document(includeDesign: Bool = false, localSeq: Bool = false) throws -> JSONObject? {
        guard let body, includeDesign || !id.hasPrefix("_design/"), var doc = try JSON.parse(body).objectValue else {
            return nil
        }
        doc.prepend("_rev", .string(rev))
        doc.prepend("_id", .string(id))
        if localSeq { doc["_local_seq"] = .int(seq) }
        // Only a tree of more than one revision can have losing leaves: most documents are
        // not parsed for this.
        if tree.utf8.count > 2, tree.contains("],[") {
            let losers = try RevisionTree(encoded: tree).leaves.dropFirst()
            let conflicts = losers.filter { !$0.deleted }.map { JSON.string($0.rev.description) }
            let deleted = losers.filter(\.deleted).map { JSON.string($0.rev.description) }
            if !conflicts.isEmpty { doc.members.append(("_conflicts", .array(conflicts))) }
            if !deleted.isEmpty { doc.members.append(("_deleted_conflicts", .array(deleted))) }
        }
        return doc
    }

    /// The live documents of a batch, parsed, in order (those `document()` gives nil left out).
    public static func documents(_ changed: [ChangedDocument]) throws -> [JSONObject] {
        try changed.compactMap { try $0.document() }
    }
}

/// A secondary index kept from the changes feed: a view, a Mango index or a geo index. The
/// engine catches every kind up with one loop (`DocumentDatabase.catchUp`); an index says only where
/// its checkpoint and rows live, what a batch of changed documents becomes, and how to store it.
///
/// The loop reads a batch after the checkpoint, has the index `prepare` it outside any
/// transaction (a map function may be a JavaScript round trip), then in one write transaction
/// checks the checkpoint has not moved (another update got there first), lets the index
/// `store` the batch and moves the checkpoint: an index is always exactly as of its checkpoint.
/// While one batch is stored the next is read and prepared, so a map function and the writer
/// work at once.
public protocol SecondaryIndex: Sendable {
    /// What a batch of changed documents becomes before it is stored.
    associatedtype Batch: Sendable

    /// The table of this kind's indexes and their checkpoints (`name TEXT PRIMARY KEY, seq INTEGER`).
    static var registry: String { get }
    /// This index's rows; also its name in the registry.
    var table: String { get }
    /// Changed documents read and stored per transaction.
    var batchSize: Int { get }

    /// Creates the registry and this index's tables when missing, registered at checkpoint 0.
    func createTables(_ db: GRDB.Database) throws
    /// The rows of a batch of changed documents.
    func prepare(_ changed: [ChangedDocument]) async throws -> Batch
    /// Replaces the rows of the batch's documents (`changed`, in sequence order), inside the
    /// transaction that moves the checkpoint.
    func store(_ batch: Batch, changed: [ChangedDocument], in db: GRDB.Database) throws
}

/// An index also kept in memory beside its table (the geo index's spatial tree): a purge,
/// which takes documents out of every index's table, takes them out of it too.
package protocol LoadedIndex: AnyObject, Sendable {
    /// Drops these documents' entries.
    func remove(_ ids: [String])
}

extension DocumentDatabase {
    /// Brings `index` up to date with the changes feed, batch by batch. `committed` is called
    /// after each batch is stored, with the batch and the checkpoints before and after it (the
    /// geo index applies the same changes to its in-memory copy). An index known to have seen
    /// the latest commit costs nothing, one with nothing to catch up one read; one never built
    /// gets its tables.
    public func catchUp<Index: SecondaryIndex>(
        _ index: Index, committed: (Index.Batch, _ from: Int, _ to: Int) -> Void = { _, _, _ in }
    ) async throws {
        // Read before the changes are: when they turn out empty, the index has every commit up
        // to this one at least.
        let latest = notifier.latest
        if let current = currentIndexes.withLock({ $0[index.table] }), current >= latest { return }
        var next = try await checkpointAndChanges(index)
        // A batch prepared while the one before it was stored.
        var prepared: Index.Batch?
        while true {
            let (since, changed, exists) = next
            if !exists {
                _ = try await writer.write { db, _ in
                    try index.createTables(db)
                    return true
                }
                next = try await checkpointAndChanges(index)
                continue
            }
            guard let last = changed.last?.seq else {
                currentIndexes.withLock { $0[index.table] = max($0[index.table] ?? 0, latest) }
                return
            }
            let batch: Index.Batch
            if let ready = prepared { batch = ready } else { batch = try await index.prepare(changed) }
            prepared = nil
            // The next batch is read, and prepared (a map function's round trip), while this one
            // is written: the writer and the map function work at once.
            async let upcoming = { () async throws -> ([ChangedDocument], Index.Batch?) in
                let following = try await reading { db in
                    try IndexRegistry.changedDocuments(db, after: last, limit: index.batchSize)
                }
                return (following, following.isEmpty ? nil : try await index.prepare(following))
            }()
            let stored = try await writer.write { db, _ -> Bool in
                let current =
                    try Int.fetchOne(
                        db, sql: "SELECT seq FROM \(Index.registry) WHERE name = ?", arguments: [index.table]) ?? 0
                guard current == since else { return false }  // another update got here first
                try index.store(batch, changed: changed, in: db)
                try db.execute(
                    sql: "UPDATE \(Index.registry) SET seq = ? WHERE name = ?", arguments: [last, index.table])
                return true
            }
            if stored {
                committed(batch, since, last)
                let (following, batch) = try await upcoming
                prepared = batch
                next = (last, following, true)
            } else {
                _ = try? await upcoming
                next = try await checkpointAndChanges(index)
            }
        }
    }

    /// An index's checkpoint, the documents changed after it (a batch), and whether its tables exist.
    private func checkpointAndChanges<Index: SecondaryIndex>(
        _ index: Index
    ) async throws -> (Int, [ChangedDocument], Bool) {
        try await reading { db in
            guard try db.tableExists(Index.registry), try db.tableExists(index.table) else { return (0, [], false) }
            let since =
                try Int.fetchOne(db, sql: "SELECT seq FROM \(Index.registry) WHERE name = ?", arguments: [index.table])
                ?? 0
            return (since, try IndexRegistry.changedDocuments(db, after: since, limit: index.batchSize), true)
        }
    }

    /// Drops the indexes of one kind (`registry`) whose table is not in `keep`, with their
    /// checkpoints and in-memory copies (`_view_cleanup`, `_geo_cleanup`).
    package func dropIndexes(registry: String, keeping keep: Set<String>) async throws {
        let dropped = try await writing { db -> [String] in
            guard try db.tableExists(registry) else { return [] }
            var dropped: [String] = []
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
            for table in try String.fetchAll(db, sql: "SELECT name FROM \(registry)") where !keep.contains(table) {
                // With the tables named after it that keep something of it (a view's blocks).
                for companion in tables where companion.hasPrefix(table + "_") {
                    try db.execute(sql: "DROP TABLE IF EXISTS \(companion)")
                }
                try db.execute(sql: "DROP TABLE IF EXISTS \(table)")
                try db.execute(sql: "DELETE FROM \(registry) WHERE name = ?", arguments: [table])
                dropped.append(table)
            }
            return dropped
        }
        currentIndexes.withLock { current in for table in dropped { current.removeValue(forKey: table) } }
        loadedIndexes.withLock { loaded in for table in dropped { loaded.removeValue(forKey: table) } }
    }

    /// Makes `index`'s tables if it has none (an empty index at checkpoint 0, as CouchDB reads a
    /// view never built with `update=false`).
    public func createIfMissing<Index: SecondaryIndex>(_ index: Index) async throws {
        let exists = try await reading { db in try db.tableExists(Index.registry) && db.tableExists(index.table) }
        if exists { return }
        _ = try await writer.write { db, _ in
            try index.createTables(db)
            return true
        }
    }

}
