public import CouchJSON
import GRDB

/// The conflicts of one database (`db.conflicts`): documents with more than one live leaf,
/// made by replication, and their resolution on the winning branch.
public struct Conflicts: Sendable {
    public let database: DocumentDatabase

    /// Ids of documents with more than one live leaf (conflicts made by replication).
    public func ids() async throws -> [String] {
        try await database.reading { db in
            var ids: [String] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT id, tree, winner FROM docs WHERE deleted = 0 ORDER BY id")
            while let row = try cursor.next() {
                let tree = try RevisionTree(stored: row[1], winner: row[2], deleted: false)
                if tree.leaves.filter({ !$0.deleted }).count > 1 { ids.append(row[0]) }
            }
            return ids
        }
    }

    /// Resolves a document's conflicts in one transaction, as Cloudant Sync's
    /// `resolveConflictsForDocument:resolver:` does: `resolver` gets the winning revision and
    /// the losing live ones and returns the body to keep (or nil to leave things as they are).
    /// The returned body becomes a new revision on the winning branch and every other live leaf
    /// is deleted, so all replicas converge on it. Returns the new winning revision.
    @discardableResult
    public func resolve(
        id: String, resolver: @escaping @Sendable (_ winner: JSONObject, _ losers: [JSONObject]) -> JSONObject?
    ) async throws -> Revision? {
        let revsLimit = database.revsLimit
        return try await database.writer.write { db, context in
            guard let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner, !winner.deleted else {
                throw CouchError.missing
            }
            let losers = row.tree.leaves.dropFirst().filter { !$0.deleted }
            guard !losers.isEmpty else { return nil }
            let options = ReadOptions()
            guard let winnerDoc = try StoredDocument.assemble(db, id: id, rev: winner.rev, row: row, options: options)
            else {
                throw CouchError.missing
            }
            let loserDocs = try losers.compactMap {
                try StoredDocument.assemble(db, id: id, rev: $0.rev, row: row, options: options)
            }
            guard var resolved = resolver(winnerDoc, loserDocs) else { return nil }
            // Tombstones for the losing branches first, then the resolution on the winner.
            for loser in losers {
                _ = try RevisionStore.apply(
                    DocumentInput(id: id, rev: loser.rev, deleted: true), newEdits: true,
                    revsLimit: revsLimit, db: db, context: context)
            }
            resolved["_id"] = .string(id)
            resolved["_rev"] = .string(winner.rev.description)
            resolved.removeValue(forKey: "_deleted")
            // Attachments the resolution keeps are stubs pointing at bodies we already have.
            if case var .object(attachments)? = resolved["_attachments"] {
                for (name, value) in attachments.members where value["data"] == nil {
                    var stub = value.objectValue ?? JSONObject()
                    stub["stub"] = true
                    attachments[name] = .object(stub)
                }
                resolved["_attachments"] = .object(attachments)
            }
            return try RevisionStore.apply(
                try DocumentInput(json: .object(resolved)), newEdits: true,
                revsLimit: revsLimit, db: db, context: context)
        }
    }
}

extension DocumentDatabase {
    /// This database's conflicts.
    public var conflicts: Conflicts { Conflicts(database: self) }
}
