import ArgumentParser
import AsyncHTTPClient
import CouchJSON
import Foundation
import NIOCore
import Replication

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
            guard let app = app ?? ProcessInfo.processInfo.environment["LT_APP_URL"],
                  var components = URLComponents(string: app), let user = components.user, let password = components.password else {
                throw ValidationError("Give --app http://ADMIN:PASSWORD@HOST:PORT (or LT_APP_URL)")
            }
            components.user = nil
            components.password = nil
            components.path = "/api/users/" + name
            if purgeLocations { components.queryItems = [URLQueryItem(name: "locations", value: "purge")] }
            guard let url = components.string else { throw ValidationError("Cannot build a URL from \(app)") }
            var request = HTTPClientRequest(url: url)
            request.method = .DELETE
            let credentials = (user.removingPercentEncoding ?? user) + ":" + (password.removingPercentEncoding ?? password)
            request.headers.add(name: "Authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString())
            let response = try await RemoteEndpoint.sharedClient.execute(request, timeout: .seconds(300))
            let body = try await response.body.collect(upTo: 1 << 20)
            let json = (try? JSON.parse(Array(buffer: body))) ?? .null
            guard response.status == .ok else {
                throw ValidationError("\(response.status.code): \(json["reason"]?.stringValue ?? json["error"]?.stringValue ?? "failed")")
            }
            var line = "deleted \(name)"
            if let purged = json["purged_locations"]?.intValue { line += ", purged \(purged) locations from lt_locations_all" }
            print(line)
        }
    }
}
