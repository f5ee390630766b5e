public import Foundation

/// A fresh directory under the system temporary directory, removed by `cleanup()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ prefix: String = "lt-test") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public func cleanup() { try? FileManager.default.removeItem(at: url) }
}
