import CouchEngine
import Foundation
@_exported import LTTestSupport

/// A fresh directory under the system temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("lt-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func cleanup() { try? FileManager.default.removeItem(at: url) }
}

func randomHash(_ rng: inout SeededRandom) -> String {
    Database.hex((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
}
