import CouchJSON
import Foundation
public import HistoryImport

/// Seeded history files in every format the importer reads, written as the products that make
/// them write them (field names, number shapes, time zones), with entries that hold no location
/// mixed in. Nobody's real history: positions and times are random.
public struct HistoryFiles {
    /// A generated position: what the file says of it.
    public struct Point: Sendable {
        public var time: Int64
        public var offsetMinutes: Int
        public var lat: Double
        public var lon: Double
        public var accuracy: Int
    }

    public var rng: SeededRandom

    public init(seed: Int) {
        rng = SeededRandom(seed: UInt64(seed))
    }

    public mutating func points(_ count: Int) -> [Point] {
        var time = Int64.random(in: 1_300_000_000_000...1_750_000_000_000, using: &rng)
        return (0..<count).map { _ in
            time += Int64.random(in: 1000...600_000, using: &rng)
            return Point(
                time: time, offsetMinutes: [0, 60, -300, 330, 120].randomElement(using: &rng)!,
                lat: (Double.random(in: -89...89, using: &rng) * 1e7).rounded() / 1e7,
                lon: (Double.random(in: -179...179, using: &rng) * 1e7).rounded() / 1e7,
                accuracy: Int.random(in: 3...2000, using: &rng))
        }
    }

    /// ISO 8601 text of a time as seen at `offsetMinutes` from UTC (`Z` for 0 when `zulu`).
    public static func iso(_ ms: Int64, offsetMinutes: Int = 0, zulu: Bool = true, fraction: Bool = true) -> String {
        let local = ms + Int64(offsetMinutes) * 60_000
        let date = Date(timeIntervalSince1970: Double(local.quotientAndRemainder(dividingBy: 1000).quotient))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        var text = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
        if fraction { text += String(format: ".%03d", Int(local % 1000)) }
        if offsetMinutes == 0, zulu { return text + "Z" }
        let sign = offsetMinutes < 0 ? "-" : "+"
        return text + String(format: "%@%02d:%02d", sign, abs(offsetMinutes) / 60, abs(offsetMinutes) % 60)
    }

    public static func degrees(_ value: Double) -> String { String(format: "%.7f", value) }

