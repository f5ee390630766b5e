import CouchJSON
import CouchProtocol
import Foundation
import Geo

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
            guard let value = Double(text), value.isFinite else { throw TrackerService.Failure(400, "bad_request", "`\(name)` must be a number") }
            return value
        }
        from = try number("from")
        to = try number("to")
        if parameters["bbox"] != nil || parameters["lat"] != nil || parameters["lon"] != nil || parameters["radius"] != nil {
            do {
                let request = try GeoRequest(parameters: parameters.filter { ["bbox", "lat", "lon", "radius"].contains($0.key) })
                area = request.search.shape
            } catch let error as GeometryError {
                throw TrackerService.Failure(400, "bad_request", error.reason)
            }
        }
    }

    /// The point and time of a location document, if it is one this filter keeps.
    func accept(_ doc: JSON) -> (point: Coordinate, time: Double)? {
        guard let coordinates = doc["geometry"]?["coordinates"], doc["geometry"]?["type"] == "Point",
              let lon = coordinates[0]?.doubleValue, let lat = coordinates[1]?.doubleValue else { return nil }
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
    public func forEachLocation(_ filter: LocationFilter, _ visit: ([(doc: JSON, point: Coordinate, time: Double)]) async throws -> Void) async throws {
        var db = filter.user.map(TrackerService.locationDB(for:)) ?? TrackerService.allLocationsDB
        var range: (String, String)?
        if mode == .singleDatabase {
            db = TrackerService.sharedLocationsDB
            range = filter.user.map { OwnerNamespace(owner: $0) }.map { ($0.prefix, $0.upperBound) }
        }
        let found = try await forEachPage(of: db, size: 2000, includeDocs: true, range: range) { rows in
            var page: [(doc: JSON, point: Coordinate, time: Double)] = []
            for row in rows {
                guard let doc = row["doc"], let id = doc["_id"]?.stringValue, !id.hasPrefix("_design/") else { continue }
                if let (point, time) = filter.accept(doc) { page.append((doc, point, time)) }
            }
            if !page.isEmpty { try await visit(page) }
        }
        if !found { throw Failure(404, "not_found", "No locations for \(filter.user ?? "anyone")") }
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
            "first": fixes.first.map { .double($0.time) } ?? .null, "last": fixes.last.map { .double($0.time) } ?? .null,
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

    public var header: String {
        switch self {
        case .geojson: return #"{"type":"FeatureCollection","features":["# + "\n"
        case .csv: return "id,username,timestamp,latitude,longitude,accuracy\n"
        case .gpx: return #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
            + #"<gpx version="1.1" creator="LocationTracker" xmlns="http://www.topografix.com/GPX/1/1">"# + "\n"
        }
    }

    public var footer: String {
        switch self {
        case .geojson: return "\n]}\n"
        case .csv: return ""
        case .gpx: return "</gpx>\n"
        }
    }

    /// One location in this format (`first`: no separator before it).
    public func row(_ doc: JSON, _ point: Coordinate, _ time: Double, first: Bool) -> [UInt8] {
        switch self {
        case .geojson:
            var properties = doc["properties"]?.objectValue ?? JSONObject()
            if properties["created_at"] == nil, let created = doc["created_at"] { properties["created_at"] = created }
            let feature: JSON = ["type": "Feature", "id": doc["_id"] ?? .null, "geometry": doc["geometry"] ?? .null, "properties": .object(properties)]
            return (first ? [] : Array(",\n".utf8)) + feature.bytes
        case .csv:
            func field(_ value: JSON?) -> String {
                guard let value, value != .null else { return "" }
                let text = value.stringValue ?? value.text
                return text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
            }
            let columns = [field(doc["_id"]), field(doc["properties"]?["username"]), field(.double(time)),
                           field(.double(point.lat)), field(.double(point.lon)), field(doc["properties"]?["accuracy"])]
            return Array((columns.joined(separator: ",") + "\n").utf8)
        case .gpx:
            let date = Date(timeIntervalSince1970: time / 1000)
            return Array("<wpt lat=\"\(point.lat)\" lon=\"\(point.lon)\"><time>\(date.ISO8601Format())</time></wpt>\n".utf8)
        }
    }
}
