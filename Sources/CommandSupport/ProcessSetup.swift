import CouchJSON
import ArgumentParser
public import CouchEngine
public import Foundation
public import Logging
import NIOCore
import NIOPosix

/// Process set-up shared by `lt` and `lt-bench`.
public enum ProcessSetup {
    /// Makes SwiftNIO's event loops Swift concurrency's global executor, as Vapor's and
    /// Hummingbird's server templates do with NIO's own take-over: a request's handler then runs
    /// on the thread that read it instead of being handed to the cooperative pool and back, which
    /// on a 2-core machine doubled the rate of small requests (GET / 6.6k → 14k/s) and raised geo
    /// queries from 5k to 7k/s (docs/benchmarks.md).
    ///
    /// Unlike NIO's take-over, a job runs on the loop's thread as the *generic* executor, as the
    /// cooperative pool runs it. NIO's runs it isolated to the loop's serial executor, so each
    /// call into a nonisolated async function must hop back to the generic executor, and that
    /// hop cannot happen in place: it is another job queued on the same loop (~50 per `GET /`,
    /// measured with a uprobe on `swift_task_switch`). Long synchronous work in a task holds up
    /// the connections of its event loop; password hashing, the expensive part, runs on NIO's
    /// blocking-work pool. Call first, once, before any task starts.
    public static func runTasksOnEventLoops() {
        _ = GlobalExecutorHook.install()
    }

    /// How log records are written on stderr.
    public enum LogFormat: String, CaseIterable, Sendable {
        /// swift-log's lines: time, level, label, `key=value` metadata, message.
        case text
        /// One JSON object per line (`JSONLogHandler`).
        case json
    }

    /// Logs go to stderr at `level`, for every command.
    public static func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
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
        do { return try DirectoryLock(directory: directory) } catch let error as CouchError {
            throw CommandFailure(error.reason)
        }
    }
}

extension Durability {
    /// The `--durability` option's value (`full` or `normal`, any case).
    public static func option(_ text: String) throws -> Durability {
        guard let durability = Durability(rawValue: text.uppercased()) else {
            throw ValidationError("--durability must be full or normal")
        }
        return durability
    }
}

/// Swift concurrency's global executor replaced by SwiftNIO's singleton event loops: the
/// runtime's exported hook `swift_task_enqueueGlobal_hook` (the one NIO's take-over sets), set
/// once at start-up before any task runs, hands each job to the event loop of the thread that
/// enqueues it (another loop when enqueued from elsewhere), which runs it on the generic
/// executor. Delayed jobs (`Task.sleep`) keep the runtime's own timer, as with NIO's.
enum GlobalExecutorHook {
    /// The hook's type in the runtime: the job, and the default implementation (unused).
    private typealias Hook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// The generic executor, as the runtime names it: a null identity and implementation.
    private static let generic = unsafe unsafeBitCast((0, 0), to: UnownedSerialExecutor.self)

    /// Whether the hook is now installed (false when another already was, or the runtime has none).
    static func install() -> Bool {
        guard MemoryLayout<UnownedSerialExecutor>.size == MemoryLayout<(Int, Int)>.size,
            let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook")
        else { return false }
        let slot = symbol.assumingMemoryBound(to: UnsafeRawPointer?.self)
        guard slot.pointee == nil else { return false }
        let hook: Hook = { job, _ in
            MultiThreadedEventLoopGroup.singleton.any().execute { job.runSynchronously(on: GlobalExecutorHook.generic) }
        }
        slot.pointee = unsafe unsafeBitCast(hook, to: UnsafeRawPointer.self)
        return true
    }
}
