import ArgumentParser
import CouchEngine
import CouchJSON
import Foundation
import TrackerKit

/// The workload of `lt-bench compare`, run the same way against each server: what a device
/// fleet and the tracker's server ask of a CouchDB (bulk loads, single writes, feeds, a device's
/// pull, replication's revision check, Mango, a JavaScript view, photos, longpoll listeners).
/// Each measurement answers one or more figures; the clock covers the requests and the
/// client's reading of the answers, not the set-up before them.
struct CompareWorkload: Sendable {
    let server: ComparedServer
    let client: Bench.Client
    let documents: [JSON]
    let batches: [[UInt8]]
    let scale: CompareScale

    init(server: ComparedServer, documents: [JSON], scale: CompareScale) throws {
        self.server = server
        client = try server.client
        self.documents = documents
        batches = stride(from: 0, to: documents.count, by: 1000).map {
            JSON.object(["docs": .array(Array(documents[$0..<min($0 + 1000, documents.count)]))]).bytes
        }
        self.scale = scale
    }

    var authorization: String { client.authorization }

    /// One measurement: the figures it answers and how to take them.
    struct Measure: Sendable {
        let figures: [CompareFigure]
        let run: @Sendable (CompareWorkload) async throws -> [Double]
    }

    /// Every measurement, in the order they run (later ones read what `bulk` loaded).
    static let measures: [Measure] = [
        Measure(figures: [CompareFigure("_bulk_docs, 1,000 per batch, 4 clients", unit: "docs/s", target: 5)]) {
            try await [$0.bulkDocs()]
        },
        Measure(figures: [
            CompareFigure("_bulk_docs without ids (server-assigned), same shape", unit: "docs/s", target: 3)
        ]) {
            try await [$0.bulkDocsWithoutIDs()]
        },
        Measure(figures: [CompareFigure("single-document PUT, 8 clients, durable", unit: "docs/s", target: 15)]) {
            try await [$0.singlePuts()]
        },
        Measure(figures: [CompareFigure("_changes, whole feed", unit: "rows/s", target: 10)]) {
            try await [$0.fullRead("/cmp-bulk/_changes", rows: "results")]
        },
        Measure(figures: [CompareFigure("_changes?include_docs=true, whole feed", unit: "rows/s", target: 10)]) {
            try await [$0.fullRead("/cmp-bulk/_changes?include_docs=true", rows: "results")]
        },
        Measure(figures: [CompareFigure("_all_docs?include_docs=true, whole", unit: "rows/s", target: 10)]) {
            try await [$0.fullRead("/cmp-bulk/_all_docs?include_docs=true", rows: "rows")]
        },
        Measure(figures: [CompareFigure("device pull: _changes + _bulk_get, 500 a batch", unit: "docs/s", target: 5)]) {
            try await [$0.devicePull()]
        },
        Measure(figures: [CompareFigure("_revs_diff, 1,000 documents a request", unit: "docs/s", target: 5)]) {
            try await [$0.revsDiff()]
        },
        Measure(figures: [
            CompareFigure("Mango index build (first query)", unit: "docs/s"),
            CompareFigure("Mango _find, indexed, limit 100", unit: "queries/s", target: 20),
        ]) { try await $0.mango() },
        Measure(figures: [
            CompareFigure("JavaScript view build (_count)", unit: "docs/s"),
            CompareFigure("JavaScript view query, one key, reduced", unit: "queries/s"),
            CompareFigure("JavaScript view query, one key, rows (limit 10)", unit: "queries/s"),
        ]) { try await $0.javascriptView() },
        Measure(figures: [
            CompareFigure("1 MB photo attachment PUT, 4 clients", unit: "MB/s"),
            CompareFigure("1 MB photo attachment GET, 4 clients", unit: "MB/s"),
        ]) { try await $0.photos() },
        Measure(figures: [
            CompareFigure("longpoll listeners: change seen, p50", unit: "ms", better: .lower),
            CompareFigure("longpoll listeners: change seen, p99 (target ≤ 20 ms)", unit: "ms", better: .lower),
            CompareFigure("writer's PUT with the listeners, p50", unit: "ms", better: .lower),
            CompareFigure("writer's PUT alone, p50", unit: "ms", better: .lower),
        ]) { try await $0.longpollListeners() },
        Measure(figures: [
            CompareFigure("database file with every document updated once", unit: "MiB", better: .lower),
            CompareFigure("the same file after _compact", unit: "MiB", better: .lower),
            CompareFigure("_compact, start to finish", unit: "s", better: .lower),
            CompareFigure("a writer's PUT during _compact, p99", unit: "ms", better: .lower),
        ]) { try await $0.compaction() },
    ]

