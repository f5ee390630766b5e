import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LTTestSupport
import Logging
import Testing

/// The database listener's middleware chain (`CouchMiddleware.swift`) as one request meets it,
/// in process through Hummingbird's `.router` testing on a real store: what an outer step
/// reports of what an inner one found (the user for the access log, the body's time), and the
/// order of the steps (preflights before credentials, errors turned into answers inside the
/// headers and the JSONP wrapping, a method override before everything).
@Suite("CouchDB middleware")
struct CouchMiddlewareTests {
    /// A database API on a scratch directory, with an admin and an allowed CORS origin, whose
    /// log lines are kept.
    struct Server {
        let directory: TemporaryDirectory
        let api: CouchAPI
        let lines: LogLines
        let metrics = ServerMetrics()
        static let origin = "https://app.example"

        init() async throws {
            directory = try TemporaryDirectory("lt-middleware")
            lines = LogLines()
            let lines = lines
            let logger = Logger(label: "lt-middleware-test", factory: { _ in LogLines.Handler(lines: lines) })
            var settings = try ServerSettings.load(from: directory.url)
            settings.admins["admin"] = try await Passwords.hash("relax", iterations: 10)
            var options = CouchAPI.Options()
            options.corsOrigins = [Self.origin]
            options.pbkdf2Iterations = 10
            options.metrics = metrics
            api = CouchAPI(store: try DatabaseStore(directory: directory.url), settings: settings, options: options, logger: logger)
            try await api.prepareSystemDatabases()
        }

        func test(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            try await Application(responder: api.responder).test(.router, body)
        }
    }

    static let admin = "Basic " + Data("admin:relax".utf8).base64EncodedString()
    static var adminHeaders: HTTPFields { [.authorization: admin] }

