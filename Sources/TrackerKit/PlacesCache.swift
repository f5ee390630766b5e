import CouchJSON
public import Foundation
public import Geo

/// The places a device can show without a network. Beyond the original app (which only kept
/// the places it had been shown), the device pulls every place of its region from the server
/// (`GET /api/places`, page by page) into its `places` database, pulls again when it nears the
/// region's edge or the server's places release (`/api/places/version`) changes, and answers
/// radius queries from that copy with the server's own geo index.
public actor PlacesCache {
    /// What the device holds: every place within `radius` metres of `center`, as of `release`.
    public struct Region: Sendable, Equatable {
        public var center: Coordinate
        public var radius: Double
        public var release: Int
    }

    public nonisolated let client: TrackerClient
    let store: LocalStore
    /// Radius of the region pulled around the device, metres.
    public nonisolated let regionRadius: Double
    /// Radius of the place queries answered, metres (the original app's 2.5 miles).
    public nonisolated let queryRadius: Double
    /// How often, at most, the places release is asked for while online.
    public var releaseCheckInterval: TimeInterval = 300
    public private(set) var region: Region?
    /// Regions pulled since this cache was made.
    public private(set) var pulls = 0
    private var index: OfflinePlaces
    private var releaseCheckedAt: Date?

    static let stateID = "lt-places-region"

    /// Opens the cache on the device's store, with the region and places it already holds.
    public init(
        client: TrackerClient, store: LocalStore, regionRadius: Double = 25_000,
        queryRadius: Double = OfflinePlaces.defaultRadius
    ) async throws {
        self.client = client
        self.store = store
        self.regionRadius = regionRadius
        self.queryRadius = queryRadius
        index = OfflinePlaces(try await store.allPlaces())
        if let state = await store.state(PlacesCache.stateID, in: try store.places),
            let lat = state["lat"]?.doubleValue,
            let lon = state["lon"]?.doubleValue, let radius = state["radius"]?.doubleValue
        {
            region = Region(
                center: Coordinate(lon: lon, lat: lat), radius: radius, release: state["release"]?.intValue ?? 0)
        }
    }

    /// Whether a query at `position` is answered completely from the device.
    public func covers(_ position: Coordinate) -> Bool {
        guard let region else { return false }
        return Sphere.distance(region.center, position) + queryRadius <= region.radius
    }

    /// Online upkeep, cheap when nothing is due: pulls the region around `position` when the
    /// device has none, is past half of its radius, or the server's release differs (asked at
    /// most every `releaseCheckInterval`, or now when `checkRelease`). Returns whether it pulled.
    @discardableResult
    public func refresh(near position: Coordinate, now: Date = Date(), checkRelease: Bool = false) async throws -> Bool
    {
        var release = region?.release
        if region == nil || checkRelease
            || releaseCheckedAt.map({ now.timeIntervalSince($0) >= releaseCheckInterval }) ?? true
        {
            release = try await client.placesVersion()
            releaseCheckedAt = now
        }
        if let region, region.release == release, Sphere.distance(region.center, position) <= region.radius / 2 {
            return false
        }
        try await pull(around: position, release: release ?? 0)
        return true
    }

    /// Pulls every place within `regionRadius` of `center` and makes the device's copy match.
    public func pull(around center: Coordinate, release: Int) async throws {
        var places: [PlaceDoc] = []
        var bookmark: String?
        repeat {
            let page = try await client.placesPage(near: center, radius: regionRadius, limit: 200, bookmark: bookmark)
            places += page.places
            bookmark = page.next
        } while bookmark != nil
        try await store.replacePlaces(near: center, radius: regionRadius, with: places)
        try await store.setState(
            PlacesCache.stateID, in: try store.places,
            [
                "lat": .double(center.lat), "lon": .double(center.lon), "radius": .double(regionRadius),
                "release": .int(release),
            ])
        region = Region(center: center, radius: regionRadius, release: release)
        index = OfflinePlaces(try await store.allPlaces())
        pulls += 1
    }

    /// Places shown online are kept too (as the original app did), so they stay visible offline.
    public func remember(_ places: [PlaceDoc]) async throws {
        try await store.remember(places)
        if places.contains(where: { $0.id.map { !index.contains($0) } ?? false }) {
            index = OfflinePlaces(try await store.allPlaces())
        }
    }

    /// Places within `queryRadius` of `position` from the device's copy, nearest first, and
    /// whether the answer is complete (the position is inside the pulled region).
    public func near(
        _ position: Coordinate, limit: Int = 100
    ) -> (places: [(place: PlaceDoc, distance: Double)], complete: Bool) {
        (index.near(position, radius: queryRadius, limit: limit), covers(position))
    }

    /// Places on the device.
    public var count: Int { index.count }
}
