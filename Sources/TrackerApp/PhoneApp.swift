import CouchJSON
import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird

/// The installable tracker app (`/app/`: a progressive web app for phones), served from the
/// package's `App` folder as it is — no build step: the page, its scripts, the service worker
/// that lets it open offline, the web app manifest and icons.
struct PhoneAppFiles: Sendable {
    let files: [String: [UInt8]]
    static let names = [
        "index.html", "app.js", "store.js", "import-history.js", "app.css", "sw.js", "manifest.webmanifest", "icon.svg",
        "icon-192.png",
        "icon-512.png",
    ]
    /// Scripts, styles, the manifest and the worker from this server only (Leaflet positions
    /// with inline styles); map tiles from `tiles`; the app talks to this server's API and to
    /// `database` (the origin of the database it syncs with); no framing.
    static func contentSecurityPolicy(database: String, tiles: String) -> String {
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:\(tiles); "
            + "connect-src 'self' \(database); manifest-src 'self'; worker-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    }

    init() {
        files = TrackerHTTP.packageFiles(Self.names, in: "App")
    }

    /// The file at `/app/<name>`; nil when there is none. `database`: the origin the app syncs
    /// with; `tiles`: the tile server's.
    func response(_ name: String, database: String, tiles: String) -> Response? {
        let name = name.isEmpty ? "index.html" : name
        guard let bytes = files[name] else { return nil }
        // Always asked again (the service worker keeps the copy for offline starts), so an
        // updated server's app is what opens next.
        var response = TrackerHTTP.file(bytes, name: name, cache: false)
        if name == "index.html" {
            response.headers[HTTPField.Name("Content-Security-Policy")!] = Self.contentSecurityPolicy(
                database: database, tiles: tiles)
            response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        }
        return response
    }
}

extension TrackerHTTP {
    /// `GET /app/...`: a file of the tracker app, the map's configuration (`config.json`: the
    /// dashboard's), or Leaflet (`vendor/...`, as the dashboard's).
    func phoneAppFile(_ request: Request) throws -> Response {
        let path = CouchURL.segments(request.uri.path)
        if path.count == 2, path[1] == "config.json" { return TrackerHTTP.reply(assets.config) }
        if path.count >= 3, path[1] == "vendor",
            let file = vendorFile(
                path[2...].joined(separator: "/"),
                acceptsGzip: request.headers[.acceptEncoding]?.contains("gzip") ?? false)
        {
            return file
        }
        let database =
            service.databaseLocation.map {
                let location = $0(); return "\(location.scheme)://\(location.host)"
            }
            ?? "\(service.ownDatabaseScheme)://\(TrackerHTTP.hostname(request.head.authority)):\(databasePort())"
        guard path.first == "app", path.count <= 2,
            let file = phoneApp.response(path.count == 2 ? path[1] : "", database: database, tiles: assets.tileSource)
        else {
            throw TrackerService.Failure(404, "not_found", "missing")
        }
        return file
    }
}
