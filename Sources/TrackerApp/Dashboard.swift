public import CouchJSON
public import CouchProtocol
import Foundation
import HTTPTypes
public import Geo

/// What the dashboard asks of the application beyond the device API.
extension LocationReports {
    /// New location documents of `user` after `since` (`now` for only what comes next), waiting
    /// up to `timeout` ms for one: the user's own database, or their part of the shared one.
    public func changes(of user: String, since: String, timeout: Int) async throws -> (docs: [JSON], lastSeq: String) {
        var query = ["feed": "longpoll", "since": since, "include_docs": "true", "timeout": String(timeout)]
        var body: JSON?
        if mode == .singleDatabase {
            query["filter"] = "_selector"
            body = ["selector": ["_id": ["$beginsWith": .string(try TrackerService.namespace(of: user).prefix)]]]
        }
        let reply = try await couch.request(
            body == nil ? .get : .post, "/\(locationDatabase(for: user))/_changes", query: query, body: body)
        try expect(reply, "follow \(user)'s locations")
        let docs = (reply.json["results"]?.arrayValue ?? []).compactMap { row -> JSON? in
            guard row["deleted"] != true, let doc = row["doc"], let id = doc["_id"]?.stringValue,
                !id.hasPrefix("_design/"),
                LocationFilter().accept(doc) != nil
            else { return nil }
            return doc
        }
        return (docs, reply.json["last_seq"].map { $0.stringValue ?? $0.text } ?? since)
    }

    /// A user's newest `limit` locations by write order (their database's changes feed read
    /// backwards), oldest first by time.
    public func newestLocations(of user: String, limit: Int) async throws -> [JSON] {
        var found: [(time: Double, doc: JSON)] = []
        var since: String?
        // Deletions and design documents take places in the feed: read on until enough.
        while found.count < limit {
            var query = ["descending": "true", "include_docs": "true", "limit": String(limit - found.count + 16)]
            if let since { query["since"] = since }
            let reply = try await couch.request(
                .get, "/\(TrackerService.locationDB(for: user))/_changes", query: query, body: nil)
            if reply.status == 404 { return [] }
            try expect(reply, "read \(user)'s newest locations")
            let rows = reply.json["results"]?.arrayValue ?? []
            for row in rows where row["deleted"] != true {
                guard let doc = row["doc"], !(doc["_id"]?.stringValue ?? "_").hasPrefix("_"),
                    let (_, time) = LocationFilter().accept(doc)
                else { continue }
                found.append((time, doc))
            }
            guard rows.count == Int(query["limit"]!), let last = reply.json["last_seq"] else { break }
            since = last.stringValue ?? last.text
        }
        return found.prefix(limit).sorted { $0.time < $1.time }.map(\.doc)
    }

    /// Everyone's locations (or one user's) counted on a grid over a box, for the dashboard's
    /// map: the geo index's `_geo_grid` on `lt_locations_all`, the user's own database, or
    /// the shared database (with the user's id prefix).
    public func locationGrid(query: [String: String]) async throws -> CouchReply {
        var forwarded = query.filter { ["bbox", "columns", "rows", "from", "to", "points"].contains($0.key) }
        var db = TrackerService.allLocationsDB
        if let user = query["user"], !user.isEmpty {
            try TrackerService.validate(username: user)
            try await requireRegistered(user)
            if separateGeo, mode == .databasePerUser { return try await userGrid(user, forwarded) }
            db = mode == .singleDatabase ? TrackerService.sharedLocationsDB : locationDatabase(for: user)
            if mode == .singleDatabase { forwarded["prefix"] = try TrackerService.namespace(of: user).prefix }
        } else if mode == .singleDatabase {
            db = TrackerService.sharedLocationsDB
        }
        return try await geo.request(.get, "/\(db)/_design/points/_geo_grid/pointidx", query: forwarded, body: nil)
    }

    /// One user's locations on a grid in cluster mode, where their database (on the cluster)
    /// has no geo index and this server's copy of `lt_locations_all` does not tell whose a
    /// location is: their documents are read page by page and counted here, as `_geo_grid` would.
    func userGrid(_ user: String, _ query: [String: String]) async throws -> CouchReply {
        let request: GeoGridRequest
        do { request = try GeoGridRequest(parameters: query) } catch { throw Failure(400, "bad_request", error.reason) }
        var entries: [(id: String, geometry: Geometry)] = []
        var times: [Double] = []
        try await forEachLocation(LocationFilter(user: user)) { page in
            for (doc, point, time) in page {
                entries.append((doc["_id"]?.stringValue ?? "", .point(point)))
                times.append(time)
            }
        }
        return CouchReply(status: 200, body: request.json(request.grid(of: SpatialIndex(entries, times: times))))
    }

    /// A document id as its owner knows it: without the shared database's owner prefix.
    func visibleID(_ id: String, to owner: String) -> String {
        mode == .singleDatabase ? OwnerNamespace(owner: owner)?.visible(id) ?? id : id
    }

