public import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPServing
import Hummingbird
public import JavaScript
public import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import TrackerApp
import UnixSignals

/// The running server: the database API (CouchServer over the engine) and the application
/// (TrackerApp over a CouchClient) composed into two listeners, embedded or in cluster mode.
/// This is the only place that knows both; the application never sees the engine.
public enum LocationTrackerServer {
    /// Users' private databases are many and small, each written by one device: one
    /// connection each, so thousands stay open. Shared ones get concurrent readers.
    public static let connections: @Sendable (String) -> Connections = { name in
        name.hasPrefix("lt_locations_user_") ? .single : .pool
    }

    /// The application's validation rules as Swift, by source, for `DesignDocumentValidator`:
    /// its own databases then need no JavaScript engine.
    public static let nativeValidators: [String: DesignDocumentValidator.NativeFunction] = [
        TrackerService.readOnlyValidation.source: { _, user, _ in
            user.isServerAdmin ? nil : .forbidden(TrackerService.readOnlyValidation.reason)
        },
        UsersDatabase.validationSource: UsersDatabase.validate,
    ]

    /// LocationTracker's version (`lt --version`, `vendor.version` in the database API's welcome).
    public static let version = CouchAPI.vendorVersion

    /// Runs until SIGTERM or SIGINT.
    public static func run(_ configuration: ServerConfiguration, logger: Logger) async throws {
        let settings = try await prepareSettings(configuration)
        let store = try openStore(configuration, logger: logger)
        logger.info(
            "\(configuration.maxOpenDatabases) databases open at most; memory allocator: \(configuration.allocator)")
        var options = configuration.database
        if configuration.mode == .singleDatabase { options.sharedDatabases = [TrackerService.sharedLocations] }
        let cluster = try makeCluster(configuration, logger: logger)
        if let cluster, configuration.mode == .singleDatabase {
            // With one shared database in the cluster, this server is its owners' way into it
            // (through the same nodes, with the same view of which answer).
            do { options.cluster = try CouchCluster(urls: configuration.clusterNodeURLs, health: cluster.health) } catch
            { throw ServerStartFailure(error.reason) }
        }
        // The application's pages (the tracker app) call the database API from the browser.
        let boundApplicationPort = NIOLockedValueBox<Int?>(nil)
        if !configuration.databaseOnly { options.applicationPort = { boundApplicationPort.withLockedValue { $0 } } }
        options.applicationScheme = configuration.tls == nil ? "http" : "https"
        options.databaseScheme = options.applicationScheme
        // The runtime configuration (`/_node/_local/_config`): its changes are kept in the data
        // directory and win over these start values, as CouchDB's local.ini does.
        options.configuration = [
            "chttpd": ["port": String(configuration.databasePort), "bind_address": configuration.host]
        ]
        options.configurationFile = configuration.directory.appendingPathComponent("config.json")
        do { try CouchAPI.checkConfigurationFile(options.configurationFile!) } catch {
            throw ServerStartFailure(
                "cannot read \(options.configurationFile!.path) (changes made through /_node/_local/_config): \(error)")
        }
        let api = CouchAPI(store: store, settings: settings, options: options, logger: logger)
        for (section, key, value) in api.configurationChanges {
            logger.info(
                "[\(section)] \(key) is \(value.map { "\"\($0)\"" } ?? "deleted") by a change made through /_node/_local/_config (kept in config.json)"
            )
        }
        addServerCollectors(configuration, metrics: options.metrics)
        try await api.prepareSystemDatabases()
        api.startBackgroundJobs()
        do {
            let summary = StartupSummary(configuration, admins: settings.admins.keys.sorted())
            try await serve(
                configuration, api: api, store: store, cluster: cluster, applicationPort: boundApplicationPort,
                summary: summary, logger: logger)
        } catch {
            await api.stopBackgroundJobs()
            throw error
        }
        // After the listeners' graceful shutdown (SIGTERM, SIGINT): replications checkpoint.
        await api.stopBackgroundJobs()
    }

    /// Both listeners (or the database API's alone) until they shut down.
    static func serve(
        _ configuration: ServerConfiguration, api: CouchAPI, store: DatabaseStore, cluster: FailoverCouch?,
        applicationPort: NIOLockedValueBox<Int?>,
        summary: StartupSummary, logger: Logger
    ) async throws {
        if let certificate = configuration.tls {
            logger.info(
                "TLS on both listeners: \(certificate.summary); kill -HUP \(getpid()) reads \(certificate.certificatePath) and \(certificate.keyPath) again"
            )
        }
        let renewal = CertificateRenewal(configuration.tls, logger: logger)
        defer { renewal.cancel() }
        let boundDatabasePort = NIOLockedValueBox(configuration.databasePort)
        let database = try listener(
            "database API", responder: api.responder, port: configuration.databasePort, serverName: nil,
            configuration: configuration, logger: logger
        ) { port in
            boundDatabasePort.withLockedValue { $0 = port }
            summary.bound("database API", port: port)
        }
        let control = try ControlSocket.service(
            directory: configuration.directory, store: store, api: api, logger: logger)
        if configuration.databaseOnly {
            try await ServiceGroup(configuration: groupConfiguration([database, control], logger: logger)).run()
            return
        }
        try await runWithApplication(
            configuration, api: api, store: store, cluster: cluster, database: database, control: control,
            databasePort: { boundDatabasePort.withLockedValue { $0 } }, applicationPort: applicationPort,
            summary: summary, logger: logger)
    }

    /// Loads `server.json`, adds or keeps the configured admin (one is generated and printed
    /// once when there is none), and saves it.
    static func prepareSettings(_ configuration: ServerConfiguration) async throws -> ServerSettings {
        var settings = try ServerSettings.load(from: configuration.directory)
        let iterations = configuration.database.pbkdf2Iterations
        if let admin = configuration.admin {
            if let existing = settings.admins[admin.name], await Passwords.verify(admin.password, against: existing) {
                // Unchanged: keep the stored hash.
            } else {
                settings.admins[admin.name] = try await Passwords.hash(admin.password, iterations: iterations)
            }
        }
        if settings.admins.isEmpty {
            let password = Hex.random(bytes: 12)
            settings.admins["admin"] = try await Passwords.hash(password, iterations: iterations)
            FileHandle.standardError.write(
                Data(
                    """
                    lt: no server admin was configured, so one was created:
                          name:     admin
                          password: \(password)
                        It is stored only as a PBKDF2 hash in \(configuration.directory.path)/server.json and will not be shown again.
                        Use --admin NAME:PASSWORD to choose your own.

                    """.utf8))
        }
        try settings.save(to: configuration.directory)
        return settings
    }

    static func openStore(_ configuration: ServerConfiguration, logger: Logger) throws -> DatabaseStore {
        if let why = configuration.javascriptOffReason {
            logger.warning(
                "JavaScript is \(why): design documents' JavaScript functions answer 501 and writes to databases with JavaScript validation are refused; everything else, the application included, works"
            )
        }
        return try DatabaseStore(
            directory: configuration.directory, maxOpen: configuration.maxOpenDatabases,
            durability: configuration.durability,
            validator: DesignDocumentValidator(
                queryServer: configuration.database.javascript, native: nativeValidators),
            connections: configuration.sqliteConnections, maxDocumentSize: configuration.maxDocumentSize,
            metrics: EngineMetrics(factory: configuration.database.metrics.factory), logger: logger)
    }

    /// The application beside the database API: on this server's engine (embedded) or on the
    /// cluster, with this server's mirrors for geo queries, consolidation and purges.
    static func runWithApplication(
        _ configuration: ServerConfiguration, api: CouchAPI, store: DatabaseStore, cluster: FailoverCouch?,
        database: some Service, control: some Service,
        databasePort: @escaping @Sendable () -> Int, applicationPort: NIOLockedValueBox<Int?>, summary: StartupSummary,
        logger: Logger
    ) async throws {
        if let cluster { try await check(cluster, configuration) }
        // Nodes in maintenance mode (or still being seeded) are left alone from the start.
        await cluster?.checkNodes()
        let checkingNodes = Task { await cluster?.watchNodes() }
        defer { checkingNodes.cancel() }
        let local = InProcessCouch(api: api)
        let couch: any CouchClient = cluster ?? local
        let mode = configuration.mode
        // Devices replicate with the cluster, except into a shared database: through this server.
        let devicesReplicateWith: (@Sendable () -> (host: String, scheme: String))? =
            switch (mode, cluster, configuration.deviceCouchURL) {
            case (.singleDatabase, _, _), (_, nil, _): nil
            case (_, _, let url?):
                { (url.host.map { host in url.port.map { "\(host):\($0)" } ?? host } ?? "", url.scheme ?? "http") }
            case (_, let cluster?, nil): { (cluster.host, cluster.scheme) }
            }
        let service = TrackerService(
            couch: couch, geo: cluster == nil ? nil : local, databaseLocation: devicesReplicateWith,
            ownDatabaseScheme: configuration.tls == nil ? "http" : "https", mode: mode,
            passwordIterations: configuration.database.pbkdf2Iterations, throttle: configuration.database.loginThrottle,
            logger: logger)
        do {
            try await service.prepare(places: configuration.places)
        } catch let failure as TrackerService.Failure {
            throw ServerStartFailure(
                "cannot prepare the application's databases\(cluster.map { " on \($0.baseURL)" } ?? ""): \(failure.body.text)"
            )
        } catch  where cluster != nil {
            throw ServerStartFailure("cannot reach CouchDB at \(cluster!.baseURL): \(error)")
        }
        let mirrors = try await ClusterMirrors.start(cluster, service: service, store: store, logger: logger)
        defer { mirrors.cancel() }
        logger.info(
            "mode \(mode.rawValue): locations in \(mode == .singleDatabase ? TrackerService.sharedLocationsDB : "lt_locations_user_<name>")\(cluster.map { " on \($0.baseURL)" } ?? "")"
        )
        // Every user's locations flow into lt_locations_all (a single shared database needs no consolidation).
        // On a cluster, the consolidator's late looks are taken while a node is away or refilling.
        let watch = cluster.map { ClusterWatch(couch: $0, logger: logger) }
        let watching = Task { await watch?.run() }
        defer { watching.cancel() }
        var disturbed: (@Sendable () -> Bool)?
        if let watch { disturbed = { watch.isDisturbed } }
        let consolidator =
            mode == .databasePerUser ? Consolidator(couch: couch, disturbed: disturbed, logger: logger) : nil
        let consolidation = Task { await consolidator?.run() }
        if let consolidator { addMetrics(of: consolidator, to: configuration.database.metrics) }
        var limits = configuration.application
        limits.metrics = configuration.database.metrics
        defer { consolidation.cancel() }
        let application = try listener(
            "application API",
            responder: TrackerHTTP(
                service: service, dashboard: configuration.dashboard, limits: limits,
                consolidator: consolidator, servesTLS: configuration.tls != nil, databasePort: databasePort
            ).responder,
            port: configuration.applicationPort, serverName: "LocationTracker", configuration: configuration,
            logger: logger,
            bound: { port in
                applicationPort.withLockedValue { $0 = port }
                summary.bound("application API", port: port)
            })
        try await ServiceGroup(configuration: groupConfiguration([database, application, control], logger: logger))
            .run()
    }

    /// Consolidation's backlog, lag and work done, read with the other metrics.
    static func addMetrics(of consolidator: Consolidator, to metrics: ServerMetrics) {
        metrics.addCollector {
            let status = consolidator.status
            metrics.gauge(ApplicationMetric.consolidationBacklog, [("kind", "sweep")], Double(status.sweepRemaining))
            metrics.gauge(ApplicationMetric.consolidationBacklog, [("kind", "retrying")], Double(status.retrying))
            metrics.gauge(ApplicationMetric.consolidationUnreadable, [], Double(status.unreadable.count))
            metrics.gauge(ApplicationMetric.consolidationRefused, [], Double(status.refused.count))
            metrics.gauge(ApplicationMetric.consolidationLastRound, [], status.statistics.lastRoundSeconds)
            metrics.total(ApplicationMetric.consolidationDocumentsCopied, [], status.statistics.documentsCopied)
            metrics.total(ApplicationMetric.consolidationRounds, [], status.statistics.rounds)
        }
    }

    /// What the server is built and started with (`lt_build_info`: version, CouchDB API,
    /// SQLite, allocator, JavaScript, mode — one series whose value is 1, as Prometheus'
    /// build-info idiom), the connections its listeners may hold together (`lt_max_connections`)
    /// and the space left beside its data (`lt_data_free_bytes`, `lt_data_filesystem_bytes`),
    /// read when the metrics are.
    static func addServerCollectors(_ configuration: ServerConfiguration, metrics: ServerMetrics) {
        let mode =
            configuration.databaseOnly
            ? "database-only"
            : configuration.clusterURL != nil
                ? "\(configuration.mode.rawValue), cluster" : configuration.mode.rawValue
        let labels = [
            ("version", CouchAPI.vendorVersion), ("couchdb_api", CouchAPI.version),
            ("sqlite", DatabaseStore.sqliteVersion),
            ("allocator", configuration.allocator),
            ("javascript", configuration.javascriptOffReason == nil ? "on" : "off"),
            ("mode", mode), ("durability", configuration.durability.rawValue.lowercased()),
        ]
        let directory = configuration.directory.path
        let listeners = configuration.databaseOnly ? 1 : 2
        let connections = configuration.connections.maxConnections.multipliedSaturating(by: listeners)
        metrics.addCollector {
            metrics.gauge(ApplicationMetric.buildInfo, labels, 1)
            metrics.gauge(ApplicationMetric.maxConnections, [], Double(connections))
            if let space = DiskSpace(of: directory) {
                metrics.gauge(ApplicationMetric.dataFreeBytes, [], Double(space.free))
                metrics.gauge(ApplicationMetric.dataFilesystemBytes, [], Double(space.total))
            }
        }
    }

    /// The cluster's client in cluster mode (every node given, failing over between them); nil
    /// when embedded or database-only. The log says when a node or the whole cluster goes and
    /// comes back.
    static func makeCluster(_ configuration: ServerConfiguration, logger: Logger) throws -> FailoverCouch? {
        guard !configuration.databaseOnly, !configuration.clusterNodeURLs.isEmpty else { return nil }
        do {
            return try FailoverCouch(
                urls: configuration.clusterNodeURLs,
                report: { change in
                    switch change {
                    case let .nodeDown(node, reason):
                        logger.warning(
                            "CouchDB node \(node) cannot be reached (\(reason)): requests go to the other nodes")
                    case let .nodeWithdrawn(node, status):
                        logger.warning(
                            "CouchDB node \(node) asks for no requests (its /_up answers \(status)): requests go to the other nodes until it is ready"
                        )
                    case let .nodeUp(node, downFor):
                        logger.notice("CouchDB node \(node) answers again (after \(Int(downFor.rounded())) s)")
                    case let .clusterUnreachable(reasons):
                        logger.error(
                            "the CouchDB cluster cannot be reached (\(reasons.joined(separator: "; "))): requests that need it are answered 503 until a node is back"
                        )
                    case let .clusterRecovered(node, unreachableFor):
                        logger.notice(
                            "the CouchDB cluster is reachable again through \(node), after \(Int(unreachableFor.rounded())) s"
                        )
                    }
                })
        } catch { throw ServerStartFailure(error.reason) }
    }

    /// Checks that the cluster's URL credentials are a server admin's (the application creates
    /// databases and users) before the application starts; `lt_couchdb_node_up` says which
    /// nodes answer from then on.
    static func check(_ cluster: FailoverCouch, _ configuration: ServerConfiguration) async throws {
        let url = configuration.clusterNodeURLs[0]
        // A certificate that does not verify is told at once.
        do {
            _ = try await HTTPCouch(url: url, http: CouchHTTPClient.shared).request(.get, "/", query: [:], body: nil)
        } catch let untrusted as CouchProtocolError where untrusted.isUntrustedPeer {
            throw ServerStartFailure("cannot reach CouchDB at \(cluster.baseURL): \(untrusted)")
        } catch {}  // anything else: through the failover below
        let session: CouchReply
        do { session = try await cluster.request(.get, "/_session", query: [:], body: nil) } catch {
            throw ServerStartFailure(
                "cannot reach CouchDB at \(configuration.clusterNodeURLs.count == 1 ? cluster.baseURL : "any of its \(configuration.clusterNodeURLs.count) nodes"): \(error)"
            )
        }
        guard session.ok, session.json["userCtx"]?["roles"]?.arrayValue?.contains("_admin") == true else {
            throw ServerStartFailure(
                "CouchDB at \(cluster.baseURL) does not take the URL's credentials as a server admin's (GET /_session answered \(session.status))"
            )
        }
        let metrics = configuration.database.metrics
        metrics.addCollector {
            for (node, up, withdrawn) in cluster.health.nodes {
                metrics.gauge(ApplicationMetric.couchDBNodeUp, [("node", node)], up ? 1 : 0)
                if let withdrawn {
                    metrics.gauge(ApplicationMetric.couchDBNodeWithdrawn, [("node", node), ("status", withdrawn)], 1)
                }
            }
        }
    }

    /// One listener with the configured connection limits; announces its bound port.
    static func listener<Responder: HTTPResponder>(
        _ name: String, responder: Responder, port: Int, serverName: String?, configuration: ServerConfiguration,
        logger: Logger, bound: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws -> some Service where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let host = configuration.host
        let scheme = configuration.tls == nil ? "http" : "https"
        return Application(
            responder: responder,
            server: try configuration.tls.map(configuration.connections.server(tls:))
                ?? configuration.connections.server,
            configuration: configuration.connections.configuration(
                address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in
                let actual = channel.localAddress?.port ?? port
                announce(name, scheme: scheme, host: host, port: actual)
                bound(actual)
            },
            logger: logger)
    }

    /// SIGTERM and SIGINT shut down gracefully: requests in flight may finish, but long polls
    /// and continuous feeds are cancelled after 3 s rather than kept to their timeout.
    static func groupConfiguration(_ services: [any Service], logger: Logger) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(3)
        return configuration
    }

    /// Prints where a listener is, on stdout, so scripts and tests can find an ephemeral port.
    static func announce(_ what: String, scheme: String, host: String, port: Int) {
        FileHandle.standardOutput.write(Data("lt: \(what) listening on \(scheme)://\(host):\(port)\n".utf8))
    }
}

/// SIGHUP reads the TLS certificate and key again (a renewal by certbot or an operator): new
/// connections get the new pair, open ones keep theirs. A pair that fails to load is logged and
/// the one served so far stays. Without TLS there is nothing to read again, and SIGHUP (a
/// `systemctl reload`) is logged rather than ending the process, as it would by default.
final class CertificateRenewal {
    private let source: any DispatchSourceSignal

    init(_ certificate: ServerCertificate?, logger: Logger) {
        signal(SIGHUP, SIG_IGN)  // the dispatch source sees it instead of the default (exit)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global(qos: .utility))
        source.setEventHandler {
            guard let certificate else {
                logger.notice("SIGHUP: nothing to read again (no --tls-cert)")
                return
            }
            do {
                try certificate.reload()
                logger.notice("SIGHUP: TLS certificate read again: \(certificate.summary)")
            } catch {
                logger.error("SIGHUP: TLS certificate not renewed, still serving the previous one: \(error)")
            }
        }
        source.resume()
    }

    func cancel() { source.cancel() }
}
