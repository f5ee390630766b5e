public import CouchJSON
public import Foundation

/// The repository's own files (README, docs, shipped data, fixtures), for tests that read them.
public enum Repository {
    /// The repository's root directory.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A fixture recorded from Apache CouchDB (`Tests/Compatibility/Fixtures/<name>`), parsed.
    public static func couchDBFixture(_ name: String) throws -> JSON {
        let url = root.appendingPathComponent("Tests/Compatibility/Fixtures").appendingPathComponent(name)
        return try JSON.parse(Array(try Data(contentsOf: url)))
    }
}
