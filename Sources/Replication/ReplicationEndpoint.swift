public import CouchEngine
public import CouchJSON

/// One side of a replication: a database the replicator reads from or writes to, in this
/// process (`LocalEndpoint`) or over HTTP (`RemoteEndpoint`). The replicator sees only this
/// interface, as PouchDB's replicator sees only its adapter API.
public protocol ReplicationEndpoint: Sendable {
    /// A name for logs and status, without credentials.
    var displayName: String { get }

    /// Checks that the database exists, creating it first when `create` is true.
    func prepare(create: Bool) async throws

    /// A stable identity for replication ids: the same database gives the same string.
    func identity() async throws -> String

    /// Reads a `_local` document (replication checkpoints); nil when there is none.
    func localDocument(_ id: String) async throws -> JSONObject?

    /// Writes a `_local` document, replacing any previous version.
    func saveLocalDocument(_ id: String, _ body: JSONObject) async throws

    /// Changes after `since` with every leaf revision (`style=all_docs`), at most `limit` rows.
    func changes(since: JSON, limit: Int, filter: ReplicationFilter?) async throws -> ChangesBatch

    /// The source code of a filter function (`ddoc/name`, or `_view` with `view` in the
    /// parameters), which enters the replication id: edited code is a new replication.
    func filterCode(_ name: String, queryParams: JSONObject) async throws -> String

    /// Waits until there may be changes after `since` (or `timeout` passes); true if so.
    func waitForChanges(since: JSON, timeout: Duration) async throws -> Bool

    /// The revisions this database lacks, with leaves that may be their ancestors.
    func revsDiff(_ request: [(id: String, revs: [Revision])]) async throws -> [RevsDiffEntry]

    /// Revisions with their `_revisions` history; attachment bodies inline (base64) for
    /// attachments newer than `attsSince`, stubs for the rest.
    func fetch(_ requests: [FetchRequest]) async throws -> [JSON]

    /// Writes replicated revisions as they are (`new_edits=false`). Returns the rejected ones.
    func write(_ documents: [JSON]) async throws -> [WriteFailure]
}

/// Revisions to fetch for one document.
public struct FetchRequest: Sendable {
    public var id: String
    public var revs: [Revision]
    /// Revisions the target already has; attachments not newer than these stay stubs.
    public var attsSince: [Revision]

    public init(id: String, revs: [Revision], attsSince: [Revision]) {
        self.id = id
        self.revs = revs
        self.attsSince = attsSince
    }
}

public struct RevsDiffEntry: Sendable {
    public var id: String
    public var missing: [Revision]
    public var possibleAncestors: [Revision]

    /// Entries of a `_revs_diff` answer (`{id: {"missing": [...], "possible_ancestors": [...]}}`).
    static func parse(_ diff: JSONObject) -> [RevsDiffEntry] {
        diff.members.map { id, entry in
            RevsDiffEntry(
                id: id, missing: revisions(entry["missing"]), possibleAncestors: revisions(entry["possible_ancestors"]))
        }
    }
}

/// Revision ids from a JSON array of strings, skipping anything else.
func revisions(_ list: JSON?) -> [Revision] {
    (list?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(Revision.init) }
}

public struct WriteFailure: Sendable {
    public var id: String
    public var error: String
    public var reason: String
}

/// One `_changes` row: a document id and its leaf revisions.
public struct ChangeEntry: Sendable {
    public var id: String
    public var revs: [Revision]
    public var seq: JSON
    public var deleted: Bool

    /// A `_changes` row (`{"seq","id","changes":[{"rev"}],"deleted"?}`); nil without an id.
    init?(row: JSON) {
        guard let id = row["id"]?.stringValue else { return nil }
        self.id = id
        revs = revisions(.array((row["changes"]?.arrayValue ?? []).compactMap { $0["rev"] }))
        seq = row["seq"] ?? .null
        deleted = row["deleted"] == .bool(true)
    }
}

public struct ChangesBatch: Sendable {
    public var entries: [ChangeEntry]
    public var lastSeq: JSON
    /// Rows the source still has after this batch, when it says.
    public var pending: Int?
}

/// What a filtered replication carries.
public enum ReplicationFilter: Sendable {
    case docIDs([String])
    /// A Mango selector (as JSON, so it can be sent to a remote `_changes`).
    case selector(JSON)
    /// A design document's filter function (`ddoc/name`, or `_view`) with its `query_params`.
    case function(name: String, queryParams: JSONObject)

    /// Text that enters the replication id, so differently filtered replications keep
    /// separate checkpoints (for a filter function, with its source code).
    func identity(source: any ReplicationEndpoint) async throws -> String {
        switch self {
        case let .docIDs(ids): return "doc_ids:" + JSON.array(ids.sorted().map(JSON.string)).text
        case let .selector(selector): return "selector:" + selector.text
        case let .function(name, queryParams):
            let code = try await source.filterCode(name, queryParams: queryParams)
            return "filter:\(name)\n\(code)\n" + JSON.object(queryParams).text
        }
    }

    /// `ddoc/name` split in two; for `_view`, the `view` parameter split.
    public static func designPath(_ name: String, _ queryParams: JSONObject) throws -> (ddoc: String, function: String)
    {
        let path = name == "_view" ? queryParams["view"]?.stringValue ?? "" : name
        guard let slash = path.firstIndex(of: "/"), slash != path.startIndex, path.index(after: slash) != path.endIndex
        else {
            throw ReplicationError(
                .fatal,
                name == "_view"
                    ? "The _view filter needs query_params.view as ddoc/view"
                    : "`filter` must be ddoc/name, not \(name)")
        }
        return ("_design/" + path[..<slash], String(path[path.index(after: slash)...]))
    }

    /// Where the function's code lives in its design document.
    static func codePath(_ name: String, _ function: String) -> [String] {
        name == "_view" ? ["views", function, "map"] : ["filters", function]
    }
}

/// Why a replication step failed, and whether trying again can help.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// 401/403: credentials or permissions; retrying cannot help.
        case unauthorized
        /// The database does not exist.
        case notFound
        /// Network errors, 5xx, 429: worth retrying with backoff.
        case transient
        /// The peer's TLS certificate does not verify: a one-off replication stops at once (it
        /// needs the peer's certificate or the trusted CAs changed); a continuous one keeps
        /// trying, as through any other outage.
        case untrustedPeer
        /// Anything else the peer rejected.
        case fatal
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
    public var isRetryable: Bool { kind == .transient }
    /// Whether a replication that keeps following its source waits this out.
    public var isRetryableWhenContinuous: Bool { kind == .transient || kind == .untrustedPeer }
}
