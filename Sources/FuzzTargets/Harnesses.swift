import ConfigFile
import CouchEngine
import CouchCollation
import CouchJSON
import HistoryImport
import CouchProtocol
import CouchServer
import Foundation
import Geo
import HTTPServing
import HTTPTypes
import Hummingbird
import LinearRegex
import Logging
import MIMEMultipart
import NIOCore
import TrackerApp

/// The libFuzzer entry points of `lt-fuzz`. `LT_FUZZ_TARGET` chooses the harness; each feeds
/// one input to one parser (and what runs on its result) and stops the process on a finding:
/// a trap is a crash libFuzzer reports, and the harnesses also check properties (a parsed JSON
/// value prints and parses back to itself; a request the server refuses gets a CouchDB-style
/// JSON error, never a 500).
enum Harness: String, CaseIterable {
    case json, selector, regex, wkt, geo, multipart, revs, http, app, control, config, prometheus, rewrite, history,
        archive

    static let current: Harness = {
        let name = ProcessInfo.processInfo.environment["LT_FUZZ_TARGET"] ?? ""
        guard let harness = Harness(rawValue: name) else {
            FileHandle.standardError.write(
                Data(
                    "lt-fuzz: set LT_FUZZ_TARGET to one of \(Harness.allCases.map(\.rawValue).joined(separator: ", "))\n"
                        .utf8))
            exit(2)
        }
        return harness
    }()

    func run(_ bytes: [UInt8]) {
        switch self {
        case .json: Harness.json(bytes)
        case .selector: Harness.selector(bytes)
        case .regex: Harness.regex(bytes)
        case .wkt: Harness.wkt(bytes)
        case .geo: Harness.geo(bytes)
        case .multipart: Harness.multipart(bytes)
        case .revs: Harness.revs(bytes)
        case .http: HTTPHarness.shared.database(bytes)
        case .app: HTTPHarness.shared.application(bytes)
        case .control: HTTPHarness.shared.controlSocket(bytes)
        case .config: Harness.config(bytes)
        case .prometheus: Harness.prometheus(bytes)
        case .rewrite: Harness.rewrite(bytes)
        case .history: Harness.history(bytes)
        case .archive: Harness.archive(bytes)
        }
    }

    /// Stops the process with a message: libFuzzer saves the input that did it.
    static func finding(_ message: String) -> Never {
        FileHandle.standardError.write(Data("lt-fuzz finding: \(message)\n".utf8))
        abort()
    }

    /// History file readers (`HistoryImport`): the first byte picks the format and the size of
    /// the pieces, the rest is the file. Read whole and read in pieces, the locations and the
    /// failure must be the same; every location must be on the globe; detection must not trap.
    static func history(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let formats = HistoryFormat.allCases
        let format = formats[Int(first) % formats.count]
        let piece = 1 + Int(first) / formats.count
        let file = Array(bytes.dropFirst())
        _ = HistoryFormat.detect(Array(file.prefix(HistoryFormat.detectionWindow)))
        func read(_ size: Int) -> ([ImportedLocation], String?) {
            var reader = HistoryReader(format: format)
            var out: [ImportedLocation] = []
            do {
                var start = 0
                while start < file.count {
                    let end = min(file.count, start + size)
                    try reader.feed(file[start..<end]) { out.append($0) }
                    start = end
                }
                try reader.finish { out.append($0) }
                return (out, nil)
            } catch {
                return (out, "\(error)")
            }
        }
        let whole = read(max(1, file.count))
        let pieces = read(piece)
        guard whole.0 == pieces.0, whole.1 == pieces.1 else {
            finding(
                "\(format.rawValue): read whole and in pieces of \(piece) differ: \(whole.1 ?? "ok") / \(pieces.1 ?? "ok")"
            )
        }
        for location in whole.0 where !location.isValid { finding("\(format.rawValue): a location off the globe") }
    }

    /// ZIP archives of histories (`HistoryFile`, `ZipEntries`): the first byte sets the size of
    /// the pieces, the rest is the file (an archive when it starts `PK\u{3}\u{4}`). Read whole
    /// and in pieces, the locations, entries and failure must be the same.
    static func archive(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let piece = 1 + Int(first) * 97
        let file = Array(bytes.dropFirst())
        func read(_ size: Int) -> ([ImportedLocation], [HistoryFile.Entry], String?) {
            var reader = HistoryFile()
            var out: [ImportedLocation] = []
            do {
                var start = 0
                while start < file.count {
                    let end = min(file.count, start + size)
                    try file[start..<end].withUnsafeBytes {
                        try reader.feed($0) { location, _ in out.append(location) }
                    }
                    start = end
                }
                try reader.finish { location, _ in out.append(location) }
                return (out, reader.entries, nil)
            } catch {
                return (out, reader.entries, "\(error)")
            }
        }
        let whole = read(max(1, file.count))
        let pieces = read(piece)
        guard whole.0 == pieces.0, whole.1 == pieces.1, whole.2 == pieces.2 else {
            finding("archive: read whole and in pieces of \(piece) differ: \(whole.2 ?? "ok") / \(pieces.2 ?? "ok")")
        }
        for location in whole.0 where !location.isValid { finding("archive: a location off the globe") }
    }

