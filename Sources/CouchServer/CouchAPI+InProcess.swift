public import CouchEngine
public import CouchJSON
public import CouchProtocol
import Foundation
import HTTPServing
public import HTTPTypes
import Hummingbird

extension CouchAPI {
    /// Performs a CouchDB API request in this process, as `user`, without a socket or a
    /// credentials check (through the same routes and steps as the listener's requests): how
    /// the application layer talks to the database it runs on. The request and answer are
    /// exactly those of the HTTP API (`path` percent-encoded as in a URL), so the same
    /// application code can run against Apache CouchDB over HTTP.
    public func perform(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String] = [:], body: JSON? = nil,
        user: UserContext = .system
    ) async -> (status: Int, body: [UInt8]) {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        let response: Response
        do {
            response = try await performTrusted(
                method, (path.hasPrefix("/") ? path : "/" + path) + CouchURL.query(query), headers: headers,
                body: body?.bytes ?? [], user: user)
        } catch {
            return (500, JSON.object(["error": "internal_server_error", "reason": .string("\(error)")]).bytes)
        }
        let collector = BodyCollector()
        do { try await response.body.write(collector) } catch {
            return (500, JSON.object(["error": "internal_server_error", "reason": .string("\(error)")]).bytes)
        }
        return (Int(response.status.code), collector.bytes.withLock { $0 })
    }
}

extension CouchAPI {
    /// Runs a request (`target`: its path and query, percent-encoded) through the routes and
    /// their middleware as `user`, trusted without credentials.
    func performTrusted(
        _ method: HTTPRequest.Method, _ target: String, headers: HTTPFields, body: [UInt8], user: UserContext,
        clientGone: @escaping @Sendable () -> Bool = { false }
    ) async throws -> Response {
        var head = HTTPRequest(method: method, scheme: nil, authority: nil, path: target)
        head.headerFields = headers
        var context = CouchRequestContext(peerAddress: nil, logger: logger)
        context.inProcessUser = user
        context.listener.clientGone = clientGone
        return try await pipeline.respond(
            to: Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body))), context: context)
    }

    /// Checks a name and password as the database API does (server admins, `_users`); the
    /// user with their roles, or nil.
    public func verify(name: String, password: String) async -> UserContext? {
        (try? await auth.login(name: name, password: password)) ?? nil
    }
}

/// Gathers a response body in memory (for in-process requests and rewritten answers).
final class BodyCollector: ResponseBodyWriter, Sendable {
    let bytes = Locked<[UInt8]>([])

    func write(_ buffer: ByteBuffer) async throws {
        bytes.withLock { $0 += buffer.readableBytesView }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// The CouchDB API of this process, called directly (no network, no credentials check).
/// Requests go through the routes as the listener's do; the copying calls consolidation makes
/// in every round (`changes`, `documents`, `storeReplicated`) go straight to the engine,
/// answering as the HTTP API does without writing JSON and parsing it back.
public struct InProcessCouch: CouchClient {
    let api: CouchAPI

    public init(api: CouchAPI) {
        self.api = api
    }

    public func request(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?
    ) async throws -> CouchReply {
        let (status, bytes) = await api.perform(method, path, query: query, body: body)
        return CouchReply(status: status, body: bytes)
    }

    public func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
        guard let user = await api.verify(name: name, password: password) else { return nil }
        return (user.name ?? name, user.roles)
    }

    public func changes(of name: String, since: String, limit: Int) async throws -> DocumentChanges? {
        var from = try DocumentDatabase.parseSequence(.string(since))
        // Answered from the record of recent changes when it covers them, as `_changes` is.
        if from >= 0, limit > 0,
            let page = api.store.recentChanges.page(name, since: from, limit: limit, includeDocs: true, allLeaves: true)
        {
            return DocumentChanges(rows: page.rows, lastSeq: page.lastSeq)
        }
        let db: DocumentDatabase
        do { db = try await api.store.open(name) } catch let error as CouchError where error.status == 404 {
            return nil
        }
        if from < 0 { from = try await db.updateSeq() }
        var options = ChangesOptions()
        options.since = from
        options.limit = limit
        options.allLeaves = true
        options.includeDocs = true
        let page = try await db.changes(options)
        return DocumentChanges(rows: page.rows, lastSeq: db.sequenceString(page.lastSeq))
    }

    public func documents(_ wanted: [DocumentRevision], from name: String) async throws -> [JSON] {
        guard !wanted.isEmpty else { return [] }
        let db = try await api.store.open(name)
        var options = ReadOptions()
        options.revs = true
        options.attachments = true
        // A revision that is not one refuses the request, as `_bulk_get` does.
        let requests = try wanted.map { wanted in
            RevisionsRequest(id: wanted.id, revs: [try api.databases.parseRev(.string(wanted.rev))])
        }
        var docs: [JSON] = []
        for case let .success(revisions) in try await db.openRevisions(requests, latest: false, options: options) {
            for case let .ok(doc) in revisions { docs.append(.object(doc)) }
        }
        return docs
    }

    public func existing(_ ids: [String], in name: String) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let db = try await api.store.open(name)
        var options = AllDocsOptions()
        options.keys = ids.map(JSON.string)
        options.computeOffset = false
        return Set(try await db.allDocs(options).rows.compactMap { $0["value"] != nil ? $0["id"]?.stringValue : nil })
    }

    public func store(_ docs: [JSON], in name: String) async throws -> [JSON] {
        guard !docs.isEmpty else { return [] }
        return try await api.databases.write(docs, to: try await api.store.open(name), newEdits: true, user: .system)
    }

    public func storeReplicated(_ docs: [JSON], in name: String) async throws -> [WriteRefusal] {
        guard !docs.isEmpty else { return [] }
        let db = try await api.store.open(name)
        return try await api.databases.write(docs, to: db, newEdits: false, user: .system).compactMap(
            WriteRefusal.init(row:))
    }
}
