import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing

/// The oracle: haversine over every point, written here independently of `Sphere`.
func oracleDistance(_ a: (lon: Double, lat: Double), _ b: (lon: Double, lat: Double)) -> Double {
    let r = 6_371_008.8
    let p1 = a.lat * Double.pi / 180, p2 = b.lat * Double.pi / 180
    let dp = p2 - p1, dl = (b.lon - a.lon) * Double.pi / 180
    let h = pow(sin(dp / 2), 2) + cos(p1) * cos(p2) * pow(sin(dl / 2), 2)
    return 2 * r * asin(min(1, h.squareRoot()))
}

@Suite("Spatial index against a brute-force oracle")
struct SpatialIndexTests {
    /// Random points: clusters (tracks), the antimeridian, both poles, and points placed just
    /// inside and just outside the query radius.
    func dataset(_ random: inout SeededRandom, centers: [Coordinate], radius: Double) -> [(id: String, geometry: Geometry)] {
        var points: [(id: String, geometry: Geometry)] = []
        func add(_ lon: Double, _ lat: Double) {
            var lon = lon
            if lon > 180 { lon -= 360 }
            if lon < -180 { lon += 360 }
            points.append(("p\(points.count)", .point(Coordinate(lon: lon, lat: max(-90, min(90, lat))))))
        }
        for _ in 0..<1500 { add(Double.random(in: -180...180, using: &random), Double.random(in: -90...90, using: &random)) }
        for center in centers {
            for _ in 0..<400 {
                add(center.lon + Double.random(in: -0.2...0.2, using: &random), center.lat + Double.random(in: -0.1...0.1, using: &random))
            }
            // On the circle's edge, ±1 cm, in every direction.
            for k in 0..<60 {
                let bearing = Double(k) * 6 * Double.pi / 180
                for offset in [-0.01, 0.01] {
                    let d = (radius + offset) / 6_371_008.8
                    let p1 = center.lat * Double.pi / 180, l1 = center.lon * Double.pi / 180
                    let p2 = asin(sin(p1) * cos(d) + cos(p1) * sin(d) * cos(bearing))
                    let l2 = l1 + atan2(sin(bearing) * sin(d) * cos(p1), cos(d) - sin(p1) * sin(p2))
                    add(l2 * 180 / Double.pi, p2 * 180 / Double.pi)
                }
            }
        }
        return points
    }

    @Test("Radius queries, nearest first: the same hits in the same order as haversine over every point, at the antimeridian and the poles too",
          arguments: [1 as UInt64, 2, 3])
    func radiusMatchesOracle(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let radius = 4023.35
        let centers = [Coordinate(lon: -122.30464079, lat: 37.49453457), Coordinate(lon: 179.99, lat: 10), Coordinate(lon: -179.995, lat: -33),
                       Coordinate(lon: 12, lat: 89.99), Coordinate(lon: -50, lat: -89.98)]
        let data = dataset(&random, centers: centers, radius: radius)
        let index = SpatialIndex(data)
        for center in centers {
            let query = GeoSearch(shape: .circle(center: center, radius: radius), relation: .contains, limit: 100_000)
            let hits = index.search(query).hits
            var expected: [(String, Double)] = []
            for (id, geometry) in data {
                guard case let .point(p) = geometry else { continue }
                let d = oracleDistance((center.lon, center.lat), (p.lon, p.lat))
                if d < radius { expected.append((id, d)) }
            }
            expected.sort { $0.1 < $1.1 }
            #expect(Set(hits.map(\.id)) == Set(expected.map(\.0)), "hit sets differ at \(center)")
            #expect(hits.count == expected.count)
            // Same order, ties within a centimetre aside.
            for (hit, oracle) in zip(hits, expected) where hit.id != oracle.0 {
                let a = data.first { $0.id == hit.id }!, b = oracle.1
                guard case let .point(p) = a.geometry else { continue }
                #expect(abs(oracleDistance((center.lon, center.lat), (p.lon, p.lat)) - b) < 0.01, "order differs at \(center)")
            }
        }
    }

