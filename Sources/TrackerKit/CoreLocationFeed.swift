#if canImport(CoreLocation)
import CoreLocation
import Geo

extension LocationFix {
    /// A CoreLocation fix as the policy sees it (negative accuracy, speed and course keep their
    /// CoreLocation meaning: invalid or unknown).
    public init(_ location: CLLocation) {
        self.init(
            coordinate: Coordinate(lon: location.coordinate.longitude, lat: location.coordinate.latitude),
            horizontalAccuracy: location.horizontalAccuracy, timestamp: location.timestamp,
            speed: location.speed, course: location.course,
            altitude: location.verticalAccuracy >= 0 ? location.altitude : nil)
    }
}

/// Live fixes from `CLLocationUpdate.liveUpdates()` (the structured-concurrency location API).
@available(iOS 17.0, macOS 14.0, watchOS 10.0, visionOS 1.0, *)
public func liveLocationFixes() -> AsyncCompactMapSequence<CLLocationUpdate.Updates, LocationFix> {
    CLLocationUpdate.liveUpdates().compactMap { update in update.location.map(LocationFix.init) }
}

#if os(iOS) || os(macOS)
/// Feeds a `DeviceTracker` from `CLLocationManager` as the original app did: standard location
/// updates in the foreground, the significant-change service in the background (so the system
/// can relaunch the app), every fix through the tracker's filter, store, sync and places.
/// Call `enterBackground()` / `enterForeground()` from the app's scene or app delegate.
@MainActor
public final class CoreLocationFeed: NSObject, CLLocationManagerDelegate {
    public let tracker: DeviceTracker
    /// Called on the main actor with what became of each fix (for the map and the places list).
    public var onOutcome: ((DeviceTracker.Outcome) -> Void)?
    /// Called when the location service fails (denied, no fix).
    public var onError: ((Error) -> Void)?
    private let manager = CLLocationManager()
    private var inBackground = false

    public init(tracker: DeviceTracker) {
        self.tracker = tracker
        super.init()
        manager.delegate = self
        manager.desiredAccuracy = kCLLocationAccuracyBest
        // The policy decides what is kept; let every fix reach it.
        manager.distanceFilter = kCLDistanceFilterNone
        #if os(iOS)
        manager.pausesLocationUpdatesAutomatically = true
        manager.activityType = .otherNavigation
        #endif
    }

    /// Asks for permission (always, for background tracking) and starts updates.
    public func start() {
        #if os(iOS)
        manager.requestAlwaysAuthorization()
        #else
        manager.requestWhenInUseAuthorization()
        #endif
        manager.startUpdatingLocation()
    }

    public func stop() {
        manager.stopUpdatingLocation()
        manager.stopMonitoringSignificantLocationChanges()
    }

    /// The app went to the background: significant changes only, with the background policy.
    public func enterBackground() {
        guard !inBackground else { return }
        inBackground = true
        manager.stopUpdatingLocation()
        manager.startMonitoringSignificantLocationChanges()
        let position = manager.location.map { Coordinate(lon: $0.coordinate.longitude, lat: $0.coordinate.latitude) }
        Task { await tracker.setBackground(true, near: position) }
    }

    /// The app is back in the foreground: standard updates; the next fix counts as a first.
    public func enterForeground() {
        guard inBackground else { return }
        inBackground = false
        manager.stopMonitoringSignificantLocationChanges()
        manager.startUpdatingLocation()
        let position = manager.location.map { Coordinate(lon: $0.coordinate.longitude, lat: $0.coordinate.latitude) }
        Task { await tracker.setBackground(false, near: position) }
    }

    nonisolated public func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation]) {
        let fixes = locations.map(LocationFix.init)
        Task { @MainActor in
            for fix in fixes {
                do {
                    let outcome = try await self.tracker.record(fix)
                    self.onOutcome?(outcome)
                } catch {
                    self.onError?(error)
                }
            }
        }
    }

    nonisolated public func locationManager(_ manager: CLLocationManager, didFailWithError error: Error) {
        let message = error.localizedDescription
        Task { @MainActor in self.onError?(TrackerKitError.locationService(message)) }
    }
}

#endif
#endif
