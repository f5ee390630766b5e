import CouchJSON
import Foundation
public import Logging

/// Logs as JSON lines on standard error, one object per record (`--log-format json`), for log
/// shippers (journald's JSON, Loki, Elasticsearch): `time` (ISO 8601, UTC, milliseconds),
/// `level`, `label`, `message`, then the record's metadata as members (the access log's
/// `request_id`, `method`, `path`, `status`, `duration_ms`, `user`, `client`, `listener`).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    private let label: String
    private let write: @Sendable ([UInt8]) -> Void

    /// `write` receives each line (standard error unless given).
    public init(label: String, write: @escaping @Sendable ([UInt8]) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: JSONObject = [
            "time": .string(Self.timestamp(Date())), "level": .string(event.level.rawValue), "label": .string(label),
            "message": .string(event.message.description),
        ]
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let own = event.metadata { merged.merge(own) { $1 } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where object[key] == nil {
            object[key] = Self.json(value)
        }
        if let error = event.error { object["error"] = .string("\(error)") }
        var line = JSON.object(object).bytes
        line.append(UInt8(ascii: "\n"))
        write(line)
    }

    /// One `write` per line: lines from concurrent records never interleave.
    public static let standardError: @Sendable ([UInt8]) -> Void = { line in
        line.withUnsafeBufferPointer { buffer in _ = Foundation.write(STDERR_FILENO, buffer.baseAddress, buffer.count) }
    }

    static func json(_ value: Logger.Metadata.Value) -> JSON {
        switch value {
        case let .string(text): return .string(text)
        case let .stringConvertible(convertible):
            if let number = convertible as? Int { return .int(number) }
            if let number = convertible as? Double, number.isFinite { return .double(number) }
            return .string(convertible.description)
        case let .array(values): return .array(values.map(json))
        case let .dictionary(members):
            return .object(JSONObject(members.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) }))
        }
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(
            Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
    }
}
