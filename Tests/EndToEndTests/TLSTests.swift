import AsyncHTTPClient
import CouchJSON
import CouchProtocol
import Foundation
import Geo
import LTTestSupport
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing
import TrackerKit

/// A certificate authority and server certificates made with openssl at test time, as an
/// operator makes a self-signed set-up (docs/deploying.md).
struct TestCertificates {
    let directory: TemporaryDirectory
    var path: String { directory.url.path }

    init() throws {
        directory = try TemporaryDirectory("lt-tls")
        try makeAuthority("ca")
        try makeServerCertificate("server", signedBy: "ca")
    }

    /// `NAME.pem` and `NAME.key`: a CA.
    func makeAuthority(_ name: String) throws {
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).pem", "-days", "2", "-subj", "/CN=lt test \(name)"])
    }

    /// `NAME.pem` and `NAME.key`: a certificate for localhost and 127.0.0.1 signed by the CA `authority`.
    func makeServerCertificate(_ name: String, signedBy authority: String) throws {
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=localhost"])
        try Data("subjectAltName=DNS:localhost,IP:127.0.0.1\n".utf8).write(to: directory.url.appendingPathComponent("san.cnf"))
        try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(authority).pem", "-CAkey", "\(authority).key", "-CAcreateserial",
                     "-out", "\(name).pem", "-days", "2", "-extfile", "san.cnf"])
    }

    func file(_ name: String) -> String { directory.url.appendingPathComponent(name).path }

    /// Runs `body` with an HTTP client for each CA of `authorities`, trusting it (and the
    /// system's), shut down after whatever happens.
    func withClients<T>(trusting authorities: [String], _ body: ([HTTPClient]) async throws -> T) async throws -> T {
        let clients = try authorities.map { try CouchHTTPClient.httpClient(trustingCAFile: file("\($0).pem")) }
        do {
            let result = try await body(clients)
            for client in clients { try await client.shutdown() }
            return result
        } catch {
            for client in clients { try? await client.shutdown() }
            throw error
        }
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = directory.url
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: ["openssl": arguments.joined(separator: " ")]) }
    }
}

/// `lt serve --tls-cert --tls-key`: both listeners over HTTPS, renewed on SIGHUP; the clients
/// (`lt replicate`, the server's replicator, cluster mode, TrackerKit) trusting a CA file.
@Suite("TLS", .serialized)
struct TLSTests {
    static func tlsArguments(_ certificates: TestCertificates, _ name: String = "server") -> [String] {
        ["--tls-cert", certificates.file("\(name).pem"), "--tls-key", certificates.file("\(name).key")]
    }

    static func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["curl", "-sS", "--max-time", "10"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("Both listeners answer over HTTPS with the certificate, verified against its CA by AsyncHTTPClient and curl; untrusted and plain HTTP get nowhere")
    func bothListeners() async throws {
        let certificates = try TestCertificates()
        defer { certificates.directory.cleanup() }
        let s = try TestServer(extraArguments: Self.tlsArguments(certificates))
        defer { s.stop() }
        try await certificates.withClients(trusting: ["ca"]) { clients in try await Self.bothListeners(s, certificates, trusting: clients[0]) }
    }

    static func bothListeners(_ s: TestServer, _ certificates: TestCertificates, trusting: HTTPClient) async throws {
        let welcome = try await s.request(.GET, "/", base: "https://127.0.0.1:\(s.port)", http: trusting)
        #expect(welcome.status == 200 && welcome.json["couchdb"] == "Welcome")
        let database = try await s.request(.PUT, "/tls-db", base: "https://localhost:\(s.port)", http: trusting)
        #expect(database.status == 201)
        let places = try await s.request(.GET, "/api/places?lat=37.33&lon=-122.03&radius=5000", auth: .none, base: "https://127.0.0.1:\(s.appPort)", http: trusting)
        #expect(places.status == 200, "\(places.text)")
        // The dashboard's session cookie is never sent in clear: Secure over the server's own TLS.
        let signIn = try await s.request(.POST, "/api/session", json: ["username": .string(TestServer.admin.0), "password": .string(TestServer.admin.1)],
                                         auth: .none, base: "https://127.0.0.1:\(s.appPort)", http: trusting)
        #expect(signIn.status == 200 && signIn.headers.first(name: "Set-Cookie")?.contains("Secure") == true, "\(signIn.headers)")

        // The system's CAs alone do not know this one: the handshake fails, nothing is answered.
        await #expect(throws: NIOSSLError.self) {
            _ = try await s.request(.GET, "/", base: "https://127.0.0.1:\(s.port)", http: CouchHTTPClient.shared)
        }
        let curlTrusting = try Self.curl(["--cacert", certificates.file("ca.pem"), "https://127.0.0.1:\(s.port)/_up"])
        #expect(curlTrusting.status == 0 && curlTrusting.output.contains(#""status":"ok""#), "\(curlTrusting)")
        #expect(try Self.curl(["https://127.0.0.1:\(s.appPort)/"]).status == 60)  // curl: peer certificate cannot be authenticated
        // Plain HTTP to a TLS listener: no answer, the connection closes.
        #expect(try Self.curl(["http://127.0.0.1:\(s.port)/"]).status != 0)
    }

