import CouchJSON
public import CouchProtocol
public import Foundation
public import Geo
public import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Replication

/// What a login gives a device: the database its locations replicate with.
public struct Credentials: Sendable, Equatable, Codable {
    public var username: String
    public var apiKey: String
    public var apiPassword: String
    public var databaseName: String
    public var databaseHost: String
    public var databaseProtocol: String

    public init(
        username: String, apiKey: String, apiPassword: String, databaseName: String, databaseHost: String,
        databaseProtocol: String
    ) {
        self.username = username
        self.apiKey = apiKey
        self.apiPassword = apiPassword
        self.databaseName = databaseName
        self.databaseHost = databaseHost
        self.databaseProtocol = databaseProtocol
    }

    /// The server database for `SyncManager`.
    public var serverDatabase: ServerDatabase {
        ServerDatabase(
            url: "\(databaseProtocol)://\(databaseHost)/\(databaseName)", apiKey: apiKey, apiPassword: apiPassword)
    }
}

/// The application API a device uses (the original client's calls and this server's
/// additions): register, login, places near a position, the places release, corrections.
public struct TrackerClient: Sendable {
    /// The application's base URL, e.g. `http://127.0.0.1:8080`.
    public let baseURL: String
    /// The application server (nil when `baseURL` is not an http(s) URL: every call fails).
    let server: CouchHTTPClient?

    /// `http` defaults to the shared client, which does not retry connecting: with the server
    /// unreachable a call fails at once (and the app answers from the device) instead of
    /// waiting out the connect timeout.
    /// A private CA's: `http` from `CouchHTTPClient.httpClient(trustingCAFile:)`; a
    /// `DeviceTracker` made with this client syncs through it too.
    public init(baseURL: String, http: HTTPClient = CouchHTTPClient.shared) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.http = http
        server = try? CouchHTTPClient(url: self.baseURL, http: http)
    }

    /// The HTTP client this client (and a `DeviceTracker` made with it) sends through.
    public let http: HTTPClient

    /// `PUT /api/users/:username`.
    public func register(username: String, password: String) async throws {
        _ = try await call(
            .PUT, "/api/users/" + CouchURL.encode(username),
            body: [
                "username": .string(username), "password": .string(password), "type": "user", "_id": .string(username),
            ])
    }

    /// `POST /api/login`: a fresh API key for this device.
    public func login(username: String, password: String, device: String? = nil) async throws -> Credentials {
        var body: JSONObject = ["username": .string(username), "password": .string(password)]
        if let device { body["device"] = .string(device) }
        let json = try await call(.POST, "/api/login", body: .object(body))
        guard let key = json["api_key"]?.stringValue, let secret = json["api_password"]?.stringValue,
            let name = json["location_db_name"]?.stringValue, let host = json["location_db_host"]?.stringValue
        else {
            throw TrackerKitError.serverAnswer(
                status: 502, error: "bad_gateway", reason: "The login answer lacks credentials")
        }
        return Credentials(
            username: username, apiKey: key, apiPassword: secret, databaseName: name, databaseHost: host,
            databaseProtocol: json["location_db_host_protocol"]?.stringValue ?? "http")
    }

    /// `GET /api/places`: places within `radius` metres, nearest first, with their documents.
    public func places(
        near center: Coordinate, radius: Double = OfflinePlaces.defaultRadius, limit: Int = 100
    ) async throws -> [PlaceDoc] {
        try await placesPage(near: center, radius: radius, limit: limit).places
    }

    /// One page of places within `radius` metres, nearest first, and the bookmark of the next
    /// page (nil: this was the last). `limit` is at most 200.
    public func placesPage(
        near center: Coordinate, radius: Double, limit: Int = 200, bookmark: String? = nil
    ) async throws -> (places: [PlaceDoc], next: String?) {
        var query = [
            ("lat", "\(center.lat)"), ("lon", "\(center.lon)"), ("radius", "\(radius)"), ("relation", "contains"),
            ("nearest", "true"), ("include_docs", "true"), ("limit", "\(limit)"),
        ]
        if let bookmark, !bookmark.isEmpty { query.append(("bookmark", bookmark)) }
        let json = try await call(.GET, "/api/places" + CouchURL.query(query))
        let rows = json["rows"]?.arrayValue ?? []
        let next = json["bookmark"]?.stringValue
        return (
            rows.compactMap { row in row["doc"].flatMap(PlaceDoc.init(json:)) },
            rows.count >= limit && next?.isEmpty == false ? next : nil
        )
    }

    /// `GET /api/places/version`: the places release, to pull `lt_places` only when it changed.
    public func placesVersion() async throws -> Int {
        try await call(.GET, "/api/places/version")["dataVersion"]?.intValue ?? 0
    }

    /// `POST /api/places/:id/adjustments`: reports a place's corrected position.
    public func reportPosition(
        of place: String, at position: Coordinate, comment: String? = nil, credentials: Credentials
    ) async throws -> String {
        var body: JSONObject = ["latitude": .double(position.lat), "longitude": .double(position.lon)]
        if let comment { body["comment"] = .string(comment) }
        let json = try await call(
            .POST, "/api/places/\(CouchURL.encode(place))/adjustments", body: .object(body), credentials: credentials)
        return json["id"]?.stringValue ?? ""
    }

    func call(
        _ method: HTTPMethod, _ path: String, body: JSON? = nil, credentials: Credentials? = nil
    ) async throws -> JSON {
        guard let server else {
            throw TrackerKitError.serverAnswer(
                status: 400, error: "bad_request", reason: "Not an http(s) URL: \(baseURL)")
        }
        let reply = try await server.authenticated(as: credentials.map { ($0.apiKey, $0.apiPassword) })
            .send(method, path, json: body, timeout: .seconds(30), maxBody: 16 << 20)
        let json = reply.json
        guard reply.ok else {
            throw TrackerKitError.serverAnswer(
                status: reply.status, error: json["error"]?.stringValue ?? "http_error",
                reason: json["reason"]?.stringValue)
        }
        return json
    }
}

/// Where a device keeps its credentials: the Keychain on Apple platforms (`KeychainCredentialStore`),
/// `FileCredentialStore` elsewhere.
public protocol CredentialStore: Sendable {
    func load() throws -> Credentials?
    func save(_ credentials: Credentials) throws
    func delete() throws
}

/// Credentials in a JSON file readable only by its owner (0600).
public struct FileCredentialStore: CredentialStore {
    public let url: URL

    public init(url: URL) {
        self.url = url
    }

    public func load() throws -> Credentials? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try JSONDecoder().decode(Credentials.self, from: Data(contentsOf: url))
    }

    public func save(_ credentials: Credentials) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let data = try JSONEncoder().encode(credentials)
        // Created 0600 before anything is written to it.
        _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        try data.write(to: url)
    }

    public func delete() throws {
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
    }
}
