import Geo
import Testing

@Suite("Spatial relations on hand-checked geometry pairs")
struct RelationTests {
    /// Query Q, document R, and the relations "Q relation R" that hold; all others must not.
    static let planarCases: [(String, String, Set<Relation>)] = [
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POINT (5 5)", [.intersects, .contains, .covers, .containsProperly]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POINT (0 5)", [.intersects, .covers, .touches]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POINT (20 20)", [.disjoint]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POLYGON ((2 2, 4 2, 4 4, 2 4, 2 2))", [.intersects, .contains, .covers, .containsProperly]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POLYGON ((0 0, 5 0, 5 5, 0 5, 0 0))", [.intersects, .contains, .covers]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POLYGON ((5 5, 15 5, 15 15, 5 15, 5 5))", [.intersects, .overlaps]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POLYGON ((10 0, 20 0, 20 10, 10 10, 10 0))", [.intersects, .touches]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", [.intersects, .contains, .covers, .within, .coveredBy]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "LINESTRING (-5 5, 15 5)", [.intersects, .crosses]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "LINESTRING (2 2, 8 8)", [.intersects, .contains, .covers, .containsProperly]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", "LINESTRING (0 0, 10 0)", [.intersects, .touches, .covers]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (3 3, 7 3, 7 7, 3 7, 3 3))", "POINT (5 5)", [.disjoint]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (3 3, 7 3, 7 7, 3 7, 3 3))", "POLYGON ((4 4, 6 4, 6 6, 4 6, 4 4))", [.disjoint]),
        ("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (3 3, 7 3, 7 7, 3 7, 3 3))", "POLYGON ((1 1, 9 1, 9 9, 1 9, 1 1))", [.intersects, .overlaps]),
        ("LINESTRING (0 0, 10 10)", "LINESTRING (0 10, 10 0)", [.intersects, .crosses]),
        ("LINESTRING (0 0, 10 0)", "LINESTRING (5 0, 15 0)", [.intersects, .overlaps]),
        ("LINESTRING (0 0, 10 0)", "LINESTRING (10 0, 20 0)", [.intersects, .touches]),
        ("LINESTRING (0 0, 10 0)", "POINT (5 0)", [.intersects, .contains, .covers, .containsProperly]),
        ("LINESTRING (0 0, 10 0)", "POINT (0 0)", [.intersects, .covers, .touches]),
        ("POINT (5 5)", "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", [.intersects, .within, .coveredBy]),
        ("POINT (5 5)", "POINT (5 5)", [.intersects, .contains, .covers, .containsProperly, .within, .coveredBy]),
        ("MULTIPOINT ((5 5), (20 20))", "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))", [.intersects, .crosses]),
    ]

    @Test("Planar relations (GEOS semantics in lon/lat)", arguments: planarCases.indices)
    func planar(_ index: Int) throws {
        let (q, r, holding) = Self.planarCases[index]
        let shape = QueryShape.geometry(try WKT.parse(q))
        let document = try WKT.parse(r)
        for relation in Relation.allCases {
            #expect(shape.matches(relation, document) == holding.contains(relation), "\(q) \(relation.rawValue) \(r)")
        }
    }

    @Test("Circles on the sphere against points, lines and polygons")
    func circles() throws {
        // A 1 km circle at (0, 0); 0.009° of latitude is about 1,000.8 m.
        let circle = QueryShape.circle(center: Coordinate(lon: 0, lat: 0), radius: 1000)
        let cases: [(String, Set<Relation>)] = [
            ("POINT (0 0.008)", [.intersects, .contains, .covers, .containsProperly]),
            ("POINT (0 0.0091)", [.disjoint]),
            ("LINESTRING (-1 0, 1 0)", [.intersects, .crosses]),
            ("LINESTRING (-0.001 0, 0.001 0)", [.intersects, .contains, .covers, .containsProperly]),
            ("LINESTRING (-1 0.0091, 1 0.0091)", [.disjoint]),
            ("POLYGON ((-1 -1, 1 -1, 1 1, -1 1, -1 -1))", [.intersects, .within, .coveredBy]),
            ("POLYGON ((0.005 -1, 1 -1, 1 1, 0.005 1, 0.005 -1))", [.intersects, .overlaps]),
            ("POLYGON ((2 2, 3 2, 3 3, 2 3, 2 2))", [.disjoint]),
        ]
        for (wkt, holding) in cases {
            let document = try WKT.parse(wkt)
            for relation in Relation.allCases {
                #expect(circle.matches(relation, document) == holding.contains(relation), "circle \(relation.rawValue) \(wkt)")
            }
        }
    }
}
