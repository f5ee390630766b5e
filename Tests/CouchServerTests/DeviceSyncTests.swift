import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing
import TrackerKit

/// TrackerKit's store and sync against a real `lt serve`, with the credentials a login returns.
@Suite("Device sync", .serialized, .timeLimit(.minutes(2)))
struct DeviceSyncTests {
    @Test("Fixes filtered on the device are pushed once, requests during a push are coalesced, a second device pulls them; no server means offline")
    func pushPullCoalesce() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.app(.PUT, "/api/users/alice", json: ["password": "pw"])
        let login = try await s.app(.POST, "/api/login", json: ["username": "alice", "password": "pw"]).json
        let server = ServerDatabase(url: "http://\(login["location_db_host"]!.stringValue!)/\(login["location_db_name"]!.stringValue!)",
                                    apiKey: login["api_key"]!.stringValue!, apiPassword: login["api_password"]!.stringValue!)
        let directory = try TemporaryDirectory("lt-device-sync")
        defer { directory.cleanup() }
        let phone = try LocalStore(directory: directory.url.appendingPathComponent("phone"))
        let sync = SyncManager(local: phone, server: server)

        // A walk north, a fix every 10 s, 20 m apart: every other one is kept (15 s rule).
        var monitor = LocationMonitor()
        var kept = 0
        for i in 0..<40 {
            let fix = LocationFix(coordinate: Coordinate(lon: -122.3, lat: 37.49 + Double(i) * 20 / 111_195), horizontalAccuracy: 5,
                                  timestamp: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 10))
            guard monitor.consider(fix, inBackground: false) == .accepted else { continue }
            try await phone.save(LocationDoc(fix: fix, username: "alice", background: false, sessionID: "walk"))
            kept += 1
            await sync.request(.push)  // after each saved location, as the original app
        }
        await sync.waitUntilIdle()
        #expect(kept == 20)
        let pushes = await sync.runs[.push] ?? 0
        #expect(pushes >= 1 && pushes < kept, "requests made while a push ran were coalesced: \(pushes) runs for \(kept) requests")
        #expect(await sync.status == .idle)
        let remote = try await s.request(.GET, "/\(login["location_db_name"]!.stringValue!)/_all_docs", auth: .basic(server.apiKey, server.apiPassword))
        #expect((remote.json["rows"]?.arrayValue ?? []).filter { !($0["id"]?.stringValue ?? "").hasPrefix("_design/") }.count == kept)

        // Another device of the same user pulls them.
        let tablet = try LocalStore(directory: directory.url.appendingPathComponent("tablet"))
        let tabletSync = SyncManager(local: tablet, server: server)
        await tabletSync.request(.pull)
        await tabletSync.waitUntilIdle()
        let pulled = try await tablet.recentLocations(limit: 1000)
        #expect(pulled.count == kept && pulled.allSatisfy { $0.sessionID == "walk" })

        // No server: offline, and nothing lost locally.
        let nowhere = SyncManager(local: phone, server: ServerDatabase(url: "http://127.0.0.1:1/nowhere", apiKey: "k", apiPassword: "p"))
        await nowhere.request(.push)
        await nowhere.waitUntilIdle()
        guard case .offline = await nowhere.status else {
            Issue.record("expected offline, got \(await nowhere.status)")
            return
        }
        #expect(try await phone.recentLocations(limit: 1000).count == kept)
    }
}
