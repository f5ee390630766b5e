import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import HTTPTypes
import LTTestSupport
import Logging
import Testing

/// What the server does at the edges of what the machine gives it: it refuses at start-up a
/// setting the open-file limit cannot honour, a database the file system will not create is
/// an error on that request, not a missing database, and it says which allocator it runs on.
@Suite("Resource limits")
struct ResourceLimitTests {
    @Test("lt serve refuses --max-open-databases beyond the open-file limit, naming the limit and the fix")
    func maxOpenBeyondFileLimit() throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        // More than any open-file limit allows (two descriptors per database).
        let result = try TestServer.runLT(["serve", "--data", directory.url.path, "--db-port", "0", "--port", "0",
                                           "--max-open-databases", String(Int.max / 2)])
        #expect(result.status != 0)
        #expect(result.errors.contains("open-file limit"), "\(result.errors)")
        #expect(result.errors.contains("ulimit -n"), "\(result.errors)")
    }

    @Test("lt serve runs on jemalloc when it was built with libjemalloc-dev present (as install-deps.sh sees to), and says so")
    func allocator() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let process = Process()
        process.executableURL = TestServer.binary
        process.arguments = ["serve", "--data", directory.url.path, "--db-port", "0", "--port", "0", "--admin", "a:b", "--log-level", "info"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { process.terminate(); process.waitUntilExit() }
        var log = ""
        let deadline = Date().addingTimeInterval(30)
        while !log.contains("memory allocator:"), Date() < deadline {
            let data = errors.fileHandleForReading.availableData
            if data.isEmpty { break }
            log += String(decoding: data, as: UTF8.self)
        }
        let line = log.split(separator: "\n").first { $0.contains("memory allocator:") }.map(String.init) ?? ""
        if FileManager.default.fileExists(atPath: "/usr/include/jemalloc/jemalloc.h") {
            #expect(line.contains("memory allocator: jemalloc "), "\(log)")
        } else {
            #expect(line.contains("memory allocator: the C library's malloc"), "\(log)")
        }
    }

    @Test("Creating a database the file system refuses answers 500 with the reason, not 404, and leaves no database behind")
    func createRefusedByFileSystem() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("data")
        let store = try DatabaseStore(directory: data, connections: { _ in .single })
        let api = CouchAPI(store: store, settings: try ServerSettings.load(from: directory.url), options: CouchAPI.Options(), logger: Logger(label: "test"))
        #expect(await api.perform(.put, "/before").status == 201)
        // New databases are built under data/creating/: make that a file, so building one fails.
        let scratch = data.appendingPathComponent("creating")
        try FileManager.default.removeItem(at: scratch)
        #expect(FileManager.default.createFile(atPath: scratch.path, contents: Data("not a directory".utf8)))
        let refused = await api.perform(.put, "/lt_locations_user_refused")
        #expect(refused.status == 500)
        let body = try JSON.parse(refused.body)
        #expect(body["error"] == "internal_server_error")
        #expect(body["reason"]?.stringValue?.hasPrefix("Could not create the database") == true, "\(body)")
        #expect(await api.perform(.get, "/lt_locations_user_refused").status == 404)
        #expect(await api.perform(.get, "/before").status == 200)
    }
}
