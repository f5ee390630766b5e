import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import GRDB
import JavaScript
import Hummingbird
import Logging
import Replication

/// `lt-bench`: measures the database API over HTTP, with raw SQLite inserts of the same JSON in
/// one transaction as the ceiling, measured in the same run. Prints medians and ratios.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "database",
        abstract: "Measure the database API over HTTP against a raw SQLite baseline.",
        discussion:
            "Without --url, starts a server in this process on an ephemeral port with a temporary data directory.")

    @Option(help: "Server to measure, e.g. http://admin:secret@127.0.0.1:5984 (default: an in-process server).")
    var url: String?

    @Option(help: "Documents for the bulk, changes and all_docs measurements.")
    var docs = 100_000

    @Option(name: .customLong("puts"), help: "Documents written with single PUTs.")
    var puts = 20_000

    @Option(help: "Repetitions of each measurement; the median is reported.")
    var runs = 3

    @Option(help: "full or normal (only for the in-process server).")
    var durability = "full"

    func run() async throws {
        ProcessSetup.runTasksOnEventLoops()
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("lt-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (target, serverTask) = try await server(scratch)
        defer { serverTask?.cancel() }
        let w = try Workload(target: target, documents: (0..<docs).map(Bench.locationDocument), scratch: scratch)
        let averageSize = w.bodies.reduce(0) { $0 + $1.count } / max(1, w.bodies.count)
        print(
            "lt-bench database: \(docs) location documents of ~\(averageSize) bytes; server \(url == nil ? "in-process (durability \(durability))" : target.base); median of \(runs) runs"
        )

        let (sqlite, sqliteRead) = try ceilings(w)
        try await engineUpdates(w, ceiling: sqlite)
        let bulk = try await bulkDocs(w, ceiling: sqlite)
        try await singlePuts(w, ceiling: sqlite)
        let allDocsRate = try await fullReads(w, ceiling: sqliteRead)
        try await replication(w, bulk: bulk)
        try await databaseCreation(w)
        try await javascriptView(w, allDocsRate: allDocsRate)
        try await validatedBulkDocs(w, bulk: bulk)
        try await indexedFind(w)
    }

    /// The server measured and how to reach it: `--url`, or one started in this process.
    struct Target: Sendable {
        var base: String
        var user: String?
        var password: String?

        init(base: String, user: String?, password: String?) {
            (self.base, self.user, self.password) = (base, user, password)
        }

        /// A server's URL with its credentials in it, e.g. http://admin:secret@127.0.0.1:5984.
        init(url: String) throws {
            guard var components = URLComponents(string: url), components.host != nil else {
                throw ValidationError("Cannot parse the URL \(url)")
            }
            (user, password) = (components.user, components.password)
            components.user = nil
            components.password = nil
            base = (components.string ?? url).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        }

        /// The `Authorization` header of its credentials ("" without).
        var authorization: String {
            guard let user, let password else { return "" }
            return "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
    }

    /// What every measurement shares: the server, a client of it, the documents (as JSON, as
    /// bodies, and in `_bulk_docs` batches of 1,000) and a scratch directory.
    struct Workload: Sendable {
        let target: Target
        let client: Client
        let documents: [JSON]
        let bodies: [[UInt8]]
        let batches: [[UInt8]]
        let scratch: URL

        init(target: Target, documents: [JSON], scratch: URL) throws {
            self.target = target
            client = try Client(base: target.base, authorization: target.authorization)
            self.documents = documents
            bodies = documents.map(\.bytes)
            batches = stride(from: 0, to: documents.count, by: 1000).map {
                JSON.object(["docs": .array(Array(documents[$0..<min($0 + 1000, documents.count)]))]).bytes
            }
            self.scratch = scratch
        }
    }

    /// The server to measure: `--url` (credentials taken out of it), or one started in this
    /// process on an ephemeral port, with its task.
    func server(_ scratch: URL) async throws -> (Target, Task<Void, any Error>?) {
        guard let url else {
            let (task, port) = try await startServer(scratch.appendingPathComponent("server"))
            guard port > 0 else { throw ValidationError("the in-process server did not report its port") }
            return (Target(base: "http://127.0.0.1:\(port)", user: "bench", password: "bench-password"), task)
        }
        return (try Target(url: url), nil)
    }

    /// The ceilings: raw SQLite inserting the same JSON in one transaction, and reading the
    /// same rows back in key order.
    func ceilings(_ w: Workload) throws -> (insert: Double, read: Double) {
        // Ceiling: raw SQLite inserts of the same JSON in one transaction.
        let sqlite = try median(runs) { run in
            let path = w.scratch.appendingPathComponent("raw-\(run).sqlite").path
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute(sql: "CREATE TABLE docs(id TEXT PRIMARY KEY, body BLOB)") }
            let start = ContinuousClock.now
            try queue.write { db in
                let statement = try db.makeStatement(sql: "INSERT INTO docs(id, body) VALUES (?, ?)")
                for (i, body) in w.bodies.enumerated() {
                    try statement.execute(arguments: [w.documents[i]["_id"]!.stringValue!, Data(body)])
                }
            }
            return Double(w.bodies.count) / start.duration(to: .now).seconds
        }
        report("raw SQLite inserts, one transaction (ceiling)", sqlite, unit: "docs/s")
        // Ceiling for the full reads: raw SQLite reading the same rows back in key order.
        let sqliteRead = try median(runs) { run in
            let queue = try DatabaseQueue(path: w.scratch.appendingPathComponent("raw-\(run).sqlite").path)
            let start = ContinuousClock.now
            let count = try queue.read { db -> Int in
                var count = 0
                let cursor = try Row.fetchCursor(db, sql: "SELECT id, body FROM docs ORDER BY id")
                while let row = try cursor.next() {
                    let body: Data = row[1]
                    count += body.isEmpty ? 0 : 1
                }
                return count
            }
            return Double(count) / start.duration(to: .now).seconds
        }
        report("raw SQLite full read in key order (ceiling)", sqliteRead, unit: "rows/s")
        return (sqlite, sqliteRead)
    }

    /// The engine alone (no HTTP): the same batches through `DocumentDatabase.update`.
    func engineUpdates(_ w: Workload, ceiling: Double) async throws {
        let engineStore = try DatabaseStore(
            directory: w.scratch.appendingPathComponent("engine"), durability: try Durability.option(durability))
        let engine = try await medianAsync(runs) { run in
            let db = try await engineStore.create("engine\(run)")
            let inputs = try w.documents.map { try DocumentInput(json: $0) }
            let start = ContinuousClock.now
            for batch in stride(from: 0, to: inputs.count, by: 1000) {
                _ = try await db.update(
                    Array(inputs[batch..<min(batch + 1000, inputs.count)]), newEdits: true, user: .system)
            }
            return Double(inputs.count) / start.duration(to: .now).seconds
        }
        report("engine DocumentDatabase.update, batches of 1,000", engine, unit: "docs/s", ceiling: ceiling)
    }

    /// `_bulk_docs`, batches of 1,000, 4 clients.
    func bulkDocs(_ w: Workload, ceiling: Double) async throws -> Double {
        let bulk = try await medianAsync(runs) { run in
            let db = "bulk\(run)"
            try await w.client.send("PUT", "/\(db)", expect: 201)
            let start = ContinuousClock.now
            try await w.client.concurrently(4, w.batches.count) { connection, i in
                let reply = try connection.send(
                    "POST", "/\(db)/_bulk_docs", authorization: w.client.authorization, body: w.batches[i])
                try Client.check(reply, 201, "POST", "_bulk_docs")
            }
            return Double(w.documents.count) / start.duration(to: .now).seconds
        }
        report("_bulk_docs, batches of 1,000, 4 clients", bulk, unit: "docs/s", ceiling: ceiling)
        return bulk
    }

    /// Single-document PUTs, 8 clients.
    func singlePuts(_ w: Workload, ceiling: Double) async throws {
        let single = try await medianAsync(runs) { run in
            let db = "puts\(run)"
            try await w.client.send("PUT", "/\(db)", expect: 201)
            let count = min(puts, w.documents.count)
            let requests = w.documents.prefix(count).map { document -> (String, [UInt8]) in
                var doc = document.objectValue!
                let id = doc.removeValue(forKey: "_id")!.stringValue!
                return ("/\(db)/\(id)", JSON.object(doc).bytes)
            }
            let start = ContinuousClock.now
            try await w.client.concurrently(8, count) { connection, i in
                let reply = try connection.send(
                    "PUT", requests[i].0, authorization: w.client.authorization, body: requests[i].1)
                try Client.check(reply, 201, "PUT", requests[i].0)
            }
            return Double(count) / start.duration(to: .now).seconds
        }
        report("single-document PUT, 8 clients", single, unit: "docs/s", ceiling: ceiling)
    }

    /// Full reads of the bulk-loaded database (`_changes`, `_all_docs?include_docs=true`).
    func fullReads(_ w: Workload, ceiling: Double) async throws -> Double {
        // Full reads of the bulk-loaded database; the clock stops when the response is in,
        // the client's parsing (to check the row count) is not timed.
        func fullRead(_ path: String, rowsKey: String) async throws -> Double {
            try await medianAsync(runs) { _ in
                let start = ContinuousClock.now
                let reply = try await w.client.send("GET", path, expect: 200)
                let elapsed = start.duration(to: .now).seconds
                let rows = try JSON.parse(reply)[rowsKey]?.arrayValue?.count ?? 0
                guard rows == w.documents.count else { throw ValidationError("\(path) returned \(rows) rows") }
                return Double(rows) / elapsed
            }
        }
        report(
            "_changes, full read", try await fullRead("/bulk0/_changes", rowsKey: "results"),
            unit: "rows/s", ceiling: ceiling, baseline: "raw SQLite read")
        let allDocsRate = try await fullRead("/bulk0/_all_docs?include_docs=true", rowsKey: "rows")
        report(
            "_all_docs?include_docs=true, full read", allDocsRate, unit: "rows/s", ceiling: ceiling,
            baseline: "raw SQLite read")
        return allDocsRate
    }

    /// Replication through the replicator over HTTP.
    func replication(_ w: Workload, bulk: Double) async throws {
        // Replication: pull everything into a fresh local database, then push it to an empty
        // server database, through the replicator over HTTP.
        let replicationStore = try DatabaseStore(directory: w.scratch.appendingPathComponent("replicas"))
        func replicationRate(
            _ endpoints: (Int) throws -> (any ReplicationEndpoint, any ReplicationEndpoint)
        ) async throws -> Double {
            try await medianAsync(runs) { run in
                let (source, target) = try endpoints(run)
                var options = ReplicationOptions()
                options.createTarget = true
                let start = ContinuousClock.now
                let result = try await Replication(source: source, target: target, options: options).run()
                guard result.status.docsWritten == w.documents.count else {
                    throw ValidationError("replication wrote \(result.status.docsWritten) of \(w.documents.count)")
                }
                return Double(w.documents.count) / start.duration(to: .now).seconds
            }
        }
        let pull = try await replicationRate { run in
            (
                try RemoteEndpoint(url: "\(w.target.base)/bulk0", username: w.target.user, password: w.target.password),
                LocalEndpoint(store: replicationStore, name: "pulled\(run)")
            )
        }
        report(
            "replication pull, server → new local database", pull, unit: "docs/s", ceiling: bulk, baseline: "_bulk_docs"
        )
        let push = try await replicationRate { run in
            (
                LocalEndpoint(store: replicationStore, name: "pulled0"),
                try RemoteEndpoint(
                    url: "\(w.target.base)/pushed\(run)", username: w.target.user, password: w.target.password)
            )
        }
        report(
            "replication push, local → empty server database", push, unit: "docs/s", ceiling: bulk,
            baseline: "_bulk_docs")
    }

    /// Per-user databases: creation over HTTP.
    func databaseCreation(_ w: Workload) async throws {
        // Per-user databases: creation over HTTP (one SQLite file each, WAL, full schema).
        let creations = 500
        let creation = try await medianAsync(runs) { run in
            let start = ContinuousClock.now
            try await w.client.concurrently(1, creations) { connection, i in
                let reply = try connection.send("PUT", "/userdb-\(run)-\(i)", authorization: w.client.authorization)
                try Client.check(reply, 201, "PUT", "/userdb-\(run)-\(i)")
            }
            return Double(creations) / start.duration(to: .now).seconds
        }
        report("database creation (PUT /{db}), 1 client", creation, unit: "dbs/s")
    }

    /// A JavaScript view: building a `_count`-reduced index over every document, then queries.
    func javascriptView(_ w: Workload, allDocsRate: Double) async throws {
        try await w.client.send(
            "PUT", "/bulk0/_design/bench",
            json: [
                "views": [
                    "by_user": [
                        "map": "function (doc) { if (doc.properties) { emit(doc.properties.username, null); } }",
                        "reduce": "_count",
                    ]
                ]
            ], expect: 201)
        let viewStart = ContinuousClock.now
        let built = try await w.client.send("GET", "/bulk0/_design/bench/_view/by_user", expect: 200)
        if (try JSON.parse(built))["rows"]?[0]?["value"]?.intValue == w.documents.count {
            report(
                "JavaScript view build (_count), all documents",
                Double(w.documents.count) / viewStart.duration(to: .now).seconds,
                unit: "docs/s", ceiling: allDocsRate, baseline: "_all_docs read")
            let viewQueries = try await medianAsync(runs) { _ in
                let start = ContinuousClock.now
                try await w.client.concurrently(1, 200) { connection, q in
                    let reply = try connection.send(
                        "GET", "/bulk0/_design/bench/_view/by_user?key=%22user\(q % 50)%22",
                        authorization: w.client.authorization)
                    try Client.check(reply, 200, "GET", "_view")
                }
                return 200 / start.duration(to: .now).seconds
            }
            report("JavaScript view query (one key, reduced)", viewQueries, unit: "queries/s")
        } else {
            print("JavaScript view: not measured (\(String(decoding: built.prefix(200), as: UTF8.self)))")
        }
    }

    /// `_bulk_docs` into a database whose design document validates every write.
    func validatedBulkDocs(_ w: Workload, bulk: Double) async throws {
        try await w.client.send("PUT", "/validated", expect: 201)
        try await w.client.send(
            "PUT", "/validated/_design/rules",
            json: [
                "validate_doc_update": """
                function (newDoc, oldDoc, userCtx) {
                    if (!newDoc._deleted && !(newDoc.properties && typeof newDoc.properties.username === "string")) {
                        throw({forbidden: "properties.username is required"});
                    }
                }
                """
            ], expect: 201)
        let validatedStart = ContinuousClock.now
        try await w.client.concurrently(4, w.batches.count) { connection, i in
            let reply = try connection.send(
                "POST", "/validated/_bulk_docs", authorization: w.client.authorization, body: w.batches[i])
            try Client.check(reply, 201, "POST", "_bulk_docs")
            guard !String(decoding: reply.body, as: UTF8.self).contains("\"error\"") else {
                throw ValidationError("a valid document was rejected")
            }
        }
        report(
            "_bulk_docs + validate_doc_update, 4 clients",
            Double(w.documents.count) / validatedStart.duration(to: .now).seconds, unit: "docs/s", ceiling: bulk,
            baseline: "_bulk_docs")
    }

    /// A selective `_find` with a JSON index on the queried field.
    func indexedFind(_ w: Workload) async throws {
        try await w.client.send(
            "POST", "/bulk0/_index", json: ["index": ["fields": ["properties.username"]], "name": "by-user"],
            expect: 200)
        // The first query builds the index; the measurement is of queries on a built index.
        let buildStart = ContinuousClock.now
        try await w.client.send(
            "POST", "/bulk0/_find", json: ["selector": ["properties.username": "user0"], "limit": 1], expect: 200)
        report(
            "building the index over all documents", Double(w.documents.count) / buildStart.duration(to: .now).seconds,
            unit: "docs/s")
        let queries = (0..<200).map { q in
            JSON.object(["selector": ["properties.username": .string("user\(q % 50)")], "limit": 25]).bytes
        }
        let find = try await medianAsync(runs) { _ in
            let start = ContinuousClock.now
            try await w.client.concurrently(1, queries.count) { connection, q in
                let reply = try connection.send(
                    "POST", "/bulk0/_find", authorization: w.client.authorization, body: queries[q])
                try Client.check(reply, 200, "POST", "_find")
                guard (try JSON.parse(reply.body)["docs"]?.arrayValue?.count ?? 0) == 25 else {
                    throw ValidationError("_find found too little")
                }
            }
            return Double(queries.count) / start.duration(to: .now).seconds
        }
        report("indexed _find (1 of 50 users, limit 25)", find, unit: "queries/s")
    }

    /// A location document shaped like the tracker app's (~250 bytes).
    static func locationDocument(_ i: Int) -> JSON {
        let lat = 37.3318 + Double(i % 1000) * 0.0007
        let lon = -122.0312 - Double(i % 997) * 0.0005
        return [
            "_id": .string(String(format: "loc-%08d", i)),
            "type": "Feature",
            "created_at": .double(1_700_000_000_000 + Double(i) * 15_000),
            "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]],
            "properties": [
                "username": .string("user\(i % 50)"),
                "timestamp": .double(1_700_000_000_000 + Double(i) * 15_000),
                "background": .bool(i % 3 == 0),
                "session_id": .string("s-\(i / 500)"),
                "accuracy": .double(5 + Double(i % 20)),
            ],
        ]
    }

    func report(
        _ what: String, _ value: Double, unit: String, ceiling: Double? = nil, baseline: String = "raw SQLite inserts"
    ) {
        var line = what.padding(toLength: 48, withPad: " ", startingAt: 0) + String(format: "%12.0f %@", value, unit)
        if let ceiling { line += String(format: "   (%.2f× %@)", value / ceiling, baseline) }
        print(line)
    }

    func median(_ runs: Int, _ body: (Int) throws -> Double) throws -> Double {
        let values = try sortedRuns(runs, body)
        return values[values.count / 2]
    }

    /// Every run's value (at least one run), smallest first.
    func sortedRuns(_ runs: Int, _ body: (Int) throws -> Double) rethrows -> [Double] {
        var values: [Double] = []
        for run in 0..<max(1, runs) { values.append(try body(run)) }
        return values.sorted()
    }

    func medianAsync(_ runs: Int, _ body: (Int) async throws -> Double) async throws -> Double {
        var values: [Double] = []
        for run in 0..<max(1, runs) { values.append(try await body(run)) }
        return values.sorted()[values.count / 2]
    }

    /// Runs the database API in this process on an ephemeral port.
    func startServer(_ directory: URL) async throws -> (Task<Void, any Error>, Int) {
        let mode = try Durability.option(durability)
        var settings = try ServerSettings.load(from: directory.deletingLastPathComponent())
        settings.admins["bench"] = try await Passwords.hash("bench-password")
        var options = CouchAPI.Options()
        options.javascript = ServerResources.javascriptQueryServer()
        let store = try DatabaseStore(
            directory: directory, durability: mode, validator: DesignDocumentValidator(queryServer: options.javascript))
        let api = CouchAPI(store: store, settings: settings, options: options, logger: Logger(label: "lt.bench"))
        try await api.prepareSystemDatabases()
        let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
        // The server is stopped by cancelling its task, which it would log as an error.
        var serverLogger = Logger(label: "lt.bench")
        serverLogger.logLevel = .critical
        let app = Application(
            responder: api.responder,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) },
            logger: serverLogger)
        let task = Task { try await app.run() }
        var iterator = portStream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw ValidationError("server did not start") }
        return (task, port)
    }

    /// The benchmark's HTTP client: plain keep-alive connections on their own threads.
    struct Client: Sendable {
        let host: String
        let port: Int
        let authorization: String

        init(base: String, authorization: String) throws {
            guard let components = URLComponents(string: base), let host = components.host else {
                throw ValidationError("Cannot parse server URL \(base)")
            }
            self.host = host
            self.port = components.port ?? 80
            self.authorization = authorization
        }

        static func check(_ reply: (status: Int, body: [UInt8]), _ expect: Int, _ method: String, _ path: String) throws
        {
            guard reply.status == expect || (expect == 200 && reply.status == 201) else {
                throw ValidationError(
                    "\(method) \(path): \(reply.status) \(String(decoding: reply.body.prefix(300), as: UTF8.self))")
            }
        }

        /// One request on a fresh connection.
        @discardableResult
        func send(_ method: String, _ path: String, json: JSON? = nil, expect: Int) async throws -> [UInt8] {
            let result = Locked<[UInt8]>([])
            try await concurrently(1, 1) { connection, _ in
                let reply = try connection.send(method, path, authorization: authorization, body: json?.bytes)
                try Client.check(reply, expect, method, path)
                result.withLock { $0 = reply.body }
            }
            return result.withLock { $0 }
        }

        /// Runs `count` jobs on `width` threads, each with its own connection; the first
        /// failure stops them and is thrown.
        func concurrently(
            _ width: Int, _ count: Int, _ job: @escaping @Sendable (BenchConnection, Int) throws -> Void
        ) async throws {
            let next = Locked(0)
            let failed = Locked(false)
            let (host, port) = (self.host, self.port)
            try await Bench.onThreads(width) { _ in
                do {
                    let connection = try BenchConnection(host: host, port: port)
                    while !failed.withLock({ $0 }) {
                        let i = next.withLock { value -> Int in
                            defer { value += 1 }
                            return value
                        }
                        if i >= count { return }
                        try job(connection, i)
                    }
                } catch {
                    failed.withLock { $0 = true }
                    throw error
                }
            }
        }
    }
}

extension Bench {
    /// Runs `count` blocking bodies, each on a thread of its own (load generators, listeners
    /// holding a request open), and waits for all; the first failure is thrown.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) async throws {
        let failure = Locked<(any Error)?>(nil)
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<count {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        Thread.detachNewThread {
                            defer { continuation.resume() }
                            do { try body(i) } catch { failure.withLock { $0 = $0 ?? error } }
                        }
                    }
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
