import AsyncHTTPClient
import CouchJSON
import Foundation
import GRDB
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// Cloudant Geo's API against a real `lt serve`, with the original app's design document and
/// its 50 sample places.
@Suite("Geo queries over HTTP", .serialized, .timeLimit(.minutes(3)))
struct GeoHTTPTests {
    static let pointIndex = "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); }}"

    static func samplePlaces() throws -> [JSON] {
        let data = try Data(contentsOf: Repository.root.appendingPathComponent("data/sample-places.json"))
        return try JSON.parse(Array(data))["places"]?.arrayValue ?? []
    }

    /// Haversine, written here independently of the server's geometry code.
    static func haversine(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let r = 6_371_008.8, rad = Double.pi / 180
        let h = pow(sin((lat2 - lat1) * rad / 2), 2) + cos(lat1 * rad) * cos(lat2 * rad) * pow(sin((lon2 - lon1) * rad / 2), 2)
        return 2 * r * asin(min(1, h.squareRoot()))
    }

    func loadPlaces(_ s: TestServer) async throws -> [String: (lon: Double, lat: Double)] {
        _ = try await s.request(.PUT, "/geo_places")
        let places = try Self.samplePlaces()
        #expect(places.count == 50)
        let written = try await s.request(.POST, "/geo_places/_bulk_docs", json: ["docs": .array(places)])
        var coordinates: [String: (lon: Double, lat: Double)] = [:]
        for (row, place) in zip(written.json.arrayValue ?? [], places) {
            let c = place["geometry"]?["coordinates"]
            coordinates[row["id"]!.stringValue!] = (c![0]!.doubleValue!, c![1]!.doubleValue!)
        }
        let ddoc = try await s.request(.PUT, "/geo_places/_design/points", json: ["st_indexes": ["pointidx": ["index": .string(Self.pointIndex)]]])
        #expect(ddoc.status == 201)
        return coordinates
    }

