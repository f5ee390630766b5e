import ArgumentParser
import CommandSupport

/// `lt-bench`: the benchmarks, apart from the `lt` users run. Each measures against a baseline
/// taken in the same run (raw SQLite, a SQLite R*Tree) and prints medians and ratios; see
/// docs/benchmarks.md for the figures and the commands that produced them.
@main
struct LTBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lt-bench",
        abstract:
            "LocationTracker's benchmarks: the database API, the geo index, the application at scale, the device.",
        subcommands: [
            Bench.self, CompareBench.self, ScaleBench.self, PopulationBench.self, TLSBench.self, BackupBench.self,
            ExportBench.self, ImportBench.self, RegexBench.self, CollationBench.self, GeoBench.self, AppBench.self,
            DeviceBench.self,
            JSServer.self,
        ],
        defaultSubcommand: Bench.self)
}
