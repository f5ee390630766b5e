import CouchJSON
import CouchProtocol
import Logging

/// Locations read back for people: exports and statistics for analysts (`Analysis.swift`), a
/// user's own tracks and live updates, the all-locations map grid and photos for the dashboard
/// (`Dashboard.swift`). Reads only.
public struct LocationReports: CouchBacked {
    typealias Failure = TrackerService.Failure
    let couch: any CouchClient
    /// Where geo queries go: the database itself, or in cluster mode this server's mirror.
    let geo: any CouchClient
    /// Whether geo queries go elsewhere than the database (cluster mode).
    let separateGeo: Bool
    let mode: TrackerService.Mode
    let logger: Logger

    /// The database a user's locations are in, in this mode.
    func locationDatabase(for username: String) -> String {
        mode == .singleDatabase ? TrackerService.sharedLocationsDB : TrackerService.locationDB(for: username)
    }
}
