import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
public import HTTPServing
import JavaScript
import Replication

extension CouchAPI {
    /// `/_node/{node}/...`: metrics and statistics.
    var nodes: NodeEndpoints { NodeEndpoints(api: self) }

    /// The figures read when the metrics are: the store's databases, the open feeds, the
    /// replication jobs, compactions and JavaScript processes.
    func addMetricsCollectors() {
        let metrics = options.metrics
        metrics.addCollector { [store, feeds, jobs, compactions, auth, javascript = options.javascript] in
            metrics.gauge(CouchMetric.openDatabases, [], Double(store.openCount))
            metrics.total(CouchMetric.passwordVerifications, [], auth.passwordVerifications)
            metrics.gauge(CouchMetric.maxOpenDatabases, [], Double(store.maxOpenDatabases))
            metrics.total(CouchMetric.databaseFilesOpened, [], store.filesOpened)
            metrics.total(CouchMetric.databaseEvictions, [], store.evictions)
            metrics.gauge(CouchMetric.changesFeedsOpen, [], Double(feeds.count))
            metrics.gauge(CouchMetric.compactionsRunning, [], Double(compactions.count))
            var states = ["running": 0, "failing": 0, "completed": 0]
            var read = 0, written = 0, failures = 0, pending = 0
            for job in jobs.all {
                let status = job.replication.status
                switch status.state {
                case .error, .offline: states["failing", default: 0] += 1
                case .stopped: states["completed", default: 0] += 1
                case .connecting, .busy, .idle: states["running", default: 0] += 1
                }
                read += status.docsRead
                written += status.docsWritten
                failures += status.docWriteFailures
                pending += status.changesPending ?? 0
            }
            for (state, count) in states {
                metrics.gauge(CouchMetric.replicationJobs, [("state", state)], Double(count))
            }
            metrics.gauge(CouchMetric.replicationDocuments, [("kind", "read")], Double(read))
            metrics.gauge(CouchMetric.replicationDocuments, [("kind", "written")], Double(written))
            metrics.gauge(CouchMetric.replicationDocuments, [("kind", "write_failures")], Double(failures))
            metrics.gauge(CouchMetric.replicationChangesPending, [], Double(pending))
            if let javascript {
                let statistics = javascript.statistics
                metrics.gauge(CouchMetric.javaScriptProcesses, [("state", "max")], Double(statistics.processes))
                metrics.gauge(CouchMetric.javaScriptProcesses, [("state", "busy")], Double(statistics.busy))
                metrics.total(CouchMetric.javaScriptProcessesStarted, [], statistics.started)
            }
        }
    }
}

/// The family of routes a request of the database API was answered by, as the request-time
/// histograms label it: each route in the URL table (`CouchRoutes.swift`) names its own.
package enum RouteFamily: String, Sendable {
    case documents, bulk, changes, find, views, geo, replication, database, server
    /// Passed through to the cluster (a shared database's readers in cluster mode).
    case cluster
    /// Answered before any route: refused credentials, preflights, paths and methods no route takes.
    case unrouted = "none"
}

/// The database API's metrics, by name.
public enum CouchMetric: String, MetricName {
    case openDatabases = "lt_open_databases"
    case maxOpenDatabases = "lt_max_open_databases"
    case databaseFilesOpened = "lt_database_files_opened_total"
    case databaseEvictions = "lt_database_evictions_total"
    case passwordVerifications = "lt_password_verifications_total"
    case changesFeedsOpen = "lt_changes_feeds_open"
    case compactionsRunning = "lt_compactions_running"
    case replicationJobs = "lt_replication_jobs"
    case replicationDocuments = "lt_replication_documents"
    case replicationChangesPending = "lt_replication_changes_pending"
    case javaScriptProcesses = "lt_js_processes"
    case javaScriptProcessesStarted = "lt_js_processes_started_total"
}
