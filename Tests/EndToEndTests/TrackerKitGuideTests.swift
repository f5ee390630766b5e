import CouchJSON
import Foundation
import Geo
import LTTestSupport
import NIOHTTP1
import Testing
import TrackerKit

// guide: begin
func recordAWalk(server: String, storage: URL)
    async throws -> (pushed: Int, pending: Int) {
    // 1. An account on the server, and the credentials of
    //    this user's database there.
    let client = TrackerClient(baseURL: server)
    let (user, password) = ("ada", "correct horse battery")
    try await client.register(username: user, password: password)
    let credentials = try await client.login(
        username: user, password: password)
    let file = storage.appendingPathComponent("credentials.json")
    try FileCredentialStore(url: file).save(credentials)

    // 2. The device's own database, and the tracker that
    //    filters, saves, syncs and finds places.
    let data = storage.appendingPathComponent("data")
    let store = try LocalStore(directory: data)
    let tracker = try await DeviceTracker(
        client: client, credentials: credentials, store: store)
    let home = Coordinate(lon: -122.4194, lat: 37.7749)
    await tracker.start(near: home)

    // 3. Fixes as the location service reports them, one
    //    every 30 s, 55 m apart: each is kept (accurate,
    //    far and late enough after the last one kept).
    let start = Date()
    for step in 0..<10 {
        let fix = LocationFix(
            coordinate: Coordinate(
                lon: home.lon, lat: home.lat + Double(step) * 5e-4),
            horizontalAccuracy: 10,
            timestamp: start + Double(step) * 30)
        let outcome = try await tracker.record(fix)
        guard outcome.decision == .accepted else { continue }
        // outcome.places: the places near it, nearest first.
    }

    // 4. Before the app goes away: push what waits, and say
    //    what is still only on the device.
    return try await tracker.finish()
}
// guide: end

/// TrackerKit's guide (`TrackerKit.docc/GettingStarted.md`): its example is the function above,
/// word for word, and runs as the guide says against a real `lt serve`.
@Suite("TrackerKit's guide")
struct TrackerKitGuideTests {
    /// The lines between two marker lines of `text` (exclusive), or of its first ```swift block.
    static func lines(of text: String, from begin: String, to end: String) -> [Substring] {
        let all = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = all.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == begin }),
              let last = all[(first + 1)...].firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == end }) else { return [] }
        return Array(all[(first + 1)..<last])
    }

    @Test("The guide's example is this test's code, word for word")
    func guideShowsTestedCode() throws {
        let guide = try String(contentsOf: Repository.root.appendingPathComponent("Sources/TrackerKit/TrackerKit.docc/GettingStarted.md"), encoding: .utf8)
        let tested = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let shown = Self.lines(of: guide, from: "```swift", to: "```")
        #expect(shown.count > 20)
        #expect(shown == Self.lines(of: tested, from: "// guide: begin", to: "// guide: end"))
    }

    @Test("The guide's walk: ten fixes kept, saved on the device, all on the server at the end, and the credentials kept")
    func guideRuns() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let storage = try TemporaryDirectory("lt-guide")
        defer { storage.cleanup() }
        let (pushed, pending) = try await recordAWalk(server: "http://127.0.0.1:\(s.appPort)", storage: storage.url)
        #expect(pushed == 10 && pending == 0)
        let rows = try await s.request(.GET, "/lt_locations_user_ada/_all_docs").json["rows"]?.arrayValue ?? []
        #expect(rows.filter { !($0["id"]?.stringValue ?? "").hasPrefix("_design/") }.count == 10)
        let kept = try FileCredentialStore(url: storage.url.appendingPathComponent("credentials.json")).load()
        #expect(kept?.username == "ada" && kept?.databaseName == "lt_locations_user_ada")
        #expect(try await LocalStore(directory: storage.url.appendingPathComponent("data")).recentLocations(limit: 100).count == 10)
    }
}
