import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import NIOHTTP1

/// `lt analysis`: everyone's locations on a running server, for admins and analysts (the
/// application API's `/api/analysis/...`).
struct Analysis: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export locations (by user, time and area) and per-user statistics from a running server.",
        subcommands: [Export.self, Stats.self])

    static let appHelp: ArgumentHelp =
        "The application API with an admin's or analyst's credentials, e.g. http://ann:secret@127.0.0.1:8080 (or LT_APP_URL)."

    /// The client for `--app` (or `LT_APP_URL`).
    static func client(_ app: String?) throws -> AdminClient {
        try AdminClient(app, environment: "LT_APP_URL", who: "an admin's or analyst's")
    }

    /// The export formats of `/api/analysis/locations`.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case geojson, csv, gpx
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stream locations as GeoJSON, CSV or GPX, to a file or standard output.",
            discussion:
                "Filters combine: a user, a time window, and an area (a bounding box, or a centre and radius). The server streams the export, and so does this command: a million points are never held in memory."
        )

        @Option(help: Analysis.appHelp)
        var app: String?

        @Option(help: "Only this user's locations.")
        var user: String?

        @Option(
            help:
                "Only fixes at or after this time: milliseconds since 1970, or ISO 8601 (2026-11-01, 2026-11-01T08:00:00Z)."
        )
        var from: String?

        @Option(help: "Only fixes before this time (same forms as --from).")
        var to: String?

        @OptionGroup var area: AreaOptions

        @Option(help: "geojson, csv or gpx.")
        var format: Format = .geojson

        @Option(name: .shortAndLong, help: "Write to this file instead of standard output.")
        var output: String?

        func validate() throws {
            let radiusParts = [area.lat == nil, area.lon == nil, area.radius == nil]
            if radiusParts.contains(true), radiusParts.contains(false) {
                throw ValidationError("A radius filter needs all of --lat, --lon and --radius")
            }
            if area.bbox != nil, area.radius != nil {
                throw ValidationError("Give --bbox or --lat/--lon/--radius, not both")
            }
        }

        func run() async throws {
            let client = try Analysis.client(app)
            var query: [(String, String)] = [("format", format.rawValue)]
            if let user { query.append(("user", user)) }
            if let from { query.append(("from", try Analysis.milliseconds(from, option: "--from"))) }
            if let to { query.append(("to", try Analysis.milliseconds(to, option: "--to"))) }
            if let bbox = area.bbox { query.append(("bbox", bbox)) }
            if let lat = area.lat, let lon = area.lon, let radius = area.radius {
                query += [("lat", "\(lat)"), ("lon", "\(lon)"), ("radius", "\(radius)")]
            }
            var components = URLComponents()
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
            let path = "/api/analysis/locations" + (components.percentEncodedQuery.map { "?" + $0 } ?? "")

            let handle: FileHandle
            if let output {
                guard FileManager.default.createFile(atPath: output, contents: nil) else {
                    throw CommandFailure("Cannot write \(output)")
                }
                handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            } else {
                handle = FileHandle.standardOutput
            }
            defer { if output != nil { try? handle.close() } }
            // Progress on standard error every few seconds while a long export runs.
            let start = ContinuousClock.now
            var reported = start
            let written: Int
            do {
                written = try await client.download(path, to: handle) { bytes in
                    let now = ContinuousClock.now
                    guard now - reported >= .seconds(5) else { return }
                    reported = now
                    FileHandle.standardError.write(Data("  \(Analysis.megabytes(bytes)) so far\n".utf8))
                }
            } catch {
                if let output { try? FileManager.default.removeItem(atPath: output) }
                throw error
            }
            if let output {
                let seconds = start.duration(to: .now).seconds
                FileHandle.standardError.write(
                    Data(
                        String(
                            format: "wrote %@ of %@ to %@ in %.1f s\n", Analysis.megabytes(written), format.rawValue,
                            output, seconds
                        ).utf8))
            }
        }
    }

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A user's count of fixes, first and last fix, and distance travelled, as JSON.")

        @Argument(help: "The user.")
        var user: String

        @Option(help: Analysis.appHelp)
        var app: String?

        func run() async throws {
            let client = try Analysis.client(app)
            let path = "/api/analysis/users/" + CouchURL.encode(user) + "/stats"
            print(try await client.send(.GET, path).text)
        }
    }

    /// A time option as milliseconds since 1970: a number as it is, or an ISO 8601 date or
    /// date and time (UTC unless it says otherwise).
    static func milliseconds(_ text: String, option: String) throws -> String {
        if let number = Double(text), number.isFinite, abs(number) < 1e18 { return String(Int64(number)) }
        let withTime = ISO8601DateFormatter()
        withTime.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let withoutFraction = ISO8601DateFormatter()
        let dateOnly = ISO8601DateFormatter()
        dateOnly.formatOptions = [.withFullDate]
        guard let date = withTime.date(from: text) ?? withoutFraction.date(from: text) ?? dateOnly.date(from: text)
        else {
            throw ValidationError(
                "\(option) must be milliseconds since 1970 or an ISO 8601 date (2026-11-01 or 2026-11-01T08:00:00Z), not \(text)"
            )
        }
        return String(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }

    static func megabytes(_ bytes: Int) -> String {
        bytes < 1 << 20 ? "\(bytes) bytes" : String(format: "%.1f MB", Double(bytes) / 1_048_576)
    }
}
