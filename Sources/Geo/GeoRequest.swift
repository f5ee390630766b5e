import CouchJSON
import Foundation

/// A Cloudant Geo query (`GET /{db}/_design/{ddoc}/_geo/{index}?...`) in parsed form, the same
/// for HTTP and for Swift in-process callers.
public struct GeoRequest: Sendable {
    /// How results are shaped (`format`, or the `Accept` header).
    public enum Format: String, Sendable {
        case view, geojson, legacy
    }

    public var search: GeoSearch
    public var includeDocs = false
    public var format = Format.view
    /// `stale=ok`: answer from the index as it is, without bringing it up to date.
    public var stale = false

    /// Cloudant's limits: 25 results unless asked, at most 200 (the server's `[geo] max_limit`
    /// can raise the most, so that every hit of a large radius is a few requests, not dozens).
    public static let defaultLimit = 25
    public static let maxLimit = 200

    public init(search: GeoSearch) {
        self.search = search
    }

    /// Parses query parameters, with Cloudant's names and aliases: `lat`/`y`, `lon`/`x`,
    /// `radius`/`r`, `rangex`/`x_range`, `rangey`/`y_range`, `bbox` (minLon,minLat,maxLon,maxLat,
    /// RFC 7946 order), `g`/`geometry` (WKT), `relation`/`filter`, `nearest`, `limit`, `skip`,
    /// `bookmark`, `include_docs`, `format`, `stale`. Exactly one query geometry is allowed;
    /// `limit` may be at most `maxLimit`.
    public init(parameters: [String: String], accept: String? = nil, maxLimit: Int = GeoRequest.maxLimit) throws {
        let query = Parameters(values: parameters)
        let shape = try GeoRequest.shape(query)
        let relation = try GeoRequest.relation(query, shape: shape)
        let page = try GeoRequest.page(query, maxLimit: maxLimit)
        search = GeoSearch(shape: shape, relation: relation, limit: page.limit, skip: page.skip, after: page.after)
        includeDocs = try query.flag("include_docs")
        let formatName =
            parameters["format"]
            ?? (accept?.contains("application/vnd.geo+json") == true ? "application/vnd.geo+json" : "view")
        switch formatName {
        case "view": format = .view
        case "geojson", "application/vnd.geo+json": format = .geojson
        case "legacy": format = .legacy
        default:
            throw GeometryError("Unknown format \(formatName); use view, geojson, legacy or application/vnd.geo+json")
        }
        switch parameters["stale"] {
        case nil, "false": stale = false
        case "ok", "update_after", "true": stale = true
        case let other?: throw GeometryError("`stale` must be ok, update_after or false, not \(other)")
        }
    }

    /// The query parameters, read by any of a value's names.
    struct Parameters {
        let values: [String: String]

        func value(_ names: String...) -> String? {
            for name in names { if let v = values[name] { return v } }
            return nil
        }

        func number(_ names: String...) throws -> Double? {
            for name in names {
                guard let text = values[name] else { continue }
                guard let v = Double(text), v.isFinite else {
                    throw GeometryError("`\(name)` must be a number, not \(text)")
                }
                return v
            }
            return nil
        }

        func flag(_ name: String) throws -> Bool {
            switch values[name] {
            case nil, "false": return false
            case "true": return true
            case let other?: throw GeometryError("`\(name)` must be true or false, not \(other)")
            }
        }
    }

