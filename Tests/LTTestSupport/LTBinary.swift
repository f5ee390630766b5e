public import Foundation

/// Where the tests find the `lt` executable: `LT_BINARY`, else the one built next to the test
/// bundle, else `.build/debug/lt` of this package.
public enum LTBinary {
    public static var url: URL {
        if let path = ProcessInfo.processInfo.environment["LT_BINARY"] { return URL(fileURLWithPath: path) }
        var candidates: [URL] = []
        if let first = CommandLine.arguments.first { candidates.append(URL(fileURLWithPath: first).deletingLastPathComponent()) }
        candidates.append(Bundle.main.bundleURL)
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for directory in candidates {
            var url = directory
            for _ in 0..<4 {
                let candidate = url.appendingPathComponent("lt")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                url = url.deletingLastPathComponent()
            }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/lt")
    }
}
