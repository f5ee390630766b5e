import CouchCollation
import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import HTTPServing
import Hummingbird

/// `/_node/{node}/_prometheus`, `_stats` and `_system` (server admins, as in CouchDB): the
/// server's metrics (`ServerMetrics`) in Prometheus' text format, and read back into CouchDB's
/// JSON shapes for the figures this server has. The node is `_local` or this one's name.
struct NodeEndpoints: Sendable {
    let api: CouchAPI
    static let nodeNames: Set<String> = ["_local", "lt@localhost"]

    /// The resource after `/_node/{node}/`.
    func answer(_ path: ArraySlice<String>, _ request: APIRequest) async throws -> APIResponse {
        guard let node = path.first, Self.nodeNames.contains(node) else {
            throw CouchError.notFound("no node named \(path.first ?? "") (this server is lt@localhost, or _local)")
        }
        let rest = Array(path.dropFirst())
        try request.requireServerAdmin()
        switch rest.first {
        case nil:
            try request.requireMethod(.get)
            return .json(["name": "lt@localhost"])
        case "_prometheus":
            try request.requireMethod(.get)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            headers[.cacheControl] = "must-revalidate"
            let text = await api.options.metrics.exposition()
            return APIResponse(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        case "_stats":
            try request.requireMethod(.get)
            var stats = Self.stats(await api.options.metrics.samples())
            for key in rest.dropFirst() {
                guard let inner = stats[key] else {
                    throw CouchError.notFound("no statistic \(rest.dropFirst().joined(separator: "/"))")
                }
                stats = inner
            }
            return .json(stats)
        case "_system":
            try request.requireMethod(.get)
            return .json(Self.system(await api.options.metrics.samples()))
        case "_config":
            return try await config(Array(rest.dropFirst()), request)
        case "_versions":
            // What runs design functions and orders keys, as CouchDB 3.4 reports them.
            try request.requireMethod(.get)
            var versions: JSONObject = [
                "collation_driver": ["name": "libicu", "collator_version": .string(KeyCollation.collatorVersion)]
            ]
            if api.options.javascript != nil { versions.prepend("javascript_engine", ["name": "duktape"]) }
            return .json(.object(versions))
        default:
            throw CouchError.notFound("missing")
        }
    }

    /// `/_node/{node}/_config[/section[/key]]` and `_config/_reload`, as CouchDB's
    /// `chttpd_node` answers them: values are strings; `PUT` takes a JSON string and answers
    /// the value it replaced, `DELETE` the value it removed; `X-Couch-Persist: false` keeps a
    /// change in memory only. `admins` are the server admins: a password put there is stored
    /// as its PBKDF2 hash (in `server.json`, always), and the last admin cannot be deleted.
    func config(_ keys: [String], _ request: APIRequest) async throws -> APIResponse {
        let config = api.config
        let persist = request.header("X-Couch-Persist") != "false"
        switch keys.count {
        case 0:
            try request.requireMethod(.get)
            var sections = JSONObject()
            var all = config.all
            all["admins"] = admins()
            for (section, values) in all.sorted(by: { $0.key < $1.key }) { sections[section] = Self.object(values) }
            return .json(.object(sections))
        case 1 where keys[0] == "_reload":
            try request.requireMethod(.post)
            try config.reload()
            api.applyConfiguration()
            return .json(["ok": true])
        case 1:
            try request.requireMethod(.get)
            return .json(Self.object(keys[0] == "admins" ? admins() : config.section(keys[0])))
        case 2:
            let (section, key) = (keys[0], keys[1])
            switch request.method {
            case .get:
                guard let value = section == "admins" ? admins()[key] : config.value(section, key) else {
                    throw Self.unknownValue
                }
                return .json(.string(value))
            case .put:
                guard case .string(let text) = try request.json() else {
                    throw CouchError.badRequest("a JSON string expected")
                }
                let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if section == "admins" { return .json(.string(try await setAdmin(key, value))) }
                let old = try config.set(section, key, to: value, persist: persist)
                api.applyConfiguration()
                return .json(.string(old))
            case .delete:
                if section == "admins" { return .json(.string(try deleteAdmin(key))) }
                guard let old = try config.delete(section, key, persist: persist) else { throw Self.unknownValue }
                api.applyConfiguration()
                return .json(.string(old))
            default:
                throw CouchError.methodNotAllowed("GET,PUT,DELETE")
            }
        default:
            throw CouchError.notFound("missing")
        }
    }

    static let unknownValue = CouchError(status: 404, error: "not_found", reason: "unknown_config_value")

    static func object(_ values: [String: String]) -> JSON {
        var object = JSONObject()
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { object[key] = .string(value) }
        return .object(object)
    }

    /// The server admins as CouchDB shows them: `-pbkdf2:sha256-KEY,SALT,ITERATIONS`.
    func admins() -> [String: String] {
        api.settings.withLock { $0.admins.mapValues(Passwords.adminString) }
    }

    /// Makes `name` a server admin with `value`: a password (hashed here) or a stored hash as
    /// `admins()` shows them (taken as it is, as CouchDB takes one). Answers the hash replaced.
    func setAdmin(_ name: String, _ value: String) async throws -> String {
        guard !name.isEmpty, !value.isEmpty else { throw CouchError.badRequest("an admin needs a name and a password") }
        let hash: Passwords.Hash
        if let stored = Passwords.parseAdminString(value) {
            hash = stored
        } else {
            hash = try await Passwords.hash(value, iterations: api.options.pbkdf2Iterations)
        }
        return try api.settings.withLock { settings in
            let old = settings.admins[name].map(Passwords.adminString) ?? ""
            var changed = settings
            changed.admins[name] = hash
            try changed.save(to: api.store.directory)
            settings = changed
            return old
        }
    }

    /// Removes a server admin, unless it is the last one (lt never runs without one: CouchDB's
    /// "admin party" would let anyone in). Answers the hash removed.
    func deleteAdmin(_ name: String) throws -> String {
        try api.settings.withLock { settings in
            guard let old = settings.admins[name] else { throw Self.unknownValue }
            guard settings.admins.count > 1 else {
                throw CouchError(
                    status: 403, error: "forbidden",
                    reason: "\(name) is the last server admin; add another before deleting it")
            }
            var changed = settings
            changed.admins[name] = nil
            try changed.save(to: api.store.directory)
            settings = changed
            return Passwords.adminString(old)
        }
    }

    // MARK: CouchDB's shapes

    /// `{"value": v, "type": type, "desc": desc}`, as each `_stats` figure.
    static func figure(_ value: JSON, _ type: String, _ desc: String) -> JSON {
        ["value": value, "type": .string(type), "desc": .string(desc)]
    }

    static func number(_ value: Double) -> JSON {
        value.rounded() == value && abs(value) < 1e15 ? .int(Int(value)) : .double(value)
    }

    /// `_stats`: CouchDB's sections for the figures it also has (`couchdb`, `couch_replicator`),
    /// and `lt` for this server's own.
    static func stats(_ samples: [PrometheusSample]) -> JSON {
        let requests = samples.filter { $0.name == HTTPMetric.requests.rawValue && $0.labels["listener"] == "database" }
        var methods = JSONObject()
        var codes = JSONObject()
        for method in Set(requests.compactMap { $0.labels["method"] }).sorted() {
            let count = requests.filter { $0.labels["method"] == method }.reduce(0) { $0 + $1.value }
            methods[method] = figure(number(count), "counter", "number of HTTP \(method) requests")
        }
        for code in Set(requests.compactMap { $0.labels["status"] }).sorted() {
            let count = requests.filter { $0.labels["status"] == code }.reduce(0) { $0 + $1.value }
            codes[code] = figure(number(count), "counter", "number of HTTP \(code) responses")
        }
        let database = ["listener": "database"]
        let couchdb: JSONObject = [
            "httpd": [
                "requests": figure(number(requests.reduce(0) { $0 + $1.value }), "counter", "number of HTTP requests"),
                "bulk_requests": figure(
                    number(
                        histogramCount(
                            samples, HTTPMetric.requestDuration.rawValue, database.merging(["family": "bulk"]) { $1 })),
                    "counter", "number of bulk requests"),
                "clients_requesting_changes": figure(
                    number(samples.sum(CouchMetric.changesFeedsOpen.rawValue)), "gauge",
                    "number of clients for continuous _changes"),
            ],
            "httpd_request_methods": .object(methods),
            "httpd_status_codes": .object(codes),
            "request_time": figure(
                histogram(samples, HTTPMetric.requestDuration.rawValue, database, scale: 1000), "histogram",
                "length of a request inside the server, in milliseconds"),
            "open_databases": figure(
                number(samples.sum(CouchMetric.openDatabases.rawValue)), "gauge", "number of open databases"),
            "open_os_files": figure(
                number(samples.sum(HTTPMetric.openFileDescriptors.rawValue)), "gauge",
                "number of file descriptors the server has open"),
        ]
        let replicator: JSONObject = [
            "jobs": [
                "running": figure(
                    number(samples.sum(CouchMetric.replicationJobs.rawValue, ["state": "running"])), "gauge",
                    "replication jobs running"),
                "crashed": figure(
                    number(samples.sum(CouchMetric.replicationJobs.rawValue, ["state": "failing"])), "gauge",
                    "replication jobs retrying after an error"),
                "total": figure(
                    number(samples.sum(CouchMetric.replicationJobs.rawValue)), "gauge",
                    "replication jobs the server holds"),
            ]
        ]
        let lt: JSONObject = [
            "write_queue_depth": figure(
                number(samples.sum(EngineMetric.writeQueueDepth.rawValue)), "gauge", "writes waiting for a group commit"
            ),
            "write_batch_size": figure(
                histogram(samples, EngineMetric.writeBatchSize.rawValue), "histogram", "writes per group commit"),
            "write_transaction_time": figure(
                histogram(samples, EngineMetric.writeTransactionDuration.rawValue, scale: 1000), "histogram",
                "one group commit's transaction, sync included, in milliseconds"),
            "database_evictions": figure(
                number(samples.sum(CouchMetric.databaseEvictions.rawValue)), "counter",
                "databases closed to keep at most max_open_databases open"),
            "database_files_opened": figure(
                number(samples.sum(CouchMetric.databaseFilesOpened.rawValue)), "counter", "database files opened"),
            "max_open_databases": figure(
                number(samples.sum(CouchMetric.maxOpenDatabases.rawValue)), "gauge", "the most databases kept open"),
            "replication_documents_read": figure(
                number(samples.sum(CouchMetric.replicationDocuments.rawValue, ["kind": "read"])), "gauge",
                "documents read by the replication jobs held now"),
            "replication_documents_written": figure(
                number(samples.sum(CouchMetric.replicationDocuments.rawValue, ["kind": "written"])), "gauge",
                "documents written by the replication jobs held now"),
            "replication_changes_pending": figure(
                number(samples.sum(CouchMetric.replicationChangesPending.rawValue)), "gauge",
                "changes the replication jobs have still to read"),
            // The application's (LTServer's `ApplicationMetric`, a layer above this one): read by name.
            "consolidation_backlog": figure(
                number(samples.sum("lt_consolidation_backlog_databases")), "gauge",
                "user databases waiting to be consolidated (start-up sweep and retries)"),
            "consolidation_documents_copied": figure(
                number(samples.sum("lt_consolidation_documents_copied_total")), "counter",
                "locations copied into lt_locations_all"),
            "js_processes_busy": figure(
                number(samples.sum(CouchMetric.javaScriptProcesses.rawValue, ["state": "busy"])), "gauge",
                "JavaScript query server processes in use"),
        ]
        return ["couchdb": .object(couchdb), "couch_replicator": .object(replicator), "lt": .object(lt)]
    }

    /// `_system`: the process's uptime, memory, open files and query-server processes.
    static func system(_ samples: [PrometheusSample]) -> JSON {
        var memory: JSONObject = [
            "resident": number(samples.sum(HTTPMetric.residentMemory.rawValue)),
            "anonymous": number(samples.sum(HTTPMetric.anonymousMemory.rawValue)),
        ]
        for sample in samples where sample.name == HTTPMetric.allocatorBytes.rawValue {
            if let kind = sample.labels["kind"] { memory["allocator_" + kind] = number(sample.value) }
        }
        return [
            "uptime": number(samples.sum(HTTPMetric.uptime.rawValue).rounded(.down)),
            "memory": .object(memory),
            "open_files": number(samples.sum(HTTPMetric.openFileDescriptors.rawValue)),
            "open_file_limit": number(samples.sum(HTTPMetric.maxFileDescriptors.rawValue)),
            "os_proc_count": number(samples.sum(CouchMetric.javaScriptProcesses.rawValue, ["state": "busy"])),
            "open_databases": number(samples.sum(CouchMetric.openDatabases.rawValue)),
        ]
    }

    /// How many observations the histogram `name` has among series matching `labels`.
    static func histogramCount(_ samples: [PrometheusSample], _ name: String, _ labels: [String: String]) -> Double {
        samples.sum(name + "_count", labels)
    }

    /// A histogram (series matching `labels` added up) as CouchDB shows one: count, mean,
    /// median and percentiles (interpolated within the buckets, as Prometheus'
    /// `histogram_quantile`), and the buckets; values times `scale` (seconds to milliseconds).
    static func histogram(
        _ samples: [PrometheusSample], _ name: String, _ labels: [String: String] = [:], scale: Double = 1
    ) -> JSON {
        var buckets: [Double: Double] = [:]
        for sample in samples
        where sample.name == name + "_bucket" && labels.allSatisfy({ sample.labels[$0.key] == $0.value }) {
            guard let bound = sample.labels["le"].flatMap({ $0 == "+Inf" ? Double.infinity : Double($0) }) else {
                continue
            }
            buckets[bound, default: 0] += sample.value
        }
        let count = samples.sum(name + "_count", labels)
        let sum = samples.sum(name + "_sum", labels)
        let bounds = buckets.keys.sorted()
        func quantile(_ q: Double) -> Double {
            guard count > 0 else { return 0 }
            let rank = q * count
            var lower = 0.0, below = 0.0
            for bound in bounds {
                let cumulative = buckets[bound]!
                if cumulative >= rank {
                    // The last bucket has no upper bound: its lower bound is the best guess.
                    guard bound.isFinite else { return lower * scale }
                    let inBucket = cumulative - below
                    let fraction = inBucket > 0 ? (rank - below) / inBucket : 1
                    return (lower + (bound - lower) * fraction) * scale
                }
                (lower, below) = (bound, cumulative)
            }
            return lower * scale
        }
        var previous = 0.0
        let histogram: [JSON] = bounds.map { bound in
            defer { previous = buckets[bound]! }
            return [bound.isFinite ? number(bound * scale) : "+Inf", number(buckets[bound]! - previous)]
        }
        return [
            "n": number(count),
            "arithmetic_mean": number(count > 0 ? sum / count * scale : 0),
            "median": number(quantile(0.5)),
            "percentile": .array(
                [50, 75, 90, 95, 99, 999].map { p in [.int(p), number(quantile(p == 999 ? 0.999 : Double(p) / 100))] }),
            "histogram": .array(histogram),
        ]
    }
}
