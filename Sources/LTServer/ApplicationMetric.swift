public import HTTPServing

/// The metrics of the server as a whole and of the application beside the database API
/// (consolidation, the cluster's nodes), by name.
public enum ApplicationMetric: String, MetricName {
    case consolidationBacklog = "lt_consolidation_backlog_databases"
    case consolidationUnreadable = "lt_consolidation_unreadable_databases"
    case consolidationRefused = "lt_consolidation_refused_locations"
    case consolidationLastRound = "lt_consolidation_last_round_seconds"
    case consolidationDocumentsCopied = "lt_consolidation_documents_copied_total"
    case consolidationRounds = "lt_consolidation_rounds_total"
    case buildInfo = "lt_build_info"
    case maxConnections = "lt_max_connections"
    case dataFreeBytes = "lt_data_free_bytes"
    case dataFilesystemBytes = "lt_data_filesystem_bytes"
    case couchDBNodeUp = "lt_couchdb_node_up"
    case couchDBNodeWithdrawn = "lt_couchdb_node_withdrawn"
}
