import Foundation
import Geo
import LTTestSupport
import Testing
import Timeline

/// Visits and trips found in generated days whose answer is known: stays at places (GPS jitter,
/// a position thrown hundreds of metres by a reflection, cell-tower positions kilometres off,
/// the phone silent for hours at one place) and moves between them on foot, by bike, by car
/// (red lights, a traffic stop) and by train (stations passed through), positions every few
/// seconds to two minutes. The detector must find every stay as one visit at its place and
/// every move as one trip of its length and mode, whatever the seed.
@Suite("Timeline detection")
struct TimelineDetectorTests {
    /// A generated day: the positions, and what was really done.
    struct Day {
        struct Stay {
            var place: Coordinate
            var start: Int64
            var end: Int64
        }
        struct Move {
            var mode: TravelMode
            /// Along the noise-free positions taken (from the last at one place to the first at
            /// the next): what a perfect reading of these positions measures.
            var length: Double
            var start: Int64
            var end: Int64
        }
        var fixes: [TrackFix] = []
        var stays: [Stay] = []
        var moves: [Move] = []
    }

    /// Metres east and north of `origin`.
    static func offset(_ origin: Coordinate, east: Double, north: Double) -> Coordinate {
        Coordinate(
            lon: origin.lon + east / (111_320 * cos(origin.lat * .pi / 180)), lat: origin.lat + north / 111_320)
    }

    /// A normally distributed number (Box–Muller), seeded.
    static func gaussian(_ rng: inout SeededRandom) -> Double {
        let u = Double.random(in: Double.ulpOfOne..<1, using: &rng)
        let v = Double.random(in: 0..<1, using: &rng)
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
    }

    static func jittered(_ c: Coordinate, metres: Double, _ rng: inout SeededRandom) -> Coordinate {
        offset(c, east: gaussian(&rng) * metres, north: gaussian(&rng) * metres)
    }

