import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 that forwards to a server and misbehaves at random: it drops
/// connections before forwarding, cuts responses off part-way, and delays traffic. For fault
/// tests of clients (the replicator) against a real server.
public final class FaultyProxy: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let faultRate: Double
    private let lock = NSLock()
    private var rng: UInt64
    private var stopped = false
    public private(set) var faultsInjected = 0

    public init(targetPort: Int, faultRate: Double, seed: UInt64) throws {
        target = targetPort
        self.faultRate = faultRate
        rng = seed
        (listener, port) = FaultyProxy.listen(backlog: 128)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// A socket listening on an ephemeral port of 127.0.0.1: its descriptor and port.
    public static func listen(backlog: Int32) -> (descriptor: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        Glibc.listen(fd, backlog)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(UInt16(bigEndian: bound.sin_port)))
    }

    public func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func random() -> Double {
        lock.lock()
        defer { lock.unlock() }
        rng &+= 0x9E37_79B9_7F4A_7C15
        var z = rng
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
    }

    private func countFault() {
        lock.lock()
        faultsInjected += 1
        lock.unlock()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let roll = random()
            if roll < faultRate / 3 {
                countFault()  // drop at once
                close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(target).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            // Clients keep connections alive, so every connection is cut after a random amount
            // of response data (often mid-response); some are cut early, some delayed.
            let cutAfter = roll < faultRate ? Int(random() * 20_000) : 20_000 + Int(random() * 400_000)
            let delay = roll > 1 - faultRate / 2 ? random() * 0.3 : 0
            countFault()
            // Requests are cut too (uploads carry most bytes when pushing).
            let requestCut = 20_000 + Int(random() * 600_000)
            let link = Link(client, server)
            Thread.detachNewThread { FaultyProxy.pump(from: client, to: server, limit: requestCut, delay: 0, link: link) }
            Thread.detachNewThread { FaultyProxy.pump(from: server, to: client, limit: cutAfter, delay: delay, link: link) }
        }
    }

    /// The two sockets of one proxied connection. Both pumps shut them down when they stop; only
    /// the last one closes them, so a descriptor number is never closed twice (it may already
    /// belong to a newer connection).
    public final class Link: @unchecked Sendable {
        public let sockets: (Int32, Int32)
        private let lock = NSLock()
        private var running = 2
        public init(_ a: Int32, _ b: Int32) { sockets = (a, b) }
        public func finished() {
            shutdown(sockets.0, Int32(SHUT_RDWR))
            shutdown(sockets.1, Int32(SHUT_RDWR))
            lock.lock()
            running -= 1
            let last = running == 0
            lock.unlock()
            if last {
                close(sockets.0)
                close(sockets.1)
            }
        }
    }

    private static func pump(from source: Int32, to destination: Int32, limit: Int?, delay: Double, link: Link) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var forwarded = 0
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            var toSend = count
            if let limit { toSend = min(count, max(0, limit - forwarded)) }
            var offset = 0
            while offset < toSend {
                let written = buffer[offset..<toSend].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                if written <= 0 { break }
                offset += written
            }
            forwarded += toSend
            if let limit, forwarded >= limit { break }
        }
        link.finished()
    }
}