    /// JSON parser: any bytes; a parsed value must print and parse back to the same value.
    static func json(_ bytes: [UInt8]) {
        guard let value = try? JSON.parse(bytes) else { return }
        let printed = value.bytes
        guard let again = try? JSON.parse(printed) else {
            finding("printed JSON does not parse: \(String(decoding: printed.prefix(200), as: UTF8.self))")
        }
        guard again == value else {
            finding("JSON changed in a round trip: \(String(decoding: printed.prefix(200), as: UTF8.self))")
        }
        _ = JSON.collate(value, again)
        _ = value.collationKey()
    }

    static let configurationKeys: [String: ConfigurationFile.Kind] = [
        "data": .string, "port": .integer, "database-only": .boolean, "access-log": .onOff, "trusted-proxy": .list,
    ]

    /// Configuration files: any text; what is accepted holds only known keys, each as the flag takes it.
    static func config(_ bytes: [UInt8]) {
        guard
            let file = try? ConfigurationFile(
                text: String(decoding: bytes, as: UTF8.self), path: "fuzz.yaml", keys: configurationKeys)
        else { return }
        for (key, value) in file.values {
            guard let kind = configurationKeys[key] else { finding("unknown key \(key) accepted") }
            switch kind {
            case .integer: if Int(value) == nil { finding("\(key): \(value) is not an integer") }
            case .boolean: if value != "true" && value != "false" { finding("\(key): \(value)") }
            case .onOff: if value != "on" && value != "off" { finding("\(key): \(value)") }
            case .string, .list: break
            }
        }
    }

    /// Prometheus' text format, as `lt doctor` reads it from any server: each sample, written
    /// back as a line (label values escaped), must parse to itself.
    static func prometheus(_ bytes: [UInt8]) {
        let samples = PrometheusSample.parse(String(decoding: bytes, as: UTF8.self))
        _ = samples.sum("x", ["a": "b"])
        for sample in samples {
            let labels = sample.labels.map { key, value in
                key + "=\""
                    + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                    .replacingOccurrences(of: "\n", with: "\\n") + "\""
            }
            let value =
                sample.value.isNaN
                ? "NaN" : sample.value == .infinity ? "+Inf" : sample.value == -.infinity ? "-Inf" : "\(sample.value)"
            let line = sample.name + (labels.isEmpty ? "" : "{" + labels.joined(separator: ",") + "}") + " " + value
            let again = PrometheusSample.parse(line)
            guard again.count == 1, again[0].name == sample.name, again[0].labels == sample.labels,
                again[0].value == sample.value || (again[0].value.isNaN && sample.value.isNaN)
            else {
                finding("a sample does not parse back from its line: \(line.prefix(300))")
            }
        }
    }

    static let documents: [JSON] = [
        ["_id": "a", "n": .int(Int.min), "s": "x", "a": [1, 2, 3], "o": ["k": "v"]],
        ["_id": "b", "n": .int(Int.max), "s": "", "a": [], "d": 1.5e300, "o": [:]],
        ["_id": "c", "n": 0, "s": "Zürich", "a": [["k": 1]], "neg": -0.0, "null": nil],
    ]

    /// Selectors: `{"selector": S, "doc": D}` (or a bare selector), parsed and matched against
    /// D and a few documents with extreme values.
    static func selector(_ bytes: [UInt8]) {
        guard let json = try? JSON.parse(bytes) else { return }
        guard let selector = try? Selector(json: json["selector"] ?? json) else { return }
        for doc in documents + [json["doc"] ?? .null] { _ = selector.matches(doc) }
    }

    /// `$regex`: a pattern (up to the first NUL byte) and a subject (the rest). A pattern that
    /// compiles must decide on the subject within its linear bound: at most about twice the
    /// program's size in steps per byte; needing more is a finding (work that is not linear).
    static func regex(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
        // Small programs over short subjects: the property is the same at any size, and big
        // ones only slow the fuzzer down (a 20,000-step program over 64 KB is 2.6 billion steps).
        guard let regex = try? LinearRegex(String(decoding: bytes[..<split], as: UTF8.self)), regex.size <= 1000 else {
            return
        }
        let subject = Array(bytes[min(split + 1, bytes.endIndex)...].prefix(512))
        let bound = (subject.count + 1) * 2 * regex.size + regex.size
        if regex.firstMatch(in: subject, budget: bound) == .budgetExceeded {
            finding("a match took more than \(bound) steps (size \(regex.size), \(subject.count) bytes)")
        }
    }

