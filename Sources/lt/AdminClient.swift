import ArgumentParser
import AsyncHTTPClient
import CouchJSON
import Foundation
import NIOCore
import NIOHTTP1
import Replication

/// Requests to a running server as a server admin, for the `lt users` and `lt places`
/// commands. `base` carries the credentials: `http://ADMIN:PASSWORD@HOST:PORT`.
struct AdminClient {
    let base: String
    let authorization: String

    init(_ url: String?, environment: String) throws {
        guard let url = url ?? ProcessInfo.processInfo.environment[environment],
              var components = URLComponents(string: url), let user = components.user, let password = components.password else {
            throw ValidationError("Give a URL with a server admin's credentials: http://ADMIN:PASSWORD@HOST:PORT (or \(environment))")
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
        guard (200..<300).contains(Int(response.status.code)) else {
            throw ValidationError("\(method) \(path): \(response.status.code) \(reply["reason"]?.stringValue ?? reply["error"]?.stringValue ?? "")")
        }
        return reply
    }
}
