public import CouchJSON
import Foundation

/// A WGS84 position: longitude and latitude in degrees (GeoJSON order).
public struct Coordinate: Sendable, Hashable {
    public var lon: Double
    public var lat: Double

    public init(lon: Double, lat: Double) {
        self.lon = lon
        self.lat = lat
    }
}

/// A GeoJSON geometry (RFC 7946). Polygons are rings of coordinates, the first the exterior,
/// the rest holes; every ring is closed (first == last) with at least four positions.
public enum Geometry: Sendable, Equatable {
    case point(Coordinate)
    case multiPoint([Coordinate])
    case lineString([Coordinate])
    case multiLineString([[Coordinate]])
    case polygon([[Coordinate]])
    case multiPolygon([[[Coordinate]]])
    indirect case collection([Geometry])
}

/// Why a geometry is not valid, in words for an error reply or a log line.
public struct GeometryError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension Geometry {
    /// Parses and validates a GeoJSON geometry object: known type, finite coordinates with
    /// longitude in [-180, 180] and latitude in [-90, 90], at least two positions in a line,
    /// closed rings of at least four positions.
    public init(geoJSON: JSON) throws {
        guard case let .object(object) = geoJSON else { throw GeometryError("A geometry must be a JSON object") }
        guard let type = object["type"]?.stringValue else { throw GeometryError("A geometry needs a string `type`") }
        if type == "GeometryCollection" {
            guard case let .array(members)? = object["geometries"] else {
                throw GeometryError("A GeometryCollection needs a `geometries` array")
            }
            self = .collection(try members.map { try Geometry(geoJSON: $0) })
            return
        }
        guard let coordinates = object["coordinates"] else { throw GeometryError("A \(type) needs `coordinates`") }
        switch type {
        case "Point": self = .point(try Geometry.position(coordinates))
        case "MultiPoint": self = .multiPoint(try Geometry.positions(coordinates, minimum: 1))
        case "LineString": self = .lineString(try Geometry.positions(coordinates, minimum: 2))
        case "MultiLineString":
            self = .multiLineString(try Geometry.list(coordinates) { try Geometry.positions($0, minimum: 2) })
        case "Polygon": self = .polygon(try Geometry.rings(coordinates))
        case "MultiPolygon": self = .multiPolygon(try Geometry.list(coordinates) { try Geometry.rings($0) })
        case "Feature", "FeatureCollection":
            throw GeometryError("Expected a geometry, not a \(type) (index doc.geometry)")
        default: throw GeometryError("Unknown geometry type \(type)")
        }
    }

    static func list<T>(_ json: JSON, _ item: (JSON) throws -> T) throws -> [T] {
        guard case let .array(items) = json else { throw GeometryError("Coordinates must be arrays") }
        return try items.map(item)
    }

    static func position(_ json: JSON) throws -> Coordinate {
        guard case let .array(items) = json, items.count >= 2, let lon = items[0].doubleValue,
            let lat = items[1].doubleValue
        else {
            throw GeometryError("A position is an array of at least two numbers, [longitude, latitude]")
        }
        let coordinate = Coordinate(lon: lon, lat: lat)
        try coordinate.validate()
        return coordinate
    }

    static func positions(_ json: JSON, minimum: Int) throws -> [Coordinate] {
        let list = try Geometry.list(json, position)
        guard list.count >= minimum else {
            throw GeometryError("A line needs at least \(minimum) positions, got \(list.count)")
        }
        return list
    }

    static func rings(_ json: JSON) throws -> [[Coordinate]] {
        let rings = try Geometry.list(json) { try positions($0, minimum: 0) }
        guard !rings.isEmpty else { throw GeometryError("A polygon needs at least one ring") }
        for ring in rings { try Geometry.validateRing(ring) }
        return rings
    }

    static func validateRing(_ ring: [Coordinate]) throws {
        guard ring.count >= 4 else {
            throw GeometryError("A polygon ring needs at least 4 positions, got \(ring.count)")
        }
        guard ring.first == ring.last else {
            throw GeometryError("A polygon ring must be closed (first and last positions equal)")
        }
    }

    /// The geometry as a GeoJSON object.
    public var geoJSON: JSON {
        func position(_ c: Coordinate) -> JSON { [.double(c.lon), .double(c.lat)] }
        func line(_ l: [Coordinate]) -> JSON { .array(l.map(position)) }
        switch self {
        case let .point(c): return ["type": "Point", "coordinates": position(c)]
        case let .multiPoint(l): return ["type": "MultiPoint", "coordinates": line(l)]
        case let .lineString(l): return ["type": "LineString", "coordinates": line(l)]
        case let .multiLineString(ls): return ["type": "MultiLineString", "coordinates": .array(ls.map(line))]
        case let .polygon(rs): return ["type": "Polygon", "coordinates": .array(rs.map(line))]
        case let .multiPolygon(ps):
            return ["type": "MultiPolygon", "coordinates": .array(ps.map { .array($0.map(line)) })]
        case let .collection(gs): return ["type": "GeometryCollection", "geometries": .array(gs.map(\.geoJSON))]
        }
    }

