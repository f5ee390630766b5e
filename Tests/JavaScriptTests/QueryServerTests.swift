import CouchJSON
import Foundation
import JavaScript
import LTTestSupport
import Testing

@Suite("JavaScript query server processes", .timeLimit(.minutes(3)))
struct QueryServerTests {
    func server(timeout: Duration = .seconds(5), memoryLimit: Int = 1024) -> QueryServer {
        QueryServer(executable: LTBinary.url, arguments: ["js-server", "--memory-limit", String(memoryLimit)], timeout: timeout)
    }

    /// False where lt was built without duktape-dev; CI installs it, so there it must be true.
    func javascriptAvailable() async -> Bool {
        let available = (try? await server().run([["reset"]])) != nil
        if !available, ProcessInfo.processInfo.environment["CI"] != nil {
            Issue.record("lt has no JavaScript engine in CI: .ci/run must install duktape-dev")
        }
        return available
    }

    @Test("Map and reduce functions run with CouchDB's API; a throwing function skips the document")
    func mapReduce() async throws {
        guard await javascriptAvailable() else { return }
        let answers = try await server().run([
            ["reset"],
            ["add_fun", "function (doc) { if (doc.km) { emit([doc.user, doc.day], doc.km); } }"],
            ["add_fun", "function (doc) { if (doc.bad) { throw new Error('bad doc'); } emit(doc._id, isArray(doc.tags)); }"],
            ["map_doc", ["_id": "a", "user": "ann", "day": 1, "km": 3, "tags": ["x"]]],
            ["map_doc", ["_id": "b", "bad": true]],
            ["reduce", ["function (keys, values, rereduce) { return sum(values); }"], [[["ann", "a"], 3], [["bob", "b"], 4]]],
            ["rereduce", ["function (keys, values, rereduce) { return sum(values) * (rereduce ? 10 : 1); }"], [3, 4]],
        ])
        #expect(answers[3] == [[[["ann", 1], 3]], [["a", true]]])
        #expect(answers[4] == [[], []])
        #expect(answers[5] == [true, [7]])
        #expect(answers[6] == [true, [70]])
    }

    @Test("A function that never returns is stopped after the timeout, and the next request gets a fresh process")
    func runawayFunction() async throws {
        guard await javascriptAvailable() else { return }
        let js = server(timeout: .seconds(1))
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await js.run([["reset"], ["add_fun", "function (doc) { while (true) {} }"], ["map_doc", ["_id": "x"]]])
            Issue.record("an endless loop returned")
        } catch let failure as QueryServer.Failure {
            #expect(failure.kind == .timeout && failure.error == "os_process_error")
        }
        #expect(start.duration(to: clock.now) < .seconds(5))
        let after = try await js.run([["reset"], ["add_fun", "function (doc) { emit(1, 2); }"], ["map_doc", ["_id": "y"]]])
        #expect(after[2] == [[[1, 2]]])
    }

    @Test("A function that exhausts memory fails within its own process's limit; bad code is a clear error")
    func memoryAndCompileErrors() async throws {
        guard await javascriptAvailable() else { return }
        let js = server(timeout: .seconds(20), memoryLimit: 256)
        let clock = ContinuousClock()
        let start = clock.now
        // Allocation fails inside the engine (the process's memory limit) and becomes an
        // exception: the document is skipped, as for any throwing map function.
        let answers = try await js.run([["reset"], ["add_fun", "function (doc) { var s = 'x', a = []; while (true) { s = s + s; a.push(s); } }"],
                                        ["map_doc", ["_id": "m"]]])
        #expect(answers[2] == [[]])
        #expect(start.duration(to: clock.now) < .seconds(10), "the memory limit, not the timeout, should stop it")
        do {
            _ = try await js.run([["reset"], ["add_fun", "this is not javascript"]])
            Issue.record("bad code compiled")
        } catch let failure as QueryServer.Failure {
            #expect(failure.kind == .javascript && failure.error == "compilation_error")
        }
        #expect(try await js.run([["reset"]]) == [true])
    }
}
