import Foundation

/// Cloudant Geo's spatial relations, read as "query geometry Q *relation* document geometry R"
/// with DE-9IM meanings: `contains` (no point of R outside Q, interiors meet), `within` (the
/// inverse), `covers`/`covered_by` (like contains/within, boundaries allowed), `intersects`,
/// `disjoint`, `overlaps`, `crosses`, `touches`, `contains_properly` (R inside Q's interior).
public enum Relation: String, Sendable, CaseIterable {
    case intersects, disjoint, contains, within, covers, overlaps, crosses, touches
    case coveredBy = "covered_by"
    case containsProperly = "contains_properly"
}

/// What a geo query asks about. Circles and ellipses are true shapes on the sphere (metres);
/// geometries and boxes are planar in lon/lat, as GEOS evaluated them for Cloudant.
public enum QueryShape: Sendable {
    case circle(center: Coordinate, radius: Double)
    /// `rangeX` metres east-west and `rangeY` metres north-south of the centre.
    case ellipse(center: Coordinate, rangeX: Double, rangeY: Double)
    case box(BoundingBox)
    case geometry(Geometry)

    /// Where `nearest=true` measures from.
    public var center: Coordinate? {
        switch self {
        case let .circle(c, _), let .ellipse(c, _, _): return c
        case let .box(b):
            let lon =
                b.crossesAntimeridian ? remainder((b.minLon + b.maxLon + 360) / 2, 360) : (b.minLon + b.maxLon) / 2
            return Coordinate(lon: lon == 180 ? -180 : lon, lat: (b.minLat + b.maxLat) / 2)
        case let .geometry(g): return g.center
        }
    }

    /// Whether document geometry `r` stands in `relation` to this shape.
    public func matches(_ relation: Relation, _ r: Geometry) -> Bool {
        switch self {
        case .circle, .ellipse: return roundRelation(relation, r)
        case let .box(b): return QueryShape.planarRelation(relation, b.geometry, r)
        case let .geometry(q): return QueryShape.planarRelation(relation, q, r)
        }
    }

    // MARK: Circles and ellipses (on the sphere)

    /// 0 at the centre, 1 on the edge, >1 outside.
    func measure(_ p: Coordinate) -> Double {
        switch self {
        case let .circle(c, radius):
            return radius > 0 ? Sphere.distance(c, p) / radius : (c == p ? 1 : .infinity)
        case let .ellipse(c, rx, ry):
            // Position in the azimuthal equidistant plane at the centre: true distance and bearing.
            let d = Sphere.distance(c, p)
            guard d > 0 else { return 0 }
            let φ1 = c.lat * .pi / 180, φ2 = p.lat * .pi / 180, dλ = (p.lon - c.lon) * .pi / 180
            let θ = atan2(sin(dλ) * cos(φ2), cos(φ1) * sin(φ2) - sin(φ1) * cos(φ2) * cos(dλ))
            let x = d * sin(θ) / max(rx, 1e-9), y = d * cos(θ) / max(ry, 1e-9)
            return (x * x + y * y).squareRoot()
        default:
            return .infinity
        }
    }

    func location(_ p: Coordinate) -> Planar.Location {
        let m = measure(p)
        return m < 1 ? .interior : (m == 1 ? .boundary : .exterior)
    }

    /// The smallest measure along a segment (exact for circles; sampled for ellipses).
    func minimumMeasure(_ a: Coordinate, _ b: Coordinate) -> Double {
        switch self {
        case let .circle(c, radius):
            return Sphere.distance(c, segment: a, b) / max(radius, 1e-9)
        default:
            var best = Swift.min(measure(a), measure(b))
            for i in 1..<32 {
                let t = Double(i) / 32
                best = Swift.min(
                    best, measure(Coordinate(lon: a.lon + (b.lon - a.lon) * t, lat: a.lat + (b.lat - a.lat) * t)))
            }
            return best
        }
    }

