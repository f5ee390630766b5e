public import CouchJSON
import Foundation
import GRDB

/// A `_local` document as a client sends it (replication checkpoints, device state).
///
/// CouchDB's replicator writes checkpoints with `"_rev": "0-N"` and
/// `"_revisions": {"start": 0, "ids": ["N"]}`; local documents keep no history, so
/// `_revisions` is accepted and ignored, and only `_id`, `_rev` and `_deleted` are special.
public struct LocalDocument: Sendable {
    public var rev: String?
    public var body: JSONObject
    public var deleted: Bool

    public init(rev: String? = nil, body: JSONObject = JSONObject(), deleted: Bool = false) {
        self.rev = rev
        self.body = body
        self.deleted = deleted
    }

    /// Reads a local document's JSON; throws `bad_request` for anything but an object, a
    /// non-string `_rev`, or another special (`_`) member, as CouchDB does.
    public init(json: JSON) throws {
        guard case let .object(object) = json else { throw CouchError.badRequest("Document must be a JSON object") }
        var body = JSONObject()
        var rev: String?
        var deleted = false
        for (key, value) in object.members {
            switch key {
            case "_id", "_revisions":
                continue
            case "_rev":
                guard case let .string(text) = value else { throw CouchError.badRequest("Invalid rev format") }
                rev = text
            case "_deleted":
                deleted = value == .bool(true)
            default:
                if key.hasPrefix("_") {
                    throw CouchError(
                        status: 400, error: "doc_validation", reason: "Bad special document member: \(key)")
                }
                body.members.append((key, value))
            }
        }
        self.init(rev: rev, body: body, deleted: deleted)
    }

    /// The generation `N` of a local revision `0-N` (0 without one); `bad_request` otherwise.
    static func generation(of rev: String?) throws -> Int {
        guard let rev else { return 0 }
        guard rev.hasPrefix("0-"), let number = Int(rev.dropFirst(2)), number >= 0 else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return number
    }
}

/// The `_local` documents of one database (`db.local`): replication checkpoints and other
/// state kept outside the changes feed, with no revision tree.
public struct LocalDocuments: Sendable {
    public let database: DocumentDatabase

    /// Reads a `_local` document (its `_id` includes the `_local/` prefix).
    public func get(id: String) async throws -> JSONObject {
        guard !DocumentInput.holdsNUL(id) else { throw CouchError.missing }
        return try await database.reading { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT rev, body FROM local_docs WHERE id = ?", arguments: [id]),
                var body = try JSON.parse(row[1] as Data).objectValue
            else { throw CouchError.missing }
            body.prepend("_rev", .string("0-\(row[0] as Int)"))
            body.prepend("_id", .string(id))
            return body
        }
    }

    /// Writes or deletes a `_local` document, as CouchDB 3 does: local documents have no
    /// revision tree and no conflict check. `_rev` is `0-N`; a write stores `0-(N+1)` (`0-1`
    /// without a `_rev`), a deletion answers `0-0`. Deleting a missing document is 404.
    public func put(id: String, rev: String?, body: JSONObject, deleted: Bool) async throws -> String {
        if DocumentInput.holdsNUL(id) {
            throw CouchError(
                status: 400, error: "illegal_docid", reason: "Document id must not contain the NUL character (U+0000)")
        }
        let previous = try LocalDocument.generation(of: rev)
        return try await database.writer.write { db, _ in
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

    /// `_local_docs`: the documents in id order.
    public func list(_ options: AllDocsOptions) async throws -> [JSON] {
        try await database.reading { db in
            var conditions: [String] = ["1"]
            var arguments: [any DatabaseValueConvertible] = []
            let (low, high) =
                options.descending ? (options.endKey, options.startKey) : (options.startKey, options.endKey)
            if let low { conditions.append("id >= ?"); arguments.append(low) }
            if let high {
                conditions.append(options.inclusiveEnd || options.descending ? "id <= ?" : "id < ?");
                arguments.append(high)
            }
            arguments.append(options.limit ?? -1)
            arguments.append(options.skip)
            let rows = try Row.fetchAll(
                db,
                sql:
                    "SELECT id, rev, body FROM local_docs WHERE \(conditions.joined(separator: " AND ")) ORDER BY id \(options.descending ? "DESC" : "ASC") LIMIT ? OFFSET ?",
                arguments: StatementArguments(arguments))
            return try rows.map { row in
                let id: String = row[0]
                let rev = "0-\(row[1] as Int)"
                var out: JSONObject = ["id": .string(id), "key": .string(id), "value": ["rev": .string(rev)]]
                if options.includeDocs, var body = try JSON.parse(row[2] as Data).objectValue {
                    body.prepend("_rev", .string(rev))
                    body.prepend("_id", .string(id))
                    out["doc"] = .object(body)
                }
                return .object(out)
            }
        }
    }
}

extension DocumentDatabase {
    /// This database's `_local` documents.
    public var local: LocalDocuments { LocalDocuments(database: self) }
}
