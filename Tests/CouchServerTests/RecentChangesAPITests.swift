import CouchEngine
import CouchJSON
import CouchServer
import Foundation
import HTTPTypes
import LTTestSupport
import Logging
import Testing

/// The API's `_changes` on a real store and real SQLite files, in process: the one place a test
/// can see which path answered.
@Suite("_changes answered from memory")
struct RecentChangesAPITests {
    @Test("An admin's plain _changes of a per-user database comes from memory and equals the database's answer; other readers and options go to the database")
    func sameAnswers() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url.appendingPathComponent("data"), maxOpen: 1, connections: { _ in .single })
        let api = CouchAPI(store: store, settings: try ServerSettings.load(from: directory.url), options: CouchAPI.Options(), logger: Logger(label: "test"))
        let db = "/lt_locations_user_memory"
        #expect(await api.perform(.put, db).status == 201)
        for i in 0..<4 { #expect(await api.perform(.put, "\(db)/d\(i)", body: ["i": .int(i)]).status == 201) }
        let d1 = try JSON.parse(await api.perform(.get, "\(db)/d1").body)
        #expect(await api.perform(.delete, "\(db)/d1", query: ["rev": d1["_rev"]!.stringValue!]).status == 200)
        #expect(await api.perform(.put, "\(db)/d2", query: ["new_edits": "false"], body: ["_rev": "1-0123456789abcdef0123456789abcdef", "conflict": true]).status == 201)
        #expect(await api.perform(.put, "/other").status == 201)  // closes the user's database (one open at most)
        let seq2 = try JSON.parse(await api.perform(.get, "\(db)/_changes", query: ["limit": "2"]).body)["last_seq"]!.stringValue!
        let queries: [[String: String]] = [
            [:], ["since": "0"], ["since": "2"], ["since": seq2], ["since": "\"\(seq2)\""], ["limit": "0"], ["limit": "2", "include_docs": "true"],
            ["style": "all_docs"], ["style": "all_docs", "include_docs": "true", "since": "1"], ["since": "99"], ["feed": "normal", "since": "3"],
        ]
        for query in queries {
            let since = try DocumentDatabase.parseSequence((try? JSON.parse(query["since"] ?? "0")) ?? .string(query["since"]!))
            #expect(store.recentChanges.page(String(db.dropFirst()), since: since, limit: nil, includeDocs: false, allLeaves: false) != nil)
            let fromMemory = await api.perform(.get, "\(db)/_changes", query: query)
            // An option outside the plain read (one that changes nothing here) makes the database answer.
            let fromDatabase = await api.perform(.get, "\(db)/_changes", query: query.merging(["conflicts": "false"]) { $1 })
            #expect(fromMemory.status == 200 && fromDatabase.status == 200)
            #expect(try JSON.parse(fromMemory.body) == JSON.parse(fromDatabase.body), "\(query)")
        }
        let all = try JSON.parse(await api.perform(.get, "\(db)/_changes", query: ["style": "all_docs"]).body)
        #expect(all["results"]?.arrayValue?.first { $0["id"] == "d2" }?["changes"]?.arrayValue?.count == 2)
        #expect(all["results"]?.arrayValue?.first { $0["id"] == "d1" }?["deleted"] == true)
        // Errors are the database's.
        #expect(await api.perform(.get, "\(db)/_changes", query: ["since": "bad"]).status == 400)
        #expect(await api.perform(.get, "\(db)/_changes", query: ["limit": "-1"]).status == 400)
        // Not an admin: the database answers, with its _security.
        let stranger = UserContext(name: "stranger", roles: [])
        #expect(await api.perform(.get, "\(db)/_changes", user: stranger).status == 403)
        // A deleted database is forgotten: 404, not its old changes.
        #expect(await api.perform(.delete, db).status == 200)
        #expect(await api.perform(.get, "\(db)/_changes").status == 404)
    }
}
