public import AsyncHTTPClient
public import CouchJSON
public import Foundation
public import NIOCore
public import NIOHTTP1

/// A real `lt serve` process on ephemeral ports with its own data directory.
public final class TestServer: @unchecked Sendable {
    public let process = Process()
    public let dataDirectory: URL
    public let ownsDirectory: Bool
    public private(set) var port = 0
    public private(set) var appPort = 0
    /// The server admin of every `lt serve` the tests start. With LT_TEST_COUCHDB_URL, the real
    /// CouchDB's admin: requests passed through to that cluster then authenticate there too
    /// (CouchDB locks out a name after a few wrong passwords).
    public static let admin: (String, String) = LiveCouchDB.isSet ? (LiveCouchDB.endpoint.user, LiveCouchDB.endpoint.password) : ("admin", "s3cr3t-pw")

    /// The `lt` binary built next to the test bundle (or `LT_BINARY`).
    public static var binary: URL { LTBinary.url }

    /// Starts a server; `ports` (database, application) reuses known ports, as a restart does.
    /// In cluster mode: the stand-in cluster the application keeps its data in (`port` is its).
    public private(set) var cluster: TestServer?

    /// Cluster mode: a stand-in cluster (`lt serve --database-only`) and an application server
    /// in front of it; `appPort` is the application's, `port` where devices replicate (and
    /// tests talk to): the cluster's, or with `--mode single-db` this server's own, the owners'
    /// way into the shared database (other requests to it pass through to the cluster).
    public convenience init(cluster: Bool, extraArguments: [String] = []) throws {
        guard cluster else {
            try self.init(extraArguments: extraArguments)
            return
        }
        let stand = try TestServer.clusterStandIn()
        do {
            try self.init(extraArguments: ["--couchdb", stand.adminURL] + extraArguments)
        } catch {
            stand.stop()
            throw error
        }
        self.cluster = stand
        if !extraArguments.contains("single-db") { port = stand.port }
    }

    /// The credentials `.admin` requests carry: this server's admin, or a real CouchDB's.
    public private(set) var credentials = TestServer.admin

    /// This server's address with its admin credentials, as `lt serve --couchdb` takes it.
    public var adminURL: String { "http://\(credentials.0):\(credentials.1)@127.0.0.1:\(port)" }

    /// The cluster cluster-mode tests keep their data in: a stand-in (`lt serve
    /// --database-only`), or with LT_TEST_COUCHDB_URL that real CouchDB, emptied first of
    /// every database but the system ones and of every user (it must be a throwaway
    /// instance; docs/compatibility.md).
    public static func clusterStandIn() throws -> TestServer {
        guard LiveCouchDB.isSet else { return try TestServer(databaseOnly: true) }
        return try TestServer(externalCouchDB: LiveCouchDB.endpoint)
    }

    /// A CouchDB this test does not run (no process, no data directory of ours), emptied.
    public init(externalCouchDB endpoint: (base: String, user: String, password: String)) throws {
        dataDirectory = FileManager.default.temporaryDirectory
        ownsDirectory = false
        credentials = (endpoint.user, endpoint.password)
        port = URLComponents(string: endpoint.base)?.port ?? 5984
        let base = endpoint.base
        try Self.wait { try await self.empty(base: base) }
    }

    /// Deletes every non-system database and every `_users`/`_replicator` document.
    public func empty(base: String) async throws {
        for db in try await request(.GET, "/_all_dbs", base: base).json.arrayValue ?? [] {
            guard let name = db.stringValue, !name.hasPrefix("_") else { continue }
            _ = try await request(.DELETE, "/" + (name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name), base: base)
        }
        for db in ["_users", "_replicator"] {
            let rows = try await request(.GET, "/\(db)/_all_docs", base: base).json["rows"]?.arrayValue ?? []
            let gone: [JSON] = rows.compactMap { row in
                guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/"), let rev = row["value"]?["rev"] else { return nil }
                return ["_id": .string(id), "_rev": rev, "_deleted": true]
            }
            if !gone.isEmpty { _ = try await request(.POST, "/\(db)/_bulk_docs", json: ["docs": .array(gone)], base: base) }
        }
    }

    /// Waits for async work from a synchronous context (setting up a cluster in an initializer).
    public static func wait(_ work: @escaping @Sendable () async throws -> Void) throws {
        final class Outcome: @unchecked Sendable { var error: (any Error)? }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Task {
            do { try await work() } catch { outcome.error = error }
            done.signal()
        }
        done.wait()
        if let error = outcome.error { throw error }
    }

