import CouchJSON
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
    public func update(_ documents: [DocumentInput], newEdits: Bool, user: UserContext = .system) async throws -> [Result<Revision, CouchError>] {
        let rejected = try await rejectedWrites(documents, newEdits: newEdits, user: user)
        let accepted = rejected.isEmpty ? documents : documents.indices.filter { rejected[$0] == nil }.map { documents[$0] }
        let revsLimit = self.revsLimit
        let maxSize = maxDocumentSize
        let partitioned = isPartitioned
        let written = try await writer.write { db, context in
            var results: [Result<Revision, CouchError>] = []
            results.reserveCapacity(accepted.count)
            // `apply` validates a document completely before it writes anything, so a rejected
            // document leaves no trace without a savepoint of its own; a storage error aborts
            // the whole write.
            for document in accepted {
                do {
                    if let id = document.id {
                        if partitioned { try Partition.validate(documentID: id) }
                        if !partitioned, id.hasPrefix("_design/"), document.body["options"]?["partitioned"] == .bool(true) {
                            throw CouchError(status: 400, error: "invalid_design_doc", reason: "partitioned option cannot be true in a non-partitioned database.")
                        }
                    }
                    results.append(.success(try RevisionStore.apply(document, newEdits: newEdits, revsLimit: revsLimit, maxSize: maxSize, db: db, context: context)))
                } catch let error as CouchError where error.status < 500 {
                    results.append(.failure(error))
                }
            }
            return results
        }
        if documents.contains(where: { $0.id?.hasPrefix("_design/") == true }) { designDocumentsChanged() }
        guard !rejected.isEmpty else { return written }
        var next = written.makeIterator()
        return documents.indices.map { index in rejected[index].map { .failure($0) } ?? next.next()! }
    }

    /// Writes one document and returns its new revision, or throws its error.
    public func update(_ document: DocumentInput, newEdits: Bool = true, user: UserContext = .system) async throws -> Revision {
        try await update([document], newEdits: newEdits, user: user)[0].get()
    }
}
