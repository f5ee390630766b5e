import ArgumentParser
import CommandSupport
import CouchJSON
import CouchProtocol
import Foundation
import Logging
import NIOHTTP1
import TrackerApp

/// `lt places`: the places dataset on a running server.
struct Places: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Query, import, export and review the places of a running server.",
        subcommands: [Query.self, Import.self, Export.self, Review.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add or update the features of a GeoJSON FeatureCollection in lt_places.",
            discussion: """
                Each place is stored under its id (the feature's `id` or `_id`; for a feature with neither, one made from its \
                name and geometry), so importing the same file again changes nothing and an edited file updates its places. \
                When anything changed, the places release (GET /api/places/version) grows by one, so devices pull the places again.
                """)

        @Argument(
            help: "A GeoJSON file: a FeatureCollection (or a {\"places\": [...]} list, as data/sample-places.json).")
        var file: String

        @Option(
            help:
                "The database API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:5984 (or LT_DB_URL)."
        )
        var url: String?

        func run() async throws {
            guard let url = url ?? ProcessInfo.processInfo.environment["LT_DB_URL"] else {
                throw ValidationError(
                    "Give a URL with a server admin's credentials: http://NAME:PASSWORD@HOST:PORT (or LT_DB_URL)")
            }
            let json: JSON
            do { json = try JSON.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file)))) } catch {
                throw CommandFailure("cannot read \(file): \(error)")
            }
            guard let features = json["features"]?.arrayValue ?? json["places"]?.arrayValue else {
                throw CommandFailure("\(file) is not a FeatureCollection")
            }
            let couch: HTTPCouch
            do { couch = try HTTPCouch(url: url) } catch { throw ValidationError(error.reason) }
            let result: PlaceCatalog.PlacesImport
            do {
                var quiet = Logger(label: "lt.places")
                quiet.logLevel = .warning  // the summary below says what happened
                result = try await TrackerService(couch: couch, logger: quiet).places.importPlaces(features)
            } catch let failure as TrackerService.Failure {
                throw CommandFailure(failure.body["reason"]?.stringValue ?? failure.body.text)
            }
            for (id, reason) in result.failed {
                FileHandle.standardError.write(Data("not stored \(id): \(reason)\n".utf8))
            }
            print(Places.summary(result, of: features.count))
            if !result.failed.isEmpty { throw ExitCode.failure }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print lt_places as a GeoJSON FeatureCollection.")

        @Option(help: "The database API with a server admin's credentials (or LT_DB_URL).")
        var url: String?

        func run() async throws {
            let client = try AdminClient(url, environment: "LT_DB_URL")
            let rows = try await client.send(.GET, "/lt_places/_all_docs?include_docs=true")["rows"]?.arrayValue ?? []
            let features: [JSON] = rows.compactMap { row in
                guard var doc = row["doc"]?.objectValue, doc["geometry"] != nil else { return nil }
                let id = doc.removeValue(forKey: "_id")
                doc.removeValue(forKey: "_rev")
                doc.prepend("id", id ?? .null)
                if doc["type"] == nil { doc["type"] = "Feature" }
                return .object(doc)
            }
            print(JSON.object(["type": "FeatureCollection", "features": .array(features)]).text)
        }
    }

    struct Review: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List reported place corrections, or approve or reject one.")

        @Option(
            help:
                "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL)."
        )
        var app: String?

        @Option(help: "Approve this report: the place moves and the dataset version grows.")
        var approve: String?

        @Option(help: "Reject this report.")
        var reject: String?

        func run() async throws {
            let client = try AdminClient(app, environment: "LT_APP_URL")
            if let id = approve ?? reject {
                let decision = approve != nil ? "approve" : "reject"
                let answer = try await client.send(.POST, "/api/adjustments/\(id)/\(decision)")
                var line = "\(id): \(answer["reviewStatus"]?.stringValue ?? "")"
                if let version = answer["dataVersion"]?.intValue { line += ", places dataVersion \(version)" }
                print(line)
                return
            }
            let reports = try await client.send(.GET, "/api/adjustments?status=submitted")["reports"]?.arrayValue ?? []
            if reports.isEmpty { print("no reports waiting for review") }
            for report in reports {
                let position = report["geometry"]?["coordinates"]
                let id = report["_id"]?.stringValue ?? ""
                let place = report["placeId"]?.stringValue ?? ""
                let from = "\(report["originalLatitude"]?.text ?? "?"),\(report["originalLongitude"]?.text ?? "?")"
                let to = "\(position?[1]?.text ?? "?"),\(position?[0]?.text ?? "?")"
                let who = report["submittedBy"]?.stringValue ?? ""
                let when = report["submittedDate"]?.stringValue ?? ""
                print("\(id)  place \(place)  from \(from) to \(to)  by \(who)  \(when)")
            }
        }
    }

    /// One line on what an import did: "50 places: 3 new, 1 updated, 46 unchanged; places release 7".
    static func summary(_ result: PlaceCatalog.PlacesImport, of total: Int) -> String {
        var line =
            "\(total) \(total == 1 ? "place" : "places"): \(result.created) new, \(result.updated) updated, \(result.unchanged) unchanged"
        if !result.failed.isEmpty { line += ", \(result.failed.count) not stored" }
        if let version = result.dataVersion {
            line += "; places release \(version)"
        } else {
            line += "; places release unchanged"
        }
        return line
    }
}
