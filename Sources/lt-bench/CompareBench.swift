import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Logging

/// `lt-bench compare`: the same HTTP workload, over real sockets, against `lt serve` and a
/// CouchDB-API server (Apache CouchDB built beside the project), in one invocation, each figure
/// printed for both with lt's advantage as a ratio and the target it should meet.
struct CompareBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Measure lt serve and Apache CouchDB side by side with the same HTTP workload.",
        discussion: """
            Starts the lt built beside lt-bench (or --lt-binary) as its own process on a scratch directory, \
            durable, database API only; measures it, then the server at --couchdb, figure by figure. \
            Without --couchdb only lt is measured. The CouchDB server's memory is read from /proc, so it \
            must run on this machine (its process is found by its port, or --couchdb-pid). Databases named \
            cmp-* are deleted on both servers before and after.
            """)

    @OptionGroup var peers: PeerOptions

    @Option(help: "Location documents loaded with _bulk_docs and read back.")
    var docs = 100_000

    @Option(help: "Documents written with single PUTs.")
    var puts = 20_000

    @Option(help: "Longpoll listeners on one database while a writer writes.")
    var listeners = 200

    @Flag(help: "A short run (10,000 documents, 2,000 PUTs, 50 listeners) to record figures in CI, not to judge by.")
    var quick = false

    @Option(help: "Also write the figures as JSON to this file.")
    var json: String?

    @Option(
        name: .customLong("geo-points"),
        help: "Points of a geo comparison (repeatable, e.g. 100000 and 1000000; default 100,000, 10,000 with --quick).")
    var geoPoints: [Int] = []

    @Option(
        name: .customLong("geo-queries"),
        help: "Geo queries asked of lt per figure (default 20,000, 2,000 with --quick).")
    var geoQueries: Int?

    @Option(
        help:
            "PostGIS to compare the geo figures with, as a libpq URL (e.g. postgresql://postgres@127.0.0.1:5499/postgres); its psql and pgbench must be on the PATH. Tables named cmp_points_* are made and dropped."
    )
    var postgis: String?

    @Option(
        help:
            "Only the measurements with a figure whose name contains this text, or geo for the geo ones (repeatable; the bulk load always runs, the others read it)."
    )
    var only: [String] = []

    func validate() throws {
        // Sizes bounded before they size arrays, threads and loops (one listener is one thread).
        guard (1_000...10_000_000).contains(docs) else {
            throw ValidationError("--docs must be between 1,000 and 10,000,000")
        }
        guard (1...docs).contains(puts) else { throw ValidationError("--puts must be between 1 and --docs") }
        guard (1...1_000).contains(listeners) else { throw ValidationError("--listeners must be between 1 and 1,000") }
        guard geoPoints.allSatisfy({ (1_000...10_000_000).contains($0) }) else {
            throw ValidationError("--geo-points must be between 1,000 and 10,000,000")
        }
        guard geoQueries.map({ (2...10_000_000).contains($0) }) ?? true else {
            throw ValidationError("--geo-queries must be between 2 and 10,000,000")
        }
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scale =
            quick
            ? CompareScale(documents: 10_000, puts: 2_000, listeners: 50, feedWrites: 100)
            : CompareScale(documents: docs, puts: puts, listeners: listeners, feedWrites: 400)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-compare-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let binary = peers.lt.executable
        let admin = (user: "bench", password: "bench-password")
        let server = try await LTServeProcess.start(
            binary: binary, directory: scratch.appendingPathComponent("lt"), admin: admin)
        defer { server.stop() }
        var sides = [
            ComparedServer(
                name: "lt",
                target: Bench.Target(
                    base: "http://127.0.0.1:\(server.port)", user: admin.user, password: admin.password),
                pid: server.pid)
        ]
        if let couchdb = peers.couchdb {
            let target = try Bench.Target(url: couchdb)
            let pid = try peers.couchdbProcess(target)
            sides.append(ComparedServer(name: "CouchDB", target: target, pid: pid))
        }
        let header = try await CompareHeader(sides: sides, lt: server, scale: scale)
        print(header.text)
        var table = CompareTable(sides: sides.map(\.name) + (postgis == nil ? [] : ["PostGIS"]))
        table.printHeading()
        let documents = (0..<scale.documents).map(Bench.locationDocument)
        var workloads: [CompareWorkload] = []
        for side in sides {
            try await side.cleanUp()  // the databases of an earlier run that stopped half-way
            workloads.append(try CompareWorkload(server: side, documents: documents, scale: scale))
        }
        var memory: [String: Int] = [:]
        var anonymous: [String: Int] = [:]
        let measures = CompareWorkload.measures.enumerated().filter { index, measure in
            index == 0 || only.isEmpty
                || measure.figures.contains { figure in only.contains { figure.name.contains($0) } }
        }.map(\.element)
        for measure in measures {
            var rows = measure.figures.map { CompareTable.Row(figure: $0) }
            for workload in workloads {
                let sampler = PeakMemorySampler(pid: workload.server.pid)
                let values = try await measure.run(workload)
                let peak = sampler.stop()
                memory[workload.server.name] = max(memory[workload.server.name] ?? 0, peak)
                anonymous[workload.server.name] = max(anonymous[workload.server.name] ?? 0, sampler.anonymous)
                // Which measure brings the largest memory: progress on stderr, not in the table.
                FileHandle.standardError.write(
                    Data(
                        """
                          \(workload.server.name), \(measure.figures[0].name): at most \(peak / 1_048_576) MiB resident, \
                        \(sampler.anonymous / 1_048_576) MiB anonymous

                        """.utf8))
                for (index, value) in values.enumerated() where index < rows.count {
                    rows[index].values[workload.server.name] = value
                }
            }
            for row in rows { table.add(row) }
        }
        var rss = CompareTable.Row(
            figure: CompareFigure("server RSS, largest during the run", unit: "MiB", better: .lower, target: 3))
        var own = CompareTable.Row(
            figure: CompareFigure("server anonymous memory (RssAnon), largest", unit: "MiB", better: .lower))
        for side in sides {
            rss.values[side.name] = Double(memory[side.name] ?? 0) / 1_048_576
            own.values[side.name] = Double(anonymous[side.name] ?? 0) / 1_048_576
        }
        table.add(rss)
        table.add(own)
        let geos = (geoPoints.isEmpty ? [quick ? 10_000 : 100_000] : geoPoints).map {
            CompareGeo(points: $0, queries: geoQueries ?? (quick ? 2_000 : 20_000))
        }
        for geo in geos where only.isEmpty || only.contains("geo") {
            let (points, centres) = geo.data()
            var rows = geo.figures.map { CompareTable.Row(figure: $0) }
            for (index, value) in try await geo.measureLT(workloads[0], points, centres).enumerated() {
                rows[index].values["lt"] = value
            }
            if let postgis {
                for (index, value) in try geo.measurePostGIS(postgis, points, centres, scratch: scratch).enumerated() {
                    rows[index].values["PostGIS"] = value
                }
            }
            for row in rows { table.add(row) }
        }
        for side in sides { try await side.cleanUp() }
        try table.finish(json: json, context: ["header": header.json])
    }
}

