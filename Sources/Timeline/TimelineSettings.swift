/// The thresholds that turn a track into visits and trips. Where Traccar's trip and stop
/// reports have a setting that means the same, it has Traccar's name (in seconds and metres
/// here, where Traccar's are in milliseconds); the defaults are for people (on foot, on a bike,
/// in a car or a train), not Traccar's vehicles. docs/timeline.md explains each.
public struct TimelineSettings: Sendable, Equatable, Codable {
    /// A stay shorter than this is no visit: a red light, a level crossing, a station passed
    /// through. Traccar: `minimalParkingDuration` (300 s).
    public var minimalParkingDuration: Double = 300
    /// Positions within this many metres of a stay's centre belong to it.
    public var visitRadius: Double = 100
    /// Two stays at the same place (centres within `visitRadius`) joined by less than this many
    /// metres of track are one visit (a walk to the letterbox, GPS drift). Traccar:
    /// `minimalTripDistance` (500 m for vehicles).
    public var minimalTripDistance: Double = 250
    /// Two stays at the same place joined by a move shorter than this (in seconds) are one
    /// visit. Traccar: `minimalTripDuration` (300 s).
    public var minimalTripDuration: Double = 180
    /// A pause in the data longer than this (seconds) between two positions of a move is a gap
    /// in the timeline, not travel. A pause at one place stays part of the visit there.
    /// Traccar: `minimalNoDataDuration` (3600 s).
    public var minimalNoDataDuration: Double = 3600
    /// Positions whose accuracy is worse than this (metres) are not used (a cell-tower fix
    /// kilometres off).
    public var maximumAccuracy: Double = 200
    /// How many positions in a row may fall outside a stay's radius (jitter, a reflection off
    /// a building) before the stay ends.
    public var outlierTolerance: Int = 2
    /// Positions of a move within this many metres of the one where a halt began are one point
    /// (standing at a light: GPS jitter, neither distance nor moving time).
    public var stopRadius: Double = 25
    /// Below this speed (m/s) between two positions, the time counts as standing, not moving:
    /// the trip's moving speed leaves it out. Traccar: `speedThreshold` (0.01 knots).
    public var speedThreshold: Double = 0.5
    /// The highest moving speeds (m/s) of walking, cycling and driving; faster is a train or
    /// a flight. About 9, 25 and 130 km/h.
    public var walkingSpeed: Double = 2.5
    public var cyclingSpeed: Double = 7
    public var drivingSpeed: Double = 36

    public init() {}

    /// Every value in its sensible range: an error names the first that is not.
    public func validated() throws -> TimelineSettings {
        func check(_ name: String, _ value: Double, _ range: ClosedRange<Double>) throws {
            guard value.isFinite, range.contains(value) else {
                throw TimelineError(reason: "\(name) must be between \(range.lowerBound) and \(range.upperBound)")
            }
        }
        try check("minimalParkingDuration", minimalParkingDuration, 30...86_400)
        try check("visitRadius", visitRadius, 10...5_000)
        try check("minimalTripDistance", minimalTripDistance, 0...100_000)
        try check("minimalTripDuration", minimalTripDuration, 0...86_400)
        try check("minimalNoDataDuration", minimalNoDataDuration, 60...604_800)
        try check("maximumAccuracy", maximumAccuracy, 5...100_000)
        try check("outlierTolerance", Double(outlierTolerance), 0...20)
        try check("stopRadius", stopRadius, 0...visitRadius)
        try check("speedThreshold", speedThreshold, 0...10)
        try check("walkingSpeed", walkingSpeed, 0.5...10)
        try check("cyclingSpeed", cyclingSpeed, walkingSpeed...30)
        try check("drivingSpeed", drivingSpeed, cyclingSpeed...150)
        return self
    }
}

/// Settings that cannot be used, and why.
public struct TimelineError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}
