public import CouchJSON
import Foundation
import GRDB

/// Who is writing or reading: a name (nil for anonymous) and roles; `_admin` marks a server admin.
public struct UserContext: Sendable, Equatable {
    public var name: String?
    public var roles: [String]

    public init(name: String?, roles: [String]) {
        self.name = name
        self.roles = roles
    }

    public static let anonymous = UserContext(name: nil, roles: [])
    /// The server itself (replication jobs run by admins, internal bookkeeping).
    public static let system = UserContext(name: nil, roles: ["_admin"])
    public var isServerAdmin: Bool { roles.contains("_admin") }
    public var json: JSON {
        ["name": name.map(JSON.string) ?? .null, "roles": .array(roles.map(JSON.string))]
    }
}

/// A write as validation functions see it: the new document (`_id`, `_rev` it replaces or,
/// when replicated, its own, `_deleted`) and the revision it replaces.
public struct ProposedWrite: Sendable {
    public var newDocument: JSONObject
    public var oldDocument: JSONObject?
}

/// Checks writes before they are stored: CouchDB's `validate_doc_update` functions.
public protocol WriteValidator: Sendable {
    /// For each write, nil to accept it or the error that rejects it. `designDocuments` are
    /// the database's design documents that have a `validate_doc_update` function.
    func validate(
        _ writes: [ProposedWrite], database: DocumentDatabase, designDocuments: [JSONObject], user: UserContext
    ) async throws -> [CouchError?]
}

extension DocumentDatabase {
    /// The database's live design documents (with `_id` and `_rev`), cached until a design
    /// document is written or purged.
    public func designDocuments() async throws -> [JSONObject] {
        let (observed, cached) = designCache.withLock { ($0.generation, $0.documents) }
        if let cached { return cached }
        let documents = try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT d.id, d.winner, r.body FROM docs d JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner
                    WHERE d.id >= '_design/' AND d.id < '_design0' AND d.deleted = 0 ORDER BY d.id
                    """
            ).compactMap { row -> JSONObject? in
                guard var body = try JSON.parse(row[2] as Data).objectValue else { return nil }
                body.prepend("_rev", .string(row[1] as String))
                body.prepend("_id", .string(row[0] as String))
                return body
            }
        }
        designCache.withLock { cache in
            if cache.generation == observed { cache.documents = documents }
        }
        return documents
    }

    /// Forgets the cached design documents (one was written or purged).
    func designDocumentsChanged() {
        designCache.withLock { cache in
            cache.generation += 1
            cache.documents = nil
        }
    }

    /// Runs the validator over the documents it applies to; returns the rejected ones by index.
    /// Design documents (admins only) and `_local` documents are not validated, as in CouchDB.
    func rejectedWrites(
        _ documents: [DocumentInput], newEdits: Bool, user: UserContext
    ) async throws -> [Int: CouchError] {
        guard let validator else { return [:] }
        let validating = try await designDocuments().filter { $0["validate_doc_update"]?.stringValue != nil }
        guard !validating.isEmpty else { return [:] }
        let candidates = documents.indices.filter { index in
            guard let id = documents[index].id else { return false }
            return !id.hasPrefix("_design/") && !id.hasPrefix("_local/")
        }
        let proposals = try await reading { db in
            try candidates.map { try DocumentDatabase.proposedWrite(documents[$0], newEdits: newEdits, db: db) }
        }
        let checked = zip(candidates, proposals).compactMap { index, proposal in proposal.map { (index, $0) } }
        guard !checked.isEmpty else { return [:] }
        let verdicts = try await validator.validate(
            checked.map(\.1), database: self, designDocuments: validating, user: user)
        var rejected: [Int: CouchError] = [:]
        for ((index, _), verdict) in zip(checked, verdicts) {
            if let verdict { rejected[index] = verdict }
        }
        return rejected
    }

    /// What validation functions see for one write; nil when the write changes nothing (a
    /// replicated revision that is already here).
    static func proposedWrite(_ input: DocumentInput, newEdits: Bool, db: GRDB.Database) throws -> ProposedWrite? {
        guard let id = input.id else { return nil }
        let tree = try DocRow.fetch(db, id: id)?.tree
        var newDocument = JSONObject()
        newDocument["_id"] = .string(id)
        if let rev = input.rev { newDocument["_rev"] = .string(rev.description) }
        if input.deleted { newDocument["_deleted"] = true }
        for (key, value) in input.body.members where newDocument[key] == nil {
            newDocument.members.append((key, value))
        }
        if let attachments = input.attachments {
            // Attachment metadata without the bodies.
            newDocument["_attachments"] = .object(
                JSONObject(
                    attachments.members.map { name, value in
                        var meta = value.objectValue ?? JSONObject()
                        meta.removeValue(forKey: "data")
                        meta.removeValue(forKey: "follows")
                        meta["stub"] = true
                        return (name, .object(meta))
                    }))
        }
        // The revision being replaced: the edited one, or for a replicated revision its
        // nearest ancestor we have a body for.
        var previous: Revision?
        if newEdits {
            previous = input.rev
        } else {
            guard let rev = input.rev else { return ProposedWrite(newDocument: newDocument, oldDocument: nil) }
            if tree?.contains(rev) == true { return nil }
            previous = (input.revisions ?? []).dropFirst().first { tree?.contains($0) == true }
        }
        var oldDocument: JSONObject?
        if let previous, let tree, tree.contains(previous),
            var body = try RevisionStore.storedBody(db, id: id, rev: previous)
        {
            body.prepend("_rev", .string(previous.description))
            body.prepend("_id", .string(id))
            if tree.node(previous)?.deleted == true { body["_deleted"] = true }
            oldDocument = body
        }
        return ProposedWrite(newDocument: newDocument, oldDocument: oldDocument)
    }
}

/// The design documents a database caches, and a counter that changes whenever one is written.
struct DesignCache {
    var generation = 0
    var documents: [JSONObject]?
}
