import ArgumentParser
import CommandSupport
import LTServer

/// `lt`: the LocationTracker command line. (The benchmarks are `lt-bench`.)
@main
struct LT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lt",
        abstract: "LocationTracker: an offline-first location tracking server with a CouchDB-compatible database.",
        version: LocationTrackerServer.version,
        subcommands: [
            Serve.self, Backup.self, Restore.self, Status.self, Doctor.self, Users.self, Places.self, Analysis.self,
            Device.self, Import.self, Replicate.self, JSServer.self,
        ],
        defaultSubcommand: Serve.self)
}
