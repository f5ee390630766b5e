import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Replays against a real `lt serve` the Mango `$regex` queries Apache CouchDB 3.4.3 answered,
/// as recorded by scripts/record-regex-answers.py (Tests/Compatibility/Fixtures/
/// couchdb-regex-answers.json): about 500 patterns — PCRE's edge cases and generated ones — over
/// 65 strings of ASCII, UTF-8, newlines and control bytes. lt must find the same documents, and
/// refuse what CouchDB refuses (`bad_arg`). The one difference on purpose: patterns that need a
/// backtracking engine (back-references, lookaround, atomic groups, possessive quantifiers,
/// recursion, conditions, Unicode properties) are refused by lt, which matches in linear time
/// (issue 40: one such pattern held a core for minutes).
@Suite("$regex as Apache CouchDB answers it")
struct RegexAnswerReplayTests {
    /// Patterns lt refuses where CouchDB answers, each for needing backtracking.
    static let refusedOnPurpose: Set<String> = [
        "(a)\\1", "(a)\\g1", "(?<n>a)\\k<n>", "(?=a)", "(?!a)b", "(?<=a)b", "(?<!a)b", "a++", "a*+b", "(?>a+)b",
        "(a)(?1)", "\\p{L}", "\\P{L}", "\\X", "(*UTF8)é",
    ]

    @Test("every $regex answer recorded from CouchDB: the same documents, the same refusals, or a documented refusal of lt's")
    func sameAnswers() async throws {
        let fixture = try Repository.couchDBFixture("couchdb-regex-answers.json")
        let subjects = try #require(fixture["subjects"]?.arrayValue)
        let cases = try #require(fixture["cases"]?.arrayValue)
        #expect(cases.count >= 400 && subjects.count >= 60)
        let server = try TestServer()
        defer { server.stop() }
        #expect(try await server.request(.PUT, "/regex").status == 201)
        let docs: [JSON] = subjects.enumerated().map { i, subject in ["_id": .string(String(format: "s%02d", i)), "v": subject] }
        #expect(try await server.request(.POST, "/regex/_bulk_docs", json: ["docs": .array(docs)]).status == 201)
        var refusedSeen = Set<String>(), differ: [String] = []
        for entry in cases {
            let pattern = try #require(entry["pattern"]?.stringValue)
            let reply = try await server.request(.POST, "/regex/_find", json: [
                "selector": ["v": ["$regex": .string(pattern)]], "fields": ["_id"], "limit": 1000,
            ])
            if let status = entry["status"]?.intValue {
                if reply.status != status || reply.json["error"] != entry["error"] { differ.append("\(pattern): CouchDB \(status) \(entry["error"]?.text ?? ""), lt \(reply.status) \(reply.text)") }
                continue
            }
            if Self.refusedOnPurpose.contains(pattern) {
                refusedSeen.insert(pattern)
                let reason = reply.json["reason"]?.stringValue ?? ""
                if reply.status != 400 || reply.json["error"] != "bad_arg" || !reason.contains("linear time") { differ.append("\(pattern): lt \(reply.status) \(reply.text)") }
                continue
            }
            let expected = (entry["matches"]?.arrayValue ?? []).compactMap(\.intValue).map { String(format: "s%02d", $0) }
            let found = (reply.json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }.sorted()
            if reply.status != 200 || found != expected { differ.append("\(pattern): CouchDB \(expected), lt \(reply.status) \(found) \(reply.status == 200 ? "" : reply.text)") }
        }
        #expect(differ.isEmpty, "\(differ.count) answers differ:\n\(differ.joined(separator: "\n"))")
        #expect(refusedSeen == Self.refusedOnPurpose, "every pattern refused on purpose is in the fixture")
    }
}
