import CouchJSON
import ArgumentParser
import CouchEngine
import Foundation
import Logging
import NIOCore
import NIOPosix

/// Process set-up shared by `lt` and `lt-bench`.
public enum ProcessSetup {
    /// Makes SwiftNIO's event loops Swift concurrency's global executor, as Vapor's and
    /// Hummingbird's server templates do: a request's handler then runs on the thread that read
    /// it instead of being handed to the cooperative pool and back, which on a 2-core machine
    /// doubled the rate of small requests (GET / 6.6k → 14k/s) and raised geo queries from 5k to
    /// 7k/s (docs/benchmarks.md). Long synchronous work in a task now holds up the connections of
    /// its event loop, as it held up a pool thread before; password hashing, the expensive
    /// part, runs on NIO's blocking-work pool. Call first, once, before any server starts.
    public static func runTasksOnEventLoops() {
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }

    /// Logs go to stderr at `level`, for every command.
    public static func bootstrapLogging(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

/// A command that failed although its command line was fine (the server refused, another
/// process holds the data directory): printed as "Error: …" without the usage lines that
/// argument errors (`ValidationError`) get.
public struct CommandFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension DirectoryLock {
    /// Takes `directory` for this command; held by another `lt` process, it is a
    /// `CommandFailure` with the reason.
    public static func forCommand(_ directory: URL) throws -> DirectoryLock {
        do { return try DirectoryLock(directory: directory) } catch let error as CouchError { throw CommandFailure(error.reason) }
    }
}

extension Durability {
    /// The `--durability` option's value (`full` or `normal`, any case).
    public static func option(_ text: String) throws -> Durability {
        guard let durability = Durability(rawValue: text.uppercased()) else { throw ValidationError("--durability must be full or normal") }
        return durability
    }
}
