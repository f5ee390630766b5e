import CouchJSON
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A minimal blocking HTTP/1.1 keep-alive connection for `lt-bench`: one request at a time,
/// responses read by Content-Length or chunked encoding. Load generators should cost the machine
/// as little as possible, so the figures describe the server rather than the client.
final class BenchConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// The largest body (or chunk) a server's answer may announce: a number from the peer,
    /// bounded before any arithmetic or allocation with it.
    static let largestBody = 1 << 31
    /// Where each `read` lands, reused: a fresh 256 KiB array per read cost the client more than some requests cost the server.
    private var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    private let host: String

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(host: String, port: Int) throws {
        self.host = host
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        var yes: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
            close(fd)
            throw Failure(description: "lt-bench needs an IPv4 address, not \(host)")
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "cannot connect to \(host):\(port)")
        }
    }

    deinit { close(fd) }

    /// Sends one request with a JSON body (or none); throws unless it is answered 2xx, with the
    /// status and the start of the answer.
    func expectSuccess(_ method: String, _ path: String, authorization: String, json: JSON? = nil) throws {
        let answer = try send(method, path, authorization: authorization, body: json?.bytes)
        guard (200..<300).contains(answer.status) else {
            throw Failure(
                description:
                    "\(method) \(path): \(answer.status) \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
        }
    }

    /// Sends one request and returns the status and body.
    func send(
        _ method: String, _ path: String, authorization: String, body: [UInt8]? = nil,
        contentType: String = "application/json"
    ) throws -> (status: Int, body: [UInt8]) {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nAccept: application/json\r\n"
        if !authorization.isEmpty { head += "Authorization: \(authorization)\r\n" }
        if let body { head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n" }
        var request = Array((head + "\r\n").utf8)
        if let body { request += body }
        try writeAll(request)
        let headerEnd = try readUntil([13, 10, 13, 10])
        let headerText = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        let lines = headerText.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.split(separator: " ").count >= 2,
            let status = Int(statusLine.split(separator: " ")[1])
        else { throw Failure(description: "bad response") }
        var length: Int?
        var chunked = false
        for line in lines.dropFirst() {
            let lower = line.lowercased()
            if lower.hasPrefix("content-length:") {
                length = Int(lower.dropFirst(15).trimmingCharacters(in: .whitespaces))
            }
            if lower.hasPrefix("transfer-encoding:"), lower.contains("chunked") { chunked = true }
        }
        if method == "HEAD" { return (status, []) }
        if let length {
            guard (0...Self.largestBody).contains(length) else {
                throw Failure(description: "Content-Length \(length) out of range")
            }
            try fill(length)
            let body = Array(buffer[0..<length])
            buffer.removeFirst(length)
            return (status, body)
        }
        guard chunked else { throw Failure(description: "response without length") }
        var body: [UInt8] = []
        while true {
            let lineEnd = try readUntil([13, 10])
            let sizeText = String(decoding: buffer[0..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16),
                (0...Self.largestBody).contains(size)
            else {
                throw Failure(description: "bad chunk size \(sizeText)")
            }
            buffer.removeFirst(lineEnd + 2)
            try fill(size + 2)
            body += buffer[0..<size]
            buffer.removeFirst(size + 2)
            if size == 0 { return (status, body) }
        }
    }

    /// Sends Redis commands (RESP) in one write and reads their replies; returns, per command,
    /// how many elements its reply had (1 for a non-array reply). For comparisons with Redis.
    func redis(_ commands: [[String]]) throws -> [Int] {
        var request: [UInt8] = []
        for command in commands {
            request += Array("*\(command.count)\r\n".utf8)
            for argument in command { request += Array("$\(argument.utf8.count)\r\n\(argument)\r\n".utf8) }
        }
        try writeAll(request)
        return try commands.map { _ in try readRedisReply() }
    }

    private func readRedisReply() throws -> Int {
        let lineEnd = try readUntil([13, 10])
        let line = Array(buffer[0..<lineEnd])
        buffer.removeFirst(lineEnd + 2)
        guard let kind = line.first else { throw Failure(description: "empty Redis reply") }
        let number = Int(String(decoding: line.dropFirst(), as: UTF8.self)) ?? 0
        switch kind {
        case UInt8(ascii: "*"):
            for _ in 0..<max(0, number) { _ = try readRedisReply() }
            return max(0, number)
        case UInt8(ascii: "$"):
            if number >= 0 {
                try fill(number + 2)
                buffer.removeFirst(number + 2)
            }
            return 1
        case UInt8(ascii: "-"):
            throw Failure(description: "Redis: " + String(decoding: line.dropFirst(), as: UTF8.self))
        default:
            return 1
        }
    }

    private func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw Failure(description: "connection closed while writing") }
            offset += written
        }
    }

    private func readMore() throws {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { throw Failure(description: "connection closed while reading") }
        buffer += chunk[0..<count]
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count { try readMore() }
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searched = 0
        while true {
            if buffer.count >= marker.count {
                var i = max(0, searched - marker.count)
                while i + marker.count <= buffer.count {
                    if buffer[i] == marker[0], Array(buffer[i..<(i + marker.count)]) == marker { return i }
                    i += 1
                }
                searched = buffer.count
            }
            try readMore()
        }
    }
}
