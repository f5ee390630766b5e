import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import Hummingbird
import JavaScript
import Logging
import Replication
import ServiceLifecycle
import TrackerApp

/// `lt serve`: the database API and the application API, with embedded SQLite storage.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server: the CouchDB-compatible database API and the application API.",
        discussion: "Every option can also be set with an LT_* environment variable (LT_DATA, LT_HOST, LT_DB_PORT, LT_PORT, LT_ADMIN, LT_LOG_LEVEL, LT_CORS_ORIGINS, LT_MAX_BODY_SIZE, LT_DURABILITY, LT_MAX_OPEN_DATABASES, LT_MODE, LT_COUCHDB_URL, LT_TILES, LT_TILE_ATTRIBUTION, LT_TRUSTED_PROXIES, LT_MAX_APP_BODY_SIZE, LT_JAVASCRIPT, LT_REQUEST_TIMEOUT, LT_BODY_TIMEOUT, LT_MAX_CONNECTIONS, LT_MAX_CONNECTIONS_PER_ADDRESS, LT_MAX_FEEDS_PER_USER, LT_MAX_DOCUMENT_SIZE). The dashboard is at /dashboard/ on the application port.")

    @Option(help: "Directory for databases and server settings. (LT_DATA, default ./lt-data)")
    var data: String?

    @Option(help: "Address to listen on. (LT_HOST, default 127.0.0.1)")
    var host: String?

    @Option(name: .customLong("db-port"), help: "Port of the database API; 0 picks a free one. (LT_DB_PORT, default 5984)")
    var dbPort: Int?

    @Option(help: "Port of the application API and dashboard; 0 picks a free one. (LT_PORT, default 8080)")
    var port: Int?

    @Option(help: "Server admin as NAME:PASSWORD; stored hashed. (LT_ADMIN)")
    var admin: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. (LT_LOG_LEVEL, default info)")
    var logLevel: String?

    @Option(name: .customLong("cors-origins"), help: "Comma-separated origins allowed by CORS, or *; empty disables CORS. (LT_CORS_ORIGINS)")
    var corsOrigins: String?

    @Option(name: .customLong("max-body-size"), help: "Largest request body in bytes. (LT_MAX_BODY_SIZE, default 67108864)")
    var maxBodySize: Int?

    @Option(help: "full: fsync every commit; normal: survive a killed process, not power loss. (LT_DURABILITY, default full)")
    var durability: String?

    @Option(name: .customLong("max-open-databases"), help: "Databases kept open at once; the least recently used beyond it are closed. (LT_MAX_OPEN_DATABASES, default: what the open-file limit allows, at most 2048)")
    var maxOpenDatabases: Int?

    @Option(help: "Where users' locations live: db-per-user (a private database each, consolidated into lt_locations_all) or single-db (one shared database, lt_locations_all_envoy, where each user sees only their own documents). (LT_MODE, default db-per-user)")
    var mode: String?

    @Option(help: "Cluster mode: keep the application's data in this Apache CouchDB 3 cluster, given with admin credentials (http://ADMIN:PASSWORD@host:5984). Devices replicate with it directly (with --mode single-db: through this server, which keeps each user to their own documents); this server registers users, consolidates and answers geo queries from its own mirrors of lt_places and the locations. (LT_COUCHDB_URL)")
    var couchdb: String?

    @Flag(name: .customLong("database-only"), help: "Serve only the CouchDB-compatible database API (no application, no consolidation): a stand-in for a CouchDB node.")
    var databaseOnly = false

    @Option(help: "Map tiles of the dashboard: a Leaflet URL template, or none (no tiles, e.g. offline). (LT_TILES, default OpenStreetMap's)")
    var tiles: String?

    @Option(help: "on: run design documents' JavaScript (views, filters, validation, shows, lists, updates) when this build has a JavaScript engine; off: never (those requests answer 501, writes to databases with JavaScript validation are refused). The application's own rules need no JavaScript either way. (LT_JAVASCRIPT, default on)")
    var javascript: String?

    @Option(name: .customLong("trusted-proxy"), help: "A reverse proxy's address or range (CIDR, e.g. 10.0.0.0/8); repeatable or comma-separated. Requests from it are taken to come from the address its X-Forwarded-For names, for login throttling and connection limits; anyone else's X-Forwarded-For is ignored. (LT_TRUSTED_PROXIES)")
    var trustedProxy: [String] = []

    @Option(name: .customLong("max-document-size"), help: "Largest document body (JSON, attachments not counted) the database API stores, in bytes; larger ones are refused with 413 document_too_large, as CouchDB's max_document_size. (LT_MAX_DOCUMENT_SIZE, default 8000000)")
    var maxDocumentSize: Int?

    @Option(name: .customLong("max-app-body-size"), help: "Largest request body of the application API in bytes. (LT_MAX_APP_BODY_SIZE, default 1048576)")
    var maxAppBodySize: Int?

    @Option(name: .customLong("request-timeout"), help: "Seconds a connection may wait for a request's head (a new or idle keep-alive connection, or headers sent too slowly) before it is closed. (LT_REQUEST_TIMEOUT, default 60)")
    var requestTimeout: Int?

    @Option(name: .customLong("body-timeout"), help: "Longest pause, in seconds, while a request's body arrives before the connection is closed. (LT_BODY_TIMEOUT, default 30)")
    var bodyTimeout: Int?

    @Option(name: .customLong("max-connections"), help: "Connections open at once on each listener; more wait to be accepted. (LT_MAX_CONNECTIONS, default 2048)")
    var maxConnections: Int?

    @Option(name: .customLong("max-connections-per-address"), help: "Connections open at once from one address on each listener (trusted proxies exempt); more are closed at once. (LT_MAX_CONNECTIONS_PER_ADDRESS, default 256)")
    var maxConnectionsPerAddress: Int?

    @Option(name: .customLong("max-feeds-per-user"), help: "Longpoll, continuous and eventsource _changes feeds one user (or one anonymous client) may have open at once; server admins are not counted. (LT_MAX_FEEDS_PER_USER, default 100)")
    var maxFeedsPerUser: Int?

    @Option(name: .customLong("tile-attribution"), help: "Attribution shown with the tiles (HTML). (LT_TILE_ATTRIBUTION, default OpenStreetMap's)")
    var tileAttribution: String?

    func value(_ option: String?, _ variable: String) -> String? {
        option ?? ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    func intValue(_ option: Int?, _ variable: String, default fallback: Int) throws -> Int {
        if let option { return option }
        guard let raw = value(nil, variable) else { return fallback }
        guard let parsed = Int(raw) else { throw ValidationError("\(variable) must be an integer, not \(raw)") }
        return parsed
    }

    func run() async throws {
        ProcessSetup.runTasksOnEventLoops()
        let levelName = value(logLevel, "LT_LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(rawValue: levelName) else { throw ValidationError("Unknown log level \(levelName)") }
        ProcessSetup.bootstrapLogging(level: level)
        let logger = Logger(label: "lt")
        let directory = URL(fileURLWithPath: value(data, "LT_DATA") ?? "./lt-data", isDirectory: true)
        let host = value(host, "LT_HOST") ?? "127.0.0.1"
        let dbPort = try intValue(dbPort, "LT_DB_PORT", default: 5984)
        let appPort = try intValue(port, "LT_PORT", default: 8080)
        let durabilityMode = try Durability.option(value(durability, "LT_DURABILITY") ?? "full")

        let modeName = value(mode, "LT_MODE") ?? TrackerService.Mode.databasePerUser.rawValue
        guard let appMode = TrackerService.Mode(rawValue: modeName) else {
            throw ValidationError("--mode must be \(TrackerService.Mode.allCases.map(\.rawValue).joined(separator: " or ")), not \(modeName)")
        }

        // Held until the server stops: users' databases are opened without file locks. (It
        // creates the directory too.)
        let directoryLock = try DirectoryLock.forCommand(directory)
        defer { withExtendedLifetime(directoryLock) {} }
        var settings = try ServerSettings.load(from: directory)
        var options = CouchAPI.Options()
        options.maxBodySize = try intValue(maxBodySize, "LT_MAX_BODY_SIZE", default: options.maxBodySize)
        var appLimits = AppLimits()
        appLimits.maxBodySize = try intValue(maxAppBodySize, "LT_MAX_APP_BODY_SIZE", default: appLimits.maxBodySize)
        guard options.maxBodySize > 0, appLimits.maxBodySize > 0 else { throw ValidationError("body sizes must be positive") }
        do {
            let proxies = (trustedProxy.isEmpty ? [value(nil, "LT_TRUSTED_PROXIES") ?? ""] : trustedProxy)
                .flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            options.clientAddress = ClientAddress(trustedProxies: try proxies.map(AddressRange.init))
        } catch let error as EngineError {
            throw ValidationError("--trusted-proxy: \(error.reason)")
        }
        appLimits.clientAddress = options.clientAddress
        var connections = ConnectionLimits()
        connections.clientAddress = options.clientAddress
        let headSeconds = try intValue(requestTimeout, "LT_REQUEST_TIMEOUT", default: 60)
        let bodySeconds = try intValue(bodyTimeout, "LT_BODY_TIMEOUT", default: 30)
        connections.maxConnections = try intValue(maxConnections, "LT_MAX_CONNECTIONS", default: connections.maxConnections)
        connections.maxConnectionsPerAddress = try intValue(maxConnectionsPerAddress, "LT_MAX_CONNECTIONS_PER_ADDRESS", default: connections.maxConnectionsPerAddress)
        guard (1...86_400).contains(headSeconds), (1...86_400).contains(bodySeconds) else {
            throw ValidationError("--request-timeout and --body-timeout are seconds from 1 to 86400")
        }
        guard connections.maxConnections > 0, connections.maxConnectionsPerAddress > 0 else {
            throw ValidationError("--max-connections and --max-connections-per-address must be positive")
        }
        options.maxFeedsPerUser = try intValue(maxFeedsPerUser, "LT_MAX_FEEDS_PER_USER", default: options.maxFeedsPerUser)
        guard options.maxFeedsPerUser > 0 else { throw ValidationError("--max-feeds-per-user must be positive") }
        connections.requestHeadTimeout = .seconds(headSeconds)
        connections.bodyReadTimeout = .seconds(bodySeconds)
        options.corsOrigins = (value(corsOrigins, "LT_CORS_ORIGINS") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if let admin = value(admin, "LT_ADMIN") {
            guard let colon = admin.firstIndex(of: ":"), colon != admin.startIndex else {
                throw ValidationError("--admin must be NAME:PASSWORD")
            }
            let name = String(admin[..<colon])
            let password = String(admin[admin.index(after: colon)...])
            if let existing = settings.admins[name], await Passwords.verify(password, against: existing) {
                // Unchanged: keep the stored hash.
            } else {
                settings.admins[name] = try await Passwords.hash(password, iterations: options.pbkdf2Iterations)
            }
        }
        if settings.admins.isEmpty {
            let password = ServerSettings.randomHex(12)
            settings.admins["admin"] = try await Passwords.hash(password, iterations: options.pbkdf2Iterations)
            FileHandle.standardError.write(Data("""
                lt: no server admin was configured, so one was created:
                      name:     admin
                      password: \(password)
                    It is stored only as a PBKDF2 hash in \(directory.path)/server.json and will not be shown again.
                    Use --admin NAME:PASSWORD to choose your own.

                """.utf8))
        }
        try settings.save(to: directory)

        let maxOpen = try intValue(maxOpenDatabases, "LT_MAX_OPEN_DATABASES", default: ServerResources.openDatabaseBudget())
        try ServerResources.checkOpenDatabases(maxOpen)
        switch value(javascript, "LT_JAVASCRIPT") ?? "on" {
        case "on": options.javascript = ServerResources.javascriptQueryServer()
        case "off": options.javascript = nil
        case let other: throw ValidationError("--javascript must be on or off, not \(other)")
        }
        if options.javascript == nil {
            let why = value(javascript, "LT_JAVASCRIPT") == "off" ? "turned off (--javascript off)" : "not in this build (install duktape-dev and rebuild)"
            logger.warning("JavaScript is \(why): design documents' JavaScript functions answer 501 and writes to databases with JavaScript validation are refused; everything else, the application included, works")
        }
        if appMode == .singleDatabase { options.sharedDatabases = [TrackerService.sharedLocations] }
        // Cluster mode: the application's data lives in CouchDB; this server mirrors what it
        // needs geo indexes for (CouchDB has none) and answers geo queries from the mirrors.
        // With one shared database, it is also the owners' way into it.
        let clusterURL = databaseOnly ? nil : value(couchdb, "LT_COUCHDB_URL")
        if let clusterURL, appMode == .singleDatabase {
            do { options.cluster = try CouchCluster(url: clusterURL) } catch let error as EngineError { throw ValidationError(error.reason) }
        }
        let maxDocumentSize = try intValue(self.maxDocumentSize, "LT_MAX_DOCUMENT_SIZE", default: DatabaseStore.defaultMaxDocumentSize)
        guard maxDocumentSize > 0 else { throw ValidationError("--max-document-size must be positive") }
        let store = try DatabaseStore(
            directory: directory, maxOpen: maxOpen, durability: durabilityMode,
            validator: DesignDocumentValidator(queryServer: options.javascript, native: TrackerService.nativeValidators),
            connections: ServerResources.connections, maxDocumentSize: maxDocumentSize, logger: logger)
        logger.info("\(maxOpen) databases open at most; memory allocator: \(Allocator.description)")
        let api = CouchAPI(store: store, settings: settings, options: options, logger: logger)
        try api.prepareSystemDatabases()
        api.startBackgroundJobs()
        defer { api.stopBackgroundJobs() }

        let boundDatabasePort = Locked(dbPort)
        let dbApp = Application(
            responder: api.responder,
            server: connections.server,
            configuration: connections.configuration(address: .hostname(host, port: dbPort), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? dbPort
                boundDatabasePort.withLock { $0 = port }
                Serve.announce("database API", host: host, port: port)
            },
            logger: logger)
        if databaseOnly {
            try await ServiceGroup(configuration: Serve.groupConfiguration([dbApp], logger: logger)).run()
            return
        }
        let cluster = try clusterURL.map { url -> HTTPCouch in
            do { return try HTTPCouch(url: url) } catch let failure as TrackerService.Failure {
                throw CommandFailure(failure.body["reason"]?.stringValue ?? "bad CouchDB URL")
            }
        }
        if let cluster {
            // The URL's credentials must be a server admin's: the application creates databases and users.
            let session: CouchReply
            do { session = try await cluster.request(.get, "/_session", query: [:], body: nil) } catch {
                throw CommandFailure("cannot reach CouchDB at \(cluster.baseURL): \(error)")
            }
            guard session.ok, session.json["userCtx"]?["roles"]?.arrayValue?.contains("_admin") == true else {
                throw CommandFailure("CouchDB at \(cluster.baseURL) does not take the URL's credentials as a server admin's (GET /_session answered \(session.status))")
            }
        }
        let local = InProcessCouch(api: api)
        let couch: any CouchClient = cluster ?? local
        // Devices replicate with the cluster, except into a shared database: through this server.
        let devicesReplicateWith = appMode == .singleDatabase ? nil : cluster.map { ($0.host, $0.scheme) }
        let service = TrackerService(couch: couch, geo: cluster == nil ? nil : local, databaseLocation: devicesReplicateWith,
                                     mode: appMode, passwordIterations: options.pbkdf2Iterations, throttle: options.loginThrottle, logger: logger)
        do {
            try await service.prepare(places: try ServerResources.samplePlaces())
        } catch let failure as TrackerService.Failure {
            throw CommandFailure("cannot prepare the application's databases\(cluster.map { " on \($0.baseURL)" } ?? ""): \(failure.body.text)")
        } catch where cluster != nil {
            throw CommandFailure("cannot reach CouchDB at \(cluster!.baseURL): \(error)")
        }
        if let clusterURL {
            // Places are few and every device asks for them: mirrored before serving.
            do { try await Serve.mirrorOnce(TrackerService.placesDB, from: clusterURL, into: store, logger: logger) } catch {
                throw CommandFailure("cannot copy lt_places from the cluster: \(error)")
            }
        }
        if cluster != nil, try await service.mirrorIsStale(service.analysisDatabase) {
            logger.notice("this server's copy of \(service.analysisDatabase) was last brought up to date with the cluster's purges over \(Int(TrackerService.purgeRetention / 86400)) days ago: starting it afresh")
            try await store.delete(service.analysisDatabase)
        }
        let mirrors = Task {
            if let clusterURL { await Serve.mirror([TrackerService.placesDB, service.analysisDatabase], from: clusterURL, into: store, logger: logger) }
        }
        defer { mirrors.cancel() }
        // Purges on the cluster (deleted users' locations) reach this server's copy too.
        let purges = Task { if cluster != nil { await service.followPurges(into: service.analysisDatabase) } }
        defer { purges.cancel() }
        logger.info("mode \(appMode.rawValue): locations in \(appMode == .singleDatabase ? TrackerService.sharedLocationsDB : "lt_locations_user_<name>")\(cluster.map { " on \($0.baseURL)" } ?? "")")
        // Every user's locations flow into lt_locations_all (a single shared database needs no consolidation).
        var dashboard = DashboardOptions()
        if let tiles = value(tiles, "LT_TILES") { dashboard.tileURL = tiles }
        if let attribution = value(tileAttribution, "LT_TILE_ATTRIBUTION") { dashboard.tileAttribution = attribution }
        let consolidator = appMode == .databasePerUser ? Consolidator(couch: couch, logger: logger) : nil
        let consolidation = Task { await consolidator?.run() }
        defer { consolidation.cancel() }
        let appApp = Application(
            responder: TrackerHTTP(service: service, dashboard: dashboard, limits: appLimits, consolidator: consolidator,
                                   databasePort: { boundDatabasePort.withLock { $0 } }).responder,
            server: connections.server,
            configuration: connections.configuration(address: .hostname(host, port: appPort), serverName: "LocationTracker"),
            onServerRunning: { channel in
                Serve.announce("application API", host: host, port: channel.localAddress?.port ?? appPort)
            },
            logger: logger)
        try await ServiceGroup(configuration: Serve.groupConfiguration([dbApp, appApp], logger: logger)).run()
    }

    /// SIGTERM and SIGINT shut down gracefully: requests in flight may finish, but long polls
    /// and continuous feeds are cancelled after 3 s rather than kept to their timeout.
    static func groupConfiguration(_ services: [any Service], logger: Logger) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(3)
        return configuration
    }

    /// A pull replication of a cluster database into this server's store of the same name.
    static func mirrorReplication(_ name: String, from clusterURL: String, into store: DatabaseStore, continuous: Bool, logger: Logger) throws -> Replication {
        guard let components = URLComponents(string: clusterURL), let scheme = components.scheme, let host = components.host else {
            throw ValidationError("bad CouchDB URL")
        }
        let base = "\(scheme)://\(host):\(components.port ?? (scheme == "https" ? 443 : 80))"
        if !store.exists(name) { _ = try store.create(name) }
        var options = ReplicationOptions()
        options.continuous = continuous
        options.checkpointInterval = .seconds(1)
        return Replication(source: try RemoteEndpoint(url: "\(base)/\(name)", username: components.user?.removingPercentEncoding,
                                                      password: components.password?.removingPercentEncoding),
                           target: LocalEndpoint(store: store, name: name), options: options, logger: logger)
    }

    /// Brings a mirror up to date once.
    static func mirrorOnce(_ name: String, from clusterURL: String, into store: DatabaseStore, logger: Logger) async throws {
        _ = try await mirrorReplication(name, from: clusterURL, into: store, continuous: false, logger: logger).run()
    }

    /// Keeps local copies of cluster databases (continuous pull replications, checkpointed, so
    /// a restart resumes), for the geo indexes CouchDB lacks; restarts a replication that stops.
    static func mirror(_ names: [String], from clusterURL: String, into store: DatabaseStore, logger: Logger) async {
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask {
                    while !Task.isCancelled {
                        do {
                            _ = try await mirrorReplication(name, from: clusterURL, into: store, continuous: true, logger: logger).run()
                        } catch {
                            logger.warning("mirror of \(name): \(error); starting again in 5 s")
                        }
                        try? await Task.sleep(for: .seconds(5))
                    }
                }
            }
        }
    }

    /// Prints where a listener is, on stdout, so scripts and tests can find an ephemeral port.
    static func announce(_ what: String, host: String, port: Int) {
        FileHandle.standardOutput.write(Data("lt: \(what) listening on http://\(host):\(port)\n".utf8))
    }
}

