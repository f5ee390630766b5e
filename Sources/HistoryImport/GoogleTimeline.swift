import CouchJSON

/// Google's location history shapes: Takeout's `Records.json` entries and Semantic Location
/// History, and the Timeline exports of the phone apps that replaced them (Android's
/// `Timeline.json`, iOS's `location-history.json`), whose numbers may be strings and whose
/// positions are `"43.7712345°, 9.0712345°"` or `"geo:43.77,9.07"` strings.
enum GoogleTimeline {
    // MARK: Values

    /// A number, or a string holding one (the iOS export writes `"0.93"`).
    static func number(_ json: JSON?) -> Double? {
        switch json {
        case let .int(value)?: return Double(value)
        case let .double(value)?: return value.isFinite ? value : nil
        case let .string(text)?: return Double(text).flatMap { $0.isFinite ? $0 : nil }
        default: return nil
        }
    }

    /// Degrees from an E7 integer. Old exports wrote values past ±180° that wrapped around a
    /// 32-bit integer; they are unwrapped as every reader of these files does.
    static func e7(_ json: JSON?) -> Double? {
        guard var value = number(json) else { return nil }
        if value > 1_800_000_000 { value -= 4_294_967_296 }
        if value < -1_800_000_000 { value += 4_294_967_296 }
        return value / 1e7
    }

    /// A time from an ISO text (`timestamp`, `startTime`) or a count of milliseconds (`timestampMs`).
    static func time(_ iso: JSON?, milliseconds: JSON? = nil) -> (Int64, Int?)? {
        if let text = iso?.stringValue, let parsed = ISOTime.parse(text) {
            return (parsed.milliseconds, parsed.offsetMinutes)
        }
        if let ms = number(milliseconds), ms.isFinite, abs(ms) < 1e15 { return (Int64(ms), nil) }
        return nil
    }

    /// `"43.7712345°, 9.0712345°"`, `"geo:43.77,9.07"` or `{"latLng": ...}` as latitude and longitude.
    static func latLng(_ json: JSON?) -> (Double, Double)? {
        guard let json else { return nil }
        if case .object = json {
            return latLng(json["latLng"] ?? json["LatLng"] ?? json["point"] ?? json["placeLocation"])
                ?? e7(json["latitudeE7"] ?? json["latE7"]).flatMap { lat in
                    e7(json["longitudeE7"] ?? json["lngE7"]).map { (lat, $0) }
                }
        }
        guard var text = json.stringValue?[...] else { return nil }
        if text.hasPrefix("geo:") { text = text.dropFirst(4) }
        let parts = text.split(separator: ",", maxSplits: 1).map { String($0).trimmingCharacters(in: " °") }
        guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]) else { return nil }
        return (lat, lon)
    }

    /// The type of the likeliest activity of a `Records.json` entry's `activity` list (its first
    /// sample's most confident type), or of a segment's `topCandidate`.
    static func likeliestActivity(_ json: JSON?) -> String? {
        if let samples = json?.arrayValue, let first = samples.first {
            let types = first["activity"]?.arrayValue ?? []
            return types.max { (number($0["confidence"]) ?? 0) < (number($1["confidence"]) ?? 0) }?["type"]?.stringValue
        }
        return json?["topCandidate"]?["type"]?.stringValue ?? json?["activityType"]?.stringValue
    }

    // MARK: Phone exports

    /// One segment of a phone export (Android `semanticSegments[]`, iOS's top-level array): a
    /// `timelinePath`'s points, an activity's start and end become locations; a visit is
    /// counted as skipped (its record is for the visits to come).
    static func segment(
        _ json: JSON, emit: (ImportedLocation) throws -> Void, skip: (String) -> Void
    ) throws {
        let start = time(json["startTime"])
        let end = time(json["endTime"])
        if let path = json["timelinePath"]?.arrayValue {
            for point in path {
                guard let (lat, lon) = latLng(point["point"]) else {
                    skip("timeline path point without a position")
                    continue
                }
                var when = time(point["time"])
                // Minutes after the start, within a century (a larger count is no offset, and
                // would not fit the milliseconds).
                if when == nil, let start, let minutes = number(point["durationMinutesOffsetFromStartTime"]),
                    abs(minutes) < 60_000_000
                {
                    when = (start.0 + Int64(minutes * 60_000), start.1)
                }
                guard let when else {
                    skip("timeline path point without a time")
                    continue
                }
                try checked(
                    ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon), emit, skip)
            }
        } else if let activity = json["activity"] {
            let type = likeliestActivity(activity)
            for (position, when) in [(activity["start"], start), (activity["end"], end)] {
                guard let (lat, lon) = latLng(position), let when else {
                    skip("activity end without a position or time")
                    continue
                }
                var location = ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon)
                location.activity = type
                try checked(location, emit, skip)
            }
        } else if json["visit"] != nil {
            skip("visit (kept as a visit record in a later version)")
        } else {
            skip("segment without a path, activity or visit")
        }
    }

    /// One of Android's `rawSignals[]`: a `position` is a location; Wi-Fi scans and activity
    /// records are not.
    static func rawSignal(_ json: JSON, emit: (ImportedLocation) throws -> Void, skip: (String) -> Void) throws {
        guard let position = json["position"] else { return skip("raw signal that is not a position") }
        guard let (lat, lon) = latLng(position) else { return skip("raw position without LatLng") }
        guard let when = time(position["timestamp"]) else { return skip("raw position without a timestamp") }
        var location = ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon)
        location.accuracy = number(position["accuracyMeters"])
        location.altitude = number(position["altitudeMeters"])
        location.speed = number(position["speedMetersPerSecond"])
        location.positionSource = position["source"]?.stringValue
        try checked(location, emit, skip)
    }

    // MARK: Takeout's Semantic Location History

    /// One of a monthly file's `timelineObjects[]`: an `activitySegment`'s start, its raw path's
    /// timed points and its end become locations; a `placeVisit` is counted as skipped.
    static func semantic(_ json: JSON, emit: (ImportedLocation) throws -> Void, skip: (String) -> Void) throws {
        if let segment = json["activitySegment"] {
            let duration = segment["duration"]
            let start = time(duration?["startTimestamp"], milliseconds: duration?["startTimestampMs"])
            let end = time(duration?["endTimestamp"], milliseconds: duration?["endTimestampMs"])
            let type = segment["activityType"]?.stringValue
            var points: [(JSON?, (Int64, Int?)?)] = [(segment["startLocation"], start)]
            for point in segment["simplifiedRawPath"]?["points"]?.arrayValue ?? [] {
                points.append((point, time(point["timestamp"], milliseconds: point["timestampMs"])))
            }
            points.append((segment["endLocation"], end))
            for (position, when) in points {
                guard let (lat, lon) = latLng(position), let when else {
                    skip("activity point without a position or time")
                    continue
                }
                var location = ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon)
                location.activity = type
                location.accuracy = number(position?["accuracyMeters"])
                try checked(location, emit, skip)
            }
        } else if json["placeVisit"] != nil {
            skip("visit (kept as a visit record in a later version)")
        } else {
            skip("timeline object that is neither an activity nor a visit")
        }
    }

    static func checked(
        _ location: ImportedLocation, _ emit: (ImportedLocation) throws -> Void, _ skip: (String) -> Void
    ) throws {
        guard location.isValid else { return skip("position or time out of range") }
        try emit(location)
    }
}
