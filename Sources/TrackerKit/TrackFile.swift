import CouchJSON
public import Foundation
public import Geo
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One position of a recorded track or a planned route, as files hold them: a coordinate and
/// whatever else the file says (time, accuracy, altitude, speed, course).
public struct TrackPoint: Sendable, Equatable {
    public var coordinate: Coordinate
    public var time: Date?
    /// Horizontal accuracy in metres.
    public var accuracy: Double?
    public var altitude: Double?
    /// Metres per second.
    public var speed: Double?
    /// Degrees from true north.
    public var course: Double?

    public init(
        coordinate: Coordinate, time: Date? = nil, accuracy: Double? = nil, altitude: Double? = nil,
        speed: Double? = nil, course: Double? = nil
    ) {
        self.coordinate = coordinate
        self.time = time
        self.accuracy = accuracy
        self.altitude = altitude
        self.speed = speed
        self.course = course
    }
}

/// Tracks and routes read from the files people have them in: GPX 1.0/1.1 (track, route and
/// way points), GeoJSON (Points, MultiPoints and LineStrings, with times from `properties`), and
/// OwnTracks JSON (one location message, an array of them, the recorder API's `{"data": [...]}`,
/// or recorder `.rec` lines).
public enum TrackFile {
    public enum Format: String, Sendable, CaseIterable {
        case gpx, geojson, owntracks
    }

