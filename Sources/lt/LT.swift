import ArgumentParser
import CommandSupport

/// `lt`: the LocationTracker command line. (The benchmarks are `lt-bench`.)
@main
struct LT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lt",
        abstract: "LocationTracker: an offline-first location tracking server with a CouchDB-compatible database.",
        subcommands: [Serve.self, Backup.self, Restore.self, Status.self, Users.self, Places.self, Analysis.self, Device.self, Replicate.self, JSServer.self],
        defaultSubcommand: Serve.self)
}
