public import Foundation
public import Geo

/// A small deterministic random generator (SplitMix64): the same seed gives the same drive.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// Standard normal (Box–Muller).
    public mutating func gaussian() -> Double {
        let u = max(unit(), .leastNonzeroMagnitude)
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * unit())
    }
}

/// A route replayed as a phone's GPS would report it: one fix a second of route time, moved
/// by realistic noise, with the accuracy the receiver would claim and, now and then, a poor fix
/// (as under bridges and between tall buildings).
public struct SimulatedDrive: Sendable {
    /// A span of route time, in seconds from the start.
    public struct Window: Sendable, Equatable {
        public var start: TimeInterval
        public var end: TimeInterval
        public init(start: TimeInterval, end: TimeInterval) {
            self.start = start
            self.end = end
        }
        public func contains(_ t: TimeInterval) -> Bool { t >= start && t < end }
    }

    /// One simulated fix and the device's situation when it came.
    public struct Step: Sendable {
        /// Seconds of route time since the start.
        public var elapsed: TimeInterval
        public var fix: LocationFix
        /// The true position (before noise).
        public var truth: Coordinate
    }

    public let route: [TrackPoint]
    /// Metres per second along routes without times.
    public var vehicleSpeed: Double = 25
    /// Typical horizontal error in metres (0: exact positions).
    public var noise: Double = 0
    /// Share of fixes that are poor (accuracy 30–150 m).
    public var poorFixRate: Double = 0.03
    public var seed: UInt64 = 1
    /// When route time starts.
    public var start = Date(timeIntervalSince1970: 1_700_000_000)

    public init(route: [TrackPoint]) {
        self.route = route
    }

    /// Route time from the first point to the last, in seconds.
    public var duration: TimeInterval { timeline.last ?? 0 }

    /// Route time of each route point: its own times when every point has one, else distance
    /// over `vehicleSpeed`.
    var timeline: [TimeInterval] {
        guard let first = route.first else { return [] }
        if let t0 = first.time, route.allSatisfy({ $0.time != nil }),
            zip(route, route.dropFirst()).allSatisfy({ $0.time! <= $1.time! })
        {
            return route.map { $0.time!.timeIntervalSince(t0) }
        }
        var elapsed = [0.0]
        for (a, b) in zip(route, route.dropFirst()) {
            elapsed.append(elapsed.last! + Sphere.distance(a.coordinate, b.coordinate) / max(vehicleSpeed, 0.1))
        }
        return elapsed
    }

    /// The fixes, one per second of route time, in order.
    public func steps() -> [Step] {
        let times = timeline
        guard let end = times.last else { return [] }
        var random = SeededGenerator(seed: seed)
        var steps: [Step] = []
        steps.reserveCapacity(Int(end) + 1)
        var segment = 0
        var t = 0.0
        var previous: Coordinate?
        while t <= end {
            while segment < times.count - 2, times[segment + 1] < t { segment += 1 }
            let a = route[segment].coordinate, b = route[min(segment + 1, route.count - 1)].coordinate
            let span = times[min(segment + 1, times.count - 1)] - times[segment]
            let f = span > 0 ? min(1, max(0, (t - times[segment]) / span)) : 0
            let truth = Coordinate(lon: a.lon + (b.lon - a.lon) * f, lat: a.lat + (b.lat - a.lat) * f)
            let (reported, accuracy) = noisy(truth, &random)
            let speed = previous.map { Sphere.distance($0, truth) } ?? 0
            let course = previous.map { SimulatedDrive.bearing(from: $0, to: truth) } ?? -1
            previous = truth
            steps.append(
                Step(
                    elapsed: t,
                    fix: LocationFix(
                        coordinate: reported, horizontalAccuracy: accuracy,
                        timestamp: start.addingTimeInterval(t), speed: speed, course: course),
                    truth: truth))
            t += 1
        }
        return steps
    }

    /// The reported position and accuracy for a true position.
    func noisy(_ truth: Coordinate, _ random: inout SeededGenerator) -> (Coordinate, Double) {
        guard noise > 0 else { return (truth, 5) }
        let poor = random.unit() < poorFixRate
        let accuracy = poor ? 30 + random.unit() * 120 : max(3, noise * (0.6 + 0.8 * random.unit()))
        // Errors per axis with a spread of half the claimed accuracy: most fixes fall within it.
        let north = random.gaussian() * accuracy / 2, east = random.gaussian() * accuracy / 2
        let lat = truth.lat + north / 111_195
        let lon = truth.lon + east / (111_195 * max(0.01, cos(truth.lat * .pi / 180)))
        return (
            Coordinate(lon: lon > 180 ? lon - 360 : lon < -180 ? lon + 360 : lon, lat: min(90, max(-90, lat))), accuracy
        )
    }

    static func bearing(from a: Coordinate, to b: Coordinate) -> Double {
        let φ1 = a.lat * .pi / 180, φ2 = b.lat * .pi / 180, dλ = (b.lon - a.lon) * .pi / 180
        let y = sin(dλ) * cos(φ2), x = cos(φ1) * sin(φ2) - sin(φ1) * cos(φ2) * cos(dλ)
        let degrees = atan2(y, x) * 180 / .pi
        return degrees < 0 ? degrees + 360 : degrees
    }

    /// Parses windows written as `10m-15m,30m-32m30s` (also `90s-2m`, `1h-1h5m`, or plain seconds).
    public static func windows(_ text: String) throws -> [Window] {
        try text.split(separator: ",").map { part in
            let ends = part.split(separator: "-", maxSplits: 1).map { String($0).trimmingCharacters(in: .whitespaces) }
            guard ends.count == 2, let start = duration(ends[0]), let end = duration(ends[1]), end > start else {
                throw TrackerKitError.unreadableTrack(
                    "A window is START-END with END after START, as 10m-15m or 90s-2m30s (got \(part))")
            }
            return Window(start: start, end: end)
        }
    }

    /// `1h2m3s`, `15m`, `90s`, `90` (seconds).
    public static func duration(_ text: String) -> TimeInterval? {
        if let seconds = Double(text), seconds >= 0 { return seconds }
        var total = 0.0, number = "", sawUnit = false
        for character in text {
            if character.isNumber || character == "." { number.append(character); continue }
            guard let value = Double(number) else { return nil }
            switch character {
            case "h": total += value * 3600
            case "m": total += value * 60
            case "s": total += value
            default: return nil
            }
            number = ""
            sawUnit = true
        }
        return number.isEmpty && sawUnit ? total : nil
    }
}