    // MARK: Writes

    func bulkDocs() async throws -> Double {
        try await timedBulkLoad(into: "cmp-bulk", batches)
    }

    /// The same batches without `_id`, as a device or a script that lets the server name its
    /// documents sends them (CouchDB's `[uuids] algorithm`), into a database of their own.
    func bulkDocsWithoutIDs() async throws -> Double {
        let anonymous = stride(from: 0, to: documents.count, by: 1000).map { first -> [UInt8] in
            let docs = documents[first..<min(first + 1000, documents.count)].map { document -> JSON in
                var body = document.objectValue ?? [:]
                body.removeValue(forKey: "_id")
                return .object(body)
            }
            return JSON.object(["docs": .array(docs)]).bytes
        }
        return try await timedBulkLoad(into: "cmp-noid", anonymous)
    }

    /// Creates `db` and posts `bodies` to its `_bulk_docs` from 4 clients: documents a second.
    private func timedBulkLoad(into db: String, _ bodies: [[UInt8]]) async throws -> Double {
        try await client.send("PUT", "/\(db)", expect: 201)
        let start = ContinuousClock.now
        try await client.concurrently(4, bodies.count) { connection, i in
            let reply = try connection.send("POST", "/\(db)/_bulk_docs", authorization: authorization, body: bodies[i])
            try Bench.Client.check(reply, 201, "POST", "_bulk_docs")
        }
        return Double(documents.count) / start.duration(to: .now).seconds
    }

    func singlePuts() async throws -> Double {
        try await client.send("PUT", "/cmp-puts", expect: 201)
        let requests = documents.prefix(scale.puts).map { document -> (String, [UInt8]) in
            var body = document.objectValue ?? [:]
            let id = body.removeValue(forKey: "_id")?.stringValue ?? ""
            return ("/cmp-puts/\(id)", JSON.object(body).bytes)
        }
        let start = ContinuousClock.now
        try await client.concurrently(8, requests.count) { connection, i in
            let reply = try connection.send("PUT", requests[i].0, authorization: authorization, body: requests[i].1)
            try Bench.Client.check(reply, 201, "PUT", requests[i].0)
        }
        return Double(requests.count) / start.duration(to: .now).seconds
    }

    // MARK: Compaction