    static func generateDay(seed: Int, legs: Int = 6) -> Day {
        var rng = SeededRandom(seed: UInt64(seed))
        let city = Coordinate(lon: 13.4, lat: 52.5)
        var places: [Coordinate] = []
        while places.count < 5 {
            let candidate = offset(
                city, east: Double.random(in: -12_000...12_000, using: &rng),
                north: Double.random(in: -12_000...12_000, using: &rng))
            if places.allSatisfy({ Sphere.distance($0, candidate) > 1_500 }) { places.append(candidate) }
        }
        var day = Day()
        var time: Int64 = 1_717_225_200_000  // 2024-06-01 07:00 UTC
        var here = 0
        func add(_ c: Coordinate, accuracy: Double) {
            day.fixes.append(TrackFix(time: time, latitude: c.lat, longitude: c.lon, accuracy: accuracy))
        }
        for leg in 0..<legs {
            // A stay: 8 minutes to 3 hours, positions every 30 s to 2 min.
            let stayStart = time
            var stayEnd = time + Int64.random(in: 480_000...10_800_000, using: &rng)
            let silent = Bool.random(using: &rng) ? time + (stayEnd - time) / 3 : nil  // the phone silent for 2 hours
            var silentDone = false
            var atPlace = 0
            while time <= stayEnd {
                // Stray positions anywhere but at a stay's very start and end (there, next to a
                // fast move, one cannot be told from the way in or out: docs/timeline.md).
                atPlace += 1
                let inside = atPlace > 2 && time + 240_000 < stayEnd
                let roll = inside ? Int.random(in: 0..<60, using: &rng) : 2
                if roll == 0 {
                    // A reflection: one position hundreds of metres off, claiming to be good.
                    add(jittered(offset(places[here], east: 350, north: -200), metres: 50, &rng), accuracy: 25)
                } else if roll == 1 {
                    add(jittered(offset(places[here], east: -2_500, north: 1_800), metres: 300, &rng), accuracy: 1_800)
                } else {
                    add(jittered(places[here], metres: 12, &rng), accuracy: Double.random(in: 5...40, using: &rng))
                }
                if let silent, !silentDone, time >= silent {
                    // Silent for two hours at the place, then seen there again.
                    time += 7_200_000
                    stayEnd += 7_200_000
                    silentDone = true
                    continue
                }
                time += Int64.random(in: 30_000...120_000, using: &rng)
            }
            let lastAtPlace = day.fixes.last!.time
            day.stays.append(.init(place: places[here], start: stayStart, end: lastAtPlace))
            guard leg < legs - 1 else { break }
            // A move to another place, through a waypoint.
            var next = Int.random(in: 0..<places.count, using: &rng)
            if next == here { next = (next + 1) % places.count }
            var mode = TravelMode.allCases.randomElement(using: &rng)!
            // Trains and planes go between places far apart, not round the corner.
            if mode == .trainOrFlight && Sphere.distance(places[here], places[next]) < 8_000 { mode = .driving }
            let speed: Double
            let interval: ClosedRange<Int64>
            switch mode {
            case .walking: (speed, interval) = (1.3, 10_000...30_000)
            case .cycling: (speed, interval) = (4.5, 10_000...30_000)
            case .driving: (speed, interval) = (12, 5_000...20_000)
            case .trainOrFlight: (speed, interval) = (45, 5_000...20_000)
            }
            let a = places[here], b = places[next]
            let middle = Coordinate(lon: (a.lon + b.lon) / 2, lat: (a.lat + b.lat) / 2)
            let bend = offset(
                middle, east: Double.random(in: -1_500...1_500, using: &rng),
                north: Double.random(in: -1_500...1_500, using: &rng))
            let path = [a, bend, b]
            let length = Sphere.distance(a, bend) + Sphere.distance(bend, b)
            // Cars stop at red lights (30–100 s); nothing else stops.
            var stops: [(at: Double, seconds: Int64)] = []
            if mode == .driving {
                // At most one light in each fifth of the way: lights close together would add up to a stop.
                for fifth in [0, 1, 2, 3, 4].shuffled(using: &rng).prefix(Int.random(in: 1...4, using: &rng)) {
                    let at = (Double(fifth) + Double.random(in: 0.3...0.7, using: &rng)) / 5 * length
                    stops.append((at, Int64.random(in: 30...100, using: &rng)))
                }
                stops.sort { $0.at < $1.at }
            }
            let moveStart = lastAtPlace
            time = lastAtPlace + Int64.random(in: 20_000...60_000, using: &rng)
            var sampled = [a]
            var clock = Double(time - lastAtPlace) / 1000 * speed  // metres covered when the first position is taken
            while clock < length {
                if let stop = stops.first, clock >= stop.at {
                    // Standing at the light: positions while it is red.
                    let position = point(on: path, at: stop.at)
                    var waited: Int64 = 0
                    while waited < stop.seconds * 1000 {
                        add(jittered(position, metres: 6, &rng), accuracy: 8)
                        let step = Int64.random(in: interval, using: &rng)
                        waited += step
                        time += step
                    }
                    stops.removeFirst()
                    clock = stop.at
                }
                sampled.append(point(on: path, at: clock))
                add(jittered(sampled.last!, metres: 6, &rng), accuracy: 8)
                let step = Int64.random(in: interval, using: &rng)
                time += step
                clock += Double(step) / 1000 * speed
            }
            sampled.append(b)
            let measurable = zip(sampled, sampled.dropFirst()).reduce(0) { $0 + Sphere.distance($1.0, $1.1) }
            day.moves.append(.init(mode: mode, length: measurable, start: moveStart, end: time))
            here = next
        }
        return day
    }

    /// The point `metres` along a polyline.
    static func point(on path: [Coordinate], at metres: Double) -> Coordinate {
        var left = metres
        for (a, b) in zip(path, path.dropFirst()) {
            let d = Sphere.distance(a, b)
            if left <= d {
                let f = d > 0 ? left / d : 0
                return Coordinate(lon: a.lon + (b.lon - a.lon) * f, lat: a.lat + (b.lat - a.lat) * f)
            }
            left -= d
        }
        return path.last!
    }

