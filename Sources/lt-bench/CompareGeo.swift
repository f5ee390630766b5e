import ArgumentParser
import CouchJSON
import Foundation
import Geo
import TrackerKit

/// `lt-bench compare`'s geo figures: the same points (random-walk tracks around 40 cities, as
/// `lt-bench geo`) and the same query centres in lt, over HTTP (`_geo`, Cloudant Geo's API), and
/// in PostGIS (geography points with a GiST index; `ST_DWithin`, and `ST_DWithin` ordered by the
/// KNN operator `<->`), both asked by 2 clients: lt's by `lt-bench`'s client, PostGIS's by
/// `pgbench`, PostgreSQL's own load generator, which the machine's `psql` and `pgbench` run.
struct CompareGeo: Sendable {
    let points: Int
    /// Queries asked of each per figure.
    let queries: Int

    var figures: [CompareFigure] {
        let size = points >= 1_000_000 ? "\(points / 1_000_000)M" : "\(points / 1000)k"
        return [
            CompareFigure("geo \(size) points: loaded and indexed", unit: "points/s"),
            CompareFigure("geo \(size) points: in 4 km, limit 100", unit: "queries/s"),
            CompareFigure("geo \(size) points: nearest in 4 km, limit 100", unit: "queries/s"),
            CompareFigure("geo \(size) points: every hit in 4 km, one request", unit: "queries/s"),
            CompareFigure("geo \(size) points: on disk, data and index", unit: "MiB", better: .lower),
        ]
    }

    /// Queries asked for every hit of a radius (each answers thousands of rows at a million points).
    var wholeQueries: Int { max(20, queries / 20) }

    /// The points and the query centres (a point of the data each, so every query finds some).
    func data() -> (points: [(id: String, coordinate: Coordinate)], centres: [Coordinate]) {
        let data = GeoBench.tracks(points)
        var random = SeededGenerator(seed: 42)
        return (data, (0..<max(queries, 1000)).map { _ in data[Int(random.next() % UInt64(data.count))].coordinate })
    }

    // MARK: lt

    /// lt: the points as GeoJSON documents with `_bulk_docs` and a geo index over them (built by
    /// the first query), then the two queries.
    func measureLT(
        _ w: CompareWorkload, _ data: [(id: String, coordinate: Coordinate)], _ centres: [Coordinate]
    ) async throws -> [Double] {
        let db = "cmp-geo-\(points)"
        try await w.client.send("PUT", "/\(db)", expect: 201)
        let batches = stride(from: 0, to: data.count, by: 1000).map { start in
            JSON.object([
                "docs": .array(
                    data[start..<min(start + 1000, data.count)].map { point in
                        [
                            "_id": .string(point.id), "type": "Feature",
                            "geometry": [
                                "type": "Point",
                                "coordinates": [.double(point.coordinate.lon), .double(point.coordinate.lat)],
                            ],
                        ]
                    })
            ]).bytes
        }
        let loadStart = ContinuousClock.now
        try await w.client.concurrently(4, batches.count) { connection, i in
            try Bench.Client.check(
                connection.send("POST", "/\(db)/_bulk_docs", authorization: w.authorization, body: batches[i]), 201,
                "POST", "_bulk_docs")
        }
        let written = loadStart.duration(to: .now).seconds
        try await w.client.send(
            "PUT", "/\(db)/_design/geo",
            json: [
                "st_indexes": [
                    "points": [
                        "index":
                            "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); } }"
                    ]
                ]
            ], expect: 201)
        let base = "/\(db)/_design/geo/_geo/points?radius=\(GeoBench.radius)&relation=contains"
        try await w.client.send(
            "GET", base + "&limit=\(GeoBench.limit)&lat=\(centres[0].lat)&lon=\(centres[0].lon)", expect: 200)
        let seconds = loadStart.duration(to: .now).seconds
        let loaded = Double(data.count) / seconds
        // Where the load's time goes, as progress: the documents' writes, then the index build.
        FileHandle.standardError.write(
            Data(
                String(
                    format: "  lt, geo %d points: written in %.1f s (%.0f docs/s), indexed in %.1f s\n",
                    data.count, written, Double(data.count) / written, seconds - written
                ).utf8))
        func rate(_ extra: String, count: Int) async throws -> Double {
            let paths = centres.prefix(count).map { base + "&lat=\($0.lat)&lon=\($0.lon)" + extra }
            let start = ContinuousClock.now
            try await w.client.concurrently(2, paths.count) { connection, i in
                try Bench.Client.check(
                    connection.send("GET", paths[i], authorization: w.authorization), 200, "GET", "_geo")
            }
            return Double(paths.count) / start.duration(to: .now).seconds
        }
        let limited = try await rate("&limit=\(GeoBench.limit)", count: queries)
        let nearest = try await rate("&limit=\(GeoBench.limit)&nearest=true", count: queries)
        // Every hit in one page: the largest page an admin may allow (`[geo] max_limit`), set for
        // the run and put back after it.
        let previous = try? JSON.parse(
            try await w.client.send("GET", "/_node/_local/_config/geo/max_limit", expect: 200)
        ).stringValue
        try await w.client.send("PUT", "/_node/_local/_config/geo/max_limit", json: "100000", expect: 200)
        let whole = try await rate("&limit=100000", count: wholeQueries)
        if let previous {
            try await w.client.send("PUT", "/_node/_local/_config/geo/max_limit", json: .string(previous), expect: 200)
        } else {
            try await w.client.send("DELETE", "/_node/_local/_config/geo/max_limit", expect: 200)
        }
        let file =
            try JSON.parse(try await w.client.send("GET", "/\(db)", expect: 200))["sizes"]?["file"]?.doubleValue ?? 0
        return [loaded, limited, nearest, whole, file / 1_048_576]
    }

