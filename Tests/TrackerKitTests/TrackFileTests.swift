import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing
import TrackerKit

@Suite("Tracks and routes from files: GPX, GeoJSON, OwnTracks")
struct TrackFileTests {
    @Test("GPX: track points with time, elevation and speed; routes and way points when there is no track; bad input is a clear error")
    func gpx() throws {
        let track = """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">
              <wpt lat="1" lon="2"><name>ignored: a track follows</name></wpt>
              <trk><name>morning</name><trkseg>
                <trkpt lat="37.4945" lon="-122.3046"><ele>12.5</ele><time>2024-05-01T10:00:00Z</time><speed>3.5</speed></trkpt>
                <trkpt lat="37.4950" lon="-122.3050"><time>2024-05-01T10:00:30.250Z</time><hdop>2</hdop></trkpt>
              </trkseg></trk>
            </gpx>
            """
        let points = try TrackFile.read(Data(track.utf8))
        #expect(points.count == 2)
        #expect(points[0].coordinate == Coordinate(lon: -122.3046, lat: 37.4945))
        #expect(points[0].altitude == 12.5 && points[0].speed == 3.5)
        #expect(points[0].time == Date(timeIntervalSince1970: 1_714_557_600))
        #expect(abs(points[1].time!.timeIntervalSince1970 - 1_714_557_630.25) < 0.001)
        #expect(points[1].accuracy == 10)

        let route = #"<gpx><rte><rtept lat="10" lon="20"/><rtept lat="11" lon="21"/></rte><wpt lat="1" lon="2"/></gpx>"#
        #expect(try TrackFile.read(Data(route.utf8)).map(\.coordinate) == [Coordinate(lon: 20, lat: 10), Coordinate(lon: 21, lat: 11)])
        #expect(try TrackFile.read(Data(#"<gpx><wpt lat="1" lon="2"/></gpx>"#.utf8)).count == 1)

        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"<gpx><trk><trkseg><trkpt lat="95" lon="0"/></trkseg></trk></gpx>"#.utf8)) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data("<gpx><trk>".utf8), format: .gpx) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data("<gpx></gpx>".utf8)) }
    }

