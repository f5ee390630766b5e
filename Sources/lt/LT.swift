import ArgumentParser
import Logging

/// `lt`: the LocationTracker command line.
@main
struct LT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lt",
        abstract: "LocationTracker: an offline-first location tracking server with a CouchDB-compatible database.",
        subcommands: [Serve.self, Users.self, Places.self, Device.self, Replicate.self, Bench.self, GeoBench.self, AppBench.self, DeviceBench.self, JSServer.self],
        defaultSubcommand: Serve.self)
}

extension LT {
    /// Logs go to stderr at `level`, for every command.
    static func bootstrapLogging(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
