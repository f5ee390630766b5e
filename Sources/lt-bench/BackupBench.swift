import ArgumentParser
import CommandSupport
import CouchJSON
import Foundation
import Logging

/// `lt-bench backup`: what `lt backup` costs on a serving `lt serve`. One large database and
/// many small ones; the backup's speed beside a plain copy of the same files (the disk's own
/// speed, measured in the same run with the server stopped), and a writer's PUT latency during
/// the backup beside the same writer without one; then `lt restore`'s speed.
struct BackupBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "What lt backup costs: its speed beside a file copy, and a live writer's latency during it.")

    @Option(help: "Documents in the large database.")
    var documents = 100_000

    @Option(help: "Small databases (50 documents each, as users' databases).")
    var databases = 200

    @Option(help: "lt backup's --jobs.")
    var jobs = 2

    @OptionGroup var lt: LTBinaryOption

    func validate() throws {
        guard (1...10_000_000).contains(documents), (0...100_000).contains(databases) else {
            throw ValidationError("--documents 1…10,000,000, --databases 0…100,000")
        }
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lt-bench-backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let admin = (user: "bench", password: "bench-password")
        let data = scratch.appendingPathComponent("data")
        var server = try await LTServeProcess.start(binary: lt.executable, directory: scratch, admin: admin, data: data)
        defer { server.stop() }
        let authorization = "Basic " + Data("\(admin.user):\(admin.password)".utf8).base64EncodedString()
        // The project's load generator (cheap for the machine, so the figures describe the server).
        let connection = try BenchConnection(host: "127.0.0.1", port: server.port)
        func send(_ method: String, _ path: String, _ body: JSON? = nil) throws {
            try connection.expectSuccess(method, path, authorization: authorization, json: body)
        }
        print(
            "lt-bench backup: \(documents) documents in one database, \(databases) databases of 50, lt backup --jobs \(jobs); \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(TLSBench.loadAverage())"
        )
        try send("PUT", "/large")
        for start in stride(from: 0, to: documents, by: 5_000) {
            try send(
                "POST", "/large/_bulk_docs",
                .object(["docs": .array((start..<min(documents, start + 5_000)).map(Bench.locationDocument))]))
        }
        for index in 0..<databases {
            try send("PUT", "/user-\(index)")
            try send(
                "POST", "/user-\(index)/_bulk_docs", .object(["docs": .array((0..<50).map(Bench.locationDocument))]))
        }
        try send("PUT", "/live")

        // A writer alone for 3 s, then the same writer for as long as `lt backup` runs.
        let started = ContinuousClock.now
        let quiet = try writer(send, "quiet") { started.duration(to: .now) < .seconds(3) }
        let backup = scratch.appendingPathComponent("backup")
        let backupRun = try start(["backup", "--data", data.path, "--to", backup.path, "--jobs", String(jobs)])
        let busy = try writer(send, "busy") { backupRun.process.isRunning }
        let (backupSeconds, backupOutput) = try backupRun.finish()
        let backupBytes = Self.size(of: backup.appendingPathComponent("dbs"))
        server.stop()

        // The disk's own speed on the same files: a plain copy, the server stopped (so the
        // files are whole; what a copy of a running server's directory would not be).
        let copyStart = ContinuousClock.now
        try FileManager.default.copyItem(
            at: data.appendingPathComponent("dbs"), to: scratch.appendingPathComponent("copy"))
        let copySeconds = copyStart.duration(to: .now).seconds
        let copyBytes = Self.size(of: scratch.appendingPathComponent("copy"))
        let (restoreSeconds, _) = try start([
            "restore", "--from", backup.path, "--data", scratch.appendingPathComponent("restored").path,
        ]).finish()
        server = try await LTServeProcess.start(
            binary: lt.executable, directory: scratch.appendingPathComponent("check"), admin: admin,
            data: scratch.appendingPathComponent("restored"))

        func mibPerSecond(_ bytes: Int64, _ seconds: Double) -> Double { Double(bytes) / 1_048_576 / seconds }
        print(backupOutput.trimmingCharacters(in: .whitespacesAndNewlines))
        print("measure                                               lt          baseline      ratio")
        print(
            String(
                format:
                    "backup (lt backup, server serving) vs file copy    %7.1f MiB/s   %7.1f MiB/s   %5.2f×   (%.1f MiB in %.2f s; copy %.1f MiB in %.2f s)",
                mibPerSecond(backupBytes, backupSeconds), mibPerSecond(copyBytes, copySeconds),
                mibPerSecond(backupBytes, backupSeconds) / mibPerSecond(copyBytes, copySeconds),
                Double(backupBytes) / 1_048_576, backupSeconds, Double(copyBytes) / 1_048_576, copySeconds))
        print(
            String(
                format: "restore (checks, then copies) vs file copy         %7.1f MiB/s   %7.1f MiB/s   %5.2f×",
                mibPerSecond(backupBytes, restoreSeconds), mibPerSecond(copyBytes, copySeconds),
                mibPerSecond(backupBytes, restoreSeconds) / mibPerSecond(copyBytes, copySeconds)))
        print(
            String(
                format: "writer PUT p50 / p99, during backup vs alone         %5.2f / %5.1f ms   %5.2f / %5.1f ms",
                busy.p50, busy.p99, quiet.p50, quiet.p99))
        print(
            String(
                format: "writer PUTs/s, during backup vs alone              %7.0f         %7.0f        %5.2f×",
                busy.rate, quiet.rate, busy.rate / quiet.rate))
        server.stop()
    }

    /// PUTs one after another while `going()` says so; latency percentiles in ms and the rate.
    func writer(
        _ send: (String, String, JSON?) throws -> Void, _ name: String, while going: () -> Bool
    ) throws -> (p50: Double, p99: Double, rate: Double) {
        var latencies: [Double] = []
        let start = ContinuousClock.now
        var n = 0
        while going() {
            let before = ContinuousClock.now
            try send("PUT", "/live/\(name)-\(n)", ["n": .int(n)])
            latencies.append(before.duration(to: .now).seconds * 1000)
            n += 1
        }
        latencies.sort()
        guard !latencies.isEmpty else { return (0, 0, 0) }
        return (
            latencies[latencies.count / 2], latencies[min(latencies.count - 1, latencies.count * 99 / 100)],
            Double(latencies.count) / start.duration(to: .now).seconds
        )
    }

    /// The lt beside this lt-bench, running `arguments`: `finish()` waits, and gives its wall time and output.
    struct Run {
        let process: Process
        let output: Pipe
        let started: ContinuousClock.Instant

        func finish() throws -> (seconds: Double, output: String) {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw ValidationError("lt \(process.arguments?.joined(separator: " ") ?? "") failed: \(text)")
            }
            return (started.duration(to: .now).seconds, text)
        }
    }

    func start(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = lt.executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let started = ContinuousClock.now
        try process.run()
        return Run(process: process, output: output, started: started)
    }

    /// Bytes of the files under `directory`.
    static func size(of directory: URL) -> Int64 {
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey])
        var total: Int64 = 0
        while let file = files?.nextObject() as? URL {
            total += Int64((try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
        }
        return total
    }
}
