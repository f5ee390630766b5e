import CouchJSON
public import HTTPTypes
public import Hummingbird
import NIOCore

/// A router's failures as CouchDB's `{"error","reason"}` JSON: a `CouchError` with its own
/// status, Hummingbird's `HTTPError` (no route: 404) with its status, anything else a 500 that
/// says what failed.
public struct JSONErrors<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return Self.response(for: error)
        }
    }

    /// The JSON answer for `error`.
    public static func response(for error: any Error) -> Response {
        switch error {
        case let error as CouchError:
            return reply(HTTPResponse.Status(code: error.status), error.error, error.reason)
        case let error as HTTPError:
            return reply(
                error.status, error.status == .notFound ? "not_found" : "bad_request",
                error.body ?? error.status.reasonPhrase)
        default:
            return reply(.internalServerError, "internal_server_error", "\(error)")
        }
    }

    /// `{"error": error, "reason": reason}` and a newline (as CouchDB ends its answers) with `status`.
    public static func reply(_ status: HTTPResponse.Status, _ error: String, _ reason: String) -> Response {
        let body: JSON = ["error": .string(error), "reason": .string(reason)]
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.bytes + [10])))
    }
}
