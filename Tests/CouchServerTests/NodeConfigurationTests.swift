import AsyncHTTPClient
import CouchJSON
import Foundation
import NIOHTTP1
import LTTestSupport
import Testing

/// `/_node/{node}/_config` as CouchDB 3.4.3's `chttpd_node` answers it (its Elixir suite's
/// config_test.exs and uuids_test.exs, the answers noted beside), the keys lt applies while it
/// runs, what is kept across a restart, and who may touch it.
@Suite("Runtime configuration (_node/_local/_config)")
struct NodeConfigurationTests {
    static let config = "/_node/_local/_config"

    @Test("Read, set, delete and reload as CouchDB does; only JSON strings; protected sections refused")
    func api() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let all = try await s.request(.GET, Self.config)
        #expect(all.status == 200)
        #expect(all.json["couchdb"]?["database_dir"]?.stringValue == s.dataDirectory.path)
        #expect(all.json["chttpd"]?["port"]?.stringValue != nil)
        #expect(all.json["uuids"]?["algorithm"] == "sequential")
        #expect(all.json["admins"]?["admin"]?.stringValue?.hasPrefix("-pbkdf2") == true)
        // CouchDB: PUT answers the value replaced ("" when none), GET the value, DELETE the value removed.
        let put = try await s.request(.PUT, Self.config + "/test/foo", json: "bar")
        #expect(put.status == 200 && put.json == "")
        #expect(try await s.request(.PUT, Self.config + "/test/foo", json: "  baz ").json == "bar")
        #expect(try await s.request(.GET, Self.config + "/test/foo").json == "baz")
        #expect(try await s.request(.GET, Self.config + "/test").json == ["foo": "baz"])
        #expect(try await s.request(.GET, Self.config + "/nothing-here").json == [:])
        let deleted = try await s.request(.DELETE, Self.config + "/test/foo")
        #expect(deleted.status == 200 && deleted.json == "baz")
        let gone = try await s.request(.GET, Self.config + "/test/foo")
        #expect(gone.status == 404 && gone.json == ["error": "not_found", "reason": "unknown_config_value"])
        #expect(try await s.request(.DELETE, Self.config + "/test/foo").status == 404)
        // CouchDB: 400 {"error":"bad_request","reason":"a JSON string expected"} for anything else.
        for body in ["true", "11", "{}", "{\"testing\": [1, 2, 3]}"] {
            let refused = try await s.request(.PUT, Self.config + "/a/b", body: Array(body.utf8))
            #expect(refused.status == 400 && refused.json["reason"] == "a JSON string expected", "\(body)")
        }
        // CouchDB: 403 for the sections that would run code.
        for section in ["daemons", "external", "httpd_design_handlers", "httpd_db_handlers", "native_query_servers", "os_daemons", "query_servers"] {
            let refused = try await s.request(.PUT, Self.config + "/\(section)/wohali", json: "rules")
            #expect(refused.status == 403 && refused.json["error"] == "forbidden", "\(section)")
        }
        #expect(try await s.request(.POST, Self.config + "/_reload").json == ["ok": true])
        #expect(try await s.request(.GET, Self.config + "/_reload").status == 405)
        #expect(try await s.request(.POST, Self.config + "/test/foo", json: "x").status == 405)
        #expect(try await s.request(.GET, Self.config + "/a/b/c").status == 404)
        #expect(try await s.request(.GET, "/_node/_local").json == ["name": "lt@localhost"])
        // A live key takes only what lt can use.
        let bad = try await s.request(.PUT, Self.config + "/couchdb/max_document_size", json: "lots")
        #expect(bad.status == 400 && bad.json["error"] == "bad_request")
        #expect(try await s.request(.PUT, Self.config + "/uuids/algorithm", json: "md5").status == 400)
        #expect(try await s.request(.PUT, Self.config + "/uuids/max_count", json: "1000000000").status == 400)
    }

    @Test("uuids: CouchDB's algorithms and max_count, for _uuids and for ids the server assigns")
    func uuids() async throws {
        let s = try TestServer()
        defer { s.stop() }
        func ids(_ count: Int) async throws -> [String] {
            let reply = try await s.request(.GET, "/_uuids?count=\(count)")
            #expect(reply.headers.first(name: "Pragma") == "no-cache" && reply.headers.first(name: "ETag") != nil)
            #expect(reply.headers.first(name: "Cache-Control")?.contains("no-cache") == true)
            return reply.json["uuids"]?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        // sequential, the default: 32 hex digits, each above the one before.
        let sequential = try await ids(1_000)
        #expect(sequential.count == 1_000 && sequential.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
        #expect(Set(sequential).count == 1_000 && zip(sequential, sequential.dropFirst()).allSatisfy { $0 < $1 })
        #expect(try await s.request(.GET, "/_uuids?count=1001").status == 400)
        _ = try await s.request(.PUT, "/db")
        var posted: [String] = []
        for n in 0..<5 { posted.append(try await s.request(.POST, "/db", json: ["n": .int(n)]).json["id"]?.stringValue ?? "") }
        // Ids assigned in one go for a batch, between documents that name their own.
        let bulk = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [[:], ["_id": "given"], [:], ["_id": "_local/l"], [:]]])
            .json.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(bulk.count == 5 && bulk[1] == "given" && bulk[3] == "_local/l", "\(bulk)")
        posted += [bulk[0], bulk[2], bulk[4]]
        #expect(posted.count == 8 && zip(posted, posted.dropFirst()).allSatisfy { $0 < $1 }, "\(posted)")
        // utc_id: 14 hex digits of time, then the suffix, always growing.
        _ = try await s.request(.PUT, Self.config + "/uuids/algorithm", json: "utc_id")
        _ = try await s.request(.PUT, Self.config + "/uuids/utc_id_suffix", json: "frog")
        let utc = try await ids(10)
        #expect(utc.allSatisfy { $0.count == 18 && $0.hasSuffix("frog") } && zip(utc, utc.dropFirst()).allSatisfy { $0 < $1 }, "\(utc)")
        let now = Int(Date().timeIntervalSince1970 * 1_000_000)
        let stamp = Int(utc[0].prefix(14), radix: 16) ?? 0
        #expect(abs(stamp - now) < 60_000_000)
        _ = try await s.request(.PUT, Self.config + "/uuids/algorithm", json: "utc_random")
        let utcRandom = try await ids(100)
        #expect(utcRandom.allSatisfy { $0.count == 32 } && Set(utcRandom).count == 100 && utcRandom[0].prefix(14) <= utcRandom[99].prefix(14))
        _ = try await s.request(.PUT, Self.config + "/uuids/algorithm", json: "random")
        #expect(Set(try await ids(100)).count == 100)
        _ = try await s.request(.PUT, Self.config + "/uuids/max_count", json: "5")
        #expect(try await s.request(.GET, "/_uuids?count=6").status == 400)
        #expect(try await ids(5).count == 5)
    }

    @Test("Live keys apply at once and go back to the start value when deleted: max_document_size, max_http_request_size, the session timeout")
    func liveKeys() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        let text = String(repeating: "x", count: 2_000)
        #expect(try await s.request(.PUT, "/db/a", json: ["t": .string(text)]).status == 201)
        _ = try await s.request(.PUT, Self.config + "/couchdb/max_document_size", json: "1000")
        let tooLarge = try await s.request(.PUT, "/db/b", json: ["t": .string(text)])
        #expect(tooLarge.status == 413 && tooLarge.json["error"] == "document_too_large")
        #expect(try await s.request(.DELETE, Self.config + "/couchdb/max_document_size").json == "1000")
        #expect(try await s.request(.PUT, "/db/b", json: ["t": .string(text)]).status == 201)
        _ = try await s.request(.PUT, Self.config + "/chttpd/max_http_request_size", json: "1500")
        #expect(try await s.request(.PUT, "/db/c", json: ["t": .string(text)]).status == 413)
        _ = try await s.request(.DELETE, Self.config + "/chttpd/max_http_request_size")
        #expect(try await s.request(.PUT, "/db/c", json: ["t": .string(text)]).status == 201)
        _ = try await s.request(.PUT, Self.config + "/chttpd_auth/timeout", json: "77")
        let session = try await s.request(.POST, "/_session", json: ["name": .string(TestServer.admin.0), "password": .string(TestServer.admin.1)], auth: .none)
        #expect(session.headers.first(name: "Set-Cookie")?.contains("Max-Age=77") == true, "\(session.headers)")
    }

    @Test("Admins: a password put is stored hashed and logs in at once; a deleted admin is refused; the last admin stays")
    func admins() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, Self.config + "/admins/ops", json: "s3cret").json == "")
        let hash = try await s.request(.GET, Self.config + "/admins/ops").json.stringValue ?? ""
        #expect(hash.hasPrefix("-pbkdf2:sha256-") && !hash.contains("s3cret"))
        let stored = try String(contentsOf: s.dataDirectory.appendingPathComponent("server.json"), encoding: .utf8)
        #expect(stored.contains("\"ops\"") && !stored.contains("s3cret"))
        #expect(try await s.request(.GET, "/_all_dbs", auth: .basic("ops", "s3cret")).status == 200)
        #expect(try await s.request(.DELETE, Self.config + "/admins/ops").json.stringValue == hash)
        #expect(try await s.request(.GET, "/_all_dbs", auth: .basic("ops", "s3cret")).status == 401)
        let last = try await s.request(.DELETE, Self.config + "/admins/\(TestServer.admin.0)")
        #expect(last.status == 403 && last.json["error"] == "forbidden")
        #expect(try await s.request(.GET, "/_all_dbs").status == 200)
    }

    @Test("An ordinary user can neither read nor change the configuration, nor make themself an admin")
    func ordinaryUsers() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let user: JSON = ["_id": "org.couchdb.user:eve", "name": "eve", "password": "pw", "roles": [], "type": "user"]
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:eve", json: user).status == 201)
        let eve = TestServer.Auth.basic("eve", "pw")
        let attempts: [(HTTPMethod, String, JSON?)] = [
            (.GET, Self.config, nil), (.GET, Self.config + "/admins", nil), (.GET, Self.config + "/couchdb/uuid", nil),
            (.PUT, Self.config + "/admins/eve", .string("pw")), (.PUT, Self.config + "/couchdb/max_document_size", .string("1")),
            (.DELETE, Self.config + "/admins/" + TestServer.admin.0, nil), (.POST, Self.config + "/_reload", nil),
        ]
        for (method, path, body) in attempts {
            for auth in [eve, TestServer.Auth.none] {
                let reply = try await s.request(method, path, json: body, auth: auth)
                #expect(reply.status == 401 || reply.status == 403, "\(method) \(path): \(reply.status)")
            }
        }
        #expect(try await s.request(.GET, Self.config + "/admins").json.objectValue?.keys.sorted() == [TestServer.admin.0])
        #expect(try await s.request(.GET, Self.config + "/couchdb/max_document_size").json == "8000000")
    }

    @Test("Changes are kept across a restart unless sent with X-Couch-Persist: false; _reload forgets those; the file is the owner's")
    func persistence() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        do {
            let s = try TestServer(dataDirectory: directory.url)
            defer { s.stop() }
            _ = try await s.request(.PUT, Self.config + "/test/kept", json: "1")
            _ = try await s.request(.PUT, Self.config + "/test/memory", json: "2", headers: [("X-Couch-Persist", "false")])
            _ = try await s.request(.PUT, Self.config + "/uuids/algorithm", json: "utc_id")
            _ = try await s.request(.PUT, Self.config + "/admins/ops", json: "s3cret")
            _ = try await s.request(.DELETE, Self.config + "/uuids/max_count")
            #expect(try await s.request(.GET, Self.config + "/test").json == ["kept": "1", "memory": "2"])
            #expect(try await s.request(.POST, Self.config + "/_reload").status == 200)
            #expect(try await s.request(.GET, Self.config + "/test").json == ["kept": "1"])
            _ = try await s.request(.PUT, Self.config + "/test/memory", json: "2", headers: [("X-Couch-Persist", "false")])
        }
        let file = directory.url.appendingPathComponent("config.json")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let s = try TestServer(dataDirectory: directory.url)
        defer { s.stop() }
        #expect(try await s.request(.GET, Self.config + "/test").json == ["kept": "1"])
        #expect(try await s.request(.GET, Self.config + "/uuids").json == ["algorithm": "utc_id"])
        #expect(try await s.request(.GET, "/_all_dbs", auth: .basic("ops", "s3cret")).status == 200)
        // A file that cannot be read stops the start with its name, rather than dropping the changes.
        s.stop()
        try Data("{not json".utf8).write(to: file)
        let refused = try TestServer.runLT(["serve", "--data", directory.url.path, "--db-port", "0", "--port", "0", "--admin", "a:b"])
        #expect(refused.status != 0 && refused.errors.contains("config.json"), "\(refused.errors)")
    }
}
