import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import Hummingbird

/// The server-wide resources under `/_*`: health, UUIDs, the database list and infos,
/// `_db_updates`, `_session`, active tasks, membership.
struct ServerEndpoints: Sendable {
    let api: CouchAPI

    /// `/_up`: the health check.
    /// `[couchdb] maintenance_mode` `true` or `nolb` makes it answer 404 with that status, as
    /// CouchDB's does, so a load balancer (or `lt serve --couchdb` in front) sends this server
    /// nothing new while an operator works on it; the requests it is sent are still answered.
    func up(_ request: APIRequest) throws -> APIResponse {
        try request.requireMethod(.get, .head)
        switch api.config.value("couchdb", "maintenance_mode") {
        case "true": return .json(["status": "maintenance_mode"], status: .notFound)
        case "nolb": return .json(["status": "nolb"], status: .notFound)
        default: return .json(["status": "ok", "seeds": [:]])
        }
    }

    /// `/_uuids?count=n`: fresh document ids.
    func uuids(_ request: APIRequest) throws -> APIResponse {
        try request.requireMethod(.get)
        guard let count = request.query["count"].map(ClientCount.parse) ?? 1 else {
            throw CouchError.badRequest("count must be a positive integer")
        }
        let most = api.config.integer("uuids", "max_count", default: 1000)
        guard count <= most else { throw CouchError.badRequest("count parameter too large") }
        var headers = HTTPFields()
        // Never cached: every answer is new ids (CouchDB's headers).
        headers[.cacheControl] = "no-cache"
        headers[.init("Pragma")!] = "no-cache"
        headers[.expires] = "Mon, 01 Jan 1990 00:00:00 GMT"
        headers[.eTag] = "\"\(Hex.random(bytes: 8))\""
        return .json(["uuids": .array(api.config.newIDs(count).map(JSON.string))], headers: headers)
    }

    /// `/_all_dbs` (admins): database names, in order, within the key range asked.
    func allDatabases(_ request: APIRequest) async throws -> APIResponse {
        var names = try await api.store.allNamesOffThread()
        let descending = try request.bool("descending")
        if descending { names.reverse() }
        if let start = try request.jsonParam("startkey")?.stringValue ?? request.jsonParam("start_key")?.stringValue {
            names = names.filter { descending ? $0 <= start : $0 >= start }
        }
        if let end = try request.jsonParam("endkey")?.stringValue ?? request.jsonParam("end_key")?.stringValue {
            names = names.filter { descending ? $0 >= end : $0 <= end }
        }
        let skip = try request.int("skip") ?? 0
        let limit = try request.int("limit") ?? Int.max
        return .json(.array(names.dropFirst(skip).prefix(limit).map(JSON.string)))
    }

    /// `/_dbs_info` (admins): every database's info (GET), or those named in `keys` (POST).
    func databasesInfo(_ request: APIRequest) async throws -> APIResponse {
        let names: [String]
        if request.method == .post {
            guard let keys = try request.jsonObject()["keys"]?.arrayValue else {
                throw CouchError.badRequest("`keys` member must exist.")
            }
            names = keys.compactMap(\.stringValue)
        } else {
            names = try await api.store.allNamesOffThread()
        }
        var rows: [JSON] = []
        for name in names {
            if let db = try? await api.store.open(name) {
                rows.append(["key": .string(name), "info": .object(try await api.info(db))])
            } else {
                rows.append(["key": .string(name), "error": "not_found"])
            }
        }
        return .json(.array(rows))
    }

    /// `/_active_tasks` (admins): the running replications and compactions.
    func activeTasks() -> APIResponse {
        return .json(.array(api.jobs.activeTasks() + api.compactions.activeTasks()))
    }

    /// `/_membership` (admins): this one node.
    func membership() -> APIResponse {
        return .json(["all_nodes": ["lt@localhost"], "cluster_nodes": ["lt@localhost"]])
    }

    /// `/_session`: cookie login (form or JSON), session info, logout.
    func session(_ request: inout APIRequest) async throws -> APIResponse {
        switch request.method {
        case .get, .head:
            let handlers: JSON = ["cookie", "default"]
            var info: JSONObject = ["authentication_handlers": handlers]
            if request.user.name != nil {
                info["authenticated"] = request.header("Authorization") != nil ? "default" : "cookie"
                info["authentication_db"] = .string(UsersDatabase.authenticationDatabase)
            }
            return .json(["ok": true, "userCtx": request.user.json, "info": .object(info)])
        case .post:
            var name: String?
            var password: String?
            let contentType = request.header("Content-Type") ?? ""
            if contentType.contains("application/x-www-form-urlencoded") {
                let form = CouchURL.parameters(String(decoding: request.body, as: UTF8.self))
                name = form["name"] ?? form["username"]
                password = form["password"]
            } else {
                let body = try request.jsonObject()
                name = body["name"]?.stringValue ?? body["username"]?.stringValue
                password = body["password"]?.stringValue
            }
            guard let name, let password else { throw CouchError.badCredentials }
            guard let user = try await api.auth.login(name: name, password: password, client: request.client),
                let cookie = await api.auth.makeCookie(for: name)
            else {
                throw CouchError.badCredentials
            }
            var headers = HTTPFields()
            headers[.setCookie] = api.auth.setCookieHeader(cookie)
            if let next = request.query["next"], next.hasPrefix("/") {
                headers[.location] = next
                return .json(
                    ["ok": true, "name": .string(name), "roles": .array(user.roles.map(JSON.string))], status: .found,
                    headers: headers)
            }
            return .json(
                ["ok": true, "name": .string(name), "roles": .array(user.roles.map(JSON.string))], headers: headers)
        case .delete:
            var headers = HTTPFields()
            headers[.setCookie] = "AuthSession=; Version=1; Path=/; HttpOnly; Max-Age=0"
            return .json(["ok": true], headers: headers)
        default:
            throw CouchError.methodNotAllowed("GET,HEAD,POST,DELETE")
        }
    }

    /// `GET /_db_updates` (admins): which databases were created, updated or deleted since
    /// `since`, one row per database with its latest event. `feed=normal` answers at once,
    /// `longpoll` waits (up to `timeout` ms, default 60 s) for the first event.
    func databaseUpdates(_ request: APIRequest) async throws -> APIResponse {
        let updates = api.store.updates
        let feed = request.query["feed"] ?? "normal"
        guard feed == "normal" || feed == "longpoll" else {
            throw CouchError.badRequest("Supported `feed` types: normal, longpoll")
        }
        let since = updates.parse(since: request.query["since"])
        let limit = try request.int("limit") ?? Int.max
        var events = updates.events(after: since, limit: limit)
        if events.isEmpty, feed == "longpoll" {
            let timeout = try request.int("timeout").map { Duration.milliseconds($0) } ?? .seconds(60)
            _ = await updates.notifier.wait(after: since, timeout: timeout)
            events = updates.events(after: since, limit: limit)
        }
        let last = events.last?.seq ?? max(since, updates.seq)
        return .json([
            "results": .array(
                events.map {
                    [
                        "db_name": .string($0.name), "type": .string($0.kind.rawValue),
                        "seq": .string(updates.sequenceString($0.seq)),
                    ]
                }),
            "last_seq": .string(updates.sequenceString(last)),
        ])
    }
}
