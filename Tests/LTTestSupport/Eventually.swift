import Foundation

/// Polls `condition` every 100 ms until it holds or `seconds` have passed; whether it held.
/// For effects that arrive asynchronously (consolidation, replication, mirrors).
public func eventually(_ seconds: Double = 10, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return try await condition()
}