    /// `databaseOnly`: `lt serve --database-only` (a CouchDB stand-in; no application port).
    /// `logFile`: where the server's standard error (its log) goes; nowhere by default.
    public init(dataDirectory: URL? = nil, ports: (database: Int, app: Int)? = nil, databaseOnly: Bool = false, extraArguments: [String] = [],
                logFile: URL? = nil) throws {
        if let dataDirectory {
            self.dataDirectory = dataDirectory
            ownsDirectory = false
        } else {
            self.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("lt-srv-\(UUID().uuidString)")
            ownsDirectory = true
        }
        process.executableURL = Self.binary
        process.arguments = ["serve", "--data", self.dataDirectory.path, "--db-port", "\(ports?.database ?? 0)", "--port", "\(ports?.app ?? 0)",
                             "--admin", "\(Self.admin.0):\(Self.admin.1)", "--log-level", "warning"] + (databaseOnly ? ["--database-only"] : []) + extraArguments
        let output = Pipe()
        process.standardOutput = output
        if let logFile {
            guard FileManager.default.createFile(atPath: logFile.path, contents: nil) else { throw TestServerError.didNotStart }
            process.standardError = try FileHandle(forWritingTo: logFile)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        // Read the announced ports.
        var buffer = ""
        let deadline = Date().addingTimeInterval(30)
        while (port == 0 || (appPort == 0 && !databaseOnly)) && Date() < deadline {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            buffer += String(decoding: data, as: UTF8.self)
            for line in buffer.split(separator: "\n") {
                if let p = line.split(separator: ":").last.flatMap({ Int($0) }) {
                    if line.contains("database API") { port = p }
                    if line.contains("application API") { appPort = p }
                }
            }
        }
        guard port != 0 else {
            process.terminate()
            throw TestServerError.didNotStart
        }
    }

    public enum TestServerError: Error, Sendable { case didNotStart }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// A server a test forgot to stop never outlives it.
    deinit { stop() }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        if ownsDirectory { try? FileManager.default.removeItem(at: dataDirectory) }
        cluster?.stop()
    }

    /// SIGKILL, no chance to flush anything.
    public func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    public struct Reply: Sendable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: [UInt8]
        public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }
        public var json: JSON { (try? JSON.parse(body)) ?? .null }
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public enum Auth: Sendable { case admin, none, basic(String, String), cookie(String) }

    /// One request to the application port (no credentials unless given).
    public func app(_ method: HTTPMethod, _ path: String, json: JSON? = nil, auth: Auth = .none) async throws -> Reply {
        try await request(method, path, json: json, auth: auth, base: "http://127.0.0.1:\(appPort)")
    }

    /// One HTTP request; `body` may be JSON or raw bytes.
    public func request(
        _ method: HTTPMethod, _ path: String, json: JSON? = nil, body: [UInt8]? = nil, auth: Auth = .admin,
        headers: [(String, String)] = [], timeout: TimeAmount = .seconds(60), base: String? = nil, http: HTTPClient = .shared
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: (base ?? baseURL) + path)
        request.method = method
        switch auth {
        case .admin: request.headers.add(name: "Authorization", value: Self.basic(credentials.0, credentials.1))
        case let .basic(name, password): request.headers.add(name: "Authorization", value: Self.basic(name, password))
        case let .cookie(value): request.headers.add(name: "Cookie", value: value)
        case .none: break
        }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: json.bytes))
        } else if let body {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        let response = try await http.execute(request, timeout: timeout)
        let collected = try await response.body.collect(upTo: 64 * 1024 * 1024)
        return Reply(status: Int(response.status.code), headers: response.headers, body: Array(buffer: collected))
    }

    /// Runs the lt binary (a CLI command, or a server expected to refuse to start); its exit
    /// status, standard output and standard error. `environment`: variables to add to this process's.
    public static func runLT(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, errors: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let output = Pipe()
        // Standard error goes to a file, so a full pipe can never stall the command.
        let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("lt-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let errors = try FileHandle(forWritingTo: errorFile)
        defer { try? errors.close() }
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let errorText = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
        return (process.terminationStatus, String(decoding: data, as: UTF8.self), errorText)
    }

    /// `lt device register` against this server: a device in `state` for `username`, whose
    /// password is `pw-<username>`; the command's exit status.
    public func registerDevice(state: String, username: String) throws -> Int32 {
        try TestServer.runLT(["device", "register", "--server", "http://127.0.0.1:\(appPort)", "--state", state,
                              "--username", username, "--password", "pw-\(username)"]).status
    }

    public static func basic(_ name: String, _ password: String) -> String {
        "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
    }
}

extension Array where Element == UInt8 {
    /// True when `needle` occurs somewhere in these bytes.
    public func containsBytes(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] && Array(self[start..<(start + needle.count)]) == needle {
            return true
        }
        return false
    }
}
