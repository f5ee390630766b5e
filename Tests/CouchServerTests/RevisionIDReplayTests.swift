import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Replays against a real `lt serve` the edits recorded from Apache CouchDB 3.4.3 by
/// scripts/record-revision-ids.py (Tests/Compatibility/Fixtures/couchdb-revision-ids.json):
/// creations, updates with every kind of JSON value, deletions, recreation, `_bulk_docs`, a
/// design document, inline, standalone and gzip-compressible attachments, stubs. lt must give
/// every edit the revision id CouchDB gave it, as both follow CouchDB's formula.
@Suite("Revision ids as Apache CouchDB computes them")
struct RevisionIDReplayTests {
    @Test("every recorded edit gets CouchDB's status and revision id")
    func sameRevisionIDs() async throws {
        let fixture = try Repository.couchDBFixture("couchdb-revision-ids.json")
        let steps = try #require(fixture["steps"]?.arrayValue)
        #expect(steps.count >= 15)
        let server = try TestServer()
        defer { server.stop() }
        #expect(try await server.request(.PUT, "/\(fixture["database"]?.stringValue ?? "")").status == 201)
        for step in steps {
            let path = step["path"]?.stringValue ?? "/"
            var body: [UInt8]?
            if let text = step["body"]?.stringValue { body = Array(text.utf8) }
            if let base64 = step["body_base64"]?.stringValue { body = Data(base64Encoded: base64).map(Array.init) }
            let headers = step["content_type"]?.stringValue.map { [("Content-Type", $0)] } ?? []
            let reply = try await server.request(
                HTTPMethod(rawValue: step["method"]?.stringValue ?? "GET"), path, body: body, headers: headers)
            #expect(reply.status == step["status"]?.intValue, "\(path): \(reply.text)")
            #expect(reply.json == step["answer"], "\(step["method"]?.stringValue ?? "") \(path): lt \(reply.text), CouchDB \(step["answer"] ?? .null)")
        }
    }
}
