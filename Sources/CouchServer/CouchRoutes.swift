import CouchEngine
import CouchJSON
import CouchProtocol
import Hummingbird

/// The database API's URL table: every path of CouchDB 3's layout this server answers, area by
/// area, and the handler behind it. The steps every request passes first are in
/// `CouchMiddleware.swift`; each handler checks its own methods, so that a known path asked
/// with another method is CouchDB's 405 naming the allowed ones.
extension CouchAPI {
    /// The listener's responder: the routes behind the steps of `CouchMiddleware.swift`.
    func makeResponder() -> CouchResponder {
        CouchResponder(
            routes: makeRouter().buildResponder(), store: store, accessLog: CouchAccessLog(logger: logger), headers: CouchResponseHeaders(api: self),
            errors: CouchErrors(api: self), body: CouchRequestBody(maxBodySize: options.maxBodySize),
            authentication: CouchAuthentication(api: self), cluster: options.cluster.map { ClusterPassThrough(api: self, cluster: $0) })
    }

    func makeRouter() -> Router<CouchRequestContext> {
        let router = Router(context: CouchRequestContext.self)
        addServerRoutes(CouchRouteTable(api: self, routes: router.group(), database: false))
        // `/{db}/...`: the name checked and shared databases' owners answered first (`DatabaseAccess`).
        let database = CouchRouteTable(api: self, routes: router.group(":db"), database: true)
        addDatabaseRoutes(database)
        addDocumentRoutes(database)
        addQueryRoutes(database)
        return router
    }

    /// `/` and `/_*`: the server, sessions, replication and its scheduler.
    func addServerRoutes(_ server: CouchRouteTable) {
        server.on("/") { api, request in try api.welcome(request) }
        server.on("_up") { api, request in try api.up(request) }
        server.on("_uuids") { api, request in try api.uuids(request) }
        server.on("_all_dbs") { api, request in try api.allDatabases(request) }
        server.on("_dbs_info") { api, request in try await api.databasesInfo(request) }
        server.on("_db_updates") { api, request in try await api.databaseUpdates(request) }
        server.on("_session") { api, request in try await api.session(&request) }
        server.on("_active_tasks") { api, request in try api.activeTasks(request) }
        server.on("_membership") { api, request in try api.membership(request) }
        server.on("_replicate") { api, request in try await api.replicate(request) }
        server.on("_scheduler") { api, request in try await api.scheduler(request) }
        server.on("_scheduler/**") { api, request in try await api.scheduler(request) }
    }

    /// `/{db}` and the database-wide resources: bulk reads and writes, replication's
    /// checkpoints and differences, security, maintenance, partitions.
    func addDatabaseRoutes(_ db: CouchRouteTable) {
        db.on("") { api, request in try await api.databaseEndpoint(request.path[0], &request) }
        db.on("_all_docs", database: { api, db, request in try await api.allDocs(db, request) })
        db.on("_design_docs", database: { api, db, request in try await api.allDocs(db, request, within: ("_design/", "_design0")) })
        db.on("_local_docs", database: { api, db, request in try await api.localDocs(db, request) })
        db.on("_bulk_docs", database: { api, db, request in try await api.bulkDocs(db, request) })
        db.on("_bulk_get", database: { api, db, request in try await api.bulkGet(db, request) })
        db.on("_revs_diff", database: { api, db, request in try await api.revsDiff(db, request, legacy: false) })
        db.on("_missing_revs", database: { api, db, request in try await api.revsDiff(db, request, legacy: true) })
        db.on("_ensure_full_commit", database: { api, db, request in try api.ensureFullCommit(db, request) })
        db.on("_revs_limit", database: { api, db, request in try await api.revsLimit(db, request) })
        db.on("_security", database: { api, db, request in try await api.security(db, request) })
        db.on("_purge", database: { api, db, request in try await api.purge(db, request) })
        db.on("_compact", database: { api, db, request in try api.compact(db, request) })
        db.on("_compact/:ddoc", database: { api, db, request in try api.compact(db, request) })
        db.on("_view_cleanup", database: { api, db, request in try await api.cleanUpViews(db, request) })
        db.on("_geo_cleanup", database: { api, db, request in try await api.cleanUpGeoIndexes(db, request) })
        db.on("_partition", database: { api, db, request in try await api.partitionResource(db, request) })
        db.on("_partition/**", database: { api, db, request in try await api.partitionResource(db, request) })
    }

    /// Documents, their attachments, `_local` and design documents.
    func addDocumentRoutes(_ db: CouchRouteTable) {
        db.on(":doc", database: { api, db, request in
            try await api.documentEndpoint(db, try api.plainDocumentID(request.path[1], request), &request)
        })
        db.on(":doc/**", database: { api, db, request in
            try await api.attachmentEndpoint(db, try api.plainDocumentID(request.path[1], request), request.path[2...].joined(separator: "/"), request)
        })
        db.on("_local", database: { _, _, _ in throw CouchError.badRequest("Missing _local document id") })
        db.on("_local/**", database: { api, db, request in
            try await api.localDocument(db, "_local/" + request.path[2...].joined(separator: "/"), &request)
        })
        db.on("_design", database: { _, _, _ in throw CouchError.badRequest("Missing design document id") })
        db.on("_design/:ddoc", database: { api, db, request in try await api.documentEndpoint(db, "_design/\(request.path[2])", &request) })
        db.on("_design/:ddoc/**", database: { api, db, request in
            // Design functions have routes of their own; other `_` names are none.
            guard !request.path[3].hasPrefix("_") else { throw CouchError.notFound("missing") }
            return try await api.attachmentEndpoint(db, "_design/\(request.path[2])", request.path[3...].joined(separator: "/"), request)
        })
    }

