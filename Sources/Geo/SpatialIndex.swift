import CouchJSON
import Foundation

/// A geo query: a shape, an optional relation, and which page of the answer to return.
public struct GeoSearch: Sendable {
    public var shape: QueryShape
    /// nil: every document in distance order from the shape's centre (Cloudant's `nearest`
    /// without a relation).
    public var relation: Relation?
    public var limit: Int
    public var skip: Int
    /// Continue after this hit (a bookmark): results come ordered by (distance, id).
    public var after: GeoPosition?

    public init(shape: QueryShape, relation: Relation?, limit: Int = 25, skip: Int = 0, after: GeoPosition? = nil) {
        self.shape = shape
        self.relation = relation
        self.limit = limit
        self.skip = skip
        self.after = after
    }
}

/// A place in the (distance, id) order of results, for bookmarks.
public struct GeoPosition: Sendable, Equatable, Comparable {
    /// Squared chord on the unit sphere from the query centre (orders like distance, exact).
    public var chord: Double
    public var id: String

    public init(chord: Double, id: String) {
        self.chord = chord
        self.id = id
    }

    public static func < (a: GeoPosition, b: GeoPosition) -> Bool {
        a.chord != b.chord ? a.chord < b.chord : a.id < b.id
    }
}

/// One document in a geo answer.
public struct GeoHit: Sendable {
    public var id: String { position.id }
    public var geometry: Geometry
    public var position: GeoPosition
    /// Great-circle distance in metres from the query centre.
    public var distance: Double { Sphere.metres(chordSquared: position.chord) }
}

/// The documents' geometries of one geo index, in memory: points in a `PointTree`, changes
/// since it was built in a small delta (with the tree's replaced points masked out), other
/// geometries in a list. Queries read a consistent snapshot without holding a lock while they
/// search; updates replace the snapshot, and the tree is rebuilt when the delta grows past an
/// eighth of it.
public final class SpatialIndex: @unchecked Sendable {
    struct Snapshot {
        var tree: PointTree
        var removed: Set<Int32> = []
        var delta: [String: Coordinate] = [:]
        /// Times of points in `delta` (when the index keeps times).
        var deltaTimes: [String: Double] = [:]
        var others: [String: Geometry] = [:]
    }

    private let lock = NSLock()
    private var snapshot: Snapshot
    /// Whether points carry times (for `grid`'s time window).
    public let keepsTimes: Bool

    /// Builds the index from every document's geometry; `times`, when given, one per entry
    /// (ms since 1970, NaN when unknown), kept for points.
    public init(_ entries: [(id: String, geometry: Geometry)], times: [Double]? = nil) {
        var points: [(id: String, coordinate: Coordinate)] = []
        points.reserveCapacity(entries.count)
        var pointTimes: [Double]? = times == nil ? nil : []
        var others: [String: Geometry] = [:]
        for (i, entry) in entries.enumerated() {
            if case let .point(c) = entry.geometry {
                points.append((entry.id, c))
                if let times { pointTimes!.append(times[i]) }
            } else {
                others[entry.id] = entry.geometry
            }
        }
        keepsTimes = times != nil
        snapshot = Snapshot(tree: PointTree(points, times: pointTimes), others: others)
    }

    private func current() -> Snapshot {
        lock.lock()
        defer { lock.unlock() }
        return snapshot
    }

    /// Documents in the index.
    public var count: Int {
        let s = current()
        return s.tree.count - s.removed.count + s.delta.count + s.others.count
    }

    /// Approximate memory held, in bytes.
    public var bytes: Int {
        let s = current()
        return s.tree.bytes + s.delta.count * 64 + s.removed.count * 8 + s.others.count * 256
    }

