import ArgumentParser
import CommandSupport
import CouchEngine
import CouchIndexes
import CouchJSON
import Foundation
import GRDB
import Geo
import Logging
import TrackerKit

/// `lt-bench geo`: the geo index against a SQLite R*Tree baseline measured in the same run, on
/// points clustered like real tracks: index build, memory per point, the app's query ("within
/// 4,023.35 m, nearest first, 100 results") in-process on one core and over HTTP.
struct GeoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "geo",
        abstract: "Measure geo indexing and queries against a SQLite R*Tree baseline.")

    @Option(help: "Indexed points (documents).")
    var points = 1_000_000

    @Option(help: "Queries per in-process measurement.")
    var queries = 20_000

    @Option(help: "Rounds of the in-process queries; the median is reported (the spread too).")
    var rounds = 5

    @Option(help: "Queries for the R*Tree baseline (it is slower).")
    var baselineQueries = 2_000

    @Option(help: "Queries over HTTP (2 clients).")
    var httpQueries = 20_000

    @Option(help: "Also load the points as documents and measure building from the database and HTTP queries.")
    var documents = true

    @Option(
        help:
            "A Redis server (host:port) to load the same points into and query the same way (GEOSEARCH), for comparison."
    )
    var redis: String?

    @Option(
        help:
            "Write the points (points.csv: id,lon,lat) and query centres (queries.csv: n,lon,lat) to this directory and stop, for comparing other engines (scripts/bench-postgis.sh)."
    )
    var export: String?

    static let radius = 4023.35
    static let limit = 100

    func run() async throws {
        ProcessSetup.runTasksOnEventLoops()
        ProcessSetup.bootstrapLogging(level: .warning)
        let helper = try Bench.parse(["--durability", "normal"])
        print(
            "lt-bench geo: \(points) points in \(points / 1000) tracks of 1,000 fixes around 40 cities; query: radius \(GeoBench.radius) m, nearest first, limit \(GeoBench.limit)"
        )
        let data = GeoBench.tracks(points)
        var random = SeededGenerator(seed: 42)
        let queryPoints = (0..<queries).map { _ in data[Int(random.next() % UInt64(data.count))].coordinate }
        if let export {
            try exportPoints(data, queryPoints, to: URL(fileURLWithPath: export, isDirectory: true))
            return
        }
        let baseline = try await measureRTree(data, queryPoints)
        helper.report("SQLite R*Tree build (baseline)", baseline.build, unit: "points/s")
        helper.report("SQLite R*Tree query (baseline), 1 core", baseline.rate, unit: "queries/s")
        measureInMemory(data, queryPoints, baseline: baseline, helper: helper)
        if let redis { try await measureRedis(redis, data, queryPoints, helper: helper) }
        guard documents else { return }
        try await measureDocuments(data, queryPoints, helper: helper)
    }

    /// Writes the points (`points.csv`: id,lon,lat) and query centres (`queries.csv`: n,lon,lat)
    /// for other engines (scripts/bench-postgis.sh).
    func exportPoints(
        _ data: [(id: String, coordinate: Coordinate)], _ queryPoints: [Coordinate], to directory: URL
    ) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var csv = ""
        csv.reserveCapacity(data.count * 48)
        for p in data { csv += "\(p.id),\(p.coordinate.lon),\(p.coordinate.lat)\n" }
        try Data(csv.utf8).write(to: directory.appendingPathComponent("points.csv"))
        let queries = queryPoints.enumerated().map { "\($0.offset + 1),\($0.element.lon),\($0.element.lat)\n" }.joined()
        try Data(queries.utf8).write(to: directory.appendingPathComponent("queries.csv"))
        print("wrote \(data.count) points and \(queryPoints.count) query centres to \(directory.path)")
    }

    /// The baseline: SQLite R*Tree (an in-memory database) as a box pre-filter, exact distance
    /// check, sort by distance. Its build rate, query rate and results.
    func measureRTree(
        _ data: [(id: String, coordinate: Coordinate)], _ queryPoints: [Coordinate]
    ) async throws -> (build: Double, rate: Double, hits: Int) {
        let rtree = try DatabaseQueue()
        let baselineBuildStart = ContinuousClock.now
        try await rtree.write { db in
            try db.execute(sql: "CREATE VIRTUAL TABLE rt USING rtree(id, minLon, maxLon, minLat, maxLat)")
            try db.execute(sql: "CREATE TABLE pts(id INTEGER PRIMARY KEY, lon REAL, lat REAL, doc_id TEXT)")
            let insertTree = try db.makeStatement(sql: "INSERT INTO rt VALUES (?, ?, ?, ?, ?)")
            let insertPoint = try db.makeStatement(sql: "INSERT INTO pts VALUES (?, ?, ?, ?)")
            for (i, p) in data.enumerated() {
                try insertTree.execute(arguments: [
                    i, p.coordinate.lon, p.coordinate.lon, p.coordinate.lat, p.coordinate.lat,
                ])
                try insertPoint.execute(arguments: [i, p.coordinate.lon, p.coordinate.lat, p.id])
            }
        }
        let baselineBuild = Double(data.count) / baselineBuildStart.duration(to: .now).seconds
        let baselineStart = ContinuousClock.now
        let baselineHits = try await rtree.read { db -> Int in
            var found = 0
            let select = try db.makeStatement(
                sql: """
                    SELECT p.doc_id, p.lon, p.lat FROM rt JOIN pts p ON p.id = rt.id
                    WHERE rt.minLon <= ? AND rt.maxLon >= ? AND rt.minLat <= ? AND rt.maxLat >= ?
                    """)
            for q in queryPoints.prefix(baselineQueries) {
                let dLat = GeoBench.radius / Sphere.radius * 180 / .pi
                let dLon = dLat / max(0.01, cos(q.lat * .pi / 180))
                var hits: [(String, Double)] = []
                let rows = try Row.fetchCursor(
                    select, arguments: [q.lon + dLon, q.lon - dLon, q.lat + dLat, q.lat - dLat])
                while let row = try rows.next() {
                    let d = Sphere.distance(q, Coordinate(lon: row[1], lat: row[2]))
                    if d <= GeoBench.radius { hits.append((row[0], d)) }
                }
                hits.sort { $0.1 < $1.1 }
                found += min(hits.count, GeoBench.limit)
            }
            return found
        }
        let baselineRate = Double(min(baselineQueries, queryPoints.count)) / baselineStart.duration(to: .now).seconds
        return (baselineBuild, baselineRate, baselineHits)
    }

    /// The in-memory index: build rate, size, and queries on one core against the baseline.
    func measureInMemory(
        _ data: [(id: String, coordinate: Coordinate)], _ queryPoints: [Coordinate],
        baseline: (build: Double, rate: Double, hits: Int), helper: Bench
    ) {
        let before = GeoBench.residentBytes()
        let buildStart = ContinuousClock.now
        let index = SpatialIndex(data.map { ($0.id, Geometry.point($0.coordinate)) })
        let build = Double(data.count) / buildStart.duration(to: .now).seconds
        let after = GeoBench.residentBytes()
        helper.report(
            "index build from points, in memory", build, unit: "points/s", ceiling: baseline.build,
            baseline: "R*Tree build")
        helper.report("index arrays per point", Double(index.bytes) / Double(data.count), unit: "bytes")
        helper.report(
            "resident memory growth per point (build)", Double(after - before) / Double(data.count), unit: "bytes")

        var hits = 0
        let rates = helper.sortedRuns(rounds) { _ in
            hits = 0
            let queryStart = ContinuousClock.now
            for q in queryPoints {
                let search = GeoSearch(
                    shape: .circle(center: q, radius: GeoBench.radius), relation: .contains, limit: GeoBench.limit)
                hits += index.search(search).hits.count
            }
            return Double(queryPoints.count) / queryStart.duration(to: .now).seconds
        }
        helper.report(
            "app query in-process, 1 core", rates[rates.count / 2], unit: "queries/s", ceiling: baseline.rate,
            baseline: "R*Tree")
        print(
            String(
                format: "   (median of %d rounds of %d queries; slowest %.0f, fastest %.0f)", rates.count,
                queryPoints.count, rates.first!, rates.last!))
        print(
            String(
                format: "   (%.1f results per query; R*Tree baseline %.1f)", Double(hits) / Double(queryPoints.count),
                Double(baseline.hits) / Double(max(1, min(baselineQueries, queryPoints.count)))))
    }

    /// The same points in Redis (GEOADD), the same queries as GEOSEARCH ... BYRADIUS ... ASC
    /// COUNT 100 from 2 clients over TCP: what users would pick instead.
    func measureRedis(
        _ address: String, _ data: [(id: String, coordinate: Coordinate)], _ queryPoints: [Coordinate], helper: Bench
    ) async throws {
        let parts = address.split(separator: ":")
        let host = String(parts.first ?? "127.0.0.1"), port = parts.count > 1 ? Int(parts[1]) ?? 6379 : 6379
        let loader = try BenchConnection(host: host, port: port)
        _ = try loader.redis([["DEL", "lt-bench-geo"]])
        let start = ContinuousClock.now
        for batch in stride(from: 0, to: data.count, by: 10_000) {
            var command = ["GEOADD", "lt-bench-geo"]
            for p in data[batch..<min(batch + 10_000, data.count)] {
                command += [String(p.coordinate.lon), String(p.coordinate.lat), p.id]
            }
            _ = try loader.redis([command])
        }
        helper.report(
            "Redis GEOADD (comparison)", Double(data.count) / start.duration(to: .now).seconds, unit: "points/s")
        let commands = queryPoints.prefix(httpQueries).map { q in
            [
                "GEOSEARCH", "lt-bench-geo", "FROMLONLAT", String(q.lon), String(q.lat), "BYRADIUS",
                String(GeoBench.radius), "m", "ASC", "COUNT", String(GeoBench.limit),
            ]
        }
        let results = Locked(0)
        let queryStart = ContinuousClock.now
        try await Bench.Client(base: "http://\(host):\(port)", authorization: "").concurrently(2, commands.count) {
            connection, i in
            let count = try connection.redis([commands[i]])[0]
            results.withLock { $0 += count }
        }
        helper.report(
            "Redis GEOSEARCH, 2 clients (comparison)", Double(commands.count) / queryStart.duration(to: .now).seconds,
            unit: "queries/s")
        print(
            String(
                format: "   (%.1f results per query)", Double(results.withLock { $0 }) / Double(max(1, commands.count)))
        )
        _ = try loader.redis([["DEL", "lt-bench-geo"]])
    }

    /// Builds the index from documents in a database, then queries it over HTTP from a server
    /// that loads the persisted index as after a restart.
    func measureDocuments(
        _ data: [(id: String, coordinate: Coordinate)], _ queryPoints: [Coordinate], helper: Bench
    ) async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("lt-bench-geo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let directory = scratch.appendingPathComponent("server")
        let store = try DatabaseStore(directory: directory, durability: .normal)
        let db = try await store.create("tracks")
        for start in stride(from: 0, to: data.count, by: 5000) {
            let batch = data[start..<min(start + 5000, data.count)].map { p in
                DocumentInput(
                    id: p.id,
                    body: [
                        "type": "Feature",
                        "geometry": [
                            "type": "Point", "coordinates": [.double(p.coordinate.lon), .double(p.coordinate.lat)],
                        ],
                        "properties": ["username": "bench"],
                    ])
            }
            _ = try await db.update(batch, newEdits: true)
        }
        let source = "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); }}"
        _ = try await db.update(
            DocumentInput(id: "_design/points", body: ["st_indexes": ["pointidx": ["index": .string(source)]]]))
        let definition = GeoIndexDefinition(code: source, extract: GeoIndexDefinition.native(source)!)
        let start = ContinuousClock.now
        try await db.geo.update(definition)
        helper.report(
            "index build from documents (read, persist)", Double(data.count) / start.duration(to: .now).seconds,
            unit: "docs/s")

        let (task, port) = try await helper.startServer(directory)
        defer { task.cancel() }
        let client = try Bench.Client(
            base: "http://127.0.0.1:\(port)",
            authorization: "Basic " + Data("bench:bench-password".utf8).base64EncodedString())
        let path = { (q: Coordinate) in
            "/tracks/_design/points/_geo/pointidx?lat=\(q.lat)&lon=\(q.lon)&radius=\(GeoBench.radius)&relation=contains&nearest=true&limit=\(GeoBench.limit)"
        }
        let loadStart = ContinuousClock.now
        try await client.send("GET", path(queryPoints[0]), expect: 200)
        helper.report(
            "first query after a restart (loads the index)", Double(data.count) / loadStart.duration(to: .now).seconds,
            unit: "points/s")
        // The server's ceiling on this machine: the smallest request (GET /), 2 clients.
        let ceilingStart = ContinuousClock.now
        try await client.concurrently(2, httpQueries) { connection, _ in
            try Bench.Client.check(connection.send("GET", "/", authorization: client.authorization), 200, "GET", "/")
        }
        let ceiling = Double(httpQueries) / ceilingStart.duration(to: .now).seconds
        helper.report("GET / over HTTP, 2 clients (server ceiling)", ceiling, unit: "requests/s")
        let paths = queryPoints.prefix(httpQueries).map(path)
        let httpStart = ContinuousClock.now
        try await client.concurrently(2, paths.count) { connection, i in
            let reply = try connection.send("GET", paths[i], authorization: client.authorization)
            try Bench.Client.check(reply, 200, "GET", "_geo")
        }
        helper.report(
            "app query over HTTP, 2 clients", Double(paths.count) / httpStart.duration(to: .now).seconds,
            unit: "queries/s", ceiling: ceiling, baseline: "GET /")
    }

    /// Points along random-walk tracks (1,000 fixes each, 10–40 m apart) starting near 40 city
    /// centres, one of them on the antimeridian: dense where people go, empty elsewhere.
    static func tracks(_ count: Int) -> [(id: String, coordinate: Coordinate)] {
        var random = SeededGenerator(seed: 7)
        func uniform() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        let cities = (0..<40).map { i -> Coordinate in
            i == 0
                ? Coordinate(lon: 179.9, lat: -16.5) : Coordinate(lon: uniform() * 360 - 180, lat: uniform() * 120 - 60)
        }
        var out: [(id: String, coordinate: Coordinate)] = []
        out.reserveCapacity(count)
        var track = 0
        while out.count < count {
            let city = cities[track % cities.count]
            var lat = city.lat + (uniform() - 0.5) * 0.3
            var lon = city.lon + (uniform() - 0.5) * 0.3
            var heading = uniform() * 2 * .pi
            for fix in 0..<min(1000, count - out.count) {
                heading += (uniform() - 0.5) * 0.6
                let step = 10 + uniform() * 30
                lat = max(-89.9, min(89.9, lat + step * cos(heading) / 111_195))
                lon += step * sin(heading) / (111_195 * cos(lat * .pi / 180))
                if lon > 180 { lon -= 360 }
                if lon < -180 { lon += 360 }
                out.append((String(format: "trk%05d-%04d", track, fix), Coordinate(lon: lon, lat: lat)))
            }
            track += 1
        }
        return out
    }

    /// Resident set size from /proc (0 where there is none).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }
}
