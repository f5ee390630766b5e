import CouchEngine
public import CouchJSON
public import Foundation
public import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// JavaScript query server processes (`lt js-server`), spoken to with CouchDB's query server
/// protocol. JavaScript runs in separate processes, as CouchDB runs `couchjs`: a function that
/// loops forever or exhausts memory is stopped by killing its process (after `timeout`, or by
/// the process's own memory limit), and the server itself is never at risk. A killed or crashed
/// process is replaced on the next use.
///
/// Requests go to the least busy of `workers` processes. Each process keeps what it compiled:
/// a design document revision is sent (and its functions compiled) once per process, and a
/// view's map functions stay loaded while the same view is being indexed.
public final class QueryServer: Sendable {
    /// Why a request failed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Kind: Sendable { case unavailable, timeout, crashed, javascript }
        public let kind: Kind
        /// CouchDB's `error` word for the failure (`os_process_error`, `compilation_error`, ...).
        public let error: String
        public let reason: String
        public var description: String { "\(error): \(reason)" }
    }

    /// CouchDB's `[query_server_config] reduce_limit`: whether a reduce function whose answer
    /// does not shrink (longer than 4,096 characters and than half its input) fails with
    /// `reduce_overflow_error` (`on`), is only logged (`log`), or is let through (`off`).
    public enum ReduceLimit: String, Sendable, CaseIterable {
        case on = "true", off = "false", log
    }

    public let timeout: Duration
    /// The reduce limit the next reductions run under (the server sets it from its configuration).
    public var reduceLimit: ReduceLimit {
        get { reduceLimitSetting.withLock { $0 } }
        set { reduceLimitSetting.withLock { $0 = newValue } }
    }
    private let reduceLimitSetting = Locked(ReduceLimit.on)
    private let workers: [Worker]
    private let busy: Locked<[Int]>
    /// Processes started since this query server was made (a crashed or killed one is restarted).
    private let started = Locked(0)

    /// How many processes may run, how many requests are using one now, and how many
    /// processes were started so far.
    public var statistics: (processes: Int, busy: Int, started: Int) {
        (workers.count, busy.withLock { $0.reduce(0, +) }, started.withLock { $0 })
    }

    /// - Parameters:
    ///   - executable: the `lt` binary; the server starts `lt js-server`.
    ///   - timeout: how long one command may run before its process is killed.
    ///   - workers: how many processes may run JavaScript at the same time.
    public init(
        executable: URL, arguments: [String] = ["js-server"], timeout: Duration = .seconds(5), workers: Int = 2,
        logger: Logger = Logger(label: "lt.javascript")
    ) {
        self.timeout = timeout
        let started = started
        self.workers = (0..<max(1, workers)).map {
            Worker(
                executable: executable, arguments: arguments, timeout: timeout, logger: logger, index: $0,
                started: started)
        }
        busy = Locked(Array(repeating: 0, count: max(1, workers)))
    }

    /// Runs `body` on the least busy process, with exclusive use of it.
    private func withWorker<T: Sendable>(_ body: @escaping @Sendable (Worker) throws -> T) async throws -> T {
        let index = busy.withLock { counts in
            let index = counts.indices.min { counts[$0] < counts[$1] }!
            counts[index] += 1
            return index
        }
        defer { busy.withLock { $0[index] -= 1 } }
        return try await workers[index].perform(body)
    }

    /// Runs commands in order in one process and returns their answers. A command answered
    /// with `["error", error, reason]` throws a `javascript` failure.
    public func run(_ commands: [JSON]) async throws -> [JSON] {
        try await withWorker { worker in
            worker.mapFunctionsKey = nil  // raw commands may change what is loaded
            return try commands.map { try worker.send($0) }
        }
    }

    /// Applies a view's map functions to a batch of documents: for each document, each
    /// function's rows, or nil where the function threw (the document is skipped and logged).
    /// `key` names the set of functions (their code); a process that has them loaded under
    /// that key does not compile them again.
    public func map(
        key: String, functions: [String], lib: JSON?, documents: [JSONObject]
    ) async throws -> [[[(key: JSON, value: JSON)]?]] {
        try await withWorker { worker in
            if worker.mapFunctionsKey != key {
                worker.mapFunctionsKey = nil
                _ = try worker.send(["reset"])
                if let lib { _ = try worker.send(["add_lib", lib]) }
                for source in functions { _ = try worker.send(["add_fun", .string(source)]) }
                worker.mapFunctionsKey = key
            }
            let answer = try worker.send(["map_docs", .array(documents.map(JSON.object))])
            guard let perDocument = answer.arrayValue, perDocument.count == documents.count else {
                throw Failure(kind: .crashed, error: "os_process_error", reason: "Unexpected map answer")
            }
            return perDocument.map { functions in
                (functions.arrayValue ?? []).map { rows in
                    rows.arrayValue.map { $0.map { pair in (key: pair[0] ?? .null, value: pair[1] ?? .null) } }
                }
            }
        }
    }

    /// Reduces rows (`[key, docid]` and value) with each of `functions`. A function whose
    /// answer grows too fast (see `ReduceLimit`) gives `{"reduce_overflow_error": reason}`, as
    /// CouchDB's `couch_query_servers` does; such a value is shown as the row's error.
    public func reduce(functions: [String], rows: [(key: JSON, id: String, value: JSON)]) async throws -> [JSON] {
        let pairs = JSON.array(rows.map { [[$0.key, .string($0.id)], $0.value] })
        return try await reduceCommand(
            ["reduce", .array(functions.map(JSON.string)), pairs], functions: functions.count)
    }

    /// Combines earlier reductions with each of `functions` (`rereduce` = true); an earlier
    /// overflow is the answer without running them.
    public func rereduce(functions: [String], values: [JSON]) async throws -> [JSON] {
        if let overflow = values.first(where: Self.isOverflow) {
            return Array(repeating: overflow, count: functions.count)
        }
        return try await reduceCommand(
            ["rereduce", .array(functions.map(JSON.string)), .array(values)], functions: functions.count)
    }

    /// Whether a reduction is CouchDB's mark of a reduce function that grew too fast.
    public static func isOverflow(_ value: JSON) -> Bool {
        guard case let .object(members) = value, members.count == 1, members["reduce_overflow_error"] != nil else {
            return false
        }
        return true
    }

    private func reduceCommand(_ command: JSON, functions: Int) async throws -> [JSON] {
        let limit = reduceLimit
        let answer: JSON
        do {
            answer = try await withWorker { worker in
                if worker.reduceLimit != limit {
                    _ = try worker.send(["configure", ["reduce_limit": .string(limit.rawValue)]])
                    worker.reduceLimit = limit
                }
                return try worker.send(command)
            }
        } catch let failure as Failure where failure.kind == .javascript && failure.error == "reduce_overflow_error" {
            return Array(repeating: ["reduce_overflow_error": .string(failure.reason)], count: functions)
        }
        guard answer[0] == true, let results = answer[1]?.arrayValue else {
            throw Failure(kind: .javascript, error: "reduce_error", reason: "Unexpected reduce answer \(answer)")
        }
        return results
    }

    /// Calls the function at `path` of a design document (`["validate_doc_update"]`,
    /// `["filters", name]`, `["shows", name]`, ...) with `arguments`, and returns its answer.
    /// The design document is identified by its id and revision: a new revision is compiled
    /// afresh, an unchanged one is not sent again.
    public func call(designDocument ddoc: JSONObject, path: [String], arguments: [JSON]) async throws -> JSON {
        let key = "\(ddoc["_id"]?.stringValue ?? "")@\(ddoc["_rev"]?.stringValue ?? "")"
        return try await withWorker { worker in
            if !worker.designDocuments.contains(key) {
                // Keep a bounded number of design documents compiled in each process.
                if worker.designDocuments.count >= 64 {
                    for old in worker.designDocuments { _ = try worker.send(["ddoc", "drop", .string(old)]) }
                    worker.designDocuments.removeAll()
                }
                _ = try worker.send(["ddoc", "new", .string(key), .object(ddoc)])
                worker.designDocuments.insert(key)
            }
            return try worker.send(["ddoc", .string(key), .array(path.map(JSON.string)), .array(arguments)])
        }
    }
}

