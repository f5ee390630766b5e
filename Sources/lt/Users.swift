import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import NIOHTTP1

/// `lt users`: manage application users on a running server, through its application API.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage Location Tracker users on a running server.",
        discussion:
            "Tracker users register themselves (the app, lt device register, PUT /api/users/NAME); analysts, who read everyone's locations (lt analysis, the dashboard's All locations), are made with lt users create NAME --role analyst.",
        subcommands: [Create.self, Delete.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Create an analyst: an account that reads everyone's locations (lt analysis, the dashboard) and writes nothing.",
            discussion:
                "The account is a CouchDB _users document with the analyst role, its password stored hashed (PBKDF2-SHA256) by the server. Example: lt users create ann --role analyst --password 'a long passphrase' --url http://admin:secret@127.0.0.1:5984"
        )

        @Argument(help: "The new account's name.")
        var name: String

        @Option(help: "Its role: analyst.")
        var role: Role

        @Option(help: "Its password (or LT_NEW_PASSWORD); at least 8 characters.")
        var password: String?

        @Option(
            help:
                "The database API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:5984 (or LT_DB_URL)."
        )
        var url: String?

        enum Role: String, ExpressibleByArgument, CaseIterable {
            case analyst
        }

        func run() async throws {
            guard
                let password = password
                    ?? ProcessInfo.processInfo.environment["LT_NEW_PASSWORD"].flatMap({ $0.isEmpty ? nil : $0 }),
                password.count >= 8
            else {
                throw ValidationError(
                    "Give the new account a password of at least 8 characters with --password (or LT_NEW_PASSWORD)")
            }
            guard !name.isEmpty, !name.hasPrefix("_"), !name.contains(":") else {
                throw ValidationError("\(name) cannot name an account")
            }
            let client = try AdminClient(url, environment: "LT_DB_URL")
            let id = "org.couchdb.user:\(name)"
            let doc: JSON = [
                "_id": .string(id), "name": .string(name), "type": "user", "roles": [.string(role.rawValue)],
                "password": .string(password),
            ]
            do {
                _ = try await client.send(
                    .PUT, "/_users/" + (id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id),
                    json: doc)
            } catch let failure as CommandFailure
                where failure.description.contains("409") || failure.description.contains("conflict")
            {
                throw CommandFailure("there is already an account named \(name)")
            }
            print(
                "created \(role.rawValue) \(name): they sign in to the dashboard (All locations) and use lt analysis with their name and password"
            )
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Delete a user: their database, API keys and account (and optionally their consolidated locations).")

        @Argument(help: "The user to delete.")
        var name: String

        @Option(
            help:
                "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL)."
        )
        var app: String?

        @Flag(help: "Also purge the user's locations from lt_locations_all.")
        var purgeLocations = false

        func run() async throws {
            let client = try AdminClient(app, environment: "LT_APP_URL")
            let json = try await client.send(.DELETE, "/api/users/\(name)" + (purgeLocations ? "?locations=purge" : ""))
            var line = "deleted \(name)"
            if let purged = json["purged_locations"]?.intValue {
                line += ", purged \(purged) locations from lt_locations_all"
            }
            print(line)
        }
    }
}
