public import CouchJSON
import GRDB

/// CouchDB's partitioned databases: document ids `partition:rest`, so that one partition's
/// documents are one id range and queries can be scoped to it (`/{db}/_partition/{p}/…`).
public enum Partition {
    /// The partition of a document id, or nil for ids without one (design, local documents).
    public static func of(_ id: String) -> String? {
        guard !id.hasPrefix("_"), let colon = id.firstIndex(of: ":") else { return nil }
        return String(id[..<colon])
    }

    /// Checks a partition name as CouchDB's `couch_partition:validate_partition` does.
    public static func validate(_ partition: String) throws(CouchError) {
        func illegal(_ reason: String) -> CouchError {
            CouchError(status: 400, error: "illegal_partition", reason: reason)
        }
        if partition.isEmpty { throw illegal("Partition must not be empty") }
        if partition.hasPrefix("_") { throw illegal("Partition must not start with an underscore") }
        if partition.contains(":") { throw illegal("Partition must not contain a colon") }
    }

    /// Checks a document id for a partitioned database (`couch_partition:validate_docid`).
    public static func validate(documentID id: String) throws(CouchError) {
        if id.hasPrefix("_design/") || id.hasPrefix("_local/") { return }
        guard let colon = id.firstIndex(of: ":") else {
            throw CouchError(status: 400, error: "illegal_docid", reason: "Doc id must be of form partition:id")
        }
        try validate(String(id[..<colon]))
        try DocumentInput.validate(id: String(id[id.index(after: colon)...]))
    }

    /// The size CouchDB reports as a partition's `sizes.external`: the bytes its live documents
    /// keep (`RevisionStore.liveSize`: winning bodies and their attachments), in the same
    /// measure as the database's, so the partitions add up to it.
    static func externalSize(_ partition: String, db: GRDB.Database) throws -> Int {
        let (low, high) = idRange(partition)
        return try RevisionStore.liveSize(db, low: low, high: high)
    }

    /// The partitions of `ids` already at or over `limit` (before the batch), as CouchDB's
    /// updater finds them. None when the whole file is smaller than the limit.
    static func full(_ ids: [String], limit: Int, db: GRDB.Database) throws -> Set<String> {
        let partitions = Set(ids.compactMap(of))
        guard !partitions.isEmpty else { return [] }
        let fileSize =
            try Int.fetchOne(db, sql: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()") ?? 0
        guard fileSize >= limit else { return [] }
        return try partitions.filter { try externalSize($0, db: db) >= limit }
    }

    /// Whether a write makes its document larger than its stored winning revision (a deletion
    /// never does).
    static func grows(_ document: DocumentInput, db: GRDB.Database) throws -> Bool {
        guard !document.deleted, let id = document.id else { return false }
        let stored =
            try Int.fetchOne(
                db,
                sql: """
                    SELECT CASE WHEN d.deleted = 0 THEN length(r.body) ELSE 0 END FROM docs d JOIN revs r ON r.doc_id = d.id AND r.rev = d.winner WHERE d.id = ?
                    """, arguments: [id]) ?? 0
        return JSON.object(document.body).bytes.count > stored
    }

    /// The id range of a partition's documents, for `id >= low AND id < high`.
    public static func idRange(_ partition: String) -> (low: String, high: String) {
        (partition + ":", partition + ";")  // ";" follows ":"
    }
}

extension DocumentDatabase {
    /// `GET /{db}/_partition/{partition}`: the partition's live and deleted document counts
    /// and the size of its documents' winning bodies.
    public func partitionInfo(_ partition: String) async throws -> JSONObject {
        let (low, high) = Partition.idRange(partition)
        let (live, deleted, external) = try await reading { db -> (Int, Int, Int) in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT count(*) - coalesce(sum(d.deleted), 0), coalesce(sum(d.deleted), 0) FROM docs d WHERE d.id >= ? AND d.id < ?
                    """, arguments: [low, high])
            return (row?[0] ?? 0, row?[1] ?? 0, try Partition.externalSize(partition, db: db))
        }
        return [
            "db_name": .string(name),
            "sizes": ["active": .int(external), "external": .int(external)],
            "partition": .string(partition),
            "doc_count": .int(live),
            "doc_del_count": .int(deleted),
        ]
    }
}
