import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// Server-assigned ids as Apache CouchDB 3.4.3 makes them (`couch_uuids`): the same requests
/// (`GET /_uuids` with each `[uuids] algorithm`, `POST /db` and `_bulk_docs` without ids, bad
/// counts) sent to lt and to the real CouchDB. Ids are random, so what is compared is their
/// form — `UUIDForm` — and every error answer and header exactly. CouchDB's answers are
/// committed (Tests/Compatibility/Fixtures/couchdb-uuids.json) and replayed against lt in every
/// run; LT_TEST_COUCHDB_URL compares live, and LT_UUIDS_RECORD=1 rewrites the fixture.
@Suite("_uuids and server-assigned ids against CouchDB 3.4.3's", .serialized)
struct UUIDAnswersTests {
    static let fixture = "couchdb-uuids.json"
    static let database = "lt-uuids-differential"
    static let badCounts = ["0", "1001", "-1", "abc", "1.5", ""]

    @Test("CouchDB's recorded ids and answers: lt's have the same form")
    func replay() async throws {
        let couch = try Repository.couchDBFixture(Self.fixture)
        let s = try TestServer()
        defer { s.stop() }
        let lt = try await Self.exchange(s, base: nil)
        // The fixture is not empty, and CouchDB's ids have the form the checks describe.
        #expect(couch["sequential"]?.arrayValue?.count == 3_000)
        #expect(UUIDForm(couch).failures.isEmpty, "\(UUIDForm(couch).failures)")
        #expect(UUIDForm(lt).failures.isEmpty, "\(UUIDForm(lt).failures)")
        #expect(lt["answers"] == couch["answers"])
    }

    @Test("The same requests to the real CouchDB and to lt: the same form and answers",
          .enabled(if: LiveCouchDB.isSet, "skipped: LT_TEST_COUCHDB_URL is not set (docs/compatibility.md)"))
    func live() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let couch = try await Self.exchange(s, base: LiveCouchDB.endpoint.base)
        let lt = try await Self.exchange(s, base: nil)
        #expect(UUIDForm(couch).failures.isEmpty, "\(UUIDForm(couch).failures)")
        #expect(UUIDForm(lt).failures.isEmpty, "\(UUIDForm(lt).failures)")
        #expect(lt["answers"] == couch["answers"])
        if ProcessInfo.processInfo.environment["LT_UUIDS_RECORD"] == "1" {
            var document = couch.objectValue ?? [:]
            document["recorded_from"] = "Apache CouchDB 3.4.3"
            document["generator"] = "Tests/CouchServerTests/UUIDAnswersTests.swift"
            let url = Repository.root.appendingPathComponent("Tests/Compatibility/Fixtures").appendingPathComponent(Self.fixture)
            try Data(JSON.object(document).bytes).write(to: url)
        }
    }

    /// Sends the requests to `base` (the test server when nil) and gathers the ids and the
    /// answers to compare exactly.
    static func exchange(_ s: TestServer, base: String?) async throws -> JSON {
        let auth: TestServer.Auth = base == nil ? .admin : .basic(LiveCouchDB.endpoint.user, LiveCouchDB.endpoint.password)
        func send(_ method: HTTPMethod, _ path: String, _ json: JSON? = nil) async throws -> TestServer.Reply {
            try await s.request(method, path, json: json, auth: auth, headers: [("Accept", "application/json")], base: base)
        }
        func ids(_ count: Int) async throws -> [JSON] {
            try await send(.GET, "/_uuids?count=\(count)").json["uuids"]?.arrayValue ?? []
        }
        let algorithm = "/_node/_local/_config/uuids/algorithm"
        _ = try await send(.PUT, algorithm, "sequential")
        var sequential: [JSON] = []
        for _ in 0..<3 { sequential += try await ids(1_000) }
        _ = try await send(.DELETE, "/" + database)
        _ = try await send(.PUT, "/" + database)
        var assigned: [JSON] = []
        for n in 0..<5 { assigned.append(try await send(.POST, "/" + database, ["n": .int(n)]).json["id"] ?? .null) }
        let bulk = try await send(.POST, "/\(database)/_bulk_docs", ["docs": [[:], ["_id": "given"], [:], [:]]])
        assigned += bulk.json.arrayValue?.map { $0["id"] ?? .null } ?? []
        _ = try await send(.DELETE, "/" + database)
        var answers: JSONObject = [:]
        for count in badCounts {
            let reply = try await send(.GET, "/_uuids?count=\(count)")
            answers["count=\(count)"] = ["status": .int(reply.status), "body": reply.json,
                                         "cache-control": .string(reply.headers.first(name: "Cache-Control") ?? "")]
        }
        let good = try await send(.GET, "/_uuids")
        answers["default"] = ["status": .int(good.status), "count": .int(good.json["uuids"]?.arrayValue?.count ?? -1),
                              "cache-control": .string(good.headers.first(name: "Cache-Control") ?? ""),
                              "pragma": .string(good.headers.first(name: "Pragma") ?? ""),
                              "expires": .string(good.headers.first(name: "Expires") ?? ""),
                              "etag": .bool(good.headers.first(name: "ETag")?.hasPrefix("\"") == true)]
        _ = try await send(.PUT, algorithm, "utc_random")
        let utcRandom = try await ids(1_000)
        _ = try await send(.PUT, algorithm, "random")
        let random = try await ids(1_000)
        _ = try await send(.PUT, algorithm, "sequential")
        return ["sequential": .array(sequential), "assigned": .array(assigned), "utc_random": .array(utcRandom),
                "random": .array(random), "answers": .object(answers)]
    }
}