    /// The one query geometry: a circle, an ellipse or a point around `lat`/`lon`, a box, or WKT.
    static func shape(_ query: Parameters) throws -> QueryShape {
        let lat = try query.number("lat", "y"), lon = try query.number("lon", "x")
        let radius = try query.number("radius", "r")
        let rangeX = try query.number("rangex", "x_range"), rangeY = try query.number("rangey", "y_range")
        var shapes: [QueryShape] = []
        if lat != nil || lon != nil || radius != nil || rangeX != nil || rangeY != nil {
            guard let lat, let lon else { throw GeometryError("`lat` and `lon` must be given together") }
            let center = Coordinate(lon: lon, lat: lat)
            try center.validate()
            if let radius {
                guard radius >= 0 else { throw GeometryError("`radius` must not be negative") }
                guard rangeX == nil, rangeY == nil else { throw GeometryError("Multiple geometry queries specified.") }
                shapes.append(.circle(center: center, radius: radius))
            } else if rangeX != nil || rangeY != nil {
                guard let rangeX, let rangeY, rangeX >= 0, rangeY >= 0 else {
                    throw GeometryError("An ellipse needs both `rangex` and `rangey`, in metres")
                }
                shapes.append(.ellipse(center: center, rangeX: rangeX, rangeY: rangeY))
            } else {
                shapes.append(.geometry(.point(center)))
            }
        }
        if let bbox = query.value("bbox") { shapes.append(.box(try BoundingBox(parameter: bbox))) }
        if let wkt = query.value("g", "geometry") { shapes.append(.geometry(try WKT.parse(wkt))) }
        guard !shapes.isEmpty else { throw GeometryError("No geometry query specified.") }
        guard shapes.count == 1 else { throw GeometryError("Multiple geometry queries specified.") }
        return shapes[0]
    }

    /// The relation asked (`relation`/`filter`); none for `nearest` around a point (every
    /// document, nearest first); `intersects` otherwise.
    static func relation(_ query: Parameters, shape: QueryShape) throws -> Relation? {
        let nearest = try query.flag("nearest")
        if let name = query.value("relation", "filter") {
            guard let parsed = Relation(rawValue: name) else {
                throw GeometryError(
                    "Unknown relation \(name); use one of " + Relation.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return parsed
        }
        if case .geometry(.point) = shape, nearest { return nil }
        return .intersects
    }

    /// `limit` (Cloudant's default and most), `skip`/`startIndex`, and where a `bookmark` resumes.
    static func page(_ query: Parameters, maxLimit: Int) throws -> (limit: Int, skip: Int, after: GeoPosition?) {
        var limit = GeoRequest.defaultLimit
        if let text = query.values["limit"] {
            guard let parsed = ClientCount.parse(text) else {
                throw GeometryError("`limit` must be \(ClientCount.range)")
            }
            guard parsed <= maxLimit else { throw GeometryError("Limit must be less than or equal to \(maxLimit)") }
            limit = parsed
        }
        var skip = 0
        if let text = query.value("skip", "startIndex") {
            guard let parsed = ClientCount.parse(text) else {
                throw GeometryError("`skip` must be \(ClientCount.range)")
            }
            skip = parsed
        }
        var after: GeoPosition?
        if let bookmark = query.values["bookmark"], !bookmark.isEmpty {
            after = try GeoRequest.decodeBookmark(bookmark)
        }
        return (limit, skip, after)
    }

    /// A bookmark: where the last page ended, opaque to clients (base64url of distance and id).
    public static func bookmark(after position: GeoPosition?) -> String {
        guard let position else { return "" }
        let bytes = Array("\(position.chord.bitPattern) \(position.id)".utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 4 / 3 + 3)
        var i = 0
        while i < bytes.count {
            let chunk =
                (UInt32(bytes[i]) << 16) | (i + 1 < bytes.count ? UInt32(bytes[i + 1]) << 8 : 0)
                | (i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0)
            let characters = min(4, (bytes.count - i) * 4 / 3 + ((bytes.count - i) % 3 == 0 ? 0 : 1))
            for k in 0..<characters { out.append(alphabet[Int((chunk >> (18 - 6 * UInt32(k))) & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decodeBookmark(_ text: String) throws -> GeoPosition {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8),
            let space = decoded.firstIndex(of: " "), let bits = UInt64(decoded[..<space])
        else {
            throw GeometryError("Invalid bookmark")
        }
        return GeoPosition(chord: Double(bitPattern: bits), id: String(decoded[decoded.index(after: space)...]))
    }
}
