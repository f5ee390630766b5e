public import CouchJSON
import CouchProtocol
import Foundation
public import ExternalSort
public import Geo

/// Which locations an analysis asks for: one user (their own database) or everyone
/// (`lt_locations_all`), a time window on `created_at` (ms), and an area.
public struct LocationFilter: Sendable {
    public var user: String?
    public var from: Double?
    public var to: Double?
    public var area: QueryShape?

    public init(user: String? = nil, from: Double? = nil, to: Double? = nil, area: QueryShape? = nil) {
        self.user = user
        self.from = from
        self.to = to
        self.area = area
    }

    /// From query parameters: `user`, `from`/`to` (ms since 1970), `bbox` (minLon,minLat,maxLon,maxLat)
    /// or `lat`+`lon`+`radius` (metres).
    public init(parameters: [String: String]) throws {
        if let user = parameters["user"] { try TrackerService.validate(username: user) }
        user = parameters["user"]
        func number(_ name: String) throws -> Double? {
            guard let text = parameters[name] else { return nil }
            guard let value = Double(text), value.isFinite else {
                throw TrackerService.Failure(400, "bad_request", "`\(name)` must be a number")
            }
            return value
        }
        from = try number("from")
        to = try number("to")
        if parameters["bbox"] != nil || parameters["lat"] != nil || parameters["lon"] != nil
            || parameters["radius"] != nil
        {
            do {
                let request = try GeoRequest(
                    parameters: parameters.filter { ["bbox", "lat", "lon", "radius"].contains($0.key) })
                area = request.search.shape
            } catch let error as GeometryError {
                throw TrackerService.Failure(400, "bad_request", error.reason)
            }
        }
    }

    /// The point and time of a location document, if it is one this filter keeps.
    func accept(_ doc: JSON) -> (point: Coordinate, time: Double)? {
        guard let coordinates = doc["geometry"]?["coordinates"], doc["geometry"]?["type"] == "Point",
            let lon = coordinates[0]?.doubleValue, let lat = coordinates[1]?.doubleValue
        else { return nil }
        let time = doc["created_at"]?.doubleValue ?? doc["properties"]?["timestamp"]?.doubleValue ?? 0
        if let from, time < from { return nil }
        if let to, time > to { return nil }
        let point = Coordinate(lon: lon, lat: lat)
        if let area, !area.matches(.intersects, .point(point)) { return nil }
        return (point, time)
    }
}

extension LocationReports {
    /// Calls `visit` with each page of location documents the filter keeps, reading the
    /// database in pages of 2,000, so an export of millions holds one page at a time.
    public func forEachLocation(
        _ filter: LocationFilter, _ visit: ([(doc: JSON, point: Coordinate, time: Double)]) async throws -> Void
    ) async throws {
        var db = filter.user.map(TrackerService.locationDB(for:)) ?? TrackerService.allLocationsDB
        var range: (String, String)?
        if mode == .singleDatabase {
            db = TrackerService.sharedLocationsDB
            range = try filter.user.map(TrackerService.namespace(of:)).map { ($0.prefix, $0.upperBound) }
        }
        let found = try await forEachPage(of: db, size: 2000, includeDocs: true, range: range) { rows in
            var page: [(doc: JSON, point: Coordinate, time: Double)] = []
            for row in rows {
                guard let doc = row["doc"], let id = doc["_id"]?.stringValue, !id.hasPrefix("_design/") else {
                    continue
                }
                if let (point, time) = filter.accept(doc) { page.append((doc, point, time)) }
            }
            if !page.isEmpty { try await visit(page) }
        }
        if !found { throw Failure(404, "not_found", "No locations for \(filter.user ?? "anyone")") }
    }

    /// The locations the filter keeps as records of an export format, put in order of user and
    /// then time by an `ExternalSorter`: read page by page into its temporary file, so ordering a
    /// million locations costs disk, not memory. Throws (404) before anything is written when
    /// there are no locations to read.
    public func sortedExport(_ filter: LocationFilter, _ format: ExportFormat) async throws -> ExternalSorter {
        let sorter: ExternalSorter
        do { sorter = try ExternalSorter() } catch {
            throw Failure(500, "internal_server_error", "Cannot open a temporary file to sort the export in: \(error)")
        }
        try await forEachLocation(filter) { page in
            try await sorter.append(
                page.map { location in
                    let owner = owner(of: location.doc, filter: filter)
                    return SortedRow(
                        group: owner, time: location.time,
                        body: format.record(
                            location.doc, location.point, location.time, owner: owner,
                            id: exportID(of: location.doc, filter: filter)))
                })
        }
        return sorter
    }

    /// Whose a location is: the filter's user (their own database), else the owner its id is
    /// kept under (`<owner>:<id>`, in `lt_locations_all` as in the shared database) — never
    /// what the document says of itself (`properties.username`), which its writer chose.
    func owner(of doc: JSON, filter: LocationFilter) -> String {
        if let user = filter.user { return user }
        return doc["_id"]?.stringValue.flatMap(OwnerNamespace.owner(ofStored:)) ?? ""
    }

    /// A location's id in an export: as `lt_locations_all` and the shared database keep it,
    /// `<user>:<id>`, also when it was read from the user's own database — so every export
    /// names a location the same way, and the ids of two users never collide.
    func exportID(of doc: JSON, filter: LocationFilter) -> String {
        let id = doc["_id"]?.stringValue ?? ""
        guard mode == .databasePerUser, let user = filter.user, let namespace = OwnerNamespace(owner: user) else {
            return id
        }
        return namespace.stored(id)
    }