    /// A file of `format` holding `points` (times rounded to what the format keeps), and the
    /// points as the file has them.
    public mutating func file(_ format: HistoryFormat, _ points: [Point]) -> (bytes: [UInt8], points: [Point]) {
        var points = points
        let text: String
        switch format {
        case .googleRecords:
            var entries: [JSON] = points.enumerated().map { i, p in
                var entry: JSONObject = [
                    "latitudeE7": .int(Int((p.lat * 1e7).rounded())), "longitudeE7": .int(Int((p.lon * 1e7).rounded())),
                    "accuracy": .int(p.accuracy), "source": "WIFI", "deviceTag": 1_234_567,
                ]
                if i % 3 == 0 {
                    entry["timestampMs"] = .string(String(p.time))
                } else {
                    entry["timestamp"] = .string(Self.iso(p.time))
                }
                if i % 4 == 0 {
                    entry["activity"] = [["activity": [["type": "STILL", "confidence": 40], ["type": "WALKING", "confidence": 60]], "timestamp": .string(Self.iso(p.time))]]
                }
                return .object(entry)
            }
            entries.insert(["timestamp": "2020-01-01T00:00:00Z", "source": "GPS"], at: entries.count / 2)  // no position
            text = JSON.object(["locations": .array(entries)]).text
        case .androidTimeline, .iosTimeline:
            let ios = format == .iosTimeline
            func position(_ p: Point) -> JSON {
                .string(ios ? "geo:\(Self.degrees(p.lat)),\(Self.degrees(p.lon))" : "\(Self.degrees(p.lat))°, \(Self.degrees(p.lon))°")
            }
            var segments: [JSON] = []
            var raw: [JSON] = []
            var i = 0
            var kept: [Point] = []
            while i < points.count {
                let kind = Int.random(in: 0..<4, using: &rng)
                if kind == 0, i + 1 < points.count {
                    // An activity: its start and end are locations.
                    let (a, b) = (points[i], points[i + 1])
                    segments.append([
                        "startTime": .string(Self.iso(a.time, offsetMinutes: a.offsetMinutes, zulu: false)),
                        "endTime": .string(Self.iso(b.time, offsetMinutes: a.offsetMinutes, zulu: false)),
                        "activity": [
                            "start": ios ? position(a) : ["latLng": position(a)], "end": ios ? position(b) : ["latLng": position(b)],
                            "distanceMeters": ios ? "1234.5" : 1234.5,
                            "topCandidate": ["type": ios ? "walking" : "WALKING", "probability": ios ? "0.9" : 0.9],
                        ],
                    ])
                    kept += [a, b]
                    i += 2
                } else if kind == 1 {
                    // A timeline path of up to five points, at whole minutes from its start on iOS.
                    let n = min(points.count - i, Int.random(in: 1...5, using: &rng))
                    var path = Array(points[i..<(i + n)])
                    if ios {
                        path = path.enumerated().map { k, p in
                            var p = p
                            p.time = path[0].time + Int64(k) * 60_000
                            return p
                        }
                    }
                    segments.append([
                        "startTime": .string(Self.iso(path[0].time, offsetMinutes: path[0].offsetMinutes, zulu: false)),
                        "endTime": .string(Self.iso(path[n - 1].time + 1000, offsetMinutes: path[0].offsetMinutes, zulu: false)),
                        "timelinePath": .array(path.enumerated().map { k, p in
                            ios
                                ? ["point": position(p), "durationMinutesOffsetFromStartTime": .string(String(k))]
                                : ["point": position(p), "time": .string(Self.iso(p.time, offsetMinutes: p.offsetMinutes, zulu: false))]
                        }),
                    ])
                    kept += path
                    i += n
                } else if kind == 2, !ios {
                    let p = points[i]
                    raw.append([
                        "position": [
                            "LatLng": position(p), "accuracyMeters": .int(p.accuracy), "altitudeMeters": 12.5, "source": "WIFI",
                            "timestamp": .string(Self.iso(p.time, offsetMinutes: p.offsetMinutes, zulu: false)), "speedMetersPerSecond": 0.5,
                        ]
                    ])
                    raw.append(["wifiScan": ["deliveryTime": "2024-01-01T00:00:00.000Z", "devicesRecords": []]])
                    kept.append(p)
                    i += 1
                } else {
                    // A visit: not a location (yet).
                    let p = points[i]
                    segments.append([
                        "startTime": .string(Self.iso(p.time, offsetMinutes: p.offsetMinutes, zulu: false)),
                        "endTime": .string(Self.iso(p.time + 600_000, offsetMinutes: p.offsetMinutes, zulu: false)),
                        "visit": ["hierarchyLevel": 0, "probability": 0.8, "topCandidate": ["placeId": "ChIJ", "placeLocation": ios ? position(p) : ["latLng": position(p)]]],
                    ])
                    i += 1
                }
            }
            points = kept
            text = ios
                ? JSON.array(segments).text
                : JSON.object(["semanticSegments": .array(segments), "rawSignals": .array(raw), "userLocationProfile": ["frequentPlaces": []]]).text
            // The phone's readings of the same point in another representation are the ones checked.
            if !ios {
                // Raw signals come after the segments in the file.
                let rawTimes = Set(raw.compactMap { $0["position"]?["timestamp"]?.stringValue })
                points = points.filter { !rawTimes.contains(Self.iso($0.time, offsetMinutes: $0.offsetMinutes, zulu: false)) }
                    + points.filter { rawTimes.contains(Self.iso($0.time, offsetMinutes: $0.offsetMinutes, zulu: false)) }
            }
        case .ownTracksJSON, .ownTracksRecorder:
            points = points.map { var p = $0; p.time = p.time / 1000 * 1000; return p }
            let messages: [JSON] = points.map { p in
                ["_type": "location", "tst": .int(Int(p.time / 1000)), "lat": .double(p.lat), "lon": .double(p.lon), "acc": .int(p.accuracy), "vel": 36, "tid": "ph"]
            }
            let transition: JSON = ["_type": "transition", "tst": 1_700_000_000, "event": "enter"]
            if format == .ownTracksJSON {
                text = JSON.object(["data": .array(messages + [transition])]).text
            } else {
                text = (messages + [transition]).map { m in
                    "\(Self.iso(Int64(m["tst"]!.doubleValue! * 1000), fraction: false))\t*                 \t\(m.text)\n"
                }.joined()
            }
        case .gpx:
            var body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- generated -->\n<gpx version=\"1.1\" creator=\"lt tests\" xmlns=\"http://www.topografix.com/GPX/1/1\">\n"
            body += "<metadata><name>A &amp; B</name><time>2020-01-01T00:00:00Z</time></metadata>\n"
            body += "<wpt lat=\"1.5\" lon=\"2.5\"><name>no time</name></wpt>\n<trk><name><![CDATA[<trk> & more]]></name><trkseg>\n"
            for p in points {
                body += "<trkpt lat=\"\(Self.degrees(p.lat))\" lon='\(Self.degrees(p.lon))'>\n  <ele>12.5</ele>\n  <time>\(Self.iso(p.time))</time>\n  <hdop>\(Double(p.accuracy) / 5)</hdop>\n</trkpt>\n"
            }
            body += "</trkseg></trk>\n</gpx>\n"
            text = body
        case .geoJSON:
            var features: [JSON] = []
            var i = 0
            while i < points.count {
                if i % 5 == 4, i + 2 < points.count {
                    let line = points[i..<(i + 3)]
                    features.append([
                        "type": "Feature",
                        "geometry": ["type": "LineString", "coordinates": .array(line.map { [.double($0.lon), .double($0.lat)] })],
                        "properties": ["coordTimes": .array(line.map { .string(Self.iso($0.time)) })],
                    ])
                    i += 3
                } else {
                    let p = points[i]
                    features.append([
                        "type": "Feature", "geometry": ["type": "Point", "coordinates": [.double(p.lon), .double(p.lat)]],
                        "properties": ["time": i % 2 == 0 ? .string(Self.iso(p.time, offsetMinutes: p.offsetMinutes, zulu: false)) : .int(Int(p.time)), "accuracy": .int(p.accuracy)],
                    ])
                    i += 1
                }
            }
            // A place outline and a feature without a geometry: no locations.
            features.insert(["type": "Feature", "geometry": .null, "properties": ["name": "nowhere"]], at: features.count / 2)
            features.append([
                "type": "Feature", "properties": [:],
                "geometry": ["type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]],
            ])
            text = JSON.object(["type": "FeatureCollection", "features": .array(features)]).text
        case .csv:
            let delimiter = [",", ";", "\t"].randomElement(using: &rng)!
            var lines = ["time\(delimiter)latitude\(delimiter)longitude\(delimiter)accuracy\(delimiter)note"]
            points = points.enumerated().map { i, p in
                var p = p
                if i % 2 == 1 { p.time = p.time / 1000 * 1000 }
                return p
            }
            for (i, p) in points.enumerated() {
                let time = i % 2 == 1 ? String(p.time / 1000) : Self.iso(p.time, offsetMinutes: p.offsetMinutes, zulu: false)
                lines.append([time, Self.degrees(p.lat), Self.degrees(p.lon), String(p.accuracy), "\"a\(delimiter) \"\"b\"\"\""].joined(separator: delimiter))
            }
            lines.insert("not a time\(delimiter)1\(delimiter)2\(delimiter)3\(delimiter)x", at: 2)
            text = lines.joined(separator: i(rng: &rng) ? "\r\n" : "\n") + "\n"
        case .googleSemantic:
            func e7(_ p: Point) -> (JSON, JSON) { (.int(Int((p.lat * 1e7).rounded())), .int(Int((p.lon * 1e7).rounded()))) }
            var objects: [JSON] = []
            var kept: [Point] = []
            var i = 0
            let older = Bool.random(using: &rng)  // timestampMs, as files before 2022 wrote them
            func time(_ p: Point) -> JSON { older ? .string(String(p.time)) : .string(Self.iso(p.time)) }
            let key = older ? "Ms" : ""
            while i < points.count {
                if Int.random(in: 0..<3, using: &rng) == 0 || i + 1 == points.count {
                    let p = points[i]
                    let (lat, lon) = e7(p)
                    objects.append([
                        "placeVisit": [
                            "location": ["latitudeE7": lat, "longitudeE7": lon, "placeId": "ChIJ", "name": "Somewhere"],
                            "duration": ["startTimestamp\(key)": time(p), "endTimestamp\(key)": time(p)],
                        ]
                    ])
                    i += 1
                    continue
                }
                let n = min(points.count - i, Int.random(in: 2...6, using: &rng))
                let run = Array(points[i..<(i + n)])
                let (startLat, startLon) = e7(run[0])
                let (endLat, endLon) = e7(run[n - 1])
                let middle: [JSON] = run.dropFirst().dropLast().map { p in
                    let (lat, lon) = e7(p)
                    return ["latE7": lat, "lngE7": lon, "timestamp\(key)": time(p), "accuracyMeters": .int(p.accuracy)]
                }
                objects.append([
                    "activitySegment": [
                        "startLocation": ["latitudeE7": startLat, "longitudeE7": startLon],
                        "endLocation": ["latitudeE7": endLat, "longitudeE7": endLon],
                        "duration": ["startTimestamp\(key)": time(run[0]), "endTimestamp\(key)": time(run[n - 1])],
                        "distance": 1234, "activityType": "IN_PASSENGER_VEHICLE", "confidence": "HIGH",
                        "waypointPath": ["waypoints": [["latE7": startLat, "lngE7": startLon]]],
                        "simplifiedRawPath": ["points": .array(middle)],
                    ]
                ])
                kept += run
                i += n
            }
            points = kept
            text = JSON.object(["timelineObjects": .array(objects)]).text
        }
        return (Array(text.utf8), points)
    }

    private func i(rng: inout SeededRandom) -> Bool { Bool.random(using: &rng) }
}
