import ArgumentParser
import AsyncHTTPClient
import CommandSupport
import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// `lt-bench tls`: what HTTPS costs. The same requests against `lt serve` over plain HTTP and
/// over TLS (`--tls-cert`, a P-256 certificate made with openssl for the run), each server its
/// own process started in turn, the same HTTP client (AsyncHTTPClient) for both; rounds
/// alternate between the two and each figure is the median of its rounds.
struct TLSBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "What HTTPS costs: the same requests over HTTP and over TLS, side by side.",
        discussion: "Needs openssl on the PATH (for the run's certificate).")

    @Option(help: "Small GETs per round over kept-alive connections.")
    var requests = 20_000

    @Option(help: "Requests per round each on a new connection (a TLS handshake each over HTTPS).")
    var handshakes = 2_000

    @Option(help: "Rounds per server (alternating); each figure is the median.")
    var rounds = 3

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (1...10_000_000).contains(requests), (1...1_000_000).contains(handshakes), (1...20).contains(rounds)
        else {
            throw ValidationError("--requests 1…10,000,000, --handshakes 1…1,000,000, --rounds 1…20")
        }
    }

    /// One figure of one round: requests a second and the server's CPU per request.
    struct Figure {
        var rate: Double
        var cpuMillisecondsPerRequest: Double
    }

    static let figures = [
        "GET a document, kept-alive connections, 8 at once",
        "GET a document, a new connection each, 4 at once",
        "_all_docs?include_docs=true of 2,000 documents, 2 at once",
    ]

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("lt-bench-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try Self.makeCertificate(in: scratch)
        let http = try CouchHTTPClient.httpClient(trustingCAFile: scratch.appendingPathComponent("ca.pem").path)
        do {
            try await measure(scratch, http)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private func measure(_ scratch: URL, _ http: HTTPClient) async throws {
        let binary = lt.executable
        let admin = (user: "bench", password: "bench-password")
        let tls = [
            "--tls-cert", scratch.appendingPathComponent("server.pem").path, "--tls-key",
            scratch.appendingPathComponent("server.key").path,
        ]
        print(
            "lt-bench tls: \(requests) kept-alive GETs, \(handshakes) new connections, \(rounds) rounds per server; \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(Self.loadAverage())"
        )
        var results: [String: [[Figure]]] = ["http": [], "https": []]
        for round in 1...rounds {
            for scheme in ["http", "https"] {
                let server = try await LTServeProcess.start(
                    binary: binary, directory: scratch.appendingPathComponent("\(scheme)-\(round)"), admin: admin,
                    arguments: ["--database-only"] + (scheme == "https" ? tls : []))
                defer { server.stop() }
                let base = "\(scheme)://127.0.0.1:\(server.port)"
                let authorization = "Basic " + Data("\(admin.user):\(admin.password)".utf8).base64EncodedString()
                results[scheme, default: []].append(try await rounds(base, authorization, http, pid: server.pid))
                FileHandle.standardError.write(Data("  round \(round) \(scheme) done\n".utf8))
            }
        }
        print(
            "figure".padding(toLength: 60, withPad: " ", startingAt: 0)
                + "        http       https   https/http   CPU ms/request http → https")
        for (index, name) in Self.figures.enumerated() {
            func median(_ scheme: String, _ value: (Figure) -> Double) -> Double {
                let sorted = results[scheme, default: []].map { value($0[index]) }.sorted()
                return sorted[sorted.count / 2]
            }
            let (plain, secure) = (median("http", \.rate), median("https", \.rate))
            print(
                name.padding(toLength: 60, withPad: " ", startingAt: 0)
                    + String(
                        format: " %11.0f %11.0f %11.2f×   %.3f → %.3f", plain, secure, secure / plain,
                        median("http", \.cpuMillisecondsPerRequest), median("https", \.cpuMillisecondsPerRequest)))
        }
    }

    /// The three figures against one server.
    private func rounds(
        _ base: String, _ authorization: String, _ http: HTTPClient, pid: Int32
    ) async throws -> [Figure] {
        @Sendable func send(
            _ method: HTTPMethod, _ path: String, _ body: JSON? = nil, close: Bool = false
        ) async throws -> Int {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            request.headers.add(name: "Authorization", value: authorization)
            if close { request.headers.add(name: "Connection", value: "close") }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body.bytes))
            }
            let response = try await http.execute(request, timeout: .seconds(60))
            let collected = try await response.body.collect(upTo: 256 << 20)
            guard (200..<300).contains(response.status.code) else {
                throw ValidationError(
                    "\(method) \(path): \(response.status.code) \(String(buffer: collected).prefix(200))")
            }
            return collected.readableBytes
        }
        _ = try await send(.PUT, "/tls-bench")
        let docs = JSON.object(["docs": .array((0..<2_000).map(Bench.locationDocument))])
        _ = try await send(.POST, "/tls-bench/_bulk_docs", docs)
        _ = try await send(.PUT, "/tls-bench/probe", ["type": "probe", "n": 1])
        /// `count` requests by `concurrency` tasks; the rate and the server's CPU per request.
        func timed(
            _ count: Int, concurrency: Int, _ body: @escaping @Sendable () async throws -> Void
        ) async throws -> Figure {
            let cpuBefore = ServerProcessInfo.cpuSeconds(pid) ?? 0
            let start = ContinuousClock.now
            let next = Locked(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        while next.withLock({ value -> Bool in
                            defer { value += 1 }
                            return value < count
                        }) {
                            try await body()
                        }
                    }
                }
                try await group.waitForAll()
            }
            let seconds = start.duration(to: .now).seconds
            let cpu = (ServerProcessInfo.cpuSeconds(pid) ?? 0) - cpuBefore
            return Figure(rate: Double(count) / seconds, cpuMillisecondsPerRequest: cpu * 1000 / Double(count))
        }
        _ = try await timed(500, concurrency: 8) { _ = try await send(.GET, "/tls-bench/probe") }  // warm-up
        let kept = try await timed(requests, concurrency: 8) { _ = try await send(.GET, "/tls-bench/probe") }
        let fresh = try await timed(handshakes, concurrency: 4) {
            _ = try await send(.GET, "/tls-bench/probe", close: true)
        }
        let bulk = try await timed(40, concurrency: 2) {
            _ = try await send(.GET, "/tls-bench/_all_docs?include_docs=true")
        }
        return [kept, fresh, bulk]
    }

    /// A CA and a server certificate for 127.0.0.1 signed by it (`ca.pem`, `server.pem`, `server.key`).
    static func makeCertificate(in directory: URL) throws {
        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + arguments
            process.currentDirectoryURL = directory
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do { try process.run() } catch {
                throw ValidationError("cannot run openssl (install it: apt-get install openssl): \(error)")
            }
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw ValidationError("openssl \(arguments.joined(separator: " ")) failed")
            }
        }
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try openssl(
            ["req", "-x509"] + curve + [
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=lt-bench CA",
            ])
        try openssl(["req"] + curve + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"])
        try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: directory.appendingPathComponent("san.cnf"))
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "1", "-extfile", "san.cnf",
        ])
    }

    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(
            separator: " ")
    }
}