    /// Applies changed documents: a new geometry, or nil for a document no longer indexed;
    /// `times` gives changed points their time (ms since 1970) when the index keeps times.
    public func apply(_ changes: [(id: String, geometry: Geometry?)], times: [String: Double] = [:]) {
        lock.lock()
        var s = snapshot
        lock.unlock()
        for (id, geometry) in changes {
            if let point = s.tree.point(for: id) { s.removed.insert(Int32(point)) }
            s.delta.removeValue(forKey: id)
            s.deltaTimes.removeValue(forKey: id)
            s.others.removeValue(forKey: id)
            switch geometry {
            case let .point(c)?:
                s.delta[id] = c
                if keepsTimes, let time = times[id] { s.deltaTimes[id] = time }
            case let other?: s.others[id] = other
            case nil: break
            }
        }
        if s.delta.count + s.removed.count > max(4096, s.tree.count / 8) {
            var points: [(id: String, coordinate: Coordinate)] = []
            var pointTimes: [Double] = []
            points.reserveCapacity(s.tree.count - s.removed.count + s.delta.count)
            for i in 0..<s.tree.count where !s.removed.contains(Int32(i)) {
                points.append((s.tree.id(i), s.tree.coordinate(i)))
                if keepsTimes { pointTimes.append(s.tree.time(i) ?? .nan) }
            }
            for (id, c) in s.delta {
                points.append((id, c))
                if keepsTimes { pointTimes.append(s.deltaTimes[id] ?? .nan) }
            }
            s = Snapshot(tree: PointTree(points, times: keepsTimes ? pointTimes : nil), others: s.others)
        }
        lock.lock()
        snapshot = s
        lock.unlock()
    }

    // Kept in one piece (over 60 lines): the best-first search keeps its two heaps, the page
    // and the delta in locals that every step of the loop reads; split, they would be passed
    // through each call on the hottest path of a geo query.
    /// Answers a query: the page of matching documents in (distance, id) order, and whether
    /// more follow.
    public func search(_ query: GeoSearch) -> (hits: [GeoHit], more: Bool) {
        let s = current()
        guard let center = query.shape.center else { return ([], false) }
        let c = Sphere.unitVector(center)
        let reach =
            query.relation == nil || query.relation == .disjoint
            ? Double.infinity : SpatialIndex.reach(query.shape, center)
        let maxChord = reach.isInfinite ? 4.0 : Sphere.chordSquared(metres: reach) * (1 + 1e-9) + 1e-18
        // skip and limit may come from a client: never negative, and summed without overflow.
        let skip = max(0, query.skip), limit = max(0, query.limit)
        let end = skip.addingSaturating(limit)
        let wanted = end.addingSaturating(1)
        var hits: [GeoHit] = []
        hits.reserveCapacity(min(wanted, 1024))

        // Points changed since the tree was built, and other geometries: all candidates.
        for (id, coordinate) in s.delta {
            let v = Sphere.unitVector(coordinate)
            let chord = (v.x - c.x) * (v.x - c.x) + (v.y - c.y) * (v.y - c.y) + (v.z - c.z) * (v.z - c.z)
            let position = GeoPosition(chord: chord, id: id)
            if chord <= maxChord, query.after.map({ position > $0 }) ?? true,
                SpatialIndex.matches(query, .point(coordinate))
            {
                hits.append(GeoHit(geometry: .point(coordinate), position: position))
            }
        }
        for (id, geometry) in s.others {
            let chord = SpatialIndex.chord(from: center, to: geometry)
            let position = GeoPosition(chord: chord, id: id)
            if query.after.map({ position > $0 }) ?? true, SpatialIndex.matches(query, geometry) {
                hits.append(GeoHit(geometry: geometry, position: position))
            }
        }

        // The tree, nearest first: stop once enough matches are in hand and the next point is
        // farther than the last of them (so ties at that distance are all seen). Matches are kept
        // as (point, chord) and only the page returned becomes hits with ids.
        var matched: [(point: Int32, chord: Double)] = []
        matched.reserveCapacity(min(wanted, 1024))
        var lastChord = -1.0
        let tree = s.tree
        let after = query.after
        // For circles, the chords well inside and well outside the edge, computed once.
        var inner = -1.0, outer = Double.infinity
        if case let .circle(_, radius) = query.shape, query.relation != nil {
            let edge = Sphere.chordSquared(metres: radius)
            (inner, outer) = (edge * (1 - 1e-9), edge * (1 + 1e-9))
        }
        let relation = query.relation
        tree.nearest(to: c, maxChordSquared: maxChord) { point, chord in
            if matched.count >= wanted, chord > lastChord { return false }
            if !s.removed.isEmpty, s.removed.contains(Int32(point)) { return true }
            if let after {
                if chord < after.chord { return true }
                if chord == after.chord, !(tree.id(point) > after.id) { return true }
            }
            if let relation {
                let matches =
                    chord < inner
                    ? QueryShape.pointRelation(relation, .interior, queryIsPoint: false)
                    : chord > outer
                        ? QueryShape.pointRelation(relation, .exterior, queryIsPoint: false)
                        : query.shape.matches(relation, .point(tree.coordinate(point)))
                if !matches { return true }
            }
            matched.append((Int32(point), chord))
            lastChord = chord
            return true
        }
        func hit(_ match: (point: Int32, chord: Double)) -> GeoHit {
            GeoHit(
                geometry: .point(tree.coordinate(Int(match.point))),
                position: GeoPosition(chord: match.chord, id: tree.id(Int(match.point))))
        }
        if hits.isEmpty {
            // Only the tree answered, nearest first already: order equal distances by id, then
            // build the page.
            SpatialIndex.orderTies(&matched, tree)
            let page = matched.dropFirst(skip).prefix(limit).map(hit)
            return (page, matched.count > end)
        }
        hits += matched.map(hit)
        hits.sort { $0.position < $1.position }
        let page = Array(hits.dropFirst(skip).prefix(limit))
        return (page, hits.count > end)
    }