    @Test("Paging with skip and bookmarks walks the whole answer once; updates and deletes are seen at once")
    func pagingAndUpdates() {
        var random = SeededRandom(seed: 7)
        let center = Coordinate(lon: 2.35, lat: 48.85)
        let data = dataset(&random, centers: [center], radius: 1000)
        let index = SpatialIndex(data)
        let all = index.search(GeoSearch(shape: .circle(center: center, radius: 20000), relation: .intersects, limit: 10_000)).hits
        var paged: [String] = []
        var after: GeoPosition?
        while true {
            let page = index.search(GeoSearch(shape: .circle(center: center, radius: 20000), relation: .intersects, limit: 25, after: after))
            paged += page.hits.map(\.id)
            guard page.more, let last = page.hits.last else { break }
            after = last.position
        }
        #expect(paged == all.map(\.id) && paged.count > 400)
        let skipped = index.search(GeoSearch(shape: .circle(center: center, radius: 20000), relation: .intersects, limit: 5, skip: 10)).hits
        #expect(skipped.map(\.id) == Array(all.map(\.id)[10..<15]))
        // Move the nearest point far away, delete the second, add a new one at the centre.
        index.apply([(all[0].id, .point(Coordinate(lon: -70, lat: -30))), (all[1].id, nil), ("new", .point(center))])
        let after1 = index.search(GeoSearch(shape: .circle(center: center, radius: 20000), relation: .intersects, limit: 10_000)).hits.map(\.id)
        #expect(after1.first == "new" && !after1.contains(all[0].id) && !after1.contains(all[1].id) && after1.count == all.count - 1)
        // Enough changes to rebuild the tree: answers stay the same.
        index.apply((0..<5000).map { ("bulk\($0)", .point(Coordinate(lon: Double($0 % 360) - 180, lat: -60))) })
        let after2 = index.search(GeoSearch(shape: .circle(center: center, radius: 20000), relation: .intersects, limit: 10_000)).hits.map(\.id)
        #expect(after2 == after1)
        #expect(index.count == data.count + 5000)  // one moved, one deleted, one added, 5,000 more
    }

    @Test("Documents at the same position are ordered by id, and bookmarks page through ties exactly once")
    func ties() {
        let spot = Coordinate(lon: -122.3162468, lat: 37.4722645)
        var entries: [(id: String, geometry: Geometry)] = (0..<10).map { ("same\(9 - $0)", .point(spot)) }
        entries += (0..<2000).map { ("other\($0)", .point(Coordinate(lon: -122.3 + Double($0 % 50) * 1e-3, lat: 37.5 + Double($0 / 50) * 1e-3))) }
        let index = SpatialIndex(entries)
        var seen: [String] = []
        var after: GeoPosition?
        for _ in 0..<5 {
            let page = index.search(GeoSearch(shape: .circle(center: spot, radius: 10), relation: .contains, limit: 3, after: after))
            seen += page.hits.map(\.id)
            guard let last = page.hits.last else { break }
            after = last.position
        }
        #expect(seen == (0..<10).map { "same\($0)" })
    }

    @Test("Boxes (also across the antimeridian), polygons with holes and ellipses select the right points")
    func shapes() throws {
        let points: [(id: String, geometry: Geometry)] = [
            ("east", .point(Coordinate(lon: 179.5, lat: 0))), ("west", .point(Coordinate(lon: -179.5, lat: 0))),
            ("middle", .point(Coordinate(lon: 0, lat: 0))), ("hole", .point(Coordinate(lon: 10.5, lat: 10.5))),
            ("ring", .point(Coordinate(lon: 10.1, lat: 10.1))), ("edge", .point(Coordinate(lon: 10, lat: 10.5))),
            ("north", .point(Coordinate(lon: 0, lat: 0.0089))), ("eastish", .point(Coordinate(lon: 0.0089, lat: 0))),
        ]
        let index = SpatialIndex(points)
        func ids(_ shape: QueryShape, _ relation: Relation = .intersects) -> Set<String> {
            Set(index.search(GeoSearch(shape: shape, relation: relation, limit: 200)).hits.map(\.id))
        }
        #expect(ids(.box(BoundingBox(minLon: 179, minLat: -1, maxLon: -179, maxLat: 1))) == ["east", "west"])
        #expect(ids(.box(BoundingBox(minLon: -1, minLat: -1, maxLon: 1, maxLat: 1))) == ["middle", "north", "eastish"])
        let withHole = try WKT.parse("POLYGON ((10 10, 11 10, 11 11, 10 11, 10 10), (10.4 10.4, 10.6 10.4, 10.6 10.6, 10.4 10.6, 10.4 10.4))")
        #expect(ids(.geometry(withHole)) == ["ring", "edge"])
        #expect(ids(.geometry(withHole), .contains) == ["ring"])  // "edge" is on the boundary
        #expect(ids(.geometry(withHole), .touches) == ["edge"])
        // An ellipse 1.2 km east-west and 500 m north-south: 990 m east is in, 990 m north is out.
        #expect(ids(.ellipse(center: Coordinate(lon: 0, lat: 0), rangeX: 1200, rangeY: 500)) == ["middle", "eastish"])
    }

