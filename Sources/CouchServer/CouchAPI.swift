public import CouchEngine
import CouchIndexes
import CouchJSON
public import HTTPServing
public import CouchProtocol
public import Foundation
public import Hummingbird
public import JavaScript
public import Logging
import Replication

/// The CouchDB 3 HTTP API over a `DatabaseStore`: the server's state (settings, sessions,
/// replication jobs, feeds) shared by the areas' handlers (`*Endpoints`), the URL table that
/// routes to them (`CouchRoutes.swift`) and the middleware before it (`CouchMiddleware.swift`).
public final class CouchAPI: Sendable {
    public struct Options: Sendable {
        /// Largest request body accepted (413 beyond it).
        public var maxBodySize = 64 * 1024 * 1024
        /// Origins allowed by CORS; empty turns CORS off, `*` allows any origin.
        public var corsOrigins: [String] = []
        public var pbkdf2Iterations = Passwords.defaultIterations
        /// Lifetime of `AuthSession` cookies, seconds.
        public var sessionTimeout: TimeInterval = 600
        /// The JavaScript query servers for design-document functions; nil when this build
        /// has no JavaScript engine (those requests then answer 501).
        public var javascript: QueryServer?
        /// Databases shared by many owners, each seeing only their own documents.
        public var sharedDatabases: [SharedDatabase] = []
        /// Cluster mode: the shared databases live in this CouchDB cluster, and users are its
        /// `_users`; this server is the owners' way in.
        public var cluster: CouchCluster?
        /// Failed password checks; give the application's listener the same one, so that
        /// failures count the same on both.
        public var loginThrottle = LoginThrottle()
        /// Reverse proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`).
        public var clientAddress = ClientAddress()
        /// Longpoll, continuous and eventsource feeds one user (or one anonymous client) may
        /// have open at once; server admins are not counted.
        public var maxFeedsPerUser = 100
        /// One info-level line per request (`--access-log`); off: at debug level.
        public var accessLog = true
        /// Where requests and the server's figures are recorded (`/_node/_local/_prometheus`).
        public var metrics = ServerMetrics()
        /// The application listener's port once it is up (nil: none): pages it serves (the
        /// tracker app) may call this API from the browser, as CORS origins of their own.
        public var applicationPort: (@Sendable () -> Int?)?
        /// How the application listener serves its pages (`https` with `--tls-cert`): only
        /// pages of that scheme are its own.
        public var applicationScheme = "http"
        /// How the database listener is reached (`https` with `--tls-cert`): the scheme of the
        /// absolute `Location` URLs it answers with, as CouchDB's.
        public var databaseScheme = "http"
        /// Start values of the runtime configuration beyond those this API knows (`[chttpd]
        /// port`, `bind_address`: the listener's), by section and key.
        public var configuration: [String: [String: String]] = [:]
        /// Where changes made through `/_node/{node}/_config` are kept (nil: in memory only).
        public var configurationFile: URL?
        public init() {}
    }

    public let store: DatabaseStore
    let settings: Locked<ServerSettings>
    let auth: Authenticator
    let options: Options
    let logger: Logger
    let jobs: ReplicationJobs
    /// Database compactions in the background (`_compact`).
    let compactions = CompactionTasks()
    let replicatorDatabase: ReplicatorDatabase
    /// Runs filter functions for replications from local databases.
    let filterResolver: FilterResolver?
    /// Geo index definitions by database, design document revision and index name.
    let geoDefinitions = Locked<[String: GeoIndexDefinition]>([:])
    /// Open changes feeds per user.
    let feeds: FeedCounter
    /// Feeds' reads after a commit, shared by listeners asking the same.
    let sharedReads = SharedFeedReads()
    /// Cluster mode: the task following the cluster's `_users` (see `CouchCluster`).
    let usersFollower = Locked<Task<Void, Never>?>(nil)
    /// CouchDB's runtime configuration (`/_node/{node}/_config`).
    let config: NodeConfiguration
    /// `[chttpd] max_http_request_size`, read by the body step of every request.
    let requestBodyLimit: Locked<Int>
    /// The routes behind their middleware. They hold this API unowned (it holds them), so they
    /// are made once its other properties exist: set once in `init`, before it is shared.
    nonisolated(unsafe) private(set) var pipeline: (any HTTPResponder<CouchRequestContext>)!
    public static let version = "3.4.3"
    /// LocationTracker's own version (`vendor.version` in `GET /`, `lt --version`).
    public static let vendorVersion = "0.1.0"

