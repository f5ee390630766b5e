public import CouchEngine
public import CouchJSON
import Foundation

/// Resolves a filter function (`ddoc/name` or `_view`) with its query parameters on a local
/// database.
public typealias FilterResolver =
    @Sendable (DocumentDatabase, _ name: String, _ queryParams: JSONObject) async throws -> DocumentFilter

/// A database in this process, read and written through the engine without HTTP.
public struct LocalEndpoint: ReplicationEndpoint {
    public let store: DatabaseStore
    public let name: String
    /// Whom writes are made as, for validation functions (`userCtx`).
    public let user: UserContext
    /// Turns a filter function's name and parameters into a filter (JavaScript); nil where
    /// filter functions cannot run.
    public let filters: FilterResolver?

    public init(store: DatabaseStore, name: String, user: UserContext = .system, filters: FilterResolver? = nil) {
        self.store = store
        self.name = name
        self.user = user
        self.filters = filters
    }

    public var displayName: String { "local:\(name)" }

    func database() async throws -> DocumentDatabase {
        do { return try await store.open(name) } catch let error as CouchError where error.status == 404 {
            throw ReplicationError(.notFound, "Database \(name) does not exist")
        }
    }

    public func prepare(create: Bool) async throws {
        if create, !store.exists(name) {
            do { try await store.create(name) } catch let error as CouchError where error.status == 412 {}
        }
        _ = try await database()
    }

    /// The data directory and name: known before the database exists (so a replication that
    /// creates its target has the same id before and after).
    public func identity() async throws -> String {
        "local:\(store.directory.standardizedFileURL.path)/\(name)"
    }

    public func localDocument(_ id: String) async throws -> JSONObject? {
        do { return try await database().local.get(id: id) } catch let error as CouchError where error.status == 404 {
            return nil
        }
    }

    public func saveLocalDocument(_ id: String, _ body: JSONObject) async throws {
        var body = body
        body.removeValue(forKey: "_id")
        body.removeValue(forKey: "_rev")
        _ = try await database().local.put(id: id, rev: nil, body: body, deleted: false)
    }

    public func changes(since: JSON, limit: Int, filter: ReplicationFilter?) async throws -> ChangesBatch {
        let db = try await database()
        var options = ChangesOptions()
        options.since = try db.parseSequence(since)
        options.limit = limit
        options.allLeaves = true
        switch filter {
        case let .docIDs(ids)?: options.filter = .docIDs(Set(ids.map { ExactID($0) }))
        case let .selector(json)?: options.filter = .selector(try Selector(json: json))
        case let .function(name, queryParams)?:
            guard let filters else {
                throw ReplicationError(.fatal, "Filter functions need JavaScript, which this server does not have")
            }
            options.filter = .documents(try await filters(db, name, queryParams))
        case nil: break
        }
        let page = try await db.changes(options)
        return ChangesBatch(
            entries: page.rows.compactMap(ChangeEntry.init(row:)), lastSeq: .string(db.sequenceString(page.lastSeq)),
            pending: page.pending)
    }

    public func filterCode(_ name: String, queryParams: JSONObject) async throws -> String {
        let (ddocID, function) = try ReplicationFilter.designPath(name, queryParams)
        guard let ddoc = try await database().designDocuments().first(where: { $0["_id"]?.stringValue == ddocID })
        else {
            throw ReplicationError(.fatal, "The filter's design document \(ddocID) does not exist in \(self.name)")
        }
        var code: JSON? = .object(ddoc)
        for key in ReplicationFilter.codePath(name, function) { code = code?[key] }
        guard let text = code?.stringValue else {
            throw ReplicationError(.fatal, "\(ddocID) has no filter function \(function)")
        }
        if filters == nil {
            throw ReplicationError(.fatal, "Filter functions need JavaScript, which this server does not have")
        }
        return text
    }

    public func waitForChanges(since: JSON, timeout: Duration) async throws -> Bool {
        let db = try await database()
        return await db.notifier.wait(after: try db.parseSequence(since), timeout: timeout)
    }

    public func revsDiff(_ request: [(id: String, revs: [Revision])]) async throws -> [RevsDiffEntry] {
        RevsDiffEntry.parse(try await database().revsDiff(request))
    }

    public func fetch(_ requests: [FetchRequest]) async throws -> [JSON] {
        var options = ReadOptions()
        options.revs = true
        let results = try await database().openRevisions(
            requests.map { RevisionsRequest(id: $0.id, revs: $0.revs, attsSince: $0.attsSince) }, latest: true,
            options: options)
        var docs: [JSON] = []
        for result in results {
            for item in (try? result.get()) ?? [] {
                if case let .ok(doc) = item { docs.append(.object(doc)) }
            }
        }
        return docs
    }

    public func write(_ documents: [JSON]) async throws -> [WriteFailure] {
        let db = try await database()
        var inputs: [DocumentInput] = []
        var failures: [WriteFailure] = []
        for document in documents {
            do { inputs.append(try DocumentInput(json: document)) } catch {
                failures.append(
                    WriteFailure(id: document["_id"]?.stringValue ?? "", error: error.error, reason: error.reason))
            }
        }
        for (input, result) in zip(inputs, try await db.update(inputs, newEdits: false, user: user)) {
            if case let .failure(error) = result {
                failures.append(WriteFailure(id: input.id ?? "", error: error.error, reason: error.reason))
            }
        }
        return failures
    }
}
