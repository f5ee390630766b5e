public import CouchJSON
import HTTPTypes

/// A page of a database's changes as a replicator reads them.
public struct DocumentChanges: Sendable {
    /// The rows as CouchDB writes them: `seq`, `id`, `changes` (every leaf revision), `deleted`
    /// when the winner is a deletion, and `doc` (the winning revision).
    public var rows: [JSON]
    /// Where the next page starts (`since`).
    public var lastSeq: String

    public init(rows: [JSON], lastSeq: String) {
        self.rows = rows
        self.lastSeq = lastSeq
    }
}

/// One revision of one document.
public struct DocumentRevision: Sendable, Hashable {
    public var id: String
    public var rev: String

    public init(id: String, rev: String) {
        self.id = id
        self.rev = rev
    }
}

/// A document a replicated write refused, as `_bulk_docs` with `new_edits: false` lists it.
public struct WriteRefusal: Sendable, Equatable {
    public var id: String
    /// The revision sent, when the document had one.
    public var rev: String?
    public var error: String
    public var reason: String

    public init(id: String, rev: String?, error: String, reason: String) {
        self.id = id
        self.rev = rev
        self.error = error
        self.reason = reason
    }

    /// A row of a `_bulk_docs` answer, when it is an error.
    public init?(row: JSON) {
        guard let error = row["error"]?.stringValue else { return nil }
        self.init(
            id: row["id"]?.stringValue ?? "", rev: row["rev"]?.stringValue, error: error,
            reason: row["reason"]?.stringValue ?? "")
    }
}

/// The copying requests over CouchDB's HTTP API, for clients without a shorter way (Apache
/// CouchDB, a cluster): each is one request, and what does not answer as CouchDB does throws
/// its `CouchError`.
extension CouchClient {
    public func existing(_ ids: [String], in db: String) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let reply = try await request(
            .post, CouchURL.path([db, "_all_docs"]), query: [:], body: ["keys": .array(ids.map(JSON.string))])
        try reply.requireOK()
        // A row with a `value` is a document (`value.deleted` when it is deleted); others are `not_found`.
        return Set(
            (reply.json["rows"]?.arrayValue ?? []).compactMap { row in
                row["value"] != nil ? row["id"]?.stringValue : nil
            })
    }

    public func store(_ docs: [JSON], in db: String) async throws -> [JSON] {
        guard !docs.isEmpty else { return [] }
        let reply = try await request(
            .post, CouchURL.path([db, "_bulk_docs"]), query: [:], body: ["docs": .array(docs)])
        try reply.requireOK()
        return reply.json.arrayValue ?? []
    }

    public func changes(of db: String, since: String, limit: Int) async throws -> DocumentChanges? {
        let reply = try await request(
            .get, CouchURL.path([db, "_changes"]),
            query: [
                "since": since, "style": "all_docs", "include_docs": "true", "limit": String(limit),
            ], body: nil)
        if reply.status == 404 { return nil }
        try reply.requireOK()
        let answer = reply.json
        guard let rows = answer["results"]?.arrayValue, let lastSeq = Self.sequence(answer["last_seq"]) else {
            throw CouchError(
                status: 502, error: "bad_gateway", reason: "\(db)/_changes answered without results or last_seq")
        }
        return DocumentChanges(rows: rows, lastSeq: lastSeq)
    }

    public func documents(_ wanted: [DocumentRevision], from db: String) async throws -> [JSON] {
        guard !wanted.isEmpty else { return [] }
        let reply = try await request(
            .post, CouchURL.path([db, "_bulk_get"]), query: ["revs": "true", "attachments": "true"],
            body: ["docs": .array(wanted.map { ["id": .string($0.id), "rev": .string($0.rev)] })])
        try reply.requireOK()
        var docs: [JSON] = []
        for result in reply.json["results"]?.arrayValue ?? [] {
            for item in result["docs"]?.arrayValue ?? [] { if let doc = item["ok"] { docs.append(doc) } }
        }
        return docs
    }

    public func storeReplicated(_ docs: [JSON], in db: String) async throws -> [WriteRefusal] {
        guard !docs.isEmpty else { return [] }
        let reply = try await request(
            .post, CouchURL.path([db, "_bulk_docs"]), query: [:], body: ["docs": .array(docs), "new_edits": false])
        try reply.requireOK()
        // With new_edits=false, CouchDB lists only the documents it did not store.
        return (reply.json.arrayValue ?? []).compactMap(WriteRefusal.init(row:))
    }

    /// A `last_seq` as a `since` to send back: CouchDB's strings as they are, a number as digits.
    static func sequence(_ value: JSON?) -> String? {
        switch value {
        case let .string(text)?: text
        case let .int(number)?: String(number)
        default: nil
        }
    }
}