    @Test("Generated days: every stay is one visit at its place and time, every move one trip of its length and mode", arguments: 0..<100)
    func knownDays(seed: Int) throws {
        let day = Self.generateDay(seed: seed)
        let entries = TimelineDetector.entries(day.fixes)
        let visits = entries.compactMap { if case let .visit(v) = $0 { v } else { nil } }
        let trips = entries.compactMap { if case let .trip(t) = $0 { t } else { nil } }
        #expect(!entries.contains { if case .gap = $0 { true } else { false } }, "a silent phone at one place is no gap")
        try #require(visits.count == day.stays.count, "seed \(seed): \(visits.count) visits for \(day.stays.count) stays")
        for (visit, stay) in zip(visits, day.stays) {
            #expect(Sphere.distance(visit.centre, stay.place) < 25, "seed \(seed): a visit's centre off its place")
            #expect(abs(visit.start - stay.start) <= 150_000, "seed \(seed): a visit starts at \(visit.start), the stay at \(stay.start)")
            #expect(abs(visit.end - stay.end) <= 150_000, "seed \(seed): a visit ends at \(visit.end), the stay at \(stay.end)")
        }
        try #require(trips.count == day.moves.count, "seed \(seed): \(trips.count) trips for \(day.moves.count) moves")
        for (trip, move) in zip(trips, day.moves) {
            #expect(trip.mode == move.mode, "seed \(seed): a \(move.mode) trip taken for \(trip.mode) (\(trip.movingSpeed) m/s)")
            #expect(abs(trip.distance - move.length) / move.length < 0.08, "seed \(seed): \(trip.distance) m for \(move.length) m")
            #expect(trip.maxSpeed >= trip.movingSpeed * 0.9 && trip.averageSpeed <= trip.movingSpeed + 1e-9)
        }
        // Visits and trips alternate, in time order, each trip from one visit's end to the next's start.
        for (a, b) in zip(entries, entries.dropFirst()) {
            #expect(a.end <= b.start)
            switch (a, b) {
            case (.visit, .trip), (.trip, .visit): break
            default: Issue.record("seed \(seed): \(a) followed by \(b)")
            }
        }
    }

    @Test("The same positions in any order, or twice, give the same timeline")
    func deterministic() {
        var rng = SeededRandom(seed: 5)
        for seed in 100..<110 {
            let day = Self.generateDay(seed: seed)
            let once = TimelineDetector.entries(day.fixes)
            #expect(TimelineDetector.entries(day.fixes.shuffled(using: &rng)) == once)
            #expect(TimelineDetector.entries(day.fixes) == once)
        }
    }

