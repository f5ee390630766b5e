import CoreMetrics
import Metrics
import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers
public import Prometheus

/// One server's metrics: a Prometheus registry that swift-metrics' counters, timers and gauges
/// record into (`factory`), the requests of both listeners (`recordRequest`), and figures read
/// only when someone asks (`addCollector`: open databases, feeds, replication jobs, memory), so
/// that the request path never computes them. `GET /_node/_local/_prometheus` serves
/// `exposition()`; `_stats` and `_system` are read from `samples()`.
///
/// Every name starts with `lt_` and is in its layer's one list (`HTTPMetric` here,
/// `EngineMetric`, `CouchMetric`, `ApplicationMetric`); docs/deploying.md lists them all with
/// their meaning, and `MetricsTests` holds the lists, the docs and what a server exports to each other.
public final class ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    /// What the server's parts make their metrics with (the engine's group commit, the
    /// listeners): each records into `registry`.
    public let factory: PrometheusMetricsFactory
    /// When the server started, for the uptime.
    public let started = ContinuousClock.now
    private let collectors = NIOLockedValueBox<[@Sendable () async -> Void]>([])
    /// The request counters and timers made so far (`recordRequest`).
    private let requestSeries = NIOLockedValueBox<
        [RequestSeries: (counter: CoreMetrics.Counter, timer: CoreMetrics.Timer)]
    >([:])
    private struct RequestSeries: Hashable {
        var listener: String
        var method: String
        var status: Int
        var family: String
    }
    /// The last total each `total(_:_:)` counter was brought to.
    private let totals = NIOLockedValueBox<[String: Int64]>([:])

    /// Request times from half a millisecond (a document read) to a minute (a long poll's
    /// answer, a large replication batch).
    public static let durationBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    /// Sizes (documents in one group commit): one writer alone up to a large `_bulk_docs`.
    public static let sizeBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384]

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        factory.defaultValueHistogramBuckets = Self.sizeBuckets
        self.factory = factory
        addProcessCollector()
    }

    /// Runs `collect` before every reading, to set gauges and totals from the server's state.
    public func addCollector(_ collect: @escaping @Sendable () async -> Void) {
        collectors.withLockedValue { $0.append(collect) }
    }

    /// The metrics in Prometheus' text format (version 0.0.4), collected now.
    public func exposition() async -> String {
        for collect in collectors.withLockedValue({ $0 }) { await collect() }
        return registry.emitToString()
    }

    /// The metrics collected now, as samples (`_stats`, `_system`).
    public func samples() async -> [PrometheusSample] {
        PrometheusSample.parse(await exposition())
    }

    // MARK: Recording

    /// Sets the gauge `name` (with `labels`) to `value`.
    public func gauge(_ name: some MetricName, _ labels: [(String, String)] = [], _ value: Double) {
        Gauge(label: name.rawValue, dimensions: labels, factory: factory).record(value)
    }

    /// Brings the counter `name` (with `labels`) up to `total`, a count the server keeps
    /// itself (files opened since the start): it goes up by what the count gained since the
    /// last reading.
    public func total(_ name: some MetricName, _ labels: [(String, String)] = [], _ total: Int) {
        let key = name.rawValue + labels.map { "\u{1}\($0.0)=\($0.1)" }.joined()
        let gained = totals.withLockedValue { last -> Int64 in
            let gained = max(0, Int64(total) - last[key, default: 0])
            last[key] = max(last[key, default: 0], Int64(total))
            return gained
        }
        // Made even when nothing was gained: the series shows from the first reading, at 0.
        let counter = Counter(label: name.rawValue, dimensions: labels, factory: factory)
        if gained > 0 { counter.increment(by: gained) }
    }

    /// One request a listener answered: counted by method and status (with its class, `2xx`),
    /// and timed by route family (`documents`, `bulk`, `changes`, ... `app_api`). Each
    /// combination's counter and timer are made once and kept (few: methods are the standard
    /// ones, statuses the server's own, families fixed), so a request costs a lookup by small
    /// values instead of the registry's by labels.
    public func recordRequest(
        listener: String, method: HTTPRequest.Method, status: Int, family: String, duration: Duration
    ) {
        let code = (100...599).contains(status) ? status : 500
        let method = Self.methodLabel(method)
        let key = RequestSeries(listener: listener, method: method, status: code, family: family)
        let handles = requestSeries.withLockedValue { $0[key] } ?? makeRequestSeries(key)
        handles.counter.increment()
        handles.timer.record(duration: duration)
    }

    private func makeRequestSeries(_ key: RequestSeries) -> (counter: CoreMetrics.Counter, timer: CoreMetrics.Timer) {
        let handles = (
            Counter(
                label: HTTPMetric.requests.rawValue,
                dimensions: [
                    ("listener", key.listener), ("method", key.method), ("status", String(key.status)),
                    ("status_class", "\(key.status / 100)xx"),
                ], factory: factory),
            Timer(
                label: HTTPMetric.requestDuration.rawValue,
                dimensions: [("listener", key.listener), ("family", key.family)], factory: factory)
        )
        requestSeries.withLockedValue { $0[key] = handles }
        return handles
    }

    /// A method as a label: the standard ones by name, anything else as `OTHER`, so a client
    /// cannot make new series by inventing methods.
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .delete, .options, .patch, copy: method.rawValue
        default: "OTHER"
        }
    }

    private static let copy = HTTPRequest.Method("COPY")!
}

/// A metric's name as `/_node/_local/_prometheus` exports it: each layer lists its own in one
/// enum of this kind.
public protocol MetricName: RawRepresentable<String>, CaseIterable, Sendable {}

/// The listeners' and the process's metrics.
public enum HTTPMetric: String, MetricName {
    case requests = "lt_http_requests_total"
    case requestDuration = "lt_http_request_duration_seconds"
    case residentMemory = "lt_process_resident_memory_bytes"
    case anonymousMemory = "lt_process_anonymous_memory_bytes"
    case openFileDescriptors = "lt_process_open_fds"
    case maxFileDescriptors = "lt_process_max_fds"
    case uptime = "lt_process_uptime_seconds"
    /// jemalloc's statistics, where the server runs with it.
    case allocatorBytes = "lt_allocator_bytes"
}
