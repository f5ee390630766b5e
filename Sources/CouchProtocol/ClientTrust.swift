import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
public import NIOSSL

/// Which certificate authorities the package's HTTPS clients trust: the system's, and those of a
/// CA file given by the operator (`--ca-file`, `LT_CA_FILE`: a private CA or a self-signed
/// test server). Certificates are always verified; there is no way to turn that off.
public enum ClientTrust {
    private struct State {
        var extra: [NIOSSLCertificate] = []
        var file: String?
        /// The shared clients were made: what they trust is fixed.
        var fixed = false
    }

    private static let state = NIOLockedValueBox(State())

    /// Trusts the CA certificates of the PEM file at `path` besides the system's, for every
    /// client made after this call (the shared ones included: call it before the first request).
    public static func trust(caFile path: String) throws {
        let certificates = try certificates(in: path)
        try state.withLockedValue { state in
            guard !state.fixed || state.file == path else {
                throw CouchProtocolError.unusableCAFile("the CA file must be given before the first request (\(path))")
            }
            state.extra = certificates
            state.file = path
        }
    }

    /// The CA file trusted besides the system's, if any.
    public static var caFile: String? { state.withLockedValue { $0.file } }

    /// The client side of TLS: full verification against the system's CAs and the trusted file's.
    static func tlsConfiguration(extra: [NIOSSLCertificate]) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .fullVerification
        if !extra.isEmpty { configuration.additionalTrustRoots = [.certificates(extra)] }
        return configuration
    }

    /// For the shared clients, made once: what is trusted now, from then on.
    static func fixedConfiguration() -> TLSConfiguration {
        tlsConfiguration(
            extra: state.withLockedValue { state in
                state.fixed = true
                return state.extra
            })
    }

    /// `error` as `CouchProtocolError.untrustedPeer` when it is a handshake that failed to
    /// verify the peer at `server` (`CouchHTTPClient` throws it in place of BoringSSL's error,
    /// saying how to trust the peer).
    static func classify(_ error: any Error, server: String) -> any Error {
        guard let ssl = error as? NIOSSLError, case .handshakeFailed = ssl,
            "\(error)".contains("CERTIFICATE_VERIFY_FAILED")
        else { return error }
        return CouchProtocolError.untrustedPeer(server: server, underlying: error)
    }

    /// The PEM certificates of a CA file, with an error naming the file when there are none.
    public static func certificates(in path: String) throws -> [NIOSSLCertificate] {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CouchProtocolError.unusableCAFile("the CA file \(path) does not exist")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CouchProtocolError.unusableCAFile("the CA file \(path) cannot be read (permissions?)")
        }
        let certificates = (try? NIOSSLCertificate.fromPEMBytes(Array(data))) ?? []
        guard !certificates.isEmpty else {
            throw CouchProtocolError.unusableCAFile(
                "the CA file \(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        return certificates
    }
}
