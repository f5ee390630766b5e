import CouchEngine
import CouchJSON
import CouchProtocol
import HTTPTypes
import Hummingbird
import NIOCore

/// CouchDB's JSONP: with `[chttpd] allow_jsonp = true`, a JSON answer to a request with
/// `?callback=name` goes out as `/* CouchDB */name(…);` of type `application/javascript`
/// (streamed answers too: the feed or the view rows inside the call). A name of other characters
/// than letters, digits, `.`, `_`, `[`, `]` is 400 `invalid_callback`; with JSONP off (the
/// default) the parameter is ignored.
struct JSONP {
    let config: NodeConfiguration

    /// The callback a request asks for when JSONP is on; throws for one CouchDB refuses.
    func callback(_ request: Request) throws -> String? {
        guard config.value("chttpd", "allow_jsonp") == "true",
            let name = CouchURL.parameters(request.uri.query)["callback"], !name.isEmpty
        else { return nil }
        guard name.utf8.count <= 256, name.unicodeScalars.allSatisfy({ Self.allowed.contains($0) }) else {
            throw CouchError.badRequest("invalid_callback")
        }
        return name
    }

    /// Answers up to this size are wrapped whole (their final newline moved after the call).
    static let wholeLimit = 1 << 20

    static let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._[]".unicodeScalars)

    /// The answer wrapped in the call, when it is JSON, as CouchDB writes it: `/* CouchDB */`,
    /// the name, `(`, the JSON, `);` and a newline. An answer made whole (an error, a document)
    /// loses its own final newline inside the call, as CouchDB's `send_json` puts it after; a
    /// streamed one (a feed, view rows) or one over `wholeLimit` keeps what it writes.
    static func wrap(_ response: inout Response, callback: String) async throws {
        // An attachment (the one answer with `Accept-Ranges`) goes out as stored, JSON or not,
        // as CouchDB's: only its API's own JSON is wrapped.
        guard response.headers[.contentType]?.hasPrefix("application/json") == true,
            response.headers[.acceptRanges] == nil
        else { return }
        let prefix = ByteBuffer(string: "/* CouchDB */\(callback)(")
        let suffix = ByteBuffer(string: ");\n")
        let body = response.body
        response.headers[.contentType] = "application/javascript"
        response.headers[.contentLength] = nil
        // Read whole only when small: a large JSON attachment is wrapped as it streams.
        guard let length = body.contentLength, length <= Self.wholeLimit else {
            response.body = ResponseBody(
                contentLength: body.contentLength.map { $0 + prefix.readableBytes + suffix.readableBytes }
            ) { writer in
                try await body.write(Wrapper(parent: writer, prefix: prefix, suffix: suffix))
            }
            return
        }
        let whole = BodyCollector()
        try await body.write(whole)
        var bytes = whole.bytes.withLock { $0 }
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        var buffer = prefix
        buffer.writeBytes(bytes)
        buffer.writeImmutableBuffer(suffix)
        response.body = ResponseBody(byteBuffer: buffer)
    }

    /// Writes the prefix before the body's first bytes and the suffix before it finishes.
    private struct Wrapper: ResponseBodyWriter {
        var parent: any ResponseBodyWriter
        var prefix: ByteBuffer?
        let suffix: ByteBuffer

        mutating func write(_ buffer: ByteBuffer) async throws {
            if let start = prefix {
                prefix = nil
                try await parent.write(start)
            }
            try await parent.write(buffer)
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            if let start = prefix { try await parent.write(start) }
            try await parent.write(suffix)
            try await parent.finish(trailingHeaders)
        }
    }
}
