public import AsyncHTTPClient
import CouchEngine
import CouchJSON
public import CouchProtocol
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
/// meanwhile goes then. Optionally continuous: both directions follow changes as they happen,
/// retrying with backoff while the server is away.
public actor SyncManager {
    public enum Direction: String, Sendable { case push, pull }

    /// What the UI shows.
    public enum Status: Sendable, Equatable, CustomStringConvertible {
        case idle
        /// Changes looked at so far, and of how many (when the source says).
        case syncing(Direction, done: Int, total: Int?)
        case offline(String)
        case error(String)

        /// `idle`, `syncing (push 40/120)`, `offline (why)`, `error (why)`.
        public var description: String {
            switch self {
            case .idle: return "idle"
            case let .syncing(direction, done, total):
                return "syncing (\(direction.rawValue) \(done)\(total.map { "/\($0)" } ?? ""))"
            case let .offline(why): return "offline (\(why))"
            case let .error(why): return "error (\(why))"
            }
        }
    }

    let local: LocalStore
    let server: ServerDatabase
    /// What runs and what is shown (`SyncManager+StateMachine.swift`).
    private var machine = StateMachine()
    public var status: Status { machine.status }
    /// Replications run so far, by direction (coalesced requests are not counted twice).
    public var runs: [Direction: Int] { machine.runs }
    /// Documents written by every run of each direction since this manager started.
    public private(set) var written: [Direction: Int] = [:]
    private var running: [Direction: Task<Void, Never>] = [:]
    private var continuous: [Direction: Task<Void, Never>] = [:]
    private let onStatus: (@Sendable (Status) -> Void)?
    /// The HTTP client replications go through (one trusting a private CA: `CouchHTTPClient.httpClient(trustingCAFile:)`).
    let http: HTTPClient

    public init(
        local: LocalStore, server: ServerDatabase, http: HTTPClient = CouchHTTPClient.shared,
        onStatus: (@Sendable (Status) -> Void)? = nil
    ) {
        self.local = local
        self.server = server
        self.http = http
        self.onStatus = onStatus
    }

    /// Whether continuous sync runs.
    public var isContinuous: Bool { machine.isContinuous }

    /// Asks for a replication; returns at once. (In continuous mode the running replications
    /// pick changes up by themselves.)
    public func request(_ direction: Direction) {
        guard machine.requested(direction) else { return }
        running[direction] = Task { await self.run(direction) }
    }

    /// Waits until nothing runs or waits to run (continuous replications aside).
    public func waitUntilIdle() async {
        while let task = running.values.first {
            await task.value
        }
    }

    /// Pushes now and waits for it, after any pull that runs (so the push's checkpoint also
    /// covers what that pull brought: nothing it wrote is counted as waiting to be pushed).
    public func pushNow() async {
        await waitUntilIdle()
        request(.push)
        await waitUntilIdle()
    }

    /// Starts continuous push and pull: changes go both ways as they happen, until `stopContinuous()`.
    public func startContinuous() {
        guard machine.continuousStarting() else { return }
        for direction in [Direction.push, .pull] {
            continuous[direction] = Task { await self.follow(direction) }
        }
    }

    /// Stops continuous sync (each replication checkpoints first).
    public func stopContinuous() async {
        let tasks = continuous.values
        continuous = [:]
        machine.continuousStopped()
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    private func replication(_ direction: Direction, continuous: Bool) throws -> Replication {
        let remote = try RemoteEndpoint(
            url: server.url, username: server.apiKey, password: server.apiPassword, client: http)
        let device = LocalEndpoint(store: local.store, name: "locations")
        var options = ReplicationOptions()
        options.continuous = continuous
        if continuous {
            options.maxBackoff = .seconds(30)
        } else {
            // A device does not hang on: two quick retries, then offline until the next request.
            options.maxRetries = 2
            options.maxBackoff = .seconds(2)
        }
        return direction == .push
            ? Replication(source: device, target: remote, options: options)
            : Replication(source: remote, target: device, options: options)
    }

    private func run(_ direction: Direction) async {
        repeat {
            publish(machine.runStarting(direction))
            do {
                let replication = try replication(direction, continuous: false)
                let result = try await runWatched(replication, direction)
                written[direction, default: 0] += result.status.docsWritten
                if direction == .push { try await recordPushed(through: result.sourceLastSeq) }
                publish(machine.succeeded())
            } catch {
                publish(machine.failed("\(error)"))
            }
        } while machine.runEnded(direction)
        running[direction] = nil
    }

    /// One direction of continuous sync; starts again after errors retrying did not fix.
    private func follow(_ direction: Direction) async {
        while !Task.isCancelled {
            do {
                let result = try await runWatched(try replication(direction, continuous: true), direction)
                if direction == .push { try await recordPushed(through: result.sourceLastSeq) }
            } catch {
                publish(machine.failed("\(error)"))
                try? await Task.sleep(for: .seconds(5))
            }
        }
    }

    /// Runs a replication with its progress mirrored (see `watch`). The watch subscribes
    /// before the run starts, so no update is missed however quickly it goes, and ends when
    /// the run does, so no late update overwrites the status its outcome sets; for a
    /// continuous run, what it wrote that the watch had not seen is counted then.
    private func runWatched(_ replication: Replication, _ direction: Direction) async throws -> ReplicationResult {
        let updates = replication.statusUpdates()
        let progress = Task { await self.watch(updates, replication, direction) }
        func settle() async {
            progress.cancel()
            let counted = await progress.value
            if replication.options.continuous {
                written[direction, default: 0] += max(0, replication.status.docsWritten - counted)
            }
        }
        do {
            let result = try await replication.run()
            await settle()
            return result
        } catch {
            await settle()
            throw error
        }
    }

    /// Mirrors a replication's progress in `status`; in continuous mode, also what it wrote and
    /// how far pushes got. Answers how many written documents it counted.
    private func watch(
        _ updates: AsyncStream<ReplicationStatus>, _ replication: Replication, _ direction: Direction
    ) async -> Int {
        var counted = 0
        for await update in updates {
            // A replication is `stopped` before it starts; its caller ends the watch when it ends.
            if update.state == .stopped { continue }
            if replication.options.continuous {
                written[direction, default: 0] += update.docsWritten - counted
                counted = update.docsWritten
            }
            if update.state == .idle, direction == .push, let seq = update.lastSeq {
                try? await recordPushed(through: seq)
            }
            if let shown = machine.progress(update, direction) { publish(shown) }
        }
        return counted
    }

    /// Local changes not yet known to be on the server (see `LocalStore.pendingPush`).
    public func pendingPush() async throws -> Int {
        try await local.pendingPush()
    }

    /// Keeps, in a local document (never replicated), how far pushes got.
    private func recordPushed(through seq: JSON) async throws {
        let db = try local.locations
        let pushed = try db.parseSequence(seq)
        guard pushed > (await local.pushedSeq(db)) else { return }
        try await local.setState(LocalStore.syncState, in: db, ["pushed_seq": .int(pushed)])
    }

    private func publish(_ status: Status) {
        onStatus?(status)
    }
}
