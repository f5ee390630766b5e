import LTTestSupport
import MIMEMultipart
import Testing

@Suite("Multipart bodies")
struct MultipartTests {
    @Test("What build writes, parse gives back: every part's body byte for byte (line breaks, dashes, NULs), its headers by lowercased name", arguments: [1, 2, 3] as [UInt64])
    func roundTrip(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        // Bytes chosen to look like the format's own: CR, LF, dashes, colons, the boundary's letters.
        let alphabet: [UInt8] = Array("\r\n-:ab \u{0}é".utf8) + [0xFF]
        for _ in 0..<300 {
            let boundary = "b" + String(random.next() % 1_000_000)
            var parts: [(headers: [(String, String)], body: [UInt8])] = []
            for n in 0..<Int.random(in: 1...4, using: &random) {
                let length = Int.random(in: 0...200, using: &random)
                var body = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
                // A body never holds the delimiter (a writer picks a boundary that is not in it).
                while body.count >= boundary.count + 2, String(decoding: body, as: UTF8.self).contains("--" + boundary) { body.removeLast() }
                parts.append(([("Content-Type", "application/octet-stream"), ("X-Part", String(n))], body))
            }
            let built = Multipart.build(parts, boundary: boundary)
            let parsed = try Multipart.parse(built, boundary: boundary)
            #expect(parsed.count == parts.count)
            for (part, original) in zip(parsed, parts) {
                #expect(part.body == original.body)
                #expect(part.headers == ["content-type": "application/octet-stream", "x-part": original.headers[1].1])
            }
        }
    }

    @Test("The boundary parameter: quoted or not, any case, spaces around; none, or empty, is nil")
    func boundaryParameter() {
        #expect(Multipart.boundary(of: "multipart/related; boundary=abc") == "abc")
        #expect(Multipart.boundary(of: #"multipart/mixed;BOUNDARY="a b c" ; charset=utf-8"#) == "a b c")
        #expect(Multipart.boundary(of: "multipart/related;  boundary = x1 ") == "x1")
        #expect(Multipart.boundary(of: "multipart/related") == nil)
        #expect(Multipart.boundary(of: "multipart/related; boundary=") == nil)
        #expect(Multipart.boundary(of: #"multipart/related; boundary="""#) == nil)
        #expect(Multipart.boundary(of: "boundary=abc") == nil)  // a parameter, not the type
    }

    @Test("A body as CouchDB's clients send it (a JSON part, then an attachment), with LF-only line breaks too")
    func couchDBShape() throws {
        let crlf = "--abc\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"d\"}\r\n--abc\r\nContent-Type: text/plain\r\n\r\nhello\r\n--abc--"
        let parts = try Multipart.parse(Array(crlf.utf8), boundary: "abc")
        #expect(parts.map { String(decoding: $0.body, as: UTF8.self) } == ["{\"_id\":\"d\"}", "hello"])
        #expect(parts.map { $0.headers["content-type"] } == ["application/json", "text/plain"])
        let lf = "--abc\nContent-Type: text/plain\r\n\r\nhello\n--abc--"
        #expect(try Multipart.parse(Array(lf.utf8), boundary: "abc").map(\.body) == [Array("hello".utf8)])
    }

    @Test("Not multipart: fewer than two delimiters is an error, and no input makes it crash", arguments: [4, 5] as [UInt64])
    func malformed(seed: UInt64) {
        #expect(throws: Multipart.MalformedBody.self) { try Multipart.parse(Array("no delimiter here".utf8), boundary: "abc") }
        #expect(throws: Multipart.MalformedBody.self) { try Multipart.parse(Array("--abc only one".utf8), boundary: "abc") }
        #expect(throws: Multipart.MalformedBody.self) { try Multipart.parse([], boundary: "abc") }
        var random = SeededRandom(seed: seed)
        let alphabet: [UInt8] = Array("\r\n-abc:".utf8)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            if let parts = try? Multipart.parse(bytes, boundary: "abc") { #expect(!parts.isEmpty) }
        }
    }
}
