import ArgumentParser
import CouchJSON
import Foundation

/// `lt places`: the places dataset on a running server.
struct Places: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import, export and review the places of a running server.",
        subcommands: [Import.self, Export.self, Review.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add the features of a GeoJSON FeatureCollection to lt_places.")

        @Argument(help: "A GeoJSON file: a FeatureCollection (or a {\"places\": [...]} list, as data/sample-places.json).")
        var file: String

        @Option(help: "The database API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:5984 (or LT_DB_URL).")
        var url: String?

        func run() async throws {
            let client = try AdminClient(url, environment: "LT_DB_URL")
            let json = try JSON.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
            guard let features = json["features"]?.arrayValue ?? json["places"]?.arrayValue else {
                throw CommandFailure("\(file) is not a FeatureCollection")
            }
            let now = Date().timeIntervalSince1970 * 1000
            var docs: [JSON] = []
            for (i, feature) in features.enumerated() {
                guard var doc = feature.objectValue, doc["geometry"] != nil else { throw CommandFailure("feature \(i) has no geometry") }
                if let id = doc["id"], doc["_id"] == nil { doc["_id"] = .string(id.stringValue ?? id.text) }
                doc.removeValue(forKey: "id")
                if doc["created_at"] == nil { doc["created_at"] = .double(now) }
                docs.append(.object(doc))
            }
            var imported = 0
            for start in stride(from: 0, to: docs.count, by: 1000) {
                let batch = Array(docs[start..<min(start + 1000, docs.count)])
                let results = try await client.send(.POST, "/lt_places/_bulk_docs", json: ["docs": .array(batch)])
                for row in results.arrayValue ?? [] {
                    if row["ok"] == true { imported += 1 } else {
                        FileHandle.standardError.write(Data("skipped \(row["id"]?.stringValue ?? "?"): \(row["reason"]?.stringValue ?? "")\n".utf8))
                    }
                }
            }
            print("imported \(imported) of \(docs.count) places")
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
        static let configuration = CommandConfiguration(abstract: "List reported place corrections, or approve or reject one.")

        @Option(help: "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL).")
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
}