    /// Every document of the bulk load updated once (its first body becomes an old revision's),
    /// then `_compact` timed from the request until the database no longer says
    /// `compact_running`, while one client writes new documents and times each PUT.
    func compaction() async throws -> [Double] {
        let rows =
            try JSON.parse(try await client.send("GET", "/cmp-bulk/_all_docs", expect: 200))["rows"]?.arrayValue ?? []
        let updates: [[UInt8]] = stride(from: 0, to: rows.count, by: 1000).map { first in
            JSON.object([
                "docs": .array(
                    rows[first..<min(first + 1000, rows.count)].enumerated().compactMap { offset, row in
                        // Documents the server holds beyond those loaded (it may have more) are left alone.
                        guard first + offset < documents.count, let id = row["id"]?.stringValue,
                            let rev = row["value"]?["rev"],
                            var body = documents[first + offset].objectValue
                        else { return nil }
                        body["_id"] = .string(id)
                        body["_rev"] = rev
                        body["updated"] = true
                        return .object(body)
                    })
            ]).bytes
        }
        try await client.concurrently(4, updates.count) { connection, i in
            try Bench.Client.check(
                connection.send("POST", "/cmp-bulk/_bulk_docs", authorization: authorization, body: updates[i]), 201,
                "POST", "_bulk_docs")
        }
        func fileMiB() async throws -> Double {
            Double(
                try JSON.parse(try await client.send("GET", "/cmp-bulk", expect: 200))["sizes"]?["file"]?.intValue ?? 0)
                / 1_048_576
        }
        let before = try await fileMiB()
        let writing = Locked(true)
        let latencies = Locked<[Double]>([])
        let writer = Task { [client, authorization] in
            try await Bench.onThreads(1) { _ in
                let connection = try BenchConnection(host: client.host, port: client.port)
                var n = 0
                while writing.withLock({ $0 }) {
                    let start = ContinuousClock.now
                    try Bench.Client.check(
                        connection.send(
                            "PUT", "/cmp-bulk/during-compaction-\(n)", authorization: authorization,
                            body: Array(#"{"n":1}"#.utf8)),
                        201, "PUT", "during compaction")
                    latencies.withLock { $0.append(start.duration(to: .now).seconds * 1000) }
                    n += 1
                }
            }
        }
        let start = ContinuousClock.now
        try await client.send("POST", "/cmp-bulk/_compact", json: [:], expect: 202)
        // CouchDB may take a moment to say it runs; lt says so before it answers.
        var seenRunning = false
        while true {
            let running =
                try JSON.parse(try await client.send("GET", "/cmp-bulk", expect: 200))["compact_running"] == true
            seenRunning = seenRunning || running
            if !running, seenRunning || start.duration(to: .now) > .seconds(5) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let seconds = start.duration(to: .now).seconds
        writing.withLock { $0 = false }
        try await writer.value
        let sorted = latencies.withLock { $0 }.sorted()
        return [before, try await fileMiB(), seconds, sorted.isEmpty ? 0 : Self.percentile(sorted, 0.99)]
    }

    // MARK: Reads

    /// One request answering every document; its rows counted (outside the clock).
    func fullRead(_ path: String, rows key: String) async throws -> Double {
        let start = ContinuousClock.now
        let reply = try await client.send("GET", path, expect: 200)
        let elapsed = start.duration(to: .now).seconds
        let rows = try JSON.parse(reply)[key]?.arrayValue?.count ?? 0
        guard rows == documents.count else {
            throw ValidationError("\(server.name): \(path) answered \(rows) rows of \(documents.count)")
        }
        return Double(rows) / elapsed
    }

    /// A device's first pull, as PouchDB and TrackerKit do it: the changes in batches, each
    /// batch's revisions fetched with `_bulk_get`, every answer parsed.
    func devicePull() async throws -> Double {
        let pulled = Locked(0)
        let start = ContinuousClock.now
        try await client.concurrently(1, 1) { connection, _ in
            var since = "0"
            while true {
                let changes = try connection.send(
                    "GET", "/cmp-bulk/_changes?style=all_docs&limit=500&since=\(Self.queryValue(since))",
                    authorization: authorization)
                try Bench.Client.check(changes, 200, "GET", "_changes")
                let feed = try JSON.parse(changes.body)
                let results = feed["results"]?.arrayValue ?? []
                if results.isEmpty { break }
                let wanted: [JSON] = results.flatMap { result in
                    (result["changes"]?.arrayValue ?? []).map {
                        ["id": result["id"] ?? .null, "rev": $0["rev"] ?? .null]
                    }
                }
                let reply = try connection.send(
                    "POST", "/cmp-bulk/_bulk_get?revs=true&latest=true", authorization: authorization,
                    body: JSON.object(["docs": .array(wanted)]).bytes)
                try Bench.Client.check(reply, 200, "POST", "_bulk_get")
                let docs = try JSON.parse(reply.body)["results"]?.arrayValue ?? []
                pulled.withLock {
                    $0 += docs.reduce(0) { $0 + ($1["docs"]?.arrayValue?.filter { $0["ok"] != nil }.count ?? 0) }
                }
                since = Self.sequence(feed["last_seq"]) ?? since
            }
        }
        let count = pulled.withLock { $0 }
        guard count == documents.count else {
            throw ValidationError("\(server.name): the pull got \(count) documents of \(documents.count)")
        }
        return Double(count) / start.duration(to: .now).seconds
    }

    /// Replication's question of which revisions the target lacks: every document with its
    /// current revision and one it never had.
    func revsDiff() async throws -> Double {
        let rows =
            try JSON.parse(try await client.send("GET", "/cmp-bulk/_all_docs", expect: 200))["rows"]?.arrayValue ?? []
        let requests: [[UInt8]] = stride(from: 0, to: rows.count, by: 1000).map { first in
            var body = JSONObject()
            for row in rows[first..<min(first + 1000, rows.count)] {
                guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"] else { continue }
                body[id] = [rev, "2-0123456789abcdef0123456789abcdef"]
            }
            return JSON.object(body).bytes
        }
        let start = ContinuousClock.now
        try await client.concurrently(1, requests.count) { connection, i in
            let reply = try connection.send(
                "POST", "/cmp-bulk/_revs_diff", authorization: authorization, body: requests[i])
            try Bench.Client.check(reply, 200, "POST", "_revs_diff")
            guard case let .object(missing) = try JSON.parse(reply.body),
                missing.count == min(1000, rows.count - i * 1000)
            else {
                throw ValidationError("\(server.name): _revs_diff missed revisions")
            }
        }
        return Double(rows.count) / start.duration(to: .now).seconds
    }

    // MARK: Queries

    /// A JSON index on the user name: its build (the first query), then 200 queries of 100.
    func mango() async throws -> [Double] {
        try await client.send(
            "POST", "/cmp-bulk/_index",
            json: ["index": ["fields": ["properties.username"]], "name": "by-user", "type": "json"], expect: 200)
        let buildStart = ContinuousClock.now
        try await client.send(
            "POST", "/cmp-bulk/_find", json: ["selector": ["properties.username": "user0"], "limit": 1], expect: 200)
        let build = Double(documents.count) / buildStart.duration(to: .now).seconds
        let queries = (0..<200).map { q in
            JSON.object(["selector": ["properties.username": .string("user\(q % 50)")], "limit": 100]).bytes
        }
        let expected = min(100, documents.count / 50)
        let start = ContinuousClock.now
        try await client.concurrently(1, queries.count) { connection, q in
            let reply = try connection.send("POST", "/cmp-bulk/_find", authorization: authorization, body: queries[q])
            try Bench.Client.check(reply, 200, "POST", "_find")
            guard try JSON.parse(reply.body)["docs"]?.arrayValue?.count == expected else {
                throw ValidationError("\(server.name): _find found too few")
            }
        }
        return [build, Double(queries.count) / start.duration(to: .now).seconds]
    }

    /// A map function by user with `_count`: its build (the first query), then 200 reduced
    /// queries of one key and 200 of its first 10 rows.
    func javascriptView() async throws -> [Double] {
        try await client.send(
            "PUT", "/cmp-bulk/_design/cmp",
            json: [
                "views": [
                    "by_user": [
                        "map": "function (doc) { if (doc.properties) { emit(doc.properties.username, null); } }",
                        "reduce": "_count",
                    ]
                ]
            ], expect: 201)
        let buildStart = ContinuousClock.now
        let first = try JSON.parse(try await client.send("GET", "/cmp-bulk/_design/cmp/_view/by_user", expect: 200))
        let build = Double(documents.count) / buildStart.duration(to: .now).seconds
        guard first["rows"]?[0]?["value"]?.intValue == documents.count else {
            throw ValidationError("\(server.name): the view counted \(first)")
        }
        let start = ContinuousClock.now
        try await client.concurrently(1, 200) { connection, q in
            let reply = try connection.send(
                "GET", "/cmp-bulk/_design/cmp/_view/by_user?key=%22user\(q % 50)%22", authorization: authorization)
            try Bench.Client.check(reply, 200, "GET", "_view")
        }
        let reduced = 200 / start.duration(to: .now).seconds
        // The rows of one key: the answer's offset is the key's position in the whole index.
        let rowsStart = ContinuousClock.now
        try await client.concurrently(1, 200) { connection, q in
            let reply = try connection.send(
                "GET", "/cmp-bulk/_design/cmp/_view/by_user?key=%22user\(q % 50)%22&reduce=false&limit=10",
                authorization: authorization)
            try Bench.Client.check(reply, 200, "GET", "_view")
            guard try JSON.parse(reply.body)["rows"]?.arrayValue?.count == min(10, documents.count / 50) else {
                throw ValidationError("\(server.name): the view's rows of one key are too few")
            }
        }
        return [build, reduced, 200 / rowsStart.duration(to: .now).seconds]
    }

    // MARK: Attachments

    /// Photos of 1 MB (random bytes, as a JPEG's are to a compressor) written, then read back.
    func photos() async throws -> [Double] {
        try await client.send("PUT", "/cmp-photos", expect: 201)
        var generator = SeededGenerator(seed: 42)
        let photo = (0..<1_048_576).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let count = scale.documents >= 100_000 ? 64 : 16
        let megabytes = Double(count * photo.count) / 1_000_000
        let writeStart = ContinuousClock.now
        try await client.concurrently(4, count) { connection, i in
            let reply = try connection.send(
                "PUT", "/cmp-photos/photo-\(i)/photo.jpg", authorization: authorization, body: photo,
                contentType: "image/jpeg")
            try Bench.Client.check(reply, 201, "PUT", "photo-\(i)")
        }
        let written = megabytes / writeStart.duration(to: .now).seconds
        let readStart = ContinuousClock.now
        try await client.concurrently(4, count) { connection, i in
            let reply = try connection.send("GET", "/cmp-photos/photo-\(i)/photo.jpg", authorization: authorization)
            guard reply.status == 200, reply.body == photo else {
                throw ValidationError("\(server.name): photo-\(i) came back different")
            }
        }
        return [written, megabytes / readStart.duration(to: .now).seconds]
    }

    // MARK: Feeds

    /// Listeners on one database's longpoll feed while a writer writes 40 documents a second:
    /// how long after a write was sent each listener saw it, and how long the writer's PUTs
    /// took with the listeners and without (the same pace, before they start).
    func longpollListeners() async throws -> [Double] {
        try await client.send("PUT", "/cmp-feed", expect: 201)
        let alone = try await pacedWrites(prefix: "alone", count: min(100, scale.feedWrites), sent: nil)
        let sent = Locked<[String: ContinuousClock.Instant]>([:])
        let seen = Locked<[Double]>([])
        let stopping = Locked(false)
        let since =
            try JSON.parse(try await client.send("GET", "/cmp-feed", expect: 200))["update_seq"].flatMap(Self.sequence)
            ?? "0"
        async let listening: Void = Bench.onThreads(scale.listeners) { _ in
            let connection = try BenchConnection(host: client.host, port: client.port)
            var position = since
            while !stopping.withLock({ $0 }) {
                let reply = try connection.send(
                    "GET", "/cmp-feed/_changes?feed=longpoll&timeout=10000&since=\(Self.queryValue(position))",
                    authorization: authorization)
                let arrived = ContinuousClock.now
                try Bench.Client.check(reply, 200, "GET", "longpoll _changes")
                let feed = try JSON.parse(reply.body)
                let lags = (feed["results"]?.arrayValue ?? []).compactMap { result in
                    result["id"]?.stringValue.flatMap { id in sent.withLock { $0[id] } }.map {
                        $0.duration(to: arrived).seconds * 1000
                    }
                }
                seen.withLock { $0 += lags }
                position = Self.sequence(feed["last_seq"]) ?? position
            }
        }
        // The writes, kept aside until the listeners are stopped: they must stop whatever happens.
        let writes: Result<Double, any Error>
        do {
            try await Task.sleep(for: .seconds(1))  // the listeners' first requests in
            writes = .success(try await pacedWrites(prefix: "w", count: scale.feedWrites, sent: sent))
        } catch {
            writes = .failure(error)
        }
        let expected = scale.feedWrites * scale.listeners
        let deadline = ContinuousClock.now + .seconds(10)
        while seen.withLock({ $0.count }) < expected, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        stopping.withLock { $0 = true }
        try await client.send("PUT", "/cmp-feed/stop", json: [:], expect: 201)  // wakes every listener to see it
        try await listening
        let withListeners = try writes.get()
        let lags = seen.withLock { $0 }.sorted()
        guard lags.count == expected else {
            throw ValidationError("\(server.name): listeners saw \(lags.count) of \(expected) changes")
        }
        return [Self.percentile(lags, 0.5), Self.percentile(lags, 0.99), withListeners, alone]
    }

    /// `count` PUTs, one every 25 ms; each one's send time noted in `sent`; the PUTs' p50 in ms.
    func pacedWrites(
        prefix: String, count: Int, sent: Locked<[String: ContinuousClock.Instant]>?
    ) async throws -> Double {
        let latencies = Locked<[Double]>([])
        try await client.concurrently(1, 1) { connection, _ in
            let start = ContinuousClock.now
            for i in 0..<count {
                let due = start + .milliseconds(25 * i)
                if ContinuousClock.now < due {
                    Thread.sleep(forTimeInterval: ContinuousClock.now.duration(to: due).seconds)
                }
                let id = "\(prefix)-\(i)"
                let before = ContinuousClock.now
                sent?.withLock { $0[id] = before }
                let reply = try connection.send(
                    "PUT", "/cmp-feed/\(id)", authorization: authorization, body: Array(#"{"lat":1.5,"lon":2.5}"#.utf8))
                try Bench.Client.check(reply, 201, "PUT", id)
                latencies.withLock { $0.append(before.duration(to: .now).seconds * 1000) }
            }
        }
        return Self.percentile(latencies.withLock { $0 }.sorted(), 0.5)
    }

    // MARK: Helpers

    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    /// A sequence as a client passes it back: CouchDB's are strings, a number is written as one.
    static func sequence(_ value: JSON?) -> String? {
        value.map { $0.stringValue ?? String(decoding: $0.bytes, as: UTF8.self) }
    }

    /// A value for a query string (CouchDB's sequences hold characters a URL may not).
    static func queryValue(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_.~")))
            ?? value
    }
}
