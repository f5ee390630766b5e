import CouchJSON
import CouchEngine
import Testing

@Suite("Attachment encoding (gzip as CouchDB stores it)")
struct AttachmentEncodingTests {
    @Test("Compressible types are CouchDB's defaults, in any case, with parameters")
    func compressibleTypes() {
        for type in ["text/plain", "Text/Plain; charset=utf-8", "text/csv", "application/json", "application/javascript", " application/xml "] {
            #expect(AttachmentEncoding.isCompressible(type), "\(type)")
        }
        for type in ["image/png", "application/octet-stream", "application/jsonx", "application/gpx+xml", ""] {
            #expect(!AttachmentEncoding.isCompressible(type), "\(type)")
        }
    }

    @Test("gzip and back gives the same bytes, for random inputs; bad gzip is 400, a body decoding past the limit 413")
    func roundTrip() throws {
        var random = SystemRandomNumberGenerator()
        for size in [0, 1, 100, 4096, 70_000] {
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let packed = try AttachmentEncoding.gzip(bytes)
            #expect(packed.starts(with: [0x1F, 0x8B]))
            #expect(try AttachmentEncoding.gunzip(packed) == bytes)
        }
        #expect(throws: CouchError.self) { try AttachmentEncoding.gunzip([1, 2, 3]) }
        let bomb = try AttachmentEncoding.gzip([UInt8](repeating: 0, count: 100_000))
        do {
            _ = try AttachmentEncoding.gunzip(bomb, limit: 1000)
            Issue.record("a body past the limit was decoded")
        } catch let error as CouchError {
            #expect(error.status == 413)
        }
    }
}
