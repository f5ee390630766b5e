import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Requests an attacker would send, against a real `lt serve`: numbers chosen to overflow,
/// bodies too large. Each must get a CouchDB-style JSON error (or the right answer) and leave
/// the server up. Issue 22's F1–F4.
@Suite("Hostile input", .timeLimit(.minutes(3)))
struct HostileInputTests {
    /// The server still answers (it did not trap on the request before).
    static func alive(_ s: TestServer) async throws -> Bool {
        try await s.request(.GET, "/").json["couchdb"] == "Welcome"
    }

    static func base64url(_ json: JSON) -> String {
        Data(json.bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test("F1: a skip or limit near Int.max in a geo query (anonymous /api/places, _geo) is a 400 naming the parameter; the server stays up")
    func geoCounts() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let places = try await s.app(.GET, "/api/places?lat=0&lon=0&radius=10&skip=9223372036854775782")
        #expect(places.status == 400 && places.json["error"] == "bad_request", "\(places.text)")
        #expect(places.json["reason"]?.stringValue?.contains("skip") == true, "\(places.text)")
        let geo = "/lt_places/_design/points/_geo/pointidx?lat=37.49&lon=-122.3&radius=5000"
        for query in ["&skip=9223372036854775807", "&skip=9223372036854775807&limit=200", "&skip=99999999999999999999999",
                      "&limit=9223372036854775807", "&skip=-1", "&nearest=true&skip=9223372036854775000"] {
            let reply = try await s.request(.GET, geo + query)
            #expect(reply.status == 400 && reply.json["error"] == "bad_request", "\(query): \(reply.status) \(reply.text)")
        }
        // The largest accepted skip answers an empty page, not a trap.
        let largest = try await s.request(.GET, geo + "&skip=\(ClientCount.largest)&limit=200")
        #expect(largest.status == 200 && largest.json["rows"]?.arrayValue?.isEmpty == true, "\(largest.text)")
        #expect(try await s.request(.GET, geo + "&limit=3").json["rows"]?.arrayValue?.count == 3)
        #expect(try await Self.alive(s))
    }

    @Test("F2: _find with a bookmark whose offset is near Int.max, plus skip, is 400 invalid_bookmark; huge skip/limit elsewhere are 400 naming them")
    func findCounts() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/t").status == 201)
        #expect(try await s.request(.POST, "/t/_bulk_docs", json: ["docs": [["n": 1], ["n": 2], ["n": 3]]]).status == 201)
        for offset: JSON in [.int(Int.max - 5), .int(-1), .double(1e300), "x"] {
            let bookmark = Self.base64url(["offset": offset])
            let reply = try await s.request(.POST, "/t/_find", json: ["selector": [:], "bookmark": .string(bookmark), "skip": 100])
            #expect(reply.status == 400 && reply.json["error"] == "invalid_bookmark", "\(offset): \(reply.text)")
        }
        for (key, value): (String, JSON) in [("skip", .int(Int.max)), ("limit", .int(Int.max)), ("skip", .double(1e19)), ("limit", -1)] {
            var body: JSONObject = ["selector": [:]]
            body[key] = value
            let reply = try await s.request(.POST, "/t/_find", json: .object(body))
            #expect(reply.status == 400 && reply.json["reason"]?.stringValue?.contains(key) == true, "\(key)=\(value): \(reply.text)")
        }
        for path in ["/t/_all_docs?skip=9223372036854775807", "/t/_all_docs?limit=18446744073709551616",
                     "/t/_changes?limit=9223372036854775807", "/_all_dbs?skip=9223372036854775807&limit=9223372036854775807"] {
            let reply = try await s.request(.GET, path)
            // CouchDB's error for a count that is not one; the reason names a parameter asked.
            let reason = reply.json["reason"]?.stringValue ?? ""
            #expect(reply.status == 400 && reply.json["error"] == "query_parse_error", "\(path): \(reply.text)")
            #expect(["skip", "limit"].contains { path.contains("\($0)=") && reason.contains("(\($0):") }, "\(path): \(reply.text)")
        }
        #expect(try await s.request(.POST, "/t/_all_docs", json: ["skip": .int(Int.max)]).status == 400)
        // A bookmark the server gave still works.
        let first = try await s.request(.POST, "/t/_find", json: ["selector": [:], "limit": 2])
        let next = try await s.request(.POST, "/t/_find", json: ["selector": [:], "limit": 2, "bookmark": first.json["bookmark"] ?? .null])
        #expect(first.json["docs"]?.arrayValue?.count == 2 && next.json["docs"]?.arrayValue?.count == 1)
        #expect(try await Self.alive(s))
    }

