import ArgumentParser
import CouchJSON
import Foundation

/// `lt users`: manage application users on a running server, through its application API.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage Location Tracker users on a running server.",
        subcommands: [Delete.self])

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a user: their database, API keys and account (and optionally their consolidated locations).")

        @Argument(help: "The user to delete.")
        var name: String

        @Option(help: "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL).")
        var app: String?

        @Flag(help: "Also purge the user's locations from lt_locations_all.")
        var purgeLocations = false

        func run() async throws {
            let client = try AdminClient(app, environment: "LT_APP_URL")
            let json = try await client.send(.DELETE, "/api/users/\(name)" + (purgeLocations ? "?locations=purge" : ""))
            var line = "deleted \(name)"
            if let purged = json["purged_locations"]?.intValue { line += ", purged \(purged) locations from lt_locations_all" }
            print(line)
        }
    }
}
