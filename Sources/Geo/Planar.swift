/// Planar geometry in lon/lat degrees, as Cloudant's GEOS-based engine evaluated polygon and
/// line relations: points, segments and rings in the plane. (Circles and ellipses are measured
/// on the sphere instead; see `QueryShape`.)
enum Planar {
    /// Where a point lies relative to a geometry (DE-9IM's interior, boundary, exterior).
    enum Location { case interior, boundary, exterior }

    static func cross(_ o: Coordinate, _ a: Coordinate, _ b: Coordinate) -> Double {
        (a.lon - o.lon) * (b.lat - o.lat) - (a.lat - o.lat) * (b.lon - o.lon)
    }

    static func onSegment(_ p: Coordinate, _ a: Coordinate, _ b: Coordinate) -> Bool {
        guard cross(a, b, p) == 0 else { return false }
        return min(a.lon, b.lon) <= p.lon && p.lon <= max(a.lon, b.lon) && min(a.lat, b.lat) <= p.lat
            && p.lat <= max(a.lat, b.lat)
    }

    /// Ray casting with the boundary detected exactly.
    static func locate(_ p: Coordinate, ring: [Coordinate]) -> Location {
        var inside = false
        var j = ring.count - 1
        for i in 0..<ring.count {
            let a = ring[i], b = ring[j]
            if onSegment(p, a, b) { return .boundary }
            if (a.lat > p.lat) != (b.lat > p.lat) {
                let x = a.lon + (p.lat - a.lat) * (b.lon - a.lon) / (b.lat - a.lat)
                if p.lon < x { inside.toggle() }
            }
            j = i
        }
        return inside ? .interior : .exterior
    }

    static func locate(_ p: Coordinate, polygon rings: [[Coordinate]]) -> Location {
        guard let shell = rings.first else { return .exterior }
        let outer = locate(p, ring: shell)
        guard outer == .interior else { return outer }
        for hole in rings.dropFirst() {
            switch locate(p, ring: hole) {
            case .interior: return .exterior
            case .boundary: return .boundary
            case .exterior: continue
            }
        }
        return .interior
    }

    /// A line's boundary is its two endpoints, unless it is closed (mod-2 rule, one line).
    static func locate(_ p: Coordinate, line: [Coordinate]) -> Location {
        guard let first = line.first, let last = line.last else { return .exterior }
        if first != last, p == first || p == last { return .boundary }
        for i in 1..<line.count where onSegment(p, line[i - 1], line[i]) { return .interior }
        return .exterior
    }

    static func locate(_ p: Coordinate, in geometry: Geometry) -> Location {
        switch geometry {
        case let .point(c): return p == c ? .interior : .exterior
        case let .multiPoint(cs): return cs.contains(p) ? .interior : .exterior
        case let .lineString(l): return locate(p, line: l)
        case let .polygon(rs): return locate(p, polygon: rs)
        case let .multiLineString(ls): return combine(ls.map { locate(p, line: $0) })
        case let .multiPolygon(ps): return combine(ps.map { locate(p, polygon: $0) })
        case let .collection(gs): return combine(gs.map { locate(p, in: $0) })
        }
    }

    /// The location in a union of parts: interior wins over boundary over exterior.
    static func combine(_ locations: [Location]) -> Location {
        if locations.contains(.interior) { return .interior }
        if locations.contains(.boundary) { return .boundary }
        return .exterior
    }

    /// The segments of a geometry's lines and rings.
    static func segments(_ geometry: Geometry) -> [(Coordinate, Coordinate)] {
        func of(_ line: [Coordinate]) -> [(Coordinate, Coordinate)] {
            line.count < 2 ? [] : (1..<line.count).map { (line[$0 - 1], line[$0]) }
        }
        switch geometry {
        case .point, .multiPoint: return []
        case let .lineString(l): return of(l)
        case let .multiLineString(ls), let .polygon(ls): return ls.flatMap(of)
        case let .multiPolygon(ps): return ps.flatMap { $0.flatMap(of) }
        case let .collection(gs): return gs.flatMap(segments)
        }
    }

