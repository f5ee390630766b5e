import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Replays against a real `lt serve` the requests Apache CouchDB 3.4.3 refused, as recorded by
/// scripts/record-error-answers.py (Tests/Compatibility/Fixtures/couchdb-error-answers.json):
/// paths no route serves, known paths asked with a method they do not take, malformed ids,
/// parameters and bodies. lt must refuse each as CouchDB did (status, `error` and `reason`),
/// except where it answers differently on purpose, listed below with the reason.
@Suite("Refusals as Apache CouchDB answers them")
struct ErrorAnswerReplayTests {
    /// Requests CouchDB answers with a status of its own that lt does not copy: CouchDB crashes
    /// into a 500 on a client's mistake, or has no such resource. lt must still refuse them
    /// with a client error (4xx) of its own.
    static let ownStatus: [String: String] = [
        "GET /errors/_design/d/_view": "CouchDB: 405 for a view path without a view name; lt: 404, nothing is there",
        "GET /errors/_design/d/_info/x": "CouchDB: 500 badmatch",
        "GET /errors/_changes?limit=x": "CouchDB: 500 badarg; lt: 400 query_parse_error, as its views",
        "PUT /errors/_security []": "CouchDB: 500 no_majority",
        "PUT /errors/_revs_limit \"x\"": "CouchDB: 500 function_clause",
        "PUT /errors/_revs_limit 0": "CouchDB: 500 function_clause",
        "POST /_replicate {}": "CouchDB: 500 for a request without a source",
        "POST /_replicate {\"source\":\"nope\",\"target\":\"nope2\"}": "CouchDB: 500 db_not_found; lt: 404 db_not_found",
        "GET /_scheduler/nope": "CouchDB: 404 `not found` (with a space) and a null reason; lt: CouchDB's usual not_found",
    ]

    /// Requests lt refuses with CouchDB's status and `error` but a reason of its own: CouchDB's
    /// prints an Erlang term, or says less than lt's (lt's names what is wrong and where).
    static let ownReason: [String: String] = [
        "GET /errors/doc?open_revs=nonsense": "lt names the parameter",
        "PUT /errors/doc2 not json": "lt adds where the JSON breaks",
        "GET /errors/_all_docs?startkey=nonsense": "lt names the parameter",
        "GET /errors/_changes?filter=nope": "lt lists the filters it knows",
        "POST /errors/_find {\"selector\":\"x\"}": "CouchDB prints the selector as an Erlang binary",
        "POST /errors/_find {\"selector\":{},\"limit\":\"x\"}": "CouchDB prints the value as an Erlang binary; lt adds its range",
        "GET /errors/_design/d/_geo/nope": "CouchDB has no _geo (it reads the path as an attachment); lt names the missing geo index",
    ]

    @Test("every refusal recorded from CouchDB gets CouchDB's status, error and reason, or a documented one of lt's")
    func sameRefusals() async throws {
        let fixture = try Repository.couchDBFixture("couchdb-error-answers.json")
        let steps = try #require(fixture["steps"]?.arrayValue)
        #expect(steps.count >= 60)
        let server = try TestServer()
        defer { server.stop() }
        for setup in fixture["setup"]?.arrayValue ?? [] {
            let body = setup[2]?.stringValue.map { Array($0.utf8) }
            let reply = try await server.request(
                HTTPMethod(rawValue: setup[0]?.stringValue ?? ""), setup[1]?.stringValue ?? "", body: body,
                headers: body == nil ? [] : [("Content-Type", "application/json")])
            #expect(reply.status == 201, "\(setup): \(reply.text)")
        }
        var ownStatusSeen = Set<String>(), ownReasonSeen = Set<String>()
        for step in steps {
            let method = step["method"]?.stringValue ?? "GET", path = step["path"]?.stringValue ?? "/"
            let body = step["body"]?.stringValue
            let key = [method, path, body].compactMap { $0 }.joined(separator: " ")
            let reply = try await server.request(
                HTTPMethod(rawValue: method), path, body: body.map { Array($0.utf8) },
                headers: body == nil ? [] : [("Content-Type", "application/json")])
            let error = reply.json["error"], reason = reply.json["reason"]
            if Self.ownStatus[key] != nil {
                ownStatusSeen.insert(key)
                #expect((400..<500).contains(reply.status) && error?.stringValue != nil, "\(key): lt \(reply.status) \(reply.text)")
                continue
            }
            let couch = step["answer"]
            #expect(reply.status == step["status"]?.intValue, "\(key): lt \(reply.status) \(reply.text), CouchDB \(step["status"] ?? .null) \(couch ?? .null)")
            guard let couch, couch != .null else { continue }
            #expect(error == couch["error"], "\(key): lt \(reply.text), CouchDB \(couch)")
            if Self.ownReason[key] != nil {
                ownReasonSeen.insert(key)
                #expect(reason?.stringValue?.isEmpty == false, "\(key): lt \(reply.text)")
            } else {
                #expect(reason == couch["reason"], "\(key): lt \(reply.text), CouchDB \(couch)")
            }
        }
        // Every documented difference is still one of the recorded requests.
        #expect(ownStatusSeen == Set(Self.ownStatus.keys))
        #expect(ownReasonSeen == Set(Self.ownReason.keys))
    }
}
