import CouchEngine
@testable import CouchServer
import CouchJSON
import LTTestSupport
import Testing

/// `SharedFeedReads` lends one read to every listener asking the same question at once; a read
/// lent after a commit must include it.
@Suite("Shared feed reads")
struct SharedFeedReadsTests {
    @Test("A listener asking after a commit gets the commit, not the page read before it")
    func readAfterCommitSeesIt() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url, maxOpen: 2)
        let db = try await store.create("feed")
        let reads = SharedFeedReads()
        let options = ChangesOptions()
        // A listener at the start: nothing yet, and the empty page is kept for the others.
        #expect(try await reads.changes(db, options, question: "q").page.rows.isEmpty)
        _ = try await db.update(DocumentInput(id: "fix-1", body: ["lat": 1.5]))
        // Woken by that commit, the same question from the same position must read again
        // (before, it got the empty page for up to a second and asked again in a busy loop).
        let after = try await reads.changes(db, options, question: "q").page
        #expect(after.rows.compactMap { $0["id"]?.stringValue } == ["fix-1"])
        // Two listeners asking together get the same page.
        async let first = reads.changes(db, options, question: "q")
        async let second = reads.changes(db, options, question: "q")
        let (a, b) = try await (first, second)
        #expect(a.rows == b.rows && a.rows.count == 1)
    }
}