    @Test("SIGHUP serves a renewed certificate to new connections while an open feed carries on; a broken renewal keeps the last good one")
    func renewalOnSIGHUP() async throws {
        let certificates = try TestCertificates()
        defer { certificates.directory.cleanup() }
        try certificates.makeAuthority("ca2")
        try certificates.makeServerCertificate("renewed", signedBy: "ca2")
        let s = try TestServer(extraArguments: Self.tlsArguments(certificates))
        defer { s.stop() }
        try await certificates.withClients(trusting: ["ca", "ca2", "ca", "ca2"]) { clients in
            try await Self.renewal(s, certificates, first: clients[0], second: clients[1], fresh: clients[2], again: clients[3])
        }
    }

    /// `first` and `fresh` trust the first CA, `second` and `again` the renewal's.
    static func renewal(_ s: TestServer, _ certificates: TestCertificates, first: HTTPClient, second: HTTPClient, fresh: HTTPClient, again: HTTPClient) async throws {
        let base = "https://127.0.0.1:\(s.port)"
        #expect(try await s.request(.PUT, "/feed", base: base, http: first).status == 201)
        await #expect(throws: NIOSSLError.self) { _ = try await s.request(.GET, "/", base: base, http: second) }

        // A longpoll feed on a connection made with the first certificate, across the renewal.
        let feed = Task {
            try await s.request(.GET, "/feed/_changes?feed=longpoll&since=now&timeout=60000", base: base, http: first)
        }
        try await Task.sleep(for: .milliseconds(300))
        for suffix in ["pem", "key"] {
            try FileManager.default.removeItem(atPath: certificates.file("server.\(suffix)"))
            try FileManager.default.copyItem(atPath: certificates.file("renewed.\(suffix)"), toPath: certificates.file("server.\(suffix)"))
        }
        kill(s.process.processIdentifier, SIGHUP)
        let renewed = try await eventually { (try? await s.request(.GET, "/", base: base, http: second))?.status == 200 }
        #expect(renewed, "the renewed certificate is not served after SIGHUP")
        // The first CA's client pools its connection: a new one with the first CA alone fails.
        await #expect(throws: NIOSSLError.self) { _ = try await s.request(.GET, "/", base: base, http: fresh) }
        #expect(try await s.request(.PUT, "/feed/after-renewal", json: ["n": 1], base: base, http: second).status == 201)
        let answer = try await feed.value
        #expect(answer.status == 200 && answer.json["results"]?[0]?["id"] == "after-renewal", "\(answer.text)")

        // A key that is not one: logged, and the renewed pair stays.
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: certificates.file("server.key")))
        kill(s.process.processIdentifier, SIGHUP)
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await s.request(.GET, "/_up", base: base, http: again).status == 200)
    }

    @Test("Without TLS, SIGHUP (systemctl reload) leaves the server running")
    func hangUpWithoutTLS() async throws {
        let s = try TestServer()
        defer { s.stop() }
        kill(s.process.processIdentifier, SIGHUP)
        try await Task.sleep(for: .milliseconds(300))
        #expect(s.process.isRunning)
        #expect(try await s.request(.GET, "/_up").status == 200)
    }

    @Test("A missing, unreadable, non-PEM or mismatched certificate or key, or half a pair, is a clear error at start that creates nothing")
    func badCertificates() throws {
        let certificates = try TestCertificates()
        defer { certificates.directory.cleanup() }
        try certificates.makeAuthority("other")
        try Data("subjectAltName=DNS:x\n".utf8).write(to: URL(fileURLWithPath: certificates.file("not-pem.txt")))
        let unreadable = certificates.file("unreadable.pem")
        try FileManager.default.copyItem(atPath: certificates.file("server.pem"), toPath: unreadable)
        try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: unreadable)
        let data = certificates.directory.url.appendingPathComponent("data")
        let cases: [([String], String)] = [
            (["--tls-cert", certificates.file("missing.pem"), "--tls-key", certificates.file("server.key")], "missing.pem does not exist"),
            (["--tls-cert", certificates.file("server.pem"), "--tls-key", certificates.file("other.key")], "does not belong to the certificate"),
            (["--tls-cert", certificates.file("not-pem.txt"), "--tls-key", certificates.file("server.key")], "is not a PEM certificate"),
            (["--tls-cert", certificates.file("server.pem"), "--tls-key", certificates.file("server.pem")], "is not an unencrypted PEM private key"),
            (["--tls-cert", certificates.file("server.pem")], "--tls-cert needs --tls-key"),
            (["--tls-key", certificates.file("server.key")], "--tls-key needs --tls-cert"),
            (["--ca-file", certificates.file("not-pem.txt")], "holds no PEM certificate"),
        ] + (getuid() == 0 ? [] : [(["--tls-cert", unreadable, "--tls-key", certificates.file("server.key")], "cannot be read")])
        for (arguments, message) in cases {
            let refused = try TestServer.runLT(["serve", "--data", data.path, "--db-port", "0", "--port", "0", "--admin", "a:b"] + arguments)
            #expect(refused.status != 0 && refused.errors.contains(message), "\(arguments): \(refused.errors)")
            #expect(!FileManager.default.fileExists(atPath: data.path), "\(arguments) created the data directory")
        }
    }

    @Test("lt replicate, the server's replicator, cluster mode and TrackerKit reach HTTPS peers whose CA they are given, and say why they cannot without it")
    func clientsTrustTheCAFile() async throws {
        let certificates = try TestCertificates()
        defer { certificates.directory.cleanup() }
        let secure = try TestServer(extraArguments: Self.tlsArguments(certificates))
        defer { secure.stop() }
        try await certificates.withClients(trusting: ["ca"]) { clients in try await Self.clients(secure, certificates, trusting: clients[0]) }
    }

    static func clients(_ secure: TestServer, _ certificates: TestCertificates, trusting: HTTPClient) async throws {
        let base = "https://127.0.0.1:\(secure.port)"
        #expect(try await secure.request(.PUT, "/source", base: base, http: trusting).status == 201)
        #expect(try await secure.request(.PUT, "/source/doc-1", json: ["a": 1], base: base, http: trusting).status == 201)
        let source = "https://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(secure.port)/source"

        // lt replicate: refused with the reason, then through --ca-file, then LT_CA_FILE-free
        // the other way with the option again.
        let local = try TemporaryDirectory("lt-tls-local")
        defer { local.cleanup() }
        let untrusted = try TestServer.runLT(["replicate", source, local.url.appendingPathComponent("copy").path, "--create-target"])
        #expect(untrusted.status != 0 && untrusted.errors.contains("does not verify") && untrusted.errors.contains("--ca-file"), "\(untrusted.errors)")
        let pulled = try TestServer.runLT(["replicate", source, local.url.appendingPathComponent("copy").path, "--create-target",
                                           "--ca-file", certificates.file("ca.pem")])
        #expect(pulled.status == 0 && pulled.output.contains("1 written"), "\(pulled.output) \(pulled.errors)")
        // No stray directory left in the local one (there used to be an empty creating/).
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: local.url.path)) == [".lock", "dbs"])

        // A server's replicator without the CA: refused at once (not retried as an outage), with the reason.
        let refusedPull = try await secure.request(.POST, "/_replicate", json: ["source": .string(source), "target": "copy", "create_target": true],
                                                   timeout: .seconds(30), base: base, http: trusting)
        #expect(refusedPull.status == 500 && refusedPull.json["reason"]?.stringValue?.contains("--ca-file") == true, "\(refusedPull.text)")
        // The replicator of a plain server started with --ca-file pulls from the HTTPS one.
        let plain = try TestServer(extraArguments: ["--ca-file", certificates.file("ca.pem")])
        defer { plain.stop() }
        let replicated = try await plain.request(.POST, "/_replicate", json: ["source": .string(source), "target": "copy", "create_target": true])
        #expect(replicated.status == 200 && replicated.json["ok"] == true, "\(replicated.text)")
        #expect(try await plain.request(.GET, "/copy/doc-1").json["a"] == 1)

        // Cluster mode in front of an HTTPS CouchDB-API node: refused without its CA, at start.
        let node = try TestServer(databaseOnly: true, extraArguments: Self.tlsArguments(certificates))
        defer { node.stop() }
        let nodeURL = "https://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(node.port)"
        let refused = try TestServer.runLT(["serve", "--data", local.url.appendingPathComponent("front").path, "--db-port", "0", "--port", "0",
                                            "--admin", "a:b", "--couchdb", nodeURL])
        #expect(refused.status != 0 && refused.errors.contains("does not verify"), "\(refused.errors)")
        let front = try TestServer(extraArguments: ["--couchdb", nodeURL, "--ca-file", certificates.file("ca.pem")])
        defer { front.stop() }
        #expect(try await front.app(.PUT, "/api/users/tls-user", json: ["password": "pw-tls-user"]).status == 201)
        #expect(try await node.request(.GET, "/lt_users/tls-user", base: "https://127.0.0.1:\(node.port)", http: trusting).status == 200)

        // TrackerKit: a device app gives its client the CA; the login names the database API
        // over https, and the device's locations sync there through the same client.
        let device = TrackerClient(baseURL: "https://127.0.0.1:\(secure.appPort)", http: trusting)
        try await device.register(username: "tls-device", password: "pw-tls-device")
        let credentials = try await device.login(username: "tls-device", password: "pw-tls-device", device: "test")
        #expect(credentials.username == "tls-device" && credentials.serverDatabase.url.hasPrefix("https://"), "\(credentials.serverDatabase.url)")
        let store = try LocalStore(directory: local.url.appendingPathComponent("device"))
        for i in 0..<3 {
            try await store.save(LocationDoc(coordinate: Coordinate(lon: -122.3 + Double(i) * 1e-3, lat: 37.49), timestamp: 1_700_000_000_000 + Double(i) * 60_000,
                                             username: "tls-device", background: false, sessionID: "tls"))
        }
        // lt device: registers and syncs with --ca-file; refused without it.
        let state = local.url.appendingPathComponent("phone").path
        let account = ["--server", "https://127.0.0.1:\(secure.appPort)", "--state", state, "--username", "tls-cli", "--password", "pw-tls-cli"]
        let unverified = try TestServer.runLT(["device", "register"] + account)
        #expect(unverified.status != 0 && unverified.errors.contains("--ca-file"), "\(unverified.errors)")
        #expect(try TestServer.runLT(["device", "register"] + account + ["--ca-file", certificates.file("ca.pem")]).status == 0)
        let synced = try TestServer.runLT(["device", "sync", "--state", state, "--ca-file", certificates.file("ca.pem")])
        #expect(synced.status == 0, "\(synced.errors)")

        let sync = SyncManager(local: store, server: credentials.serverDatabase, http: device.http)
        await sync.pushNow()
        let pushed = try await secure.request(.GET, "/\(credentials.databaseName)/_all_docs", base: base, http: trusting)
        let locations = pushed.json["rows"]?.arrayValue?.filter { $0["id"]?.stringValue?.hasPrefix("_design/") == false }
        #expect(locations?.count == 3, "\(pushed.text)")
    }
}