    // MARK: PostGIS

    /// PostGIS at `url` (a libpq URL, e.g. postgresql://postgres@127.0.0.1:5499/postgres): the
    /// points copied in, cast to geography and indexed, then each query run by pgbench.
    func measurePostGIS(
        _ url: String, _ data: [(id: String, coordinate: Coordinate)], _ centres: [Coordinate], scratch: URL
    ) throws -> [Double] {
        let directory = scratch.appendingPathComponent("postgis-\(points)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pointsFile = directory.appendingPathComponent("points.csv"),
            centresFile = directory.appendingPathComponent("centres.csv")
        try Data(data.map { "\($0.id),\($0.coordinate.lon),\($0.coordinate.lat)\n" }.joined().utf8).write(
            to: pointsFile)
        try Data(centres.enumerated().map { "\($0.offset + 1),\($0.element.lon),\($0.element.lat)\n" }.joined().utf8)
            .write(to: centresFile)
        let table = "cmp_points_\(points)"
        try Self.psql(
            url,
            """
            CREATE EXTENSION IF NOT EXISTS postgis;
            DROP TABLE IF EXISTS \(table), \(table)_raw, \(table)_centres;
            CREATE TABLE \(table)_centres(n int PRIMARY KEY, lon float8, lat float8, g geography);
            \\copy \(table)_centres(n, lon, lat) FROM '\(centresFile.path)' WITH (FORMAT csv)
            UPDATE \(table)_centres SET g = ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography;
            ANALYZE \(table)_centres;
            """)
        let loadStart = ContinuousClock.now
        try Self.psql(
            url,
            """
            CREATE TABLE \(table)_raw(id text, lon float8, lat float8);
            \\copy \(table)_raw FROM '\(pointsFile.path)' WITH (FORMAT csv)
            CREATE TABLE \(table) AS SELECT id, ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography AS g FROM \(table)_raw;
            CREATE INDEX ON \(table) USING gist(g);
            ANALYZE \(table);
            """)
        let loaded = Double(data.count) / loadStart.duration(to: .now).seconds
        let centre = "(SELECT g FROM \(table)_centres WHERE n = :n)"
        let radius =
            "SELECT id FROM \(table) WHERE ST_DWithin(g, \(centre), \(GeoBench.radius)) LIMIT \(GeoBench.limit);"
        let nearest =
            "SELECT id FROM \(table) WHERE ST_DWithin(g, \(centre), \(GeoBench.radius)) ORDER BY g <-> \(centre) LIMIT \(GeoBench.limit);"
        let every = "SELECT id FROM \(table) WHERE ST_DWithin(g, \(centre), \(GeoBench.radius));"
        let rates = try [(radius, queries), (nearest, queries), (every, wholeQueries)].map { query, count in
            try pgbench(url, script: "\\set n random(1, \(centres.count))\n\(query)\n", count: count, in: directory)
        }
        let bytes = try Self.run(
            "psql", [url, "-X", "-q", "-t", "-A", "-c", "SELECT pg_total_relation_size('\(table)')"])
        try Self.psql(url, "DROP TABLE \(table), \(table)_raw, \(table)_centres;")
        return [loaded] + rates + [(Double(bytes.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) / 1_048_576]
    }

    /// Transactions per second of `script` run by pgbench with 2 clients, as many queries as lt
    /// is asked. (A count, not `-T`: pgbench ends a timed run with SIGALRM, which a process
    /// started from here may have blocked, and it then never ends.)
    func pgbench(_ url: String, script: String, count: Int, in directory: URL) throws -> Double {
        let file = directory.appendingPathComponent("query.sql")
        try Data(script.utf8).write(to: file)
        let output = try Self.run(
            "pgbench", ["-n", "-c", "2", "-j", "2", "-t", String(max(1, count / 2)), "-f", file.path, url])
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = line.split(separator: " ").dropFirst(2).first.flatMap({ Double($0) })
        else {
            throw ValidationError("pgbench gave no rate: \(output.suffix(500))")
        }
        return tps
    }

    /// Runs each line of `sql` (a statement or a psql command such as `\\copy`) with psql.
    static func psql(_ url: String, _ sql: String) throws {
        _ = try run(
            "psql",
            [url, "-X", "-q", "-v", "ON_ERROR_STOP=1"] + sql.split(separator: "\n").flatMap { ["-c", String($0)] })
    }

    /// Runs a program found on the PATH; its standard output, or its standard error as the failure.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [program] + arguments
        // Standard error to a file, so that neither pipe can fill while the other is read.
        let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-\(program)-\(UUID().uuidString).err")
        guard FileManager.default.createFile(atPath: errorFile.path, contents: nil) else {
            throw ValidationError("cannot write \(errorFile.path)")
        }
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: errorFile)
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let failure = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
            throw ValidationError("\(program) failed: \(failure.suffix(1000))")
        }
        return text
    }
}
