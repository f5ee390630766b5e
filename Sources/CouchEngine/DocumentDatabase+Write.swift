public import CouchJSON
import Crypto
import Foundation
import GRDB

extension DocumentDatabase {
    /// Writes documents, each atomically, all in one transaction. With `newEdits` each document
    /// edits its `_rev` (or creates the document) and gets a new revision; without it, each
    /// document is a revision from elsewhere (replication), added to the tree as it is.
    /// The database's validator (design documents' `validate_doc_update`) sees each write
    /// first, as `user` (by default the server itself, a server admin); a rejected document
    /// is not written.
    /// Returns each document's new revision or its error, in input order.
    public func update(
        _ documents: [DocumentInput], newEdits: Bool, user: UserContext = .system
    ) async throws -> [Result<Revision, CouchError>] {
        let rejected = try await rejectedWrites(documents, newEdits: newEdits, user: user)
        let accepted =
            rejected.isEmpty ? documents : documents.indices.filter { rejected[$0] == nil }.map { documents[$0] }
        let revsLimit = self.revsLimit
        let maxSize = maxDocumentSize
        let partitioned = isPartitioned
        let maxPartitionSize = partitioned && newEdits ? self.maxPartitionSize : 0
        // Written in the order of their ids' bytes, as CouchDB's updater groups a batch
        // (`group_alike_docs`), so a batch's changes follow in the same order on both; documents
        // without an id keep their order, after the others. Results come back in input order.
        let order = Self.writeOrder(accepted)
        let written = try await writer.write { db, context in
            var results = [Result<Revision, CouchError>?](repeating: nil, count: accepted.count)
            let full =
                maxPartitionSize > 0
                ? try Partition.full(accepted.compactMap(\.id), limit: maxPartitionSize, db: db) : []
            let batch = accepted.count > 1 ? try BatchRows(db, ids: accepted.compactMap(\.id)) : nil
            // `apply` validates a document completely before it writes anything, so a rejected
            // document leaves no trace without a savepoint of its own; a storage error aborts
            // the whole write.
            for index in order {
                let document = accepted[index]
                do {
                    if let id = document.id {
                        if partitioned { try Partition.validate(documentID: id) }
                        if !partitioned, id.hasPrefix("_design/"),
                            document.body["options"]?["partitioned"] == .bool(true)
                        {
                            throw CouchError(
                                status: 400, error: "invalid_design_doc",
                                reason: "partitioned option cannot be true in a non-partitioned database.")
                        }
                        if !full.isEmpty, let partition = Partition.of(id), full.contains(partition),
                            try Partition.grows(document, db: db)
                        {
                            throw CouchError(
                                status: 403, error: "partition_overflow",
                                reason: "Partition limit exceeded due to update on '\(id)'")
                        }
                    }
                    results[index] = .success(
                        try RevisionStore.apply(
                            document, newEdits: newEdits, revsLimit: revsLimit, maxSize: maxSize, db: db,
                            context: context, batch: batch))
                } catch let error as CouchError where error.status < 500 {
                    results[index] = .failure(error)
                }
            }
            return results.map { $0! }
        }
        if documents.contains(where: { $0.id?.hasPrefix("_design/") == true }) { designDocumentsChanged() }
        guard !rejected.isEmpty else { return written }
        var next = written.makeIterator()
        return documents.indices.map { index in rejected[index].map { .failure($0) } ?? next.next()! }
    }

    /// The positions of `documents` in the order they are written: by id (UTF-8 bytes; the same
    /// id's documents in their order), then those without an id.
    static func writeOrder(_ documents: [DocumentInput]) -> [Int] {
        let keyed = documents.indices.map { (index: $0, id: documents[$0].id.map { Array($0.utf8) }) }
        return keyed.sorted { a, b in
            switch (a.id, b.id) {
            case let (x?, y?): return x == y ? a.index < b.index : x.lexicographicallyPrecedes(y)
            case (nil, nil): return a.index < b.index
            case (_?, nil): return true
            case (nil, _?): return false
            }
        }.map(\.index)
    }

    /// Writes one document and returns its new revision, or throws its error.
    public func update(
        _ document: DocumentInput, newEdits: Bool = true, user: UserContext = .system
    ) async throws -> Revision {
        try await update([document], newEdits: newEdits, user: user)[0].get()
    }
}
