public import CoreMetrics
import Metrics

/// What the store records about its writes, made once per store with the server's metrics
/// factory (none: swift-metrics' no-op one): how many writes wait for a group commit, how many
/// each commit carried, and how long each group transaction took, sync included.
public struct EngineMetrics: Sendable {
    /// Writes submitted and not yet committed, over all databases.
    let queued: Meter
    /// Writes (document writes, purges, `_local` saves) per group commit.
    let batchSize: Recorder
    /// One group transaction: its writes, the commit and the sync of the write-ahead log.
    let transaction: Timer

    public init(factory: any MetricsFactory = NOOPMetricsHandler.instance) {
        queued = Meter(label: EngineMetric.writeQueueDepth.rawValue, factory: factory)
        batchSize = Recorder(label: EngineMetric.writeBatchSize.rawValue, factory: factory)
        transaction = Timer(label: EngineMetric.writeTransactionDuration.rawValue, factory: factory)
    }
}

/// The engine's metrics, by name.
public enum EngineMetric: String, CaseIterable, Sendable {
    case writeQueueDepth = "lt_write_queue_depth"
    case writeBatchSize = "lt_write_batch_size"
    case writeTransactionDuration = "lt_write_transaction_duration_seconds"
}
