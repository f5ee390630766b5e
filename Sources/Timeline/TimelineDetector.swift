import Foundation
import Geo

/// Turns a user's track into visits and trips: pure and deterministic (the same positions give
/// the same timeline), no I/O, no clock.
///
/// A visit is found by growing a stay from a position: the positions after it that fall within
/// `visitRadius` of the stay's centre (the mean so far) join it; up to `outlierTolerance`
/// positions in a row outside are passed over as jitter; a pause in the data is no end while
/// the next position is back at the place. A stay that lasts `minimalParkingDuration` is a
/// visit; a shorter one (a red light, a station passed through) is part of the move. Two visits
/// at the same place joined by a short move are one. Between visits the positions are trips,
/// split where the data pauses longer than `minimalNoDataDuration` (a gap), each with its
/// distance along the track, speeds and a mode guessed from its moving speed.
public enum TimelineDetector {
    /// The timeline of `track` (in any order; positions off the globe or less precise than
    /// `maximumAccuracy` are not used).
    public static func entries(_ track: [TrackFix], settings: TimelineSettings = TimelineSettings()) -> [TimelineEntry]
    {
        let fixes = usable(track, settings)
        guard !fixes.isEmpty else { return [] }
        let stays = merged(stays(fixes, settings), fixes, settings)
        var out: [TimelineEntry] = []
        var previousLast: Int?
        for stay in stays {
            // The move before this visit: from the previous visit's last position to this one's first.
            if let previousLast {
                out += moves(fixes, from: previousLast, through: stay.first, settings)
            } else if stay.first > 0 {
                out += moves(fixes, from: 0, through: stay.first, settings)
            }
            out.append(.visit(visit(stay, fixes, settings)))
            previousLast = stay.last
        }
        out += moves(fixes, from: previousLast ?? 0, through: fixes.count - 1, settings)
        // Before the first visit and after the last, a few metres of jitter are no trip.
        func negligible(_ entry: TimelineEntry?) -> Bool {
            guard !stays.isEmpty, case let .trip(trip)? = entry else { return false }
            return trip.distance < settings.minimalTripDistance
        }
        if negligible(out.first) { out.removeFirst() }
        if negligible(out.last) { out.removeLast() }
        return out
    }

    // MARK: Positions

    static func usable(_ track: [TrackFix], _ settings: TimelineSettings) -> [TrackFix] {
        let kept = track.enumerated().filter { _, fix in
            let c = fix.coordinate
            return c.lat.isFinite && c.lon.isFinite && abs(c.lat) <= 90 && abs(c.lon) <= 180
                && (fix.accuracy ?? 0) <= settings.maximumAccuracy
        }
        // In time order; for one time, the order given (a stable sort).
        let ordered = kept.sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        return despiked(ordered, settings)
    }

    /// Without the positions that jump away and straight back (a reflection off a building, a
    /// wrong Wi-Fi fix): farther than `visitRadius` from both neighbours, with the way through
    /// them more than three times the way between the neighbours (a turn sharper than about
    /// 140°). They would otherwise cut a visit short or add a detour to a trip. The first and
    /// last positions are judged by the two after (before) them.
    static func despiked(_ fixes: [TrackFix], _ settings: TimelineSettings) -> [TrackFix] {
        guard fixes.count >= 3 else { return fixes }
        func spike(_ here: TrackFix, _ a: TrackFix, _ b: TrackFix) -> Bool {
            let toA = Sphere.distance(here.coordinate, a.coordinate)
            let toB = Sphere.distance(here.coordinate, b.coordinate)
            return toA > settings.visitRadius && toB > settings.visitRadius
                && toA + toB > 3 * Sphere.distance(a.coordinate, b.coordinate)
        }
        var out: [TrackFix] = []
        if !spike(fixes[0], fixes[1], fixes[2]) { out.append(fixes[0]) }
        for index in 1..<fixes.count - 1 {
            let before = out.last ?? fixes[index - 1]
            if !spike(fixes[index], before, fixes[index + 1]) { out.append(fixes[index]) }
        }
        let n = fixes.count
        if !spike(fixes[n - 1], fixes[n - 2], fixes[n - 3]) { out.append(fixes[n - 1]) }
        return out
    }

    // MARK: Stays

    /// A stay's positions (`first...last`, some between passed over as jitter) and its centre.
    struct Stay {
        /// The positions in it, in order (positions passed over as jitter are not).
        var members: [Int]
        var sum: (x: Double, y: Double, z: Double)

        var first: Int { members[0] }
        var last: Int { members[members.count - 1] }
        var count: Int { members.count }