    @Test("The access log line names the user the authentication step found and the request's own id; the answer carries that id, the body's time and the Server header")
    func accessLogSeesInnerSteps() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        try await server.test { client in
            var headers = Self.adminHeaders
            headers[HTTPField.Name("X-Couch-Request-ID")!] = "device-42.sync_7"
            try await client.execute(uri: "/places", method: .put, headers: headers) { response in
                #expect(response.status == .created)
                #expect(response.headers[HTTPField.Name("X-Couch-Request-ID")!] == "device-42.sync_7")
                #expect(response.headers[HTTPField.Name("X-CouchDB-Body-Time")!].flatMap(Int.init) != nil)
                #expect(response.headers[.server] == "CouchDB/3.4.3 (LocationTracker)")
            }
            headers[.authorization] = "Basic " + Data("admin:wrong".utf8).base64EncodedString()
            headers[HTTPField.Name("X-Couch-Request-ID")!] = nil
            let refused = try await client.execute(uri: "/places", method: .get, headers: headers) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.server] != nil)
                return response.headers[HTTPField.Name("X-Couch-Request-ID")!]
            }
            #expect(refused?.utf8.count == 10)
        }
        let created = try #require(server.lines.find { $0.message == "PUT /places 201" })
        #expect(created.metadata["user"] == "admin")
        #expect(created.metadata["request_id"] == "device-42.sync_7")
        #expect(created.metadata["listener"] == "database")
        let refused = try #require(server.lines.find { $0.message == "GET /places 401" })
        #expect(refused.metadata["user"] == nil)
    }

    @Test("Request times are labelled by the family the answering route names in the route table; a request no route answered is 'none'")
    func routeFamilies() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        let wrong: HTTPFields = [.authorization: "Basic " + Data("admin:wrong".utf8).base64EncodedString()]
        try await server.test { client in
            let asked: [(String, HTTPRequest.Method, HTTPFields, HTTPResponse.Status)] = [
                ("/fam", .put, Self.adminHeaders, .created), ("/fam/doc", .put, Self.adminHeaders, .created),
                ("/fam/_all_docs", .get, Self.adminHeaders, .ok), ("/fam/_changes", .get, Self.adminHeaders, .ok),
                ("/fam/_revs_diff", .post, Self.adminHeaders, .ok), ("/_up", .get, [:], .ok),
                ("/fam/doc", .get, wrong, .unauthorized),
            ]
            for (uri, method, headers, status) in asked {
                let body = method == .put || method == .post ? ByteBuffer(string: "{}") : nil
                try await client.execute(uri: uri, method: method, headers: headers, body: body) { response in
                    #expect(response.status == status, "\(method) \(uri)")
                }
            }
        }
        let samples = await server.metrics.samples()
        func count(_ family: String) -> Double {
            samples.filter { $0.name == HTTPMetric.requestDuration.rawValue + "_count" && $0.labels["family"] == family }.reduce(0) { $0 + $1.value }
        }
        #expect(count("database") == 1 && count("documents") == 1 && count("bulk") == 1 && count("changes") == 1)
        #expect(count("replication") == 1 && count("server") == 1 && count("none") == 1)
    }

    @Test("A CORS preflight is answered before credentials are asked for; a refused request still names the allowed origin")
    func preflightBeforeCredentials() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        try await server.test { client in
            var headers = HTTPFields()
            headers[.origin] = Server.origin
            headers[.accessControlRequestHeaders] = "authorization, content-type"
            headers[.authorization] = "Basic " + Data("admin:wrong".utf8).base64EncodedString()
            try await client.execute(uri: "/places/doc", method: .options, headers: headers) { response in
                #expect(response.status == .noContent)
                #expect(response.headers[.accessControlAllowOrigin] == Server.origin)
                #expect(response.headers[.accessControlAllowHeaders] == "authorization, content-type")
            }
            try await client.execute(uri: "/_all_dbs", method: .get, headers: headers) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.accessControlAllowOrigin] == Server.origin)
            }
            headers[.origin] = "https://elsewhere.example"
            try await client.execute(uri: "/places/doc", method: .options, headers: headers) { response in
                #expect(response.headers[.accessControlAllowOrigin] == nil)
            }
        }
    }

    @Test("With JSONP on, a failure is wrapped in the callback like any answer; a callback CouchDB refuses is a plain 400")
    func jsonpWrapsFailures() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        try await server.test { client in
            let headers = Self.adminHeaders
            try await client.execute(uri: "/_node/_local/_config/chttpd/allow_jsonp", method: .put, headers: headers,
                                     body: ByteBuffer(string: "\"true\"")) { #expect($0.status == .ok) }
            try await client.execute(uri: "/nowhere?callback=show", method: .get, headers: headers) { response in
                #expect(response.status == .notFound)
                #expect(response.headers[.contentType] == "application/javascript")
                // CouchDB 3.4.3's answer, byte for byte (`curl 'http://…/nowhere?callback=show'`).
                #expect(String(buffer: response.body) == "/* CouchDB */show({\"error\":\"not_found\",\"reason\":\"Database does not exist.\"});\n")
            }
            // An answer over a megabyte is wrapped as it streams, its length still told right.
            try await client.execute(uri: "/big", method: .put, headers: headers) { #expect($0.status == .created) }
            let text = String(repeating: "x", count: 1_200_000)
            try await client.execute(uri: "/big/doc", method: .put, headers: headers, body: ByteBuffer(string: "{\"text\":\"\(text)\"}")) {
                #expect($0.status == .created)
            }
            try await client.execute(uri: "/big/doc?callback=show", method: .get, headers: headers) { response in
                let body = String(buffer: response.body)
                #expect(body.hasPrefix("/* CouchDB */show({\"_id\":\"doc\"") && body.hasSuffix(");\n") && body.contains(text))
                #expect(response.headers[.contentLength] == String(response.body.readableBytes))
            }
            // A JSON attachment is not an answer of the API: sent as stored (CouchDB 3.4.3 the same).
            var attachment = headers
            attachment[.contentType] = "application/json"
            try await client.execute(uri: "/big/doc/a.json", method: .put, headers: attachment, body: ByteBuffer(string: "{\"x\":1}")) {
                #expect($0.status == .conflict, "no revision given")
            }
            try await client.execute(uri: "/big/withfile/a.json", method: .put, headers: attachment, body: ByteBuffer(string: "{\"x\":1}")) {
                #expect($0.status == .created)
            }
            try await client.execute(uri: "/big/withfile/a.json?callback=show", method: .get, headers: headers) { response in
                #expect(response.headers[.contentType] == "application/json" && String(buffer: response.body) == "{\"x\":1}")
            }
            try await client.execute(uri: "/?callback=al%28ert%29", method: .get, headers: headers) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                #expect(String(buffer: response.body).contains("invalid_callback"))
            }
        }
    }

    @Test("A POST with X-HTTP-Method-Override is the named method for every step after it, the access log included; HEAD answers have no body")
    func methodOverrideFirst() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        try await server.test { client in
            var headers = Self.adminHeaders
            headers[HTTPField.Name("X-HTTP-Method-Override")!] = "PUT"
            try await client.execute(uri: "/overridden", method: .post, headers: headers) { #expect($0.status == .created) }
            headers[HTTPField.Name("X-HTTP-Method-Override")!] = nil
            try await client.execute(uri: "/overridden", method: .head, headers: headers) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
            }
        }
        #expect(server.api.store.exists("overridden"))
        #expect(server.lines.find { $0.message == "PUT /overridden 201" }?.metadata["user"] == "admin")
    }

    @Test("The routes' own middleware: ids that are not UTF-8 refused on every route (a read finds nothing, a write is 400), names CouchDB refuses found nowhere")
    func routeMiddleware() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        try await server.test { client in
            let headers = Self.adminHeaders
            try await client.execute(uri: "/places", method: .put, headers: headers) { #expect($0.status == .created) }
            try await client.execute(uri: "/places/%FF%FE", method: .get, headers: headers) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/places/%FF%FE", method: .put, headers: headers, body: ByteBuffer(string: "{}")) { response in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("illegal_docid"))
            }
            try await client.execute(uri: "/_badname", method: .put, headers: headers) { response in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("illegal_database_name"))
            }
            try await client.execute(uri: "/_badname/doc", method: .get, headers: headers) { #expect($0.status == .notFound) }
            // No route at all: the database missing, or CouchDB's 405 for a method it does not route.
            try await client.execute(uri: "/absent/_design/d/_nothing", method: .get, headers: headers) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/places", method: HTTPRequest.Method("PROPFIND")!, headers: headers) { response in
                #expect(response.status == .methodNotAllowed)
            }
        }
    }
}

/// Log lines kept for a test to read.
final class LogLines: Sendable {
    struct Line: Sendable {
        let message: String
        let metadata: [String: String]
    }

    private let lines = Locked<[Line]>([])

    func find(_ matching: (Line) -> Bool) -> Line? { lines.withLock { $0.first(where: matching) } }

    struct Handler: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).merging(metadata) { new, _ in new }.mapValues { "\($0)" }
            lines.lines.withLock { $0.append(Line(message: "\(event.message)", metadata: fields)) }
        }
    }
}
