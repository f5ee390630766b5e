/// Every failure CouchProtocol raises itself, as one type (AsyncHTTPClient's way): a login
/// refused, a peer whose TLS certificate does not verify, a CA file that cannot be used, a
/// cluster node that stopped answering. Which one is a private code, read through the `is…`
/// properties, so that a new case breaks no caller. (A CouchDB's answers are `CouchError`s.)
public struct CouchProtocolError: Error, CustomStringConvertible, Sendable {
    private enum Code: Sendable {
        case loginRefused, untrustedPeer, unusableCAFile, stoppedAnswering
    }

    private let code: Code
    /// The server it concerns: a refused login's, an untrusted peer's.
    public let server: String?
    /// A refused login's HTTP status.
    public let status: Int?
    public let description: String

    /// `POST /_session` was refused (`status`).
    public var isLoginRefused: Bool { code == .loginRefused }
    /// The peer's TLS certificate does not verify against the trusted CAs: trying again does
    /// not mend it; trusting the peer's CA does (`ClientTrust`).
    public var isUntrustedPeer: Bool { code == .untrustedPeer }
    /// A CA file given to `ClientTrust` cannot be used (the description says why).
    public var isUnusableCAFile: Bool { code == .unusableCAFile }
    /// A cluster node stopped answering while a request waited on it (`ClusterHealth`).
    public var isStoppedAnswering: Bool { code == .stoppedAnswering }

    private init(_ code: Code, server: String? = nil, status: Int? = nil, description: String) {
        self.code = code
        self.server = server
        self.status = status
        self.description = description
    }

    static func loginRefused(status: Int, server: String) -> CouchProtocolError {
        CouchProtocolError(.loginRefused, server: server, status: status, description: "log in to \(server): \(status)")
    }

    /// Says how to trust the peer: the CAs trusted now, and the option that adds one.
    static func untrustedPeer(server: String, underlying: any Error) -> CouchProtocolError {
        CouchProtocolError(
            .untrustedPeer, server: server,
            description:
                "the TLS certificate of \(server) does not verify against the trusted CAs (the system's\(ClientTrust.caFile.map { " and \($0)" } ?? "")): "
                + "if it is signed by a private CA, give that CA's certificate with --ca-file or LT_CA_FILE (\(underlying))"
        )
    }

    static func unusableCAFile(_ reason: String) -> CouchProtocolError {
        CouchProtocolError(.unusableCAFile, description: reason)
    }

    static let stoppedAnswering = CouchProtocolError(
        .stoppedAnswering, description: "it stopped answering, even to a health check")
}
