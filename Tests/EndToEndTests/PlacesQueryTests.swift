import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

@Suite("lt places query: places near a position or in a box from a running server, negative coordinates as values")
struct PlacesQueryTests {
    @Test("Nearest first within a radius, in a box, beyond the antipodes' reach; the server's order; errors before and from the server")
    func query() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let app = "http://127.0.0.1:\(s.appPort)"
        func ids(_ path: String) async throws -> [String] {
            try await s.app(.GET, path).json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        // The original app's query: within 4,023.35 m (2.5 miles) of its test position, nearest first.
        let near = try TestServer.runLT(["places", "query", "--near", "37.49453457,-122.30464079", "--radius", "4023.35", "--app", app])
        #expect(near.status == 0, "\(near.errors)")
        let lines = near.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "   2.7 km  Edgewood Park Natural Preserve       37.47226,-122.31625  place-edgewood-park-natural-preserve", "\(near.output)")
        let expected = try await ids("/api/places?lat=37.49453457&lon=-122.30464079&radius=4023.35&relation=contains&nearest=true&limit=10")
        #expect(!expected.isEmpty && lines.map { String($0.split(separator: " ").last!) } == expected)

        // A box with negative longitudes, given after a space as typed; the same places as the API's.
        let box = try TestServer.runLT(["places", "query", "--bbox", "-122.5,37.4,-122.2,37.6", "--limit", "50"], environment: ["LT_APP_URL": app])
        #expect(box.status == 0, "\(box.errors)")
        #expect(box.output.split(separator: "\n").map { String($0.split(separator: " ").last!) } == (try await ids("/api/places?bbox=-122.5,37.4,-122.2,37.6&limit=50")))
        // South and east: nothing there, said plainly; the JSON answer for scripts.
        let sydney = try TestServer.runLT(["places", "query", "--near", "-33.87,151.21", "--radius", "1000", "--app", app])
        #expect(sydney.status == 0 && sydney.output == "no places within 1000 m of -33.87,151.21\n", "\(sydney.output)\(sydney.errors)")
        let nearest = try TestServer.runLT(["places", "query", "--lat", "-33.87", "--lon", "151.21", "--limit", "2", "--json", "--app", app])
        #expect(nearest.status == 0 && (try? JSON.parse(Array(nearest.output.utf8)))?["rows"]?.arrayValue?.count == 2, "\(nearest.errors)")

        // Refused before asking (usage errors), or with the server's reason.
        for (arguments, message) in [
            (["--lat", "95", "--lon", "0"], "Error: A latitude is from -90 to 90 and a longitude from -180 to 180"),
            (["--near", "37.5"], "Error: --near is LAT,LON, two numbers: --near 37.4945,-122.3046 (not 37.5)"),
            (["--near", "37.5,-122.3", "--bbox", "-122.5,37.4,-122.2,37.6"], "Error: Give a centre or a box, not both"),
            (["--bbox", "-122.5,37.4,-122.2,37.6", "--radius", "100"], "Error: --radius goes with a centre (--near)"),
            ([], "Error: Give a centre (--near LAT,LON) or a box (--bbox minLon,minLat,maxLon,maxLat)"),
        ] {
            let refused = try TestServer.runLT(["places", "query", "--app", app] + arguments)
            #expect(refused.status == 64 && refused.errors.hasPrefix(message + "\n"), "\(arguments): \(refused.errors)")
        }
        let bad = try TestServer.runLT(["places", "query", "--bbox", "1,2,3", "--app", app])
        #expect(bad.status == 1 && bad.errors.contains("GET /api/places: 400 `bbox` must be four numbers: minLon,minLat,maxLon,maxLat"), "\(bad.errors)")
    }
}
