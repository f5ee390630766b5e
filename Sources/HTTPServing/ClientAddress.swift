import CouchJSON
import Foundation
public import HTTPTypes
public import Hummingbird
import NIOConcurrencyHelpers
public import Logging
import NIOCore

/// Address ranges (`--trusted-proxy 10.0.0.0/8`): IPv4 or IPv6, with or without a prefix length.
public struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    let network: [UInt8]
    let prefixLength: Int
    public let description: String

    /// Parses `ADDRESS` or `ADDRESS/BITS`; throws with a message naming the text.
    public init(_ text: String) throws {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = AddressRange.bytes(String(parts[0])) else {
            throw CouchError.badRequest("\(text) is not an IP address or range (CIDR, e.g. 10.0.0.0/8 or fd00::/8)")
        }
        var bits = bytes.count * 8
        if parts.count == 2 {
            guard let parsed = Int(parts[1]), (0...bytes.count * 8).contains(parsed) else {
                throw CouchError.badRequest("\(text): the prefix length must be 0 to \(bytes.count * 8)")
            }
            bits = parsed
        }
        network = bytes
        prefixLength = bits
        description = text
    }

    /// Whether `address` (text) lies in this range.
    public func contains(_ address: String) -> Bool {
        guard let bytes = AddressRange.bytes(address), bytes.count == network.count else { return false }
        var bits = prefixLength
        for (a, b) in zip(bytes, network) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if a & mask != b & mask { return false }
            bits -= 8
        }
        return true
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address (an IPv4-mapped IPv6 address as IPv4);
    /// nil when it is neither.
    static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return Array(bytes[12...])
            }
            return bytes
        }
        return nil
    }
}

/// Who a request comes from, for login throttling and connection limits: the peer's address,
/// or, when the peer is a trusted reverse proxy, the address that proxy reports in
/// `X-Forwarded-For` (the nearest one not itself a trusted proxy). Anyone else's
/// `X-Forwarded-For` is ignored: it is whatever the client chose to write.
public struct ClientAddress: Sendable {
    public var trustedProxies: [AddressRange]

    public init(trustedProxies: [AddressRange] = []) {
        self.trustedProxies = trustedProxies
    }

    /// The client's address for a request that came from `peer` with these headers.
    public func client(peer: String?, headers: HTTPFields) -> String {
        guard let peer else { return "unknown" }
        guard isTrusted(peer) else { return peer }
        let forwarded = headers[values: .xForwardedFor].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        // From the nearest hop back: the first address that is not one of our proxies.
        for hop in forwarded.reversed() {
            guard AddressRange.bytes(hop) != nil else { return peer }  // garbage: trust nothing beyond
            if !isTrusted(hop) { return hop }
        }
        return forwarded.first ?? peer
    }

    func isTrusted(_ address: String) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}

/// A request context that remembers the peer's address (both listeners use it), and whether
/// its connection has closed (`clientGone`): long work for a client that went away stops.
public struct ClientRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address (the connection's, before any proxy header is considered).
    public let peerAddress: String?
    /// Whether the connection the request came on has closed (the client went away).
    public var clientGone: @Sendable () -> Bool

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
        let gone = ConnectionStates.shared.gone(source.channel)
        clientGone = { gone.isSet }
    }

    /// A context for a request that did not come through a listener (fuzzing, tests).
    public init(peerAddress: String?, logger: Logger) {
        struct Source: RequestContextSource { let logger: Logger }
        coreContext = .init(source: Source(logger: logger))
        self.peerAddress = peerAddress
        clientGone = { false }
    }
}

/// A flag set once, when a connection's client goes.
final class ConnectionClosed: Sendable {
    private let flag = NIOLockedValueBox(false)
    var isSet: Bool { flag.withLockedValue { $0 } }
    func set() { flag.withLockedValue { $0 = true } }
}

/// Whether each open connection's client has gone — closed, or half-closed its side, which
/// the listeners allow and which leaves the channel open — by channel. `ConnectionGuard` sets
/// it; a request's context reads it (`ClientRequestContext.clientGone`). A connection without
/// a guard is gone when its channel closes.
final class ConnectionStates: Sendable {
    static let shared = ConnectionStates()
    private let states = NIOLockedValueBox<[ObjectIdentifier: ConnectionClosed]>([:])

    /// The flag of `channel`, made on first use.
    func gone(_ channel: any Channel) -> ConnectionClosed {
        let key = ObjectIdentifier(channel)
        let (flag, made) = states.withLockedValue { states -> (ConnectionClosed, Bool) in
            if let flag = states[key] { return (flag, false) }
            let flag = ConnectionClosed()
            states[key] = flag
            return (flag, true)
        }
        if made {
            channel.closeFuture.whenComplete { [weak self] _ in
                flag.set()
                self?.closed(channel)
            }
        }
        return flag
    }

    /// `channel` closed: its flag is set and forgotten (requests of it keep theirs).
    func closed(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        states.withLockedValue { $0.removeValue(forKey: key) }?.set()
    }

    /// Connections tracked now (for tests).
    var count: Int { states.withLockedValue { $0.count } }
}
