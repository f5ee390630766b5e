import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing
import TrackerKit

@Suite("Location filtering, as the original app did it")
struct LocationMonitorTests {
    let start = Coordinate(lon: -122.3, lat: 37.49)
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// A point `metres` north of `start` (exact: along a meridian).
    func north(_ metres: Double) -> Coordinate {
        Coordinate(lon: start.lon, lat: start.lat + metres / Sphere.radius * 180 / .pi)
    }

    func fix(_ c: Coordinate, accuracy: Double = 5, after seconds: Double = 0) -> LocationFix {
        LocationFix(coordinate: c, horizontalAccuracy: accuracy, timestamp: t0.addingTimeInterval(seconds))
    }

    @Test("Accuracy: 25 m in the foreground and 100 m in the background are accepted, a hair more is not; negative is invalid")
    func accuracy() {
        for (background, limit) in [(false, 25.0), (true, 100.0)] {
            var monitor = LocationMonitor()
            #expect(monitor.consider(fix(start, accuracy: limit.nextUp), inBackground: background) == .rejected(.inaccurate))
            #expect(monitor.consider(fix(start, accuracy: -1), inBackground: background) == .rejected(.invalid))
            #expect(monitor.consider(fix(start, accuracy: limit), inBackground: background) == .accepted)
        }
        // The background limit does not apply in the foreground.
        var monitor = LocationMonitor()
        #expect(monitor.consider(fix(start, accuracy: 60), inBackground: false) == .rejected(.inaccurate))
        #expect(monitor.consider(fix(start, accuracy: 60), inBackground: true) == .accepted)
    }

    @Test("Distance: 15 m (foreground) and 100 m (background) from the last kept fix are enough, a centimetre less is not")
    func distance() {
        for (background, minimum) in [(false, 15.0), (true, 100.0)] {
            var monitor = LocationMonitor()
            #expect(monitor.consider(fix(start), inBackground: background) == .accepted)  // the first fix, always
            #expect(monitor.consider(fix(north(minimum - 0.01), after: 60), inBackground: background) == .rejected(.tooClose))
            #expect(monitor.consider(fix(north(minimum + 1e-6), after: 60), inBackground: background) == .accepted)
        }
    }

    @Test("Time: a fix exactly 15 s after the last kept one is too soon, one just after is not")
    func interval() {
        var monitor = LocationMonitor()
        #expect(monitor.consider(fix(start), inBackground: false) == .accepted)
        #expect(monitor.consider(fix(north(50), after: 15), inBackground: false) == .rejected(.tooSoon))
        #expect(monitor.consider(fix(north(50), after: 15.001), inBackground: false) == .accepted)
        // Rejected fixes do not move the reference: distance and time count from the last kept one.
        #expect(monitor.consider(fix(north(60), after: 40), inBackground: false) == .rejected(.tooClose))
        #expect(monitor.consider(fix(north(66), after: 41), inBackground: false) == .accepted)
    }

    @Test("Coming back to the foreground makes the next fix a first one")
    func resume() {
        var monitor = LocationMonitor()
        #expect(monitor.consider(fix(start), inBackground: false) == .accepted)
        #expect(monitor.consider(fix(north(1), after: 1), inBackground: false) == .rejected(.tooClose))
        monitor.resume()
        #expect(monitor.consider(fix(north(1), after: 1), inBackground: false) == .accepted)
    }

    @Test("On random walks, any two consecutive kept fixes are far enough apart and more than 15 s apart", arguments: [1, 2, 3])
    func keptFixesRespectThePolicy(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var monitor = LocationMonitor()
        var kept: [(LocationFix, Bool)] = []
        var position = start
        var time = 0.0
        for _ in 0..<5000 {
            let background = random.next() % 5 == 0
            time += Double(random.next() % 20)
            position = Coordinate(lon: position.lon + (Double(random.next() % 200) - 100) * 1e-6, lat: position.lat + (Double(random.next() % 200) - 100) * 1e-6)
            let f = fix(position, accuracy: Double(random.next() % 130) - 5, after: time)
            if monitor.consider(f, inBackground: background) == .accepted { kept.append((f, background)) }
        }
        #expect(kept.count > 10)
        for ((a, _), (b, background)) in zip(kept, kept.dropFirst()) {
            #expect(Sphere.distance(a.coordinate, b.coordinate) >= (background ? 100 : 15))
            #expect(b.timestamp.timeIntervalSince(a.timestamp) > 15)
            #expect(b.horizontalAccuracy >= 0 && b.horizontalAccuracy <= (background ? 100 : 25))
        }
    }

