import CouchEngine
import CouchJSON
import CouchProtocol
import HTTPServing
import Hummingbird
import NIOConcurrencyHelpers

/// The database API's URL table: every path of CouchDB 3's layout this server answers, area by
/// area, and the handler behind it. The steps every request passes first are in
/// `CouchMiddleware.swift`; each handler checks its own methods, so that a known path asked
/// with another method is CouchDB's 405 naming the allowed ones.
extension CouchAPI {
    /// The server-wide resources under `/_*`: status, UUIDs, the database list, sessions, tasks.
    var server: ServerEndpoints { ServerEndpoints(api: self) }
    /// A database and its database-wide resources: bulk reads and writes, replication
    /// checkpoints, security, maintenance, partitions.
    var databases: DatabaseEndpoints { DatabaseEndpoints(api: self) }
    /// Documents, their attachments and `_local` documents: read, write, delete, copy.
    var documents: DocumentEndpoints { DocumentEndpoints(api: self) }
    /// The `_changes` feed in all its modes.
    var changeFeeds: ChangesEndpoints { ChangesEndpoints(api: self) }
    /// Mango: `_find`, `_explain` and `_index`.
    var mango: MangoEndpoints { MangoEndpoints(api: self) }
    /// Design-document functions: views and filters.
    var design: DesignEndpoints { DesignEndpoints(api: self) }
    /// Design functions that answer HTTP: show, list, update and rewrite.
    var render: RenderEndpoints { RenderEndpoints(api: self) }
    /// Cloudant Geo: `_geo`, `_geo_info`, `_geo_grid`, `_geo_cleanup`.
    var geoQueries: GeoEndpoints { GeoEndpoints(api: self) }
    /// `_replicate` and the `_scheduler`.
    var replication: ReplicationEndpoints { ReplicationEndpoints(api: self) }

    /// The listener's responder: the routes behind the steps every request passes
    /// (`CouchMiddleware.swift`), outermost first.
    func makeResponder() -> any HTTPResponder<CouchRequestContext> {
        let errors = CouchErrors(api: self)
        return CouchResponder(routes: CouchRouteResponder(routes: makeRouter().buildResponder(), store: store)) {
            CouchMethodOverride()
            CouchRequestLog(
                accessLog: AccessLog(logger: logger, listener: "database", enabled: options.accessLog),
                metrics: options.metrics,
                clientAddress: options.clientAddress)
            CouchResponseHeaders(api: self)
            errors
            CouchJSONPCallback(jsonp: JSONP(config: config), errors: errors)
            CouchRequestBody(limit: requestBodyLimit)
            CouchAuthentication(api: self)
            if let cluster = options.cluster { ClusterPassThrough(api: self, cluster: cluster) }
        }
    }

    /// The URL table. Under `/{db}` the name is checked and shared databases' owners are
    /// answered first (`DatabaseAccess`); every route refuses path segments that are not UTF-8.
    func makeRouter() -> Router<CouchRequestContext> {
        let router = Router(context: CouchRequestContext.self)
        addServerRoutes(
            CouchRouteTable(api: self, routes: router.group().add(middleware: ValidPathBytes()), family: .server))
        let database = router.group(":db").add(middleware: ValidPathBytes()).add(middleware: DatabaseAccess(api: self))
        addDatabaseRoutes(CouchRouteTable(api: self, routes: database, family: .database))
        addDocumentRoutes(CouchRouteTable(api: self, routes: database, family: .documents))
        addQueryRoutes(CouchRouteTable(api: self, routes: database, family: .views))
        return router
    }