    @Test("GeoJSON: Point features with times, LineStrings with coordTimes, the shipped lat/lng route list; other shapes are errors")
    func geoJSON() throws {
        let features: JSON = ["type": "FeatureCollection", "features": [
            ["type": "Feature", "geometry": ["type": "Point", "coordinates": [-122.3, 37.5]],
             "properties": ["timestamp": 1_714_557_600_000, "accuracy": 8]],
            ["type": "Feature", "geometry": ["type": "LineString", "coordinates": [[-122.31, 37.51], [-122.32, 37.52]]],
             "properties": ["coordTimes": ["2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z"]]],
            ["type": "Feature", "geometry": .null, "properties": [:]],
        ]]
        let points = try TrackFile.read(Data(features.bytes))
        #expect(points.map(\.coordinate) == [Coordinate(lon: -122.3, lat: 37.5), Coordinate(lon: -122.31, lat: 37.51), Coordinate(lon: -122.32, lat: 37.52)])
        #expect(points[0].time == Date(timeIntervalSince1970: 1_714_557_600) && points[0].accuracy == 8)
        #expect(points[2].time == Date(timeIntervalSince1970: 1_714_557_720))

        let shipped = try Data(contentsOf: TrackFileTests.repository.appendingPathComponent("data/freeway-drive.json"))
        let route = try TrackFile.read(shipped)
        #expect(route.count == 224 && route[0].coordinate == Coordinate(lon: -122.03254703, lat: 37.33527476))

        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1]]]}"#.utf8)) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"{"type":"Point","coordinates":[0,95]}"#.utf8)) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"{"type":"FeatureCollection","features":[]}"#.utf8)) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data("{not json".utf8), format: .geojson) }
    }

    @Test("OwnTracks: one message, a list, the recorder API's data, recorder .rec lines; other message types are skipped")
    func ownTracks() throws {
        let message = #"{"_type":"location","lat":52.5,"lon":13.4,"tst":1714557600,"acc":12,"alt":40,"vel":36,"cog":90,"tid":"ph"}"#
        let one = try TrackFile.read(Data(message.utf8))
        #expect(one == [TrackPoint(coordinate: Coordinate(lon: 13.4, lat: 52.5), time: Date(timeIntervalSince1970: 1_714_557_600),
                                   accuracy: 12, altitude: 40, speed: 10, course: 90)])
        let list = "[\(message), {\"_type\":\"transition\",\"event\":\"enter\"}, {\"_type\":\"location\",\"lat\":52.6,\"lon\":13.5,\"tst\":1714557660}]"
        #expect(try TrackFile.read(Data(list.utf8)).count == 2)
        #expect(try TrackFile.read(Data("{\"count\":1,\"data\":[\(message)]}".utf8), format: .owntracks).count == 1)
        let rec = """
            2024-05-01T10:00:00Z\t*                 \t\(message)
            2024-05-01T10:01:00Z\tlwt               \t{"_type":"lwt","tst":1714557660}
            2024-05-01T10:02:00Z\t*                 \t{"_type":"location","lat":52.7,"lon":13.6,"tst":1714557720}

            """
        #expect(TrackFile.detect(Data(rec.utf8)) == .owntracks)
        #expect(try TrackFile.read(Data(rec.utf8)).map(\.coordinate.lat) == [52.5, 52.7])
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"{"_type":"location","lon":13.4}"#.utf8)) }
        #expect(throws: TrackerKitError.self) { try TrackFile.read(Data(#"[{"_type":"waypoint"}]"#.utf8)) }
    }

    @Test("Content detection: XML is GPX, _type messages are OwnTracks, other JSON is GeoJSON, anything else is unknown")
    func detection() {
        #expect(TrackFile.detect(Data("\u{FEFF}  <gpx/>".utf8)) == .gpx)
        #expect(TrackFile.detect(Data(#"[{"_type":"location"}]"#.utf8)) == .owntracks)
        #expect(TrackFile.detect(Data(#"{"type":"Point"}"#.utf8)) == .geojson)
        #expect(TrackFile.detect(Data("hello".utf8)) == nil)
        #expect(TrackFile.detect(Data()) == nil)
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

@Suite("Simulated drives")
struct SimulatedDriveTests {
    let route = [TrackPoint(coordinate: Coordinate(lon: -122.3, lat: 37.5)), TrackPoint(coordinate: Coordinate(lon: -122.3, lat: 37.51)),
                 TrackPoint(coordinate: Coordinate(lon: -122.29, lat: 37.51))]

    @Test("One fix a second along the route at the vehicle's speed; without noise, exactly on it")
    func exact() {
        var drive = SimulatedDrive(route: route)
        drive.vehicleSpeed = 20
        let length = Sphere.distance(route[0].coordinate, route[1].coordinate) + Sphere.distance(route[1].coordinate, route[2].coordinate)
        #expect(abs(drive.duration - length / 20) < 1e-6)
        let steps = drive.steps()
        #expect(steps.count == Int(drive.duration) + 1)
        #expect(steps.first?.fix.coordinate == route[0].coordinate)
        for (a, b) in zip(steps, steps.dropFirst()) {
            #expect(b.elapsed - a.elapsed == 1 && b.fix.timestamp.timeIntervalSince(a.fix.timestamp) == 1)
            #expect(b.fix.coordinate == b.truth && b.fix.horizontalAccuracy == 5)
            // 20 m a second, less only where the route turns within the second.
            #expect(Sphere.distance(a.truth, b.truth) <= 20.001)
        }
    }

    @Test("Routes with times keep their own pace")
    func timed() {
        let t0 = Date(timeIntervalSince1970: 1_000)
        let timed = [TrackPoint(coordinate: Coordinate(lon: 0, lat: 0), time: t0), TrackPoint(coordinate: Coordinate(lon: 0, lat: 0.001), time: t0.addingTimeInterval(100))]
        let steps = SimulatedDrive(route: timed).steps()
        #expect(steps.count == 101)
        #expect(abs(steps[50].truth.lat - 0.0005) < 1e-12)
    }

    @Test("Noise: the same seed gives the same fixes; errors mostly within the claimed accuracy; some poor fixes", arguments: [3, 4])
    func noise(seed: Int) {
        var drive = SimulatedDrive(route: route)
        drive.noise = 8
        drive.seed = UInt64(seed)
        let steps = drive.steps()
        #expect(steps.map(\.fix) == drive.steps().map(\.fix))
        var other = drive
        other.seed += 1
        #expect(steps.map(\.fix) != other.steps().map(\.fix))
        let within = steps.filter { Sphere.distance($0.fix.coordinate, $0.truth) <= $0.fix.horizontalAccuracy }.count
        #expect(Double(within) / Double(steps.count) > 0.7)
        #expect(steps.allSatisfy { $0.fix.horizontalAccuracy >= 3 && $0.fix.horizontalAccuracy <= 150 })
        #expect(steps.contains { $0.fix.horizontalAccuracy > 25 })
    }

    @Test("Windows and durations as the command line writes them")
    func windows() throws {
        #expect(try SimulatedDrive.windows("10m-15m,30m-32m30s") == [.init(start: 600, end: 900), .init(start: 1800, end: 1950)])
        #expect(try SimulatedDrive.windows("90-1h") == [.init(start: 90, end: 3600)])
        #expect(SimulatedDrive.duration("1h2m3s") == 3723 && SimulatedDrive.duration("15") == 15)
        #expect(SimulatedDrive.duration("5x") == nil && SimulatedDrive.duration("m") == nil && SimulatedDrive.duration("") == nil)
        #expect(throws: TrackerKitError.self) { try SimulatedDrive.windows("15m-10m") }
        #expect(throws: TrackerKitError.self) { try SimulatedDrive.windows("10m") }
        let window = SimulatedDrive.Window(start: 600, end: 900)
        #expect(window.contains(600) && !window.contains(900))
    }
}

/// TrackerKit's one error type: its kinds, what they say, and that they are told apart.
@Suite("TrackerKit's errors")
struct TrackerKitErrorTests {
    @Test("Each kind is told apart and says what went wrong; a file that is not a track is an unreadable track")
    func kinds() throws {
        let answer = TrackerKitError.serverAnswer(status: 409, error: "conflict", reason: "Document update conflict.")
        #expect(answer.isServerAnswer && !answer.isUnreadableTrack && !answer.isKeychain && !answer.isLocationService)
        #expect("\(answer)" == "409 conflict: Document update conflict.")
        #expect("\(TrackerKitError.serverAnswer(status: 401, error: "unauthorized", reason: nil))" == "401 unauthorized")
        let keychain = TrackerKitError.keychain(status: -25300)
        #expect(keychain.isKeychain && keychain.status == -25300 && "\(keychain)" == "Keychain error -25300")
        let location = TrackerKitError.locationService("denied")
        #expect(location.isLocationService && "\(location)" == "denied")
        #expect(answer != TrackerKitError.serverAnswer(status: 409, error: "conflict", reason: nil))
        do {
            _ = try TrackFile.read(Data("<gpx></gpx>".utf8))
            Issue.record("an empty GPX file was read")
        } catch let error as TrackerKitError {
            #expect(error.isUnreadableTrack && error.reason == "The gpx file holds no positions")
        }
    }
}
