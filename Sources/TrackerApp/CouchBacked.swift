import CouchJSON
import CouchProtocol
import HTTPTypes
import Logging

/// A part of the application that works on its database through a `CouchClient`
/// (`TrackerService`, `PlaceCatalog`, `LocationReports`): how an unexpected answer is logged and
/// becomes the application's 500.
protocol CouchBacked: Sendable {
    var couch: any CouchClient { get }
    var logger: Logger { get }
}

extension CouchBacked {
    /// `reply` when it is a success; otherwise the failure, logged.
    @discardableResult
    func expect(_ reply: CouchReply, _ what: String) throws -> CouchReply {
        guard reply.ok else { throw failure(reply, what) }
        return reply
    }

    func failure(_ reply: CouchReply, _ what: String) -> TrackerService.Failure {
        logger.error("\(what) failed: \(reply.status) \(String(decoding: reply.body.prefix(300), as: UTF8.self))")
        return TrackerService.Failure(500, "Internal Server Error", "could not \(what)")
    }

    /// Creates a database; false when it already exists.
    func createDatabase(_ name: String, shards: Int? = nil) async throws -> Bool {
        let reply = try await couch.request(.put, "/\(name)", query: shards.map { ["q": String($0)] } ?? [:], body: nil)
        if reply.status == 412 { return false }
        try expect(reply, "create \(name)")
        return true
    }

    /// 404 unless `user` is registered (in either mode, where their locations are kept differs).
    func requireRegistered(_ user: String) async throws {
        guard try await couch.request(.head, "/\(TrackerService.usersDB)/\(user)").ok else {
            throw TrackerService.Failure(404, "not_found", "No user \(user)")
        }
    }

    /// Calls `visit` with each page of `_all_docs` rows of a database (`size` rows at a time,
    /// continuing after the last id of the page before), only ids in `range` (start included,
    /// end not) if given. False when there is no such database.
    func forEachPage(
        of db: String, size: Int, includeDocs: Bool, range: (start: String, end: String)? = nil,
        _ visit: ([JSON]) async throws -> Void
    ) async throws -> Bool {
        var startKey: String?
        while true {
            var query = ["limit": String(size)]
            if includeDocs { query["include_docs"] = "true" }
            if let range {
                query["startkey"] = JSON.string(range.start).text
                query["endkey"] = JSON.string(range.end).text
                query["inclusive_end"] = "false"
            }
            if let startKey {
                query["startkey"] = JSON.string(startKey).text
                query["skip"] = "1"
            }
            let reply = try await couch.request(.get, "/\(db)/_all_docs", query: query, body: nil)
            if reply.status == 404 { return false }
            try expect(reply, "read \(db)")
            let rows = reply.json["rows"]?.arrayValue ?? []
            try await visit(rows)
            guard rows.count == size, let last = rows.last?["id"]?.stringValue else { return true }
            startKey = last
        }
    }
}