    @Test("F3: $mod over Int.min (divisor -1) matches as CouchDB's rem does (remainder 0), and the server stays up")
    func modOverflow() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/t").status == 201)
        #expect(try await s.request(.PUT, "/t/min", json: ["n": .int(Int.min)]).status == 201)
        #expect(try await s.request(.PUT, "/t/seven", json: ["n": 7]).status == 201)
        let reply = try await s.request(.POST, "/t/_find", json: ["selector": ["n": ["$mod": [-1, 0]]], "fields": ["_id"]])
        #expect(reply.status == 200, "\(reply.text)")
        #expect(Set(reply.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } ?? []) == ["min", "seven"])
        let min = try await s.request(.POST, "/t/_find", json: ["selector": ["n": ["$mod": [.int(Int.min), 0]]], "fields": ["_id"]])
        #expect(min.json["docs"]?.arrayValue?.map { $0["_id"] } == ["min"], "\(min.text)")
        #expect(try await Self.alive(s))
    }

    @Test("Revision generations: beyond what a revision id holds they are refused, and an edit of the largest one works, so no edit overflows")
    func hugeGenerations() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/t").status == 201)
        // A deleted revision at generation Int.max: recreating the document would be Int.max + 1.
        let doc: JSON = ["_id": "d", "_revisions": ["start": .int(Int.max), "ids": ["abc"]], "_rev": .string("\(Int.max)-abc"), "_deleted": true]
        let reply = try await s.request(.POST, "/t/_bulk_docs", json: ["docs": [doc], "new_edits": false])
        #expect(reply.status == 400 || reply.json[0]?["error"] != nil, "\(reply.text)")
        let recreated = try await s.request(.PUT, "/t/d", json: ["x": 1])
        #expect(recreated.status == 201 && recreated.json["rev"]?.stringValue?.hasPrefix("1-") == true, "\(recreated.text)")
        let largest: JSON = ["_id": "e", "_revisions": ["start": 999_999_999_999_999_999, "ids": ["abc"]], "_rev": "999999999999999999-abc"]
        #expect(try await s.request(.POST, "/t/_bulk_docs", json: ["docs": [largest], "new_edits": false]).status == 201)
        let edited = try await s.request(.PUT, "/t/e", json: ["_rev": "999999999999999999-abc", "x": 1])
        #expect(edited.status == 201, "\(edited.text)")
        #expect(try await Self.alive(s))
    }

    @Test("F4: an application API body over its limit is 413 too_large as JSON (configurable), as is a database API body over --max-body-size")
    func oversizedBodies() async throws {
        let s = try TestServer(extraArguments: ["--max-app-body-size", "4096", "--max-body-size", "65536"])
        defer { s.stop() }
        let big = JSON.object(["password": .string(String(repeating: "a", count: 5000))])
        let app = try await s.app(.PUT, "/api/users/bob", json: big)
        #expect(app.status == 413 && app.json["error"] == "too_large", "\(app.status) \(app.text)")
        #expect(app.headers["Content-Type"].first?.hasPrefix("application/json") == true)
        let login = try await s.app(.POST, "/api/login", json: ["username": "bob", "password": .string(String(repeating: "b", count: 5000))])
        #expect(login.status == 413 && login.json["error"] == "too_large")
        // Under the limit it is an ordinary request.
        #expect(try await s.app(.PUT, "/api/users/bob", json: ["password": "fine"]).status == 201)
        let db = try await s.request(.PUT, "/lt_places/huge", json: ["blob": .string(String(repeating: "x", count: 70_000))])
        #expect(db.status == 413 && db.json["error"] == "too_large", "\(db.text)")
        #expect(try await s.request(.GET, "/lt_places/huge").status == 404)
        #expect(try await Self.alive(s))
    }

    @Test("An OwnTracks location with a timestamp beyond any Int (it names the document) is a 400, and the server stays up")
    func ownTracksTimestamp() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/oto", json: ["password": "pw-oto"]).status == 201)
        let login = try await s.app(.POST, "/api/login", json: ["username": "oto", "password": "pw-oto"]).json
        let auth = TestServer.Auth.basic(login["api_key"]?.stringValue ?? "", login["api_password"]?.stringValue ?? "")
        for tst: JSON in [1e300, -1e300, 1e19, -1] {
            let reply = try await s.app(.POST, "/api/owntracks?u=oto&d=p", json: ["_type": "location", "lat": 1, "lon": 2, "tst": tst], auth: auth)
            #expect(reply.status == 400 && reply.json["reason"]?.stringValue?.contains("tst") == true, "\(tst): \(reply.text)")
        }
        #expect(try await s.app(.POST, "/api/owntracks?u=oto&d=p", json: ["_type": "location", "lat": 1, "lon": 2, "tst": 1_700_000_000], auth: auth).status == 200)
        #expect(try await Self.alive(s))
    }

    @Test("A document over --max-document-size is 413 document_too_large (CouchDB's max_document_size) by every way of writing it, and nothing is stored")
    func oversizedDocuments() async throws {
        let s = try TestServer(extraArguments: ["--max-document-size", "1000"])
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/t").status == 201)
        let blob = JSON.string(String(repeating: "x", count: 1200))
        let put = try await s.request(.PUT, "/t/big", json: ["blob": blob])
        #expect(put.status == 413 && put.json == ["error": "document_too_large", "reason": "big"], "\(put.text)")
        let post = try await s.request(.POST, "/t", json: ["_id": "big2", "blob": blob])
        #expect(post.status == 413 && post.json["error"] == "document_too_large", "\(post.text)")
        let bulk = try await s.request(.POST, "/t/_bulk_docs", json: ["docs": [["_id": "small", "x": 1], ["_id": "big3", "blob": blob]]])
        #expect(bulk.json[0]?["ok"] == true && bulk.json[1]?["error"] == "document_too_large", "\(bulk.text)")
        let replicated = try await s.request(.POST, "/t/_bulk_docs", json: ["new_edits": false, "docs": [["_id": "big4", "_rev": "1-abc", "blob": blob]]])
        #expect(replicated.json[0]?["error"] == "document_too_large", "\(replicated.text)")
        for id in ["big", "big2", "big3", "big4"] { #expect(try await s.request(.GET, "/t/\(id)").status == 404) }
        #expect(try await s.request(.GET, "/t/small").status == 200)
        #expect(try await s.request(.PUT, "/t/fits", json: ["blob": .string(String(repeating: "x", count: 900))]).status == 201)
    }

    @Test("--password-iterations sets the PBKDF2 count of passwords stored from then on (users', _users documents'); 0 is refused at start")
    func passwordIterations() async throws {
        let s = try TestServer(extraArguments: ["--password-iterations", "1234"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/iter", json: ["password": "pw-iter"]).status == 201)
        let user = try await s.request(.GET, "/lt_users/iter").json
        #expect(user["iterations"] == 1234 && user["password"] == nil, "\(user)")
        #expect(try await s.app(.POST, "/api/login", json: ["username": "iter", "password": "pw-iter"]).status == 200)
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:plain", json: ["name": "plain", "type": "user", "roles": [], "password": "pw"]).status == 201)
        #expect(try await s.request(.GET, "/_users/org.couchdb.user:plain").json["iterations"] == 1234)
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let refused = try TestServer.runLT(["serve", "--data", directory.url.path, "--db-port", "0", "--port", "0", "--password-iterations", "0"])
        #expect(refused.status != 0 && refused.errors.contains("--password-iterations must be between 1 and 100,000,000"), "\(refused.errors)")
    }
}