    /// Guesses the format from the content: XML is GPX; JSON with OwnTracks `_type` messages is
    /// OwnTracks; other JSON is GeoJSON.
    public static func detect(_ data: Data) -> Format? {
        guard
            let first = data.first(where: {
                !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF)
            })
        else { return nil }
        if first == UInt8(ascii: "<") { return .gpx }
        let text = String(decoding: data.prefix(4096), as: UTF8.self)
        if text.contains("\"_type\"") { return .owntracks }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return .geojson }
        // Recorder .rec lines start with a timestamp.
        return text.contains("{") ? .owntracks : nil
    }

    /// Reads a file's points in file order; `format` nil means detect it.
    public static func read(_ data: Data, format: Format? = nil) throws -> [TrackPoint] {
        guard let format = format ?? detect(data) else {
            throw TrackerKitError.unreadableTrack("Not a GPX, GeoJSON or OwnTracks file")
        }
        let points: [TrackPoint]
        switch format {
        case .gpx: points = try gpx(data)
        case .geojson: points = try geoJSON(data)
        case .owntracks: points = try ownTracks(data)
        }
        if points.isEmpty { throw TrackerKitError.unreadableTrack("The \(format.rawValue) file holds no positions") }
        return points
    }

    /// Reads `url`; the format comes from the extension (`.gpx`, `.geojson`/`.json`, `.rec`)
    /// or, failing that, the content.
    public static func read(contentsOf url: URL) throws -> [TrackPoint] {
        let data = try Data(contentsOf: url)
        switch url.pathExtension.lowercased() {
        case "gpx": return try read(data, format: .gpx)
        case "rec": return try read(data, format: .owntracks)
        default: return try read(data)
        }
    }

    // MARK: GPX

    static func gpx(_ data: Data) throws -> [TrackPoint] {
        let reader = GPXReader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        guard parser.parse() else {
            throw TrackerKitError.unreadableTrack(
                "Invalid GPX: \(parser.parserError.map { "\($0.localizedDescription)" } ?? "not XML") at line \(parser.lineNumber)"
            )
        }
        if let problem = reader.problem { throw TrackerKitError.unreadableTrack(problem) }
        // Track points are the recording; route and way points are used only when there is none.
        return !reader.track.isEmpty ? reader.track : !reader.route.isEmpty ? reader.route : reader.waypoints
    }

    final class GPXReader: NSObject, XMLParserDelegate {
        var track: [TrackPoint] = []
        var route: [TrackPoint] = []
        var waypoints: [TrackPoint] = []
        var problem: String?
        private var current: TrackPoint?
        private var kind = ""
        private var text = ""

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            text = ""
            guard ["trkpt", "rtept", "wpt"].contains(name) else { return }
            guard let lat = attributes["lat"].flatMap(Double.init), let lon = attributes["lon"].flatMap(Double.init),
                (-90...90).contains(lat), (-180...180).contains(lon)
            else {
                problem =
                    problem
                    ?? "GPX line \(parser.lineNumber): <\(name)> needs lat (−90…90) and lon (−180…180) attributes"
                return
            }
            current = TrackPoint(coordinate: Coordinate(lon: lon, lat: lat))
            kind = name
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            text += string
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            defer { text = "" }
            guard var point = current else { return }
            switch name {
            case "time": point.time = TrackFile.date(value)
            case "ele": point.altitude = Double(value)
            case "speed": point.speed = Double(value)
            case "course": point.course = Double(value)
            // A common rule of thumb: 5 m per unit.
            case "hdop": point.accuracy = point.accuracy ?? Double(value).map { $0 * 5 }
            case "trkpt": track.append(point)
            case "rtept": route.append(point)
            case "wpt": waypoints.append(point)
            default: break
            }
            current = ["trkpt", "rtept", "wpt"].contains(name) ? nil : point
        }
    }

    // MARK: GeoJSON

    static func geoJSON(_ data: Data) throws -> [TrackPoint] {
        let json: JSON
        do { json = try JSON.parse(Array(data)) } catch {
            throw TrackerKitError.unreadableTrack("Invalid JSON: \(error)")
        }
        var points: [TrackPoint] = []
        try collect(json, properties: nil, into: &points)
        return points
    }

    private static func collect(_ json: JSON, properties: JSON?, into points: inout [TrackPoint]) throws {
        if let array = json.arrayValue {
            // A bare list: of features, or of {lat, lng|lon} objects (as the shipped routes are).
            for item in array {
                if let lat = item["lat"]?.doubleValue, let lon = (item["lng"] ?? item["lon"])?.doubleValue {
                    points.append(
                        TrackPoint(coordinate: Coordinate(lon: lon, lat: lat), time: item["time"].flatMap(date(json:))))
                } else {
                    try collect(item, properties: nil, into: &points)
                }
            }
            return
        }
        switch json["type"]?.stringValue {
        case "FeatureCollection":
            for feature in json["features"]?.arrayValue ?? [] { try collect(feature, properties: nil, into: &points) }
        case "Feature":
            guard let geometry = json["geometry"], geometry != .null else { return }
            try collect(geometry, properties: json["properties"] ?? json, into: &points)
        case "GeometryCollection":
            for geometry in json["geometries"]?.arrayValue ?? [] {
                try collect(geometry, properties: properties, into: &points)
            }
        case "Point", "MultiPoint", "LineString", "MultiLineString":
            let geometry: Geometry
            do { geometry = try Geometry(geoJSON: json) } catch let error as GeometryError {
                throw TrackerKitError.unreadableTrack("Invalid GeoJSON geometry: \(error.reason)")
            }
            let coordinates = geometry.coordinates
            // Times: one for a Point; per position from `coordTimes`/`times` (as togeojson writes them).
            let times = (properties?["coordTimes"] ?? properties?["times"])?.arrayValue
            for (i, coordinate) in coordinates.enumerated() {
                var point = TrackPoint(coordinate: coordinate)
                if let times, i < times.count { point.time = date(json: times[i]) }
                if coordinates.count == 1, let properties {
                    point.time =
                        point.time
                        ?? (properties["timestamp"] ?? properties["time"] ?? properties["created_at"]).flatMap(
                            date(json:))
                    point.accuracy = (properties["accuracy"] ?? properties["horizontal_accuracy"])?.doubleValue
                    point.altitude = (properties["altitude"] ?? properties["ele"])?.doubleValue
                    point.speed = properties["speed"]?.doubleValue
                    point.course = (properties["course"] ?? properties["heading"])?.doubleValue
                }
                points.append(point)
            }
        case let other:
            // The original tracker's own documents are Features; a `{"places": [...]}` list too.
            if let places = json["places"] { try collect(places, properties: nil, into: &points); return }
            throw TrackerKitError.unreadableTrack(
                "Unsupported GeoJSON object\(other.map { " of type \($0)" } ?? ""): expected a FeatureCollection, Feature or Point/LineString geometry"
            )
        }
    }

    // MARK: OwnTracks

    static func ownTracks(_ data: Data) throws -> [TrackPoint] {
        var messages: [JSON] = []
        if let json = try? JSON.parse(Array(data)) {
            if let array = json.arrayValue {
                messages = array
            } else if let list = json["data"]?.arrayValue {
                messages = list
            } else {
                messages = [json]
            }
        } else {
            // Recorder .rec lines: `2024-05-01T10:00:00Z\t*                 \t{...}`.
            for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
                guard let start = line.firstIndex(of: "{") else { continue }
                guard let message = try? JSON.parse(Array(line[start...].utf8)) else {
                    throw TrackerKitError.unreadableTrack("Invalid OwnTracks line: \(line.prefix(80))")
                }
                messages.append(message)
            }
        }
        return try messages.compactMap { message in
            guard message["_type"]?.stringValue == "location" else { return nil }
            guard let lat = message["lat"]?.doubleValue, let lon = message["lon"]?.doubleValue,
                (-90...90).contains(lat), (-180...180).contains(lon)
            else {
                throw TrackerKitError.unreadableTrack(
                    "An OwnTracks location message needs lat (−90…90) and lon (−180…180)")
            }
            return TrackPoint(
                coordinate: Coordinate(lon: lon, lat: lat),
                time: message["tst"]?.doubleValue.map { Date(timeIntervalSince1970: $0) },
                accuracy: message["acc"]?.doubleValue, altitude: message["alt"]?.doubleValue,
                speed: message["vel"]?.doubleValue.map { $0 / 3.6 }, course: message["cog"]?.doubleValue)
        }
    }

    // MARK: Times

    /// ISO 8601 with or without fractional seconds.
    static func date(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// A time as JSON carries it: ISO 8601 text, or a number of seconds (or milliseconds, when
    /// larger than any plausible seconds) since 1970.
    static func date(json: JSON) -> Date? {
        if let text = json.stringValue { return date(text) }
        guard let number = json.doubleValue else { return nil }
        return Date(timeIntervalSince1970: number > 100_000_000_000 ? number / 1000 : number)
    }
}