    @Test("The README's geo tour run on a server that seeded lt_places, and run twice: every place once (they carry their ids), the geo answer without duplicates")
    func tourTwice() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let places = try Self.samplePlaces()
        for _ in 0..<2 {
            #expect([201, 412].contains(try await s.request(.PUT, "/lt_places").status))
            let written = try await s.request(.POST, "/lt_places/_bulk_docs", json: ["docs": .array(places)])
            // The seeded places are these: each write is a conflict, none a new document.
            #expect(written.json.arrayValue?.allSatisfy { $0["error"] == "conflict" } == true, "\(written.text.prefix(300))")
        }
        let all = try await s.request(.GET, "/lt_places/_all_docs").json["rows"]?.arrayValue ?? []
        #expect(all.filter { $0["id"]?.stringValue?.hasPrefix("place-") == true }.count == 50, "\(all.count) documents")
        let rows = try await s.request(.GET, "/lt_places/_design/points/_geo/pointidx?lat=37.49453457&lon=-122.30464079&radius=4023.35&relation=contains&nearest=true")
            .json["rows"]?.arrayValue ?? []
        let ids = rows.compactMap { $0["id"]?.stringValue }
        #expect(!ids.isEmpty && Set(ids).count == ids.count)
        #expect(try await s.app(.GET, "/api/places/version").json == ["dataVersion": 1])
    }

    @Test("The original app's query returns exactly the places the haversine oracle finds, nearest first; the index survives a restart")
    func originalQuery() async throws {
        let directory = try TemporaryDirectory("lt-geo")
        defer { directory.cleanup() }
        var s = try TestServer(dataDirectory: directory.url)
        let coordinates = try await loadPlaces(s)
        let (lat, lon, radius) = (37.49453457, -122.30464079, 4023.35)
        let query = "/geo_places/_design/points/_geo/pointidx?lat=\(lat)&lon=\(lon)&radius=\(radius)&relation=contains&nearest=true&include_docs=true"
        let reply = try await s.request(.GET, query)
        #expect(reply.status == 200)
        let rows = reply.json["rows"]?.arrayValue ?? []
        let expected = coordinates.map { ($0.key, Self.haversine(lat, lon, $0.value.lat, $0.value.lon)) }.filter { $0.1 < radius }.sorted { $0.1 < $1.1 }
        #expect(!expected.isEmpty && rows.count == expected.count)
        #expect(Set(rows.compactMap { $0["id"]?.stringValue }) == Set(expected.map(\.0)))
        let distances = rows.compactMap { row -> Double? in
            guard let id = row["id"]?.stringValue, let c = coordinates[id] else { return nil }
            return Self.haversine(lat, lon, c.lat, c.lon)
        }
        #expect(distances == distances.sorted(), "nearest first")
        #expect(rows.first?["doc"]?["name"] != nil && rows.first?["geometry"]?["type"] == "Point")

        // After a restart the persisted index answers at once, without an update (stale=ok).
        s.stop()
        s = try TestServer(dataDirectory: directory.url)
        let restarted = s
        defer { restarted.stop() }
        let again = try await s.request(.GET, query + "&stale=ok")
        #expect(again.json["rows"]?.arrayValue?.map { $0["id"] } == rows.map { $0["id"] })
        // Edits are indexed incrementally: a new place at the query point comes first, a
        // deleted one is gone.
        _ = try await s.request(.PUT, "/geo_places/here", json: ["type": "Feature", "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]]])
        let firstID = rows[0]["id"]!.stringValue!
        let rev = try await s.request(.GET, "/geo_places/\(firstID)").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/geo_places/\(firstID)?rev=\(rev)")
        let edited = try await s.request(.GET, query).json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(edited.first == "here" && !edited.contains(firstID) && edited.count == rows.count)
        // stale=update_after answers from the index as it is, then brings it up to date.
        _ = try await s.request(.PUT, "/geo_places/there", json: ["type": "Feature", "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]]])
        let stale = try await s.request(.GET, query + "&stale=update_after").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(!stale.contains("there"))
        var caughtUp = false
        for _ in 0..<50 where !caughtUp {
            caughtUp = (try await s.request(.GET, query + "&stale=ok").json["rows"]?.arrayValue ?? []).contains { $0["id"] == "there" }
            if !caughtUp { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(caughtUp)
        let thereRev = try await s.request(.GET, "/geo_places/there").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/geo_places/there?rev=\(thereRev)")
        let info = try await s.request(.GET, "/geo_places/_design/points/_geo_info/pointidx")
        #expect(info.json["name"] == "_design/points/pointidx" && info.json["geo_index"]?["doc_count"] == 50)
    }

    @Test("Shapes, formats, paging with bookmarks, errors, JavaScript index functions, invalid geometries and _geo_cleanup")
    func apiSurface() async throws {
        let directory = try TemporaryDirectory("lt-geo")
        defer { directory.cleanup() }
        let s = try TestServer(dataDirectory: directory.url)
        defer { s.stop() }
        let coordinates = try await loadPlaces(s)
        let base = "/geo_places/_design/points/_geo/pointidx"
        // bbox in RFC 7946 order (minLon,minLat,maxLon,maxLat) against a direct count.
        let box = (w: -122.35, s: 37.45, e: -122.25, n: 37.55)
        let inBox = coordinates.filter { $0.value.lon >= box.w && $0.value.lon <= box.e && $0.value.lat >= box.s && $0.value.lat <= box.n }
        let boxed = try await s.request(.GET, "\(base)?bbox=\(box.w),\(box.s),\(box.e),\(box.n)&limit=200")
        #expect(Set(boxed.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []) == Set(inBox.keys) && !inBox.isEmpty)
        // The same area as WKT.
        let polygon = "POLYGON((\(box.w) \(box.s),\(box.e) \(box.s),\(box.e) \(box.n),\(box.w) \(box.n),\(box.w) \(box.s)))"
            .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let byWKT = try await s.request(.GET, "\(base)?g=\(polygon)&limit=200")
        #expect(Set(byWKT.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []) == Set(inBox.keys))

        // Every document by distance, paged 7 at a time with bookmarks.
        let everything = "\(base)?lat=37.4&lon=-122.1&nearest=true"
        let all = try await s.request(.GET, everything + "&limit=200").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(all.count == 50)
        var paged: [String] = []
        var bookmark = ""
        for _ in 0..<10 {
            let page = try await s.request(.GET, everything + "&limit=7&bookmark=\(bookmark)").json
            let ids = page["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            if ids.isEmpty { break }
            paged += ids
            bookmark = page["bookmark"]!.stringValue!
        }
        #expect(paged == all)
        let skipped = try await s.request(.GET, everything + "&limit=5&skip=45").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
        #expect(skipped == Array(all[45...]))

        // Formats.
        let near = "\(base)?lat=37.4&lon=-122.1&radius=20000&limit=2&include_docs=true"
        let geojson = try await s.request(.GET, near + "&format=geojson").json
        #expect(geojson["type"] == "FeatureCollection" && geojson["features"]?[0]?["type"] == "Feature")
        #expect(geojson["features"]?[0]?["_rev"] != nil && geojson["features"]?[0]?["geometry"]?["type"] == "Point")
        let viaAccept = try await s.request(.GET, near, headers: [("Accept", "application/vnd.geo+json")])
        #expect(viaAccept.json["features"] == geojson["features"] && viaAccept.headers["Content-Type"].first == "application/vnd.geo+json")
        let legacy = try await s.request(.GET, near + "&format=legacy").json
        #expect(legacy["features"]?[0]?["id"] != nil && legacy["features"]?[0]?["name"] != nil && legacy["features"]?[0]?["_id"] == nil)

        // Errors: a clear 400 for each.
        for (params, reason) in [
            ("", "No geometry query specified."),
            ("lat=1&lon=1&radius=5&bbox=0,0,1,1", "Multiple geometry queries specified."),
            ("lat=1&lon=1&radius=5&limit=201", "Limit must be less than or equal to 200"),
            ("g=POLYGON((0%200,1%200,1%201,0%200", "Invalid WKT"),
            ("lat=1&lon=1&radius=5&relation=near", "Unknown relation"),
            ("bbox=0,95,1,96", "Latitude"),
            ("lat=1&lon=1&radius=5&bookmark=@@", "Invalid bookmark"),
        ] {
            let reply = try await s.request(.GET, "\(base)?\(params)")
            #expect(reply.status == 400 && reply.json["error"] == "bad_request" && reply.json["reason"]?.stringValue?.contains(reason) == true,
                    "\(params): \(reply.text)")
        }
        #expect(try await s.request(.GET, "/geo_places/_design/points/_geo/nope?lat=1&lon=1&radius=1").status == 404)

        // A JavaScript index function; a document with an invalid geometry is skipped.
        _ = try await s.request(.POST, "/geo_places/_bulk_docs", json: ["docs": [
            ["_id": "fix1", "loc": ["lat": 37.40001, "lng": -122.10001]],
            ["_id": "broken", "loc": ["lat": 95, "lng": 0]],
        ]])
        _ = try await s.request(.PUT, "/geo_places/_design/fixes", json: ["st_indexes": ["byloc": ["index":
            "function (doc) { if (doc.loc) { st_index({type: 'Point', coordinates: [doc.loc.lng, doc.loc.lat]}); } }"]]])
        let fixes = try await s.request(.GET, "/geo_places/_design/fixes/_geo/byloc?lat=37.4&lon=-122.1&radius=100")
        #expect(fixes.json["rows"]?.arrayValue?.map { $0["id"] } == ["fix1"], "\(fixes.text)")

        // _geo_cleanup drops the tables of indexes no design document has any more.
        func geoTables() throws -> Int {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: directory.url.appendingPathComponent("dbs/geo_places.sqlite").path, configuration: configuration)
            return try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM geo_indexes") ?? 0 }
        }
        #expect(try geoTables() == 2)
        let rev = try await s.request(.GET, "/geo_places/_design/fixes").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/geo_places/_design/fixes?rev=\(rev)")
        #expect(try await s.request(.POST, "/geo_places/_geo_cleanup", json: [:]).status == 202)
        #expect(try geoTables() == 1)
    }

    @Test("_geo_grid: counts on a grid with a time window (times from the index's `time` fields) and an id prefix, the points when few, the bounds of what is counted, kept current as documents change; bad boxes, sizes and time fields are 400; the dashboard's map endpoint is for analysts")
    func grid() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/tracks").status == 201)
        let index = JSON.string(GeoHTTPTests.pointIndex)
        #expect(try await s.request(.PUT, "/tracks/_design/points", json: ["st_indexes": [
            "pointidx": ["index": index, "time": ["recorded", "created_at"]],
            "untimed": ["index": index],
            "badtime": ["index": index, "time": 5],
        ]]).status == 201)
        let docs: [JSON] = (0..<30).map { i in
            ["_id": .string("\(i % 2 == 0 ? "ann" : "ben"):\(i)"), "created_at": .int(1_000 * i),
             "geometry": ["type": "Point", "coordinates": [.double(-122 + Double(i % 6) * 0.1), .double(37 + Double(i / 6) * 0.1)]]]
        }
        #expect(try await s.request(.POST, "/tracks/_bulk_docs", json: ["docs": .array(docs)]).status == 201)
        let everything = try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx?bbox=-123,36,-121,38&columns=2&rows=2&points=100").json
        #expect(everything["total"] == 30 && everything["columns"] == 2 && everything["cells"]?.arrayValue?.count == 1)
        #expect(everything["points"]?.arrayValue?.count == 30)
        let cell = everything["cells"]?[0]
        #expect(cell?[2] == 30 && abs((cell?[3]?.doubleValue ?? 0) - 37.2) < 1e-9 && abs((cell?[4]?.doubleValue ?? 0) + 121.75) < 1e-9)
        // What a map fits to: the box of every counted point.
        let bounds = everything["bounds"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        #expect(bounds.count == 4 && zip(bounds, [-122, 37, -121.5, 37.4]).allSatisfy { abs($0 - $1) < 1e-9 })
        #expect(try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx?bbox=0,0,1,1").json["bounds"] == .null)
        // A window of time and one owner's prefix.
        let some = try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx?bbox=-123,36,-121,38&from=10000&to=19000&prefix=ann:").json
        #expect(some["total"] == 5 && some["points"]?.arrayValue?.isEmpty == true)
        // The engine reads no field of its own: an index without `time` has no times to window.
        let untimed = try await s.request(.GET, "/tracks/_design/points/_geo_grid/untimed?bbox=-123,36,-121,38&from=10000&to=19000").json
        #expect(untimed["total"] == 0)
        #expect(try await s.request(.GET, "/tracks/_design/points/_geo_grid/untimed?bbox=-123,36,-121,38").json["total"] == 30)
        let badTime = try await s.request(.GET, "/tracks/_design/points/_geo_grid/badtime?bbox=-123,36,-121,38")
        #expect(badTime.status == 400 && badTime.json["reason"]?.stringValue?.contains("time") == true)
        // Kept current: a deletion and a move.
        let rev = try await s.request(.GET, "/tracks/ann:0").json["_rev"]!.stringValue!
        _ = try await s.request(.DELETE, "/tracks/ann:0?rev=\(rev)")
        let moved = try await s.request(.GET, "/tracks/ben:1").json
        var away = moved.objectValue!
        away["geometry"] = ["type": "Point", "coordinates": [10, 10]]
        #expect(try await s.request(.PUT, "/tracks/ben:1", json: .object(away)).status == 201)
        #expect(try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx?bbox=-123,36,-121,38").json["total"] == 28)
        #expect(try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx").json["total"] == 29)
        for bad in ["bbox=1,2,3", "bbox=0,50,10,40", "bbox=0,0,200,10", "columns=0", "rows=201", "points=9999", "from=soon"] {
            let reply = try await s.request(.GET, "/tracks/_design/points/_geo_grid/pointidx?\(bad)")
            #expect(reply.status == 400 && reply.json["error"] == "bad_request", "\(bad): \(reply.text)")
        }
        #expect(try await s.request(.GET, "/tracks/_design/points/_geo_grid/nope").status == 404)

        // The application's map of everyone's locations: analysts and admins only.
        _ = try await s.app(.PUT, "/api/users/gus", json: ["password": "pw-gus"])
        let gus = try await s.app(.POST, "/api/login", json: ["username": "gus", "password": "pw-gus"]).json
        #expect(try await s.app(.GET, "/api/analysis/map", auth: .basic(gus["api_key"]!.stringValue!, gus["api_password"]!.stringValue!)).status == 403)
        #expect(try await s.app(.GET, "/api/analysis/map").status == 401)
        let map = try await s.app(.GET, "/api/analysis/map?bbox=-180,-90,180,90&columns=4&rows=2", auth: .basic(TestServer.admin.0, TestServer.admin.1))
        #expect(map.status == 200 && map.json["total"] != nil && map.json["rows"] == 2)
        #expect(try await s.app(.GET, "/api/analysis/map?user=nobody", auth: .basic(TestServer.admin.0, TestServer.admin.1)).status == 404)
    }

    @Test("[geo] max_limit: Cloudant's 200 by default; raised by an admin, every hit of a radius comes in one page, the same hits in the same order as pages of 200 with bookmarks; values outside 1…100,000 refused")
    func largerPages() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/many")
        // 1,200 points within ~1 km of (37.4, -122.1), 300 more far away.
        var random = SystemRandomNumberGenerator()
        let docs: [JSON] = (0..<1500).map { i in
            let far = i >= 1200
            let lat = (far ? 40.0 : 37.4) + Double.random(in: -0.006...0.006, using: &random)
            let lon = -122.1 + Double.random(in: -0.006...0.006, using: &random)
            return ["_id": .string(String(format: "p%04d", i)), "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]]]
        }
        _ = try await s.request(.POST, "/many/_bulk_docs", json: ["docs": .array(docs)])
        _ = try await s.request(.PUT, "/many/_design/g", json: ["st_indexes": ["pts": ["index": .string(Self.pointIndex)]]])
        let base = "/many/_design/g/_geo/pts?lat=37.4&lon=-122.1&radius=2000&relation=contains"
        let refused = try await s.request(.GET, base + "&limit=5000")
        #expect(refused.status == 400 && refused.json["reason"]?.stringValue?.contains("less than or equal to 200") == true, "\(refused.text)")

        var paged: [String] = []
        var bookmark = ""
        for _ in 0..<20 {
            let page = try await s.request(.GET, base + "&limit=200&bookmark=\(bookmark)").json
            let ids = page["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            if ids.isEmpty { break }
            paged += ids
            bookmark = page["bookmark"]?.stringValue ?? ""
        }
        #expect(paged.count == 1200 && Set(paged).count == 1200)

        for bad in ["0", "100001", "many"] {
            let reply = try await s.request(.PUT, "/_node/_local/_config/geo/max_limit", json: .string(bad))
            #expect(reply.status == 400, "max_limit \(bad): \(reply.text)")
        }
        #expect(try await s.request(.PUT, "/_node/_local/_config/geo/max_limit", json: "5000").status == 200)
        let whole = try await s.request(.GET, base + "&limit=5000")
        #expect(whole.status == 200, "\(whole.text.prefix(300))")
        #expect(whole.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == paged)
        #expect(try await s.request(.GET, base + "&limit=5001").status == 400)
    }
}