    /// `/` and `/_*`: the server, sessions, replication and its scheduler.
    func addServerRoutes(_ server: CouchRouteTable) {
        server.on("/") { api, request in try api.welcome(request) }
        server.on("_up") { api, request in try api.server.up(request) }
        server.on("_uuids") { api, request in try api.server.uuids(request) }
        server.on("_all_dbs") { api, request in try await api.server.allDatabases(request) }
        server.on("_dbs_info") { api, request in try await api.server.databasesInfo(request) }
        server.on("_db_updates") { api, request in try await api.server.databaseUpdates(request) }
        server.on("_session") { api, request in try await api.server.session(&request) }
        // As CouchDB: the rest of the path is ignored.
        server.on("_session/**") { api, request in try await api.server.session(&request) }
        server.on("_active_tasks") { api, request in try api.server.activeTasks(request) }
        server.on("_membership") { api, request in try api.server.membership(request) }
        server.on("_node/**") { api, request in try await api.nodes.answer(request.path[1...], request) }
        server.on("_replicate", family: .replication) { api, request in try await api.replication.replicate(request) }
        server.on("_scheduler", family: .replication) { api, request in try await api.replication.scheduler(request) }
        server.on("_scheduler/**", family: .replication) { api, request in try await api.replication.scheduler(request)
        }
    }

    /// `/{db}` and the database-wide resources: bulk reads and writes, replication's
    /// checkpoints and differences, security, maintenance, partitions.
    func addDatabaseRoutes(_ db: CouchRouteTable) {
        db.on("") { api, request in try await api.databases.databaseEndpoint(request.path[0], &request) }
        db.on(
            "_all_docs", family: .bulk, database: { api, db, request in try await api.databases.allDocs(db, request) })
        db.on(
            "_design_docs", family: .bulk,
            database: { api, db, request in
                try await api.databases.allDocs(db, request, within: ("_design/", "_design0"), counted: true)
            })
        db.on(
            "_local_docs", family: .bulk,
            database: { api, db, request in try await api.databases.localDocs(db, request) })
        db.on(
            "_bulk_docs", family: .bulk, database: { api, db, request in try await api.databases.bulkDocs(db, request) }
        )
        db.on(
            "_bulk_get", family: .bulk, database: { api, db, request in try await api.databases.bulkGet(db, request) })
        db.on(
            "_revs_diff", family: .replication,
            database: { api, db, request in try await api.databases.revsDiff(db, request, legacy: false) })
        db.on(
            "_missing_revs", family: .replication,
            database: { api, db, request in try await api.databases.revsDiff(db, request, legacy: true) })
        db.on(
            "_ensure_full_commit", family: .replication,
            database: { api, db, request in try api.databases.ensureFullCommit(db, request) })
        db.on("_revs_limit", database: { api, db, request in try await api.databases.revsLimit(db, request) })
        // CouchDB 2 removed temporary views; CouchDB 3 answers 410 to a reader of the database.
        db.on(
            "_temp_view",
            database: { _, db, request in
                try request.user.authorize(.read, to: db)
                throw CouchError(status: 410, error: "gone", reason: "Temporary views are not supported in CouchDB")
            })
        db.on("_security", database: { api, db, request in try await api.databases.security(db, request) })
        db.on("_purge", database: { api, db, request in try await api.databases.purge(db, request) })
        db.on("_compact", database: { api, db, request in try await api.databases.compact(db, request) })
        db.on("_compact/:ddoc", database: { api, db, request in try await api.databases.compact(db, request) })
        db.on("_view_cleanup", database: { api, db, request in try await api.databases.cleanUpViews(db, request) })
        db.on("_geo_cleanup", database: { api, db, request in try await api.databases.cleanUpGeoIndexes(db, request) })
        db.on("_partition", database: { api, db, request in try await api.databases.partitionResource(db, request) })
        db.on("_partition/**", database: { api, db, request in try await api.databases.partitionResource(db, request) })
    }

