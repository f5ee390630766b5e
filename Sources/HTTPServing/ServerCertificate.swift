import Foundation
public import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
public import NIOSSL

/// The certificate and private key both listeners serve TLS with, read from PEM files and read
/// again on demand (`reload`, on SIGHUP: a renewed certificate is served to new connections while
/// open ones carry on with the one they started with). NIOSSL asks for the current pair at each
/// handshake (`sslContextCallback`), so nothing is torn down to renew.
public final class ServerCertificate: Sendable {
    /// Why a certificate and key cannot be served, in words for an operator.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let certificatePath: String
    public let keyPath: String
    private let current: NIOLockedValueBox<Pair>

    private struct Pair: Sendable {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        /// The leaf's subject and expiry, for logs.
        let summary: String
    }

    /// Reads and checks the pair: both files readable PEM, the key the certificate's. Throws a
    /// `Failure` naming the file and what is wrong with it.
    public init(certificatePath: String, keyPath: String) throws {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        current = NIOLockedValueBox(try Self.load(certificatePath: certificatePath, keyPath: keyPath))
    }

    /// The leaf certificate's subject and expiry (for the start-up log).
    public var summary: String { current.withLockedValue { $0.summary } }

    /// Reads the files again; new handshakes use the new pair. On a failure the pair served so far
    /// stays, and the failure is thrown for the caller to report.
    public func reload() throws {
        let pair = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        current.withLockedValue { $0 = pair }
    }

    /// The server side of TLS with this pair, renewed handshake by handshake.
    public var tlsConfiguration: TLSConfiguration {
        let pair = current.withLockedValue { $0 }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: pair.chain.map { .certificate($0) }, privateKey: .privateKey(pair.key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.sslContextCallback = { [current] _, promise in
            let pair = current.withLockedValue { $0 }
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = pair.chain.map { .certificate($0) }
            override.privateKey = .privateKey(pair.key)
            promise.succeed(override)
        }
        return configuration
    }

    private static func load(certificatePath: String, keyPath: String) throws -> Pair {
        let certificateBytes = try read(certificatePath, what: "TLS certificate")
        let keyBytes = try read(keyPath, what: "TLS private key")
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(certificateBytes)
        } catch {
            throw Failure(description: "the TLS certificate \(certificatePath) is not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else {
            throw Failure(
                description:
                    "the TLS certificate \(certificatePath) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: keyBytes, format: .pem)
        } catch {
            throw Failure(
                description: "the TLS private key \(keyPath) is not an unencrypted PEM private key (\(error))")
        }
        // A context made with the pair checks that the key is the leaf certificate's.
        do {
            _ = try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key)))
        } catch {
            throw Failure(
                description:
                    "the TLS private key \(keyPath) does not belong to the certificate \(certificatePath) (\(error))")
        }
        let leaf = chain[0]
        let expiry = Date(timeIntervalSince1970: TimeInterval(leaf.notValidAfter))
        let subject = leaf.description
        return Pair(chain: chain, key: key, summary: "\(subject), valid until \(expiry)")
    }

    private static func read(_ path: String, what: String) throws -> [UInt8] {
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure(description: "the \(what) \(path) does not exist")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(description: "the \(what) \(path) cannot be read (permissions?)")
        }
        return Array(data)
    }
}

extension ConnectionLimits {
    /// An HTTP/1.1 server over TLS with `certificate`, keeping to these limits.
    public func server(tls certificate: ServerCertificate) throws -> HTTPServerBuilder {
        try .tls(server, tlsConfiguration: certificate.tlsConfiguration)
    }
}
