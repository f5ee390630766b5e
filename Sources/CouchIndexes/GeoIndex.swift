public import CouchEngine
public import CouchJSON
import Foundation
public import Geo
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
    /// Where a document's time is (ms since 1970), first present number wins: field paths
    /// from the definition's `time` member (`"created_at"` or `["created_at", "properties.timestamp"]`).
    /// Without it points carry no time, and `_geo_grid`'s time window leaves them out.
    public var timeFields: [[String]]

    /// `timeFields` are part of the index: a changed list is a new index.
    public init(code: String, timeFields: [[String]] = [], extract: @escaping GeometryExtractor) {
        signature = GeoIndexDefinition.signature(code: code, timeFields: timeFields)
        self.timeFields = timeFields
        self.extract = extract
    }

    /// The index name for an index function's code and time fields, without building a
    /// definition. (The second layout keeps each point's time; indexes of the first are
    /// rebuilt once.)
    public static func signature(code: String, timeFields: [[String]] = []) -> String {
        let time =
            timeFields.isEmpty
            ? "" : "\u{0}time\u{0}" + timeFields.map { $0.joined(separator: ".") }.joined(separator: "\u{0}")
        return ViewDefinition.digest("geo2\u{0}" + code + time)
    }

    /// The `time` member of an `st_indexes` entry as field paths: a dotted path or a list of them.
    public static func timeFields(_ member: JSON?) throws(CouchError) -> [[String]] {
        guard let member else { return [] }
        let paths = member.stringValue.map { [$0] } ?? member.arrayValue?.compactMap(\.stringValue)
        guard let paths, !paths.isEmpty, paths.count == (member.arrayValue?.count ?? 1),
            paths.allSatisfy({ !$0.isEmpty })
        else {
            throw .badRequest("an st_indexes time must be a field path (\"created_at\") or a list of them")
        }
        return paths.map { $0.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }
    }

    /// A document's time for the index: the first of `timeFields` holding a number.
    func time(of doc: JSONObject) -> Double? {
        for path in timeFields {
            var value: JSON? = .object(doc)
            for field in path { value = value?[field] }
            if let number = value?.doubleValue { return number }
        }
        return nil
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
        case "function(doc){if(doc.geometry){st_index(doc.geometry)}}",
            "function(doc){if(doc.geometry)st_index(doc.geometry)}",
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

/// A geo index as a `SecondaryIndex`: each changed document's geometry (a point as two
/// numbers, anything else as GeoJSON) and time replace the old ones.
struct GeoRows: SecondaryIndex {
    /// Each changed document's geometry (nil: none) and time, in the order of the changes (by
    /// position: Swift's `String` equality would take the ids `é` and `e\u{301}` for one), and
    /// the documents skipped because their geometry is invalid or their function failed.
    typealias Batch = (
        changes: [(id: String, geometry: Geometry?, time: Double?)], skipped: [(id: String, reason: String)]
    )

    let index: GeoIndexDefinition
    static let registry = "geo_indexes"
    var table: String { index.table }
    var batchSize: Int { 5000 }

    func createTables(_ db: GRDB.Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS geo_indexes(name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS \(table)(doc_id TEXT PRIMARY KEY NOT NULL, lon REAL, lat REAL, geometry TEXT, t REAL) WITHOUT ROWID;
                INSERT OR IGNORE INTO geo_indexes(name, seq) VALUES ('\(table)', 0);
                """)
    }

    func prepare(_ changed: [ChangedDocument]) async throws -> Batch {
        let documents = try changed.map { try $0.document() }
        let live = documents.compactMap { $0 }
        let extracted = live.isEmpty ? [] : try await index.extract(live)
        guard extracted.count == live.count else { throw CouchError.corrupt("geo index answer") }
        var changes: [(id: String, geometry: Geometry?, time: Double?)] = []
        var skipped: [(id: String, reason: String)] = []
        var next = zip(live, extracted).makeIterator()
        for (change, document) in zip(changed, documents) {
            guard document != nil, let (doc, values) = next.next() else {
                changes.append((change.id, nil, nil))
                continue
            }
            let time = index.time(of: doc)
            guard let values else {
                skipped.append((change.id, "the index function failed"))
                changes.append((change.id, nil, time))
                continue
            }
            do {
                let parsed = try values.map { try Geometry(geoJSON: $0) }
                changes.append(
                    (change.id, parsed.count == 1 ? parsed[0] : parsed.count > 1 ? .collection(parsed) : nil, time))
            } catch let error as GeometryError {
                skipped.append((change.id, error.reason))
                changes.append((change.id, nil, time))
            }
        }
        return (changes, skipped)
    }

    func store(_ batch: Batch, changed: [ChangedDocument], in db: GRDB.Database) throws {
        // A row replaced in one statement (the table's key is the id), removed when the
        // document has no geometry; bound through SQLite's C API (`DirectStatement`): a
        // million points' build spent a fifth of its time in the wrapper's per-call arguments.
        let delete = try db.cachedStatement(sql: "DELETE FROM \(table) WHERE doc_id = ?")
        let replace = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO \(table)(doc_id, lon, lat, geometry, t) VALUES (?, ?, ?, ?, ?)")
        for (id, geometry, time) in batch.changes {
            let t = time.map(DirectValue.real) ?? .null
            switch geometry {
            case let .point(c)?: try replace.run(.text(id), .real(c.lon), .real(c.lat), .null, t)
            case let other?: try replace.run(.text(id), .null, .null, .text(other.geoJSON.text), t)
            case nil: try delete.run(.text(id))
            }
        }
    }
}

extension SpatialIndex: LoadedIndex {
    package func remove(_ ids: [String]) {
        apply(ids.map { ($0, nil) }, times: [:])
    }
}

/// The geo indexes of one database (`db.geo`): brought up to date, kept in memory beside their
/// tables, queried (radius, box, polygon, nearest first), gridded, measured and dropped.
public struct GeoIndexes: Sendable {
    public let database: DocumentDatabase

    /// Brings a geo index up to date with the changes feed, and applies the same changes to
    /// the loaded in-memory index (reloaded on next use when it is out of step).
    @discardableResult
    public func update(_ index: GeoIndexDefinition) async throws -> GeoIndexUpdate {
        var report = GeoIndexUpdate()
        let table = index.table
        try await database.catchUp(GeoRows(index: index)) { batch, since, last in
            report.skipped += batch.skipped
            database.loadedIndexes.withLock { cache in
                guard let loaded = cache[table], let spatial = loaded.index as? SpatialIndex else { return }
                if loaded.seq == since {
                    var times: [String: Double] = [:]
                    for change in batch.changes { times[change.id] = change.time }
                    spatial.apply(batch.changes.map { ($0.id, $0.geometry) }, times: times)
                    cache[table] = (last, spatial)
                } else {
                    cache.removeValue(forKey: table)  // out of step: reload on next use
                }
            }
        }
        return report
    }

    /// The in-memory index, loaded from its persisted rows on first use (not rebuilt from
    /// the documents), and the sequence it reflects.
    func loaded(_ index: GeoIndexDefinition) async throws -> SpatialIndex {
        let table = index.table
        if let loaded = database.loadedIndexes.withLock({ $0[table]?.index as? SpatialIndex }) { return loaded }
        let (seq, entries, times) = try await database.reading {
            db -> (Int, [(id: String, geometry: Geometry)], [Double]) in
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
        return database.loadedIndexes.withLock { cache in
            if let loaded = cache[table]?.index as? SpatialIndex { return loaded }
            cache[table] = (seq, built)
            return built
        }
    }

    /// Answers a geo query: brings the index up to date (unless `stale`), searches it, and
    /// reads the documents when asked. Returns the page, whether more follow, and the update's
    /// report (skipped documents).
    public func query(
        _ index: GeoIndexDefinition, _ request: GeoRequest
    ) async throws -> (hits: [(hit: GeoHit, doc: JSONObject?)], more: Bool, update: GeoIndexUpdate) {
        let (spatial, update) = try await current(index, stale: request.stale)
        let (hits, more) = spatial.search(request.search)
        guard request.includeDocs else { return (hits.map { ($0, nil) }, more, update) }
        let docs = try await database.reading { db in
            try hits.map { hit -> JSONObject? in
                try StoredDocument.winningDocument(db, id: hit.id)
            }
        }
        return (Array(zip(hits, docs)), more, update)
    }

    /// Counts a geo index's points on a grid over a box (for maps of many points), after
    /// bringing the index up to date unless `stale`; see `SpatialIndex.grid`.
    public func grid(
        _ index: GeoIndexDefinition, _ request: GeoGridRequest, stale: Bool = false
    ) async throws -> GeoGrid {
        request.grid(of: try await current(index, stale: stale).index)
    }

    /// The loaded index, first brought up to date unless `stale` (an index that has seen the
    /// latest commit costs the catch-up nothing).
    func current(_ index: GeoIndexDefinition, stale: Bool) async throws -> (index: SpatialIndex, update: GeoIndexUpdate)
    {
        let update = stale ? GeoIndexUpdate() : try await update(index)
        return (try await loaded(index), update)
    }

    /// Documents in a geo index and its size on disk (`_geo_info`).
    public func info(_ index: GeoIndexDefinition) async throws -> (docCount: Int, diskSize: Int, dataSize: Int) {
        let spatial = try await loaded(index)
        let table = index.table
        let disk = try await database.reading { db in
            (try? Int.fetchOne(
                db, sql: "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?", arguments: [table])) ?? 0
        }
        return (spatial.count, disk, spatial.bytes)
    }

    /// Drops geo indexes whose signature is not in `keep` (`_geo_cleanup`), with their memory.
    public func drop(except keep: Set<String>) async throws {
        try await database.dropIndexes(registry: GeoRows.registry, keeping: Set(keep.map { "geo_" + $0 }))
    }
}

extension DocumentDatabase {
    /// This database's geo indexes.
    public var geo: GeoIndexes { GeoIndexes(database: self) }
}