    /// Documents, their attachments, `_local` and design documents.
    func addDocumentRoutes(_ db: CouchRouteTable) {
        db.on(
            ":doc",
            database: { api, db, request in
                // `/db/_design%2Fname`: CouchDB redirects a read to `/db/_design/name` and takes a
                // write as the design document's.
                if request.path[1].hasPrefix("_design/"), request.path[1].count > "_design/".count {
                    if request.method == .get || request.method == .head {
                        var headers = HTTPFields()
                        let name = String(request.path[1].dropFirst("_design/".count))
                        let query = request.target.firstIndex(of: "?").map { String(request.target[$0...]) } ?? ""
                        headers[.location] = request.location(
                            "/" + CouchURL.encode(db.name) + "/_design/" + CouchURL.encode(name) + query,
                            scheme: api.options.databaseScheme)
                        return APIResponse(status: .movedPermanently, headers: headers, body: ResponseBody())
                    }
                    return try await api.documents.documentEndpoint(db, request.path[1], &request)
                }
                // `/db/_local%2F...` is no local document's path (CouchDB: 400 bad_request).
                if request.path[1].hasPrefix("_local/") { throw CouchError.badRequest("Invalid _local document id.") }
                return try await api.documents.documentEndpoint(
                    db, try api.databases.plainDocumentID(request.path[1], request), &request)
            })
        db.on(
            ":doc/**",
            database: { api, db, request in
                try await api.documents.attachmentEndpoint(
                    db, try api.databases.plainDocumentID(request.path[1], request),
                    request.path[2...].joined(separator: "/"), request)
            })
        db.on(
            "_local", family: .replication,
            database: { _, _, _ in throw CouchError.badRequest("Invalid _local document id.") })
        db.on(
            "_local/**", family: .replication,
            database: { api, db, request in
                // A local document's id is one segment: `/db/_local/a/b` is refused, as CouchDB does.
                guard request.path.count == 3 else { throw CouchError.badRequest("Invalid _local document id.") }
                return try await api.documents.localDocument(db, "_local/" + request.path[2], &request)
            })
        db.on("_design", database: { _, _, _ in throw CouchError.missing })
        db.on(
            "_design/:ddoc",
            database: { api, db, request in
                try await api.documents.documentEndpoint(db, "_design/\(request.path[2])", &request)
            })
        db.on(
            "_design/:ddoc/**",
            database: { api, db, request in
                // Design functions have routes of their own; other `_` names are none.
                guard !request.path[3].hasPrefix("_") else {
                    throw CouchError.notFound("Document is missing attachment")
                }
                return try await api.documents.attachmentEndpoint(
                    db, "_design/\(request.path[2])", request.path[3...].joined(separator: "/"), request)
            })
    }

    /// The feeds and queries: changes, Mango, views, design functions, geo.
    func addQueryRoutes(_ db: CouchRouteTable) {
        db.on("_changes", family: .changes) { api, request in
            if let recent = api.changeFeeds.recentChanges(request.path[0], request) { return recent }
            return try await api.changeFeeds.changes(try await api.store.open(request.path[0]), request)
        }
        db.on("_find", family: .find, database: { api, db, request in try await api.mango.find(db, request) })
        db.on("_explain", family: .find, database: { api, db, request in try await api.mango.explain(db, request) })
        db.on("_index", family: .find, database: { api, db, request in try await api.mango.index(db, &request) })
        db.on("_index/**", family: .find, database: { api, db, request in try await api.mango.index(db, &request) })
        db.on(
            "_design/:ddoc/_info",
            design: { api, db, id, request in
                try request.requireMethod(.get)
                return try await api.design.designInfo(db, id)
            })
        db.on(
            "_design/:ddoc/_view/:view",
            design: { api, db, id, request in try await api.design.view(db, id, request.path[4], request) })
        db.on(
            "_design/:ddoc/_show",
            design: { api, db, id, request in try await api.render.show(db, id, Array(request.path[3...]), request) })
        db.on(
            "_design/:ddoc/_show/**",
            design: { api, db, id, request in try await api.render.show(db, id, Array(request.path[3...]), request) })
        db.on(
            "_design/:ddoc/_list/**",
            design: { api, db, id, request in try await api.render.list(db, id, Array(request.path[3...]), request) })
        db.on(
            "_design/:ddoc/_update",
            design: { api, db, id, request in try await api.render.update(db, id, Array(request.path[3...]), request) })
        db.on(
            "_design/:ddoc/_update/**",
            design: { api, db, id, request in
                try await api.render.update(db, id, Array(request.path[3...]), request)
            })
        db.on(
            "_design/:ddoc/_geo/**", family: .geo,
            design: { api, db, id, request in try await api.geoQueries.geo(db, id, Array(request.path[3...]), request) }
        )
        db.on(
            "_design/:ddoc/_geo_info/**", family: .geo,
            design: { api, db, id, request in
                try await api.geoQueries.geoInfo(db, id, Array(request.path[3...]), request)
            })
        db.on(
            "_design/:ddoc/_geo_grid/**", family: .geo,
            design: { api, db, id, request in
                try await api.geoQueries.geoGrid(db, id, Array(request.path[3...]), request)
            })
        db.on(
            "_design/:ddoc/_rewrite", design: { api, db, id, request in try await api.render.rewrite(db, id, request) })
        db.on(
            "_design/:ddoc/_rewrite/**",
            design: { api, db, id, request in try await api.render.rewrite(db, id, request) })
        db.on(
            "_design/:ddoc/_search/**",
            design: { _, _, _, _ in
                throw CouchError.notImplemented("_search (Lucene full-text search) is not supported")
            })
    }
}

