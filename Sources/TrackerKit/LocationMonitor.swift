public import Foundation
public import Geo

/// One GPS fix as a device reports it: a plain value, so the policy runs (and is tested)
/// anywhere; on Apple platforms an adapter builds it from a `CLLocation`.
public struct LocationFix: Sendable, Equatable {
    public var coordinate: Coordinate
    /// Horizontal accuracy in metres; negative means the fix is invalid (as in CoreLocation).
    public var horizontalAccuracy: Double
    public var timestamp: Date
    /// Metres per second; negative when unknown.
    public var speed: Double
    /// Degrees from true north; negative when unknown.
    public var course: Double
    /// Metres above sea level, if known.
    public var altitude: Double?

    public init(
        coordinate: Coordinate, horizontalAccuracy: Double, timestamp: Date, speed: Double = -1, course: Double = -1,
        altitude: Double? = nil
    ) {
        self.coordinate = coordinate
        self.horizontalAccuracy = horizontalAccuracy
        self.timestamp = timestamp
        self.speed = speed
        self.course = course
        self.altitude = altitude
    }
}

/// Which fixes are worth keeping. The defaults are the original iOS client's constants
/// (`AppConstants`): 25 m / 100 m accuracy in the foreground / background, 15 m / 100 m
/// between kept fixes, more than 15 s between them.
public struct LocationPolicy: Sendable, Equatable {
    /// Largest horizontal accuracy accepted in the foreground, metres (inclusive).
    public var foregroundAccuracy: Double = 25
    /// Largest horizontal accuracy accepted in the background, metres (inclusive).
    public var backgroundAccuracy: Double = 100
    /// Least distance from the last kept fix in the foreground, metres (inclusive).
    public var foregroundDistance: Double = 15
    /// Least distance from the last kept fix in the background, metres (inclusive).
    public var backgroundDistance: Double = 100
    /// Time that must have passed since the last kept fix, seconds (strictly more).
    public var minimumInterval: TimeInterval = 15

    public init() {}

    /// The original client's rules.
    public static let original = LocationPolicy()
}

/// Decides, fix by fix, which locations the app records (the original `LocationMonitor`'s
/// filter): an accuracy check for the app's state, then the first fix always, later ones only
/// when far enough **and** long enough after the last one kept.
public struct LocationMonitor: Sendable {
    /// Why a fix was not kept.
    public enum Rejection: String, Sendable, Equatable {
        /// Negative accuracy: the device has no valid position.
        case invalid
        /// Less accurate than the policy allows in the app's current state.
        case inaccurate
        /// Too close to the last kept fix.
        case tooClose = "too_close"
        /// Too soon after the last kept fix.
        case tooSoon = "too_soon"
    }

    /// What became of a fix.
    public enum Decision: Sendable, Equatable {
        case accepted
        case rejected(Rejection)
    }

    public var policy: LocationPolicy
    /// The last fix kept, the reference for distance and time.
    public private(set) var lastAccepted: LocationFix?

    public init(policy: LocationPolicy = .original) {
        self.policy = policy
    }

    /// Considers a fix; on acceptance it becomes the reference for the next ones.
    public mutating func consider(_ fix: LocationFix, inBackground: Bool) -> Decision {
        guard fix.horizontalAccuracy >= 0, fix.coordinate.lat.isFinite, fix.coordinate.lon.isFinite else {
            return .rejected(.invalid)
        }
        let accuracyLimit = inBackground ? policy.backgroundAccuracy : policy.foregroundAccuracy
        guard fix.horizontalAccuracy <= accuracyLimit else { return .rejected(.inaccurate) }
        if let last = lastAccepted {
            let distance = Sphere.distance(last.coordinate, fix.coordinate)
            guard distance >= (inBackground ? policy.backgroundDistance : policy.foregroundDistance) else {
                return .rejected(.tooClose)
            }
            guard fix.timestamp.timeIntervalSince(last.timestamp) > policy.minimumInterval else {
                return .rejected(.tooSoon)
            }
        }
        lastAccepted = fix
        return .accepted
    }

    /// The app came back to the foreground: as the original, the next fix counts as a first.
    public mutating func resume() {
        lastAccepted = nil
    }
}
