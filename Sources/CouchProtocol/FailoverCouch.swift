public import AsyncHTTPClient
public import CouchJSON
public import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What this server knows of a cluster's nodes (`ClusterNodes`), shared by everything that talks
/// to the cluster (the application's requests, the proxied shared database), so one failure
/// found by either steers both, and each change is reported once.
public final class ClusterHealth: Sendable {
    let state: NIOLockedValueBox<ClusterNodes>
    let report: @Sendable (ClusterNodes.Change) -> Void
    let clock: @Sendable () -> Double

    public init(
        nodes: [String], clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
        report: @escaping @Sendable (ClusterNodes.Change) -> Void = { _ in }
    ) {
        state = NIOLockedValueBox(ClusterNodes(nodes: nodes))
        self.report = report
        self.clock = clock
    }

    /// The node for a request (see `ClusterNodes.choose`), or the 503 to answer when none may be tried.
    public func choose(excluding tried: Set<Int>) throws(CouchError) -> Int {
        let now = clock()
        guard let node = state.withLockedValue({ $0.choose(at: now, excluding: tried) }) else {
            throw CouchError(
                status: 503, error: "service_unavailable", reason: state.withLockedValue { $0.unreachableReason })
        }
        return node
    }

    public func succeeded(_ node: Int) {
        let now = clock()
        state.withLockedValue { $0.succeeded(node, at: now) }.forEach(report)
    }

    public func failed(_ node: Int, reason: String) {
        let now = clock()
        state.withLockedValue { $0.failed(node, reason: reason, at: now) }.forEach(report)
    }

    /// What `node`'s health check found (`ClusterNodes.checked`).
    public func checked(_ node: Int, _ check: ClusterNodes.Check) {
        let now = clock()
        state.withLockedValue { $0.checked(node, check, at: now) }.forEach(report)
    }

    /// Runs `body` with a node that answers, and with another when the way to that one fails —
    /// only for a read (`readOnly`) or a request that cannot have reached it; a write cut off
    /// mid-way is the 503 `FailoverCouch.cutOff`. With no node left to try, the 503 naming each.
    /// A node that stops answering in the middle (a partition, a frozen machine: nothing refuses
    /// the connection, nothing answers) is found by `watched`, not waited on.
    public func onSomeNode<T: Sendable>(
        readOnly: Bool, isAlive: @escaping @Sendable (Int) async -> Bool,
        _ body: @escaping @Sendable (Int) async throws -> T
    ) async throws -> T {
        var tried = Set<Int>()
        while true {
            let node = try choose(excluding: tried)
            do {
                let answer = try await watched(node, isAlive: isAlive) { try await body(node) }
                succeeded(node)
                return answer
            } catch {
                guard let failure = FailoverCouch.transportFailure(error) else { throw error }
                failed(node, reason: failure.reason)
                guard failure.beforeSending || readOnly else {
                    throw FailoverCouch.cutOff(node: state.withLockedValue { $0.nodes[node] }, failure.reason)
                }
                tried.insert(node)
            }
        }
    }

    /// How long a request waits for its answer before its node is asked whether it is alive.
    static let patience: Duration = .seconds(1)

    /// When each node last answered a health check, so that many waiting requests (long polls)
    /// share one check a second and a half rather than each making its own.
    let lastAlive = NIOLockedValueBox<[Int: Double]>([:])

    func answeredLately(_ node: Int) -> Bool {
        let now = clock()
        return lastAlive.withLockedValue { $0[node].map { now - $0 < 1.5 } ?? false }
    }

    func alive(_ node: Int) {
        let now = clock()
        lastAlive.withLockedValue { $0[node] = now }
    }

