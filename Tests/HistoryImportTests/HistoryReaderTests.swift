import CouchJSON
import Foundation
import HistoryImport
import LTTestSupport
import Testing

/// Every format the importer reads, on seeded generated files: recognised by content, read in
/// pieces cut anywhere, and every location (time, latitude, longitude, accuracy) equal to an
/// independent reading of the same file by Python's standard library
/// (`Reference/read_history.py`).
@Suite("History files")
struct HistoryReaderTests {
    static let formats: [HistoryFormat] = [
        .googleRecords, .googleSemantic, .androidTimeline, .iosTimeline, .ownTracksJSON, .ownTracksRecorder, .gpx, .geoJSON, .csv,
    ]
    static let reference = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Reference/read_history.py")

    /// Our reading: locations and skipped entries, the file fed in random pieces.
    static func read(_ bytes: [UInt8], _ format: HistoryFormat, rng: inout SeededRandom) throws -> (
        [ImportedLocation], [String: Int]
    ) {
        var reader = HistoryReader(format: format)
        var out: [ImportedLocation] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...4096, using: &rng))
            try reader.feed(bytes[start..<end]) { out.append($0) }
            start = end
        }
        try reader.finish { out.append($0) }
        #expect(reader.bytesRead == bytes.count)
        return (out, reader.skipped)
    }

    /// Python's reading of the file: [time, lat, lon, accuracy] per location.
    static func python(_ bytes: [UInt8], _ format: HistoryFormat) throws -> [[JSON]] {
        let directory = try TemporaryDirectory("lt-history")
        defer { directory.cleanup() }
        let file = directory.url.appendingPathComponent("history")
        try Data(bytes).write(to: file)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", reference.path, format.rawValue, file.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return try JSON.parse(Array(data)).arrayValue?.compactMap(\.arrayValue) ?? []
    }

    @Test("Every format: recognised by content, and every location equal to Python's reading of the file", arguments: formats, 0..<3)
    func formatAgainstPython(format: HistoryFormat, seed: Int) throws {
        var files = HistoryFiles(seed: seed * 100 + Self.formats.firstIndex(of: format)!)
        let generated = files.points(Int.random(in: 20...200, using: &files.rng))
        let (bytes, expected) = files.file(format, generated)
        #expect(HistoryFormat.detect(Array(bytes.prefix(HistoryFormat.detectionWindow))) == .format(format))
        var rng = SeededRandom(seed: UInt64(seed))
        let (ours, skipped) = try Self.read(bytes, format, rng: &rng)
        let theirs = try Self.python(bytes, format)
        #expect(ours.count == expected.count)
        #expect(ours.count == theirs.count)
        for (mine, reference) in zip(ours, theirs) {
            #expect(JSON.int(Int(mine.time)) == reference[0], "\(format) time")
            #expect(abs(mine.latitude - (reference[1].doubleValue ?? .nan)) < 1e-9, "\(format) latitude")
            #expect(abs(mine.longitude - (reference[2].doubleValue ?? .nan)) < 1e-9, "\(format) longitude")
            #expect(mine.accuracy == reference[3].doubleValue, "\(format) accuracy")
        }
        #expect(Set(ours.map(\.time)) == Set(expected.map(\.time)))
        // Each generator mixes in entries that are not locations; each is reported with a reason.
        if format != .iosTimeline && format != .androidTimeline || skipped.values.reduce(0, +) > 0 {
            #expect(!skipped.isEmpty, "\(format): nothing reported skipped")
        }
    }

    @Test("Times keep the offset they were written with; speeds, altitudes and sources map to the documented fields")
    func fieldsAndOffsets() throws {
        var rng = SeededRandom(seed: 1)
        let android = Array(
            #"{"semanticSegments":[{"startTime":"2024-06-10T08:00:00.000+02:00","timelinePath":[{"point":"43.7712345°, 9.0712345°","time":"2024-06-10T08:01:00.500+02:00"}]}],"rawSignals":[{"position":{"LatLng":"1.5°, -2.5°","accuracyMeters":7,"altitudeMeters":99.5,"source":"GPS","timestamp":"2024-06-10T06:02:00Z","speedMetersPerSecond":1.25}}]}"#
                .utf8)
        let (locations, _) = try Self.read(android, .androidTimeline, rng: &rng)
        #expect(locations.count == 2)
        #expect(locations[0].time == 1_717_999_260_500 && locations[0].utcOffsetMinutes == 120)
        #expect(locations[0].latitude == 43.7712345 && locations[0].longitude == 9.0712345)
        #expect(locations[1].utcOffsetMinutes == nil && locations[1].altitude == 99.5 && locations[1].speed == 1.25)
        #expect(locations[1].positionSource == "GPS" && locations[1].accuracy == 7)
        let doc = locations[1].document(user: "amy", id: "x", format: .androidTimeline)
        #expect(doc["created_at"] == .int(1_717_999_320_000))
        #expect(doc["geometry"]?["coordinates"] == [.double(-2.5), .double(1.5)])
        #expect(doc["properties"]?["velocity"] == .double(1.25) && doc["properties"]?["username"] == "amy")
        #expect(doc["properties"]?["import_format"] == "android-timeline")
        // Records.json: an E7 past ±180° wrapped around a 32-bit integer in old exports.
        let records = Array(#"{"locations":[{"latitudeE7":4294067296,"longitudeE7":100,"timestampMs":"1500000000000","velocity":3,"heading":270,"altitude":5,"verticalAccuracy":2}]}"#.utf8)
        let (old, _) = try Self.read(records, .googleRecords, rng: &rng)
        #expect(old.first?.latitude == -0.09 && old.first?.speed == 3 && old.first?.heading == 270)
        // OwnTracks speeds are km/h.
        let owntracks = Array(#"[{"_type":"location","lat":1,"lon":2,"tst":1700000000,"vel":36}]"#.utf8)
        #expect(try Self.read(owntracks, .ownTracksJSON, rng: &rng).0.first?.speed == 10)
    }

    @Test("Repeat-safe ids: one per (user, time, position to 1e-7°), whatever the format that held it")
    func documentIDs() {
        let a = ImportedLocation(time: 1_700_000_000_123, latitude: 43.7712345, longitude: 9.0712345)
        var b = a
        b.accuracy = 50  // what else the file says does not matter
        b.utcOffsetMinutes = 60
        #expect(a.documentID(user: "amy") == b.documentID(user: "amy"))
        #expect(a.documentID(user: "amy") != a.documentID(user: "ben"))
        var moved = a
        moved.latitude += 1e-7
        #expect(a.documentID(user: "amy") != moved.documentID(user: "amy"))
        var later = a
        later.time += 1
        #expect(a.documentID(user: "amy") != later.documentID(user: "amy"))
        // Ids sort by time.
        let early = ImportedLocation(time: 999_000, latitude: 0, longitude: 0)
        #expect(early.documentID(user: "amy") < a.documentID(user: "amy"))
        #expect(a.documentID(user: "amy").hasPrefix("imp-1700000000123-"))
        // The digest as Python's hashlib computes it (ids must not change between versions: an
        // import repeated after an upgrade must find what the first stored).
        #expect(a.documentID(user: "amy") == "imp-1700000000123-48bd468f7af13fa1")
        #expect(early.documentID(user: "amy") == "imp-0000000999000-82b7e4c2676410b3")
    }

    @Test("ISO times: offsets, fractions, no seconds; refused when not a time")
    func isoTimes() {
        #expect(ISOTime.parse("1970-01-01T00:00:00Z")! == (0, nil))
        #expect(ISOTime.parse("2024-02-29T23:59:59.999+01:00")! == (1_709_247_599_999, 60))
        #expect(ISOTime.parse("2024-02-29T23:59:59.9994-0130")! == (1_709_256_599_999, -90))
        #expect(ISOTime.parse("2024-02-29 12:00")!.milliseconds == 1_709_208_000_000)
        for bad in ["", "2024-13-01T00:00:00Z", "2024-01-01", "2024-01-01T00:00:00Q", "2024-01-01T25:00:00Z", "x2024-01-01T00:00:00Z"] {
            #expect(ISOTime.parse(bad) == nil, "\(bad)")
        }
        // Against Foundation, for many times.
        var rng = SeededRandom(seed: 9)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<500 {
            let ms = Int64.random(in: 0...4_000_000_000_000, using: &rng)
            let text = formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
            #expect(ISOTime.parse(text)?.milliseconds == ms, "\(text)")
        }
    }

    @Test("A truncated or malformed file is an error naming the format and the byte or line; what came before was read")
    func badFiles() throws {
        var files = HistoryFiles(seed: 5)
        let points = files.points(50)
        for format in Self.formats where format != .csv {
            let (bytes, _) = files.file(format, points)
            var reader = HistoryReader(format: format)
            var read = 0
            try reader.feed(bytes.prefix(bytes.count * 2 / 3)) { _ in read += 1 }
            let failure = #expect(throws: HistoryReader.Failure.self, "\(format)") {
                try reader.feed(Array("\u{1}{]]]<<\n".utf8)) { _ in read += 1 }
                try reader.finish { _ in read += 1 }
            }
            #expect(failure?.format == format)
            #expect(failure.map { $0.description.contains(format.rawValue) } == true)
            #expect(read > 0, "\(format): nothing read before the damage")
        }
        // A CSV cut mid-row: the short row is skipped with its reason, the rest was read.
        var csv = HistoryReader(format: .csv)
        var rows = 0
        try csv.feed(Array("time,lat,lon\n2024-01-01T00:00:00Z,1,2\n2024-01-01T00:01:00Z,1".utf8)) { _ in rows += 1 }
        try csv.finish { _ in rows += 1 }
        #expect(rows == 1 && csv.skipped.values.reduce(0, +) == 1)
        #expect(HistoryFormat.detect(Array("hello".utf8)) == .unknown)
        #expect(HistoryFormat.detect(Array(#"{"placeAggregates":[]}"#.utf8)) != .format(.googleRecords))
        if case .refused = HistoryFormat.detect(Array(#"{"placeAggregates":[]}"#.utf8)) {} else {
            Issue.record("Timeline Edits.json is not refused")
        }
    }
}
