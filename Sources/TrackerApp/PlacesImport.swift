public import CouchJSON
import CouchProtocol
import Crypto
import Foundation
import HTTPTypes
import Logging

/// Importing places into `lt_places` so that repeating an import changes nothing: every place
/// has a stable id (its own `_id` or `id`, else one made from its name and geometry), an
/// import updates the places it already holds, leaves identical ones alone, and bumps the
/// places release once when anything changed (devices pull `lt_places` only when it grew).
extension PlaceCatalog {
    /// What an import did.
    public struct PlacesImport: Sendable {
        public var created = 0
        public var updated = 0
        public var unchanged = 0
        /// Places that could not be stored: id and reason.
        public var failed: [(id: String, reason: String)] = []
        /// The places release after the import (unchanged when nothing was written).
        public var dataVersion: Int?

        public var json: JSON {
            var out: JSONObject = [
                "ok": .bool(failed.isEmpty), "created": .int(created), "updated": .int(updated),
                "unchanged": .int(unchanged),
            ]
            out["failed"] = .array(failed.map { ["id": .string($0.id), "reason": .string($0.reason)] })
            if let dataVersion { out["dataVersion"] = .int(dataVersion) }
            return .object(out)
        }
    }

    /// The id a place is stored under: its `_id`, its GeoJSON `id`, or, for a feature with
    /// neither, `place-` and 16 hex digits of a SHA-256 of its name and geometry, so the same
    /// feature imported again gets the same id.
    public static func placeID(_ feature: JSONObject) -> String {
        if let id = feature["_id"]?.stringValue, !id.isEmpty { return id }
        if let id = feature["id"] { return id.stringValue ?? id.text }
        let identity = JSON.array([feature["name"] ?? .null, feature["geometry"] ?? .null]).bytes
        return "place-" + SHA256.hash(data: identity).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The features as place documents (`_id` from the feature's id or name), each with a
    /// geometry (400 otherwise).
    static func placeDocuments(_ features: [JSON]) throws -> [(id: String, doc: JSONObject)] {
        var places: [(id: String, doc: JSONObject)] = []
        var positions: [String: Int] = [:]
        for (index, feature) in features.enumerated() {
            guard var doc = feature.objectValue, doc["geometry"]?.objectValue != nil else {
                throw Failure(400, "bad_request", "Feature \(index) has no geometry")
            }
            let id = PlaceCatalog.placeID(doc)
            guard !id.hasPrefix("_"), id != TrackerService.releaseID else {
                throw Failure(400, "bad_request", "Feature \(index): \(id) cannot name a place")
            }
            doc.removeValue(forKey: "id")
            doc.removeValue(forKey: "_rev")
            doc.removeValue(forKey: "_id")
            doc.prepend("_id", .string(id))
            // The same id twice in one file: the later feature wins.
            if let earlier = positions[id] {
                places[earlier].doc = doc
            } else {
                positions[id] = places.count
                places.append((id, doc))
            }
        }
        return places
    }

    /// Imports GeoJSON features (or the original `places` list) into `lt_places`. Each must
    /// have a geometry. A place already stored takes the file's members and keeps the others
    /// (`created_at`, the positions of approved corrections); a new one gets `created_at` now. With
    /// `announce`, a change bumps the places release (the first seeding of a new server does
    /// not: its release starts at 1).
    public func importPlaces(_ features: [JSON], announce: Bool = true) async throws -> PlacesImport {
        let places = try Self.placeDocuments(features)
        var result = PlacesImport()
        let now = JSON.millisecondsNow()
        for start in stride(from: 0, to: places.count, by: 1000) {
            let chunk = places[start..<min(places.count, start + 1000)]
            let stored = try await couch.request(
                .post, "/\(TrackerService.placesDB)/_all_docs", query: ["include_docs": "true"],
                body: ["keys": .array(chunk.map { .string($0.id) })])
            try expect(stored, "read the stored places")
            var existing: [String: JSONObject] = [:]
            for row in stored.json["rows"]?.arrayValue ?? [] {
                if let id = row["id"]?.stringValue, let doc = row["doc"]?.objectValue { existing[id] = doc }
            }
            var writes: [JSON] = []
            var kinds: [Bool] = []  // true: an update
            for (id, imported) in chunk {
                var doc = imported
                if let old = existing[id] {
                    // What the file says wins; what it does not mention (created_at, a
                    // correction's previousPositions) is kept.
                    doc = old
                    for (key, value) in imported where key != "_id" { doc[key] = value }
                    if PlaceCatalog.samePlace(old, doc) {
                        result.unchanged += 1
                        continue
                    }
                    doc["_rev"] = old["_rev"]
                    kinds.append(true)
                } else {
                    if doc["created_at"] == nil { doc["created_at"] = now }
                    kinds.append(false)
                }
                writes.append(.object(doc))
            }
            guard !writes.isEmpty else { continue }
            let saved = try await couch.request(
                .post, "/\(TrackerService.placesDB)/_bulk_docs", body: ["docs": .array(writes)])
            try expect(saved, "store places")
            for (row, isUpdate) in zip(saved.json.arrayValue ?? [], kinds) {
                if row["ok"] == true {
                    if isUpdate { result.updated += 1 } else { result.created += 1 }
                } else {
                    result.failed.append(
                        (
                            row["id"]?.stringValue ?? "?",
                            row["reason"]?.stringValue ?? row["error"]?.stringValue ?? "not stored"
                        ))
                }
            }
        }
        if announce, result.created + result.updated > 0 { result.dataVersion = try await bumpRelease() }
        logger.info(
            "imported places: \(result.created) new, \(result.updated) updated, \(result.unchanged) unchanged, \(result.failed.count) failed"
        )
        return result
    }

    /// Whether a stored place already says what an imported one says (ignoring `_rev` and
    /// the order of members).
    static func samePlace(_ stored: JSONObject, _ imported: JSONObject) -> Bool {
        var a = stored, b = imported
        a.removeValue(forKey: "_rev")
        b.removeValue(forKey: "_rev")
        guard a.count == b.count else { return false }
        return a.members.allSatisfy { key, value in b[key] == value }
    }
}
