import CouchJSON
import CouchServer
import Foundation
import HTTPTypes
import Geo

/// What the dashboard asks of the application beyond the device API.
extension TrackerService {
    /// New location documents of `user` after `since` (`now` for only what comes next), waiting
    /// up to `timeout` ms for one: the user's own database, or their part of the shared one.
    public func changes(of user: String, since: String, timeout: Int) async throws -> (docs: [JSON], lastSeq: String) {
        var query = ["feed": "longpoll", "since": since, "include_docs": "true", "timeout": String(timeout)]
        var body: JSON?
        if mode == .singleDatabase {
            query["filter"] = "_selector"
            body = ["selector": ["_id": ["$beginsWith": .string(OwnerNamespace(owner: user).prefix)]]]
        }
        let reply = try await couch.request(body == nil ? .get : .post, "/\(locationDatabase(for: user))/_changes", query: query, body: body)
        try expect(reply, "follow \(user)'s locations")
        let docs = (reply.json["results"]?.arrayValue ?? []).compactMap { row -> JSON? in
            guard row["deleted"] != true, let doc = row["doc"], let id = doc["_id"]?.stringValue, !id.hasPrefix("_design/"),
                  doc["geometry"]?["type"] == "Point" else { return nil }
            return doc
        }
        return (docs, reply.json["last_seq"].map { $0.stringValue ?? $0.text } ?? since)
    }

    /// Creates (`id` nil) or updates a place: name and position, keeping the rest of the
    /// document; the places release is bumped so devices pull again.
    public func savePlace(id: String?, name: String, position: Coordinate) async throws -> JSON {
        var doc: JSONObject = ["type": "Feature", "created_at": .double((Date().timeIntervalSince1970 * 1000).rounded())]
        let placeID = id ?? "place-" + ServerSettings.randomHex(8)
        if let id {
            let existing = try await couch.request(.get, "/\(TrackerService.placesDB)/\(TrackerService.encode(id))")
            guard existing.ok, let object = existing.json.objectValue, object["geometry"] != nil else { throw Failure(404, "not_found", "No place \(id)") }
            doc = object
        }
        doc["name"] = .string(name)
        doc["geometry"] = Geometry.point(position).geoJSON
        let saved = try await couch.request(.put, "/\(TrackerService.placesDB)/\(TrackerService.encode(placeID))", body: .object(doc))
        if saved.status == 409 { throw Failure(409, "conflict", "The place changed meanwhile; reload and try again") }
        try expect(saved, "save place \(placeID)")
        let release = try await bumpRelease()
        return ["ok": true, "id": .string(placeID), "rev": saved.json["rev"] ?? .null, "dataVersion": .int(release)]
    }

    /// Deletes a place; the places release is bumped.
    public func deletePlace(_ id: String) async throws -> JSON {
        guard id != TrackerService.releaseID, !id.hasPrefix("_") else { throw Failure(400, "bad_request", "\(id) is not a place") }
        let existing = try await couch.request(.get, "/\(TrackerService.placesDB)/\(TrackerService.encode(id))")
        guard existing.ok, let rev = existing.json["_rev"]?.stringValue else { throw Failure(404, "not_found", "No place \(id)") }
        let deleted = try await couch.request(.delete, "/\(TrackerService.placesDB)/\(TrackerService.encode(id))", query: ["rev": rev], body: nil)
        try expect(deleted, "delete place \(id)")
        return ["ok": true, "dataVersion": .int(try await bumpRelease())]
    }
}