    /// Sorts runs of equal distance by id in tree matches that are otherwise in distance order.
    static func orderTies(_ matched: inout [(point: Int32, chord: Double)], _ tree: PointTree) {
        var start = 0
        while start < matched.count {
            var end = start + 1
            while end < matched.count, matched[end].chord == matched[start].chord { end += 1 }
            if end - start > 1 { matched[start..<end].sort { tree.id(Int($0.point)) < tree.id(Int($1.point)) } }
            start = end
        }
    }

    // Kept in one piece (over 60 lines): one pass over every point (a million behind the
    // dashboard's map), the grid's arrays and the box's measures in locals that the two nested
    // helpers share; split, they would be passed through each call of that pass.
    /// Points in a box counted on a grid of `columns` × `rows` cells (what a map shows when
    /// there are too many points to draw): the total, each non-empty cell's count and mean
    /// position, and the points themselves when there are at most `pointLimit`. Optionally
    /// only points whose time lies in `from...to` (ms; points without a time are left out
    /// then) and whose id starts with `idPrefix`. A box with minLon > maxLon crosses the
    /// antimeridian. Other geometries are not counted.
    public func grid(
        _ box: BoundingBox, columns: Int, rows: Int, from: Double? = nil, to: Double? = nil,
        idPrefix: String? = nil, pointLimit: Int = 0
    ) -> GeoGrid {
        let s = current()
        let columns = max(1, columns), rows = max(1, rows)
        let crosses = box.minLon > box.maxLon
        let width = crosses ? box.maxLon + 360 - box.minLon : box.maxLon - box.minLon
        let height = box.maxLat - box.minLat
        let prefix = idPrefix.map { Array($0.utf8) }
        var counts = [Int](repeating: 0, count: columns * rows)
        var sums = [Double](repeating: 0, count: 2 * columns * rows)
        var points: [(id: String, coordinate: Coordinate, time: Double?)] = []
        var total = 0
        // The extent of what is counted (latitudes, and longitudes east of the box's west edge).
        var south = Double.infinity, north = -Double.infinity, westDX = Double.infinity, eastDX = -Double.infinity
        let low = from ?? -.infinity, high = to ?? .infinity
        let timed = from != nil || to != nil

        // Longitudes are measured east of the box's west edge, so a cell across the antimeridian
        // gets a mean position inside it.
        func cell(_ c: Coordinate) -> (index: Int, dx: Double)? {
            guard c.lat >= box.minLat, c.lat <= box.maxLat else { return nil }
            var dx = c.lon - box.minLon
            if crosses, dx < 0 { dx += 360 }
            guard dx >= 0, dx <= width else { return nil }
            let column = min(columns - 1, width > 0 ? Int(dx / width * Double(columns)) : 0)
            let row = min(rows - 1, height > 0 ? Int((c.lat - box.minLat) / height * Double(rows)) : 0)
            return (row * columns + column, dx)
        }
        func count(_ place: (index: Int, dx: Double), _ c: Coordinate, _ id: @autoclosure () -> String, _ time: Double?)
        {
            let index = place.index
            counts[index] += 1
            sums[2 * index] += c.lat
            sums[2 * index + 1] += place.dx
            south = min(south, c.lat); north = max(north, c.lat)
            westDX = min(westDX, place.dx); eastDX = max(eastDX, place.dx)
            total += 1
            if total <= pointLimit { points.append((id(), c, time)) }
        }

        // A time window keeps nothing of a tree without times.
        let tree = s.tree
        let scanned = timed && tree.times.isEmpty ? 0 : tree.count
        for i in 0..<scanned {
            let c = tree.coordinate(i)
            guard let index = cell(c) else { continue }
            if timed {
                let t = tree.times[i]
                guard t >= low, t <= high else { continue }
            }
            if let prefix, !tree.id(i, hasPrefix: prefix) { continue }
            if !s.removed.isEmpty, s.removed.contains(Int32(i)) { continue }
            count(index, c, tree.id(i), tree.time(i))
        }
        for (id, c) in s.delta {
            guard let index = cell(c) else { continue }
            let time = s.deltaTimes[id]
            if timed { guard let time, time >= low, time <= high else { continue } }
            if let prefix, !id.utf8.starts(with: prefix) { continue }
            count(index, c, id, time)
        }
        var cells: [GeoGrid.Cell] = []
        for (index, n) in counts.enumerated() where n > 0 {
            var lon = box.minLon + sums[2 * index + 1] / Double(n)
            if lon > 180 { lon -= 360 }
            cells.append(
                GeoGrid.Cell(
                    row: index / columns, column: index % columns, count: n,
                    center: Coordinate(lon: lon, lat: sums[2 * index] / Double(n))))
        }
        var bounds: BoundingBox?
        if total > 0 {
            func longitude(_ dx: Double) -> Double { let lon = box.minLon + dx; return lon > 180 ? lon - 360 : lon }
            bounds = BoundingBox(minLon: longitude(westDX), minLat: south, maxLon: longitude(eastDX), maxLat: north)
        }
        return GeoGrid(total: total, cells: cells, points: total <= pointLimit ? points : [], bounds: bounds)
    }