    public init(store: DatabaseStore, settings: ServerSettings, options: Options, logger: Logger) {
        self.store = store
        self.settings = Locked(settings)
        self.auth = Authenticator(
            settings: self.settings, store: store, cluster: options.cluster, cookieLifetime: options.sessionTimeout,
            throttle: options.loginThrottle)
        self.options = options
        self.logger = logger
        config = NodeConfiguration(
            defaults: Self.configuration(settings: settings, store: store, options: options),
            file: options.configurationFile)
        requestBodyLimit = Locked(options.maxBodySize)
        feeds = FeedCounter(limit: options.maxFeedsPerUser)
        let jobs = ReplicationJobs()
        self.jobs = jobs
        let filterResolver = DesignEndpoints.makeFilterResolver(options.javascript)
        self.filterResolver = filterResolver
        self.replicatorDatabase = ReplicatorDatabase(store: store, jobs: jobs, filters: filterResolver, logger: logger)
        pipeline = makeResponder()
        addMetricsCollectors()
        applyConfiguration()
    }

    /// The start values of the runtime configuration: what the server was started with, under
    /// CouchDB's names, and CouchDB's defaults for the keys lt applies.
    static func configuration(
        settings: ServerSettings, store: DatabaseStore, options: Options
    ) -> NodeConfiguration.Sections {
        var sections: NodeConfiguration.Sections = [
            "couchdb": [
                "uuid": settings.uuid, "database_dir": store.directory.path, "view_index_dir": store.directory.path,
                "max_document_size": String(store.maxDocumentSize),
                "max_partition_size": String(DatabaseStore.defaultMaxPartitionSize),
            ],
            "chttpd": [
                "max_http_request_size": String(options.maxBodySize), "decode_plus_to_space": "true",
                "allow_jsonp": "false",
            ],
            "chttpd_auth": [
                "timeout": String(Int(options.sessionTimeout)), "iterations": String(options.pbkdf2Iterations),
                "authentication_db": "_users",
            ],
            "uuids": ["algorithm": UUIDGenerator.Algorithm.sequential.rawValue, "max_count": "1000"],
        ]
        if !options.corsOrigins.isEmpty {
            sections["chttpd", default: [:]]["enable_cors"] = "true"
            sections["cors"] = ["origins": options.corsOrigins.joined(separator: ",")]
        }
        for (section, keys) in options.configuration {
            sections[section, default: [:]].merge(keys) { $1 }
        }
        return sections
    }

    /// Whether the file of runtime configuration changes can be read (before a server starts).
    public static func checkConfigurationFile(_ url: URL) throws {
        try NodeConfiguration.check(url)
    }

    /// The values changed through `/_node/{node}/_config` and kept, where they differ from
    /// what the server was started with (nil: deleted).
    public var configurationChanges: [(section: String, key: String, value: String?)] { config.overridden }

    /// Takes the live keys' values (`NodeConfiguration.live`) where they are used; a key
    /// deleted goes back to its start value.
    func applyConfiguration() {
        store.maxDocumentSize = config.integer(
            "couchdb", "max_document_size",
            default: Int(config.defaults["couchdb"]?["max_document_size"] ?? "") ?? DatabaseStore.defaultMaxDocumentSize
        )
        store.maxPartitionSize =
            Int(config.value("couchdb", "max_partition_size") ?? "").flatMap { $0 >= 0 ? $0 : nil }
            ?? DatabaseStore.defaultMaxPartitionSize
        requestBodyLimit.withLock {
            $0 = config.integer("chttpd", "max_http_request_size", default: options.maxBodySize)
        }
        options.javascript?.reduceLimit =
            QueryServer.ReduceLimit(rawValue: config.value("query_server_config", "reduce_limit") ?? "true") ?? .on
        auth.cookieLifetime = TimeInterval(
            config.integer("chttpd_auth", "timeout", default: Int(options.sessionTimeout)))
        DatabasePath.plusAsSpace.withLock { $0 = config.value("chttpd", "decode_plus_to_space") != "false" }
        ForwardedHeaders.names.withLock {
            $0 = (
                config.value("chttpd", "x_forwarded_host") ?? "X-Forwarded-Host",
                config.value("chttpd", "x_forwarded_proto") ?? "X-Forwarded-Proto",
                config.value("chttpd", "x_forwarded_ssl") ?? "X-Forwarded-Ssl"
            )
        }
        let authentication = config.value("chttpd_auth", "authentication_db") ?? "_users"
        let previous = UsersDatabase.authenticationDatabase
        UsersDatabase.configuredName.withLock {
            $0 = DatabaseStore.isValidName(authentication) ? authentication : "_users"
        }
        // A database made the authentication database gets its `_design/_auth` a few seconds
        // later, as from CouchDB's authentication cache, which adds it when it next listens to
        // that database (clients of CouchDB wait for it to appear).
        let now = UsersDatabase.authenticationDatabase
        if now != previous, store.exists(now) {
            let (store, logger) = (store, logger)
            Task {
                try? await Task.sleep(for: .seconds(3))
                guard UsersDatabase.authenticationDatabase == now, let db = try? await store.open(now) else { return }
                await UsersDatabase.ensureDesignDocument(db, logger: logger)
            }
        }
    }

