import ArgumentParser
import CouchEngine
import Foundation

/// An `lt serve` started for a benchmark as its own process (so that its memory and CPU are its
/// own, as a real server's are): the `lt` built beside `lt-bench`, a scratch data directory,
/// ephemeral ports, durable writes; the database API only unless `arguments` say otherwise.
final class LTServeProcess {
    /// Whether `lt serve` of `binary` has the option `option` (per `lt serve --help`).
    static func serveTakes(_ option: String, binary: URL) -> Bool {
        let process = Process()
        process.executableURL = binary
        process.arguments = ["serve", "--help"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text.contains(option)
    }

    let process: Process
    /// The database API's port.
    let port: Int
    /// The application API's port (nil with `--database-only`).
    let applicationPort: Int?
    /// How long it took from starting the process to the last listener announced.
    let startup: Duration

    private init(process: Process, port: Int, applicationPort: Int?, startup: Duration) {
        (self.process, self.port, self.applicationPort, self.startup) = (process, port, applicationPort, startup)
    }

    /// Starts it and waits (up to `timeout`) until it announces its ports. `data` is the data
    /// directory (default `directory/data`); `arguments` are added to `serve`'s
    /// (default: the database API only).
    static func start(
        binary: URL, directory: URL, admin: (user: String, password: String), data: URL? = nil,
        arguments: [String] = ["--database-only"], timeout: Duration = .seconds(60)
    ) async throws -> LTServeProcess {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw ValidationError(
                "no lt at \(binary.path): build it (swift build -c release --product lt) or pass --lt-binary")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let log = directory.appendingPathComponent("serve.log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw ValidationError("cannot write \(log.path)")
        }
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = binary
        // Benchmarks register users by the thousand from one address (an lt from before the
        // limit, given to compare with, has no such option).
        let limited =
            !arguments.contains("--database-only")
            && LTServeProcess.serveTakes("--max-registrations-per-hour", binary: binary)
        let registrations = limited ? ["--max-registrations-per-hour", "1000000000"] : []
        process.arguments =
            [
                "serve", "--data", (data ?? directory.appendingPathComponent("data")).path, "--db-port", "0", "--port",
                "0",
                "--admin", "\(admin.user):\(admin.password)", "--log-level", "info",
            ] + registrations + arguments
        process.standardOutput = output
        process.standardError = output
        let started = ContinuousClock.now
        try process.run()
        let deadline = started + timeout
        let wantsApplication = !arguments.contains("--database-only")
        func port(_ text: String, _ listener: String) -> Int? {
            text.split(separator: "\n").first(where: { $0.contains("\(listener) listening on") })?.split(separator: ":")
                .last.flatMap { Int($0) }
        }
        while true {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let databasePort = port(text, "database API") {
                let applicationPort = port(text, "application API")
                if !wantsApplication || applicationPort != nil {
                    return LTServeProcess(
                        process: process, port: databasePort, applicationPort: applicationPort,
                        startup: started.duration(to: .now))
                }
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw ValidationError("lt serve did not start: \(text.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// The lt to start: the one given, or the lt beside this lt-bench.
    static func executable(_ given: String?) -> URL {
        given.map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("lt")
    }

    /// SIGTERM, and waits for it to exit.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// `--lt-binary`: the lt a benchmark starts.
struct LTBinaryOption: ParsableArguments {
    @Option(name: .customLong("lt-binary"), help: "The lt executable to start (default: the lt beside this lt-bench).")
    var ltBinary: String?

    /// The lt to start: the one given, or the lt beside this lt-bench.
    var executable: URL { LTServeProcess.executable(ltBinary) }
}

/// The servers a side-by-side benchmark starts or reaches: the lt it starts and the CouchDB it
/// compares with.
struct PeerOptions: ParsableArguments {
    @Option(help: "The CouchDB to compare with, with admin credentials, e.g. http://admin:relax@127.0.0.1:5984.")
    var couchdb: String?

    @Option(
        name: .customLong("couchdb-pid"), help: "The CouchDB server's process (default: the one listening on its port)."
    )
    var couchdbPID: Int32?

    @OptionGroup var lt: LTBinaryOption

    /// CouchDB's process, for its memory and CPU: --couchdb-pid, or the one listening on its port.
    func couchdbProcess(_ target: Bench.Target) throws -> Int32 {
        let port = URLComponents(string: target.base)?.port ?? 80
        guard let pid = couchdbPID ?? ServerProcessInfo.pid(listeningOn: port) else {
            throw ValidationError("cannot find the process listening on \(target.base); pass --couchdb-pid")
        }
        return pid
    }
}

/// What Linux's /proc says of a server process: who listens on a port, how much memory it holds.
enum ServerProcessInfo {
    /// The process listening on a TCP port of this machine, if this user may see it: the
    /// socket's inode from /proc/net/tcp(6), then the process holding it among /proc/*/fd.
    static func pid(listeningOn port: Int) -> Int32? {
        let hexPort = String(format: ":%04X", port)
        var inodes: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // local_address is field 1, st (0A = LISTEN) field 3, inode field 9.
                if fields.count > 9, fields[1].hasSuffix(hexPort), fields[3] == "0A" {
                    inodes.insert(String(fields[9]))
                }
            }
        }
        guard !inodes.isEmpty, let processes = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
            return nil
        }
        for process in processes where process.allSatisfy(\.isNumber) {
            let fds = "/proc/\(process)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? [] {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fds)/\(fd)"),
                    target.hasPrefix("socket:[")
                else { continue }
                if inodes.contains(String(target.dropFirst(8).dropLast())) { return Int32(process) }
            }
        }
        return nil
    }

    /// CPU seconds the process has used (user + system, /proc/PID/stat), nil once it is gone.
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Open file descriptors of the process (entries of /proc/PID/fd), nil if not readable.
    static func openFiles(_ pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Resident memory in bytes (`VmRSS` of /proc/PID/status), nil once the process is gone.
    static func residentBytes(_ pid: Int32) -> Int? { memory(pid)?.resident }

    /// Resident memory (`VmRSS`) and the part of it that is the process's own allocations
    /// (`RssAnon`: not pages of its executable and libraries, which other processes share and
    /// the system can drop), in bytes; nil once the process is gone.
    static func memory(_ pid: Int32) -> (resident: Int, anonymous: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func bytes(_ field: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
                let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
            else { return nil }
            return kilobytes <= Int.max / 1024 ? kilobytes * 1024 : nil
        }
        guard let resident = bytes("VmRSS:") else { return nil }
        return (resident, bytes("RssAnon:") ?? resident)
    }
}

/// The largest resident memory of a process seen while it runs, sampled every 100 ms on a thread.
final class PeakMemorySampler: Sendable {
    private let peak = Locked(0)
    private let anonymousPeak = Locked(0)
    private let running = Locked(true)

    init(pid: Int32) {
        Thread.detachNewThread { [peak, anonymousPeak, running] in
            while running.withLock({ $0 }) {
                if let memory = ServerProcessInfo.memory(pid) {
                    peak.withLock { $0 = max($0, memory.resident) }
                    anonymousPeak.withLock { $0 = max($0, memory.anonymous) }
                }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    /// Stops sampling; the peak in bytes.
    func stop() -> Int {
        running.withLock { $0 = false }
        return peak.withLock { $0 }
    }

    /// The largest anonymous memory (`RssAnon`) seen, in bytes.
    var anonymous: Int { anonymousPeak.withLock { $0 } }
}