    func roundRelation(_ relation: Relation, _ r: Geometry) -> Bool {
        if case let .point(p) = r { return QueryShape.pointRelation(relation, location(p), queryIsPoint: false) }
        let vertices = r.coordinates.map(location)
        let segments = Planar.segments(r)
        let dimension = Planar.dimension(r)
        guard let center = center else { return false }
        let centerInR = Planar.locate(center, in: r)
        let nearestSegment = segments.map { minimumMeasure($0.0, $0.1) }.min() ?? .infinity
        let anyInside = vertices.contains(.interior) || nearestSegment < 1 || centerInR == .interior
        let intersects = anyInside || vertices.contains(.boundary) || nearestSegment <= 1 || centerInR != .exterior
        let covers = !vertices.contains(.exterior)
        let coveredBy = dimension == 2 && centerInR != .exterior && nearestSegment >= 1
        switch relation {
        case .intersects: return intersects
        case .disjoint: return !intersects
        case .covers: return covers
        case .contains: return covers && anyInside
        case .containsProperly: return vertices.allSatisfy { $0 == .interior }
        case .coveredBy: return coveredBy
        case .within: return coveredBy && centerInR == .interior
        case .touches: return intersects && !anyInside
        case .overlaps: return dimension == 2 && anyInside && !covers && !coveredBy
        case .crosses: return dimension < 2 && anyInside && vertices.contains(.exterior)
        }
    }

    // MARK: Planar relations

    /// A point document: its location in Q decides everything.
    static func pointRelation(_ relation: Relation, _ location: Planar.Location, queryIsPoint: Bool) -> Bool {
        switch relation {
        case .intersects, .covers: return location != .exterior
        case .disjoint: return location == .exterior
        case .contains, .containsProperly: return location == .interior
        case .touches: return location == .boundary
        case .within, .coveredBy: return queryIsPoint && location == .interior
        case .overlaps, .crosses: return false
        }
    }

    static func planarRelation(_ relation: Relation, _ q: Geometry, _ r: Geometry) -> Bool {
        if case let .point(p) = r {
            // Q within a point only if Q is that point (every position of Q equal to it).
            let queryIsPoint = q.coordinates.allSatisfy { $0 == p } && Planar.dimension(q) == 0
            return pointRelation(relation, Planar.locate(p, in: q), queryIsPoint: queryIsPoint)
        }
        // Quick rejection by bounding boxes for the relations that need the shapes to meet.
        if let qb = q.bounds, let rb = r.bounds,
            qb.maxLon < rb.minLon || rb.maxLon < qb.minLon || qb.maxLat < rb.minLat || rb.maxLat < qb.minLat
        {
            return relation == .disjoint
        }
        var interiors = false, touching = false, rOutsideQ = false, qOutsideR = false, rInteriorOutsideQ = false
        var qInteriorOutsideR = false, rNotInQInterior = false, sharedPiece = false
        for (s, middle) in Planar.samples(q, against: r) {
            let lq = Planar.locate(s, in: q), lr = Planar.locate(s, in: r)
            if lq != .exterior, lr != .exterior {
                touching = true
                if middle { sharedPiece = true }
            }
            if lq == .interior, lr == .interior { interiors = true }
            if lq != .exterior, lr == .exterior { qOutsideR = true }
            if lq == .interior, lr == .exterior { qInteriorOutsideR = true }
        }
        for (s, middle) in Planar.samples(r, against: q) {
            let lq = Planar.locate(s, in: q), lr = Planar.locate(s, in: r)
            if lq != .exterior, lr != .exterior {
                touching = true
                if middle { sharedPiece = true }
            }
            if lq == .interior, lr == .interior { interiors = true }
            if lr != .exterior, lq == .exterior { rOutsideQ = true }
            if lr == .interior, lq == .exterior { rInteriorOutsideQ = true }
            if lr != .exterior, lq != .interior { rNotInQInterior = true }
        }
        let dq = Planar.dimension(q), dr = Planar.dimension(r)
        switch relation {
        case .intersects: return touching
        case .disjoint: return !touching
        case .covers: return !rOutsideQ
        case .contains: return !rOutsideQ && interiors
        case .containsProperly: return !rNotInQInterior
        case .coveredBy: return !qOutsideR
        case .within: return !qOutsideR && interiors
        case .touches: return touching && !interiors && !(dq == 0 && dr == 0)
        case .overlaps:
            if dq != dr { return false }
            if dq == 1 { return sharedPiece && qOutsideR && rOutsideQ }
            return interiors && qOutsideR && rOutsideQ
        case .crosses:
            if dq < dr { return interiors && qInteriorOutsideR }
            if dq > dr { return interiors && rInteriorOutsideQ }
            return dq == 1 && interiors && !sharedPiece && qOutsideR && rOutsideQ
        }
    }
}
