import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// What CouchDB's own Mango suite (3.4.3, `src/mango/test`) found lt answering differently
/// from CouchDB 3.4.3, each checked here against the answer CouchDB gave (noted beside it).
@Suite("Mango and design documents as CouchDB 3.4.3 answers them")
struct MangoSuiteAnswersTests {
    static func ids(_ reply: TestServer.Reply) -> [String] {
        (reply.json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
    }

    @Test("Partitioned databases: ids, partition info, _all_docs, _find and _explain in a partition")
    func partitions() async throws {
        let s = try TestServer()
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/pdb?partitioned=true").status == 201)
        #expect(try await s.request(.GET, "/pdb").json["props"] == ["partitioned": true])
        // CouchDB: 400 illegal_docid "Doc id must be of form partition:id".
        let plain = try await s.request(.PUT, "/pdb/nopartition", json: [:])
        #expect(plain.status == 400 && plain.json["reason"] == "Doc id must be of form partition:id")
        // CouchDB refuses the whole _bulk_docs for one id without a partition (its own suite's
        // partition_crud_test): 400 illegal_docid, nothing written.
        let refused = try await s.request(.POST, "/pdb/_bulk_docs", json: ["docs": [["_id": "p:0", "a": 0], ["_id": "nope", "a": 4]]])
        #expect(refused.status == 400 && refused.json["error"] == "illegal_docid", "\(refused.text)")
        #expect(try await s.request(.GET, "/pdb/p:0").status == 404)
        let bulk = try await s.request(.POST, "/pdb/_bulk_docs", json: ["docs": [
            ["_id": "p:1", "a": 1], ["_id": "p:2", "a": 2], ["_id": "q:1", "a": 3],
        ]])
        _ = try await s.request(.DELETE, "/pdb/p:2?rev=\(bulk.json[1]?["rev"]?.stringValue ?? "")")
        // CouchDB: {"db_name","sizes":{active,external},"partition","doc_count","doc_del_count"}.
        let info = try await s.request(.GET, "/pdb/_partition/p")
        #expect(info.json["doc_count"] == 1 && info.json["doc_del_count"] == 1 && info.json["partition"] == "p", "\(info.text)")
        let all = try await s.request(.GET, "/pdb/_partition/p/_all_docs")
        #expect(all.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["p:1"], "\(all.text)")
        // CouchDB: 400 illegal_partition; a database that is not partitioned: 400 bad_request.
        #expect(try await s.request(.GET, "/pdb/_partition/_p/_all_docs").json["error"] == "illegal_partition")
        _ = try await s.request(.PUT, "/plain")
        let notPartitioned = try await s.request(.GET, "/plain/_partition/p")
        #expect(notPartitioned.status == 400 && notPartitioned.json["reason"] == "database is not partitioned")

        // Indexes of a partitioned database are partitioned unless asked otherwise.
        _ = try await s.request(.POST, "/pdb/_index", json: ["index": ["fields": ["a"]], "name": "a", "ddoc": "a"])
        _ = try await s.request(.POST, "/pdb/_index", json: ["index": ["fields": ["a"]], "name": "ga", "ddoc": "ga", "partitioned": false])
        let listed = try await s.request(.GET, "/pdb/_index").json["indexes"]?.arrayValue ?? []
        #expect(listed.map { $0["partitioned"] ?? .null } == [.null, true, false])
        let selector: JSON = ["selector": ["a": ["$gt": 0]]]
        let inPartition = try await s.request(.POST, "/pdb/_partition/q/_find", json: selector)
        #expect(Self.ids(inPartition) == ["q:1"], "\(inPartition.text)")
        let explained = try await s.request(.POST, "/pdb/_partition/q/_explain", json: selector)
        #expect(explained.json["index"]?["name"] == "a" && explained.json["partitioned"] == true)
        #expect(explained.json["mrargs"]?["partition"] == "q" && explained.json["opts"]?["partition"] == "q")
        let global = try await s.request(.POST, "/pdb/_explain", json: selector)
        #expect(global.json["index"]?["name"] == "ga" && global.json["mrargs"]?["partition"] == .null)
        #expect(Self.ids(try await s.request(.POST, "/pdb/_find", json: selector)) == ["p:1", "q:1"])

        // Views: a partitioned database's design documents are partitioned unless they say
        // otherwise; their views answer in a partition only (CouchDB 3.4.3's answers).
        _ = try await s.request(.PUT, "/pdb/p:3", json: ["a": 5])
        _ = try await s.request(.PUT, "/pdb/_design/v", json: ["views": ["a": ["map": "function(d){ emit(d.a, 1); }", "reduce": "_count"]]])
        _ = try await s.request(.PUT, "/pdb/_design/g", json: ["options": ["partitioned": false], "views": ["a": ["map": "function(d){ emit(d.a, 1); }"]]])
        let mandatory = try await s.request(.GET, "/pdb/_design/v/_view/a")
        #expect(mandatory.status == 400 && mandatory.json["reason"] == "`partition` parameter is mandatory for queries to this view.")
        let rows = try await s.request(.GET, "/pdb/_partition/p/_design/v/_view/a?reduce=false")
        #expect(rows.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["p:1", "p:3"], "\(rows.text)")
        #expect(try await s.request(.GET, "/pdb/_partition/p/_design/v/_view/a").json["rows"] == [["key": .null, "value": 2]])
        #expect(try await s.request(.GET, "/pdb/_design/g/_view/a").json["rows"]?.arrayValue?.count == 3)
        let unsupported = try await s.request(.GET, "/pdb/_partition/p/_design/g/_view/a")
        #expect(unsupported.status == 400 && unsupported.json["reason"] == "`partition` parameter is not supported in this design doc")
        let wrongDatabase = try await s.request(.PUT, "/plain/_design/pp", json: ["options": ["partitioned": true], "views": ["a": ["map": "function(d){}"]]])
        #expect(wrongDatabase.status == 400 && wrongDatabase.json["reason"] == "partitioned option cannot be true in a non-partitioned database.")
    }

    @Test("A covering index answers without reading documents, and follows their changes")
    func coveringIndex() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": .array((1...6).map { ["_id": .string("u\($0)"), "age": .int(20 + $0), "name": .string("n\($0)")] })])
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["age"]], "name": "age", "ddoc": "age"])
        let query: JSON = ["selector": ["age": ["$gte": 24]], "fields": ["_id", "age"], "execution_stats": true]
        // CouchDB: "covering": true, mrargs.include_docs false, total_docs_examined 0.
        let explained = try await s.request(.POST, "/db/_explain", json: query)
        #expect(explained.json["covering"] == true && explained.json["mrargs"]?["include_docs"] == false, "\(explained.text)")
        var found = try await s.request(.POST, "/db/_find", json: query)
        #expect(found.json["docs"] == [["_id": "u4", "age": 24], ["_id": "u5", "age": 25], ["_id": "u6", "age": 26]], "\(found.text)")
        #expect(found.json["execution_stats"]?["total_docs_examined"] == 0 && found.json["execution_stats"]?["total_keys_examined"] == 3)
        // A field the index does not hold (in `fields` or the selector) reads the documents.
        let withName: JSON = ["selector": ["age": ["$gte": 24]], "fields": ["name"]]
        #expect(try await s.request(.POST, "/db/_explain", json: withName).json["covering"] == false)
        let bySelector: JSON = ["selector": ["age": ["$gte": 24], "name": "n5"], "fields": ["_id"]]
        #expect(try await s.request(.POST, "/db/_explain", json: bySelector).json["covering"] == false)
        #expect(Self.ids(try await s.request(.POST, "/db/_find", json: bySelector)) == ["u5"])
        // The index follows an update and a deletion.
        let u6 = try await s.request(.GET, "/db/u6").json["_rev"]?.stringValue ?? ""
        _ = try await s.request(.PUT, "/db/u1", json: ["_rev": .string(try await s.request(.GET, "/db/u1").json["_rev"]?.stringValue ?? ""), "age": 40])
        _ = try await s.request(.DELETE, "/db/u6?rev=\(u6)")
        found = try await s.request(.POST, "/db/_find", json: query)
        #expect(found.json["docs"] == [["_id": "u4", "age": 24], ["_id": "u5", "age": 25], ["_id": "u1", "age": 40]], "\(found.text)")
    }

    @Test("Selectors: empty $or and $nor, array positions in paths, _id/_rev in an index, $or in index choice")
    func selectors() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [
            ["_id": "a", "age": 22, "favorites": ["C", "Lisp", "Ruby", "C"]],
            ["_id": "b", "age": 30, "x": 1, "favorites": ["C", "C", "Ruby", "Ruby"], "company": "k", "manager": "Foo"],
            ["_id": "c", "favorites": ["3": "C"]],
        ]])
        func find(_ selector: JSON) async throws -> [String] {
            Self.ids(try await s.request(.POST, "/db/_find", json: ["selector": selector]))
        }
        // CouchDB: an empty $or is true inside a selector, but `{"$or": []}` alone finds nothing;
        // an empty $nor is false.
        #expect(try await find(["age": 22, "$or": []]) == ["a"])
        #expect(try await find(["$and": [["$or": []]]]) == ["a", "b", "c"])
        #expect(try await find(["$or": []]) == [])
        #expect(try await find(["$nor": []]) == [])
        // CouchDB: a number in a path picks an array's element (mango_doc:get_field).
        #expect(try await find(["favorites.3": "C"]) == ["a", "c"])
        // CouchDB: `_id` and `_rev` need no condition for an index to be usable.
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["age", "_id"]], "ddoc": "aaa", "name": "aaa"])
        #expect(try await s.request(.POST, "/db/_explain", json: ["selector": ["age": 22]]).json["index"]?["ddoc"] == "_design/aaa")
        // CouchDB: every branch of an $or requiring a field makes an index on it usable.
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["company", "manager"]], "ddoc": "cm", "name": "cm"])
        let or: JSON = ["selector": ["company": ["$gt": "a"], "$or": [["manager": "Foo"], ["manager": "Bar"]]]]
        #expect(try await s.request(.POST, "/db/_explain", json: or).json["index"]?["ddoc"] == "_design/cm")
        #expect(Self.ids(try await s.request(.POST, "/db/_find", json: or)) == ["b"])
    }

    @Test("_explain lists the indexes not chosen with CouchDB's reasons, rankings and coverage")
    func indexCandidates() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["a": 1, "b": 2, "c": 3]]])
        for (name, fields) in [("a", ["a"]), ("ab", ["a", "b"]), ("b", ["b"]), ("c", ["c"])] as [(String, [JSON])] {
            _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": .array(fields)], "ddoc": .string(name), "name": .string(name)])
        }
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["a"], "partial_filter_selector": ["c": 3]], "ddoc": "p", "name": "p"])
        let explained = try await s.request(.POST, "/db/_explain", json: [
            "selector": ["a": ["$gt": 0], "b": ["$gt": 0]], "fields": ["a"], "use_index": "b",
        ])
        #expect(explained.json["index"]?["name"] == "b")
        // CouchDB 3.4.3's answer to the same request, candidate by candidate.
        let expected: [(String, Bool, String, Int, JSON)] = [
            ("p", false, "is_partial", 3, true), ("c", false, "field_mismatch", 2, false),
            ("ab", true, "excluded_by_user", 1, true), ("a", true, "excluded_by_user", 1, true),
            ("_all_docs", true, "excluded_by_user", 1, .null),
        ]
        let candidates = explained.json["index_candidates"]?.arrayValue ?? []
        #expect(candidates.count == expected.count, "\(explained.text)")
        for (candidate, (name, usable, reason, ranking, covering)) in zip(candidates, expected) {
            #expect(candidate["index"]?["name"] == .string(name))
            #expect(candidate["analysis"] == ["usable": .bool(usable), "reasons": [["name": .string(reason)]], "ranking": .int(ranking), "covering": covering],
                    "\(name): \(candidate)")
        }
        // No index can give this sort: CouchDB explains it with no index and `_all_docs` unusable.
        let unsortable = try await s.request(.POST, "/db/_explain", json: ["selector": ["c": 3], "sort": ["zz"]])
        #expect(unsortable.json["index"] == .null, "\(unsortable.text)")
        #expect(try await s.request(.POST, "/db/_find", json: ["selector": ["c": 3], "sort": ["zz"]]).json["error"] == "no_usable_index")
    }

    @Test("update: false, text indexes, the row past the limit, r above 1")
    func queryOptions() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["name"]], "ddoc": "foo", "name": "name"])
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["name": "Eddie"], ["name": "Fred"], ["name": "Gus"]]])
        // CouchDB: update=false reads the index as it is (never built here: nothing).
        let stale = try await s.request(.POST, "/db/_find", json: ["selector": ["name": "Eddie"], "update": false])
        #expect(stale.json["docs"]?.arrayValue?.count == 0, "\(stale.text)")
        let fresh = try await s.request(.POST, "/db/_find", json: ["selector": ["name": "Eddie"]])
        #expect(fresh.json["docs"]?.arrayValue?.count == 1)
        // CouchDB without a search service: 503 {"error":"required index service unavailable","reason":"text"}.
        let text = try await s.request(.POST, "/db/_index", json: ["index": [:], "type": "text"])
        #expect(text.status == 503 && text.json["error"] == "required index service unavailable" && text.json["reason"] == "text")
        // CouchDB examines the row after the last one returned.
        let limited = try await s.request(.POST, "/db/_find", json: ["selector": ["name": ["$gt": nil]], "limit": 2, "execution_stats": true])
        #expect(limited.json["execution_stats"]?["total_keys_examined"] == 3 && limited.json["execution_stats"]?["results_returned"] == 2)
        let quorum = try await s.request(.POST, "/db/_find", json: ["selector": ["name": ["$gt": nil]], "r": 3, "execution_stats": true])
        #expect(quorum.json["execution_stats"]?["total_quorum_docs_examined"] == 3 && quorum.json["execution_stats"]?["total_docs_examined"] == 0)
    }

    @Test("Design documents are checked as couch_mrview checks them; indexes see _conflicts")
    func designDocumentsAndConflicts() async throws {
        let s = try TestServer()
        defer { s.stop() }
        _ = try await s.request(.PUT, "/db")
        // CouchDB: 400 invalid_design_doc "`views.v.map` field must have object type".
        let query = try await s.request(.PUT, "/db/_design/q", json: ["language": "query", "views": ["v": ["map": "function(d){}"]]])
        #expect(query.status == 400 && query.json["reason"] == "`views.v.map` field must have object type", "\(query.text)")
        let js = try await s.request(.PUT, "/db/_design/j", json: ["views": ["v": ["map": ["fields": ["a": "asc"]]]]])
        #expect(js.status == 400 && js.json["reason"] == "`views.v.map` field must have string type")
        let filters = try await s.request(.PUT, "/db/_design/f", json: ["filters": ["f": 1]])
        #expect(filters.json["reason"] == "`filters.f` field must have string or object type")
        let noMap = try await s.request(.PUT, "/db/_design/n", json: ["views": ["v": ["reduce": "_count"]]])
        #expect(noMap.json["reason"] == "View `v` must contain map function")
        let reducer = try await s.request(.PUT, "/db/_design/r", json: ["views": ["v": ["map": "function(d){}", "reduce": "_median"]]])
        #expect(reducer.json["reason"] == "`_median` is not a supported reduce function.")
        // CouchDB's index updater opens documents with their conflicts: views and Mango see them.
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["docs": [["_id": "doc", "a": 2]]])
        _ = try await s.request(.POST, "/db/_bulk_docs", json: ["new_edits": false, "docs": [["_id": "doc", "_rev": "1-23202479633c2b380f79507a776743d5", "a": 1]]])
        let view = try await s.request(.PUT, "/db/_design/c", json: ["views": ["c": ["map": "function(doc){ if (doc._conflicts) emit(doc._conflicts, null); }"]]])
        #expect(view.status == 201, "\(view.text)")
        let rows = try await s.request(.GET, "/db/_design/c/_view/c").json["rows"]?.arrayValue ?? []
        #expect(rows.first?["key"] == ["1-23202479633c2b380f79507a776743d5"], "\(rows)")
        _ = try await s.request(.POST, "/db/_index", json: ["index": ["fields": ["_conflicts"]]])
        let conflicted = try await s.request(.POST, "/db/_find", json: ["selector": ["_conflicts": ["$exists": true]], "conflicts": true])
        // CouchDB 3.4.3 answers exactly this (Mango 19-find-conflicts).
        #expect(conflicted.json["docs"]?[0]?["_rev"] == "1-3975759ccff3842adf690a5c10caee42", "\(conflicted.text)")
        #expect(conflicted.json["docs"]?[0]?["_conflicts"] == ["1-23202479633c2b380f79507a776743d5"])
    }
}
