import CouchJSON
import Foundation
import GRDB

extension DocumentDatabase {
    // MARK: _local documents

    /// Reads a `_local` document (its `_id` includes the `_local/` prefix).
    public func localDocument(id: String) async throws -> JSONObject {
        try await reading { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT rev, body FROM local_docs WHERE id = ?", arguments: [id]),
                  var body = try JSON.parse(row[1] as Data).objectValue else { throw CouchError.missing }
            body.prepend("_rev", .string("0-\(row[0] as Int)"))
            body.prepend("_id", .string(id))
            return body
        }
    }

    /// Writes or deletes a `_local` document, as CouchDB 3 does: local documents have no
    /// revision tree and no conflict check. `_rev` is `0-N`; a write stores `0-(N+1)` (`0-1`
    /// without a `_rev`), a deletion answers `0-0`. Deleting a missing document is 404.
    public func putLocalDocument(id: String, rev: String?, body: JSONObject, deleted: Bool) async throws -> String {
        let previous = try LocalDocument.generation(of: rev)
        return try await writer.write { db, _ in
            let exists = try Bool.fetchOne(db, sql: "SELECT 1 FROM local_docs WHERE id = ?", arguments: [id]) == true
            if deleted {
                guard exists else { throw CouchError.missing }
                try db.execute(sql: "DELETE FROM local_docs WHERE id = ?", arguments: [id])
                return "0-0"
            }
            let next = previous.addingReportingOverflow(1)
            guard !next.overflow else { throw CouchError.badRequest("Invalid rev format") }
            try db.execute(
                sql: "INSERT OR REPLACE INTO local_docs(id, rev, body) VALUES (?, ?, ?)",
                arguments: [id, next.partialValue, Data(JSON.object(body).bytes)])
            return "0-\(next.partialValue)"
        }
    }

    // MARK: Purge

    /// Removes leaf revisions for good (`_purge`): not replicated, no tombstone left. Returns
    /// what was purged and the new purge sequence.
    public func purge(_ request: [(id: String, revs: [Revision])]) async throws -> (purgeSeq: Int, purged: JSONObject) {
        defer { if request.contains(where: { $0.id.hasPrefix("_design/") }) { designDocumentsChanged() } }
        let (purgeSeq, purged, gone) = try await writer.write { db, context in
            var purged = JSONObject()
            var gone: [String] = []
            var indexTables: [IndexTable]?  // found once, when the first document goes
            for (id, revs) in request {
                guard var row = try DocRow.fetch(db, id: id) else {
                    purged.members.append((id, .array([])))
                    continue
                }
                let leaves = Set(row.tree.leaves.map(\.rev))
                let targets = revs.filter { leaves.contains($0) }
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
                        arguments: [context.seq, winner.rev.description, winner.deleted ? 1 : 0, row.tree.encoded, id])
                    RevisionStore.adjustCounts(context, before: row.winnerDeleted, after: winner.deleted)
                    row.winnerDeleted = winner.deleted
                } else {
                    try db.execute(sql: "DELETE FROM docs WHERE id = ?", arguments: [id])
                    RevisionStore.adjustCounts(context, before: row.winnerDeleted, after: nil)
                    if indexTables == nil { indexTables = try DocumentDatabase.indexTables(db) }
                    try DocumentDatabase.removeFromIndexes(db, id: id, tables: indexTables ?? [])
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

    /// A document purged down to its last revision leaves the changes feed, so the indexes,
    /// which follow that feed, would never learn of it: its rows go now, in the purge's
    /// transaction. (One that keeps a revision gets a new sequence and is re-indexed.)
    static func removeFromIndexes(_ db: GRDB.Database, id: String, tables: [IndexTable]) throws {
        for index in tables {
            let removed = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(index.table) WHERE doc_id = ?", arguments: [id]) ?? 0
            guard removed > 0 else { continue }
            try db.execute(sql: "DELETE FROM \(index.table) WHERE doc_id = ?", arguments: [id])
            if index.countsRows {
                try db.execute(sql: "UPDATE \(index.registry) SET rows = rows - ? WHERE name = ?", arguments: [removed, index.table])
            }
        }
    }

    // MARK: Compaction

    /// Drops bodies of non-leaf revisions and attachment bodies no revision uses, then
    /// returns the freed pages to the file system.
    public func compact() async throws {
        _ = try await writer.write { db, _ in
            let docs = try Row.fetchAll(db, sql: "SELECT id, tree FROM docs")
            for doc in docs {
                let id: String = doc[0]
                let tree = try RevisionTree(encoded: doc[1])
                let leaves = Set(tree.leaves.map { $0.rev.description })
                let stored = try String.fetchAll(db, sql: "SELECT rev FROM revs WHERE doc_id = ?", arguments: [id])
                for rev in stored where !leaves.contains(rev) {
                    if let revision = Revision(rev) { try RevisionStore.deleteBody(db, id: id, rev: revision) }
                }
            }
            try db.execute(sql: "DELETE FROM attachments WHERE digest NOT IN (SELECT digest FROM att_refs)")
            return true
        }
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "VACUUM")
        }
    }
}
