/// The files location histories come in, recognised by what they hold (never by name).
public enum HistoryFormat: String, Sendable, CaseIterable, Codable {
    /// Google Takeout's `Records.json`: `{"locations": [{latitudeE7, longitudeE7, timestamp...}]}`.
    case googleRecords = "google-records"
    /// Google Takeout's Semantic Location History, one file a month: `{"timelineObjects": [...]}`.
    case googleSemantic = "google-semantic"
    /// Google Maps' Timeline exported from an Android phone: `{"semanticSegments": [...], "rawSignals": [...]}`.
    case androidTimeline = "android-timeline"
    /// Google Maps' Timeline exported from an iPhone (`location-history.json`): a bare array of segments.
    case iosTimeline = "ios-timeline"
    /// OwnTracks location messages as JSON: one, an array, or the recorder API's `{"data": [...]}`.
    case ownTracksJSON = "owntracks-json"
    /// OwnTracks Recorder's `.rec` files: a time, a tab, a type, a tab, a JSON message, per line.
    case ownTracksRecorder = "owntracks-rec"
    /// GPX 1.0/1.1: track, route and way points.
    case gpx
    /// GeoJSON: Point features, LineStrings with per-position times.
    case geoJSON = "geojson"
    /// Comma-, semicolon- or tab-separated values with a header naming the columns.
    case csv

    /// What the start of a file says it is.
    public enum Detection: Sendable, Equatable {
        case format(HistoryFormat)
        /// Recognised but not a location history (Google's `Timeline Edits.json`, settings).
        case refused(String)
        /// Not recognised.
        case unknown
    }

    /// How many leading bytes `detect` wants to see (fewer is fine for a shorter file).
    public static let detectionWindow = 64 << 10

    /// The format of a file from its first bytes.
    public static func detect(_ start: [UInt8]) -> Detection {
        var body = start[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        guard let first = body.firstIndex(where: { !isSpace($0) }) else { return .unknown }
        let text = String(decoding: body[first...], as: UTF8.self)
        func has(_ member: String) -> Bool { text.contains("\"\(member)\"") }
        switch body[first] {
        case UInt8(ascii: "<"):
            return text.contains("<gpx") ? .format(.gpx) : .unknown
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let isArray = body[first] == UInt8(ascii: "[")
            if has("placeAggregates") || has("rawSignal") && has("deviceInfo") && !has("rawSignals") {
                return .refused("Google's Timeline Edits.json holds edits and place statistics, not a location history")
            }
            if has("locations") && (has("latitudeE7") || has("timestampMs") || text.contains("\"locations\": []"))
                && !isArray
            {
                return .format(.googleRecords)
            }
            if has("timelineObjects") { return .format(.googleSemantic) }
            if has("semanticSegments") || has("rawSignals") { return .format(.androidTimeline) }
            if has("_type") && (has("tst") || has("lat")) { return .format(.ownTracksJSON) }
            if has("FeatureCollection") || has("Feature") || has("LineString") || has("Point") && has("coordinates") {
                return .format(.geoJSON)
            }
            if isArray && has("startTime") && (has("visit") || has("activity") || has("timelinePath")) {
                return .format(.iosTimeline)
            }
            return .unknown
        default:
            let line = text.prefix { $0 != "\n" && $0 != "\r" }
            if let tab = line.firstIndex(of: "\t"), ISOTime.parse(line[..<tab]) != nil, line.contains("{") {
                return .format(.ownTracksRecorder)
            }
            let header = line.lowercased()
            if CSVColumns.find(
                in: CSVReader.split(Array(line.utf8), delimiter: CSVReader.delimiter(of: Array(line.utf8))))
                != nil || header.contains("lat")
            {
                return .format(.csv)
            }
            return .unknown
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}
