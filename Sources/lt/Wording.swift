import Foundation

/// "1 location", "7 locations": a count with its noun, in the singular or the plural.
func plural(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

/// The data directory a command works on: the one given, else `LT_DATA` (unless empty), else `./lt-data`.
func dataDirectory(_ given: String?) -> URL {
    URL(
        fileURLWithPath: given ?? ProcessInfo.processInfo.environment["LT_DATA"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "./lt-data",
        isDirectory: true
    ).standardizedFileURL
}