/// The sizes of one comparison.
struct CompareScale: Sendable {
    let documents: Int
    let puts: Int
    let listeners: Int
    /// Writes the writer makes while the longpoll listeners wait.
    let feedWrites: Int
}

/// One server of the comparison: how to reach it and its process.
struct ComparedServer: Sendable {
    let name: String
    let target: Bench.Target
    let pid: Int32

    var client: Bench.Client {
        get throws { try Bench.Client(base: target.base, authorization: target.authorization) }
    }

    /// Deletes the comparison's databases (`cmp-*`).
    func cleanUp() async throws {
        let names = try JSON.parse(try await client.send("GET", "/_all_dbs", expect: 200)).arrayValue ?? []
        for name in names.compactMap(\.stringValue) where name.hasPrefix("cmp-") {
            try await client.send("DELETE", "/\(name)", expect: 200)
        }
    }
}

/// What a figure measures and which way is better; `target` is the advantage lt should have
/// (e.g. 5 for "at least 5 times CouchDB's rate", 3 for "at most a third of its memory").
struct CompareFigure: Sendable {
    enum Better: Sendable { case higher, lower }
    let name: String
    let unit: String
    let better: Better
    let target: Double?

    init(_ name: String, unit: String, better: Better = .higher, target: Double? = nil) {
        (self.name, self.unit, self.better, self.target) = (name, unit, better, target)
    }
}

