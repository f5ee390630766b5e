import CouchEngine
import CouchJSON
import CouchProtocol
import HTTPServing
import CouchServer
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import LTServer
import NIOCore
import TrackerApp

/// The request handlers end to end, without sockets: one database API, one application API and
/// the control socket's routes over real SQLite files in a temporary directory, fed raw requests:
///
///     METHOD TARGET
///     Header: value
///     …
///     (empty line)
///     body
///
/// A request that does not finish within 2 s (a long poll, a continuous feed) is cancelled.
/// Findings: a crash, a 500 (other than JavaScript missing), an error that is not a CouchDB
/// `{"error","reason"}` object.
final class HTTPHarness: @unchecked Sendable {
    static let shared = HTTPHarness()
    let api: CouchAPI
    let app: RouterResponder<ClientRequestContext>
    /// The data directory's control socket routes (`lt backup`, `lt doctor`), without the socket.
    let control: RouterResponder<ClientRequestContext>
    let directory: URL
    static let admin = ("admin", "fuzz-password")

    init() {
        let logger = Logger(label: "lt-fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("lt-fuzz-\(getpid())")
        do {
            let store = try DatabaseStore(
                directory: directory.appendingPathComponent("data"),
                connections: { name in
                    name.hasPrefix("lt_locations_user_") ? .single : .pool
                })
            var settings = try ServerSettings.load(from: directory)
            // Few iterations: the fuzzer should spend its time on requests, not on PBKDF2.
            settings.admins[Self.admin.0] = try HTTPHarness.wait {
                try await Passwords.hash(Self.admin.1, iterations: 2)
            }
            var options = CouchAPI.Options()
            options.pbkdf2Iterations = 2
            options.maxBodySize = 1 << 20
            // The fuzzer mutates passwords: with the usual throttle its own failures would soon
            // keep it out of every authenticated route (issue 40), which it is here to reach.
            var policy = LoginThrottle.Policy()
            (policy.freePerAccountAndClient, policy.freePerClient, policy.freePerAccount) = (1 << 40, 1 << 40, 1 << 40)
            options.loginThrottle = LoginThrottle(policy: policy)
            let api = CouchAPI(store: store, settings: settings, options: options, logger: logger)
            self.api = api
            try HTTPHarness.wait { try await api.prepareSystemDatabases() }
            try settings.save(to: directory)
            control = ControlSocket.router(directory: directory, store: store, api: api, logger: logger)
                .buildResponder()
            let service = TrackerService(
                couch: InProcessCouch(api: api), passwordIterations: 2, throttle: options.loginThrottle, logger: logger)
            try HTTPHarness.wait {
                try await service.prepare(places: [
                    [
                        "_id": "place-a", "type": "Feature", "name": "A",
                        "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]],
                    ]
                ])
            }
            var limits = AppLimits()
            limits.maxBodySize = 64 * 1024
            limits.registrationsPerHour = 1 << 40
            app = TrackerHTTP(service: service, limits: limits, databasePort: { 5984 }).responder
            _ = try HTTPHarness.wait {
                try await service.register(username: "fuzzer", password: JSON.string("fuzz-password"))
            }
        } catch {
            FileHandle.standardError.write(
                Data("lt-fuzz: cannot set up the server in \(directory.path): \(error)\n".utf8))
            exit(2)
        }
    }

    /// Runs async work from the fuzzer's synchronous callback.
    static func wait<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let value = try await work()
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// The request in `bytes`, or nil when its first line is not `METHOD TARGET`.
    static func request(_ bytes: [UInt8]) -> Request? {
        var end = bytes.endIndex, bodyStart = bytes.endIndex
        for i in bytes.indices where bytes[i] == 10 {
            if i + 1 < bytes.endIndex, bytes[i + 1] == 10 { end = i; bodyStart = i + 2; break }
            if i + 2 < bytes.endIndex, bytes[i + 1] == 13, bytes[i + 2] == 10 { end = i; bodyStart = i + 3; break }
        }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\n").map {
            $0.hasSuffix("\r") ? $0.dropLast() : $0
        }
        guard let first = lines.first else { return nil }
        let words = first.split(separator: " ", maxSplits: 1)
        guard words.count == 2, let method = HTTPRequest.Method(String(words[0])), words[1].hasPrefix("/") else {
            return nil
        }
        var head = HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1", path: String(words[1]))
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else {
                continue
            }
            head.headerFields.append(
                HTTPField(name: name, value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let body = Array(bytes[min(bodyStart, bytes.endIndex)...])
        return Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body)))
    }

    func database(_ bytes: [UInt8]) {
        guard let request = HTTPHarness.request(bytes) else { return }
        let api = self.api
        check(request) { await api.respond(to: request, peer: "127.0.0.1") }
    }

    func application(_ bytes: [UInt8]) {
        guard let request = HTTPHarness.request(bytes) else { return }
        let app = self.app
        let context = ClientRequestContext(
            peerAddress: "127.0.0.1", logger: Logger(label: "lt-fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))
        // The routes' middleware answers every failure: a thrown error is a finding (a 500 without JSON).
        check(request) {
            (try? await app.respond(to: request, context: context)) ?? Response(status: .internalServerError)
        }
    }

    func controlSocket(_ bytes: [UInt8]) {
        guard let request = HTTPHarness.request(bytes) else { return }
        let control = self.control
        let context = ClientRequestContext(
            peerAddress: nil, logger: Logger(label: "lt-fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))
        check(request) {
            (try? await control.respond(to: request, context: context)) ?? Response(status: .internalServerError)
        }
    }

    /// Answers the request (cancelled after 2 s) and checks the answer.
    func check(_ request: Request, _ respond: @escaping @Sendable () async -> Response) {
        let answer = Locked<(status: Int, contentType: String?, body: [UInt8])?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            let response = await respond()
            let sink = Sink()
            try? await response.body.write(sink)
            answer.withLock {
                $0 = (Int(response.status.code), response.headers[.contentType], sink.bytes.withLock { $0 })
            }
            done.signal()
        }
        if done.wait(timeout: .now() + 2) == .timedOut {
            task.cancel()
            done.wait()
        }
        guard let (status, contentType, body) = answer.withLock({ $0 }), !task.isCancelled else { return }
        let description =
            "\(request.method) \(request.uri): \(status) \(String(decoding: body.prefix(300), as: UTF8.self))"
        if status >= 400, contentType?.hasPrefix("application/json") == true {
            guard let json = try? JSON.parse(body), json["error"]?.stringValue != nil else {
                Harness.finding("an error that is not {\"error\",\"reason\"}: \(description)")
            }
            if status == 500, json["error"] != "javascript_unavailable" { Harness.finding("500: \(description)") }
        } else if status == 500 {
            Harness.finding("500 without a JSON error: \(description)")
        }
    }
}

/// Collects a response body.
final class Sink: ResponseBodyWriter, Sendable {
    let bytes = Locked<[UInt8]>([])
    func write(_ buffer: ByteBuffer) async throws { bytes.withLock { $0 += Array(buffer: buffer) } }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
