import AsyncHTTPClient
import CouchJSON
import Foundation
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

@Suite("JavaScript views over HTTP", .serialized, .timeLimit(.minutes(3)))
struct ViewHTTPTests {
    @Test("Map functions with built-in reducers: ranges, keys, group_level, include_docs; updates follow writes; restarts keep the index; a runaway function is stopped")
    func views() async throws {
        let directoryHolder = try TemporaryDirectory("lt-views")
        defer { directoryHolder.cleanup() }
        let directory = directoryHolder.url
        var s = try TestServer(dataDirectory: directory)
        _ = try await s.request(.PUT, "/trips")
        let probe = try await s.request(.PUT, "/trips/_design/probe", json: ["views": ["all": ["map": "function (doc) { emit(doc._id, null); }"]]])
        #expect(probe.status == 201)
        let available = try await s.request(.GET, "/trips/_design/probe/_view/all")
        guard available.status == 200 else {
            #expect(available.status == 501 && ProcessInfo.processInfo.environment["CI"] == nil, "\(available.text)")
            s.stop()
            return
        }
        var docs: [JSON] = []
        for (i, (user, day, km)) in [("ann", 1, 3), ("ann", 1, 4), ("ann", 2, 5), ("bob", 1, 10), ("bob", 3, 1)].enumerated() {
            docs.append(["_id": .string("t\(i)"), "user": .string(user), "day": .int(day), "km": .int(km)])
        }
        _ = try await s.request(.POST, "/trips/_bulk_docs", json: ["docs": .array(docs)])
        _ = try await s.request(.PUT, "/trips/_design/stats", json: ["views": [
            "km": ["map": "function (doc) { if (doc.user) { emit([doc.user, doc.day], doc.km); } }", "reduce": "_sum"],
            "count": ["map": "function (doc) { if (doc.user) { emit(doc.user, 1); } }", "reduce": "_count"],
            "bad": ["map": "function (doc) { while (true) {} }"],
            "jsreduce": ["map": "function (doc) { emit(1, 1); }", "reduce": "function (k, v) { return sum(v); }"],
        ]])
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/km").json == ["rows": [["key": .null, "value": 23]]])
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/km?group_level=1").json["rows"] ==
                [["key": ["ann"], "value": 12], ["key": ["bob"], "value": 11]])
        let range = try await s.request(.GET, "/trips/_design/stats/_view/km?reduce=false&startkey=%5B%22ann%22,2%5D&endkey=%5B%22bob%22,1%5D&include_docs=true")
        #expect(range.json["rows"]?.arrayValue?.map { $0["id"] } == ["t2", "t3"])
        #expect(range.json["rows"]?[0]?["doc"]?["km"] == 5 && range.json["total_rows"] == 5)
        let keys = try await s.request(.POST, "/trips/_design/stats/_view/count?group=true", json: ["keys": ["bob", "nobody"]])
        #expect(keys.json["rows"] == [["key": "bob", "value": 2]])
        // The index follows writes.
        _ = try await s.request(.PUT, "/trips/t9", json: ["user": "cy", "day": 1, "km": 7])
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/count").json["rows"]?[0]?["value"] == 6)
        // A runaway function is stopped with CouchDB's error; the server carries on.
        let runaway = try await s.request(.GET, "/trips/_design/stats/_view/bad")
        #expect(runaway.status == 500 && runaway.json["error"] == "os_process_error")
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/count").status == 200)
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/jsreduce").json["rows"] == [["key": .null, "value": 6]])
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/nope").status == 404)
        // After a restart the index is still there and still right.
        s.stop()
        s = try TestServer(dataDirectory: directory)
        let restarted = s
        defer { restarted.stop() }
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/count?stale=ok").json["rows"]?[0]?["value"] == 6)
        #expect(try await s.request(.GET, "/trips/_design/stats/_view/km?group=true&limit=1").json["rows"] == [["key": ["ann", 1], "value": 7]])
    }
}
