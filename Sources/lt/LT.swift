import ArgumentParser

/// `lt`: the LocationTracker command line.
@main
struct LT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lt",
        abstract: "LocationTracker: an offline-first location tracking server with a CouchDB-compatible database.",
        subcommands: [Serve.self, Replicate.self, Bench.self],
        defaultSubcommand: Serve.self)
}
