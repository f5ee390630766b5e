public import CouchEngine
public import CouchJSON
public import CouchServer
public import Foundation
public import HTTPServing
public import TrackerApp

/// Everything `lt serve` needs to start, already checked: the command line and `LT_*`
/// variables are read into one of these by the CLI, and `LocationTrackerServer` runs it.
public struct ServerConfiguration: Sendable {
    /// Databases and `server.json` (the caller holds its directory lock).
    public var directory: URL
    public var host = "127.0.0.1"
    /// Port of the database API; 0 picks a free one.
    public var databasePort = 5984
    /// Port of the application API and dashboard; 0 picks a free one.
    public var applicationPort = 8080
    public var durability: Durability = .full
    public var mode: TrackerService.Mode = .databasePerUser
    /// Serve only the CouchDB-compatible database API (no application, no consolidation).
    public var databaseOnly = false
    /// Cluster mode: the Apache CouchDB the application's data lives in, with admin credentials:
    /// the first node's URL (the others in `clusterNodeURLs`).
    public var clusterURL: String? { clusterNodeURLs.first }
    /// Every node's URL (same credentials); the application fails over between them.
    public var clusterNodeURLs: [String] = []
    /// Cluster mode: the address devices are told to replicate with (`scheme://host:port`, e.g. a
    /// load balancer in front of the nodes). Nil: the node that answers when they sign in.
    public var deviceCouchURL: URL?
    /// A server admin to create or keep (`--admin NAME:PASSWORD`); one is generated and printed
    /// once when there is none at all.
    public var admin: (name: String, password: String)?
    /// Why JavaScript is off (`options.javascript == nil`), for the warning at start.
    public var javascriptOffReason: String?
    public var maxOpenDatabases: Int
    public var maxDocumentSize = DatabaseStore.defaultMaxDocumentSize
    /// The database API's options (body size, CORS, feeds, trusted proxies, JavaScript).
    public var database = CouchAPI.Options()
    public var application = AppLimits()
    public var connections = ConnectionLimits()
    /// TLS on both listeners (`--tls-cert`, `--tls-key`); nil: plain HTTP.
    public var tls: ServerCertificate?
    public var dashboard = DashboardOptions()
    /// The places `lt_places` starts with (the original sample places).
    public var places: [JSON] = []
    /// How each database's SQLite connections are opened.
    public var sqliteConnections: @Sendable (String) -> Connections = LocationTrackerServer.connections
    /// The memory allocator's name, for the start-up log.
    public var allocator = "system malloc"

    public init(directory: URL, maxOpenDatabases: Int) {
        self.directory = directory
        self.maxOpenDatabases = maxOpenDatabases
    }
}

/// The server could not start although its configuration was well formed (CouchDB cannot be
/// reached, the application's databases cannot be prepared): the message says what and where.
public struct ServerStartFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