    /// Starts the server's background work: the `_replicator` database's jobs.
    public func startBackgroundJobs() {
        replicatorDatabase.start()
        if let cluster = options.cluster {
            let follower = Task { [logger] in await cluster.followUsers(logger: logger) }
            usersFollower.withLock { $0 = follower }
        }
    }

    /// Stops background work and running replications.
    /// Stops them; a cancelled replication writes its checkpoints first, which this waits for
    /// (up to `grace`), so the next start resumes where it stopped.
    public func stopBackgroundJobs(grace: Duration = .seconds(5)) async {
        usersFollower.withLock { $0?.cancel() }
        replicatorDatabase.stop()
        await jobs.cancelAll(waiting: grace)
    }

    /// Creates the system databases CouchDB 3 expects (`_users`, `_replicator`) if missing,
    /// and the authentication database's `_design/_auth` (`UsersDatabase`).
    public func prepareSystemDatabases() async throws {
        for name in ["_users", "_replicator"] where !store.exists(name) {
            _ = try await store.create(name)
        }
        await UsersDatabase.ensureDesignDocument(try await store.open("_users"), logger: logger)
    }

    /// The database listener's responder: the URL table (`CouchRoutes.swift`) behind its
    /// middleware (`CouchMiddleware.swift`).
    public var responder: CallbackResponder<CouchRequestContext> {
        CallbackResponder { [self] request, context in try await pipeline.respond(to: request, context: context) }
    }

    /// Answers one request from the connection's `peer` address as the listener would (for
    /// harnesses that drive the API without one).
    public func respond(to request: Request, peer: String?) async -> Response {
        let context = CouchRequestContext(peerAddress: peer, logger: logger)
        do { return try await pipeline.respond(to: request, context: context) } catch {
            return APIResponse.error(CouchError(status: 500, error: "internal_server_error", reason: "\(error)"))
                .response
        }
    }

    /// Whether a browser page from `origin` may read this API's answers: an origin of
    /// `--cors-origins`, or this server's own application listener on the host the request
    /// came to (`authority`: its `Host`), so the tracker app at `/app/` syncs without setup.
    func corsAllows(_ origin: String, authority: String?) -> Bool {
        if !options.corsOrigins.isEmpty && (options.corsOrigins.contains("*") || options.corsOrigins.contains(origin)) {
            return true
        }
        guard let port = options.applicationPort?(), let authority, let components = URLComponents(string: origin),
            components.scheme == options.applicationScheme, let host = components.host, components.port == port,
            components.path.isEmpty
        else { return false }
        let requestHost =
            authority.hasPrefix("[")
            ? String(authority.prefix { $0 != "]" }.dropFirst()) : String(authority.prefix { $0 != ":" })
        let originHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return originHost.lowercased() == requestHost.lowercased()
    }

    func preflight(_ request: Request) -> APIResponse {
        var headers = HTTPFields()
        if let origin = request.headers[.origin], corsAllows(origin, authority: request.head.authority) {
            headers[.accessControlAllowOrigin] = origin
            headers[.accessControlAllowCredentials] = "true"
            headers[.accessControlAllowMethods] = "GET, PUT, POST, HEAD, DELETE, COPY"
            headers[.accessControlAllowHeaders] =
                request.headers[.accessControlRequestHeaders]
                ?? "accept, authorization, content-type, origin, referer"
            headers[.accessControlMaxAge] = "600"
        }
        return APIResponse(status: .noContent, headers: headers, body: ResponseBody())
    }

    func welcome(_ request: APIRequest) throws -> APIResponse {
        try request.requireMethod(.get)
        let uuid = settings.withLock { $0.uuid }
        return .json([
            "couchdb": "Welcome",
            "version": .string(CouchAPI.version),
            "git_sha": "locationtracker",
            "uuid": .string(uuid),
            "features": ["access-ready", "partitioned", "pluggable-storage-engines", "reshard", "scheduler"],
            "vendor": ["name": "LocationTracker", "version": .string(CouchAPI.vendorVersion)],
        ])
    }
}
