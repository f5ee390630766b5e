import CouchEngine
import CouchJSON
import CouchProtocol
@testable import CouchServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LTTestSupport
import Logging
import Testing

/// The route table's declarations (`CouchRouteTable.swift`) hold for every route, as a client
/// meets them through the whole chain in process: a server-admin route refuses everyone else,
/// a reader's route refuses who is not a reader, a route not open to owners of a shared
/// database refuses them, and a route's methods are the only ones it takes. Each route is
/// asked with every user, so a route added later is checked without a new test.
@Suite("Route table")
struct RouteTableTests {
    /// A database API with an admin, users `alice` (member of `private`), `bob` (no member of
    /// anything) and `owen` (an owner of the shared database `shared`).
    struct Server {
        let directory: TemporaryDirectory
        let api: CouchAPI

        init() async throws {
            directory = try TemporaryDirectory("lt-route-table")
            var settings = try ServerSettings.load(from: directory.url)
            settings.admins["admin"] = try await Passwords.hash("relax", iterations: 10)
            var options = CouchAPI.Options()
            options.pbkdf2Iterations = 10
            options.sharedDatabases = [SharedDatabase(name: "shared", ownerRolePrefix: "lt_owner_")]
            api = CouchAPI(
                store: try DatabaseStore(directory: directory.url), settings: settings, options: options,
                logger: Logger(label: "lt-route-table-test"))
            try await api.prepareSystemDatabases()
        }

        func test(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            try await Application(responder: api.responder).test(.router, body)
        }
    }

    static func basic(_ name: String, _ password: String) -> HTTPFields {
        [.authorization: "Basic " + Data("\(name):\(password)".utf8).base64EncodedString(), .contentType: "application/json"]
    }
    static let admin = basic("admin", "relax")

    /// A concrete path for a declared route in database `db`.
    static func path(_ route: RouteDeclaration, db: String) -> String {
        let segments = route.path.split(separator: "/").map { segment -> String in
            switch segment {
            case ":doc": "doc1"
            case ":ddoc": "dd"
            case ":view": "v"
            case "**": "x"
            default: String(segment)
            }
        }
        return "/" + ((route.underDatabase ? [db] : []) + segments).joined(separator: "/")
    }

    static func status(
        _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, _ headers: HTTPFields,
        body: String = "{}"
    ) async throws -> (status: Int, body: String) {
        try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: body)) {
            (Int($0.status.code), String(buffer: $0.body))
        }
    }

    func prepare(_ client: any TestClientProtocol) async throws {
        for (name, roles) in [("alice", [] as [JSON]), ("bob", []), ("owen", ["lt_owner_owen"])] {
            let user: JSON = [
                "_id": .string("org.couchdb.user:\(name)"), "name": .string(name), "type": "user", "roles": .array(roles),
                "password": "pw",
            ]
            #expect(try await Self.status(client, .put, "/_users/org.couchdb.user:\(name)", Self.admin, body: user.text).status == 201)
        }
        for db in ["private", "shared"] { #expect(try await Self.status(client, .put, "/\(db)", Self.admin).status == 201) }
        let security: JSON = ["members": ["names": ["alice"], "roles": []]]
        #expect(try await Self.status(client, .put, "/private/_security", Self.admin, body: security.text).status == 200)
    }

    @Test("Every route's declared access holds: server-admin routes refuse users and anonymous (401), readers' routes refuse a non-member (403) and anonymous (401) and let a member and the admin in")
    func declaredAccessHolds() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        let routes = server.api.routeDeclarations()
        #expect(routes.filter { $0.access == .serverAdmin }.count >= 7)
        #expect(routes.filter { $0.access == .reader }.count >= 20)
        try await server.test { client in
            try await prepare(client)
            for route in routes where route.access != .handler {
                let method = HTTPRequest.Method(route.methods?.first ?? "GET")!
                let uri = Self.path(route, db: "private")
                let anonymous = try await Self.status(client, method, uri, [.contentType: "application/json"])
                #expect(anonymous.status == 401, "anonymous \(method) \(uri): \(anonymous)")
                let bob = try await Self.status(client, method, uri, Self.basic("bob", "pw"))
                #expect(bob.status == (route.access == .serverAdmin ? 401 : 403), "bob \(method) \(uri): \(bob)")
                for (name, headers) in [("admin", Self.admin), ("alice", Self.basic("alice", "pw"))]
                where name == "admin" || route.access != .serverAdmin {
                    let allowed = try await Self.status(client, method, uri, headers)
                    #expect(![401, 403].contains(allowed.status), "\(name) \(method) \(uri): \(allowed)")
                }
            }
        }
    }

    @Test("Every route not open to owners refuses an owner of a shared database (403), and every route open to them answers in their namespace")
    func ownersReachOnlyTheirRoutes() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        let routes = server.api.routeDeclarations().filter(\.underDatabase)
        #expect(routes.filter(\.ownersMay).count >= 10)
        try await server.test { client in
            try await prepare(client)
            let owen = Self.basic("owen", "pw")
            #expect(try await Self.status(client, .put, "/shared/doc1", owen, body: #"{"mine":true}"#).status == 201)
            // Stored under owen's prefix; he sees it as doc1.
            #expect(try await Self.status(client, .get, "/shared/owen:doc1", Self.admin).status == 200)
            for route in routes {
                let uri = Self.path(route, db: "shared")
                let method = HTTPRequest.Method(route.methods?.first ?? "GET")!
                let answer = try await Self.status(client, method, uri, owen)
                let refusedAsOwner = answer.status == 403 && answer.body.contains("not available to owners")
                #expect(refusedAsOwner == !route.ownersMay, "owen \(method) \(uri): \(answer)")
            }
            let doc = try await Self.status(client, .get, "/shared/doc1", owen)
            #expect(doc.status == 200 && doc.body.contains(#""_id":"doc1""#))
            let rows = try await Self.status(client, .get, "/shared/_all_docs", owen)
            #expect(rows.body.contains(#""id":"doc1""#) && !rows.body.contains("owen:"))
        }
    }

    @Test("A route's declared methods are the only ones it takes: any other is CouchDB's 405 naming them")
    func declaredMethodsHold() async throws {
        let server = try await Server()
        defer { server.directory.cleanup() }
        let routes = server.api.routeDeclarations().filter { $0.methods != nil }
        #expect(routes.count >= 15)
        try await server.test { client in
            try await prepare(client)
            for route in routes {
                let methods = try #require(route.methods)
                let other: HTTPRequest.Method = methods.contains("PUT") ? .delete : .put
                let uri = Self.path(route, db: "private")
                let answer = try await Self.status(client, other, uri, Self.admin)
                #expect(answer.status == 405, "\(other) \(uri): \(answer)")
                #expect(answer.body.contains(methods.joined(separator: ",")), "\(other) \(uri): \(answer)")
            }
        }
    }
}
