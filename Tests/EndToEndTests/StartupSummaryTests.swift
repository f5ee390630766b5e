import Foundation
import LTTestSupport
import Testing

/// What `lt serve` says once it is up: where everything is, in one block, and no password.
@Suite("Startup summary")
struct StartupSummaryTests {
    /// The lines `lt serve ARGUMENTS` prints on standard output until its summary ends.
    static func summary(_ arguments: [String]) throws -> [String] {
        let directory = try TemporaryDirectory("lt-summary")
        defer { directory.cleanup() }
        let process = Process()
        process.executableURL = TestServer.binary
        process.arguments = ["serve", "--data", directory.url.appendingPathComponent("data").path, "--db-port", "0", "--port", "0",
                             "--log-level", "warning", "--tiles", "none"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        while !text.contains("  allocator ") && Date() < deadline {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        return text.split(separator: "\n").map(String.init)
    }

    @Test("One block once both listeners are up: database API, application, dashboard, tracker app, data directory and mode, admins by name, JavaScript, allocator")
    func summary() throws {
        let lines = try Self.summary(["--admin", "ops:secret-pw-99", "--mode", "single-db"])
        let block = try #require(lines.firstIndex(of: "lt: ready").map { Array(lines[$0...]) }, "\(lines)")
        let database = try #require(lines.first { $0.hasPrefix("lt: database API listening on ") }?.split(separator: " ").last)
        let application = try #require(lines.first { $0.hasPrefix("lt: application API listening on ") }?.split(separator: " ").last)
        #expect(block.count == 9, "\(block)")
        #expect(block[1] == "  database API   \(database)/")
        #expect(block[2] == "  application    \(application)/api/")
        #expect(block[3] == "  dashboard      \(application)/dashboard/")
        #expect(block[4] == "  tracker app    \(application)/app/")
        #expect(block[5].hasPrefix("  data           /") && block[5].hasSuffix("/data (single-db)"), "\(block[5])")
        #expect(block[6] == "  admin          ops")
        #expect(block[7].hasPrefix("  JavaScript     "))
        #expect(block[8].hasPrefix("  allocator      "))
        #expect(!lines.joined().contains("secret-pw-99"))

        let alone = try Self.summary(["--admin", "ops:secret-pw-99", "--database-only"])
        let short = try #require(alone.firstIndex(of: "lt: ready").map { Array(alone[$0...]) }, "\(alone)")
        #expect(short.count == 6 && short[1].hasPrefix("  database API   http://127.0.0.1:") && short[2].hasSuffix("(database only)"), "\(short)")
    }
}
