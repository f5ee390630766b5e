import CouchJSON

/// GeoJSON as trackers and converters write histories: `Point` features with a time in
/// `properties` (`time`, `timestamp`, `created_at`, as ISO text or milliseconds), and
/// `LineString`/`MultiPoint` features with one time per position (`coordTimes` or `times`,
/// as togeojson writes them, or `coordinateProperties.times`).
enum GeoJSONHistory {
    static func feature(_ json: JSON, emit: (ImportedLocation) throws -> Void, skip: (String) -> Void) throws {
        switch json["type"]?.stringValue {
        case "FeatureCollection":
            // A collection met whole (the document is a list of collections): its features.
            for feature in json["features"]?.arrayValue ?? [] { try self.feature(feature, emit: emit, skip: skip) }
        case "Feature":
            guard let geometry = json["geometry"], geometry != .null else { return skip("feature without a geometry") }
            let properties = json["properties"] ?? .null
            try positions(geometry, properties: properties, emit: emit, skip: skip)
        case "Point", "LineString", "MultiPoint":
            try positions(json, properties: .null, emit: emit, skip: skip)
        default:
            skip("GeoJSON object that is not a feature")
        }
    }

    static func positions(
        _ geometry: JSON, properties: JSON, emit: (ImportedLocation) throws -> Void, skip: (String) -> Void
    ) throws {
        let coordinates: [JSON]
        switch geometry["type"]?.stringValue {
        case "Point": coordinates = [geometry["coordinates"] ?? .null]
        case "LineString", "MultiPoint": coordinates = geometry["coordinates"]?.arrayValue ?? []
        default: return skip("geometry that is not a Point, MultiPoint or LineString")
        }
        let times = (properties["coordTimes"] ?? properties["times"] ?? properties["coordinateProperties"]?["times"])?
            .arrayValue
        for (i, position) in coordinates.enumerated() {
            guard let pair = position.arrayValue, pair.count >= 2, let lon = GoogleTimeline.number(pair[0]),
                let lat = GoogleTimeline.number(pair[1])
            else {
                skip("position that is not [longitude, latitude]")
                continue
            }
            let timeValue =
                times.flatMap { i < $0.count ? $0[i] : nil }
                ?? (coordinates.count == 1
                    ? properties["time"] ?? properties["timestamp"] ?? properties["created_at"] : nil)
            guard let when = time(timeValue) else {
                skip("position without a time")
                continue
            }
            var location = ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon)
            if pair.count >= 3 { location.altitude = GoogleTimeline.number(pair[2]) }
            if coordinates.count == 1 {
                location.accuracy = GoogleTimeline.number(properties["accuracy"] ?? properties["horizontal_accuracy"])
                location.altitude =
                    location.altitude ?? GoogleTimeline.number(properties["altitude"] ?? properties["ele"])
                location.speed = GoogleTimeline.number(properties["speed"] ?? properties["velocity"])
                location.heading = GoogleTimeline.number(properties["course"] ?? properties["heading"])
            }
            try GoogleTimeline.checked(location, emit, skip)
        }
    }

    /// ISO text, or a number of milliseconds (seconds when below 10^11).
    static func time(_ json: JSON?) -> (Int64, Int?)? {
        if let text = json?.stringValue { return ISOTime.parse(text).map { ($0.milliseconds, $0.offsetMinutes) } }
        guard let number = GoogleTimeline.number(json), number >= 0, number < 1e15 else { return nil }
        return (Int64(number < 1e11 ? number * 1000 : number), nil)
    }
}