    /// The intersection points of two segments (one point, or the ends of a shared piece).
    static func intersections(_ a: Coordinate, _ b: Coordinate, _ c: Coordinate, _ d: Coordinate) -> [Coordinate] {
        let d1 = cross(c, d, a), d2 = cross(c, d, b), d3 = cross(a, b, c), d4 = cross(a, b, d)
        if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
            let t = d1 / (d1 - d2)
            return [Coordinate(lon: a.lon + t * (b.lon - a.lon), lat: a.lat + t * (b.lat - a.lat))]
        }
        var points: [Coordinate] = []
        if onSegment(a, c, d) { points.append(a) }
        if onSegment(b, c, d) { points.append(b) }
        if onSegment(c, a, b) { points.append(c) }
        if onSegment(d, a, b) { points.append(d) }
        return points
    }

    /// The topological dimension: 0 points, 1 lines, 2 areas (the highest in a collection).
    static func dimension(_ geometry: Geometry) -> Int {
        switch geometry {
        case .point, .multiPoint: return 0
        case .lineString, .multiLineString: return 1
        case .polygon, .multiPolygon: return 2
        case let .collection(gs): return gs.map(dimension).max() ?? 0
        }
    }

    /// Points strictly inside the polygons of `geometry`, spread over the cells its outline and
    /// `other`'s cut it into: along horizontal lines between the two geometries' vertex
    /// latitudes, the middles of the stretches between consecutive crossings of either outline.
    static func interiorPoints(_ geometry: Geometry, against other: Geometry) -> [Coordinate] {
        guard dimension(geometry) == 2, let box = geometry.bounds else { return [] }
        let edges = segments(geometry) + segments(other)
        var latitudes = Set(geometry.coordinates.map(\.lat))
        for c in other.coordinates where c.lat > box.minLat && c.lat < box.maxLat { latitudes.insert(c.lat) }
        let sorted = latitudes.sorted()
        var lines = zip(sorted, sorted.dropFirst()).map { ($0 + $1) / 2 }
        if lines.count > 16 { lines = (0..<16).map { lines[$0 * lines.count / 16] } }
        var points: [Coordinate] = []
        for y in lines {
            var xs: [Double] = []
            for (a, b) in edges where (a.lat > y) != (b.lat > y) {
                xs.append(a.lon + (y - a.lat) * (b.lon - a.lon) / (b.lat - a.lat))
            }
            xs.sort()
            for (x0, x1) in zip(xs, xs.dropFirst()) where x1 > x0 {
                let p = Coordinate(lon: (x0 + x1) / 2, lat: y)
                if locate(p, in: geometry) == .interior { points.append(p) }
            }
        }
        return points
    }

    /// Points that stand for every piece of `geometry` relative to `other`: its vertices, the
    /// points where its segments meet `other`'s, the middles of the pieces between those
    /// (`middle`), and a point inside each polygon (`middle`). Locating them in both geometries
    /// approximates which cells of the DE-9IM matrix are non-empty; a middle that lies on both
    /// geometries means they share a piece of line, not just points.
    static func samples(_ geometry: Geometry, against other: Geometry) -> [(point: Coordinate, middle: Bool)] {
        var points = geometry.coordinates.map { (point: $0, middle: false) }
        let otherSegments = segments(other)
        for (a, b) in segments(geometry) {
            var cuts = [a, b]
            for (c, d) in otherSegments { cuts += intersections(a, b, c, d) }
            // Order the cuts along the segment and add the middles of the pieces.
            let dx = b.lon - a.lon, dy = b.lat - a.lat
            cuts.sort { ($0.lon - a.lon) * dx + ($0.lat - a.lat) * dy < ($1.lon - a.lon) * dx + ($1.lat - a.lat) * dy }
            points += cuts.map { (point: $0, middle: false) }
            for i in 1..<cuts.count where cuts[i] != cuts[i - 1] {
                points.append(
                    (
                        Coordinate(lon: (cuts[i - 1].lon + cuts[i].lon) / 2, lat: (cuts[i - 1].lat + cuts[i].lat) / 2),
                        true
                    ))
            }
        }
        return points + interiorPoints(geometry, against: other).map { (point: $0, middle: true) }
    }
}
