import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import MIMEMultipart
import NIOHTTP1
import Testing

/// Replays, against a real `lt serve`, the HTTP exchanges Apache CouchDB 3.4.3's own replicator
/// had with a real CouchDB (recorded by scripts/record-replicator-fixtures.py into
/// Tests/Compatibility/Fixtures/couchdb-replicator.json), and checks that lt answers as CouchDB
/// did: the same statuses, the same documents, revision histories, attachment stubs and bodies
/// (byte for byte, gzip included), the same `_revs_diff` and checkpoint answers; and that what
/// CouchDB's replicator pushes leaves lt holding exactly what CouchDB held.
@Suite("CouchDB 3.4.3's replicator, replayed against lt", .serialized)
struct ReplicatorReplayTests {
    struct Exchange {
        let method: String
        let path: String
        let requestHeaders: [(String, String)]
        let requestBody: [UInt8]
        let status: Int
        let contentType: String
        let responseBody: [UInt8]
    }

    struct Run {
        let name: String
        let side: String
        let seed: Int
        let exchanges: [Exchange]
    }

    struct Fixture {
        let sourceDB: String
        let pushTargetDB: String
        let seeds: [[JSON]]
        let runs: [Run]
        let pushTargetFinal: [JSON]
    }

    static func bytes(_ value: JSON?) -> [UInt8] {
        if let text = value?.stringValue { return Array(text.utf8) }
        if let base64 = value?["base64"]?.stringValue, let data = Data(base64Encoded: base64) { return Array(data) }
        return []
    }

    static func load() throws -> Fixture {
        let json = try Repository.couchDBFixture("couchdb-replicator.json")
        let runs = (json["runs"]?.arrayValue ?? []).map { run in
            Run(name: run["name"]?.stringValue ?? "", side: run["side"]?.stringValue ?? "", seed: run["seed"]?.intValue ?? 0,
                exchanges: (run["exchanges"]?.arrayValue ?? []).map { e in
                    let headers = (e["request_headers"]?.objectValue?.members ?? []).compactMap { member -> (String, String)? in
                        guard ["content-type", "accept"].contains(member.key), let value = member.value.stringValue else { return nil }
                        return (member.key, value)
                    }
                    return Exchange(
                        method: e["method"]?.stringValue ?? "GET", path: e["path"]?.stringValue ?? "/",
                        requestHeaders: headers, requestBody: bytes(e["request_body"]), status: e["status"]?.intValue ?? 0,
                        contentType: e["response_headers"]?["content-type"]?.stringValue ?? "",
                        responseBody: bytes(e["response_body"]))
                })
        }
        return Fixture(
            sourceDB: json["source_db"]?.stringValue ?? "", pushTargetDB: json["push_target_db"]?.stringValue ?? "",
            seeds: (json["seeds"]?.arrayValue ?? []).map { $0.arrayValue ?? [] }, runs: runs,
            pushTargetFinal: json["push_target_final"]?.arrayValue ?? [])
    }

    /// Objects with their members in key order, so documents compare whatever order each
    /// server wrote their members in.
    static func canonical(_ json: JSON) -> JSON {
        switch json {
        case let .object(object):
            return .object(JSONObject(object.members.map { ($0.key, canonical($0.value)) }.sorted { $0.0 < $1.0 }))
        case let .array(items):
            return .array(items.map(canonical))
        default:
            return json
        }
    }

    /// Writes a source state into lt as a replicator would: every leaf with its history and
    /// attachment bodies, in CouchDB's changes order.
    static func seed(_ server: TestServer, _ db: String, _ docs: [JSON]) async throws {
        let reply = try await server.request(.POST, "/\(db)/_bulk_docs", json: ["docs": .array(docs), "new_edits": false])
        #expect(reply.status == 201, "\(reply.text)")
        #expect(reply.json.arrayValue?.isEmpty == true, "seeding refused documents: \(reply.text)")
    }