/// One area's routes: each registered for every method CouchDB routes (the handler answers 405
/// for those it does not serve), as a handler of the request as `APIRequest`, with the family
/// the request metrics label it by (the area's, unless the route names its own).
struct CouchRouteTable {
    unowned let api: CouchAPI
    let routes: RouterGroup<CouchRequestContext>
    let family: RouteFamily

    /// The methods routed to handlers (each answers CouchDB's 404 or 405 for those it does not
    /// serve); any other is 405 (`CouchRouteResponder`).
    static let methods: [HTTPRequest.Method] = [
        .get, .head, .put, .post, .delete, .patch, .options, .connect, .trace, HTTPRequest.Method("COPY")!,
    ]

    func on(
        _ path: RouterPath, family: RouteFamily? = nil,
        _ handle: @escaping @Sendable (CouchAPI, inout APIRequest) async throws -> APIResponse
    ) {
        let family = family ?? self.family
        let handler: @Sendable (Request, CouchRequestContext) async throws -> Response = {
            [unowned api] request, context in
            // The route the client asked for names the family, not one a rewrite led to.
            context.facts.withLockedValue { if $0.family == nil { $0.family = family } }
            var request = APIRequest(request, context)
            return try await handle(api, &request).response
        }
        for method in Self.methods { routes.on(path, method: method, use: handler) }
    }

    /// A route under `/{db}` whose handler needs the database open.
    func on(
        _ path: RouterPath, family: RouteFamily? = nil,
        database handle: @escaping @Sendable (CouchAPI, DocumentDatabase, inout APIRequest) async throws -> APIResponse
    ) {
        on(path, family: family) { api, request in
            try await handle(api, try await api.store.open(request.path[0]), &request)
        }
    }

    /// A design function's route (`/{db}/_design/{ddoc}/_*`): a reader of the database may call it.
    func on(
        _ path: RouterPath, family: RouteFamily? = nil,
        design handle: @escaping @Sendable (CouchAPI, DocumentDatabase, String, APIRequest) async throws -> APIResponse
    ) {
        on(
            path, family: family,
            database: { api, db, request in
                try request.user.authorize(.read, to: db)
                return try await handle(api, db, "_design/\(request.path[2])", request)
            })
    }
}

extension APIRequest {
    /// The request as the handlers read it: path segments and query parameters decoded.
    init(_ request: Request, _ context: CouchRequestContext) {
        self.init(
            method: request.method, headers: request.headers, path: DatabasePath.segments(request.uri.path),
            query: CouchURL.parameters(request.uri.query), body: context.body, user: context.user,
            client: context.client,
            clientGone: context.listener.clientGone, authority: request.head.authority, target: request.head.path ?? "",
            rewrites: context.rewrites)
    }
}
