import Foundation
public import Geo

/// Places near a position without a network: the places dataset the device pulled, in the
/// same in-memory index the server answers `_geo` with, so offline answers are the server's
/// answers (nearest first, ties by id).
public struct OfflinePlaces: Sendable {
    /// The original app's query radius: 2.5 miles.
    public static let defaultRadius = 2.5 * 1609.34

    let index: SpatialIndex
    let places: [String: PlaceDoc]

    /// Indexes places that have ids (as pulled from `lt_places`).
    public init(_ places: [PlaceDoc]) {
        var byID: [String: PlaceDoc] = [:]
        for place in places { if let id = place.id { byID[id] = place } }
        self.places = byID
        index = SpatialIndex(byID.map { ($0.key, Geometry.point($0.value.coordinate)) })
    }

    public var count: Int { places.count }

    /// Whether the place with this id is indexed.
    public func contains(_ id: String) -> Bool { places[id] != nil }

    /// Places within `radius` metres of `center`, nearest first, at most `limit`.
    public func near(
        _ center: Coordinate, radius: Double = OfflinePlaces.defaultRadius, limit: Int = 100
    ) -> [(place: PlaceDoc, distance: Double)] {
        let search = GeoSearch(shape: .circle(center: center, radius: radius), relation: .contains, limit: limit)
        return index.search(search).hits.compactMap { hit in
            guard let place = places[hit.id] else { return nil }
            return (place, Sphere.distance(center, place.coordinate))
        }
    }
}