/// The figures as they come: one row per figure, a column per server, and lt's advantage.
struct CompareTable {
    struct Row {
        let figure: CompareFigure
        var values: [String: Double] = [:]

        /// lt's advantage over CouchDB (or PostGIS, for the geo rows): its
        /// rate divided by the other's, or the other's latency or memory divided by its own;
        /// above 1 is better.
        var advantage: Double? {
            // Against CouchDB where it has a value, else PostGIS (the geo rows); never against
            // a third column such as lt in cluster mode.
            guard let lt = values["lt"], let other = values["CouchDB"] ?? values["PostGIS"], lt > 0, other > 0 else {
                return nil
            }
            return figure.better == .higher ? lt / other : other / lt
        }

        var json: JSON {
            var object: JSONObject = ["figure": .string(figure.name), "unit": .string(figure.unit)]
            for (name, value) in values { object[name.lowercased()] = .double(value) }
            if let advantage { object["advantage"] = .double(advantage) }
            if let target = figure.target { object["target"] = .double(target) }
            return .object(object)
        }
    }

    let sides: [String]
    private(set) var rows: [Row] = []

    func printHeading() {
        var line = "figure".padding(toLength: 62, withPad: " ", startingAt: 0)
        for side in sides { line += side.leftPadded(14) }
        if sides.count > 1 { line += "  lt's advantage (target)" }
        print(line)
    }

    mutating func add(_ row: Row) {
        rows.append(row)
        var line = "\(row.figure.name) (\(row.figure.unit))".padding(toLength: 62, withPad: " ", startingAt: 0)
        for side in sides { line += (row.values[side].map { Self.format($0) } ?? "—").leftPadded(14) }
        if let advantage = row.advantage {
            line += String(format: "  %6.2f×", advantage)
            if let target = row.figure.target {
                line += String(format: " (≥ %g× %@)", target, advantage >= target ? "met" : "not met")
            }
        }
        print(line)
    }

    /// Prints the load average at the end and, if asked, writes the figures with `context`
    /// (what was measured, on what) as JSON to the file `json`.
    func finish(json: String?, context: JSONObject) throws {
        let load = CompareHeader.loadAverage()
        print("load average at the end: \(load)")
        guard let json else { return }
        var figures = context
        figures["figures"] = .array(rows.map(\.json))
        figures["load_average_end"] = .string(load)
        try Data(JSON.object(figures).bytes).write(to: URL(fileURLWithPath: json))
        print("figures written to \(json)")
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? " " + self : String(repeating: " ", count: width - count) + self
    }
}

/// The header of a comparison: the machine, its load, how lt was built, what CouchDB says it is.
struct CompareHeader {
    let text: String
    let json: JSON

    init(sides: [ComparedServer], lt: LTServeProcess, scale: CompareScale) async throws {
        let cpu =
            (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?
            .trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let machine =
            "\(ProcessInfo.processInfo.activeProcessorCount) cores (\(cpu)), \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB"
        let build =
            "lt built with \(Allocator.description), JavaScript \(ServerResources.javascriptQueryServer() == nil ? "off" : "on")"
        var versions: [String] = []
        for side in sides.dropFirst() {
            let welcome = try JSON.parse(try await side.client.send("GET", "/", expect: 200))
            versions.append("\(side.name) \(welcome["version"]?.stringValue ?? "?") at \(side.target.base)")
        }
        let load = Self.loadAverage()
        text = """
            lt-bench compare: \(scale.documents) location documents, \(scale.puts) PUTs, \(scale.listeners) longpoll listeners
            machine: \(machine); load average at the start: \(load)
            \(build); lt serve pid \(lt.pid) (durable, database API only)\(versions.isEmpty ? "" : "; " + versions.joined(separator: "; "))
            """
        json = [
            "machine": .string(machine), "build": .string(build), "servers": .array(versions.map(JSON.string)),
            "load_average_start": .string(load), "documents": .int(scale.documents), "puts": .int(scale.puts),
            "listeners": .int(scale.listeners),
        ]
    }

    /// /proc/loadavg's three averages.
    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).joined(
            separator: " ")
    }
}