    /// Whether a document geometry satisfies the query's relation (no relation: every one).
    static func matches(_ query: GeoSearch, _ geometry: Geometry) -> Bool {
        guard let relation = query.relation else { return true }
        return query.shape.matches(relation, geometry)
    }

    /// The farthest a matching document can be from the centre, in metres (with a margin).
    static func reach(_ shape: QueryShape, _ center: Coordinate) -> Double {
        switch shape {
        case let .circle(_, radius): return radius
        case let .ellipse(_, rx, ry): return max(rx, ry)
        case let .box(box): return farthest(box.geometry, from: center)
        case let .geometry(g): return farthest(g, from: center)
        }
    }

    /// Farthest distance from `center` to any point of the geometry's outline (edges sampled),
    /// plus a margin; for shapes spanning most of the globe, everything.
    static func farthest(_ geometry: Geometry, from center: Coordinate) -> Double {
        var best = 0.0
        for c in geometry.coordinates { best = max(best, Sphere.distance(center, c)) }
        for (a, b) in Planar.segments(geometry) {
            for i in 1..<16 {
                let t = Double(i) / 16
                best = max(
                    best,
                    Sphere.distance(
                        center, Coordinate(lon: a.lon + (b.lon - a.lon) * t, lat: a.lat + (b.lat - a.lat) * t)))
            }
        }
        if best > 5_000_000 { return .infinity }
        return best * 1.01 + 1
    }

    /// Squared chord from the centre to the nearest part of a geometry.
    static func chord(from center: Coordinate, to geometry: Geometry) -> Double {
        var best = Double.infinity
        for c in geometry.coordinates { best = min(best, Sphere.distance(center, c)) }
        for (a, b) in Planar.segments(geometry) { best = min(best, Sphere.distance(center, segment: a, b)) }
        if Planar.dimension(geometry) == 2, Planar.locate(center, in: geometry) != .exterior { best = 0 }
        return Sphere.chordSquared(metres: best)
    }
}

/// Points counted on a grid (`SpatialIndex.grid`).
public struct GeoGrid: Sendable {
    public struct Cell: Sendable, Equatable {
        public var row: Int
        public var column: Int
        public var count: Int
        /// The mean position of the cell's points.
        public var center: Coordinate
    }

    public var total: Int
    /// Non-empty cells.
    public var cells: [Cell]
    /// Every point, when there were at most the limit asked for.
    public var points: [(id: String, coordinate: Coordinate, time: Double?)]
    /// The smallest box holding every counted point (minLon > maxLon when it crosses the
    /// antimeridian), so a map can fit what a filter keeps; nil when nothing was counted.
    public var bounds: BoundingBox?
}
