import CouchEngine
import CouchJSON
import CouchProtocol
import CouchServer
import Foundation
import HTTPTypes
import JavaScript
import LTTestSupport
import Logging
import Testing

/// The one `CouchClient` contract, held by every implementation: the engine's direct calls
/// (`InProcessCouch`, what consolidation uses in every round), the same calls made as HTTP-shaped
/// requests through this process's routes, HTTP to a running `lt serve`, and HTTP to Apache
/// CouchDB when LT_TEST_COUCHDB_URL names one. Each is given the same seeded documents —
/// revision histories, conflicts, deletions, attachments, documents a validation function
/// refuses — and must answer the copying calls (`changes`, `documents`, `storeReplicated`) alike.
@Suite("CouchClient contract", .serialized, .timeLimit(.minutes(3)))
struct CouchClientContractTests {
    enum Peer: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case engine, routes, ltOverHTTP, couchDB
        var testDescription: String { rawValue }
    }

    /// Requests through the routes only: the protocol's HTTP-shaped calls over `InProcessCouch`.
    struct RoutesOnly: CouchClient {
        let inner: InProcessCouch
        func request(_ method: HTTPRequest.Method, _ path: String, query: [String: String], body: JSON?) async throws -> CouchReply {
            try await inner.request(method, path, query: query, body: body)
        }
        func verify(name: String, password: String) async throws -> (name: String, roles: [String])? { nil }
    }

    /// A client of `peer` for the length of `body`; nil when the peer is not at hand here.
    static func withClient<T>(_ peer: Peer, _ body: (any CouchClient) async throws -> T) async throws -> T? {
        switch peer {
        case .engine, .routes:
            let directory = try TemporaryDirectory()
            defer { directory.cleanup() }
            let queryServer = QueryServer(executable: LTBinary.url)
            let store = try DatabaseStore(
                directory: directory.url.appendingPathComponent("data"), validator: DesignDocumentValidator(queryServer: queryServer),
                connections: { _ in .single })
            let api = CouchAPI(
                store: store, settings: try ServerSettings.load(from: directory.url), options: CouchAPI.Options(), logger: Logger(label: "test"))
            try await api.prepareSystemDatabases()
            let inProcess = InProcessCouch(api: api)
            return try await body(peer == .engine ? inProcess : RoutesOnly(inner: inProcess))
        case .ltOverHTTP:
            guard let server = try await TestServer.withJavaScript() else { return nil }
            defer { server.stop() }
            return try await body(try HTTPCouch(url: server.adminURL))
        case .couchDB:
            guard let url = LiveCouchDB.url, LiveCouchDB.isSet else { return nil }
            return try await body(try HTTPCouch(url: url))
        }
    }

    /// The seeded documents: each a list of branches (revision trees of their own), each
    /// branch's leaf as `_bulk_docs` with `new_edits: false` takes it.
    struct Generated {
        var leaves: [JSON] = []
        /// Every leaf's id and revision, and whether a validation function refuses it.
        var written: [(revision: DocumentRevision, refused: Bool, deleted: Bool)] = []
        var attachments: [String: String] = [:]
    }

    static func generate(seed: UInt64) -> Generated {
        var random = SeededRandom(seed: seed)
        func hash() -> String { (0..<32).map { _ in String("0123456789abcdef".randomElement(using: &random)!) }.joined() }
        var generated = Generated()
        for i in 0..<Int.random(in: 12...40, using: &random) {
            let id = String(format: "doc-%03d", i)
            for _ in 0..<(Int.random(in: 0..<4, using: &random) == 0 ? 2 : 1) {
                let length = Int.random(in: 1...3, using: &random)
                let hashes = (0..<length).map { _ in hash() }
                let deleted = Int.random(in: 0..<6, using: &random) == 0
                let refused = !deleted && Int.random(in: 0..<8, using: &random) == 0
                var doc: JSONObject = [
                    "_id": .string(id), "_rev": .string("\(length)-\(hashes.last!)"),
                    "_revisions": ["start": .int(length), "ids": .array(hashes.reversed().map(JSON.string))],
                    "n": .int(Int.random(in: 0..<1000, using: &random)),
                ]
                if deleted { doc["_deleted"] = true }
                if refused { doc["refuse"] = true }
                if !deleted, Int.random(in: 0..<4, using: &random) == 0 {
                    let text = "attachment of \(id) \(hashes.last!)"
                    doc["_attachments"] = ["note.txt": ["content_type": "text/plain", "data": .string(Data(text.utf8).base64EncodedString())]]
                    generated.attachments["\(id) \(length)-\(hashes.last!)"] = text
                }
                generated.leaves.append(.object(doc))
                generated.written.append((DocumentRevision(id: id, rev: "\(length)-\(hashes.last!)"), refused, deleted))
            }
        }
        return generated
    }

    /// What a client answered, with what differs between servers by design (sequences) left out.
    struct Observed: Equatable, CustomStringConvertible {
        var refused: [WriteRefusal] = []
        var rows: [String: JSON] = [:]
        var documents: [JSON] = []
        var again: [WriteRefusal] = []
        var changedByAgain = 0
        var missingDatabase = false
        var wholeRequestRefusal = ""
        var description: String { "refused \(refused.count), rows \(rows.count), documents \(documents.count)" }

        /// As the fixture keeps it: rows by id in id order, every member in the order answered.
        var json: JSON {
            func refusals(_ list: [WriteRefusal]) -> JSON {
                .array(list.map { ["id": .string($0.id), "rev": $0.rev.map(JSON.string) ?? .null, "error": .string($0.error), "reason": .string($0.reason)] })
            }
            return [
                "refused": refusals(refused),
                "rows": .object(JSONObject(rows.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })),
                "documents": .array(documents), "again": refusals(again), "changedByAgain": .int(changedByAgain),
                "missingDatabase": .bool(missingDatabase), "wholeRequestRefusal": .string(wholeRequestRefusal),
            ]
        }
    }

    static func observe(_ couch: any CouchClient, seed: UInt64) async throws -> Observed {
        var random = SeededRandom(seed: seed ^ 0x5eed)
        let generated = generate(seed: seed)
        let db = "contract-\(seed)"
        _ = try await couch.request(.delete, "/\(db)")
        try await couch.request(.put, "/\(db)").requireOK()
        let validation: JSON = [
            "_id": "_design/rules",
            "validate_doc_update": "function (doc) { if (doc.refuse) { throw({forbidden: 'refused by the rules'}); } }",
        ]
        try await couch.request(.put, "/\(db)/_design/rules", body: validation).requireOK()
        var observed = Observed()
        observed.missingDatabase = try await couch.changes(of: "contract-absent-\(seed)", since: "0", limit: 10) == nil
        observed.refused = try await couch.storeReplicated(generated.leaves.shuffled(using: &random), in: db).sorted { ($0.id, $0.rev ?? "") < ($1.id, $1.rev ?? "") }

        // The whole feed in pages of a random size: every document once, after the design document.
        var since = "0"
        let limit = Int.random(in: 1...7, using: &random)
        var pages = 0
        while true {
            let page = try #require(try await couch.changes(of: db, since: since, limit: limit))
            pages += 1
            #expect(page.rows.count <= limit)
            for row in page.rows {
                let id = try #require(row["id"]?.stringValue)
                #expect(observed.rows[id] == nil, "\(id) came twice")
                guard var object = row.objectValue else { continue }
                object["seq"] = nil
                // The design document's revision is the server's own.
                if id.hasPrefix("_design/") { object["changes"] = nil; object["doc"] = nil }
                observed.rows[id] = .object(object)
            }
            if page.rows.count < limit { break }
            since = page.lastSeq
            #expect(pages < 200)
        }
        // The revisions asked for, in a random order, and one that is not there.
        var wanted = generated.written.filter { !$0.refused }.map(\.revision).shuffled(using: &random)
        wanted.insert(DocumentRevision(id: "doc-000", rev: "1-00000000000000000000000000000000"), at: wanted.count / 2)
        observed.documents = try await couch.documents(wanted, from: db)

        // Storing them all again stores nothing new.
        let before = try #require(try await couch.changes(of: db, since: "0", limit: 10_000)).lastSeq
        observed.again = try await couch.storeReplicated(generated.leaves, in: db).sorted { ($0.id, $0.rev ?? "") < ($1.id, $1.rev ?? "") }
        observed.changedByAgain = try #require(try await couch.changes(of: db, since: before, limit: 10_000)).rows.count
        do {
            _ = try await couch.storeReplicated([["_id": "_illegal", "_rev": "1-00000000000000000000000000000001"]], in: db)
        } catch let error as CouchError {
            observed.wholeRequestRefusal = "\(error.status) \(error.error)"
        }
        _ = try await couch.request(.delete, "/\(db)")
        return observed
    }

    @Test("Every client answers the copying calls as CouchDB defines them: pages without repeats, every leaf, the winner, histories, attachments, refusals, nothing new the second time",
          arguments: Peer.allCases)
    func contract(peer: Peer) async throws {
        for seed in [UInt64(1), 29, 4_242] {
            let generated = Self.generate(seed: seed)
            guard let observed = try await Self.withClient(peer, { try await Self.observe($0, seed: seed) }) else {
                print("skipped: \(peer) is not at hand (LT_TEST_COUCHDB_URL for CouchDB)")
                return
            }
            #expect(observed.missingDatabase)
            // Refused: exactly the documents the rules refuse, each with the rules' reason.
            let refusedRevisions = generated.written.filter(\.refused).map { "\($0.revision.id) \($0.revision.rev)" }.sorted()
            #expect(observed.refused.map { "\($0.id) \($0.rev ?? "")" } == refusedRevisions)
            #expect(observed.refused.allSatisfy { $0.error == "forbidden" && $0.reason == "refused by the rules" })
            // One row per stored document, listing every leaf stored, with the winning revision's body.
            let stored = Dictionary(grouping: generated.written.filter { !$0.refused }, by: \.revision.id)
            #expect(Set(observed.rows.keys) == Set(stored.keys).union(["_design/rules"]))
            for (id, leaves) in stored {
                let row = try #require(observed.rows[id])
                let revs = Set((row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue })
                #expect(revs == Set(leaves.map(\.revision.rev)), "\(id)")
                // CouchDB's winner: a live leaf before a deleted one, then the longest, then the greatest hash.
                let winner = leaves.max { a, b in
                    let (ra, rb) = (Revision(a.revision.rev)!, Revision(b.revision.rev)!)
                    return a.deleted != b.deleted ? a.deleted : ra < rb
                }!
                #expect(row["doc"]?["_rev"]?.stringValue == winner.revision.rev, "\(id)")
                #expect((row["deleted"] == .bool(true)) == winner.deleted, "\(id)")
            }
            // The revisions asked for, found, each with its history and its attachment inline.
            #expect(observed.documents.count == generated.written.count { !$0.refused })
            for doc in observed.documents {
                let id = try #require(doc["_id"]?.stringValue), rev = try #require(doc["_rev"]?.stringValue)
                #expect(doc["_revisions"]?["start"]?.intValue == Revision(rev)?.pos)
                if let text = generated.attachments["\(id) \(rev)"] {
                    let data = try #require(doc["_attachments"]?["note.txt"]?["data"]?.stringValue)
                    #expect(Data(base64Encoded: data) == Data(text.utf8), "\(id)")
                }
            }
            #expect(observed.again == observed.refused)
            #expect(observed.changedByAgain == 0)
            #expect(observed.wholeRequestRefusal == "400 illegal_docid")
        }
    }

    @Test("Every client answers the import's calls as CouchDB does: store gives one row per document in order (ok, conflict, the rules' refusal), existing names stored and deleted documents and nothing else",
          arguments: Peer.allCases)
    func storeAndExisting(peer: Peer) async throws {
        let answer = try await Self.withClient(peer) { couch -> [String] in
            let db = "contract_store_\(Int.random(in: 0..<1_000_000))"
            _ = try await couch.request(.put, "/\(db)", body: nil)
            defer { Task { _ = try? await couch.request(.delete, "/\(db)", body: nil) } }
            let rules: JSON = [
                "_id": "_design/rules",
                "validate_doc_update": "function(doc) { if (doc.refuse) { throw({forbidden: 'refused by the rules'}); } }",
            ]
            _ = try await couch.store([rules], in: db)
            var out: [String] = []
            let first = try await couch.store([["_id": "a", "n": 1], ["_id": "b", "refuse": true], ["_id": "c"], ["_id": "d"]], in: db)
            out += first.map { "\($0["id"]?.stringValue ?? "") \($0["ok"] == true ? "ok" : $0["error"]?.stringValue ?? "?")" }
            let rev = try #require(first.first(where: { $0["id"] == "d" })?["rev"]?.stringValue)
            _ = try await couch.request(.delete, "/\(db)/d", query: ["rev": rev], body: nil)
            let again = try await couch.store([["_id": "a", "n": 2], ["_id": "e"]], in: db)
            out += again.map { "\($0["id"]?.stringValue ?? "") \($0["ok"] == true ? "ok" : $0["error"]?.stringValue ?? "?")" }
            out.append("existing " + (try await couch.existing(["a", "b", "c", "d", "e", "zz"], in: db)).sorted().joined(separator: ","))
            out.append("none " + (try await couch.existing([], in: db)).sorted().joined(separator: ","))
            return out
        }
        guard let answer else {
            print("skipped: \(peer) is not at hand (LT_TEST_COUCHDB_URL for CouchDB)")
            return
        }
        #expect(answer == ["a ok", "b forbidden", "c ok", "d ok", "a conflict", "e ok", "existing a,c,d,e", "none "])
    }

    /// CouchDB's answers to seed 7,777, recorded with LT_TEST_COUCHDB_URL and
    /// LT_CONTRACT_RECORD=1, so that every run compares with them without CouchDB.
    static let fixture = "couchdb-client-contract.json"

    @Test("The engine's direct calls, the routes and lt's HTTP API answer exactly what Apache CouchDB 3.4.3 answers (recorded; live where LT_TEST_COUCHDB_URL is set): members, their order, revpos")
    func sameAnswers() async throws {
        let seed = UInt64(7_777)
        if ProcessInfo.processInfo.environment["LT_CONTRACT_RECORD"] == "1" {
            let recorded = try #require(try await Self.withClient(.couchDB) { try await Self.observe($0, seed: seed) }, "recording needs LT_TEST_COUCHDB_URL")
            let url = Repository.root.appendingPathComponent("Tests/Compatibility/Fixtures").appendingPathComponent(Self.fixture)
            try Data(recorded.json.bytes).write(to: url)
        }
        let expected = try Repository.couchDBFixture(Self.fixture)
        for peer in Peer.allCases {
            guard let observed = try await Self.withClient(peer, { try await Self.observe($0, seed: seed) }) else { continue }
            let answered = observed.json
            for key in ["refused", "rows", "documents", "again", "changedByAgain", "missingDatabase", "wholeRequestRefusal"] {
                #expect(answered[key] == expected[key], "\(peer): \(key)")
            }
        }
    }
}
