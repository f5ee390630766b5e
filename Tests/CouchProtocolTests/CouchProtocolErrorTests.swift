import Foundation
import LTTestSupport
import Testing
@testable import CouchProtocol

/// The protocol layer's one error type: each failure it raises says which it is and what to do,
/// and the failover reads it to decide whether another node could answer.
@Suite("CouchProtocol's errors")
struct CouchProtocolErrorTests {
    @Test("Each kind answers to its own question only; what a caller shows says what happened and, for a certificate, how to trust it")
    func kinds() throws {
        let refused = CouchProtocolError.loginRefused(status: 401, server: "https://couch.example:6984")
        let untrusted = CouchProtocolError.untrustedPeer(server: "https://couch.example:6984", underlying: CocoaError(.fileNoSuchFile))
        let stopped = CouchProtocolError.stoppedAnswering
        let kinds = [refused, untrusted, stopped].map { [$0.isLoginRefused, $0.isUntrustedPeer, $0.isUnusableCAFile, $0.isStoppedAnswering] }
        #expect(kinds == [[true, false, false, false], [false, true, false, false], [false, false, false, true]])
        #expect(refused.status == 401 && refused.server == "https://couch.example:6984")
        #expect(refused.description == "log in to https://couch.example:6984: 401")
        #expect(untrusted.description.contains("--ca-file") && untrusted.description.contains("https://couch.example:6984"))
    }

    @Test("A CA file that cannot be used is refused with its reason: missing, or holding no certificate")
    func unusableCAFile() throws {
        let directory = try TemporaryDirectory("lt-ca")
        defer { directory.cleanup() }
        let missing = directory.url.appendingPathComponent("none.pem").path
        #expect { try ClientTrust.certificates(in: missing) } throws: { error in
            (error as? CouchProtocolError)?.isUnusableCAFile == true && "\(error)" == "the CA file \(missing) does not exist"
        }
        let empty = directory.url.appendingPathComponent("empty.pem")
        try Data("not a certificate\n".utf8).write(to: empty)
        #expect { try ClientTrust.certificates(in: empty.path) } throws: { error in
            (error as? CouchProtocolError)?.isUnusableCAFile == true && "\(error)".contains("holds no PEM certificate")
        }
    }

    @Test("The failover tries another node for a node that stopped answering, never for refused credentials or an untrusted certificate (no other node would change them)")
    func failover() {
        let stopped = FailoverCouch.transportFailure(CouchProtocolError.stoppedAnswering)
        #expect(stopped?.reason == "it stopped answering, even to a health check" && stopped?.beforeSending == false)
        #expect(FailoverCouch.transportFailure(CouchProtocolError.loginRefused(status: 401, server: "x")) == nil)
        #expect(FailoverCouch.transportFailure(CouchProtocolError.untrustedPeer(server: "x", underlying: CancellationError())) == nil)
    }
}