    @Test("Location and place documents keep the original shapes, with session_id set")
    func documents() throws {
        let doc = LocationDoc(fix: fix(start), username: "alice", background: true, sessionID: "s-1")
        let json = doc.json
        #expect(json["type"] == "Feature" && json["created_at"] == .int(1_700_000_000_000))
        #expect(json["geometry"] == ["type": "Point", "coordinates": [.double(start.lon), .double(start.lat)]])
        #expect(json["properties"] == ["username": "alice", "timestamp": .int(1_700_000_000_000), "background": true, "session_id": "s-1"])
        #expect(LocationDoc(json: json) == doc)
        // A fix's time with a fraction of a millisecond (as CoreLocation gives it): whole milliseconds.
        var odd = fix(start)
        odd.timestamp = Date(timeIntervalSince1970: 1_700_000_000.123_456)
        let rounded = LocationDoc(fix: odd, username: "alice", background: false, sessionID: nil).json
        #expect(rounded["created_at"] == .int(1_700_000_000_123) && rounded["properties"]?["timestamp"] == .int(1_700_000_000_123))
        #expect(rounded["created_at"]?.text == "1700000000123")
        let place = try #require(PlaceDoc(json: try JSON.parse(Array(#"{"_id":"p1","type":"Feature","name":"Rancho San Antonio","geometry":{"type":"Point","coordinates":[-122.0854231,37.3325034]},"created_at":5}"#.utf8))))
        #expect(place.name == "Rancho San Antonio" && place.coordinate.lat == 37.3325034 && PlaceDoc(json: place.json) == place)
        // A place imported from a GeoJSON file keeps its name in properties; stored, created_at is whole ms.
        let imported = try #require(PlaceDoc(json: try JSON.parse(Array(#"{"_id":"art-1","type":"Feature","properties":{"name":"Fountain"},"geometry":{"type":"Point","coordinates":[-122.3,37.49]}}"#.utf8))))
        #expect(imported.name == "Fountain" && place.json.text.contains(#""created_at":5"#) && !place.json.text.contains(#""created_at":5."#))
    }
}

@Suite("Places near the user, offline")
struct OfflinePlacesTests {
    /// The 50 sample places shipped in data/sample-places.json.
    func samplePlaces() throws -> [PlaceDoc] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("data/sample-places.json")
        let json = try JSON.parse(Array(try Data(contentsOf: url)))
        return (json["places"]?.arrayValue ?? []).enumerated().compactMap { i, place in
            var object = place.objectValue ?? [:]
            object["_id"] = .string("place-\(i)")
            return PlaceDoc(json: .object(object))
        }
    }

    /// Brute force: every place within `radius` of `center`, nearest first (ties by id), ids only.
    func oracle(_ places: [PlaceDoc], _ center: Coordinate, _ radius: Double, limit: Int = .max) -> [String] {
        var within: [(id: String, distance: Double)] = []
        for place in places {
            let d = Sphere.distance(center, place.coordinate)
            if d <= radius { within.append((place.id ?? "", d)) }
        }
        within.sort { a, b in a.distance != b.distance ? a.distance < b.distance : a.id < b.id }
        return within.prefix(limit).map { $0.id }
    }

    func ids(_ answer: [(place: PlaceDoc, distance: Double)]) -> [String] {
        answer.map { $0.place.id ?? "" }
    }

    @Test("The original query answers offline exactly what brute force over the sample places says, nearest first")
    func originalQuery() throws {
        let places = try samplePlaces()
        #expect(places.count == 50)
        let offline = OfflinePlaces(places)
        let center = Coordinate(lon: -122.30464079, lat: 37.49453457)
        let answer = offline.near(center, radius: 4023.35)
        #expect(!answer.isEmpty)
        #expect(ids(answer) == oracle(places, center, 4023.35))
    }

    @Test("Random centres and radii agree with brute force", arguments: [7, 8])
    func randomQueries(seed: UInt64) throws {
        let places = try samplePlaces()
        let offline = OfflinePlaces(places)
        var random = SeededRandom(seed: seed)
        for _ in 0..<200 {
            let anchor = places[Int(random.next() % UInt64(places.count))].coordinate
            let center = Coordinate(lon: anchor.lon + (Double(random.next() % 2000) - 1000) * 1e-4, lat: anchor.lat + (Double(random.next() % 2000) - 1000) * 1e-4)
            let radius = Double(random.next() % 30_000) + 1
            let limit = Int(random.next() % 20) + 1
            #expect(ids(offline.near(center, radius: radius, limit: limit)) == oracle(places, center, radius, limit: limit))
        }
    }
}

@Suite("The device's local store, on real SQLite files")
struct LocalStoreTests {
    @Test("Locations come back newest 100, oldest first; places are kept once; logging out wipes both; data survives reopening")
    func store() async throws {
        let directory = try TemporaryDirectory("lt-device-store")
        defer { directory.cleanup() }
        let local = try LocalStore(directory: directory.url)
        for i in 0..<150 {
            try await local.save(LocationDoc(coordinate: Coordinate(lon: -122.3 + Double(i) * 1e-4, lat: 37.49),
                                             timestamp: 1_700_000_000_000 + Double(i) * 20_000, username: "alice", background: false, sessionID: "s"))
        }
        let recent = try await local.recentLocations()
        #expect(recent.count == 100)
        #expect(recent.first?.timestamp == 1_700_000_000_000 + 50 * 20_000 && recent.last?.timestamp == 1_700_000_000_000 + 149 * 20_000)
        #expect(recent.allSatisfy { $0.id != nil && $0.sessionID == "s" })
        let place = PlaceDoc(id: "p1", name: "Rancho San Antonio", coordinate: Coordinate(lon: -122.0854231, lat: 37.3325034), createdAt: 1)
        try await local.remember([place, place])
        var renamed = place
        renamed.name = "changed"
        try await local.remember([renamed])
        let kept = try await local.allPlaces()
        #expect(kept == [place])

        let reopened = try LocalStore(directory: directory.url)
        let all = try await reopened.recentLocations(limit: 1000)
        #expect(all.count == 150)
        try await reopened.wipe()
        let afterWipe = try await reopened.recentLocations()
        let placesAfterWipe = try await reopened.allPlaces()
        #expect(afterWipe.isEmpty && placesAfterWipe.isEmpty)
    }
}