    static let box = QueryShape.box(BoundingBox(minLon: -10, minLat: -10, maxLon: 10, maxLat: 10))

    /// WKT: any text; a parsed geometry is related to a box with every relation.
    static func wkt(_ bytes: [UInt8]) {
        guard let geometry = try? WKT.parse(String(decoding: bytes, as: UTF8.self)) else { return }
        for relation in Relation.allCases { _ = box.matches(relation, geometry) }
        _ = QueryShape.geometry(geometry).center
    }

    /// A spatial index over sample points near the antimeridian, the poles and the origin.
    static let index: SpatialIndex = {
        var entries: [(id: String, geometry: Geometry)] = []
        for (i, (lon, lat)) in [
            (0.0, 0.0), (179.9, 0.1), (-179.9, -0.1), (0, 89.99), (0, -89.99), (-122.3, 37.5), (10, 10),
        ].enumerated() {
            entries.append(("p\(i)", .point(Coordinate(lon: lon, lat: lat))))
        }
        return SpatialIndex(entries, times: entries.indices.map { Double($0) * 1000 })
    }()

    /// Geo query parameters: a query string (`lat=…&lon=…&radius=…`), parsed as Cloudant's
    /// `_geo` and LocationTracker's `_geo_grid` parameters, and run on a small index.
    static func geo(_ bytes: [UInt8]) {
        var parameters: [String: String] = [:]
        for pair in String(decoding: bytes, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            parameters[key] = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
        }
        if let request = try? GeoRequest(parameters: parameters) { _ = index.search(request.search) }
        if let grid = try? GeoGridRequest(parameters: parameters) { _ = grid.json(grid.grid(of: index)) }
    }

    /// Declarative rewrites: the first line is a `rewrites` array, the second a method and a
    /// path with a query. A resolved target, joined to a design document's path, normalizes
    /// to an absolute path that normalizes to itself.
    static func rewrite(_ bytes: [UInt8]) {
        let lines = bytes.split(separator: 10, maxSplits: 1, omittingEmptySubsequences: false)
        guard let rules = (try? JSON.parse(Array(lines[0])))?.arrayValue else { return }
        let request = lines.count > 1 ? String(decoding: lines[1], as: UTF8.self) : "GET "
        let method = String(request.prefix { $0 != " " })
        let target = String(request.drop { $0 != " " }.dropFirst())
        let question = target.firstIndex(of: "?")
        let path = target[..<(question ?? target.endIndex)].split(separator: "/").map(String.init)
        let query = CouchURL.orderedParameters(question.map { String(target[target.index(after: $0)...]) })
        for secure in [true, false] {
            guard
                let resolved = (try? RewriteRules(rules, secure: secure))?.resolve(
                    method: method, path: path, query: query)
            else { continue }
            let normalized = RewriteRules.normalized("/db/_design/d/" + resolved.prefix { $0 != "?" })
            if !normalized.hasPrefix("/") || RewriteRules.normalized(normalized) != normalized {
                finding("rewrite target \(resolved) normalizes to \(normalized), which is not stable")
            }
        }
    }

    /// Multipart bodies: the first line is the Content-Type (its boundary), the rest the body.
    static func multipart(_ bytes: [UInt8]) {
        let newline = bytes.firstIndex(of: 10) ?? bytes.endIndex
        let contentType = String(decoding: bytes[..<newline], as: UTF8.self)
        let body = Array(bytes[min(newline + 1, bytes.endIndex)...])
        guard let boundary = Multipart.boundary(of: contentType) else { return }
        _ = try? Multipart.parse(body, boundary: boundary)
    }

    /// Revisions: a document as replication sends it (`_rev`, `_revisions`), merged into a tree
    /// that already has history, then stemmed; and `rev` strings.
    static func revs(_ bytes: [UInt8]) {
        guard let json = try? JSON.parse(bytes) else { return }
        for text in (json["revs"]?.arrayValue ?? []).compactMap(\.stringValue) { _ = Revision(text)?.description }
        guard let input = try? DocumentInput(json: json) else { return }
        var tree = RevisionTree()
        _ = tree.merge(path: [Revision(pos: 2, hash: "b"), Revision(pos: 1, hash: "a")], deleted: false)
        if let path = input.revisions {
            _ = tree.merge(path: path, deleted: input.deleted)
        } else if let rev = input.rev {
            _ = tree.merge(path: [Revision(pos: rev.pos + 1, hash: "new"), rev], deleted: input.deleted)
        }
        _ = tree.winner
        _ = tree.stem(limit: max(1, (json["limit"]?.intValue ?? 3) & 0xFF))
        _ = tree.missing(input.revisions ?? [])
    }
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    _ = Harness.current
    if Harness.current == .http || Harness.current == .app { _ = HTTPHarness.shared }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    Harness.current.run(bytes)
    return 0
}
