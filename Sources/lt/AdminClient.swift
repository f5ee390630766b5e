import ArgumentParser
import CommandSupport
import AsyncHTTPClient
import CouchJSON
import Foundation
import NIOCore
import NIOHTTP1
import Replication

/// Requests to a running server as a server admin (or an analyst), for the `lt users`,
/// `lt places` and `lt analysis` commands. `base` carries the credentials:
/// `http://NAME:PASSWORD@HOST:PORT`.
struct AdminClient {
    let base: String
    let authorization: String

    /// - Parameter who: whose credentials the URL must carry, for the error message.
    init(_ url: String?, environment: String, who: String = "a server admin's") throws {
        guard let url = url ?? ProcessInfo.processInfo.environment[environment],
              var components = URLComponents(string: url), let user = components.user, let password = components.password else {
            throw ValidationError("Give a URL with \(who) credentials: http://NAME:PASSWORD@HOST:PORT (or \(environment))")
        }
        components.user = nil
        components.password = nil
        components.path = ""
        base = components.string ?? url
        let credentials = (user.removingPercentEncoding ?? user) + ":" + (password.removingPercentEncoding ?? password)
        authorization = "Basic " + Data(credentials.utf8).base64EncodedString()
    }

    /// Sends one request; throws with the server's reason unless the status is 2xx.
    func send(_ method: HTTPMethod, _ path: String, json: JSON? = nil) async throws -> JSON {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: authorization)
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: json.bytes))
        }
        let response = try await RemoteEndpoint.sharedClient.execute(request, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 1 << 30)
        let reply = (try? JSON.parse(Array(buffer: body))) ?? .null
        try Self.check(response.status, reply, method, path)
        return reply
    }

    /// Sends a GET and writes the answer's body to `output` as it arrives (never whole in
    /// memory); throws with the server's reason unless the status is 2xx. `progress` is called
    /// with the bytes written so far after each part.
    func download(_ path: String, to output: FileHandle, progress: (Int) -> Void = { _ in }) async throws -> Int {
        var request = HTTPClientRequest(url: base + path)
        request.headers.add(name: "Authorization", value: authorization)
        let response = try await RemoteEndpoint.sharedClient.execute(request, deadline: .distantFuture)
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

    private static func check(_ status: HTTPResponseStatus, _ reply: JSON, _ method: HTTPMethod, _ path: String) throws {
        guard (200..<300).contains(Int(status.code)) else {
            throw CommandFailure("\(method) \(path): \(status.code) \(reply["reason"]?.stringValue ?? reply["error"]?.stringValue ?? "")")
        }
    }
}
