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
    /// marked (`DatabaseAccess`); every route refuses path segments that are not UTF-8. Each
    /// route's declaration goes to `declarations` when given.
    func makeRouter(declaring declarations: RouteDeclarations? = nil) -> Router<CouchRequestContext> {
        let router = Router(context: CouchRequestContext.self)
        func table(_ routes: RouterGroup<CouchRequestContext>, _ family: RouteFamily) -> CouchRouteTable {
            CouchRouteTable(
                api: self, routes: routes, family: family, underDatabase: family != .server,
                declarations: declarations)
        }
        addServerRoutes(table(router.group().add(middleware: ValidPathBytes()), .server))
        let database = router.group(":db").add(middleware: ValidPathBytes()).add(middleware: DatabaseAccess(api: self))
        addDatabaseRoutes(table(database, .database))
        addDocumentRoutes(table(database, .documents))
        addQueryRoutes(table(database, .views))
        return router
    }

    /// Every route of the URL table as declared: its path, family, methods, access rule, and
    /// whether owners of a shared database may use it.
    package func routeDeclarations() -> [RouteDeclaration] {
        let declarations = RouteDeclarations()
        _ = makeRouter(declaring: declarations)
        return declarations.all
    }

    /// `/` and `/_*`: the server, sessions, replication and its scheduler.
    func addServerRoutes(_ server: CouchRouteTable) {
        server.on("/") { api, request in try api.welcome(request) }
        server.on("_up") { api, request in try api.server.up(request) }
        server.on("_uuids") { api, request in try api.server.uuids(request) }
        server.on("_all_dbs", methods: [.get, .head], access: .serverAdmin) { api, request in
            try await api.server.allDatabases(request)
        }
        server.on("_dbs_info", methods: [.get, .post], access: .serverAdmin) { api, request in
            try await api.server.databasesInfo(request)
        }
        server.on("_db_updates", methods: [.get, .post], access: .serverAdmin) { api, request in
            try await api.server.databaseUpdates(request)
        }
        server.on("_session") { api, request in try await api.server.session(&request) }
        // As CouchDB: the rest of the path is ignored.
        server.on("_session/**") { api, request in try await api.server.session(&request) }
        server.on("_active_tasks", methods: [.get, .head], access: .serverAdmin) { api, _ in api.server.activeTasks() }
        server.on("_membership", methods: [.get], access: .serverAdmin) { api, _ in api.server.membership() }
        server.on("_node/**") { api, request in try await api.nodes.answer(request.path[1...], request) }
        server.on("_replicate", family: .replication) { api, request in try await api.replication.replicate(request) }
        for path in ["_scheduler", "_scheduler/**"] {
            server.on(RouterPath(path), family: .replication, methods: [.get], access: .serverAdmin) { api, request in
                try await api.replication.scheduler(request)
            }
        }
    }

    /// `/{db}` and the database-wide resources: bulk reads and writes, replication's
    /// checkpoints and differences, security, maintenance, partitions.
    func addDatabaseRoutes(_ db: CouchRouteTable) {
        db.on("", owner: { try await $0.database() }) { api, request in
            try await api.databases.databaseEndpoint(request.path[0], &request)
        }
        db.on(
            "_all_docs", family: .bulk, methods: [.get, .head, .post], access: .reader,
            owner: { try await $0.allDocs() },
            database: { api, db, request in try await api.databases.allDocs(db, request) })
        db.on(
            "_design_docs", family: .bulk, methods: [.get, .head, .post], access: .reader,
            database: { api, db, request in
                try await api.databases.allDocs(db, request, within: ("_design/", "_design0"), counted: true)
            })
        db.on(
            "_local_docs", family: .bulk, methods: [.get, .post], access: .reader,
            database: { api, db, request in try await api.databases.localDocs(db, request) })
        db.on(
            "_bulk_docs", family: .bulk, owner: { try await $0.bulkDocs() },
            database: { api, db, request in try await api.databases.bulkDocs(db, request) })
        db.on(
            "_bulk_get", family: .bulk, methods: [.post], access: .reader, owner: { try await $0.bulkGet() },
            database: { api, db, request in try await api.databases.bulkGet(db, request) })
        db.on(
            "_revs_diff", family: .replication, methods: [.post], access: .reader, owner: { try await $0.revsDiff() },
            database: { api, db, request in try await api.databases.revsDiff(db, request, legacy: false) })
        db.on(
            "_missing_revs", family: .replication, methods: [.post], access: .reader,
            owner: { try await $0.revsDiff() },
            database: { api, db, request in try await api.databases.revsDiff(db, request, legacy: true) })
        db.on(
            "_ensure_full_commit", family: .replication, methods: [.post], access: .writer,
            owner: { try await $0.forward(path: ["_ensure_full_commit"], body: $0.request.body) },
            database: { _, _, _ in .json(["ok": true, "instance_start_time": "0"], status: .created) })
        db.on("_revs_limit", database: { api, db, request in try await api.databases.revsLimit(db, request) })
        // CouchDB 2 removed temporary views; CouchDB 3 answers 410 to a reader of the database.
        db.on("_temp_view", access: .reader) { _, _ in
            throw CouchError(status: 410, error: "gone", reason: "Temporary views are not supported in CouchDB")
        }
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
            ":doc", owner: { try await $0.plainDocument() },
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
            ":doc/**", owner: { try await $0.plainDocument() },
            database: { api, db, request in
                try await api.documents.attachmentEndpoint(
                    db, try api.databases.plainDocumentID(request.path[1], request),
                    request.path[2...].joined(separator: "/"), request)
            })
        db.on(
            "_local", family: .replication, owner: { _ in throw CouchError.badRequest("Invalid _local document id.") },
            database: { _, _, _ in throw CouchError.badRequest("Invalid _local document id.") })
        db.on(
            "_local/**", family: .replication, owner: { try await $0.localDocument() },
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
        db.on(
            "_changes", family: .changes, methods: [.get, .post, .head], access: .reader,
            owner: { try await $0.changes() }
        ) {
            api, request in
            if let recent = api.changeFeeds.recentChanges(request.path[0], request) { return recent }
            return try await api.changeFeeds.changes(try await api.store.open(request.path[0]), request)
        }
        db.on(
            "_find", family: .find, methods: [.post], access: .reader, owner: { try await $0.find() },
            database: { api, db, request in try await api.mango.find(db, request) })
        db.on(
            "_explain", family: .find, methods: [.post], access: .reader,
            database: { api, db, request in try await api.mango.explain(db, request) })
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