    /// A document as its owner sees it (`visibleID`).
    func visible(_ doc: JSON, to owner: String) -> JSON {
        guard mode == .singleDatabase, case var .object(object) = doc, let id = object["_id"]?.stringValue else {
            return doc
        }
        object["_id"] = .string(visibleID(id, to: owner))
        return .object(object)
    }

    /// Location documents with image attachments (GeoPix's photos): one user's (`user`) or
    /// everyone's, newest first, at most `limit`. Ids as the database stores them, except that
    /// a user's own ids in the shared database come without their owner prefix (`visibleTo`).
    public func photos(user: String?, visibleTo owner: String?, limit: Int) async throws -> JSON {
        var found: [(time: Double, json: JSON)] = []
        do {
            try await forEachLocation(LocationFilter(user: user)) { page in
                for (doc, point, time) in page {
                    guard let attachments = doc["_attachments"]?.objectValue, let id = doc["_id"]?.stringValue else {
                        continue
                    }
                    for (name, stub) in attachments.members
                    where stub["content_type"]?.stringValue?.hasPrefix("image/") == true {
                        let shown = owner.map { visibleID(id, to: $0) } ?? id
                        found.append(
                            (
                                time,
                                [
                                    "id": .string(shown), "attachment": .string(name),
                                    "content_type": stub["content_type"] ?? .null,
                                    "length": stub["length"] ?? .null, "lat": .double(point.lat),
                                    "lon": .double(point.lon), "time": .double(time),
                                    "caption": doc["caption"] ?? doc["properties"]?["caption"] ?? doc["name"] ?? .null,
                                ]
                            ))
                    }
                }
            }
        } catch let failure as Failure where failure.status == 404 {}
        let newest = found.sorted { $0.time > $1.time }.prefix(limit).map(\.json)
        return ["photos": .array(Array(newest)), "total": .int(found.count)]
    }

    /// One photo's bytes and content type, from a user's database or everyone's.
    public func photo(
        id: String, attachment: String, user: String?
    ) async throws -> (bytes: [UInt8], contentType: String) {
        var db = user.map(locationDatabase(for:)) ?? TrackerService.allLocationsDB
        var stored = id
        if mode == .singleDatabase {
            db = TrackerService.sharedLocationsDB
            if let user { stored = try TrackerService.namespace(of: user).stored(id) }
        }
        let path = "/\(db)/\(CouchURL.encode(stored))"
        let doc = try await couch.request(.get, path)
        guard doc.ok, let stub = doc.json["_attachments"]?[attachment], let type = stub["content_type"]?.stringValue,
            type.hasPrefix("image/")
        else {
            throw Failure(404, "not_found", "No photo \(attachment) in \(id)")
        }
        let bytes = try await couch.request(.get, path + "/" + CouchURL.encode(attachment))
        try expect(bytes, "read photo \(id)/\(attachment)")
        return (bytes.body, type)
    }
}

extension PlaceCatalog {
    /// Creates (`id` nil) or updates a place: name and position, keeping the rest of the
    /// document; the places release is bumped so devices pull again.
    public func savePlace(id: String?, name: String, position: Coordinate) async throws -> JSON {
        var doc: JSONObject = ["type": "Feature", "created_at": JSON.millisecondsNow()]
        let placeID = id ?? "place-" + Hex.random(bytes: 8)
        if let id {
            let existing = try await couch.request(.get, "/\(TrackerService.placesDB)/\(CouchURL.encode(id))")
            guard existing.ok, let object = existing.json.objectValue, object["geometry"] != nil else {
                throw Failure(404, "not_found", "No place \(id)")
            }
            doc = object
        }
        doc["name"] = .string(name)
        doc["geometry"] = Geometry.point(position).geoJSON
        let saved = try await couch.request(
            .put, "/\(TrackerService.placesDB)/\(CouchURL.encode(placeID))", body: .object(doc))
        if saved.status == 409 { throw Failure(409, "conflict", "The place changed meanwhile; reload and try again") }
        try expect(saved, "save place \(placeID)")
        let release = try await bumpRelease()
        return ["ok": true, "id": .string(placeID), "rev": saved.json["rev"] ?? .null, "dataVersion": .int(release)]
    }

    /// Deletes a place; the places release is bumped.
    public func deletePlace(_ id: String) async throws -> JSON {
        guard id != TrackerService.releaseID, !id.hasPrefix("_") else {
            throw Failure(400, "bad_request", "\(id) is not a place")
        }
        let existing = try await couch.request(.get, "/\(TrackerService.placesDB)/\(CouchURL.encode(id))")
        guard existing.ok, let rev = existing.json["_rev"]?.stringValue else {
            throw Failure(404, "not_found", "No place \(id)")
        }
        let deleted = try await couch.request(
            .delete, "/\(TrackerService.placesDB)/\(CouchURL.encode(id))", query: ["rev": rev], body: nil)
        try expect(deleted, "delete place \(id)")
        return ["ok": true, "dataVersion": .int(try await bumpRelease())]
    }
}