        init(_ index: Int, _ fix: TrackFix) {
            members = [index]
            sum = Sphere.unitVector(fix.coordinate)
        }

        mutating func add(_ index: Int, _ fix: TrackFix) {
            let v = Sphere.unitVector(fix.coordinate)
            sum = (sum.x + v.x, sum.y + v.y, sum.z + v.z)
            members.append(index)
        }

        mutating func absorb(_ other: Stay) {
            sum = (sum.x + other.sum.x, sum.y + other.sum.y, sum.z + other.sum.z)
            members += other.members
        }

        /// The mean position (the normalised sum of unit vectors: right across the antimeridian too).
        var centre: Coordinate {
            let length = (sum.x * sum.x + sum.y * sum.y + sum.z * sum.z).squareRoot()
            guard length > 0 else { return Coordinate(lon: 0, lat: 0) }
            let (x, y, z) = (sum.x / length, sum.y / length, sum.z / length)
            return Coordinate(lon: atan2(y, x) * 180 / .pi, lat: asin(max(-1, min(1, z))) * 180 / .pi)
        }
    }

    static func stays(_ fixes: [TrackFix], _ settings: TimelineSettings) -> [Stay] {
        var found: [Stay] = []
        var i = 0
        while i < fixes.count {
            var stay = trimmed(grown(Stay(i, fixes[i]), fixes, settings), fixes, settings)
            // Grown on with the centre trimming settled on (the way in pulled the first one off
            // the place, and may have ended the growing early), until that adds nothing.
            var rounds = 0
            while rounds < 8 {
                let again = trimmed(grown(stay, fixes, settings), fixes, settings)
                if again.members == stay.members { break }
                stay = again
                rounds += 1
            }
            let duration = Double(fixes[stay.last].time - fixes[stay.first].time) / 1000
            if stay.count >= 2 && duration >= settings.minimalParkingDuration {
                found.append(stay)
                i = stay.last + 1
            } else {
                i += 1
            }
        }
        return found
    }

    /// The stay with the positions after it that fall within the radius of its centre (the
    /// mean so far), passing over up to `outlierTolerance` in a row that do not.
    static func grown(_ start: Stay, _ fixes: [TrackFix], _ settings: TimelineSettings) -> Stay {
        var stay = start
        var centre = stay.centre
        var misses = 0
        var j = stay.last + 1
        while j < fixes.count {
            if Sphere.distance(centre, fixes[j].coordinate) <= settings.visitRadius {
                stay.add(j, fixes[j])
                centre = stay.centre
                misses = 0
            } else {
                misses += 1
                if misses > settings.outlierTolerance { break }
            }
            j += 1
        }
        return stay
    }

    /// The stay as its final centre sees it: every position of its time within the radius
    /// (those passed over while the centre was still moving too), without the first and last
    /// while they are farther than half the radius — the way in and the way out, not the place.
    /// Repeated (at most three times) while that moves the centre: a slow walk in pulls it
    /// towards the way in.
    static func trimmed(_ stay: Stay, _ fixes: [TrackFix], _ settings: TimelineSettings) -> Stay {
        var current = stay
        for _ in 0..<3 {
            let centre = current.centre
            let members = (current.first...current.last).filter {
                Sphere.distance(centre, fixes[$0].coordinate) <= settings.visitRadius
            }
            guard !members.isEmpty else { return current }
            var first = members.startIndex, last = members.endIndex - 1
            let near = settings.visitRadius / 2
            while first < last, Sphere.distance(centre, fixes[members[first]].coordinate) > near { first += 1 }
            while last > first, Sphere.distance(centre, fixes[members[last]].coordinate) > near { last -= 1 }
            var kept = Stay(members[first], fixes[members[first]])
            for index in members[first...last].dropFirst() { kept.add(index, fixes[index]) }
            if kept.members == current.members { break }
            current = kept
        }
        return current
    }

    /// Visits at one place joined by a short move become one.
    static func merged(_ stays: [Stay], _ fixes: [TrackFix], _ settings: TimelineSettings) -> [Stay] {
        var out: [Stay] = []
        for stay in stays {
            if let previous = out.last,
                Sphere.distance(previous.centre, stay.centre) <= settings.visitRadius
            {
                let between = Array(fixes[previous.last...stay.first])
                let distance = trackLength(between)
                let duration = Double(fixes[stay.first].time - fixes[previous.last].time) / 1000
                if distance < settings.minimalTripDistance || duration < settings.minimalTripDuration {
                    out[out.count - 1].absorb(stay)
                    continue
                }
            }
            out.append(stay)
        }
        return out
    }

