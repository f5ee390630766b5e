import ArgumentParser
import CommandSupport
import CouchJSON
import CouchProtocol
import Foundation
import Geo
import NIOCore
import NIOHTTP1
import TrackerKit

extension Places {
    /// `lt places query`: places near a position or in a box, from a running server's
    /// application API (`/api/places`, Cloudant Geo's parameters), nearest first.
    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Places near a position (nearest first) or inside a box, from a running server.",
            discussion: """
                Give a centre (--near LAT,LON, or --lat and --lon), with --radius to keep only places within that many metres; \
                or a box (--bbox minLon,minLat,maxLon,maxLat, in GeoJSON's order). Negative values are given as they are: \
                --near -33.87,151.21 or --bbox -122.5,37.2,-121.9,37.8. No password is needed: places are public.
                """)

        @Option(
            name: .customLong("near"), parsing: .unconditional, help: "The centre as LAT,LON (e.g. 37.4945,-122.3046).")
        var near: String?

        @OptionGroup var area: AreaOptions

        @Option(help: "At most this many places (1 to 200).")
        var limit = 10

        @Option(help: "The application API, e.g. http://127.0.0.1:8080 (or LT_APP_URL; that is the default).")
        var app: String?

        @Flag(help: "Print the server's answer as JSON (rows with their documents).")
        var json = false

        /// The centre asked for, from --near or --lat/--lon.
        func centre() throws -> Coordinate? {
            if let near {
                let parts = near.split(separator: ",", omittingEmptySubsequences: false).map {
                    Double($0.trimmingCharacters(in: .whitespaces))
                }
                guard parts.count == 2, let lat = parts[0], let lon = parts[1] else {
                    throw ValidationError("--near is LAT,LON, two numbers: --near 37.4945,-122.3046 (not \(near))")
                }
                return Coordinate(lon: lon, lat: lat)
            }
            return area.lat.flatMap { lat in area.lon.map { Coordinate(lon: $0, lat: lat) } }
        }

        func validate() throws {
            if near != nil, area.lat != nil || area.lon != nil {
                throw ValidationError("Give --near LAT,LON or --lat and --lon, not both")
            }
            if (area.lat == nil) != (area.lon == nil) { throw ValidationError("--lat and --lon go together") }
            let centre = try centre()
            if let centre {
                guard (-90...90).contains(centre.lat), (-180...180).contains(centre.lon) else {
                    throw ValidationError("A latitude is from -90 to 90 and a longitude from -180 to 180")
                }
            }
            if centre == nil, area.bbox == nil {
                throw ValidationError("Give a centre (--near LAT,LON) or a box (--bbox minLon,minLat,maxLon,maxLat)")
            }
            if centre != nil, area.bbox != nil { throw ValidationError("Give a centre or a box, not both") }
            if let radius = area.radius, centre == nil || !(radius.isFinite && radius >= 0) {
                throw ValidationError(
                    centre == nil
                        ? "--radius goes with a centre (--near)" : "--radius is a distance in metres, 0 or more")
            }
            guard (1...200).contains(limit) else { throw ValidationError("--limit is from 1 to 200") }
        }

        func run() async throws {
            let base =
                app ?? ProcessInfo.processInfo.environment["LT_APP_URL"].flatMap { $0.isEmpty ? nil : $0 }
                ?? "http://127.0.0.1:8080"
            let client: CouchHTTPClient
            do { client = try CouchHTTPClient(url: base) } catch {
                throw ValidationError("--app must be a URL such as http://127.0.0.1:8080, not \(base)")
            }
            var query: [(String, String)] = [("include_docs", "true"), ("limit", String(limit))]
            let centre = try centre()
            if let centre {
                query += [("lat", "\(centre.lat)"), ("lon", "\(centre.lon)"), ("nearest", "true")]
                if let radius = area.radius { query += [("radius", "\(radius)"), ("relation", "contains")] }
            } else if let bbox = area.bbox {
                query.append(("bbox", bbox))
            }
            var components = URLComponents()
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
            let path = "/api/places?" + (components.percentEncodedQuery ?? "")
            let reply: CouchHTTPClient.Reply
            do { reply = try await client.send(.GET, path, fromServerRoot: true, timeout: .seconds(60)) } catch {
                throw CommandFailure("cannot reach the application API at \(client.serverURL): \(error)")
            }
            guard reply.ok else {
                throw CommandFailure(
                    "GET /api/places: \(reply.status) \(reply.json["reason"]?.stringValue ?? reply.json["error"]?.stringValue ?? "")"
                )
            }
            if json {
                print(reply.json.text)
                return
            }
            let rows = reply.json["rows"]?.arrayValue ?? []
            guard !rows.isEmpty else {
                print(
                    centre.map { centre in
                        area.radius.map {
                            "no places within \(String(format: "%g", $0)) m of \(centre.lat),\(centre.lon)"
                        } ?? "no places near \(centre.lat),\(centre.lon)"
                    }
                        ?? "no places inside \(area.bbox ?? "")")
                return
            }
            print(Self.table(rows, from: centre))
        }

        /// One line per place: distance from the centre (when there is one), name, position, id.
        static func table(_ rows: [JSON], from centre: Coordinate?) -> String {
            rows.map { row in
                let place = row["doc"].flatMap(PlaceDoc.init(json:))
                let position = place?.coordinate
                let name = place.map(\.name).flatMap { $0.isEmpty ? nil : $0 } ?? "(no name)"
                var line = ""
                if let centre, let position {
                    let metres = Sphere.distance(centre, position)
                    line +=
                        (metres < 1000
                            ? String(format: "%6.0f m ", metres)
                            : metres < 100_000
                                ? String(format: "%6.1f km", metres / 1000) : String(format: "%6.0f km", metres / 1000))
                        + "  "
                }
                line += name.padding(toLength: max(name.count, 34), withPad: " ", startingAt: 0) + "  "
                line += position.map { String(format: "%9.5f,%10.5f", $0.lat, $0.lon) } ?? "?"
                return line + "  " + (row["id"]?.stringValue ?? "")
            }.joined(separator: "\n")
        }
    }
}
