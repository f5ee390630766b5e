import CouchJSON
import Foundation
import Geo
import GRDB

/// Extracts the geometries a batch of documents indexes: for each document the GeoJSON values
/// its index function named (`st_index`), or nil for a document whose function failed.
public typealias GeometryExtractor = @Sendable ([JSONObject]) async throws -> [[JSON]?]

/// A geo index (`st_indexes` in a design document). Its rows are persisted in SQLite
/// (`geo_<signature>`: points as two numbers, other geometries as GeoJSON) and kept current
/// from the changes feed; queries run on an in-memory `SpatialIndex` loaded from those rows.
public struct GeoIndexDefinition: Sendable {
    public var signature: String
    public var extract: GeometryExtractor

    public init(code: String, extract: @escaping GeometryExtractor) {
        signature = GeoIndexDefinition.signature(code: code)
        self.extract = extract
    }

    /// The index name for an index function's code, without building a definition. (The
    /// second layout keeps each point's time; indexes of the first are rebuilt once.)
    public static func signature(code: String) -> String {
        ViewDefinition.signature(code: "geo2\u{0}" + code)
    }

    /// A document's time for the index (`created_at`, else `properties.timestamp`, in ms).
    static func time(of doc: JSONObject) -> Double? {
        (doc["created_at"] ?? doc["properties"]?["timestamp"])?.doubleValue
    }

    var table: String { "geo_" + signature }

    /// The extractor for index functions that only call `st_index(doc.geometry)` (under
    /// `if (doc.geometry && doc.geometry.coordinates)`, `if (doc.geometry)`, or none): read
    /// natively, no JavaScript per document. nil for any other function.
    public static func native(_ source: String) -> GeometryExtractor? {
        let compact = String(source.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) })
            .replacingOccurrences(of: ";", with: "")
        let needsCoordinates: Bool
        switch compact {
        case "function(doc){if(doc.geometry&&doc.geometry.coordinates){st_index(doc.geometry)}}",
             "function(doc){if(doc.geometry&&doc.geometry.coordinates)st_index(doc.geometry)}":
            needsCoordinates = true
        case "function(doc){if(doc.geometry){st_index(doc.geometry)}}", "function(doc){if(doc.geometry)st_index(doc.geometry)}",
             "function(doc){st_index(doc.geometry)}":
            needsCoordinates = false
        default:
            return nil
        }
        return { docs in
            docs.map { doc in
                guard let geometry = doc["geometry"], geometry.isTruthy else { return [] }
                if needsCoordinates, !(geometry["coordinates"]?.isTruthy ?? false) { return [] }
                return [geometry]
            }
        }
    }
}

extension JSON {
    /// JavaScript truthiness: not null, false, 0, NaN or "".
    var isTruthy: Bool {
        switch self {
        case .null: return false
        case let .bool(b): return b
        case let .int(i): return i != 0
        case let .double(d): return d != 0 && !d.isNaN
        case let .string(s): return !s.isEmpty
        case .array, .object: return true
        }
    }
}

/// What one geo index update did: documents skipped because their geometry is invalid or
/// their function failed (each with the reason, for the log).
public struct GeoIndexUpdate: Sendable {
    public var skipped: [(id: String, reason: String)] = []
}

