/// Which columns of a CSV file hold what: found by name in the header (`lat`/`latitude`,
/// `lon`/`lng`/`longitude`, `time`/`timestamp`/`date`/`datetime`/`tst`, and optionally
/// accuracy, altitude, speed, heading), or named by the caller.
public struct CSVColumns: Sendable, Equatable {
    public var latitude: Int
    public var longitude: Int
    public var time: Int
    public var accuracy: Int?
    public var altitude: Int?
    public var speed: Int?
    public var heading: Int?

    /// Header names the caller chose (nil: found by the usual names).
    public struct Names: Sendable, Equatable {
        public var latitude: String?
        public var longitude: String?
        public var time: String?
        public init(latitude: String? = nil, longitude: String? = nil, time: String? = nil) {
            self.latitude = latitude
            self.longitude = longitude
            self.time = time
        }
    }

    static let usual: [String: [String]] = [
        "latitude": ["lat", "latitude", "y"],
        "longitude": ["lon", "lng", "long", "longitude", "x"],
        "time": ["time", "timestamp", "datetime", "date_time", "date", "tst", "created_at", "recorded_at", "utc_time"],
        "accuracy": ["accuracy", "acc", "horizontal_accuracy", "hacc"],
        "altitude": ["altitude", "alt", "ele", "elevation"],
        "speed": ["speed", "velocity", "vel"],
        "heading": ["heading", "course", "bearing", "cog"],
    ]

    /// The columns a header names; nil when it names no latitude, longitude or time.
    static func find(in header: [String], names: Names? = nil) -> CSVColumns? {
        let lowered = header.map { $0.trimmingCharacters(in: " \"'").lowercased() }
        func column(_ role: String, _ chosen: String?) -> Int? {
            if let chosen { return lowered.firstIndex(of: chosen.lowercased()) }
            return usual[role]!.lazy.compactMap { lowered.firstIndex(of: $0) }.first
        }
        guard let lat = column("latitude", names?.latitude), let lon = column("longitude", names?.longitude),
            let time = column("time", names?.time)
        else { return nil }
        return CSVColumns(
            latitude: lat, longitude: lon, time: time, accuracy: column("accuracy", nil),
            altitude: column("altitude", nil), speed: column("speed", nil), heading: column("heading", nil))
    }
}

/// Reads a CSV file's lines (`LineSplitter` gives them): the header, then one location a row.
/// Fields may be quoted (`"a, b"`, `""` for a quote); a quoted field spanning lines is not
/// supported (location exports do not write them) and is reported.
struct CSVReader: Sendable {
    struct Failure: Error {
        var reason: String
    }

    enum Row {
        case header
        case location(ImportedLocation)
        case skipped(String)
    }

    let names: CSVColumns.Names?
    private(set) var columns: CSVColumns?
    private var delimiter = UInt8(ascii: ",")

    init(names: CSVColumns.Names?) {
        self.names = names
    }

    mutating func read(_ line: ArraySlice<UInt8>) throws -> Row {
        guard let columns else {
            delimiter = Self.delimiter(of: line)
            guard let found = CSVColumns.find(in: Self.split(line, delimiter: delimiter), names: names) else {
                throw Failure(
                    reason: names == nil
                        ? "The header names no latitude, longitude and time columns (name them with --lat-column, --lon-column, --time-column)"
                        : "The header lacks a column named by --lat-column, --lon-column or --time-column")
            }
            self.columns = found
            return .header
        }
        let fields = Self.split(line, delimiter: delimiter)
        func field(_ index: Int?) -> String? {
            guard let index, index < fields.count else { return nil }
            let value = fields[index].trimmingCharacters(in: " ")
            return value.isEmpty ? nil : value
        }
        guard let lat = field(columns.latitude).flatMap(Double.init),
            let lon = field(columns.longitude).flatMap(Double.init)
        else { return .skipped("row without a numeric latitude and longitude") }
        guard let text = field(columns.time), let when = Self.time(text) else {
            return .skipped("row without a readable time")
        }
        var location = ImportedLocation(time: when.0, utcOffsetMinutes: when.1, latitude: lat, longitude: lon)
        location.accuracy = field(columns.accuracy).flatMap(Double.init)
        location.altitude = field(columns.altitude).flatMap(Double.init)
        location.speed = field(columns.speed).flatMap(Double.init)
        location.heading = field(columns.heading).flatMap(Double.init)
        guard location.isValid else { return .skipped("position or time out of range") }
        return .location(location)
    }

    /// ISO text, or seconds since 1970 (milliseconds when 10^11 or more).
    static func time(_ text: String) -> (Int64, Int?)? {
        if let parsed = ISOTime.parse(text) { return (parsed.milliseconds, parsed.offsetMinutes) }
        guard let number = Double(text), number >= 0, number < 1e15 else { return nil }
        return (Int64((number < 1e11 ? number * 1000 : number).rounded()), nil)
    }

    /// The delimiter a header line uses: the most frequent of `,`, `;` and tab.
    static func delimiter(of line: some Collection<UInt8>) -> UInt8 {
        let candidates: [UInt8] = [UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "\t")]
        return candidates.max { a, b in line.count(where: { $0 == a }) < line.count(where: { $0 == b }) }!
    }

    /// A line's fields, quotes removed.
    static func split(_ line: some Collection<UInt8>, delimiter: UInt8) -> [String] {
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        var previousQuote = false
        for byte in line {
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    quoted = false
                    previousQuote = true
                } else {
                    field.append(byte)
                }
                continue
            }
            if byte == UInt8(ascii: "\"") {
                if previousQuote { field.append(byte) }
                quoted = true
                previousQuote = false
                continue
            }
            previousQuote = false
            if byte == delimiter {
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
            } else {
                field.append(byte)
            }
        }
        fields.append(String(decoding: field, as: UTF8.self))
        return fields
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
