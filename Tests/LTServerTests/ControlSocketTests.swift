import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import GRDB
import HTTPServing
import Hummingbird
import HummingbirdTesting
import LTServer
import LTTestSupport
import Logging
import Testing

/// The control socket's routes (`lt backup`, `lt doctor`) in process, through Hummingbird's
/// `.router` testing: a real store and database API on a scratch directory, no socket.
@Suite("Control socket")
struct ControlSocketTests {
    @Test("Databases listed, a database's snapshot a SQLite file holding its documents, the settings and the API's welcome; unknown names and absent files are CouchDB-style 404s")
    func routes() async throws {
        let directory = try TemporaryDirectory("lt-control")
        defer { directory.cleanup() }
        let logger = Logger(label: "lt-control-test", factory: { _ in SwiftLogNoOpLogHandler() })
        let store = try DatabaseStore(directory: directory.url.appendingPathComponent("data"))
        let settings = try ServerSettings.load(from: directory.url)
        let api = CouchAPI(store: store, settings: settings, options: CouchAPI.Options(), logger: logger)
        try await api.prepareSystemDatabases()
        try settings.save(to: directory.url)
        let kept = try await store.create("kept")
        _ = try await kept.update(DocumentInput(id: "a", body: ["n": 1]))
        _ = try await kept.update(DocumentInput(id: "b", body: ["n": 2]))

        let router = ControlSocket.router(directory: directory.url, store: store, api: api, logger: logger)
        try await Application(router: router).test(.router) { client in
            let names = try await client.execute(uri: "/backup/databases", method: .get) { try JSON.parse(Array(buffer: $0.body)) }
            #expect(names.arrayValue?.compactMap(\.stringValue).contains("kept") == true)
            #expect(names.arrayValue?.compactMap(\.stringValue).contains("_users") == true)

            let snapshot = try await client.execute(uri: "/backup/databases/kept", method: .post) { response in
                #expect(response.status == .ok && response.headers[.contentType] == "application/vnd.sqlite3")
                #expect(response.headers[.contentLength] == String(response.body.readableBytes))
                return Array(buffer: response.body)
            }
            #expect(snapshot.starts(with: Array("SQLite format 3\u{0}".utf8)))
            let file = directory.url.appendingPathComponent("kept-copy.sqlite")
            try Data(snapshot).write(to: file)
            let ids = try await DatabaseQueue(path: file.path).read { db in try String.fetchAll(db, sql: "SELECT id FROM docs ORDER BY id") }
            #expect(ids == ["a", "b"])

            let missing = try await client.execute(uri: "/backup/databases/none", method: .post) { ($0.status, try JSON.parse(Array(buffer: $0.body))) }
            #expect(missing.0 == .notFound && missing.1["error"] == "not_found")
            #expect(try await client.execute(uri: "/backup/config.json", method: .get) { $0.status } == .notFound)
            let saved = try await client.execute(uri: "/backup/server.json", method: .get) { try JSON.parse(Array(buffer: $0.body)) }
            #expect(saved.objectValue != nil)
            let welcome = try await client.execute(uri: "/server", method: .get) { try JSON.parse(Array(buffer: $0.body)) }
            #expect(welcome["couchdb"] == "Welcome")
            let nowhere = try await client.execute(uri: "/elsewhere", method: .get) { ($0.status, try? JSON.parse(Array(buffer: $0.body))) }
            #expect(nowhere.0 == .notFound && nowhere.1?["error"] == "not_found")
        }
    }
}