    func send(_ server: TestServer, _ exchange: Exchange, path: String) async throws -> TestServer.Reply {
        try await server.request(
            HTTPMethod(rawValue: exchange.method), path, body: exchange.requestBody.isEmpty && exchange.method == "GET" ? nil : exchange.requestBody,
            headers: exchange.requestHeaders)
    }

    /// One document of a `multipart/mixed` answer: its JSON, and its attachment parts (headers
    /// that matter, bytes).
    struct DocumentPart: Equatable, CustomStringConvertible {
        var json: JSON
        var attachments: [String]
        var description: String { "\(json.text) + \(attachments)" }
    }

    static func documentParts(_ body: [UInt8], contentType: String) throws -> [DocumentPart] {
        guard let boundary = Multipart.boundary(of: contentType) else { throw TestFailure("no boundary in \(contentType)") }
        return try Multipart.parse(body, boundary: boundary).map { part in
            let type = part.headers["content-type"] ?? ""
            guard type.hasPrefix("multipart/related"), let inner = Multipart.boundary(of: type) else {
                return DocumentPart(json: canonical(try JSON.parse(part.body)), attachments: [])
            }
            let parts = try Multipart.parse(part.body, boundary: inner)
            let attachments = parts.dropFirst().map { att in
                let digest = Data(att.body).base64EncodedString()
                return "\(att.headers["content-disposition"] ?? "") \(att.headers["content-type"] ?? "") encoding=\(att.headers["content-encoding"] ?? "identity") \(digest)"
            }
            return DocumentPart(json: canonical(try JSON.parse(parts[0].body)), attachments: attachments)
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// `_changes` rows as (id, leaves, deleted), whatever their sequences.
    static func changeSet(_ json: JSON) -> [String] {
        (json["results"]?.arrayValue ?? []).map { row in
            let revs = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.sorted()
            return "\(row["id"]?.stringValue ?? "") \(revs) \(row["deleted"] == .bool(true))"
        }.sorted()
    }

    /// Compares lt's answer with CouchDB's, by what a replicator reads from it.
    func compare(_ exchange: Exchange, _ reply: TestServer.Reply, run: String) throws {
        let what = "\(run) \(exchange.method) \(exchange.path)"
        #expect(reply.status == exchange.status, "\(what): \(reply.text.prefix(300))")
        guard reply.status == exchange.status, exchange.status < 300 else { return }
        let path = exchange.path.split(separator: "?").first.map(String.init) ?? exchange.path
        if exchange.contentType.hasPrefix("multipart/") {
            let type = reply.headers.first(name: "Content-Type") ?? ""
            #expect(type.hasPrefix("multipart/mixed"), "\(what): \(type)")
            let expected = try Self.documentParts(exchange.responseBody, contentType: exchange.contentType)
            let actual = try Self.documentParts(reply.body, contentType: type)
            #expect(actual == expected, "\(what)")
            return
        }
        let expected = (try? JSON.parse(exchange.responseBody)) ?? .null
        let actual = reply.json
        if path.hasSuffix("/_changes") {
            #expect(Self.changeSet(actual) == Self.changeSet(expected), "\(what)")
            #expect(actual["pending"] == expected["pending"], "\(what)")
        } else if path.hasSuffix("/_bulk_get") {
            let expectedDocs = (expected["results"]?.arrayValue ?? []).map(Self.canonical)
            let actualDocs = (actual["results"]?.arrayValue ?? []).map(Self.canonical)
            #expect(actualDocs.count == expectedDocs.count, "\(what)")
            for (a, e) in zip(actualDocs, expectedDocs) where a != e {
                Issue.record("\(what): lt answered \(a.text), CouchDB \(e.text)")
            }
        } else if path.split(separator: "/").count == 1, exchange.method == "GET" {
            // Database information: what the replicator reads of it.
            #expect(actual["db_name"] == expected["db_name"] && actual["instance_start_time"] != nil && actual["update_seq"] != nil,
                    "\(what): \(actual.text)")
        } else if path.contains("/_local/"), exchange.method == "GET" {
            // A checkpoint: the same document, minus the history entries' session timing.
            #expect(Self.canonical(actual) == Self.canonical(expected), "\(what)")
        } else {
            // _revs_diff, _bulk_docs, document and checkpoint writes, _ensure_full_commit.
            var a = Self.canonical(actual), e = Self.canonical(expected)
            if path.hasSuffix("/_ensure_full_commit") {
                a = a["ok"] ?? .null
                e = e["ok"] ?? .null
            }
            #expect(a == e, "\(what)")
        }
    }

    /// Rewrites CouchDB's opaque sequences in a request path into the lt sequences that stand
    /// for the same point of the same history.
    static func translate(_ path: String, _ sequences: [String: String]) -> String {
        guard let range = path.range(of: "since=") else { return path }
        let rest = path[range.upperBound...]
        let value = rest.prefix { $0 != "&" }
        guard let mapped = sequences[String(value)] else { return path }
        return path.replacingCharacters(in: range.upperBound..<rest.index(rest.startIndex, offsetBy: value.count), with: mapped)
    }

    @Test("As the source CouchDB pulls from, one-shot and incremental: the answers CouchDB gave, attachments byte for byte")
    func pullFromLT() async throws {
        let fixture = try Self.load()
        let server = try TestServer()
        defer { server.stop() }
        #expect(try await server.request(.PUT, "/\(fixture.sourceDB)").status == 201)
        var sequences = ["0": "0"]
        var seeded = -1
        for run in fixture.runs where run.side == "source" {
            if run.seed != seeded {
                try await Self.seed(server, fixture.sourceDB, fixture.seeds[run.seed])
                seeded = run.seed
            }
            for exchange in run.exchanges where !exchange.path.hasPrefix("/_session") {
                let reply = try await send(server, exchange, path: Self.translate(exchange.path, sequences))
                try compare(exchange, reply, run: run.name)
                if exchange.path.contains("/_changes"), let couch = (try? JSON.parse(exchange.responseBody))?["last_seq"]?.stringValue,
                   let ours = reply.json["last_seq"].map({ $0.stringValue ?? $0.text }) {
                    sequences[couch] = ours
                }
            }
        }
    }

    @Test("As the target CouchDB pushes to, one-shot and incremental: accepted as CouchDB accepted it, and the same data at the end")
    func pushToLT() async throws {
        let fixture = try Self.load()
        let server = try TestServer()
        defer { server.stop() }
        for run in fixture.runs where run.side == "target" {
            for exchange in run.exchanges where !exchange.path.hasPrefix("/_session") {
                let reply = try await send(server, exchange, path: exchange.path)
                try compare(exchange, reply, run: run.name)
            }
        }
        // Every leaf of every document, with its history and attachment bodies, as CouchDB holds them.
        var byID: [String: [JSON]] = [:]
        for doc in fixture.pushTargetFinal { byID[doc["_id"]?.stringValue ?? "", default: []].append(Self.canonical(doc)) }
        #expect(byID.count > 40)
        for (id, expected) in byID {
            let path = "/\(fixture.pushTargetDB)/\(id)?open_revs=all&revs=true&attachments=true"
            let reply = try await server.request(.GET, path, headers: [("Accept", "application/json")])
            let leaves = (reply.json.arrayValue ?? []).compactMap { $0["ok"] }.map(Self.canonical)
            #expect(Set(leaves.map(\.text)) == Set(expected.map(\.text)), "\(id)")
        }
        // Plain reads of a gzip-stored attachment give the text, not the gzip bytes.
        let notes = try await server.request(.GET, "/\(fixture.pushTargetDB)/doc-004/notes.txt", headers: [("Accept-Encoding", "identity")])
        #expect(notes.status == 200 && notes.text.hasPrefix("Freeway Drive, Cupertino") && notes.headers.first(name: "Content-Encoding") == nil)
        // A client that accepts gzip gets the stored bytes (the HTTP client decodes them).
        let gzipped = try await server.request(.GET, "/\(fixture.pushTargetDB)/doc-004/notes.txt", headers: [("Accept-Encoding", "gzip")])
        #expect(gzipped.headers.first(name: "Content-Encoding") == "gzip" && gzipped.text == notes.text)
    }
}
