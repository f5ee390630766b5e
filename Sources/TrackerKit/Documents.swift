public import CouchJSON
import Foundation
public import Geo

/// A recorded location as the original app stores and replicates it: a GeoJSON Feature with
/// `created_at` (ms since 1970) and `properties.username`, `timestamp`, `background` and, set
/// this time, `session_id` (one per tracking session).
public struct LocationDoc: Sendable, Equatable {
    public var id: String?
    public var coordinate: Coordinate
    /// Milliseconds since 1970.
    public var timestamp: Double
    public var username: String
    public var background: Bool
    public var sessionID: String?

    public init(
        id: String? = nil, coordinate: Coordinate, timestamp: Double, username: String, background: Bool,
        sessionID: String?
    ) {
        self.id = id
        self.coordinate = coordinate
        self.timestamp = timestamp
        self.username = username
        self.background = background
        self.sessionID = sessionID
    }

    /// From an accepted fix; its time in whole milliseconds, as the original app wrote it.
    public init(fix: LocationFix, username: String, background: Bool, sessionID: String?) {
        self.init(
            coordinate: fix.coordinate, timestamp: (fix.timestamp.timeIntervalSince1970 * 1000).rounded(),
            username: username,
            background: background, sessionID: sessionID)
    }

    /// The document's JSON (with `_id` when it has one).
    public var json: JSON {
        let time = JSON.milliseconds(timestamp)
        var properties: JSONObject = [
            "username": .string(username), "timestamp": time, "background": .bool(background),
        ]
        if let sessionID { properties["session_id"] = .string(sessionID) }
        var object: JSONObject = [:]
        if let id { object["_id"] = .string(id) }
        object["type"] = "Feature"
        object["created_at"] = time
        object["geometry"] = Geometry.point(coordinate).geoJSON
        object["properties"] = .object(properties)
        return .object(object)
    }

    /// Reads a stored location; nil when the document is not one.
    public init?(json: JSON) {
        guard json["type"] == "Feature", let coordinate = pointCoordinate(json), let properties = json["properties"]
        else { return nil }
        self.init(
            id: json["_id"]?.stringValue, coordinate: coordinate,
            timestamp: json["created_at"]?.doubleValue ?? properties["timestamp"]?.doubleValue ?? 0,
            username: properties["username"]?.stringValue ?? "", background: properties["background"] == true,
            sessionID: properties["session_id"]?.stringValue)
    }
}

extension LocationDoc {
    /// A stable id for a position read from a file (its time and coordinates), so importing
    /// the same track twice stores it once.
    public static func importedID(_ location: LocationDoc) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "\(location.coordinate.lat),\(location.coordinate.lon)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return "imported-\(Int64(location.timestamp))-\(String(hash, radix: 36))"
    }
}

/// A place as `lt_places` holds it: a GeoJSON Feature with a `name` and `created_at`.
public struct PlaceDoc: Sendable, Equatable {
    public var id: String?
    public var name: String
    public var coordinate: Coordinate
    /// Milliseconds since 1970.
    public var createdAt: Double

    public init(id: String? = nil, name: String, coordinate: Coordinate, createdAt: Double) {
        self.id = id
        self.name = name
        self.coordinate = coordinate
        self.createdAt = createdAt
    }

    public var json: JSON {
        var object: JSONObject = [:]
        if let id { object["_id"] = .string(id) }
        object["type"] = "Feature"
        object["name"] = .string(name)
        object["geometry"] = Geometry.point(coordinate).geoJSON
        object["created_at"] = JSON.milliseconds(createdAt)
        return .object(object)
    }

    /// Reads a place (a `_geo` row's `doc`, or a stored one); nil when it is not one. Its name
    /// is the document's, else its GeoJSON `properties.name` (places imported from a file).
    public init?(json: JSON) {
        guard let coordinate = pointCoordinate(json) else { return nil }
        self.init(
            id: json["_id"]?.stringValue,
            name: json["name"]?.stringValue ?? json["properties"]?["name"]?.stringValue ?? "", coordinate: coordinate,
            createdAt: json["created_at"]?.doubleValue ?? 0)
    }
}

/// The position of a document whose `geometry` is a valid GeoJSON Point.
func pointCoordinate(_ doc: JSON) -> Coordinate? {
    guard let geometry = doc["geometry"], case let .point(coordinate)? = try? Geometry(geoJSON: geometry) else {
        return nil
    }
    return coordinate
}
