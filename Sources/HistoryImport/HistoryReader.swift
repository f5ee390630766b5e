import CouchJSON

/// Reads one history file piece by piece, whatever its size, giving each location as soon as
/// its bytes have arrived: a JSON export one array element at a time (`JSONElementStream`), a
/// `.rec` or CSV file one line at a time, GPX one point at a time. Memory is bounded by the
/// largest element, line or point, each of which has a limit.
public struct HistoryReader: Sendable {
    /// Why the file cannot be read further, where, and as what it was being read.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var format: HistoryFormat?
        public var reason: String
        /// The byte of the file where it was found.
        public var offset: Int
        /// The line, for line formats and GPX.
        public var line: Int?
        /// The archive entry it is in (the offset and line are then the entry's).
        public var entry: String?
        public var description: String {
            let place = line.map { "line \($0), byte \(offset)" } ?? "byte \(offset)"
            return "\(entry.map { "\($0): " } ?? "")\(format.map { "\($0.rawValue): " } ?? "")\(reason) (at \(place))"
        }
    }

    public let format: HistoryFormat
    /// Bytes read so far.
    public private(set) var bytesRead = 0
    /// Entries of the file that gave no location, by reason.
    public private(set) var skipped: [String: Int] = [:]

    private enum Engine: Sendable {
        case json(JSONElementStream)
        case lines(LineSplitter, CSVReader?)
        case gpx(GPXScanner)
    }
    private var engine: Engine
    /// The first non-comment line of a recorder file or CSV has been seen.
    private var sawContent = false

    /// - Parameter columns: for CSV, the columns to read (found by name in the header when nil).
    public init(format: HistoryFormat, columns: CSVColumns.Names? = nil) {
        self.format = format
        switch format {
        case .googleRecords: engine = .json(JSONElementStream(paths: [["locations"]]))
        case .googleSemantic: engine = .json(JSONElementStream(paths: [["timelineObjects"]]))
        case .androidTimeline: engine = .json(JSONElementStream(paths: [["semanticSegments"], ["rawSignals"]]))
        case .iosTimeline: engine = .json(JSONElementStream(paths: [[]]))
        case .ownTracksJSON: engine = .json(JSONElementStream(paths: [[], ["data"]]))
        case .geoJSON: engine = .json(JSONElementStream(paths: [["features"], []]))
        case .ownTracksRecorder: engine = .lines(LineSplitter(), nil)
        case .csv: engine = .lines(LineSplitter(), CSVReader(names: columns))
        case .gpx: engine = .gpx(GPXScanner())
        }
    }

    /// Reads the next piece of the file, calling `emit` for every location it completes.
    public mutating func feed(_ bytes: some Collection<UInt8>, emit: (ImportedLocation) throws -> Void) throws {
        try Array(bytes).withUnsafeBytes { try feed($0, emit: emit) }
    }

    /// Reads the next piece of the file, calling `emit` for every location it completes.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (ImportedLocation) throws -> Void) throws {
        defer { bytesRead += bytes.count }
        switch engine {
        case var .json(stream):
            defer { engine = .json(stream) }
            var problem: Failure?
            do {
                try stream.feed(bytes) { element in
                    do { try locations(in: element, emit: emit) } catch let failure as Failure {
                        problem = failure
                        throw failure
                    }
                }
            } catch let failure as JSONElementStream.Failure {
                throw Failure(format: format, reason: failure.reason, offset: failure.offset)
            } catch {
                throw problem ?? error
            }
        case .lines(var lines, let csv):
            var csv = csv
            defer { engine = .lines(lines, csv) }
            do {
                try lines.feed(bytes) { line, offset, number in
                    try readLine(line, offset: offset, number: number, csv: &csv, emit: emit)
                }
            } catch var failure as Failure {
                failure.format = format
                throw failure
            }
        case var .gpx(scanner):
            defer { engine = .gpx(scanner) }
            do {
                try scanner.feed(bytes) { point in
                    if let location = point.location { try emit(location) } else { skip(point.missing) }
                }
            } catch let failure as GPXScanner.Failure {
                throw Failure(format: .gpx, reason: failure.reason, offset: failure.offset, line: failure.line)
            }
        }
    }

    /// The end of the file: an error when it stops part way through (what was read stays read).
    public mutating func finish(emit: (ImportedLocation) throws -> Void) throws {
        switch engine {
        case let .json(stream):
            do { try stream.finish() } catch let failure as JSONElementStream.Failure {
                throw Failure(format: format, reason: failure.reason, offset: failure.offset)
            }
        case .lines(var lines, let csv):
            var csv = csv
            try lines.finish { line, offset, number in
                try readLine(line, offset: offset, number: number, csv: &csv, emit: emit)
            }
            engine = .lines(lines, csv)
            if format == .csv, csv?.columns == nil {
                throw Failure(
                    format: .csv, reason: "No header line naming latitude, longitude and time columns",
                    offset: bytesRead)
            }
        case let .gpx(scanner):
            do { try scanner.finish() } catch let failure as GPXScanner.Failure {
                throw Failure(format: .gpx, reason: failure.reason, offset: failure.offset, line: failure.line)
            }
        }
    }

    private mutating func skip(_ reason: String) { skipped[reason, default: 0] += 1 }

    // MARK: Lines

    private mutating func readLine(
        _ line: ArraySlice<UInt8>, offset: Int, number: Int, csv: inout CSVReader?,
        emit: (ImportedLocation) throws -> Void
    ) throws {
        if line.allSatisfy(HistoryFormat.isSpace) { return }
        if var reader = csv {
            defer { csv = reader }
            do {
                switch try reader.read(line) {
                case .header: return
                case let .location(location): try emit(location)
                case let .skipped(reason): skip(reason)
                }
            } catch let failure as CSVReader.Failure {
                throw Failure(format: .csv, reason: failure.reason, offset: offset, line: number)
            }
            return
        }
        // A recorder line: `2024-05-01T10:00:00Z\t*                 \t{...}`.
        guard let brace = line.firstIndex(of: UInt8(ascii: "{")) else {
            throw Failure(
                format: .ownTracksRecorder, reason: "A line without a JSON message", offset: offset, line: number)
        }
        let message: JSON
        do { message = try JSON.parse(Array(line[brace...])) } catch {
            throw Failure(
                format: .ownTracksRecorder, reason: "A line whose message is not JSON (\(error))", offset: offset,
                line: number)
        }
        try ownTracks(message, emit: emit)
    }

    // MARK: JSON elements

    private mutating func locations(
        in element: JSONElementStream.Element, emit: (ImportedLocation) throws -> Void
    )
        throws
    {
        let json: JSON
        do { json = try JSON.parse(element.bytes) } catch {
            throw Failure(format: format, reason: "An entry that is not JSON (\(error))", offset: element.offset)
        }
        switch format {
        case .googleRecords: try googleRecord(json, emit: emit)
        case .googleSemantic: try GoogleTimeline.semantic(json, emit: emit, skip: { skip($0) })
        case .androidTimeline:
            if element.path == 0 {
                try GoogleTimeline.segment(json, emit: emit, skip: { skip($0) })
            } else {
                try GoogleTimeline.rawSignal(json, emit: emit, skip: { skip($0) })
            }
        case .iosTimeline:
            try GoogleTimeline.segment(json, emit: emit, skip: { skip($0) })
        case .ownTracksJSON:
            try ownTracks(json, emit: emit)
        case .geoJSON:
            try GeoJSONHistory.feature(json, emit: emit, skip: { skip($0) })
        case .ownTracksRecorder, .csv, .gpx:
            break
        }
    }

    /// One of `Records.json`'s `locations`.
    private mutating func googleRecord(_ json: JSON, emit: (ImportedLocation) throws -> Void) throws {
        guard let lat = GoogleTimeline.e7(json["latitudeE7"]), let lon = GoogleTimeline.e7(json["longitudeE7"]) else {
            return skip("no latitudeE7/longitudeE7")
        }
        guard let (time, offset) = GoogleTimeline.time(json["timestamp"], milliseconds: json["timestampMs"]) else {
            return skip("no timestamp")
        }
        var location = ImportedLocation(time: time, utcOffsetMinutes: offset, latitude: lat, longitude: lon)
        location.accuracy = GoogleTimeline.number(json["accuracy"])
        location.altitude = GoogleTimeline.number(json["altitude"])
        location.verticalAccuracy = GoogleTimeline.number(json["verticalAccuracy"])
        location.speed = GoogleTimeline.number(json["velocity"])
        location.heading = GoogleTimeline.number(json["heading"])
        location.positionSource = json["source"]?.stringValue
        location.activity = GoogleTimeline.likeliestActivity(json["activity"])
        try emitChecked(location, emit: emit)
    }

    /// An OwnTracks message: a `location` is one (speed in km/h becomes m/s); others are skipped.
    private mutating func ownTracks(_ json: JSON, emit: (ImportedLocation) throws -> Void) throws {
        guard json["_type"]?.stringValue == "location" else {
            return skip("OwnTracks \(json["_type"]?.stringValue ?? "message without _type") (not a location)")
        }
        guard let lat = GoogleTimeline.number(json["lat"]), let lon = GoogleTimeline.number(json["lon"]) else {
            return skip("no lat/lon")
        }
        guard let tst = GoogleTimeline.number(json["tst"]), tst.isFinite, (0..<1e11).contains(tst) else {
            return skip("no tst")
        }
        var location = ImportedLocation(time: Int64((tst * 1000).rounded()), latitude: lat, longitude: lon)
        location.accuracy = GoogleTimeline.number(json["acc"])
        location.altitude = GoogleTimeline.number(json["alt"])
        location.verticalAccuracy = GoogleTimeline.number(json["vac"])
        location.speed = GoogleTimeline.number(json["vel"]).map { $0 / 3.6 }
        location.heading = GoogleTimeline.number(json["cog"])
        location.positionSource = json["t"]?.stringValue.map { "owntracks-\($0)" }
        try emitChecked(location, emit: emit)
    }

    private mutating func emitChecked(_ location: ImportedLocation, emit: (ImportedLocation) throws -> Void) throws {
        guard location.isValid else { return skip("position or time out of range") }
        try emit(location)
    }
}
