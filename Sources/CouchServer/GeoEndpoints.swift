import CouchEngine
import CouchIndexes
import CouchJSON
import Foundation
import Geo
import HTTPTypes
import Hummingbird
import JavaScript
import Logging

/// Cloudant Geo's HTTP API: `_geo`, `_geo_info`, `_geo_cleanup`, over `st_indexes` in design
/// documents.
struct GeoEndpoints: Sendable {
    let api: CouchAPI

    /// An `st_indexes` function's source, the code its index is named after (the source, plus
    /// the `views.lib` modules a JavaScript function may `require`), and where its documents'
    /// times are (its `time` member, our addition: Cloudant ignores it).
    static func geoIndexCode(
        _ ddoc: JSONObject, _ name: String
    ) throws(CouchError) -> (source: String, code: String, timeFields: [[String]])? {
        guard let entry = ddoc["st_indexes"]?[name], let source = entry["index"]?.stringValue else { return nil }
        let timeFields = try GeoIndexDefinition.timeFields(entry["time"])
        if GeoIndexDefinition.native(source) != nil { return (source, source, timeFields) }
        return (source, source + "\u{0}" + (ddoc["views"]?["lib"]?.text ?? ""), timeFields)
    }

    /// The geo index `name` of a design document, remembered per design document revision.
    func geoIndex(_ db: DocumentDatabase, _ ddoc: JSONObject, _ name: String) throws -> GeoIndexDefinition {
        let key = "\(db.name)\u{0}\(ddoc["_id"]?.stringValue ?? "")\u{0}\(ddoc["_rev"]?.stringValue ?? "")\u{0}\(name)"
        if let known = api.geoDefinitions.withLock({ $0[key] }) { return known }
        let definition = try geoIndex(ddoc, name)
        api.geoDefinitions.withLock { cache in
            if cache.count >= 1000 { cache.removeAll() }
            cache[key] = definition
        }
        return definition
    }

    /// The geo index `name` of a design document. Index functions that only call
    /// `st_index(doc.geometry)` are read natively; others run in the query server.
    func geoIndex(_ ddoc: JSONObject, _ name: String) throws -> GeoIndexDefinition {
        guard let (source, code, timeFields) = try GeoEndpoints.geoIndexCode(ddoc, name) else {
            throw CouchError.notFound(
                "missing st_index function \(name) in \(ddoc["_id"]?.stringValue ?? "the design document")")
        }
        if let native = GeoIndexDefinition.native(source) {
            return GeoIndexDefinition(code: code, timeFields: timeFields, extract: native)
        }
        let functions = try api.design.designFunctions()
        let lib = ddoc["views"]?["lib"]
        let key = GeoIndexDefinition.signature(code: code)
        return GeoIndexDefinition(code: code, timeFields: timeFields) { docs in
            let results = try await DesignFunctions.translating {
                try await functions.queryServer.map(key: key, functions: [source], lib: lib, documents: docs)
            }
            return results.map { perFunction in perFunction.first.flatMap { $0 }.map { rows in rows.map(\.key) } }
        }
    }

    /// `GET /{db}/_design/{ddoc}/_geo/{index}`.
    func geo(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        try request.requireMethod(.get)
        guard rest.count == 2 else { throw CouchError.notFound("missing geo index name") }
        let index = try geoIndex(db, try await api.design.designDocument(db, ddocID), rest[1])
        let geoRequest: GeoRequest
        let maxLimit = api.config.integer("geo", "max_limit", default: GeoRequest.maxLimit)
        do {
            geoRequest = try GeoRequest(parameters: request.query, accept: request.header("Accept"), maxLimit: maxLimit)
        } catch let error as GeometryError {
            throw CouchError.badRequest(error.reason)
        }
        let result = try await db.geo.query(index, geoRequest)
        logSkipped(result.update, db: db, index: "\(ddocID)/\(rest[1])")
        if request.query["stale"] == "update_after" {
            // Answered from the index as it was; bring it up to date afterwards.
            Task { [logger = api.logger] in
                do { try await db.geo.update(index) } catch { logger.warning("geo index update failed: \(error)") }
            }
        }
        let bookmark = GeoRequest.bookmark(after: result.hits.last?.hit.position ?? geoRequest.search.after)
        switch geoRequest.format {
        case .view:
            return .json(bytes: Self.geoRows(result.hits, bookmark: bookmark, includeDocs: geoRequest.includeDocs))
        case .geojson: return geoFeatures(result.hits, bookmark: bookmark, request)
        case .legacy: return Self.legacyGeoFeatures(result.hits, bookmark: bookmark)
        }
    }

    /// The common answer, written straight to bytes: `{"bookmark","rows":[{"id","geometry"[,"doc"]}]}`.
    static func geoRows(_ hits: [(hit: GeoHit, doc: JSONObject?)], bookmark: String, includeDocs: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + hits.count * (includeDocs ? 400 : 110))
        out += #"{"bookmark":"#.utf8
        JSON.writeString(bookmark, to: &out)
        out += #","rows":["#.utf8
        for (i, (hit, doc)) in hits.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += #"{"id":"#.utf8
            JSON.writeString(hit.id, to: &out)
            out += #","geometry":"#.utf8
            if case let .point(c) = hit.geometry {
                out += #"{"type":"Point","coordinates":["#.utf8
                JSON.writeDouble(c.lon, to: &out)
                out.append(UInt8(ascii: ","))
                JSON.writeDouble(c.lat, to: &out)
                out += "]}".utf8
            } else {
                hit.geometry.geoJSON.write(to: &out)
            }
            if includeDocs {
                out += #","doc":"#.utf8
                (doc.map(JSON.object) ?? .null).write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out += "]}\n".utf8
        return out
    }