    /// `work`, given up (`StoppedAnswering`) when `node` stops answering meanwhile: after
    /// `patience`, and every 2 s after that, the node is asked whether it is alive (`isAlive`:
    /// `GET /_up` on connections of its own), unless it is already known to be down. A slow
    /// answer from a live node (a view being built, a long poll) is waited for.
    func watched<T: Sendable>(
        _ node: Int, isAlive: @escaping @Sendable (Int) async -> Bool,
        _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: Self.patience)
                while true {
                    guard self.isUp(node) else { throw CouchProtocolError.stoppedAnswering }
                    if !self.answeredLately(node) {
                        guard await isAlive(node) else { throw CouchProtocolError.stoppedAnswering }
                        self.alive(node)
                    }
                    try Task.checkCancellation()
                    try await Task.sleep(for: .seconds(2))
                }
            }
            defer { group.cancelAll() }
            while true {
                if let answer = try await group.next() ?? nil { return answer }
            }
        }
    }

    public var current: Int { state.withLockedValue { $0.current } }
    public func isUp(_ node: Int) -> Bool { state.withLockedValue { $0.isUp(node) } }
    /// Each node's name, whether it answers, and what its health check says when it asks for
    /// no requests, for the metrics.
    public var nodes: [(node: String, up: Bool, withdrawn: String?)] {
        state.withLockedValue { state in
            zip(state.nodes, state.health).map { node, health in
                if case let .withdrawn(_, status) = health { return (node, false, status) }
                return (node, health == .up, nil)
            }
        }
    }
}

/// Apache CouchDB's cluster through any of its nodes (cluster mode given several node URLs, or
/// one): requests go to one node while it answers and move to another when it cannot be
/// reached (`ClusterNodes` decides); when no node can answer, a 503 `service_unavailable` naming
/// each node and why, at once — never a wait on dead connections or a 500 with socket text.
///
/// A request is sent again to another node only when it cannot have been applied: the node
/// could not be connected to, or the request only reads. A write cut off mid-way is a 503 saying
/// it may have been applied (CouchDB's revisions make trying it again safe for the caller).
public final class FailoverCouch: CouchClient {
    let urls: [String]
    let members: [HTTPCouch]
    /// Which nodes answer (shared with whatever else talks to this cluster).
    public let health: ClusterHealth

    /// `urls`: each node's URL with the same server admin's credentials. `report` hears each
    /// change (a node down or up, the cluster unreachable or back) once, as it happens.
    public init(
        urls: [String], http: HTTPClient = CouchHTTPClient.failingFast,
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
        report: @escaping @Sendable (ClusterNodes.Change) -> Void = { _ in }
    ) throws(CouchError) {
        guard !urls.isEmpty else { throw .badRequest("The CouchDB cluster needs at least one node's URL") }
        var members: [HTTPCouch] = []
        for url in urls { members.append(try HTTPCouch(url: url, http: http)) }
        self.members = members
        self.urls = urls
        health = ClusterHealth(nodes: members.map(\.host), clock: clock, report: report)
    }

    /// The first node's address (`scheme://host:port`), as the log names the cluster.
    public var baseURL: String { members[0].baseURL }
    /// `host:port` of the node answering now, as a login hands it to devices.
    public var host: String { members[health.current].host }
    public var scheme: String { members[0].scheme }

    /// The URL (with credentials) of a node that answers now, for what talks to the cluster by
    /// URL (this server's mirrors replicate from it): asked through the failover, so a node
    /// that is gone is passed over; the first node's when none answers.
    public func answeringNodeURL() async -> String {
        _ = try? await request(.get, "/", query: [:], body: nil)
        let current = health.current
        return health.isUp(current) ? urls[current] : urls[0]
    }

    /// Whether the node of `url` (one of this cluster's) is taken to answer.
    public func isAnswering(_ url: String) -> Bool {
        guard let node = urls.firstIndex(of: url) else { return false }
        return health.isUp(node)
    }

    public func request(
        _ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?
    ) async throws -> CouchReply {
        let attempts = NIOLockedValueBox(0)
        let reply = try await onSomeNode(readOnly: Self.repeatable(method, path, body: body)) { member in
            attempts.withLockedValue { $0 += 1 }
            return try await member.request(method, path, query: query, body: body)
        }
        // A document written again because its first try was cut off: a conflict with exactly
        // what was sent is that first try, applied.
        if reply.status == 409, method == .put, attempts.withLockedValue({ $0 }) > 1, let body,
            let applied = await alreadyWritten(path, body)
        {
            return applied
        }
        return reply
    }

    /// Whether a request may be sent again to another node when its first try was cut off:
    /// reads, and writes that find their first try when repeated — a `PUT` (a database: 412;
    /// `_security`: the same; a document: a conflict, read back by `request`) and copies that
    /// keep their revisions (`_bulk_docs` with `new_edits: false`), as well as reads by `POST`.
    static func repeatable(_ method: HTTPRequest.Method, _ path: String, body: JSON?) -> Bool {
        switch method {
        case .get, .head, .put: return true
        case .post:
            let last = path.split(separator: "/").last ?? ""
            if last == "_bulk_docs" { return body?["new_edits"] == .bool(false) }
            return ["_all_docs", "_find", "_revs_diff", "_bulk_get", "_explain"].contains(last)
        default: return false
        }
    }

