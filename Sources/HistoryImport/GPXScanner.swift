/// GPX read as a stream of tags, one point at a time: `<trkpt>`, `<rtept>` and `<wpt>` with
/// their `lat`/`lon` attributes and `<time>`, `<ele>`, `<speed>`, `<course>`, `<hdop>`
/// children. Comments, processing instructions, CDATA and everything else are skimmed. A tag
/// or a text longer than its limit is an error, so no input grows memory without end.
struct GPXScanner: Sendable {
    struct Failure: Error {
        var reason: String
        var offset: Int
        var line: Int
    }

    /// A point as the file had it; `location` is nil (with `missing` saying why) when it lacks
    /// a position or a time.
    struct Point {
        var location: ImportedLocation?
        var missing: String
    }

    var maxTagBytes = 64 << 10
    var maxTextBytes = 4096

    private enum State: Sendable {
        case text
        case tag
        case comment
        case cdata
    }
    private var state = State.text
    private var tag: [UInt8] = []
    private var text: [UInt8] = []
    private var offset = 0
    private var line = 1
    private var tagStart = 0
    private var depth = 0
    private var sawGPX = false
    /// A point being read: its position, and what its children said.
    private struct OpenPoint {
        var lat: Double?
        var lon: Double?
        var time: (Int64, Int?)?
        var altitude: Double?
        var speed: Double?
        var course: Double?
        var hdop: Double?
        var kind: String
    }

    /// The point being read.
    private var point: OpenPoint?
    /// The child of a point whose text is being read.
    private var child: String?

    mutating func feed(_ bytes: UnsafeRawBufferPointer, point emit: (Point) throws -> Void) throws {
        for byte in bytes {
            offset += 1
            if byte == UInt8(ascii: "\n") { line += 1 }
            switch state {
            case .text:
                if byte == UInt8(ascii: "<") {
                    state = .tag
                    tag.removeAll(keepingCapacity: true)
                    tagStart = offset - 1
                } else if child != nil {
                    guard text.count < maxTextBytes else { throw fail("A text longer than \(maxTextBytes) bytes") }
                    text.append(byte)
                }
            case .tag:
                guard tag.count < maxTagBytes else { throw fail("A tag longer than \(maxTagBytes) bytes") }
                tag.append(byte)
                if tag.count == 3, tag == Array("!--".utf8) {
                    state = .comment
                } else if tag.count == 8, tag == Array("![CDATA[".utf8) {
                    state = .cdata
                } else if byte == UInt8(ascii: ">") {
                    state = .text
                    tag.removeLast()
                    try closeTag(emit)
                }
            case .comment:
                tag.append(byte)
                if tag.count > 6 { tag.removeFirst(tag.count - 6) }
                if tag.suffix(3) == Array("-->".utf8) { state = .text }
            case .cdata:
                tag.append(byte)
                if tag.count > 3 { tag.removeFirst(tag.count - 3) }
                if tag == Array("]]>".utf8) {
                    if child != nil { text.removeLast(min(2, text.count)) }
                    state = .text
                } else if child != nil {
                    guard text.count < maxTextBytes else { throw fail("A text longer than \(maxTextBytes) bytes") }
                    text.append(byte)
                }
            }
        }
    }

    func finish() throws {
        guard state == .text, depth == 0 else {
            throw Failure(reason: "The file ends inside an element (truncated?)", offset: offset, line: line)
        }
        guard sawGPX else { throw Failure(reason: "No <gpx> element", offset: offset, line: line) }
    }

    private func fail(_ reason: String) -> Failure { Failure(reason: reason, offset: tagStart, line: line) }

    private mutating func closeTag(_ emit: (Point) throws -> Void) throws {
        guard let first = tag.first else { throw fail("An empty tag") }
        if first == UInt8(ascii: "?") || first == UInt8(ascii: "!") { return }  // <?xml ...?>, <!DOCTYPE>
        let closing = first == UInt8(ascii: "/")
        let selfClosing = tag.last == UInt8(ascii: "/")
        let body = tag.dropFirst(closing ? 1 : 0).dropLast(selfClosing ? 1 : 0)
        let nameEnd = body.firstIndex { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D } ?? body.endIndex
        var name = String(decoding: body[..<nameEnd], as: UTF8.self)
        if let colon = name.lastIndex(of: ":") { name = String(name[name.index(after: colon)...]) }  // gpx:trkpt
        if closing {
            depth -= 1
            guard depth >= 0 else { throw fail("</\(name)> closes nothing open") }
            if let open = child, open == name {
                let value = String(decoding: text, as: UTF8.self).trimmingCharacters(in: " \t\r\n")
                switch name {
                case "time": point?.time = ISOTime.parse(value).map { ($0.milliseconds, $0.offsetMinutes) }
                case "ele": point?.altitude = Double(value)
                case "speed": point?.speed = Double(value)
                case "course": point?.course = Double(value)
                case "hdop": point?.hdop = Double(value)
                default: break
                }
                child = nil
            } else if let current = point, current.kind == name {
                point = nil
                try emit(Self.finished(current))
            }
            return
        }
        if name == "gpx" { sawGPX = true }
        if !selfClosing { depth += 1 }
        if ["trkpt", "rtept", "wpt"].contains(name) {
            let attributes = Self.attributes(body[nameEnd...])
            let current = OpenPoint(
                lat: attributes["lat"].flatMap(Double.init), lon: attributes["lon"].flatMap(Double.init), kind: name)
            if selfClosing { try emit(Self.finished(current)) } else { point = current }
        } else if point != nil, !selfClosing, ["time", "ele", "speed", "course", "hdop"].contains(name) {
            child = name
            text.removeAll(keepingCapacity: true)
        }
    }

    private static func finished(_ point: OpenPoint) -> Point {
        guard let lat = point.lat, let lon = point.lon else {
            return Point(location: nil, missing: "<\(point.kind)> without lat and lon")
        }
        guard let time = point.time else { return Point(location: nil, missing: "<\(point.kind)> without a <time>") }
        var location = ImportedLocation(time: time.0, utcOffsetMinutes: time.1, latitude: lat, longitude: lon)
        location.altitude = point.altitude
        location.speed = point.speed
        location.heading = point.course
        // GPX has no accuracy; a common rule of thumb: 5 m per unit of horizontal dilution.
        location.accuracy = point.hdop.map { $0 * 5 }
        guard location.isValid else { return Point(location: nil, missing: "position or time out of range") }
        return Point(location: location, missing: "")
    }

    /// `name="value"` / `name='value'` pairs.
    static func attributes(_ bytes: ArraySlice<UInt8>) -> [String: String] {
        var out: [String: String] = [:]
        var i = bytes.startIndex
        while i < bytes.endIndex {
            while i < bytes.endIndex, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D {
                i += 1
            }
            let nameStart = i
            while i < bytes.endIndex, bytes[i] != UInt8(ascii: "="), bytes[i] != 0x20 { i += 1 }
            let name = String(decoding: bytes[nameStart..<i], as: UTF8.self)
            while i < bytes.endIndex, bytes[i] == 0x20 || bytes[i] == UInt8(ascii: "=") { i += 1 }
            guard i < bytes.endIndex, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else { break }
            let quote = bytes[i]
            i += 1
            let valueStart = i
            while i < bytes.endIndex, bytes[i] != quote { i += 1 }
            out[name] = String(decoding: bytes[valueStart..<min(i, bytes.endIndex)], as: UTF8.self)
            i += 1
        }
        return out
    }
}
