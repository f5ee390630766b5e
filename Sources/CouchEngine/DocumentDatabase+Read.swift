public import CouchJSON
import Foundation
import GRDB

/// One result of an `open_revs` read: the revision's document, or a revision we do not have.
public enum OpenRevision: Sendable {
    case ok(JSONObject)
    case missing(Revision)
}

/// A revision as `_bulk_get` answers it: the document already written as JSON, or missing.
public enum SerializedOpenRevision: Sendable {
    case ok([UInt8])
    case missing(Revision)
}

/// Revisions of one document to read: `revs` nil means every leaf.
public struct RevisionsRequest: Sendable {
    public var id: String
    public var revs: [Revision]?
    public var attsSince: [Revision]?
    public init(id: String, revs: [Revision]?, attsSince: [Revision]? = nil) {
        self.id = id
        self.revs = revs
        self.attsSince = attsSince
    }
}

extension DocumentDatabase {
    /// Reads a document: the winning revision, or `rev`. Throws 404 `missing`/`deleted`.
    public func document(
        id: String, rev: Revision? = nil, options: ReadOptions = ReadOptions()
    ) async throws -> JSONObject {
        var options = options
        options.revisionsLimit = revsLimit
        return try await reading { [options] db in
            guard let row = try DocRow.fetch(db, id: id) else { throw CouchError.missing }
            let target: Revision
            if let rev {
                guard row.tree.contains(rev) else { throw CouchError.missing }
                target = rev
            } else {
                guard let winner = row.tree.winner else { throw CouchError.missing }
                if winner.deleted { throw CouchError.deleted }
                target = winner.rev
            }
            guard let doc = try StoredDocument.assemble(db, id: id, rev: target, row: row, options: options) else {
                throw CouchError.missing
            }
            return doc
        }
    }

    /// Reads several revisions of a document (`open_revs`): `nil` means every leaf. With
    /// `latest`, a requested revision that has descendants is replaced by its leaves.
    public func openRevisions(
        id: String, revs: [Revision]?, latest: Bool, options: ReadOptions
    ) async throws -> [OpenRevision] {
        let result = try await openRevisions(
            [RevisionsRequest(id: id, revs: revs, attsSince: options.attsSince)], latest: latest, options: options)[0]
        return try result.get()
    }

    /// `open_revs` for many documents in one read transaction (`_bulk_get`, replication).
    /// Each request may name its own `atts_since`; a document that does not exist gives
    /// `missing` for each named revision, or a 404 error when no revision was named.
    public func openRevisions(
        _ requests: [RevisionsRequest], latest: Bool, options: ReadOptions
    ) async throws -> [Result<[OpenRevision], CouchError>] {
        try await openEach(requests, options: options, missing: OpenRevision.missing) { db, request, row, options in
            try StoredDocument.openRevisions(
                db, id: request.id, row: row, revs: request.revs, latest: latest, options: options)
        }
    }

    /// `openRevisions` with each document already JSON, written from its stored bytes without
    /// parsing them where nothing but the document and `_revisions` is asked (`_bulk_get`).
    public func openRevisionsSerialized(
        _ requests: [RevisionsRequest], latest: Bool, options: ReadOptions
    ) async throws -> [Result<[SerializedOpenRevision], CouchError>] {
        try await openEach(requests, options: options, missing: SerializedOpenRevision.missing) {
            db, request, row, options in
            try StoredDocument.openRevisionsSerialized(
                db, id: request.id, row: row, revs: request.revs, latest: latest, options: options)
        }
    }

    /// The documents of `requests` read together (their revision trees in one query), each
    /// request's revisions opened by `open` with its own `atts_since`.
    private func openEach<Opened: Sendable>(
        _ requests: [RevisionsRequest], options: ReadOptions, missing: @escaping @Sendable (Revision) -> Opened,
        open: @escaping @Sendable (GRDB.Database, RevisionsRequest, DocRow, ReadOptions) throws -> [Opened]
    ) async throws -> [Result<[Opened], CouchError>] {
        var options = options
        options.revisionsLimit = revsLimit
        return try await reading { [options] db in
            let stored = try DocRow.fetchAll(db, ids: requests.lazy.map(\.id))
            return try requests.map { request in
                var options = options
                if let since = request.attsSince { options.attsSince = since }
                guard let row = stored[ExactID(request.id)] else {
                    if let revs = request.revs { return .success(revs.map(missing)) }
                    return .failure(CouchError.missing)
                }
                return .success(try open(db, request, row, options))
            }
        }
    }

    /// An attachment's metadata and body, from the winning revision or `rev`: the body decoded,
    /// or, with `encoded`, as stored (gzip when the metadata says `"encoding": "gzip"`).
    public func attachment(
        docID: String, rev: Revision?, name: String, encoded: Bool = false
    ) async throws -> (meta: JSONObject, data: [UInt8]) {
        try await reading { db in
            guard let row = try DocRow.fetch(db, id: docID), let winner = row.tree.winner else {
                throw CouchError.missing
            }
            let target = rev ?? winner.rev
            if rev == nil, winner.deleted { throw CouchError.deleted }
            guard let meta = try AttachmentStore.storedAttachments(db, id: docID, rev: target)?[name]?.objectValue,
                let digest = meta["digest"]?.stringValue,
                let data = try Data.fetchOne(
                    db, sql: "SELECT data FROM attachments WHERE digest = ?", arguments: [digest])
            else {
                throw CouchError(status: 404, error: "not_found", reason: "Document is missing attachment")
            }
            if !encoded, meta["encoding"]?.stringValue == "gzip" {
                return (meta, try AttachmentEncoding.gunzip(Array(data)))
            }
            return (meta, Array(data))
        }
    }

    /// The current winning revision of a document, if it exists (deleted or not).
    public func winningRevision(id: String) async throws -> (rev: Revision, deleted: Bool)? {
        try await reading { db in
            guard let row = try DocRow.fetch(db, id: id), let winner = row.tree.winner else { return nil }
            return (winner.rev, winner.deleted)
        }
    }

    /// `_revs_diff`: for each document, the revisions this database lacks, and the leaves that
    /// could be their ancestors.
    public func revsDiff(_ request: [(id: String, revs: [Revision])]) async throws -> JSONObject {
        try await reading { db in
            var out = JSONObject()
            let stored = try DocRow.fetchAll(db, ids: request.lazy.map(\.id))
            for (id, revs) in request {
                let row = stored[ExactID(id)]
                let missing = row.map { $0.tree.missing(revs) } ?? revs
                guard !missing.isEmpty else { continue }
                var entry: JSONObject = ["missing": .array(missing.map { .string($0.description) })]
                if let tree = row?.tree {
                    var ancestors: [Revision] = []
                    for rev in missing {
                        for leaf in tree.possibleAncestors(of: rev) where !ancestors.contains(leaf) {
                            ancestors.append(leaf)
                        }
                    }
                    if !ancestors.isEmpty {
                        entry["possible_ancestors"] = .array(ancestors.map { .string($0.description) })
                    }
                }
                out.members.append((id, .object(entry)))
            }
            return out
        }
    }
}
