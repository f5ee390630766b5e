import Foundation
import LTTestSupport
import Testing

/// The fuzzing corpus (`Tests/Fuzz/corpus/<harness>`: seeds, and every input that once made
/// a harness fail) replayed through each harness of `lt-fuzz`, built normally: each must run
/// through without a crash or a finding (a 500, an error that is not CouchDB's JSON). The
/// fuzzing itself is `scripts/fuzz.sh`.
@Suite("Fuzz corpus replay", .timeLimit(.minutes(3)))
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test("Every committed input replays cleanly through its harness", arguments: ["json", "selector", "regex", "wkt", "geo", "multipart", "revs", "http", "app", "control", "config", "prometheus", "rewrite", "history", "archive"])
    func replay(harness: String) throws {
        let directory = Self.corpus.appendingPathComponent(harness)
        let inputs = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }
        #expect(!inputs.isEmpty)
        let process = Process()
        process.executableURL = TestServer.binary.deletingLastPathComponent().appendingPathComponent("lt-fuzz")
        process.arguments = [directory.path]
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("lt-fuzz-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        process.environment = ProcessInfo.processInfo.environment.merging(["LT_FUZZ_TARGET": harness, "TMPDIR": work.path]) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let complaints = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(harness): \(complaints.suffix(2000))")
        #expect(printed.contains("lt-fuzz: \(inputs.count) inputs replayed through \(harness)"), "\(printed)")
    }
}