    /// Every position of the geometry.
    public var coordinates: [Coordinate] {
        switch self {
        case let .point(c): return [c]
        case let .multiPoint(l), let .lineString(l): return l
        case let .multiLineString(ls), let .polygon(ls): return ls.flatMap { $0 }
        case let .multiPolygon(ps): return ps.flatMap { $0.flatMap { $0 } }
        case let .collection(gs): return gs.flatMap(\.coordinates)
        }
    }

    /// The bounding box in lon/lat (planar, as GeoJSON bboxes are); nil when empty.
    public var bounds: BoundingBox? {
        BoundingBox(enclosing: coordinates)
    }

    /// A representative centre: the point itself, or the middle of the bounding box.
    public var center: Coordinate? {
        if case let .point(c) = self { return c }
        guard let box = bounds else { return nil }
        return Coordinate(lon: (box.minLon + box.maxLon) / 2, lat: (box.minLat + box.maxLat) / 2)
    }
}

extension Coordinate {
    /// Throws unless both values are finite and within WGS84's ranges.
    public func validate() throws {
        guard lon.isFinite, lat.isFinite else { throw GeometryError("Coordinates must be finite numbers") }
        guard (-90...90).contains(lat) else { throw GeometryError("Latitude \(lat) is outside [-90, 90]") }
        guard (-180...180).contains(lon) else { throw GeometryError("Longitude \(lon) is outside [-180, 180]") }
    }
}

/// A longitude/latitude rectangle. `minLon > maxLon` means the box crosses the antimeridian.
public struct BoundingBox: Sendable, Equatable {
    public var minLon: Double
    public var minLat: Double
    public var maxLon: Double
    public var maxLat: Double

    public init(minLon: Double, minLat: Double, maxLon: Double, maxLat: Double) {
        self.minLon = minLon
        self.minLat = minLat
        self.maxLon = maxLon
        self.maxLat = maxLat
    }

    /// From a `bbox` query parameter, `minLon,minLat,maxLon,maxLat` in degrees (minLon >
    /// maxLon crosses the antimeridian).
    public init(parameter text: String) throws {
        let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4, let w = parts[0], let s = parts[1], let e = parts[2], let n = parts[3] else {
            throw GeometryError("`bbox` must be four numbers: minLon,minLat,maxLon,maxLat")
        }
        for c in [Coordinate(lon: w, lat: s), Coordinate(lon: e, lat: n)] { try c.validate() }
        guard s <= n else { throw GeometryError("`bbox` must be minLon,minLat,maxLon,maxLat with minLat <= maxLat") }
        self.init(minLon: w, minLat: s, maxLon: e, maxLat: n)
    }

    init?(enclosing points: [Coordinate]) {
        guard let first = points.first else { return nil }
        var box = BoundingBox(minLon: first.lon, minLat: first.lat, maxLon: first.lon, maxLat: first.lat)
        for p in points.dropFirst() {
            box.minLon = min(box.minLon, p.lon)
            box.maxLon = max(box.maxLon, p.lon)
            box.minLat = min(box.minLat, p.lat)
            box.maxLat = max(box.maxLat, p.lat)
        }
        self = box
    }

    /// True when the box wraps across the antimeridian.
    public var crossesAntimeridian: Bool { minLon > maxLon }

    /// Whether the box holds `c` (edges included).
    public func contains(_ c: Coordinate) -> Bool {
        guard c.lat >= minLat, c.lat <= maxLat else { return false }
        return crossesAntimeridian ? (c.lon >= minLon || c.lon <= maxLon) : (c.lon >= minLon && c.lon <= maxLon)
    }

    /// The box as a polygon (split in two across the antimeridian).
    public var geometry: Geometry {
        func ring(_ w: Double, _ e: Double) -> [[Coordinate]] {
            [
                [
                    Coordinate(lon: w, lat: minLat), Coordinate(lon: e, lat: minLat), Coordinate(lon: e, lat: maxLat),
                    Coordinate(lon: w, lat: maxLat), Coordinate(lon: w, lat: minLat),
                ]
            ]
        }
        if crossesAntimeridian { return .multiPolygon([ring(minLon, 180), ring(-180, maxLon)]) }
        return .polygon(ring(minLon, maxLon))
    }
}
