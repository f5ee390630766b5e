public import ArgumentParser
import CouchProtocol
import Foundation

/// `--ca-file` (or `LT_CA_FILE`): certificate authorities whose certificates HTTPS peers may
/// present besides the system's (a private CA, a self-signed test server). Verification itself
/// is never turned off.
public struct TrustOptions: ParsableArguments {
    @Option(
        name: .customLong("ca-file"),
        help:
            "PEM file of CA certificates to trust for https:// peers besides the system's (a private CA or a self-signed server); certificates are always verified. (LT_CA_FILE)"
    )
    public var caFile: String?

    public init() {}

    /// Trusts the CA file given, if any, for every request this process makes: call before the
    /// first. A file that is missing, unreadable or holds no certificate is a `CommandFailure`.
    public func apply() throws {
        try Self.apply(
            caFile: caFile ?? ProcessInfo.processInfo.environment["LT_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 })
    }

    /// Trusts `caFile` (already chosen among the flag, variable and configuration file), if any.
    public static func apply(caFile path: String?) throws {
        guard let path else { return }
        do { try ClientTrust.trust(caFile: path) } catch let failure as CouchProtocolError {
            throw CommandFailure(failure.description)
        }
    }
}
