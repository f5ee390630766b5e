import CouchEngine
import CouchJSON
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JavaScript query server process (`lt js-server`), spoken to with CouchDB's query server
/// protocol. JavaScript runs in that separate process, as CouchDB runs `couchjs`: a function
/// that loops forever or exhausts memory is stopped by killing the process (after `timeout`,
/// or by its own memory limit), and the server itself is never at risk. A killed or crashed
/// process is replaced on the next use.
public final class QueryServer: @unchecked Sendable {
    /// Why a request failed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Kind: Sendable { case unavailable, timeout, crashed, javascript }
        public let kind: Kind
        /// CouchDB's `error` word for the failure (`os_process_error`, `compilation_error`, ...).
        public let error: String
        public let reason: String
        public var description: String { "\(error): \(reason)" }
    }

    let executable: URL
    let arguments: [String]
    public let timeout: Duration
    let logger: Logger
    private let queue = DispatchQueue(label: "lt.query-server")
    // Touched only on `queue`.
    private var process: Process?
    private var input: FileHandle?
    private var outputFD: Int32 = -1
    private var buffer: [UInt8] = []

    /// - Parameters:
    ///   - executable: the `lt` binary; the server starts `lt js-server`.
    ///   - timeout: how long one command may run before the process is killed.
    public init(executable: URL, arguments: [String] = ["js-server"], timeout: Duration = .seconds(5),
                logger: Logger = Logger(label: "lt.javascript")) {
        self.executable = executable
        self.arguments = arguments
        self.timeout = timeout
        self.logger = logger
    }

    deinit {
        process?.terminate()
    }

    /// Runs commands in order in one process session and returns their answers. A command
    /// answered with `["error", error, reason]` throws a `javascript` failure.
    public func run(_ commands: [JSON]) async throws -> [JSON] {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    continuation.resume(returning: try commands.map { try self.send($0) })
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    // MARK: On `queue`

    private func start() throws {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        do { try process.run() } catch {
            throw Failure(kind: .unavailable, error: "os_process_error", reason: "Cannot start the JavaScript query server: \(error)")
        }
        self.process = process
        input = stdin.fileHandleForWriting
        outputFD = stdout.fileHandleForReading.fileDescriptor
        buffer = []
    }

    private func stop() {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        process = nil
        input = nil
        outputFD = -1
        buffer = []
    }

    private func send(_ command: JSON) throws -> JSON {
        if process?.isRunning != true {
            stop()
            try start()
        }
        guard let input, let process else { throw Failure(kind: .unavailable, error: "os_process_error", reason: "No query server") }
        // A watchdog kills the process if the answer does not come in time.
        let finished = Locked(false)
        let timedOut = Locked(false)
        let pid = process.processIdentifier
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
            if !finished.withLock({ $0 }) {
                timedOut.withLock { $0 = true }
                kill(pid, SIGKILL)
            }
        }
        defer { finished.withLock { $0 = true } }
        do {
            try input.write(contentsOf: command.bytes + [10])
        } catch {
            stop()
            throw Failure(kind: .crashed, error: "os_process_error", reason: "The JavaScript query server exited")
        }
        while true {
            guard let line = readLine() else {
                let wasTimeout = timedOut.withLock { $0 }
                stop()
                if wasTimeout {
                    throw Failure(kind: .timeout, error: "os_process_error", reason: "OS process timed out.")
                }
                throw Failure(kind: .crashed, error: "os_process_error", reason: "The JavaScript query server exited (out of memory or crashed)")
            }
            guard let answer = try? JSON.parse(line) else {
                stop()
                throw Failure(kind: .crashed, error: "os_process_error", reason: "Unreadable answer from the query server")
            }
            if case let .array(items) = answer, items.first == "log" {
                logger.info("\(items.dropFirst().first?.stringValue ?? "")")
                continue
            }
            if case let .array(items) = answer, items.count == 3, items[0] == "error" {
                throw Failure(kind: .javascript, error: items[1].stringValue ?? "error", reason: items[2].stringValue ?? "")
            }
            return answer
        }
    }

    /// One line from the process, or nil at end of file.
    private func readLine() -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { Foundation.read(outputFD, $0.baseAddress, $0.count) }
            if count <= 0 { return nil }
            buffer += chunk[..<count]
        }
    }
}