    @Test("Invalid geometries are rejected with a reason")
    func validation() {
        func reason(_ json: JSON) -> String? {
            do { _ = try Geometry(geoJSON: json); return nil } catch let error as GeometryError { return error.reason } catch { return "\(error)" }
        }
        #expect(reason(["type": "Point", "coordinates": [10, 95]])?.contains("Latitude") == true)
        #expect(reason(["type": "Point", "coordinates": [200, 5]])?.contains("Longitude") == true)
        #expect(reason(["type": "LineString", "coordinates": [[1, 2]]])?.contains("at least 2") == true)
        #expect(reason(["type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]])?.contains("closed") == true)
        #expect(reason(["type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]])?.contains("at least 4") == true)
        #expect(reason(["type": "Point", "coordinates": ["a", 1]]) != nil)
        #expect(reason(["type": "Circle", "coordinates": [1, 1]])?.contains("Unknown") == true)
        #expect(reason(["type": "Point", "coordinates": [1, 1]]) == nil)
    }

    @Test("WKT: every geometry type, case and spacing variants, clear errors")
    func wkt() throws {
        #expect(try WKT.parse("point(-71.0537124 42.3681995)") == .point(Coordinate(lon: -71.0537124, lat: 42.3681995)))
        #expect(try WKT.parse("POINT Z (1 2 3)") == .point(Coordinate(lon: 1, lat: 2)))
        #expect(try WKT.parse("MULTIPOINT ((1 2), (3 4))") == WKT.parse("MULTIPOINT (1 2, 3 4)"))
        #expect(try WKT.parse("LINESTRING(0 0,1 1)") == .lineString([Coordinate(lon: 0, lat: 0), Coordinate(lon: 1, lat: 1)]))
        if case let .multiPolygon(polygons) = try WKT.parse("MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))") {
            #expect(polygons.count == 2)
        } else { Issue.record("not a multipolygon") }
        if case let .collection(members) = try WKT.parse("GEOMETRYCOLLECTION (POINT (1 1), LINESTRING (0 0, 2 2))") {
            #expect(members.count == 2)
        } else { Issue.record("not a collection") }
        #expect(try WKT.parse("MULTILINESTRING ((0 0, 1 1), (2 2, 3 3))") == .multiLineString([
            [Coordinate(lon: 0, lat: 0), Coordinate(lon: 1, lat: 1)], [Coordinate(lon: 2, lat: 2), Coordinate(lon: 3, lat: 3)]]))
        for bad in ["POINT (1)", "POLYGON ((0 0, 1 0, 1 1, 0 1))", "CIRCLE (1 1)", "POINT (1 95)", "POINT (1 1) x", "LINESTRING (1 1)", "POINT EMPTY", ""] {
            #expect(throws: GeometryError.self, "\(bad)") { try WKT.parse(bad) }
        }
    }
}

