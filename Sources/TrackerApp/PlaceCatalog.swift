import CouchJSON
public import CouchProtocol
import HTTPTypes
import Logging

/// The places of `lt_places`: the geo query devices ask (`/api/places`), editing by admins,
/// import from GeoJSON (`PlacesImport.swift`), users' reports of wrong positions and their
/// review (`Corrections.swift`), and the places release devices compare before pulling.
public struct PlaceCatalog: CouchBacked {
    typealias Failure = TrackerService.Failure
    let couch: any CouchClient
    /// Where geo queries go: the database itself, or in cluster mode this server's mirror.
    let geo: any CouchClient
    let logger: Logger

    /// `GET /api/places?...`: the geo query on `lt_places`, answered as CouchDB answers it.
    public func nearby(query: [String: String]) async throws -> CouchReply {
        try await geo.request(.get, "/\(TrackerService.placesDB)/_design/points/_geo/pointidx", query: query, body: nil)
    }
}
