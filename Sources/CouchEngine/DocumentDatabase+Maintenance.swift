public import CouchJSON
public import Foundation
import GRDB

extension DocumentDatabase {
    // MARK: Purge

    /// Removes leaf revisions for good (`_purge`): not replicated, no tombstone left. Returns
    /// what was purged and the new purge sequence.
    public func purge(_ request: [(id: String, revs: [Revision])]) async throws -> (purgeSeq: Int, purged: JSONObject) {
        defer { if request.contains(where: { $0.id.hasPrefix("_design/") }) { designDocumentsChanged() } }
        let (purgeSeq, purged, gone) = try await writer.write { db, context in
            var purged = JSONObject()
            var gone: [String] = []
            var indexTables: [IndexRegistry.Table]?  // found once, when the first document goes
            for (id, revs) in request {
                guard var row = try DocRow.fetch(db, id: id) else {
                    purged.members.append((id, .array([])))
                    continue
                }
                let leaves = Set(row.tree.leaves.map(\.rev))
                let targets = revs.filter { leaves.contains($0) }
                let oldWinner = row.winnerDeleted ? nil : row.tree.winner?.rev
                let sizeBefore = try oldWinner.map { try RevisionStore.storedSize(db, id: id, rev: $0) } ?? 0
                let removed = row.tree.remove(leaves: targets)
                for rev in removed { try RevisionStore.deleteBody(db, id: id, rev: rev) }
                purged.members.append((id, .array(targets.map { .string($0.description) })))
                guard !targets.isEmpty else { continue }
                context.changesComplete = false  // documents lose revisions, or vanish, unlisted
                context.purgeSeq += 1
                try db.execute(
                    sql: "INSERT INTO purges(purge_seq, doc_id, revs) VALUES (?, ?, ?)",
                    arguments: [context.purgeSeq, id, JSON.array(targets.map { .string($0.description) }).text])
                if let winner = row.tree.winner {
                    context.seq += 1
                    try db.execute(
                        sql: "UPDATE docs SET seq = ?, winner = ?, deleted = ?, tree = ? WHERE id = ?",
                        arguments: [context.seq, winner.rev.description, winner.deleted ? 1 : 0, row.tree.stored, id])
                    RevisionStore.adjustCounts(context, before: row.winnerDeleted, after: winner.deleted)
                    row.winnerDeleted = winner.deleted
                    let sizeAfter =
                        winner.deleted
                        ? 0
                        : (winner.rev == oldWinner
                            ? sizeBefore : try RevisionStore.storedSize(db, id: id, rev: winner.rev))
                    context.liveBytes += sizeAfter - sizeBefore
                } else {
                    try db.execute(sql: "DELETE FROM docs WHERE id = ?", arguments: [id])
                    RevisionStore.adjustCounts(context, before: row.winnerDeleted, after: nil)
                    context.liveBytes -= sizeBefore
                    if indexTables == nil { indexTables = try IndexRegistry.tables(db) }
                    try IndexRegistry.remove(id, from: indexTables ?? [], in: db)
                    gone.append(id)
                }
            }
            return (context.purgeSeq, purged, gone)
        }
        if !gone.isEmpty {
            loadedIndexes.withLock { loaded in
                for entry in loaded.values { entry.index.remove(gone) }
            }
        }
        return (purgeSeq, purged)
    }

    // MARK: Compaction

    /// Documents a compaction step looks at in one write transaction: writes queue behind each
    /// step, not behind the whole pass.
    static let compactionBatch = 500

    /// Drops bodies of non-leaf revisions (what CouchDB's compaction drops: revisions that are
    /// no longer leaves keep only their ids in the tree, `_revs_limit` of them) and attachment
    /// bodies no revision uses, a few hundred documents per write transaction so writes go on
    /// meanwhile; then returns the freed pages to the file system (`VACUUM`, during which
    /// writes wait). `progress` gets the documents done and the total after each step.
    public func compact(progress: @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }) async throws {
        let total = try await reading { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM docs") ?? 0 }
        var after = ""
        var done = 0
        while true {
            let from = after
            let (last, count) = try await writer.write { db, _ -> (String?, Int) in
                let docs = try Row.fetchAll(
                    db, sql: "SELECT id, tree, winner, deleted FROM docs WHERE id > ? ORDER BY id LIMIT ?",
                    arguments: [from, Self.compactionBatch])
                let stored = try db.makeStatement(sql: "SELECT rev FROM revs WHERE doc_id = ?")
                for doc in docs {
                    let id: String = doc[0]
                    let tree = try RevisionTree(stored: doc[1], winner: doc[2], deleted: (doc[3] as Int) != 0)
                    let leaves = Set(tree.leaves.map { $0.rev.description })
                    for rev in try String.fetchAll(stored, arguments: [id]) where !leaves.contains(rev) {
                        if let revision = Revision(rev) { try RevisionStore.deleteBody(db, id: id, rev: revision) }
                    }
                }
                return (docs.last?[0] as String?, docs.count)
            }
            done += count
            progress(min(done, max(total, done)), max(total, done))
            guard let last, count == Self.compactionBatch else { break }
            after = last
        }
        _ = try await writer.write { db, _ in
            try db.execute(sql: "DELETE FROM attachments WHERE digest NOT IN (SELECT digest FROM att_refs)")
            return true
        }
        try await compactFile()
    }

    /// Returns the file's free pages to the file system and repacks its tables and indexes
    /// (`VACUUM`, during which writes wait), keeping every revision.
    public func compactFile() async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "VACUUM")
        }
    }
}

extension DocumentDatabase {
    // MARK: Snapshot

    /// A consistent copy of this database in a new file at `path`: SQLite's online backup
    /// (its pages copied in one step inside one read transaction, so each write is in the copy
    /// whole or not at all), through this database's own connections — users' databases are
    /// opened without file locks, so no other connection may read them. Writes go on meanwhile
    /// (with concurrent readers) or wait for it (one connection). The copy holds the documents,
    /// `_local` documents, security object and indexes, page for page (not compacted: `VACUUM
    /// INTO` would compact it, and measured no faster with `lt-bench backup`).
    public func snapshot(to path: String) async throws {
        let pool = self.pool
        try await DatabaseStore.offThread {
            let copy = try DatabaseQueue(path: path)
            do {
                try pool.backup(to: copy)
                try copy.close()
            } catch {
                try? copy.close()
                throw error
            }
        }
    }
}

extension DatabaseStore {
    /// A snapshot of the database `name` (`DocumentDatabase.snapshot`) in a new file in the
    /// store's scratch directory, for a backup to take away; the caller deletes it.
    public func snapshot(of name: String) async throws -> URL {
        let database = try await open(name)
        let file = scratch.appendingPathComponent("snapshot-\(UUID().uuidString).sqlite")
        do {
            try await database.snapshot(to: file.path)
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
        return file
    }

    /// The file name a database has under `dbs/` (and in a backup).
    public static func fileName(of name: String) -> String {
        name.replacingOccurrences(of: "/", with: "%2F") + ".sqlite"
    }

    /// The database a file under `dbs/` belongs to (its own file, or its write-ahead log and
    /// that log's index: `-wal`, `-shm`); nil for any other file.
    public static func databaseName(ofFile file: String) -> String? {
        let base = file.hasSuffix("-wal") || file.hasSuffix("-shm") ? String(file.dropLast(4)) : file
        guard base.hasSuffix(".sqlite") else { return nil }
        return String(base.dropLast(".sqlite".count)).replacingOccurrences(of: "%2F", with: "/")
    }
}