    /// Per-user statistics: count, first and last fix, and distance travelled (great-circle
    /// between consecutive fixes in time order; only times and positions are held, 24 bytes each).
    public func statistics(user: String) async throws -> JSON {
        try await requireRegistered(user)
        var fixes: [(time: Double, point: Coordinate)] = []
        try await forEachLocation(LocationFilter(user: user)) { page in fixes += page.map { ($0.time, $0.point) } }
        fixes.sort { $0.time < $1.time }
        var distance = 0.0
        for (a, b) in zip(fixes, fixes.dropFirst()) { distance += Sphere.distance(a.point, b.point) }
        return [
            "user": .string(user), "count": .int(fixes.count),
            "first": fixes.first.map { .double($0.time) } ?? .null,
            "last": fixes.last.map { .double($0.time) } ?? .null,
            "distance_m": .double((distance * 10).rounded() / 10),
        ]
    }
}

/// Export formats for locations.
public enum ExportFormat: String, Sendable, CaseIterable {
    case geojson, csv, gpx

    public var contentType: String {
        switch self {
        case .geojson: return "application/geo+json"
        case .csv: return "text/csv; charset=utf-8"
        case .gpx: return "application/gpx+xml"
        }
    }

    /// The file name a download of `filter`'s locations gets: whose, which days, and the format's
    /// extension (`locations-ann-2026-05-01-to-2026-05-31.gpx`, `locations-everyone.csv`).
    public func fileName(for filter: LocationFilter) -> String {
        func day(_ ms: Double) -> String {
            Date(timeIntervalSince1970: ms / 1000).formatted(Date.ISO8601FormatStyle().year().month().day())
        }
        var name = "locations-" + (filter.user ?? "everyone")  // user names are [a-z0-9_-]
        switch (filter.from, filter.to) {
        case let (from?, to?): name += "-\(day(from))-to-\(day(to))"
        case let (from?, nil): name += "-from-\(day(from))"
        case let (nil, to?): name += "-to-\(day(to))"
        case (nil, nil): break
        }
        if filter.area != nil { name += "-area" }
        return name + "." + rawValue
    }

    /// One location of `owner` in this format under `id`, without what separates or groups
    /// records (`ExportWriter` adds that): a GeoJSON feature, a CSV line, a GPX track point.
    /// The owner is the one the server knows; a `username` the document claims is replaced by it.
    public func record(_ doc: JSON, _ point: Coordinate, _ time: Double, owner: String, id: String) -> [UInt8] {
        switch self {
        case .geojson:
            var properties = doc["properties"]?.objectValue ?? JSONObject()
            if !owner.isEmpty || properties["username"] != nil { properties["username"] = .string(owner) }
            if properties["created_at"] == nil, let created = doc["created_at"] { properties["created_at"] = created }
            let feature: JSON = [
                "type": "Feature", "id": .string(id), "geometry": doc["geometry"] ?? .null,
                "properties": .object(properties),
            ]
            return feature.bytes
        case .csv:
            func field(_ value: JSON?) -> String {
                guard let value, value != .null else { return "" }
                let text = value.stringValue ?? value.text
                return text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" })
                    ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
            }
            let columns = [
                field(.string(id)), field(.string(owner)), field(.double(time)),
                field(.double(point.lat)), field(.double(point.lon)), field(doc["properties"]?["accuracy"]),
            ]
            return Array((columns.joined(separator: ",") + "\n").utf8)
        case .gpx:
            let date = Date(timeIntervalSince1970: time / 1000)
            let stamp = date.formatted(
                Date.ISO8601FormatStyle(includingFractionalSeconds: time.truncatingRemainder(dividingBy: 1000) != 0))
            return Array("<trkpt lat=\"\(point.lat)\" lon=\"\(point.lon)\"><time>\(stamp)</time></trkpt>\n".utf8)
        }
    }
}

/// Writes an export from records given in order of user, then time (`ExternalSorter`'s order):
/// the format's header, separators and footer, and for GPX one track per user (named after
/// them) with one segment per day (UTC).
public struct ExportWriter: Sendable {
    public let format: ExportFormat
    private var current: (user: String, day: Int64)?
    private var written = 0

    public init(_ format: ExportFormat) {
        self.format = format
    }

    /// What comes before the first record.
    public var header: [UInt8] {
        switch format {
        case .geojson: return Array(#"{"type":"FeatureCollection","features":["#.utf8) + [10]
        case .csv: return Array("id,username,timestamp,latitude,longitude,accuracy\n".utf8)
        case .gpx:
            return Array(
                (#"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
                    + #"<gpx version="1.1" creator="LocationTracker" xmlns="http://www.topografix.com/GPX/1/1">"# + "\n")
                    .utf8)
        }
    }

    /// One record (`ExportFormat.record`) of `user` at `time` (ms since 1970), with what goes before it.
    public mutating func append(user: String, time: Double, record: [UInt8]) -> [UInt8] {
        defer { written += 1 }
        switch format {
        case .geojson: return written == 0 ? record : Array(",\n".utf8) + record
        case .csv: return record
        case .gpx:
            let day = Int64((time / 86_400_000).rounded(.down).clamped(to: -1e15...1e15))
            var out = ""
            if current?.user != user {
                if current != nil { out += "</trkseg></trk>\n" }
                out += "<trk><name>\(ExportWriter.xmlEscaped(user))</name><trkseg>\n"
            } else if current?.day != day {
                out += "</trkseg><trkseg>\n"
            }
            current = (user, day)
            return Array(out.utf8) + record
        }
    }

    /// What comes after the last record.
    public var footer: [UInt8] {
        switch format {
        case .geojson: return Array("\n]}\n".utf8)
        case .csv: return []
        case .gpx: return Array(((current == nil ? "" : "</trkseg></trk>\n") + "</gpx>\n").utf8)
        }
    }

    static func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