/// What CouchDB's `couch_uuids` promises of its ids, checked on one server's answers: each a
/// failure message, none when the ids have CouchDB's form.
struct UUIDForm {
    var failures: [String] = []

    init(_ answers: JSON) {
        func strings(_ key: String) -> [String] { answers[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        let hex = Set("0123456789abcdef")
        func isID(_ id: String) -> Bool { id.count == 32 && id.allSatisfy(hex.contains) }
        for key in ["sequential", "utc_random", "random"] {
            let ids = strings(key)
            if ids.count != answers[key]?.arrayValue?.count || ids.isEmpty { failures.append("\(key): no ids") }
            if !ids.allSatisfy(isID) { failures.append("\(key): not 32 lowercase hex digits") }
            if Set(ids).count != ids.count { failures.append("\(key): repeated ids") }
        }
        // sequential: a 26-digit prefix kept while a 6-digit counter rises by 1...4093 (rand:uniform(16#ffd)),
        // a new prefix only once the counter has passed 16#fff000; successive requests continue the run.
        let sequential = strings("sequential")
        var steps: [Int] = []
        for (a, b) in zip(sequential, sequential.dropFirst()) {
            let (counterA, counterB) = (Int(a.suffix(6), radix: 16) ?? -1, Int(b.suffix(6), radix: 16) ?? -1)
            if a.prefix(26) == b.prefix(26) {
                steps.append(counterB - counterA)
            } else if counterA < 0xfff000 || counterB > 0xffd {
                failures.append("sequential: new prefix between \(a) and \(b) before the counter's end")
            }
        }
        if !steps.allSatisfy({ (1...0xffd).contains($0) }) { failures.append("sequential: a step outside 1...4093") }
        let mean = Double(steps.reduce(0, +)) / Double(max(steps.count, 1))
        // Uniform on 1...4093: mean 2047, the mean of ~3,000 steps within ±22 one time in three.
        if abs(mean - 2047) > 250 { failures.append("sequential: mean step \(mean), not ~2047") }
        if Set(sequential.map { $0.prefix(26) }).count > 1 + sequential.count / 4_000 { failures.append("sequential: too many prefixes") }
        // Ids the server assigns to POST /db and _bulk_docs continue the same sequence; a given id stays.
        let assigned = answers["assigned"]?.arrayValue ?? []
        let made = assigned.enumerated().filter { $0.offset != 6 }.compactMap { $0.element.stringValue }
        if assigned.count != 9 || assigned[6] != "given" { failures.append("assigned: \(assigned)") }
        if made.count != 8 || !made.allSatisfy(isID) || !zip(made, made.dropFirst()).allSatisfy({ $0 < $1 || $0.prefix(26) != $1.prefix(26) }) {
            failures.append("assigned: not the sequential form in order: \(made)")
        }
        // utc_random: 14 digits of microseconds since 1970, rising, then 18 random digits.
        let utc = strings("utc_random")
        let stamps = utc.map { Int($0.prefix(14), radix: 16) ?? 0 }
        let (from2020, to2100) = (1_577_836_800_000_000, 4_102_444_800_000_000)
        if !stamps.allSatisfy({ (from2020...to2100).contains($0) }) { failures.append("utc_random: prefix not the time in µs") }
        if !zip(stamps, stamps.dropFirst()).allSatisfy({ $0 <= $1 }) { failures.append("utc_random: time goes back") }
        if Set(utc.map { $0.suffix(18) }).count != utc.count { failures.append("utc_random: repeated random part") }
        // random: 128 random bits — no shared prefix, each hex digit about equally often.
        let random = strings("random")
        if Set(random.map { $0.prefix(8) }).count < random.count - 1 { failures.append("random: shared prefixes") }
        var counts: [Character: Int] = [:]
        for id in random { for c in id { counts[c, default: 0] += 1 } }
        let expected = Double(random.count * 32) / 16
        if !counts.values.allSatisfy({ abs(Double($0) - expected) < expected * 0.2 }) || counts.count != 16 {
            failures.append("random: hex digits not uniform: \(counts)")
        }
    }
}
