public import CouchJSON
import Crypto

/// One position read from a history file, whatever its format: a time, a place, and what the
/// file says of it. The location document it becomes is `document(user:)`; docs/importing.md
/// has the table of which field of each format lands where.
public struct ImportedLocation: Sendable, Equatable {
    /// Milliseconds since 1970, UTC.
    public var time: Int64
    /// The offset from UTC the file gave with the time, in minutes; nil when it gave none (or `Z`).
    public var utcOffsetMinutes: Int?
    public var latitude: Double
    public var longitude: Double
    /// Horizontal accuracy, metres.
    public var accuracy: Double?
    /// Metres above sea level.
    public var altitude: Double?
    public var verticalAccuracy: Double?
    /// Metres per second.
    public var speed: Double?
    /// Degrees clockwise from true north.
    public var heading: Double?
    /// How the source located itself (Google's `GPS`, `WIFI`, `CELL`...), as the file says it.
    public var positionSource: String?
    /// The most likely activity the file names (`WALKING`, `IN_VEHICLE`...).
    public var activity: String?

    public init(
        time: Int64, utcOffsetMinutes: Int? = nil, latitude: Double, longitude: Double, accuracy: Double? = nil,
        altitude: Double? = nil, verticalAccuracy: Double? = nil, speed: Double? = nil, heading: Double? = nil,
        positionSource: String? = nil, activity: String? = nil
    ) {
        self.time = time
        self.utcOffsetMinutes = utcOffsetMinutes
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
        self.altitude = altitude
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.heading = heading
        self.positionSource = positionSource
        self.activity = activity
    }

    /// Whether the position is on the globe and the time between 1970 and 5000.
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && (-90...90).contains(latitude) && (-180...180).contains(longitude)
            && (0..<95_617_584_000_000).contains(time)
    }

    /// The document id for `user`: the time (so ids sort by it) and a digest of user, time and
    /// position to 1e-7 degrees (the precision of Google's E7 numbers). The same position at
    /// the same time imported twice, from one file or two overlapping exports, has one id.
    public func documentID(user: String) -> String {
        let lat = Int64((latitude * 1e7).rounded())
        let lon = Int64((longitude * 1e7).rounded())
        let digest = SHA256.hash(data: Array("\(user)\n\(time)\n\(lat)\n\(lon)".utf8))
        let digits = String(time)
        return "imp-\(String(repeating: "0", count: max(0, 13 - digits.utf8.count)))\(digits)-"
            + Hex.string(digest.prefix(8))
    }

    /// The location document, as devices write them (a GeoJSON Feature with `created_at` and
    /// `properties.username`, `timestamp`), with what the file said in `properties` and where
    /// it came from in `properties.source` (`import`) and `properties.import_format`.
    public func document(user: String, id: String, format: HistoryFormat) -> JSON {
        let time = JSON.int(Int(self.time))
        var properties: JSONObject = [
            "username": .string(user), "timestamp": time, "background": true, "source": "import",
            "import_format": .string(format.rawValue),
        ]
        if let utcOffsetMinutes { properties["utc_offset_minutes"] = .int(utcOffsetMinutes) }
        if let accuracy { properties["accuracy"] = .double(accuracy) }
        if let altitude { properties["altitude"] = .double(altitude) }
        if let verticalAccuracy { properties["vertical_accuracy"] = .double(verticalAccuracy) }
        if let speed { properties["velocity"] = .double(speed) }
        if let heading { properties["course"] = .double(heading) }
        if let positionSource { properties["position_source"] = .string(positionSource) }
        if let activity { properties["activity"] = .string(activity) }
        return [
            "_id": .string(id), "type": "Feature", "created_at": time,
            "geometry": ["type": "Point", "coordinates": [.double(longitude), .double(latitude)]],
            "properties": .object(properties),
        ]
    }
}