/// One `lt js-server` process and what it has loaded. Used only on its own serial queue.
private final class Worker: @unchecked Sendable {
    let executable: URL
    let arguments: [String]
    let timeout: Duration
    let logger: Logger
    private let queue: DispatchQueue
    private var process: Process?
    private var input: FileHandle?
    private var outputFD: Int32 = -1
    private var buffer: [UInt8] = []
    /// The map functions loaded by `reset`/`add_fun`, named by their caller.
    var mapFunctionsKey: String?
    /// Design documents (`id@rev`) this process has been sent.
    var designDocuments: Set<String> = []
    /// The reduce limit this process was told (`configure`); a new process starts with `on`.
    var reduceLimit = QueryServer.ReduceLimit.on

    /// Counts the processes started (the query server's statistics).
    let started: Locked<Int>

    init(executable: URL, arguments: [String], timeout: Duration, logger: Logger, index: Int, started: Locked<Int>) {
        self.started = started
        self.executable = executable
        self.arguments = arguments
        self.timeout = timeout
        self.logger = logger
        queue = DispatchQueue(label: "lt.query-server.\(index)")
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    func perform<T: Sendable>(_ body: @escaping @Sendable (Worker) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do { continuation.resume(returning: try body(self)) } catch { continuation.resume(throwing: error) }
            }
        }
    }

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
            throw QueryServer.Failure(
                kind: .unavailable, error: "os_process_error",
                reason: "Cannot start the JavaScript query server: \(error)")
        }
        started.withLock { $0 += 1 }
        self.process = process
        input = stdin.fileHandleForWriting
        outputFD = stdout.fileHandleForReading.fileDescriptor
        buffer = []
        mapFunctionsKey = nil
        designDocuments = []
        reduceLimit = .on
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
        mapFunctionsKey = nil
        designDocuments = []
        reduceLimit = .on
    }

    /// Sends one command and waits for its answer, killing the process if it takes longer
    /// than `timeout`.
    func send(_ command: JSON) throws -> JSON {
        if process?.isRunning != true {
            stop()
            try start()
        }
        guard let input, let process else {
            throw QueryServer.Failure(kind: .unavailable, error: "os_process_error", reason: "No query server")
        }
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
            try input.write(contentsOf: command.roundedForJavaScript().bytes + [10])
        } catch {
            stop()
            throw QueryServer.Failure(
                kind: .crashed, error: "os_process_error", reason: "The JavaScript query server exited")
        }
        while true {
            guard let line = readLine() else {
                let wasTimeout = timedOut.withLock { $0 }
                stop()
                if wasTimeout {
                    throw QueryServer.Failure(
                        kind: .timeout, error: "os_process_error", reason: "OS process timed out.")
                }
                throw QueryServer.Failure(
                    kind: .crashed, error: "os_process_error",
                    reason: "The JavaScript query server exited (out of memory or crashed)")
            }
            guard let answer = try? JSON.parse(line) else {
                stop()
                throw QueryServer.Failure(
                    kind: .crashed, error: "os_process_error", reason: "Unreadable answer from the query server")
            }
            if case let .array(items) = answer, items.first == "log" {
                logger.info("\(items.dropFirst().first?.stringValue ?? "")")
                continue
            }
            if case let .array(items) = answer, items.count == 3, items[0] == "error" {
                throw QueryServer.Failure(
                    kind: .javascript, error: items[1].stringValue ?? "error", reason: items[2].stringValue ?? "")
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

extension JSON {
    /// This value with integers beyond ±2^53 written as the double they round to (Swift rounds
    /// to nearest, ties to even, as JavaScript does), so that the engine's number parser, which
    /// misrounds some 17-digit integers (9007199254740993 read as …994), sees a number it
    /// reads exactly. CouchDB's SpiderMonkey reads them as JavaScript defines.
    func roundedForJavaScript() -> JSON {
        guard holdsUnsafeInteger else { return self }
        switch self {
        case let .int(n) where n.magnitude > 1 << 53: return .double(Double(n))
        case let .array(items): return .array(items.map { $0.roundedForJavaScript() })
        case let .object(object):
            return .object(JSONObject(object.members.map { ($0.key, $0.value.roundedForJavaScript()) }))
        default: return self
        }
    }

    private var holdsUnsafeInteger: Bool {
        switch self {
        case let .int(n): return n.magnitude > 1 << 53
        case let .array(items): return items.contains { $0.holdsUnsafeInteger }
        case let .object(object): return object.members.contains { $0.value.holdsUnsafeInteger }
        default: return false
        }
    }
}
