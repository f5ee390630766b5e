import CouchJSON
import Foundation
public import HTTPTypes
public import Logging

/// One line per request on a listener: method, path, status, time taken, who asked, from where,
/// and the request's id (also sent back in a header). At info level when on (`--access-log`,
/// the default), at debug when off. Never the query (it may carry secrets), a header, a body or
/// a password: the user is a name only.
public struct AccessLog: Sendable {
    let logger: Logger
    private(set) var level: Logger.Level
    /// Which listener: "database" or "application".
    let listener: String

    public init(logger: Logger, listener: String, enabled: Bool) {
        self.logger = logger
        self.listener = listener
        level = enabled ? .info : .debug
    }

    /// Whether lines are written at the logger's level (the time is then worth taking).
    public var isWritten: Bool { logger.logLevel <= level }

    /// The server's requests to itself (the application's to its embedded database): at debug
    /// level always, or every request of the application would log several lines.
    public var inProcess: AccessLog {
        var log = self
        log.level = .debug
        return log
    }

    /// A request's id: ten hex digits, as CouchDB's `X-Couch-Request-ID`.
    public static func newRequestID() -> String {
        let value = UInt64.random(in: 0..<(1 << 40))
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 10 - hex.count) + hex
    }

    /// The id a client gave its request (`X-Couch-Request-ID`), kept as CouchDB keeps it when it
    /// is a plausible id: 1 to 64 letters, digits, `.`, `_` or `-` (it goes into the log and the
    /// answer's headers); nil otherwise, for a new one.
    public static func clientRequestID(_ value: String?) -> String? {
        guard let value, (1...64).contains(value.utf8.count),
            value.utf8.allSatisfy({
                $0 < 0x80
                    && (Character(Unicode.Scalar($0)).isLetter || Character(Unicode.Scalar($0)).isNumber || $0 == 0x2E
                        || $0 == 0x5F || $0 == 0x2D)
            })
        else { return nil }
        return value
    }

    /// One request's line. `path` without its query; `user` a name, empty for nobody; `duration`
    /// as the listener measured it (its metrics take the same).
    public func record(
        method: HTTPRequest.Method, path: String, status: Int, duration: Duration,
        user: String?, client: String?, requestID: String
    ) {
        guard isWritten else { return }
        let milliseconds = duration.seconds * 1000
        var metadata: Logger.Metadata = [
            "listener": .string(listener), "request_id": .string(requestID), "method": .string(method.rawValue),
            "path": .string(path), "status": .stringConvertible(status),
            "duration_ms": .stringConvertible((milliseconds * 1000).rounded() / 1000),
        ]
        if let user, !user.isEmpty { metadata["user"] = .string(user) }
        if let client, !client.isEmpty { metadata["client"] = .string(client) }
        logger.log(level: level, "\(method.rawValue) \(path) \(status)", metadata: metadata)
    }
}