extension Database {
    /// Brings a geo index up to date with the changes feed, in batches: extract geometries
    /// outside any transaction, then replace the changed documents' rows and move the
    /// checkpoint in one transaction, and apply the same changes to the loaded in-memory index.
    @discardableResult
    public func updateGeoIndex(_ index: GeoIndexDefinition) async throws -> GeoIndexUpdate {
        let table = index.table
        var report = GeoIndexUpdate()
        while true {
            let (since, changed) = try await reading { db -> (Int, [(id: String, seq: Int, doc: JSONObject?)]) in
                let since = try db.tableExists("geo_indexes")
                    ? (try Int.fetchOne(db, sql: "SELECT seq FROM geo_indexes WHERE name = ?", arguments: [table]) ?? 0) : 0
                return (since, try Database.changedDocuments(db, after: since, limit: 5000))
            }
            guard let last = changed.last?.seq else {
                if !(try await reading { db in try db.tableExists(table) }) {
                    _ = try await writer.write { db, _ in
                        try Database.createGeoTables(db, table)
                        try db.execute(sql: "UPDATE geo_indexes SET seq = max(seq, ?) WHERE name = ?", arguments: [since, table])
                        return true
                    }
                }
                return report
            }
            let live = changed.compactMap(\.doc)
            let extracted = live.isEmpty ? [] : try await index.extract(live)
            guard extracted.count == live.count else { throw EngineError.corrupt("geo index answer") }
            var geometries: [String: Geometry] = [:]
            var times: [String: Double] = [:]
            for (doc, values) in zip(live, extracted) {
                let id = doc["_id"]?.stringValue ?? ""
                if let time = GeoIndexDefinition.time(of: doc) { times[id] = time }
                guard let values else {
                    report.skipped.append((id, "the index function failed"))
                    continue
                }
                do {
                    let parsed = try values.map { try Geometry(geoJSON: $0) }
                    if parsed.count == 1 { geometries[id] = parsed[0] } else if parsed.count > 1 { geometries[id] = .collection(parsed) }
                } catch let error as GeometryError {
                    report.skipped.append((id, error.reason))
                }
            }
            let changes: [(id: String, geometry: Geometry?)] = changed.map { ($0.id, geometries[$0.id]) }
            let changedTimes = times
            let stored = try await writer.write { db, _ -> Bool in
                try Database.createGeoTables(db, table)
                let current = try Int.fetchOne(db, sql: "SELECT seq FROM geo_indexes WHERE name = ?", arguments: [table]) ?? 0
                guard current == since else { return false }  // another update got here first
                let delete = try db.makeStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
                let insert = try db.makeStatement(sql: "INSERT INTO \(table)(doc_id, lon, lat, geometry, t) VALUES (?, ?, ?, ?, ?)")
                for (id, geometry) in changes {
                    try delete.execute(arguments: [id])
                    switch geometry {
                    case let .point(c)?: try insert.execute(arguments: [id, c.lon, c.lat, nil, changedTimes[id]])
                    case let other?: try insert.execute(arguments: [id, nil, nil, other.geoJSON.text, changedTimes[id]])
                    case nil: break
                    }
                }
                try db.execute(sql: "UPDATE geo_indexes SET seq = ? WHERE name = ?", arguments: [last, table])
                return true
            }
            if stored {
                geoCache.withLock { cache in
                    guard let loaded = cache[table] else { return }
                    if loaded.seq == since {
                        loaded.index.apply(changes, times: changedTimes)
                        cache[table] = (last, loaded.index)
                    } else {
                        cache.removeValue(forKey: table)  // out of step: reload on next use
                    }
                }
            }
        }
    }

