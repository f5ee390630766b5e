public import CouchJSON
import CouchProtocol
import Geo
import HTTPTypes

/// The dashboard's overview of the people tracked (admins and analysts): who is registered,
/// when and where each was last seen, and with which devices.
extension LocationReports {
    /// `GET /api/analysis/users?limit=&after=`: up to `limit` users in name order after `after`,
    /// each `{name, registered, devices: [{device, since}], last: {time, lat, lon, accuracy}|null}`,
    /// with `next` (the name to continue after) when there are more. API keys' names are not
    /// shown (a device's name and when it signed in are enough to recognise it).
    ///
    /// "Last" is the newest in time of the 20 locations written last (a batch from a device may
    /// arrive in any order): in database-per-user mode the end of the user's own changes feed
    /// (one short read); in single-database mode the shared feed read backwards for the user's
    /// ids, which costs more the longer ago they last wrote.
    public func people(limit: Int, after: String?) async throws -> JSON {
        var query = ["limit": String(limit + 1), "include_docs": "true"]
        if let after { query["startkey"] = JSON.string(after).text; query["skip"] = "1" }
        let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/_all_docs", query: query, body: nil)
        try expect(reply, "list the users")
        var rows = (reply.json["rows"]?.arrayValue ?? []).compactMap { row -> (name: String, registered: JSON)? in
            guard let name = row["id"]?.stringValue, !name.hasPrefix("_"), let doc = row["doc"] else { return nil }
            return (name, doc["created_at"] ?? .null)
        }
        let more = rows.count > limit
        rows = Array(rows.prefix(limit))
        let names = rows.map(\.name)
        async let devices = devices(of: names)
        let last = try await withThrowingTaskGroup(of: (String, JSON).self) { group in
            var found: [String: JSON] = [:]
            var pending = names[...]
            // A few at a time: each is one read of a changes feed.
            for _ in 0..<min(8, pending.count) {
                let name = pending.removeFirst()
                group.addTask { (name, try await lastLocation(of: name)) }
            }
            while let (name, location) = try await group.next() {
                found[name] = location
                if let next = pending.popFirst() { group.addTask { (next, try await lastLocation(of: next)) } }
            }
            return found
        }
        let byUser = try await devices
        let people: [JSON] = rows.map { row in
            [
                "name": .string(row.name), "registered": row.registered, "devices": .array(byUser[row.name] ?? []),
                "last": last[row.name] ?? .null,
            ]
        }
        return ["users": .array(people), "next": more ? rows.last.map { .string($0.name) } ?? .null : .null]
    }

    /// The devices (API keys) of these users, oldest first: `{device, since}`.
    func devices(of names: [String]) async throws -> [String: [JSON]] {
        guard !names.isEmpty else { return [:] }
        let reply = try await couch.request(
            .post, "/_users/_find",
            body: [
                "selector": ["lt_user": ["$in": .array(names.map(JSON.string))]],
                "fields": ["lt_user", "device", "created_at"], "limit": 100_000,
            ])
        try expect(reply, "list the users' devices")
        var byUser: [String: [(since: Double, json: JSON)]] = [:]
        for doc in reply.json["docs"]?.arrayValue ?? [] {
            guard let user = doc["lt_user"]?.stringValue else { continue }
            let since = doc["created_at"]?.doubleValue ?? 0
            byUser[user, default: []].append(
                (since, ["device": doc["device"] ?? .null, "since": doc["created_at"] ?? .null]))
        }
        return byUser.mapValues { $0.sorted { $0.since < $1.since }.map(\.json) }
    }

    /// Where `user` was last, as `{time, lat, lon, accuracy}`, or null: the newest in time of
    /// the 20 locations they wrote last.
    func lastLocation(of user: String) async throws -> JSON {
        let recent: [JSON]
        if mode == .databasePerUser {
            recent = try await newestLocations(of: user, limit: 20)
        } else {
            let namespace = try TrackerService.namespace(of: user)
            let reply = try await couch.request(
                .post, "/\(TrackerService.sharedLocationsDB)/_changes",
                query: [
                    "descending": "true", "limit": "20", "include_docs": "true", "filter": "_selector",
                ], body: ["selector": ["_id": ["$beginsWith": .string(namespace.prefix)], "geometry.type": "Point"]])
            try expect(reply, "read \(user)'s newest location")
            recent = (reply.json["results"]?.arrayValue ?? []).compactMap { $0["doc"] }
        }
        let newest = recent.compactMap { doc in LocationFilter().accept(doc).map { (doc, $0.point, $0.time) } }.max {
            $0.2 < $1.2
        }
        guard let (doc, point, time) = newest else { return .null }
        return [
            "time": .double(time), "lat": .double(point.lat), "lon": .double(point.lon),
            "accuracy": doc["properties"]?["accuracy"] ?? .null,
        ]
    }
}
