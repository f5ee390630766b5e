import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `--log-format json`, the access log on both listeners, and secrets kept out of every line.
@Suite("Logs")
struct LoggingTests {
    static func lines(_ file: URL) throws -> [String] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test("A debug-level JSON log: every line an object, one access line per request with its id, and no password, API secret, cookie or Authorization anywhere")
    func jsonLinesWithoutSecrets() async throws {
        let directory = try TemporaryDirectory("lt-logs")
        defer { directory.cleanup() }
        let log = directory.url.appendingPathComponent("serve.log")
        let s = try TestServer(extraArguments: ["--log-level", "debug", "--log-format", "json"], logFile: log)
        defer { s.stop() }
        let adminPassword = TestServer.admin.1

        // The admin, by Basic credentials and by a CouchDB session cookie; a secret in a query.
        let listed = try await s.request(.GET, "/_all_dbs?password=query-secret-4711")
        #expect(listed.status == 200)
        let requestID = try #require(listed.headers.first(name: "X-Couch-Request-ID"))
        let session = try await s.request(.POST, "/_session", json: ["name": .string(TestServer.admin.0), "password": .string(adminPassword)], auth: .none)
        let cookie = try #require(session.headers.first(name: "Set-Cookie")?.split(separator: ";").first.map(String.init))
        #expect(try await s.request(.GET, "/_session", auth: .cookie(cookie)).json["userCtx"]?["name"] == .string(TestServer.admin.0))
        // A user registered, logged in (an API key and its secret), writing with the key.
        #expect(try await s.app(.PUT, "/api/users/carol", json: ["password": "carol-pw-8812"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "carol", "password": "carol-pw-8812"]).json
        let key = try #require(login["api_key"]?.stringValue), secret = try #require(login["api_password"]?.stringValue)
        let database = try #require(login["location_db_name"]?.stringValue)
        #expect(try await s.request(.PUT, "/\(database)/spot", json: ["type": "Feature", "n": 1], auth: .basic(key, secret)).status == 201)
        // The dashboard's sign-in cookie; a wrong password; a _users document with a plain one.
        let signIn = try await s.app(.POST, "/api/session", json: ["username": "carol", "password": "carol-pw-8812"])
        let dashboardCookie = try #require(signIn.headers.first(name: "Set-Cookie")?.split(separator: ";").first.map(String.init))
        #expect(try await s.app(.GET, "/api/session", auth: .cookie(dashboardCookie)).json["name"] == "carol")
        #expect(try await s.app(.POST, "/api/login", json: ["username": "carol", "password": "wrong-pw-3391"]).status == 401)
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:dave",
                                    json: ["name": "dave", "type": "user", "roles": [], "password": "dave-pw-6620"]).status == 201)
        s.stop()

        let lines = try Self.lines(log)
        #expect(lines.count > 10)
        var objects: [JSON] = []
        for line in lines {
            let object = try? JSON.parse(Array(line.utf8))
            #expect(object?.objectValue != nil && object?["time"]?.stringValue != nil && object?["level"]?.stringValue != nil
                    && object?["message"]?.stringValue != nil, "not a log object: \(line)")
            if let object { objects.append(object) }
        }
        // The admin's listing: its own line, with the id its answer carried, the path without the query.
        let line = objects.first { $0["request_id"]?.stringValue == requestID }
        #expect(line?["listener"] == "database" && line?["method"] == "GET" && line?["path"] == "/_all_dbs" && line?["status"] == 200
                && line?["user"] == .string(TestServer.admin.0) && line?["level"] == "info" && line?["duration_ms"]?.doubleValue != nil,
                "\(String(describing: line))")
        #expect(objects.contains { $0["listener"] == "database" && $0["path"] == .string("/\(database)/spot") && $0["user"] == .string(key) && $0["status"] == 201 })
        #expect(objects.contains { $0["listener"] == "application" && $0["path"] == "/api/login" && $0["status"] == 401 && $0["level"] == "info" })

        let text = lines.joined(separator: "\n")
        let secrets = [
            adminPassword, "carol-pw-8812", secret, "wrong-pw-3391", "dave-pw-6620", "query-secret-4711",
            String(cookie.drop { $0 != "=" }.dropFirst()), String(dashboardCookie.drop { $0 != "=" }.dropFirst()),
            Data("\(TestServer.admin.0):\(adminPassword)".utf8).base64EncodedString(), Data("\(key):\(secret)".utf8).base64EncodedString(),
        ]
        for secret in secrets {
            #expect(!secret.isEmpty && !text.contains(secret), "the log holds a secret: \(secret)")
        }
    }

    @Test("Text logs carry the access line at info level; --access-log off leaves it out")
    func accessLogSwitch() async throws {
        let directory = try TemporaryDirectory("lt-logs")
        defer { directory.cleanup() }
        for enabled in [true, false] {
            let log = directory.url.appendingPathComponent("serve-\(enabled).log")
            let s = try TestServer(extraArguments: ["--log-level", "info"] + (enabled ? [] : ["--access-log", "off"]), logFile: log)
            let answer = try await s.request(.GET, "/_up")
            let app = try await s.app(.GET, "/api/places?lat=37.33&lon=-122.03&radius=1000")
            s.stop()
            let id = try #require(answer.headers.first(name: "X-Couch-Request-ID"))
            let appID = try #require(app.headers.first(name: "X-Request-ID"))
            let text = try Self.lines(log).joined(separator: "\n")
            #expect(text.contains("GET /_up 200") == enabled && text.contains(id) == enabled, "\(text)")
            #expect(text.contains("GET /api/places 200") == enabled && text.contains(appID) == enabled, "\(text)")
        }
        let refused = try TestServer.runLT(["serve", "--data", directory.url.appendingPathComponent("x").path, "--log-format", "xml"])
        #expect(refused.status != 0 && refused.errors.contains("--log-format must be text or json"))
    }
}
