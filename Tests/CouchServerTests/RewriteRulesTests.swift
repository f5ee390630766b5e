import CouchJSON
@testable import CouchServer
import LTTestSupport
import Testing

/// The declarative `rewrites` array resolved as CouchDB 3's `chttpd_rewrite` resolves it. The
/// expected targets are what CouchDB 3.4.3 rewrote the same rules and requests to (its log at
/// level debug says "rewrite to ..."), 2026-11-27.
@Suite("Rewrite rules")
struct RewriteRulesTests {
    static let rules: [JSON] = [
        ["from": "foo", "to": "foo.txt"],
        ["from": "foo2", "to": "foo.txt", "method": "GET"],
        ["from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"],
        ["from": "/welcome/:name", "to": "_show/welcome", "query": ["name": ":name"]],
        ["from": "/welcome4/*", "to": "_show/welcome3", "query": ["name": "*"]],
        ["from": "/welcome5/*", "to": "_show/*", "query": ["name": "*"]],
        ["from": "simpleForm/basicViewFixed", "to": "_list/simpleForm/basicView", "query": ["startkey": 3, "endkey": 8]],
        ["from": "simpleForm/basicViewPath/:start/:end", "to": "_list/simpleForm/basicView",
         "query": ["startkey": ":start", "endkey": ":end"], "formats": ["start": "int", "end": "int"]],
        ["from": "simpleForm/complexView5/:a/:b", "to": "_list/simpleForm/complexView3", "query": ["key": [":a", ":b"]]],
        ["from": "bool/:doc", "to": "_view/v", "query": ["include_docs": ":doc"], "formats": ["doc": "bool"]],
        ["from": "/", "to": "_view/basicView"],
        ["from": "/db/*", "to": "../../*"],
    ]

    func resolve(_ method: String, _ path: String, _ query: [(String, String)] = []) throws -> String? {
        try RewriteRules(Self.rules, secure: true).resolve(
            method: method, path: path.split(separator: "/").map(String.init), query: query)
    }

    @Test("Rules match by method and path; variables fill the path and the query; the request's query follows")
    func resolution() throws {
        #expect(try resolve("GET", "foo") == "foo.txt")
        #expect(try resolve("GET", "foo2") == "foo.txt")
        #expect(try resolve("POST", "foo2") == nil)
        // A path variable is also a query parameter, as in CouchDB.
        #expect(try resolve("PUT", "hello/abc") == "_update/hello/abc?id=abc")
        #expect(try resolve("GET", "hello/abc") == nil)
        #expect(try resolve("GET", "welcome/user") == "_show/welcome?name=user")
        #expect(try resolve("GET", "welcome4/a/b") == "_show/welcome3?name=%2A")
        #expect(try resolve("GET", "welcome5/welcome3") == "_show/welcome3?name=%2A")
        // The rule's own query wins over the request's; the rest of the request's stays.
        #expect(try resolve("GET", "simpleForm/basicViewFixed", [("startkey", "4"), ("limit", "2")])
                == "_list/simpleForm/basicView?startkey=3&endkey=8&limit=2")
        #expect(try resolve("GET", "simpleForm/basicViewPath/3/8") == "_list/simpleForm/basicView?startkey=3&endkey=8&start=3&end=8")
        #expect(try resolve("GET", "simpleForm/complexView5/test/essai")
                == "_list/simpleForm/complexView3?key=%5B%22test%22%2C%22essai%22%5D&a=test&b=essai")
        // CouchDB answers 500 `badarg` here (it cannot write the boolean into the query string);
        // lt writes it as JSON.
        #expect(try resolve("GET", "bool/TRUE") == "_view/v?include_docs=true&doc=TRUE")
        #expect(try resolve("GET", "") == "_view/basicView")
        #expect(try resolve("GET", "db/_design/test", [("meta", "true")]) == "../../_design/test?meta=true")
        #expect(try resolve("GET", "nothing/here") == nil)
    }

    @Test("A rule climbing out of the database is refused unless secure_rewrites is off")
    func secureRewrites() throws {
        let climb: [JSON] = [["from": "uuids", "to": "../../../_uuids"]]
        #expect(throws: CouchError.self) { try RewriteRules(climb, secure: true) }
        #expect(try RewriteRules(climb, secure: false).resolve(method: "GET", path: ["uuids"], query: []) == "../../../_uuids")
        #expect(throws: CouchError.self) { try RewriteRules([["from": "x"]], secure: true) }  // no `to`
    }

    @Test("Normalisation: `.` dropped, `..` removes the segment before, never above the root", arguments: [1, 2, 3] as [UInt64])
    func normalization(seed: UInt64) {
        #expect(RewriteRules.normalized("/db/_design/x/../../_uuids") == "/db/_uuids")
        #expect(RewriteRules.normalized("/db/_design/x/./_view/v") == "/db/_design/x/_view/v")
        #expect(RewriteRules.normalized("/a/../../b") == "/../b")
        var random = SeededRandom(seed: seed)
        let parts = ["a", "b", ".", "..", "", "_design"]
        for _ in 0..<500 {
            let path = "/" + (0..<Int(random.next() % 8)).map { _ in parts[Int(random.next() % UInt64(parts.count))] }.joined(separator: "/")
            let once = RewriteRules.normalized(path)
            // Idempotent, absolute, and free of `.` and empty segments; `..` only as a prefix.
            #expect(RewriteRules.normalized(once) == once)
            let segments = once.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            #expect(once.hasPrefix("/") && !segments.contains(".") && (once == "/" || !segments.contains("")))
            #expect(!segments.drop { $0 == ".." }.contains(".."), "\(path) → \(once)")
        }
    }
}