    @Test("A red light, a station passed through and a slow walk past are no visits; a pause at one place is one visit; a pause between places is a gap")
    func edgeCases() {
        let origin = Coordinate(lon: 13.4, lat: 52.5)
        var fixes: [TrackFix] = []
        var time: Int64 = 0
        func at(_ c: Coordinate, _ step: Int64 = 10_000) {
            fixes.append(TrackFix(time: time, latitude: c.lat, longitude: c.lon, accuracy: 10))
            time += step
        }
        // A slow walk (1 m/s) past a spot, then 20 minutes at home, a drive east with a
        // 2-minute red light, 20 minutes at work.
        for k in 0..<60 { at(Self.offset(origin, east: -700 + Double(k) * 10, north: 300)) }
        for _ in 0..<40 { at(origin, 30_000) }
        for k in 1...120 { at(Self.offset(origin, east: Double(k) * 100, north: 0)) }
        for _ in 0..<12 { at(Self.offset(origin, east: 12_000, north: 0)) }
        for k in 121...240 { at(Self.offset(origin, east: Double(k) * 100, north: 0)) }
        let work = Self.offset(origin, east: 24_000, north: 0)
        for _ in 0..<40 { at(work, 30_000) }
        var entries = Array(TimelineDetector.entries(fixes).dropFirst())  // the walk's trip
        #expect(entries.count == 3, "\(entries)")
        if case let .trip(trip) = entries[1] {
            #expect(trip.mode == .driving && abs(trip.distance - 24_000) < 200)
            #expect(trip.movingSpeed > trip.averageSpeed, "the stop is left out of the moving speed")
        } else {
            Issue.record("no trip between home and work")
        }
        // Silent for 9 hours at work, then 20 more minutes there: still one visit.
        time += 9 * 3_600_000
        for _ in 0..<40 { at(work, 30_000) }
        entries = Array(TimelineDetector.entries(fixes).dropFirst())
        #expect(entries.count == 3)
        if case let .visit(visit) = entries[2] { #expect(visit.duration > 9 * 3_600) }
        // Then silent for 5 hours and seen 40 km away: the move is a gap, not a 5-hour walk.
        time += 5 * 3_600_000
        let away = Self.offset(origin, east: 64_000, north: 0)
        for _ in 0..<40 { at(away, 30_000) }
        let all = TimelineDetector.entries(fixes)
        if case let .trip(walk) = all.first { #expect(walk.mode == .walking && walk.fixes >= 60) } else {
            Issue.record("the slow walk is no trip: \(String(describing: all.first))")
        }
        entries = Array(all.dropFirst())
        #expect(entries.count == 5, "\(entries)")
        if entries.count == 5 {
            #expect(entries[3] == .gap(start: entries[2].end, end: entries[4].start))
        }
    }

    @Test("Random tracks: entries in time order, visits long enough and tight, trips' figures consistent", arguments: 0..<20)
    func invariants(seed: Int) {
        var rng = SeededRandom(seed: UInt64(1_000 + seed))
        var fixes: [TrackFix] = []
        var position = Coordinate(lon: Double.random(in: -179...179, using: &rng), lat: Double.random(in: -80...80, using: &rng))
        var time: Int64 = 1_700_000_000_000
        for _ in 0..<Int.random(in: 0...600, using: &rng) {
            if Int.random(in: 0..<4, using: &rng) > 0 {
                position = Self.offset(
                    position, east: Double.random(in: -200...200, using: &rng), north: Double.random(in: -200...200, using: &rng))
            }
            time += Int64.random(in: 0...900_000, using: &rng)
            fixes.append(
                TrackFix(
                    time: time, latitude: position.lat, longitude: position.lon,
                    accuracy: Bool.random(using: &rng) ? nil : Double.random(in: 1...400, using: &rng)))
        }
        let settings = TimelineSettings()
        let entries = TimelineDetector.entries(fixes, settings: settings)
        for (a, b) in zip(entries, entries.dropFirst()) { #expect(a.end <= b.start) }
        for entry in entries {
            #expect(entry.start <= entry.end)
            switch entry {
            case let .visit(visit):
                #expect(visit.duration >= settings.minimalParkingDuration && visit.fixes >= 2)
                #expect(visit.spread <= settings.visitRadius)
            case let .trip(trip):
                #expect(trip.distance >= 0 && trip.fixes >= 2)
                #expect(trip.averageSpeed <= trip.movingSpeed + 1e-9 || trip.movingSpeed == 0)
                #expect(trip.mode == TimelineDetector.mode(forMovingSpeed: trip.movingSpeed, settings: settings))
            case let .gap(start, end):
                #expect(Double(end - start) / 1000 > settings.minimalNoDataDuration)
            }
        }
    }

    @Test("Settings out of range are refused, naming the setting")
    func settings() throws {
        var settings = TimelineSettings()
        #expect(try settings.validated() == settings)
        settings.visitRadius = 1
        let refused = #expect(throws: TimelineError.self) { try settings.validated() }
        #expect(refused?.reason == "visitRadius must be between 10.0 and 5000.0")
        settings = TimelineSettings()
        settings.cyclingSpeed = 1
        #expect(throws: TimelineError.self) { try settings.validated() }
    }
}

