import ArgumentParser
import CouchEngine
import Foundation

/// An `lt serve` started for a benchmark as its own process (so that its memory and CPU are its
/// own, as a real server's are): the `lt` built beside `lt-bench`, a scratch data directory, an
/// ephemeral port, the database API only, durable writes.
final class LTServeProcess {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        (self.process, self.port) = (process, port)
    }

    /// Starts it and waits (up to 60 s) until it announces its port.
    static func start(binary: URL, directory: URL, admin: (user: String, password: String)) async throws -> LTServeProcess {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw ValidationError("no lt at \(binary.path): build it (swift build -c release --product lt) or pass --lt-binary")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let log = directory.appendingPathComponent("serve.log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else { throw ValidationError("cannot write \(log.path)") }
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = binary
        process.arguments = [
            "serve", "--data", directory.appendingPathComponent("data").path, "--db-port", "0", "--port", "0",
            "--admin", "\(admin.user):\(admin.password)", "--database-only", "--log-level", "info",
        ]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.contains("database API listening on") }),
               let port = line.split(separator: ":").last.flatMap({ Int($0) }) {
                return LTServeProcess(process: process, port: port)
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw ValidationError("lt serve did not start: \(text.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// SIGTERM, and waits for it to exit.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
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
                if fields.count > 9, fields[1].hasSuffix(hexPort), fields[3] == "0A" { inodes.insert(String(fields[9])) }
            }
        }
        guard !inodes.isEmpty, let processes = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for process in processes where process.allSatisfy(\.isNumber) {
            let fds = "/proc/\(process)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? [] {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fds)/\(fd)"),
                      target.hasPrefix("socket:[") else { continue }
                if inodes.contains(String(target.dropFirst(8).dropLast())) { return Int32(process) }
            }
        }
        return nil
    }

    /// Resident memory in bytes (`VmRSS` of /proc/PID/status), nil once the process is gone.
    static func residentBytes(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
        return kilobytes <= Int.max / 1024 ? kilobytes * 1024 : nil
    }
}

/// The largest resident memory of a process seen while it runs, sampled every 100 ms on a thread.
final class PeakMemorySampler: Sendable {
    private let peak = Locked(0)
    private let running = Locked(true)

    init(pid: Int32) {
        Thread.detachNewThread { [peak, running] in
            while running.withLock({ $0 }) {
                if let bytes = ServerProcessInfo.residentBytes(pid) { peak.withLock { $0 = max($0, bytes) } }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    /// Stops sampling; the peak in bytes.
    func stop() -> Int {
        running.withLock { $0 = false }
        return peak.withLock { $0 }
    }
}
