import CouchJSON
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LTTestSupport
import Testing
import NIOHTTP1

/// Document ids are kept byte for byte or refused (issue 40, row 9): a NUL in an id used to
/// end it in storage (`a%00b` replaced `a`), and bytes that are not UTF-8 became U+FFFD, so
/// two different ids named one document.
@Suite("Document ids, byte for byte")
struct DocumentIDTests {
    @Test("A NUL in an id is refused on every way in and found nowhere on the way out; the document it would have cut to is untouched")
    func nulInIDs() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/nul").status == 201)
        let a = try await s.request(.PUT, "/nul/a", json: ["x": 1])
        #expect(a.status == 201)
        for path in ["/nul/a%00b", "/nul/a%00", "/nul/_local/a%00b"] {
            let refused = try await s.request(.PUT, path, json: ["x": 2])
            #expect(refused.status == 400 && refused.json["error"] == "illegal_docid", "\(path): \(refused.text)")
        }
        let posted = try await s.request(.POST, "/nul", json: ["_id": "a\u{0}zzz", "x": 3])
        #expect(posted.status == 400 && posted.json["error"] == "illegal_docid", "\(posted.text)")
        let bulk = try await s.request(.POST, "/nul/_bulk_docs", json: ["docs": [["_id": "a\u{0}q", "x": 4], ["_id": "fine", "x": 5]]])
        #expect(bulk.json[0]?["error"] == "illegal_docid" && bulk.json[1]?["ok"] == true, "\(bulk.text)")
        let replicated = try await s.request(.POST, "/nul/_bulk_docs", json: [
            "docs": [["_id": "a\u{0}r", "_rev": "3-0123456789abcdef0123456789abcdef", "x": 6]], "new_edits": false,
        ])
        #expect(replicated.text.contains("illegal_docid"), "\(replicated.text)")
        // Reads of such ids find nothing (they used to find `a`).
        #expect(try await s.request(.GET, "/nul/a%00zzz").status == 404)
        #expect(try await s.request(.GET, "/nul/_local/a%00b").status == 404)
        let keys = try await s.request(.POST, "/nul/_all_docs", json: ["keys": ["a\u{0}b", "a"]])
        #expect(keys.json["rows"]?[0]?["error"] == "not_found" && keys.json["rows"]?[1]?["id"] == "a", "\(keys.text)")
        let bulkGet = try await s.request(.POST, "/nul/_bulk_get", json: ["docs": [["id": "a\u{0}b"]]])
        #expect(bulkGet.json["results"]?[0]?["docs"]?[0]?["error"] != nil, "\(bulkGet.text)")
        let doc = try await s.request(.GET, "/nul/a").json
        #expect(doc["x"] == 1 && doc["_rev"] == a.json["rev"])
        #expect(try await s.request(.GET, "/nul").json["doc_count"] == 2)  // a and fine
    }

    /// Found in review (session 33): `_revs_diff` and `_bulk_get` looked ids up in a Swift
    /// dictionary, whose `String` keys take `é` and `e` + U+0301 for one; a replicator asking
    /// about one was told the other's revisions, and skipped the document.
    @Test("_revs_diff, _bulk_get, _bulk_docs and a _doc_ids filter tell ids apart that differ only in Unicode normalisation, as CouchDB (bytes) does")
    func normalisationVariants() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/norm").status == 201)
        let composed = "\u{e9}", decomposed = "e\u{301}"
        let stored = try await s.request(.PUT, "/norm/%C3%A9", json: ["x": 1])
        let rev = try #require(stored.json["rev"]?.stringValue)
        let diff = try await s.request(.POST, "/norm/_revs_diff", body: Array(#"{"\#(decomposed)":["\#(rev)"],"\#(composed)":["\#(rev)"]}"#.utf8))
        let keys = diff.json.objectValue?.members.map { Array($0.0.utf8) } ?? []
        #expect(keys == [Array(decomposed.utf8)] && diff.json.objectValue?.members.first?.1["missing"] == [.string(rev)], "\(diff.text)")
        let bulkGet = try await s.request(.POST, "/norm/_bulk_get", body: Array(#"{"docs":[{"id":"\#(decomposed)"},{"id":"\#(composed)"}]}"#.utf8))
        let results = bulkGet.json["results"]?.arrayValue ?? []
        #expect(results.count == 2 && results[0]["docs"]?[0]?["error"]?["error"] == "not_found", "\(bulkGet.text)")
        #expect(results.count == 2 && results[1]["docs"]?[0]?["ok"]?["x"] == 1, "\(bulkGet.text)")
        // Both written in one batch, and each read back as itself.
        let bulk = try await s.request(.POST, "/norm/_bulk_docs", body: Array(#"{"docs":[{"_id":"\#(decomposed)","y":2},{"_id":"\#(composed)","_rev":"\#(rev)","x":3}]}"#.utf8))
        #expect(bulk.json[0]?["ok"] == true && bulk.json[1]?["ok"] == true, "\(bulk.text)")
        #expect(try await s.request(.GET, "/norm/e%CC%81").json["y"] == 2)
        #expect(try await s.request(.GET, "/norm/%C3%A9").json["x"] == 3)
        // A _doc_ids filter names one of them.
        let filtered = try await s.request(.GET, "/norm/_changes?filter=_doc_ids&doc_ids=%5B%22%C3%A9%22%5D")
        let ids = filtered.json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue.map { Array($0.utf8) } }
        #expect(ids == [Array(composed.utf8)], "\(filtered.text)")
    }

    @Test("An id of bytes that are not UTF-8 is refused as CouchDB refuses it (illegal_docid), and read as missing, never as another id")
    func invalidUTF8() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/utf").status == 201)
        #expect(try await s.request(.PUT, "/utf/a%EF%BF%BDb", json: ["x": "replacement character"]).status == 201)
        // Sent as raw bytes: an HTTP client library would re-encode the path.
        for path in ["/utf/a%FFb", "/utf/a%C3", "/utf/a%FEb/att"] {
            let refused = try Self.raw(s, "PUT \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"x\":1}")
            #expect(refused.hasPrefix("HTTP/1.1 400") && refused.contains(#"{"error":"illegal_docid","reason":"Document id must be valid UTF-8"}"#), "\(path): \(refused)")
        }
        #expect(try Self.raw(s, "GET /utf/a%FFb HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 404"))
        #expect(try await s.request(.PUT, "/utf/a%C3%A9", json: ["x": 2]).status == 201)
        #expect(try await s.request(.GET, "/utf/a%C3%A9").json["_id"] == "aé")
        #expect(try await s.request(.GET, "/utf").json["doc_count"] == 2)
    }

    /// One request sent as raw bytes (as the admin) and the answer's text.
    static func raw(_ s: TestServer, _ request: String) throws -> String {
        let fd = try AbuseTests.connect(s.port)
        defer { close(fd) }
        let auth = "Authorization: " + TestServer.basic(TestServer.admin.0, TestServer.admin.1) + "\r\n"
        AbuseTests.send(fd, request.replacingOccurrences(of: "Host: x\r\n", with: "Host: x\r\n" + auth))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { if !answer.isEmpty { break } else { continue } }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}
