import CouchJSON
import Foundation
public import Geo

/// What the original app did with every location, without its screens: filter the fix, save
/// it locally, push it when there is a network, and find the places near it — from the server
/// online, from the device's copy of the region offline. An app feeds it fixes and tells it
/// when the network or the app's state changes; `lt device drive` does the same from a route.
public actor DeviceTracker {
    /// Where a place answer came from.
    public enum PlacesSource: String, Sendable {
        /// `GET /api/places`.
        case server
        /// The device's copy of its region (offline, or the server did not answer).
        case device
        /// No answer: the fix was not kept.
        case none
    }

    /// What became of one fix.
    public struct Outcome: Sendable {
        public var decision: LocationMonitor.Decision
        /// The saved location, when the fix was kept.
        public var location: LocationDoc?
        /// The saved location document's id, when the fix was kept.
        public var id: String? { location?.id }
        public var places: [(place: PlaceDoc, distance: Double)] = []
        public var placesSource: PlacesSource = .none
        /// False when answered from the device for a position outside its pulled region.
        public var complete = true
    }

    /// Running totals, for status lines and summaries.
    public struct Counters: Sendable {
        public var fixes = 0
        public var accepted = 0
        public var rejected: [LocationMonitor.Rejection: Int] = [:]
        /// Distinct places shown near kept fixes.
        public var placesSeen: Set<String> = []
        public var serverAnswers = 0
        public var deviceAnswers = 0
        /// Server calls that failed while the device believed it was online.
        public var serverFailures = 0
        public var rejectedTotal: Int { rejected.values.reduce(0, +) }
    }

    public nonisolated let credentials: Credentials
    public nonisolated let sync: SyncManager
    public nonisolated let places: PlacesCache
    /// One id per tracking session, in every saved location's `properties.session_id`.
    public nonisolated let sessionID: String
    let client: TrackerClient
    let store: LocalStore
    var monitor: LocationMonitor
    public private(set) var isOnline = true
    public private(set) var inBackground = false
    public private(set) var counters = Counters()
    /// Locations waiting for a push when the session began.
    let pendingAtStart: Int
    /// The time of the latest fix: the device's clock for periodic checks (fixes may be replayed).
    var lastFix: Date?

    public init(
        client: TrackerClient, credentials: Credentials, store: LocalStore, policy: LocationPolicy = .original,
        regionRadius: Double = 25_000, onSyncStatus: (@Sendable (SyncManager.Status) -> Void)? = nil
    ) async throws {
        self.client = client
        self.credentials = credentials
        self.store = store
        monitor = LocationMonitor(policy: policy)
        // Syncs through the application client's HTTP client (the CAs it trusts).
        sync = SyncManager(local: store, server: credentials.serverDatabase, http: client.http, onStatus: onSyncStatus)
        places = try await PlacesCache(client: client, store: store, regionRadius: regionRadius)
        sessionID = UUID().uuidString.lowercased()
        pendingAtStart = try await sync.pendingPush()
    }

    /// The app starts (or comes back online, or to the foreground): pull this user's locations
    /// from other devices, push what waits, and bring the places region up to date.
    public func start(near position: Coordinate?) async {
        guard isOnline else { return }
        await sync.request(.pull)
        await sync.request(.push)
        if let position { await refreshPlaces(near: position, now: lastFix ?? Date(), checkRelease: true) }
    }

    /// The network came or went, as the device's reachability reports it.
    public func setOnline(_ online: Bool, near position: Coordinate?) async {
        guard online != isOnline else { return }
        isOnline = online
        if online { await start(near: position) }
    }

    /// The app went to the background or came back; coming back, the next fix counts as a first
    /// (as in the original) and the app pulls.
    public func setBackground(_ background: Bool, near position: Coordinate?) async {
        guard background != inBackground else { return }
        inBackground = background
        if !background {
            monitor.resume()
            await start(near: position)
        }
    }

    /// Handles one fix from the location service.
    public func record(_ fix: LocationFix) async throws -> Outcome {
        counters.fixes += 1
        lastFix = fix.timestamp
        let decision = monitor.consider(fix, inBackground: inBackground)
        guard decision == .accepted else {
            if case let .rejected(reason) = decision { counters.rejected[reason, default: 0] += 1 }
            return Outcome(decision: decision)
        }
        counters.accepted += 1
        var location = LocationDoc(
            fix: fix, username: credentials.username, background: inBackground, sessionID: sessionID)
        location.id = try await store.save(location)
        var outcome = Outcome(decision: decision, location: location)
        if isOnline {
            await sync.request(.push)
            await refreshPlaces(near: fix.coordinate, now: fix.timestamp, checkRelease: false)
            do {
                let found = try await client.places(near: fix.coordinate, radius: places.queryRadius)
                try await places.remember(found)
                outcome.places = found.map { ($0, Sphere.distance(fix.coordinate, $0.coordinate)) }
                outcome.placesSource = .server
                counters.serverAnswers += 1
            } catch {
                counters.serverFailures += 1
            }
        }
        if outcome.placesSource == .none {
            let answer = await places.near(fix.coordinate)
            outcome.places = answer.places
            outcome.complete = answer.complete
            outcome.placesSource = .device
            counters.deviceAnswers += 1
        }
        for (place, _) in outcome.places { if let id = place.id { counters.placesSeen.insert(id) } }
        return outcome
    }

    /// Pushes what waits (when online) and reports how many locations reached the server during
    /// this session (confirmed by a completed push, also those whose acknowledgement a failure
    /// lost) and how many are still only on the device.
    public func finish() async throws -> (pushed: Int, pending: Int) {
        if isOnline { await sync.pushNow() }
        let pending = try await sync.pendingPush()
        return (max(0, pendingAtStart + counters.accepted - pending), pending)
    }

    private func refreshPlaces(near position: Coordinate, now: Date, checkRelease: Bool) async {
        do { try await places.refresh(near: position, now: now, checkRelease: checkRelease) } catch {
            counters.serverFailures += 1
        }
    }
}
