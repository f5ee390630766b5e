import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `POST /{db}/_compact` on a real `lt serve`: old revisions' bodies go, the file shrinks, the
/// task shows in `_active_tasks` and `compact_running`, and writes made meanwhile stay.
@Suite("Compaction")
struct CompactionTests {
    @Test("Compaction drops non-leaf bodies (revision ids stay), shrinks sizes.file to the live data (sizes.active), and keeps every write made during it")
    func compactionShrinksAndKeepsWrites() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/c").status == 201)
        let padding = String(repeating: "x", count: 1_000)
        var revs: [String: String] = [:]
        var first: [String: String] = [:]
        for round in 0..<3 {
            let docs: [JSON] = (0..<4_000).map { i in
                var doc: JSONObject = ["_id": .string("doc-\(i)"), "round": .int(round), "padding": .string(padding)]
                if let rev = revs["doc-\(i)"] { doc["_rev"] = .string(rev) }
                return .object(doc)
            }
            let answer = try await s.request(.POST, "/c/_bulk_docs", json: ["docs": .array(docs)])
            #expect(answer.status == 201)
            for row in answer.json.arrayValue ?? [] {
                guard let id = row["id"]?.stringValue, let rev = row["rev"]?.stringValue else { continue }
                revs[id] = rev
                if round == 0 { first[id] = rev }
            }
        }
        let before = try await s.request(.GET, "/c").json["sizes"]
        #expect(try await s.request(.GET, "/c/doc-7?rev=\(first["doc-7"]!)").status == 200)  // kept until compaction
        #expect(try await s.request(.POST, "/c/_compact", json: [:]).status == 202)
        // Listed at once (12 MB of bodies take far longer than a request to compact).
        let task = try await s.request(.GET, "/_active_tasks").json.arrayValue?.first { $0["type"] == "database_compaction" }
        #expect(task?["database"] == "c" && task?["node"] != nil && task?["started_on"]?.intValue != nil, "\(String(describing: task))")
        #expect(try await s.request(.GET, "/c").json["compact_running"] == true)
        // Writes while it runs, and a second request that starts nothing new.
        #expect(try await s.request(.POST, "/c/_compact", json: [:]).status == 202)
        var during: [String] = []
        for i in 0..<50 {
            let answer = try await s.request(.PUT, "/c/during-\(i)", json: ["n": .int(i)])
            #expect(answer.status == 201)
            during.append("during-\(i)")
        }
        let finished = try await eventually(60) {
            let tasks = try await s.request(.GET, "/_active_tasks").json.arrayValue ?? []
            return try await s.request(.GET, "/c").json["compact_running"] == false && !tasks.contains { $0["database"] == "c" }
        }
        #expect(finished)
        let after = try await s.request(.GET, "/c").json["sizes"]
        let (fileBefore, fileAfter) = (before?["file"]?.intValue ?? 0, after?["file"]?.intValue ?? 0)
        let (activeBefore, activeAfter) = (before?["active"]?.intValue ?? 0, after?["active"]?.intValue ?? 0)
        // Three bodies of ~1 KB per document before, one after: the file shrinks; the live data
        // (winning revisions) was never more than it is, and grew by what was written meanwhile.
        #expect(fileAfter < fileBefore / 2 && activeBefore < fileBefore / 2, "file \(fileBefore) → \(fileAfter), active \(activeBefore) → \(activeAfter)")
        #expect(activeAfter >= activeBefore && activeAfter < fileAfter, "file \(fileBefore) → \(fileAfter), active \(activeBefore) → \(activeAfter)")
        #expect(try await s.request(.GET, "/c/doc-7?rev=\(first["doc-7"]!)").status == 404)
        let current = try await s.request(.GET, "/c/doc-7?revs=true").json
        #expect(current["round"] == 2 && current["_revisions"]?["ids"]?.arrayValue?.count == 3, "\(current)")
        let all = try await s.request(.GET, "/c/_all_docs").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(all.count == 4_050 && Set(during).isSubset(of: Set(all)))
    }
}
