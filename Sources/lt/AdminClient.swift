import ArgumentParser
import CommandSupport
import AsyncHTTPClient
import CouchJSON
import CouchProtocol
import Foundation
import NIOCore
import NIOHTTP1

/// Requests to a running server as a server admin (or an analyst), for the `lt users`,
/// `lt places` and `lt analysis` commands. `base` carries the credentials:
/// `http://NAME:PASSWORD@HOST:PORT`.
struct AdminClient {
    let server: CouchHTTPClient

    /// - Parameter who: whose credentials the URL must carry, for the error message.
    init(_ url: String?, environment: String, who: String = "a server admin's") throws {
        let usage = ValidationError(
            "Give a URL with \(who) credentials: http://NAME:PASSWORD@HOST:PORT (or \(environment))")
        guard let url = url ?? ProcessInfo.processInfo.environment[environment],
            let server = try? CouchHTTPClient(url: url), server.credentials != nil
        else { throw usage }
        self.server = server
    }

    /// Sends one request (`path` from the server's root); throws with the server's reason
    /// unless the status is 2xx.
    func send(_ method: HTTPMethod, _ path: String, json: JSON? = nil) async throws -> JSON {
        let reply = try await server.send(method, path, fromServerRoot: true, json: json, timeout: .seconds(300))
        try Self.check(HTTPResponseStatus(statusCode: reply.status), reply.json, method, path)
        return reply.json
    }

    /// Sends a GET and writes the answer's body to `output` as it arrives (never whole in
    /// memory); throws with the server's reason unless the status is 2xx. `progress` is called
    /// with the bytes written so far after each part.
    func download(_ path: String, to output: FileHandle, progress: (Int) -> Void = { _ in }) async throws -> Int {
        let response = try await server.stream(.GET, path, fromServerRoot: true, accept: nil, deadline: .distantFuture)
        guard (200..<300).contains(Int(response.status.code)) else {
            let body = try await response.body.collect(upTo: 1 << 20)
            try Self.check(response.status, (try? JSON.parse(Array(buffer: body))) ?? .null, .GET, path)
            return 0
        }
        var written = 0
        for try await part in response.body {
            try output.write(contentsOf: part.readableBytesView)
            written += part.readableBytes
            progress(written)
        }
        return written
    }

    private static func check(_ status: HTTPResponseStatus, _ reply: JSON, _ method: HTTPMethod, _ path: String) throws
    {
        guard (200..<300).contains(Int(status.code)) else {
            throw CommandFailure(
                "\(method) \(path): \(status.code) \(reply["reason"]?.stringValue ?? reply["error"]?.stringValue ?? "")"
            )
        }
    }
}
