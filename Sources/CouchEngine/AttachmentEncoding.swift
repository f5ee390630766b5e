import CompressNIO
public import CouchJSON
import Foundation
import NIOCore

/// How attachment bodies are kept, as CouchDB keeps them: bodies of compressible types
/// (`text/*`, JSON, JavaScript, XML) are stored gzip-compressed, with `"encoding": "gzip"`,
/// `encoded_length` (stored bytes) and `length` (decoded bytes) in their metadata and a digest
/// of the stored bytes. zlib with CouchDB's settings (level 8, 15-bit window, memory level 8)
/// gives the same bytes CouchDB stores, so the same text has the same digest on both.
///
/// Replication moves the stored bytes untouched (`follows` parts carry `encoding`); a plain
/// read decodes them.
public enum AttachmentEncoding {
    /// CouchDB's default `[attachments] compressible_types`.
    static let compressibleTypes = ["text/*", "application/javascript", "application/json", "application/xml"]

    /// Largest body a gzip attachment may decode to: a guard against decompression bombs.
    public static let maxDecodedSize = 1 << 30

    /// Whether CouchDB compresses attachments of this content type (parameters ignored, any case).
    public static func isCompressible(_ contentType: String) -> Bool {
        let type =
            contentType.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            } ?? ""
        return compressibleTypes.contains { pattern in
            if pattern.hasSuffix("/*") { return type.hasPrefix(pattern.dropLast()) }
            return type == pattern
        }
    }

    /// gzip with CouchDB's zlib settings.
    public static func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
        var input = ByteBuffer(bytes: bytes)
        let configuration = ZlibConfiguration(
            windowSize: Int32(15), compressionLevel: Int32(8), memoryLevel: Int32(8), strategy: .default)
        let output = try input.compress(with: .gzip(configuration: configuration))
        return Array(output.readableBytesView)
    }

    /// Decodes a gzip body a client or peer sent with its declared decoded `length`: at most
    /// that many bytes are decoded (413 beyond), so a small body cannot expand without bound;
    /// without a usable declaration, at most `maxDecodedSize`.
    public static func gunzip(_ bytes: [UInt8], declaredLength: JSON?) throws -> [UInt8] {
        guard let declared = declaredLength.flatMap(ClientCount.from), declared < maxDecodedSize else {
            return try gunzip(bytes)
        }
        return try gunzip(bytes, limit: declared + 1)
    }

    /// Decodes a gzip body; throws `bad_request` when it is not valid gzip, 413 when it decodes
    /// to `limit` bytes or more. `what` names the body in those errors.
    public static func gunzip(
        _ bytes: [UInt8], limit: Int = maxDecodedSize, what: String = "A gzip attachment"
    ) throws -> [UInt8] {
        guard !bytes.isEmpty else { throw CouchError.badRequest("\(what) is empty") }
        var input = ByteBuffer(bytes: bytes)
        do {
            let output = try input.decompress(with: .gzip(), maxSize: limit)
            return Array(output.readableBytesView)
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw CouchError(status: 413, error: "too_large", reason: "\(what) decodes to more than \(limit) bytes")
        } catch {
            throw CouchError.badRequest("\(what) is not valid gzip data")
        }
    }
}
