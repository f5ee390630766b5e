import AsyncHTTPClient
import CommandSupport
import Foundation
import NIOCore
import NIOHTTP1

/// Requests to a running server's control socket (`<data>/control.sock`, `LTServer.ControlSocket`):
/// `lt backup` and `lt doctor`.
enum ControlSocketClient {
    static func request(
        _ socket: String, _ method: HTTPMethod, _ path: String, deadline: NIODeadline
    ) async throws -> HTTPClientResponse {
        guard let url = URL(httpURLWithSocketPath: socket, uri: path) else {
            throw CommandFailure("cannot address the control socket \(socket)")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        return try await HTTPClient.shared.execute(request, deadline: deadline)
    }
}
