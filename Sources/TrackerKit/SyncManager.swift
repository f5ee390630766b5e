import CouchEngine
import CouchJSON
import Foundation
import Replication

/// Where the user's locations live on the server: what a login returned.
public struct ServerDatabase: Sendable, Equatable {
    /// `http(s)://host:port/dbname`.
    public var url: String
    public var apiKey: String
    public var apiPassword: String

    public init(url: String, apiKey: String, apiPassword: String) {
        self.url = url
        self.apiKey = apiKey
        self.apiPassword = apiPassword
    }
}

/// Keeps the device's `locations` database and the user's server database in step, as the
/// original app did: a push after each saved location, a pull when the app starts or comes to
/// the foreground, at most one replication per direction at a time, and a request made while
/// one runs remembered and run once after it (however many came). Failures leave the status
/// `offline` (no connection) or `error`; the next request tries again, and what was recorded
/// meanwhile goes then.
public actor SyncManager {
    public enum Direction: String, Sendable { case push, pull }

    /// What the UI shows.
    public enum Status: Sendable, Equatable {
        case idle
        case syncing(Direction)
        case offline(String)
        case error(String)
    }

    let local: LocalStore
    let server: ServerDatabase
    public private(set) var status: Status = .idle
    /// Replications run so far, by direction (coalesced requests are not counted twice).
    public private(set) var runs: [Direction: Int] = [:]
    /// Documents written by the last run of each direction.
    public private(set) var lastWritten: [Direction: Int] = [:]
    /// Documents written by every run of each direction since this manager started.
    public private(set) var written: [Direction: Int] = [:]
    private var running: [Direction: Task<Void, Never>] = [:]
    private var again: Set<Direction> = []
    private let onStatus: (@Sendable (Status) -> Void)?

    public init(local: LocalStore, server: ServerDatabase, onStatus: (@Sendable (Status) -> Void)? = nil) {
        self.local = local
        self.server = server
        self.onStatus = onStatus
    }

    /// Asks for a replication; returns at once.
    public func request(_ direction: Direction) {
        if running[direction] != nil {
            again.insert(direction)
            return
        }
        running[direction] = Task { await self.run(direction) }
    }

    /// Waits until nothing runs or waits to run.
    public func waitUntilIdle() async {
        while let task = running.values.first {
            await task.value
        }
    }

    private func run(_ direction: Direction) async {
        repeat {
            again.remove(direction)
            runs[direction, default: 0] += 1
            setStatus(.syncing(direction))
            do {
                let remote = try RemoteEndpoint(url: server.url, username: server.apiKey, password: server.apiPassword)
                let device = LocalEndpoint(store: local.store, name: "locations")
                // A device does not hang on: two quick retries, then offline until the next request.
                var options = ReplicationOptions()
                options.maxRetries = 2
                options.maxBackoff = .seconds(2)
                let replication = direction == .push
                    ? Replication(source: device, target: remote, options: options) : Replication(source: remote, target: device, options: options)
                let result = try await replication.run()
                lastWritten[direction] = result.status.docsWritten
                written[direction, default: 0] += result.status.docsWritten
                if direction == .push { try await recordPushed(through: result.sourceLastSeq) }
                setStatus(.idle)
            } catch {
                let text = "\(error)"
                let unreachable = ["connect", "refused", "timeout", "timed out", "unreachable", "network", "host"].contains { text.lowercased().contains($0) }
                setStatus(unreachable ? .offline(text) : .error(text))
            }
        } while again.contains(direction)
        running[direction] = nil
    }

    /// Local changes not yet known to be on the server: changes to the device's `locations`
    /// after the last sequence a push completed (0 once a push has caught up).
    public func pendingPush() async throws -> Int {
        let db = try local.locations
        var options = ChangesOptions()
        options.since = try await pushedSeq(db)
        options.limit = 0
        return try await db.changes(options).pending
    }

    private func pushedSeq(_ db: Database) async throws -> Int {
        await local.state("lt-sync", in: db)?["pushed_seq"]?.intValue ?? 0
    }

    /// Keeps, in a local document (never replicated), how far pushes got.
    private func recordPushed(through seq: JSON) async throws {
        let db = try local.locations
        let pushed = try db.parseSequence(seq)
        guard pushed > (try await pushedSeq(db)) else { return }
        try await local.setState("lt-sync", in: db, ["pushed_seq": .int(pushed)])
    }

    private func setStatus(_ new: Status) {
        status = new
        onStatus?(new)
    }
}