    /// The answer a `PUT` of `body` to `path` would have had, when the document there now is
    /// exactly `body` (its `_rev` aside); nil otherwise.
    func alreadyWritten(_ path: String, _ body: JSON) async -> CouchReply? {
        guard let stored = try? await request(.get, path, query: [:], body: nil), stored.status == 200,
            case var .object(found) = stored.json, case var .object(sent) = body,
            let rev = found["_rev"]?.stringValue
        else { return nil }
        for key in ["_id", "_rev"] {
            _ = found.removeValue(forKey: key)
            _ = sent.removeValue(forKey: key)
        }
        guard found == sent else { return nil }
        let id = stored.json["_id"] ?? .null
        return CouchReply(status: 201, body: JSON.object(["ok": true, "id": id, "rev": .string(rev)]).bytes)
    }

    public func verify(name: String, password: String) async throws -> (name: String, roles: [String])? {
        try await onSomeNode(readOnly: true) { try await $0.verify(name: name, password: password) }
    }

    /// Asks every node's `GET /_up` at once (on connections of the checks' own) and tells
    /// `health`: a node in maintenance mode or still being seeded is withdrawn, one answering
    /// 200 again is back. No answer changes nothing (requests find a node that is gone).
    public func checkNodes() async {
        await withTaskGroup(of: (Int, ClusterNodes.Check).self) { group in
            for (node, member) in members.enumerated() { group.addTask { (node, await member.server.upCheck()) } }
            for await (node, check) in group { health.checked(node, check) }
        }
    }

    /// `checkNodes` every `interval` until cancelled (HAProxy's checks in docs/deploying.md
    /// are every second; a node put into maintenance mode is left within `interval`).
    public func watchNodes(every interval: Duration = .seconds(2)) async {
        while !Task.isCancelled {
            await checkNodes()
            try? await Task.sleep(for: interval)
        }
    }

    func onSomeNode<T: Sendable>(
        readOnly: Bool, _ body: @escaping @Sendable (HTTPCouch) async throws -> T
    ) async throws -> T {
        // Alive: answers `/_up` at all (a node in maintenance mode still answers what it was sent).
        try await health.onSomeNode(
            readOnly: readOnly, isAlive: { [members] in await members[$0].server.upCheck() != .unanswered }
        ) { [members] in
            try await body(members[$0])
        }
    }

    /// The 503 for a write whose node failed while answering: it may have been applied.
    public static func cutOff(node: String, _ reason: String) -> CouchError {
        CouchError(
            status: 503, error: "service_unavailable",
            reason:
                "CouchDB node \(node) failed while answering (\(reason)); the write may or may not have been applied: read it back or try again"
        )
    }

    /// A failure of the way to a node rather than an answer from it: why, and whether the
    /// request cannot have reached it (no connection was made). Nil for anything else (an
    /// untrusted certificate, refused credentials, cancellation), which no other node would change.
    public static func transportFailure(_ error: any Error) -> (reason: String, beforeSending: Bool)? {
        switch error {
        case let error as CouchProtocolError:
            // A node that stopped answering; an untrusted certificate or refused credentials no
            // other node would change.
            return error.isStoppedAnswering ? (error.description, false) : nil
        case is CouchError, is CancellationError, is NIOTooManyBytesError:
            return nil  // an answer too large is the request's fault, not the node's
        case let error as HTTPClientError:
            if error == .cancelled { return nil }
            if error == .connectTimeout { return ("no connection within 2 s", true) }
            if error == .remoteConnectionClosed { return ("the connection was closed", false) }
            if error == .readTimeout || error == .deadlineExceeded { return ("no answer in time", false) }
            return ("the connection failed", false)
        case is NIOConnectionError:
            return ("connection refused", true)
        case let error as ChannelError:
            if case .connectTimeout = error { return ("no connection within 2 s", true) }
            return ("the connection failed", false)
        case let error as IOError:
            let reason = String(cString: strerror(error.errnoCode)).lowercased()
            return (reason, [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN].contains(error.errnoCode))
        default:
            // Whatever else the way there throws (a stream cut short...), said without socket details.
            let text = "\(error)"
            return (
                text.contains("unexpected time")
                    ? "the connection was closed while answering" : "the connection failed", false
            )
        }
    }
}
