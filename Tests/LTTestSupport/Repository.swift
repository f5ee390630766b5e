import Foundation

/// The repository's own files (README, docs, shipped data, fixtures), for tests that read them.
public enum Repository {
    /// The repository's root directory.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}
