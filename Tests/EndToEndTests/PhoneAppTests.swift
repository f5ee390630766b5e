import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing
import TrackerKit

/// The installable tracker app at `/app/` on a real `lt serve`, and what it shares with
/// TrackerKit. (The app itself runs in Chromium: Tests/Browser/test_app.py.)
@Suite("Tracker app (/app/)")
struct PhoneAppTests {
    static let appDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/TrackerApp/App")

    @Test("The app's location filter constants are TrackerKit's LocationPolicy.original")
    func filterConstantsAreTrackerKits() throws {
        let source = try String(contentsOf: Self.appDirectory.appendingPathComponent("store.js"), encoding: .utf8)
        func constant(_ name: String) -> Double? {
            guard let range = source.range(of: "\(name): ") else { return nil }
            return Double(source[range.upperBound...].prefix { $0.isNumber || $0 == "." })
        }
        let policy = LocationPolicy.original
        #expect(constant("foregroundAccuracy") == policy.foregroundAccuracy)
        #expect(constant("backgroundAccuracy") == policy.backgroundAccuracy)
        #expect(constant("foregroundDistance") == policy.foregroundDistance)
        #expect(constant("backgroundDistance") == policy.backgroundDistance)
        #expect(constant("minimumInterval") == policy.minimumInterval)
    }

    @Test("Served from /app/: the page with its security policy, scripts, worker, manifest and icons; a manifest that makes it installable")
    func served() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let page = try await s.app(.GET, "/app/")
        #expect(page.status == 200 && page.text.contains("<link rel=\"manifest\" href=\"manifest.webmanifest\">"))
        let policy = page.headers.first(name: "Content-Security-Policy") ?? ""
        // Scripts from this server only; images also from the tile server (OpenStreetMap's by default).
        #expect(policy.contains("script-src 'self';") && policy.contains("worker-src 'self'") && policy.contains("img-src 'self' data: blob: https://tile.openstreetmap.org;"), "\(policy)")
        #expect(try await s.app(.GET, "/app").status == 200)  // redirected to /app/
        for (name, type) in [("app.js", "text/javascript"), ("store.js", "text/javascript"), ("sw.js", "text/javascript"), ("app.css", "text/css"),
                             ("manifest.webmanifest", "application/manifest+json"), ("icon.svg", "image/svg+xml"), ("icon-192.png", "image/png")] {
            let file = try await s.app(.GET, "/app/\(name)")
            #expect(file.status == 200 && file.headers.first(name: "Content-Type")?.hasPrefix(type) == true, "\(name)")
        }
        let manifest = try await s.app(.GET, "/app/manifest.webmanifest").json
        #expect(manifest["start_url"] == "/app/" && manifest["scope"] == "/app/" && manifest["display"] == "standalone" && manifest["name"] != nil)
        // Chromium installs a web app with a 192 and a 512 pixel PNG icon: check the PNGs' own sizes.
        for size in [192, 512] {
            #expect(manifest["icons"]?.arrayValue?.contains { $0["sizes"] == .string("\(size)x\(size)") && $0["type"] == "image/png" } == true)
            let png = try await s.app(.GET, "/app/icon-\(size).png").body
            let width = png[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = png[20..<24].reduce(0) { $0 << 8 | Int($1) }
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && width == size && height == size)
        }
        for path in ["/app/secret.txt", "/app/../server.json", "/app/a/b.js", "/app/vendor/../../etc/passwd"] {
            #expect(try await s.app(.GET, path).status == 404, "\(path)")
        }
        // The map: the dashboard's configuration and Leaflet, from this server.
        let config = try await s.app(.GET, "/app/config.json").json
        let leaflet = try #require(config["leaflet"]?.stringValue)
        #expect(try await s.app(.GET, "/app/" + leaflet).status == 200)
        // The page may reach the database it syncs with, and nothing else.
        #expect(policy.contains("connect-src 'self' http://127.0.0.1:\(s.port);"), "\(policy)")
    }

    @Test("The database API takes CORS requests from this server's own application origin (the app syncs from the browser), and from no other")
    func corsForOwnApplication() async throws {
        let s = try TestServer()
        defer { s.stop() }
        func allowed(_ origin: String) async throws -> String? {
            let preflight = try await s.request(.OPTIONS, "/lt_places/_bulk_docs", auth: .none, headers: [
                ("Origin", origin), ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "authorization, content-type"),
            ])
            return preflight.headers.first(name: "Access-Control-Allow-Origin")
        }
        #expect(try await allowed("http://127.0.0.1:\(s.appPort)") == "http://127.0.0.1:\(s.appPort)")
        let answer = try await s.request(.GET, "/", auth: .none, headers: [("Origin", "http://127.0.0.1:\(s.appPort)")])
        #expect(answer.headers.first(name: "Access-Control-Allow-Origin") == "http://127.0.0.1:\(s.appPort)")
        for other in ["http://evil.example:\(s.appPort)", "http://127.0.0.1:\(s.appPort + 1)", "http://127.0.0.1", "null",
                      "http://127.0.0.1:\(s.appPort)/path", "file://127.0.0.1:\(s.appPort)",
                      "https://127.0.0.1:\(s.appPort)"] {  // this server serves plain HTTP: an https page there is not its own
            #expect(try await allowed(other) == nil, "\(other)")
        }
        // --database-only serves no application: no origin of its own.
        let alone = try TestServer(databaseOnly: true)
        defer { alone.stop() }
        let preflight = try await alone.request(.OPTIONS, "/", auth: .none, headers: [("Origin", "http://127.0.0.1:8080"), ("Access-Control-Request-Method", "GET")])
        #expect(preflight.headers.first(name: "Access-Control-Allow-Origin") == nil)
    }
}
