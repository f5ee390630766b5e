import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import HTTPServing
import LTServer
import Logging
import TrackerApp

/// `lt serve`: the database API and the application API, with embedded SQLite storage.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server: the CouchDB-compatible database API and the application API.",
        discussion:
            "Every option can also be set in a YAML file given with --config (its key is the flag's name: db-port: 5984) and with an LT_* environment variable; a flag wins over a variable, a variable over the file (LT_DATA, LT_HOST, LT_DB_PORT, LT_PORT, LT_ADMIN, LT_LOG_LEVEL, LT_CORS_ORIGINS, LT_MAX_BODY_SIZE, LT_DURABILITY, LT_MAX_OPEN_DATABASES, LT_MODE, LT_COUCHDB_URL, LT_TILES, LT_TILE_ATTRIBUTION, LT_TRUSTED_PROXIES, LT_MAX_APP_BODY_SIZE, LT_JAVASCRIPT, LT_REQUEST_TIMEOUT, LT_BODY_TIMEOUT, LT_MAX_CONNECTIONS, LT_MAX_CONNECTIONS_PER_ADDRESS, LT_MAX_FEEDS_PER_USER, LT_MAX_DOCUMENT_SIZE, LT_PASSWORD_ITERATIONS, LT_TLS_CERT, LT_TLS_KEY, LT_CA_FILE, LT_LOG_FORMAT, LT_ACCESS_LOG, LT_DATABASE_ONLY, LT_CONFIG). --print-config shows the result. The dashboard is at /dashboard/ on the application port."
    )

    @Option(help: "Directory for databases and server settings. (LT_DATA, default ./lt-data)")
    var data: String?

    @Option(help: "Address to listen on. (LT_HOST, default 127.0.0.1)")
    var host: String?

    @Option(
        name: .customLong("db-port"), help: "Port of the database API; 0 picks a free one. (LT_DB_PORT, default 5984)")
    var dbPort: Int?

    @Option(help: "Port of the application API and dashboard; 0 picks a free one. (LT_PORT, default 8080)")
    var port: Int?

    @Option(help: "Server admin as NAME:PASSWORD; stored hashed. (LT_ADMIN)")
    var admin: String?

    @Option(
        name: .customLong("log-level"),
        help: "trace, debug, info, notice, warning, error or critical. (LT_LOG_LEVEL, default info)")
    var logLevel: String?

    @Option(
        name: .customLong("cors-origins"),
        help: "Comma-separated origins allowed by CORS, or *; empty disables CORS. (LT_CORS_ORIGINS)")
    var corsOrigins: String?

    @Option(
        name: .customLong("max-body-size"), help: "Largest request body in bytes. (LT_MAX_BODY_SIZE, default 67108864)")
    var maxBodySize: Int?

    @Option(
        help:
            "full: fsync every commit; normal: survive a killed process, not power loss. (LT_DURABILITY, default full)")
    var durability: String?

    @Option(
        name: .customLong("max-open-databases"),
        help:
            "Databases kept open at once; beyond it, one not used in the last moment, chosen at random, is closed. (LT_MAX_OPEN_DATABASES, default: what the open-file limit allows, at most 2048)"
    )
    var maxOpenDatabases: Int?

    @Option(
        help:
            "Where users' locations live: db-per-user (a private database each, consolidated into lt_locations_all) or single-db (one shared database, lt_locations_all_envoy, where each user sees only their own documents). (LT_MODE, default db-per-user)"
    )
    var mode: String?

    @Option(
        help:
            "Cluster mode: keep the application's data in this Apache CouchDB 3 cluster, given with admin credentials (http://ADMIN:PASSWORD@host:5984), or each of its nodes separated by commas: requests go to one node and move to another when it cannot be reached (503 at once when none can). Devices replicate with it directly (with --mode single-db: through this server, which keeps each user to their own documents); this server registers users, consolidates and answers geo queries from its own mirrors of lt_places and the locations. (LT_COUCHDB_URL)"
    )
    var couchdb: String?

    @Option(
        name: .customLong("device-couchdb"),
        help:
            "Cluster mode: the address devices are told to replicate with (scheme://host:port, no credentials): a load balancer in front of the nodes, so a device keeps its database when a node is lost (docs/deploying.md). (LT_DEVICE_COUCHDB_URL, default: the node that answers when the device signs in)"
    )
    var deviceCouchdb: String?

    @Flag(
        name: .customLong("database-only"),
        help:
            "Serve only the CouchDB-compatible database API (no application, no consolidation): a stand-in for a CouchDB node."
    )
    var databaseOnly = false

    @Option(
        help:
            "Map tiles of the dashboard: a Leaflet URL template, or none (no tiles, e.g. offline). (LT_TILES, default OpenStreetMap's)"
    )
    var tiles: String?

    @Option(
        help:
            "on: run design documents' JavaScript (views, filters, validation, shows, lists, updates) when this build has a JavaScript engine; off: never (those requests answer 501, writes to databases with JavaScript validation are refused). The application's own rules need no JavaScript either way. (LT_JAVASCRIPT, default on)"
    )
    var javascript: String?

    @Option(
        name: .customLong("trusted-proxy"),
        help:
            "A reverse proxy's address or range (CIDR, e.g. 10.0.0.0/8); repeatable or comma-separated. Requests from it are taken to come from the address its X-Forwarded-For names, for login throttling and connection limits; anyone else's X-Forwarded-For is ignored. (LT_TRUSTED_PROXIES)"
    )
    var trustedProxy: [String] = []

    @Option(
        name: .customLong("max-document-size"),
        help:
            "Largest document body (JSON, attachments not counted) the database API stores, in bytes; larger ones are refused with 413 document_too_large, as CouchDB's max_document_size. (LT_MAX_DOCUMENT_SIZE, default 8000000)"
    )
    var maxDocumentSize: Int?

    @Option(
        name: .customLong("max-app-body-size"),
        help: "Largest request body of the application API in bytes. (LT_MAX_APP_BODY_SIZE, default 1048576)")
    var maxAppBodySize: Int?

    @Option(
        name: .customLong("request-timeout"),
        help:
            "Seconds a connection may wait for a request's head (a new or idle keep-alive connection, or headers sent too slowly) before it is closed. (LT_REQUEST_TIMEOUT, default 60)"
    )
    var requestTimeout: Int?

    @Option(
        name: .customLong("body-timeout"),
        help:
            "Longest pause, in seconds, while a request's body arrives before the connection is closed. (LT_BODY_TIMEOUT, default 30)"
    )
    var bodyTimeout: Int?

    @Option(
        name: .customLong("body-deadline"),
        help:
            "Longest time, in seconds, a whole request body may take to arrive, however steadily it trickles; the connection is closed after it. (LT_BODY_DEADLINE, default 600)"
    )
    var bodyDeadline: Int?

    @Option(
        name: .customLong("max-registrations-per-hour"),
        help:
            "Users one address may register in an hour through the application API (each makes a database and runs a password hash); server admins are not counted; 0: only admins register users. (LT_MAX_REGISTRATIONS_PER_HOUR, default 10)"
    )
    var maxRegistrationsPerHour: Int?

    @Option(
        name: .customLong("max-connections"),
        help: "Connections open at once on each listener; more wait to be accepted. (LT_MAX_CONNECTIONS, default 2048)")
    var maxConnections: Int?

    @Option(
        name: .customLong("max-connections-per-address"),
        help:
            "Connections open at once from one address on each listener (trusted proxies exempt); more are closed at once. (LT_MAX_CONNECTIONS_PER_ADDRESS, default 256)"
    )
    var maxConnectionsPerAddress: Int?

    @Option(
        name: .customLong("max-feeds-per-user"),
        help:
            "Longpoll, continuous and eventsource _changes feeds one user (or one anonymous client) may have open at once; server admins are not counted. (LT_MAX_FEEDS_PER_USER, default 100)"
    )
    var maxFeedsPerUser: Int?

    @Option(
        name: .customLong("password-iterations"),
        help:
            "PBKDF2-SHA256 iterations for passwords stored from now on (users', the admin's, and _users documents written with a plain password), as CouchDB's [chttpd_auth] iterations; stored hashes keep their own count, and API keys (random 128-bit secrets) always take one. Lower it only for tests and benchmarks. (LT_PASSWORD_ITERATIONS, default 600000)"
    )
    var passwordIterations: Int?

    @Option(
        name: .customLong("tile-attribution"),
        help: "Attribution shown with the tiles (HTML). (LT_TILE_ATTRIBUTION, default OpenStreetMap's)")
    var tileAttribution: String?

    @Option(
        name: .customLong("tls-cert"),
        help:
            "PEM certificate (chain) to serve both listeners over HTTPS with; needs --tls-key. Read again on SIGHUP, for renewals. (LT_TLS_CERT)"
    )
    var tlsCert: String?

    @Option(
        name: .customLong("tls-key"),
        help: "PEM private key of --tls-cert (unencrypted; readable by the server only). (LT_TLS_KEY)")
    var tlsKey: String?

    @Option(
        name: .customLong("log-format"),
        help:
            "text, or json: one JSON object per line (time, level, label, message, and the access log's fields). (LT_LOG_FORMAT, default text)"
    )
    var logFormat: String?

    @Option(
        name: .customLong("access-log"),
        help:
            "on: one info-level line per request on both listeners (method, path without its query, status, duration, user, client, request id); off: those lines only at debug level. (LT_ACCESS_LOG, default on)"
    )
    var accessLog: String?

    @OptionGroup var trust: TrustOptions

    @Option(
        help:
            "A YAML file of settings, one per option, named as its flag (db-port: 5984); a flag or LT_* variable overrides the file. (LT_CONFIG)"
    )
    var config: String?

    @Flag(
        name: .customLong("print-config"),
        help: "Print the effective configuration (each setting and where it came from; secrets masked) and exit.")
    var printConfig = false

    func run() async throws {
        ProcessSetup.runTasksOnEventLoops()
        let settings = try ServeSettings(configPath: config)
        let levelName = settings.string("log-level", flag: logLevel, default: "info")!
        guard let level = Logger.Level(rawValue: levelName) else {
            throw ValidationError("Unknown log level \(levelName)")
        }
        let formatName = settings.string("log-format", flag: logFormat, default: "text")!
        guard let format = ProcessSetup.LogFormat(rawValue: formatName) else {
            throw ValidationError("--log-format must be text or json, not \(formatName)")
        }
        let caFile = settings.string("ca-file", flag: trust.caFile)
        let configuration = try configuration(settings)
        if printConfig {
            print(settings.printed, terminator: "")
            return
        }
        ProcessSetup.bootstrapLogging(level: level, format: format)
        try TrustOptions.apply(caFile: caFile)
        // Held until the server stops: users' databases are opened without file locks. (It
        // creates the directory too.)
        let directoryLock = try DirectoryLock.forCommand(configuration.directory)
        defer { withExtendedLifetime(directoryLock) {} }
        do {
            try await LocationTrackerServer.run(configuration, logger: Logger(label: "lt"))
        } catch let failure as ServerStartFailure {
            throw CommandFailure(failure.description)
        }
    }

    /// The options, `LT_*` variables and configuration file, checked, as the server's configuration.
    func configuration(_ settings: ServeSettings) throws -> ServerConfiguration {
        let maxOpen = try settings.int(
            "max-open-databases", flag: maxOpenDatabases, default: ServerResources.openDatabaseBudget())
        try ServerResources.checkOpenDatabases(maxOpen)
        var configuration = ServerConfiguration(
            directory: URL(
                fileURLWithPath: settings.string("data", flag: data, default: "./lt-data")!, isDirectory: true),
            maxOpenDatabases: maxOpen)
        configuration.host = settings.string("host", flag: host, default: "127.0.0.1")!
        configuration.databasePort = try settings.int("db-port", flag: dbPort, default: 5984)
        configuration.applicationPort = try settings.int("port", flag: port, default: 8080)
        guard (0...65535).contains(configuration.databasePort), (0...65535).contains(configuration.applicationPort)
        else {
            throw ValidationError("ports are from 0 (any free one) to 65535")
        }
        configuration.durability = try Durability.option(
            settings.string("durability", flag: durability, default: "full")!)
        let modeName = settings.string("mode", flag: mode, default: TrackerService.Mode.databasePerUser.rawValue)!
        guard let appMode = TrackerService.Mode(rawValue: modeName) else {
            throw ValidationError(
                "--mode must be \(TrackerService.Mode.allCases.map(\.rawValue).joined(separator: " or ")), not \(modeName)"
            )
        }
        configuration.mode = appMode
        configuration.databaseOnly = try settings.bool("database-only", flag: databaseOnly)
        // One node's URL, or several separated by commas (the same cluster's nodes).
        let clusterURLs = (settings.string("couchdb", flag: couchdb) ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        configuration.clusterNodeURLs = configuration.databaseOnly ? [] : clusterURLs
        if let text = settings.string("device-couchdb", flag: deviceCouchdb) {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host?.isEmpty == false,
                url.user == nil, url.password == nil, url.path.isEmpty || url.path == "/", url.query == nil
            else {
                throw ValidationError(
                    "--device-couchdb must be scheme://host[:port] without credentials or a path, not \(text)")
            }
            guard !clusterURLs.isEmpty else { throw ValidationError("--device-couchdb needs --couchdb (cluster mode)") }
            configuration.deviceCouchURL = url
        }
        if let admin = settings.string("admin", flag: admin) {
            guard let colon = admin.firstIndex(of: ":"), colon != admin.startIndex else {
                throw ValidationError("--admin must be NAME:PASSWORD")
            }
            configuration.admin = (String(admin[..<colon]), String(admin[admin.index(after: colon)...]))
        }
        configuration.maxDocumentSize = try settings.int(
            "max-document-size", flag: maxDocumentSize, default: configuration.maxDocumentSize)
        guard configuration.maxDocumentSize > 0 else { throw ValidationError("--max-document-size must be positive") }
        configuration.database.pbkdf2Iterations = try settings.int(
            "password-iterations", flag: passwordIterations, default: configuration.database.pbkdf2Iterations)
        guard (1...100_000_000).contains(configuration.database.pbkdf2Iterations) else {
            throw ValidationError("--password-iterations must be between 1 and 100,000,000")
        }
        try limits(&configuration, settings)
        try javascriptOption(&configuration, settings)
        configuration.tls = try certificate(settings)
        switch settings.string("access-log", flag: accessLog, default: "on")! {
        case "on": break
        case "off": (configuration.database.accessLog, configuration.application.accessLog) = (false, false)
        case let other: throw ValidationError("--access-log must be on or off, not \(other)")
        }
        if let tiles = settings.string("tiles", flag: tiles) { configuration.dashboard.tileURL = tiles }
        if let attribution = settings.string("tile-attribution", flag: tileAttribution) {
            configuration.dashboard.tileAttribution = attribution
        }
        if !configuration.databaseOnly { configuration.places = try ServerResources.samplePlaces() }
        configuration.allocator = Allocator.description
        let metrics = configuration.database.metrics
        metrics.addCollector {
            for (kind, bytes) in Allocator.statistics() {
                metrics.gauge(HTTPMetric.allocatorBytes, [("kind", kind)], Double(bytes))
            }
        }
        return configuration
    }

    /// Body sizes, trusted proxies, connection limits and timeouts, feeds per user, CORS.
    func limits(_ configuration: inout ServerConfiguration, _ settings: ServeSettings) throws {
        configuration.database.maxBodySize = try settings.int(
            "max-body-size", flag: maxBodySize, default: configuration.database.maxBodySize)
        configuration.application.maxBodySize = try settings.int(
            "max-app-body-size", flag: maxAppBodySize, default: configuration.application.maxBodySize)
        guard configuration.database.maxBodySize > 0, configuration.application.maxBodySize > 0 else {
            throw ValidationError("body sizes must be positive")
        }
        let clientAddress: ClientAddress
        do {
            let proxies =
                (settings.string(
                    "trusted-proxy", flag: trustedProxy.isEmpty ? nil : trustedProxy.joined(separator: ",")) ?? "")
                .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            clientAddress = ClientAddress(trustedProxies: try proxies.map(AddressRange.init))
        } catch let error as CouchError {
            throw ValidationError("--trusted-proxy: \(error.reason)")
        }
        configuration.database.clientAddress = clientAddress
        configuration.application.clientAddress = clientAddress
        var connections = ConnectionLimits()
        connections.clientAddress = clientAddress
        let headSeconds = try settings.int("request-timeout", flag: requestTimeout, default: 60)
        let bodySeconds = try settings.int("body-timeout", flag: bodyTimeout, default: 30)
        let bodyDeadlineSeconds = try settings.int("body-deadline", flag: bodyDeadline, default: 600)
        connections.maxConnections = try settings.int(
            "max-connections", flag: maxConnections, default: connections.maxConnections)
        connections.maxConnectionsPerAddress = try settings.int(
            "max-connections-per-address", flag: maxConnectionsPerAddress, default: connections.maxConnectionsPerAddress
        )
        guard (1...86_400).contains(headSeconds), (1...86_400).contains(bodySeconds),
            (1...86_400).contains(bodyDeadlineSeconds)
        else {
            throw ValidationError("--request-timeout, --body-timeout and --body-deadline are seconds from 1 to 86400")
        }
        guard connections.maxConnections > 0, connections.maxConnectionsPerAddress > 0 else {
            throw ValidationError("--max-connections and --max-connections-per-address must be positive")
        }
        connections.requestHeadTimeout = .seconds(headSeconds)
        connections.bodyReadTimeout = .seconds(bodySeconds)
        connections.bodyDeadline = .seconds(bodyDeadlineSeconds)
        configuration.connections = connections
        configuration.database.maxFeedsPerUser = try settings.int(
            "max-feeds-per-user", flag: maxFeedsPerUser, default: configuration.database.maxFeedsPerUser)
        guard configuration.database.maxFeedsPerUser > 0 else {
            throw ValidationError("--max-feeds-per-user must be positive")
        }
        configuration.application.registrationsPerHour = try settings.int(
            "max-registrations-per-hour", flag: maxRegistrationsPerHour,
            default: configuration.application.registrationsPerHour)
        guard (0...1_000_000_000).contains(configuration.application.registrationsPerHour) else {
            throw ValidationError("--max-registrations-per-hour must be 0 (only admins register) to 1000000000")
        }
        configuration.database.corsOrigins = (settings.string("cors-origins", flag: corsOrigins) ?? "").split(
            separator: ","
        )
        .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `--tls-cert` and `--tls-key`, both or neither, read and checked now.
    func certificate(_ settings: ServeSettings) throws -> ServerCertificate? {
        switch (settings.string("tls-cert", flag: tlsCert), settings.string("tls-key", flag: tlsKey)) {
        case (nil, nil): return nil
        case let (certificate?, key?):
            do { return try ServerCertificate(certificatePath: certificate, keyPath: key) } catch let failure
                as ServerCertificate.Failure
            {
                throw CommandFailure(failure.description)
            }
        case (_?, nil): throw ValidationError("--tls-cert needs --tls-key (LT_TLS_KEY), the certificate's private key")
        case (nil, _?): throw ValidationError("--tls-key needs --tls-cert (LT_TLS_CERT), the certificate it belongs to")
        }
    }

    /// `--javascript on|off`, and whether this build has an engine at all.
    func javascriptOption(_ configuration: inout ServerConfiguration, _ settings: ServeSettings) throws {
        let setting = settings.string("javascript", flag: javascript, default: "on")!
        switch setting {
        case "on": configuration.database.javascript = ServerResources.javascriptQueryServer()
        case "off": configuration.database.javascript = nil
        case let other: throw ValidationError("--javascript must be on or off, not \(other)")
        }
        if configuration.database.javascript == nil {
            configuration.javascriptOffReason =
                setting == "off"
                ? "turned off (--javascript off)" : "not in this build (install duktape-dev and rebuild)"
        }
    }
}