@Suite("Counting points on a grid, against brute force")
struct GeoGridTests {
    @Test("Totals, per-cell counts, mean positions and the bounds equal brute force, for random boxes (across the antimeridian too), time windows, id prefixes and changes applied since the build",
          arguments: [11 as UInt64, 12, 13])
    func gridMatchesBruteForce(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var entries: [(id: String, geometry: Geometry)] = []
        var times: [Double] = []
        for i in 0..<4000 {
            let lon = i % 3 == 0 ? Double.random(in: 178...180, using: &random) : Double.random(in: -180...180, using: &random)
            entries.append(("\(["ann", "bob", "cy"][i % 3]):\(i)", .point(Coordinate(lon: lon, lat: Double.random(in: -60...60, using: &random)))))
            times.append(i % 10 == 0 ? .nan : Double(i * 1000))
        }
        let index = SpatialIndex(entries, times: times)
        var points = Dictionary(uniqueKeysWithValues: zip(entries, times).map { ($0.0.id, (coordinate: $0.0.geometry.coordinates[0], time: $0.1)) })
        // Changes after the build: moved, removed, added (with and without times).
        var changes: [(id: String, geometry: Geometry?)] = []
        var changeTimes: [String: Double] = [:]
        for i in stride(from: 0, to: 4000, by: 97) {
            let id = entries[i].id
            if i % 2 == 0 {
                changes.append((id, nil))
                points.removeValue(forKey: id)
            } else {
                let c = Coordinate(lon: Double.random(in: -180...180, using: &random), lat: Double.random(in: -60...60, using: &random))
                changes.append((id, .point(c)))
                changeTimes[id] = 5_000_000
                points[id] = (c, 5_000_000)
            }
        }
        changes.append(("cy:new", .point(Coordinate(lon: 179.5, lat: 1))))
        points["cy:new"] = (Coordinate(lon: 179.5, lat: 1), .nan)
        index.apply(changes, times: changeTimes)

        for _ in 0..<25 {
            let minLat = Double.random(in: -70...50, using: &random), maxLat = minLat + Double.random(in: 0...60, using: &random)
            let minLon = Double.random(in: -180...180, using: &random), maxLon = Double.random(in: -180...180, using: &random)
            let box = BoundingBox(minLon: minLon, minLat: minLat, maxLon: maxLon, maxLat: min(maxLat, 90))
            let (columns, rows) = (Int.random(in: 1...12, using: &random), Int.random(in: 1...12, using: &random))
            let window: (Double, Double)? = Bool.random(using: &random) ? (Double.random(in: 0...2_000_000, using: &random), Double.random(in: 2_000_000...6_000_000, using: &random)) : nil
            let prefix: String? = Bool.random(using: &random) ? "bob:" : nil
            let grid = index.grid(box, columns: columns, rows: rows, from: window?.0, to: window?.1, idPrefix: prefix, pointLimit: 50)

            // Brute force.
            let crosses = box.minLon > box.maxLon
            let width = crosses ? box.maxLon + 360 - box.minLon : box.maxLon - box.minLon
            var expected: [Int: (count: Int, lat: Double, lon: Double)] = [:]
            var kept: [String] = []
            var extent: (south: Double, north: Double, west: Double, east: Double)?
            for (id, point) in points {
                let c = point.coordinate
                guard c.lat >= box.minLat, c.lat <= box.maxLat else { continue }
                var dx = c.lon - box.minLon
                if crosses, dx < 0 { dx += 360 }
                guard dx >= 0, dx <= width else { continue }
                if let window { guard !point.time.isNaN, point.time >= window.0, point.time <= window.1 else { continue } }
                if let prefix, !id.hasPrefix(prefix) { continue }
                let column = min(columns - 1, width > 0 ? Int(dx / width * Double(columns)) : 0)
                let row = min(rows - 1, box.maxLat > box.minLat ? Int((c.lat - box.minLat) / (box.maxLat - box.minLat) * Double(rows)) : 0)
                var cell = expected[row * columns + column] ?? (0, 0, 0)
                cell.count += 1
                cell.lat += c.lat
                cell.lon += dx
                expected[row * columns + column] = cell
                kept.append(id)
                let e = extent ?? (c.lat, c.lat, dx, dx)
                extent = (min(e.south, c.lat), max(e.north, c.lat), min(e.west, dx), max(e.east, dx))
            }
            // The bounds: the tightest box holding every counted point, in the box's own frame.
            if let extent, let bounds = grid.bounds {
                func lon(_ dx: Double) -> Double { box.minLon + dx > 180 ? box.minLon + dx - 360 : box.minLon + dx }
                #expect(abs(bounds.minLat - extent.south) < 1e-9 && abs(bounds.maxLat - extent.north) < 1e-9)
                #expect(abs(bounds.minLon - lon(extent.west)) < 1e-9 && abs(bounds.maxLon - lon(extent.east)) < 1e-9)
            } else {
                #expect(extent == nil && grid.bounds == nil)
            }
            #expect(grid.total == kept.count)
            #expect(grid.cells.count == expected.count)
            for cell in grid.cells {
                let truth = expected[cell.row * columns + cell.column]
                #expect(cell.count == truth?.count)
                if let truth {
                    var lon = box.minLon + truth.lon / Double(truth.count)
                    if lon > 180 { lon -= 360 }
                    #expect(abs(cell.center.lat - truth.lat / Double(truth.count)) < 1e-9 && abs(cell.center.lon - lon) < 1e-9)
                }
            }
            #expect(kept.count > 50 ? grid.points.isEmpty : Set(grid.points.map(\.id)) == Set(kept))
        }
    }
}