    static func createGeoTables(_ db: GRDB.Database, _ table: String) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS geo_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS \(table)(doc_id TEXT PRIMARY KEY NOT NULL, lon REAL, lat REAL, geometry TEXT, t REAL) WITHOUT ROWID;
            INSERT OR IGNORE INTO geo_indexes(name, seq) VALUES ('\(table)', 0);
            """)
    }

    /// The in-memory index, loaded from its persisted rows on first use (not rebuilt from
    /// the documents), and the sequence it reflects.
    func loadedGeoIndex(_ index: GeoIndexDefinition) async throws -> SpatialIndex {
        let table = index.table
        if let loaded = geoCache.withLock({ $0[table] }) { return loaded.index }
        let (seq, entries, times) = try await reading { db -> (Int, [(id: String, geometry: Geometry)], [Double]) in
            guard try db.tableExists(table) else { return (0, [], []) }
            let seq = try Int.fetchOne(db, sql: "SELECT seq FROM geo_indexes WHERE name = ?", arguments: [table]) ?? 0
            var entries: [(id: String, geometry: Geometry)] = []
            var times: [Double] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT doc_id, lon, lat, geometry, t FROM \(table)")
            while let row = try cursor.next() {
                if let lon = row[1] as Double?, let lat = row[2] as Double? {
                    entries.append((row[0], .point(Coordinate(lon: lon, lat: lat))))
                } else if let text = row[3] as String?, let geometry = try? Geometry(geoJSON: JSON.parse(text)) {
                    entries.append((row[0], geometry))
                } else {
                    continue
                }
                times.append(row[4] as Double? ?? .nan)
            }
            return (seq, entries, times)
        }
        let built = SpatialIndex(entries, times: times)
        return geoCache.withLock { cache in
            if let loaded = cache[table] { return loaded.index }
            cache[table] = (seq, built)
            return built
        }
    }

    /// Answers a geo query: brings the index up to date (unless `stale`), searches it, and
    /// reads the documents when asked. Returns the page, whether more follow, and the update's
    /// report (skipped documents).
    public func geoQuery(
        _ index: GeoIndexDefinition, _ request: GeoRequest
    ) async throws -> (hits: [(hit: GeoHit, doc: JSONObject?)], more: Bool, update: GeoIndexUpdate) {
        let (spatial, update) = try await currentGeoIndex(index, stale: request.stale)
        let (hits, more) = spatial.search(request.search)
        guard request.includeDocs else { return (hits.map { ($0, nil) }, more, update) }
        let docs = try await reading { db in
            try hits.map { hit -> JSONObject? in
                guard let row = try DocRow.fetch(db, id: hit.id), let winner = row.tree.winner, !winner.deleted else { return nil }
                return try Database.assemble(db, id: hit.id, rev: winner.rev, row: row, options: ReadOptions())
            }
        }
        return (Array(zip(hits, docs)), more, update)
    }

    /// Counts a geo index's points on a grid over a box (for maps of many points), after
    /// bringing the index up to date unless `stale`; see `SpatialIndex.grid`.
    public func geoGrid(_ index: GeoIndexDefinition, _ request: GeoGridRequest, stale: Bool = false) async throws -> GeoGrid {
        request.grid(of: try await currentGeoIndex(index, stale: stale).index)
    }

    /// The loaded index, first brought up to date unless `stale`. A loaded index that has seen
    /// the latest commit needs no look at the changes feed.
    func currentGeoIndex(_ index: GeoIndexDefinition, stale: Bool) async throws -> (index: SpatialIndex, update: GeoIndexUpdate) {
        let current = geoCache.withLock { $0[index.table].map { $0.seq >= notifier.latest } } ?? false
        let update = stale || current ? GeoIndexUpdate() : try await updateGeoIndex(index)
        return (try await loadedGeoIndex(index), update)
    }

    /// Documents in a geo index and its size on disk (`_geo_info`).
    public func geoIndexInfo(_ index: GeoIndexDefinition) async throws -> (docCount: Int, diskSize: Int, dataSize: Int) {
        let spatial = try await loadedGeoIndex(index)
        let table = index.table
        let disk = try await reading { db in
            (try? Int.fetchOne(db, sql: "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?", arguments: [table])) ?? 0
        }
        return (spatial.count, disk, spatial.bytes)
    }

    /// Drops geo indexes whose signature is not in `keep` (`_geo_cleanup`), with their memory.
    public func dropGeoIndexes(except keep: Set<String>) async throws {
        let dropped = try await writer.write { db, _ -> [String] in
            guard try db.tableExists("geo_indexes") else { return [] }
            var dropped: [String] = []
            for table in try String.fetchAll(db, sql: "SELECT name FROM geo_indexes") where !keep.contains(String(table.dropFirst("geo_".count))) {
                try db.execute(sql: "DROP TABLE IF EXISTS \(table)")
                try db.execute(sql: "DELETE FROM geo_indexes WHERE name = ?", arguments: [table])
                dropped.append(table)
            }
            return dropped
        }
        geoCache.withLock { cache in for table in dropped { cache.removeValue(forKey: table) } }
    }
}