    /// `format=geojson`: a GeoJSON `FeatureCollection` (typed `application/vnd.geo+json` when asked).
    func geoFeatures(_ hits: [(hit: GeoHit, doc: JSONObject?)], bookmark: String, _ request: APIRequest) -> APIResponse
    {
        let features: [JSON] = hits.map { hit, doc in
            var feature: JSONObject = ["_id": .string(hit.id)]
            if let doc {
                feature["_rev"] = doc["_rev"] ?? .null
                feature["geometry"] = hit.geometry.geoJSON
                feature["type"] = doc["type"] ?? "Feature"
                feature["properties"] = doc["properties"] ?? [:]
            } else {
                feature["geometry"] = hit.geometry.geoJSON
                feature["type"] = "Feature"
                feature["properties"] = [:]
            }
            return .object(feature)
        }
        var response = APIResponse.json([
            "bookmark": .string(bookmark), "type": "FeatureCollection", "features": .array(features),
        ])
        if request.header("Accept")?.contains("application/vnd.geo+json") == true
            || request.query["format"] == "application/vnd.geo+json"
        {
            response.headers[.contentType] = "application/vnd.geo+json"
        }
        return response
    }

    /// `format=legacy`: features with the documents' own members.
    static func legacyGeoFeatures(_ hits: [(hit: GeoHit, doc: JSONObject?)], bookmark: String) -> APIResponse {
        let features: [JSON] = hits.map { hit, doc in
            var feature: JSONObject = ["id": .string(hit.id)]
            if let doc {
                for (key, value) in doc.members where key != "_id" && key != "_rev" { feature[key] = value }
                if feature["type"] == nil { feature["type"] = "Feature" }
            }
            return .object(feature)
        }
        return .json(["bookmark": .string(bookmark), "features": .array(features), "type": "FeatureCollection"])
    }

    /// Documents whose geometry could not be indexed are skipped and logged (the first ten of
    /// an update one by one, then a count).
    func logSkipped(_ update: GeoIndexUpdate, db: DocumentDatabase, index: String) {
        for (id, reason) in update.skipped.prefix(10) {
            api.logger.warning("geo index \(db.name)/\(index): skipped \(id): \(reason)")
        }
        if update.skipped.count > 10 {
            api.logger.warning("geo index \(db.name)/\(index): skipped \(update.skipped.count - 10) more documents")
        }
    }

    /// `GET /{db}/_design/{ddoc}/_geo_info/{index}`.
    func geoInfo(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        try request.requireMethod(.get)
        guard rest.count == 2 else { throw CouchError.notFound("missing geo index name") }
        let index = try geoIndex(db, try await api.design.designDocument(db, ddocID), rest[1])
        let update = try await db.geo.update(index)
        logSkipped(update, db: db, index: "\(ddocID)/\(rest[1])")
        let info = try await db.geo.info(index)
        return .json([
            "name": .string("\(ddocID)/\(rest[1])"),
            "geo_index": [
                "doc_count": .int(info.docCount), "disk_size": .int(info.diskSize), "data_size": .int(info.dataSize),
            ],
        ])
    }

    /// `GET /{db}/_design/{ddoc}/_geo_grid/{index}?bbox=minLon,minLat,maxLon,maxLat&columns=&rows=`
    /// (a LocationTracker extension, for maps of many points): the index's points in the box
    /// counted on a grid of at most 200 × 200 cells, optionally only those whose time
    /// (`created_at`) lies in `from`…`to` (ms) and whose id starts with `prefix`; the points
    /// themselves when there are at most `points` (≤ 5,000). Answers
    /// `{"total", "columns", "rows", "cells": [[row, column, count, lat, lon]], "points": [[lat, lon, id, time]]}`.
    func geoGrid(
        _ db: DocumentDatabase, _ ddocID: String, _ rest: [String], _ request: APIRequest
    ) async throws -> APIResponse {
        try request.requireMethod(.get)
        guard rest.count == 2 else { throw CouchError.notFound("missing geo index name") }
        let index = try geoIndex(db, try await api.design.designDocument(db, ddocID), rest[1])
        let grid: GeoGridRequest
        do { grid = try GeoGridRequest(parameters: request.query) } catch { throw CouchError.badRequest(error.reason) }
        return .json(bytes: grid.json(try await db.geo.grid(index, grid, stale: request.query["stale"] == "ok")))
    }

    /// `POST /{db}/_geo_cleanup`: drops geo indexes no design document defines any more.
    func geoCleanup(_ db: DocumentDatabase) async throws {
        var live: Set<String> = []
        for ddoc in try await db.designDocuments() {
            for name in ddoc["st_indexes"]?.objectValue?.keys ?? [] {
                if let (_, code, timeFields) = try? GeoEndpoints.geoIndexCode(ddoc, name) {
                    live.insert(GeoIndexDefinition.signature(code: code, timeFields: timeFields))
                }
            }
        }
        try await db.geo.drop(except: live)
    }
}