    static func visit(_ stay: Stay, _ fixes: [TrackFix], _ settings: TimelineSettings) -> Visit {
        let centre = stay.centre
        // Positions passed over as jitter (beyond the radius) are not in the spread.
        let spread =
            stay.members.map { Sphere.distance(centre, fixes[$0].coordinate) }
            .filter { $0 <= settings.visitRadius }.max() ?? 0
        return Visit(
            start: fixes[stay.first].time, end: fixes[stay.last].time, centre: centre, spread: spread,
            fixes: stay.count)
    }

    // MARK: Moves

    /// The trips (and gaps) of `fixes[from...through]`.
    static func moves(_ fixes: [TrackFix], from: Int, through: Int, _ settings: TimelineSettings) -> [TimelineEntry] {
        guard through > from else { return [] }
        var out: [TimelineEntry] = []
        var start = from
        for index in from..<through {
            let pause = Double(fixes[index + 1].time - fixes[index].time) / 1000
            guard pause > settings.minimalNoDataDuration else { continue }
            if index > start { out.append(.trip(trip(fixes[start...index], settings))) }
            out.append(.gap(start: fixes[index].time, end: fixes[index + 1].time))
            start = index + 1
        }
        if through > start { out.append(.trip(trip(fixes[start...through], settings))) }
        return out
    }

    static func trip(_ fixes: ArraySlice<TrackFix>, _ settings: TimelineSettings) -> Trip {
        // Positions within `stopRadius` of the one that began a halt are one point (GPS jitter
        // adds no distance). A halt whose last position is barely away from its first
        // (slower than `speedThreshold`) is standing still — a red light, a station — and its
        // time is not moving time; a slow walk's halts are not.
        struct Halt {
            var at: Coordinate
            var arrived: Int64
            var left: Int64
            var last: Coordinate
            func standing(below speed: Double) -> Bool {
                left - arrived > 0 && Sphere.distance(at, last) / (Double(left - arrived) / 1000) < speed
            }
        }
        var halts: [Halt] = []
        for fix in fixes {
            if let last = halts.last, Sphere.distance(last.at, fix.coordinate) <= settings.stopRadius {
                halts[halts.count - 1].left = fix.time
                halts[halts.count - 1].last = fix.coordinate
            } else {
                halts.append(Halt(at: fix.coordinate, arrived: fix.time, left: fix.time, last: fix.coordinate))
            }
        }
        var distance = 0.0
        var movingDistance = 0.0
        var movingSeconds = 0.0
        var speeds: [Double] = []
        for (a, b) in zip(halts, halts.dropFirst()) {
            let d = Sphere.distance(a.at, b.at)
            let seconds = Double(b.arrived - (a.standing(below: settings.speedThreshold) ? a.left : a.arrived)) / 1000
            distance += d
            let speed = seconds > 0 ? d / seconds : 0
            speeds.append(speed)
            if seconds > 0 && speed >= settings.speedThreshold {
                movingDistance += d
                movingSeconds += seconds
            }
        }
        // The highest speed held over two steps in a row: one stray position makes no spike.
        var maxSpeed = speeds.count == 1 ? speeds[0] : 0
        for (a, b) in zip(speeds, speeds.dropFirst()) { maxSpeed = max(maxSpeed, min(a, b)) }
        let first = fixes.first!, last = fixes.last!
        let duration = Double(last.time - first.time) / 1000
        let moving = movingSeconds > 0 ? movingDistance / movingSeconds : 0
        maxSpeed = max(maxSpeed, moving)  // a few positions far apart: at least the moving speed
        return Trip(
            start: first.time, end: last.time, from: first.coordinate, to: last.coordinate, distance: distance,
            averageSpeed: duration > 0 ? distance / duration : 0, movingSpeed: moving, maxSpeed: maxSpeed,
            mode: mode(forMovingSpeed: moving, settings: settings), fixes: fixes.count)
    }

    /// The mode a trip moving at `movingSpeed` (m/s) is taken for.
    public static func mode(forMovingSpeed movingSpeed: Double, settings: TimelineSettings) -> TravelMode {
        switch movingSpeed {
        case ..<settings.walkingSpeed: .walking
        case ..<settings.cyclingSpeed: .cycling
        case ..<settings.drivingSpeed: .driving
        default: .trainOrFlight
        }
    }

    /// Metres along the positions, in order.
    static func trackLength(_ fixes: [TrackFix]) -> Double {
        zip(fixes, fixes.dropFirst()).reduce(0) { $0 + Sphere.distance($1.0.coordinate, $1.1.coordinate) }
    }
}
