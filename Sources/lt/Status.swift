import ArgumentParser
import CouchJSON
import Foundation
import NIOHTTP1

/// `lt status`: where a running server's consolidation stands, through its application API.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show a running server's consolidation: what waits to be copied into lt_locations_all, and what fails.",
        discussion:
            "Exits with status 1 when a user's database cannot be read or a location is refused (each is retried, and its database's checkpoint stays before it until it is copied)."
    )

    @Option(
        help:
            "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL)."
    )
    var app: String?

    @Flag(help: "Print the server's answer as JSON.")
    var json = false

    func run() async throws {
        let client = try AdminClient(app, environment: "LT_APP_URL")
        let answer = try await client.send(.GET, "/api/status")
        if json {
            print(answer.text)
        } else {
            print(Status.describe(answer), terminator: "")
        }
        if answer["consolidation"]?["ok"] == false { throw ExitCode.failure }
    }

    /// The answer of `GET /api/status` as lines for people.
    static func describe(_ answer: JSON) -> String {
        var out = "mode: \(answer["mode"]?.stringValue ?? "?")\n"
        guard let status = answer["consolidation"], status != .null else {
            return out + "consolidation: none in this mode (every user's locations are in one database)\n"
        }
        let sweep = status["backlog"]?["sweep_remaining"]?.intValue ?? 0
        let retrying = status["backlog"]?["databases_retrying"]?.intValue ?? 0
        out +=
            "consolidation: \(plural(status["documents_copied"]?.intValue ?? 0, "location")) copied in \(plural(status["rounds"]?.intValue ?? 0, "round"))\n"
        out +=
            "  backlog: \(plural(sweep, "database")) still to look at since start-up, \(plural(retrying, "database")) waiting to be retried\n"
        let unreadable = status["unreadable"]?.arrayValue ?? []
        if !unreadable.isEmpty {
            out += "  cannot be read: " + unreadable.compactMap(\.stringValue).joined(separator: ", ") + "\n"
        }
        for refusal in status["refused"]?.arrayValue ?? [] {
            out +=
                "  refused: \(refusal["database"]?.stringValue ?? "?")/\(refusal["id"]?.stringValue ?? "?"): "
                + "\(refusal["error"]?.stringValue ?? "") \(refusal["reason"]?.stringValue ?? "")\n"
        }
        if unreadable.isEmpty && (status["refused"]?.arrayValue ?? []).isEmpty { out += "  no failures\n" }
        return out
    }

}
