import ArgumentParser
import CouchEngine
public import CouchJSON
public import Foundation
public import JavaScript
public import TrackerKit

#if canImport(Glibc)
import Glibc
#endif

/// What a server process needs to know about its machine and its files, shared by `lt serve`
/// and the benchmarks that run servers in process.
public enum ServerResources {
    /// How many databases to keep open when not told: raises the soft open-file limit to the
    /// hard one, then allows two descriptors per database (file and write-ahead log) beside
    /// 4,096 for connections and databases still closing, at most 2,048 databases: each open
    /// one holds ~70 KB with jemalloc (its WAL index, page cache, schema, statements); with
    /// 10,000 users writing 1,000 locations a second, 9,000 open measured 820 MiB and 1.17 ms
    /// of CPU per write against 2,048's 336 MiB and 1.45 ms (docs/benchmarks.md, session 9). A
    /// write to an open database costs one sync; reopening one reads its file and WAL back.
    public static func openDatabaseBudget() -> Int {
        min(2048, max(64, (openFileLimit - 4096) / 2))
    }

    /// The open-file limit, after raising the soft limit to the hard one (once per process).
    public static let openFileLimit: Int = {
        var limit = rlimit()
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return 4096 + 256 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }()

    /// Checks that `maxOpen` databases fit in the open-file limit (two descriptors each, and
    /// at least 256 left for connections; the default budget always fits): beyond it, opening
    /// or creating a database would fail at random with "unable to open database file" under
    /// load instead of now, clearly.
    public static func checkOpenDatabases(_ maxOpen: Int) throws {
        guard maxOpen > 0 else { throw ValidationError("--max-open-databases must be positive") }
        let limit = openFileLimit
        let most = max(64, (limit - 256) / 2)
        guard maxOpen <= most else {
            throw ValidationError(
                "--max-open-databases \(maxOpen) is more than this process's open-file limit (\(limit)) allows: each open database "
                    + "holds two file descriptors, and connections need some too; use at most \(most), or raise the limit (ulimit -n)"
            )
        }
    }

    /// Query servers run this same binary as `js-server` (`lt` and `lt-bench` both have it), when it was built with Duktape.
    public static func javascriptQueryServer() -> QueryServer? {
        #if canImport(CDuktape)
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let path =
            FileManager.default.fileExists(atPath: executable.path)
            ? executable : URL(fileURLWithPath: CommandLine.arguments[0])
        return QueryServer(executable: path)
        #else
        return nil
        #endif
    }

    /// The original system's 50 sample places, shipped in `data/sample-places.json` (Apache-2.0,
    /// see data/README.md); looked for beside the binary's package, then in the working directory.
    public static func samplePlaces() throws -> [JSON] {
        if let url = ShippedData.url("sample-places.json") {
            return try JSON.parse(Array(Data(contentsOf: url)))["places"]?.arrayValue ?? []
        }
        FileHandle.standardError.write(Data("lt: data/sample-places.json not found; lt_places starts empty\n".utf8))
        return []
    }
}

/// Data files shipped in the repository's `data/` (see data/README.md for sources and
/// licences), found beside the package lt was built from, then in the working directory.
public enum ShippedData {
    /// The file's location, or nil when neither place has it.
    public static func url(_ name: String) -> URL? {
        let candidates = [
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
                .appendingPathComponent("data/\(name)"),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("data/\(name)"),
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0.path) }
    }

    /// A route to drive: the built-in `freeway-drive`, or a GPX, GeoJSON or OwnTracks file.
    public static func route(_ route: String) throws -> [TrackPoint] {
        if route == "freeway-drive" {
            guard let url = url("freeway-drive.json") else {
                throw CommandFailure("data/freeway-drive.json not found beside lt")
            }
            return try TrackFile.read(Data(contentsOf: url), format: .geojson)
        }
        do { return try TrackFile.read(contentsOf: URL(fileURLWithPath: route)) } catch let failure as TrackerKitError {
            throw CommandFailure("\(route): \(failure)")
        }
    }
}
