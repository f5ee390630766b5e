import Foundation

/// Distances on the sphere: WGS84 coordinates on a sphere of the mean Earth radius, as
/// Cloudant Geo and most engines measure them.
public enum Sphere {
    /// Mean Earth radius in metres (IUGG).
    public static let radius = 6_371_008.8

    /// Great-circle distance in metres (haversine).
    public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
        let φ1 = a.lat * .pi / 180, φ2 = b.lat * .pi / 180
        let dφ = φ2 - φ1, dλ = (b.lon - a.lon) * .pi / 180
        let h = sin(dφ / 2) * sin(dφ / 2) + cos(φ1) * cos(φ2) * sin(dλ / 2) * sin(dλ / 2)
        return 2 * radius * asin(min(1, sqrt(h)))
    }

    /// The point on the unit sphere (x towards lon 0 on the equator, z towards the north pole).
    /// Straight-line (chord) distances between these grow with great-circle distance, so
    /// nearest-first order and radius tests need no trigonometry per point, and nothing is
    /// special at the antimeridian or the poles.
    @inline(__always)
    public static func unitVector(_ c: Coordinate) -> (x: Double, y: Double, z: Double) {
        let φ = c.lat * .pi / 180, λ = c.lon * .pi / 180
        let cφ = cos(φ)
        return (cφ * cos(λ), cφ * sin(λ), sin(φ))
    }

    /// Squared chord length on the unit sphere for a great-circle distance in metres.
    public static func chordSquared(metres: Double) -> Double {
        let θ = min(metres / radius, .pi)
        let chord = 2 * sin(θ / 2)
        return chord * chord
    }

    /// Great-circle distance in metres for a squared chord length on the unit sphere.
    public static func metres(chordSquared: Double) -> Double {
        2 * radius * asin(min(1, sqrt(max(0, chordSquared)) / 2))
    }

    /// Distance in metres from `p` to the great-circle segment `a`–`b` (nearest point of the
    /// arc, or an endpoint).
    public static func distance(_ p: Coordinate, segment a: Coordinate, _ b: Coordinate) -> Double {
        let pa = unitVector(a), pb = unitVector(b), pp = unitVector(p)
        // Normal of the great circle through a and b.
        var n = (pa.y * pb.z - pa.z * pb.y, pa.z * pb.x - pa.x * pb.z, pa.x * pb.y - pa.y * pb.x)
        let length = (n.0 * n.0 + n.1 * n.1 + n.2 * n.2).squareRoot()
        guard length > 1e-15 else { return min(distance(p, a), distance(p, b)) }
        n = (n.0 / length, n.1 / length, n.2 / length)
        // Project p onto the great circle; the projection is on the arc when it lies between a and b.
        let d = pp.x * n.0 + pp.y * n.1 + pp.z * n.2
        var q = (pp.x - d * n.0, pp.y - d * n.1, pp.z - d * n.2)
        let ql = (q.0 * q.0 + q.1 * q.1 + q.2 * q.2).squareRoot()
        if ql > 1e-15 {
            q = (q.0 / ql, q.1 / ql, q.2 / ql)
            func cross(_ u: (Double, Double, Double), _ v: (Double, Double, Double)) -> (Double, Double, Double) {
                (u.1 * v.2 - u.2 * v.1, u.2 * v.0 - u.0 * v.2, u.0 * v.1 - u.1 * v.0)
            }
            func dot(_ u: (Double, Double, Double), _ v: (Double, Double, Double)) -> Double {
                u.0 * v.0 + u.1 * v.1 + u.2 * v.2
            }
            let a3 = (pa.x, pa.y, pa.z), b3 = (pb.x, pb.y, pb.z)
            if dot(cross(a3, q), n) >= 0, dot(cross(q, b3), n) >= 0 {
                return radius * asin(min(1, abs(d)))
            }
        }
        return min(distance(p, a), distance(p, b))
    }
}