    /// The feeds and queries: changes, Mango, views, design functions, geo.
    func addQueryRoutes(_ db: CouchRouteTable) {
        db.on("_changes") { api, request in
            if let recent = api.recentChanges(request.path[0], request) { return recent }
            return try await api.changes(try await api.store.open(request.path[0]), request)
        }
        db.on("_find", database: { api, db, request in try await api.find(db, request) })
        db.on("_explain", database: { api, db, request in try await api.explain(db, request) })
        db.on("_index", database: { api, db, request in try await api.index(db, &request) })
        db.on("_index/**", database: { api, db, request in try await api.index(db, &request) })
        db.on("_design/:ddoc/_info", design: { api, db, id, request in
            try api.requireMethod(request, .get)
            return try await api.designInfo(db, id)
        })
        db.on("_design/:ddoc/_view/:view", design: { api, db, id, request in try await api.view(db, id, request.path[4], request) })
        db.on("_design/:ddoc/_show/**", design: { api, db, id, request in try await api.show(db, id, Array(request.path[3...]), request) })
        db.on("_design/:ddoc/_list/**", design: { api, db, id, request in try await api.list(db, id, Array(request.path[3...]), request) })
        db.on("_design/:ddoc/_update/**", design: { api, db, id, request in
            try await api.updateHandler(db, id, Array(request.path[3...]), request)
        })
        db.on("_design/:ddoc/_geo/**", design: { api, db, id, request in try await api.geo(db, id, Array(request.path[3...]), request) })
        db.on("_design/:ddoc/_geo_info/**", design: { api, db, id, request in
            try await api.geoInfo(db, id, Array(request.path[3...]), request)
        })
        db.on("_design/:ddoc/_geo_grid/**", design: { api, db, id, request in
            try await api.geoGrid(db, id, Array(request.path[3...]), request)
        })
        db.on("_design/:ddoc/_rewrite/**", design: { _, _, _, _ in
            throw CouchError.notImplemented("_rewrite is deprecated in CouchDB 3 and not supported")
        })
        db.on("_design/:ddoc/_search/**", design: { _, _, _, _ in
            throw CouchError.notImplemented("_search (Lucene full-text search) is not supported")
        })
    }
}

/// One area's routes: each registered for every method CouchDB routes (the handler answers 405
/// for those it does not serve), as a handler of the request as `APIRequest`.
struct CouchRouteTable {
    unowned let api: CouchAPI
    let routes: RouterGroup<CouchRequestContext>
    /// Routes under `/{db}`: `DatabaseAccess` first.
    let database: Bool

    /// The methods routed to handlers (each answers CouchDB's 404 or 405 for those it does not
    /// serve); any other is 405 (`CouchErrors`).
    static let methods: [HTTPRequest.Method] = [.get, .head, .put, .post, .delete, .patch, .options, .connect, .trace, HTTPRequest.Method("COPY")!]

    func on(_ path: RouterPath, _ handle: @escaping @Sendable (CouchAPI, inout APIRequest) async throws -> APIResponse) {
        let access = database ? DatabaseAccess(api: api) : nil
        let handler: @Sendable (Request, CouchRequestContext) async throws -> Response = { [unowned api] request, context in
            if let answer = try await access?.ownerAnswer(request, context) { return answer }
            var request = APIRequest(request, context)
            return try await handle(api, &request).response
        }
        for method in Self.methods { routes.on(path, method: method, use: handler) }
    }

    /// A route under `/{db}` whose handler needs the database open.
    func on(_ path: RouterPath, database handle: @escaping @Sendable (CouchAPI, DocumentDatabase, inout APIRequest) async throws -> APIResponse) {
        on(path) { api, request in try await handle(api, try await api.store.open(request.path[0]), &request) }
    }

    /// A design function's route (`/{db}/_design/{ddoc}/_*`): a reader of the database may call it.
    func on(_ path: RouterPath, design handle: @escaping @Sendable (CouchAPI, DocumentDatabase, String, APIRequest) async throws -> APIResponse) {
        on(path, database: { api, db, request in
            try api.authorize(db, request.user, .read)
            return try await handle(api, db, "_design/\(request.path[2])", request)
        })
    }
}

extension APIRequest {
    /// The request as the handlers read it: path segments and query parameters decoded.
    init(_ request: Request, _ context: CouchRequestContext) {
        self.init(
            method: request.method, headers: request.headers, path: CouchURL.segments(request.uri.path),
            query: CouchURL.parameters(request.uri.query), body: context.body, user: context.user, client: context.client)
    }
}
