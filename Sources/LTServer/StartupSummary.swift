import Foundation
import NIOConcurrencyHelpers
import TrackerApp

/// What `lt serve` prints once every listener is up: one block saying where everything is —
/// the database API, the application, the dashboard and the tracker app, the data directory,
/// the mode, the admins' names (never a password), JavaScript and the allocator.
final class StartupSummary: Sendable {
    private let configuration: ServerConfiguration
    private let admins: [String]
    private let ports = NIOLockedValueBox<[String: Int]>([:])

    init(_ configuration: ServerConfiguration, admins: [String]) {
        self.configuration = configuration
        self.admins = admins
    }

    /// A listener is up on `port`; the block is printed when the last one is.
    func bound(_ listener: String, port: Int) {
        let expected = configuration.databaseOnly ? 1 : 2
        let all = ports.withLockedValue { ports -> [String: Int]? in
            ports[listener] = port
            return ports.count == expected ? ports : nil
        }
        if let all { FileHandle.standardOutput.write(Data(text(all).utf8)) }
    }

    func text(_ ports: [String: Int]) -> String {
        let scheme = configuration.tls == nil ? "http" : "https"
        // A wildcard address is not one to browse to: show this machine's loopback instead.
        let host = ["0.0.0.0", "::", "[::]"].contains(configuration.host) ? "127.0.0.1" : configuration.host
        func url(_ port: Int?, _ path: String = "/") -> String { "\(scheme)://\(host):\(port ?? 0)\(path)" }
        var lines = ["lt: ready"]
        lines.append("  database API   \(url(ports["database API"]))")
        if let application = ports["application API"] {
            lines.append("  application    \(url(application, "/api/"))")
            lines.append("  dashboard      \(url(application, "/dashboard/"))")
            lines.append("  tracker app    \(url(application, "/app/"))")
        }
        let mode =
            configuration.databaseOnly
            ? "database only"
            : configuration.clusterURL != nil
                ? "\(configuration.mode.rawValue), in front of a CouchDB cluster" : configuration.mode.rawValue
        lines.append("  data           \(configuration.directory.standardizedFileURL.path) (\(mode))")
        lines.append("  admin          \(admins.isEmpty ? "none" : admins.joined(separator: ", "))")
        lines.append("  JavaScript     \(configuration.javascriptOffReason.map { "off: \($0)" } ?? "on")")
        lines.append("  allocator      \(configuration.allocator)")
        return lines.joined(separator: "\n") + "\n"
    }
}
