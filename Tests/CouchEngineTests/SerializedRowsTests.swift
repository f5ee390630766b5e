import CouchEngine
import CouchJSON
import Foundation
import Testing

/// `_all_docs` written from the stored bodies' bytes (`allDocsSerialized`) must be, byte for
/// byte, what the rows built as JSON (`allDocs`) serialize to, for any document and option.
@Suite("_all_docs rows written from stored bytes")
struct SerializedRowsTests {
    /// A random JSON value of small depth: strings with escapes and non-ASCII, numbers of
    /// every kind, nested objects and arrays, keys starting with an underscore-like character.
    static func value(_ random: inout SeededRandom, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 2 ? 5 : 7), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int.random(in: -1_000_000...1_000_000, using: &random))
        case 3: return .double([0.1, -2.5e-7, 1e21, 37.3318, -122.0312, 0.0][Int.random(in: 0..<6, using: &random)])
        case 4: return .string(string(&random))
        case 5: return .array((0..<Int.random(in: 0..<4, using: &random)).map { _ in value(&random, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0..<4, using: &random) { object[string(&random)] = value(&random, depth: depth + 1) }
            return .object(object)
        }
    }

    static func string(_ random: inout SeededRandom) -> String {
        let pieces = ["a", "loc", "\"", "\\", "\n", "é", "日本", "😀", "/", " ", "\u{1}", "x_y", "{}", ","]
        return (0..<Int.random(in: 0..<5, using: &random)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &random)] }.joined()
    }

    /// A database of 120 random documents: some with attachments, some deleted, some with a
    /// replicated conflict, a design document.
    static func fixture(_ store: DatabaseStore, seed: UInt64) async throws -> DocumentDatabase {
        var random = SeededRandom(seed: seed)
        let db = try await store.create("rows")
        for i in 0..<120 {
            let id = i == 60 ? "_design/app" : "doc-\(i)-" + Self.string(&random)
            var body = JSONObject()
            for _ in 0..<Int.random(in: 0..<6, using: &random) { body[Self.string(&random)] = Self.value(&random) }
            var input = DocumentInput(id: id, body: body)
            if i % 7 == 0 {
                input.attachments = ["photo.jpg": ["content_type": "image/jpeg", "data": .string(Data("photo \(i)".utf8).base64EncodedString())]]
            }
            let rev = try await db.update(input)
            switch i % 10 {
            case 3: _ = try await db.update(DocumentInput(id: id, rev: rev, deleted: true))
            case 5:  // a replicated conflict beside the winner
                var conflict = DocumentInput(id: id, rev: Revision(pos: 1, hash: randomHash(&random)), body: ["other": .int(i)])
                conflict.revisions = [conflict.rev!]
                _ = try await db.update([conflict], newEdits: false, user: .system)
            default: break
            }
        }
        return db
    }

    @Test("_all_docs: byte for byte the rows built as JSON, with and without documents and every read option", arguments: [1, 2, 3] as [UInt64])
    func sameBytes(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let db = try await Self.fixture(try DatabaseStore(directory: directory.url, maxOpen: 2), seed: seed)
        var variants: [AllDocsOptions] = []
        for includeDocs in [false, true] {
            for option in 0..<5 {
                var options = AllDocsOptions()
                options.includeDocs = includeDocs
                switch option {
                case 1: options.read.conflicts = true
                case 2: options.read.revs = true
                case 3: options.descending = true; options.limit = 30; options.skip = 3
                case 4: options.keys = ["doc-1-", "missing", .int(3)]
                default: break
                }
                variants.append(options)
            }
        }
        for options in variants {
            let built = try await db.allDocs(options)
            let written = try await db.allDocsSerialized(options)
            #expect(written.totalRows == built.totalRows && written.offset == built.offset)
            #expect(written.rows.count == built.rows.count)
            let differing = zip(written.rows, built.rows).first { $0.bytes != $1.bytes }
            #expect(differing == nil, """
                include_docs \(options.includeDocs), read \(options.read): written \(differing.map { String(decoding: $0.0.bytes, as: UTF8.self) } ?? ""), \
                built \(differing.map { String(decoding: $0.1.bytes, as: UTF8.self) } ?? "")
                """)
            #expect(written.rows.map(\.id) == built.rows.map { $0["id"]?.stringValue ?? $0["key"]?.stringValue ?? "" })
        }
    }

    @Test("_changes: byte for byte the rows built as JSON, for every filter the engine writes and every option", arguments: [1, 2] as [UInt64])
    func sameChangesBytes(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let db = try await Self.fixture(try DatabaseStore(directory: directory.url, maxOpen: 2), seed: seed)
        var variants: [ChangesOptions] = []
        for includeDocs in [false, true] {
            for option in 0..<7 {
                var options = ChangesOptions()
                options.includeDocs = includeDocs
                switch option {
                case 1: options.read.conflicts = true
                case 2: options.allLeaves = true
                case 3: options.filter = .docIDs(["_design/app", "doc-3-", "doc-10-"])
                case 4: options.filter = .design
                case 5: options.descending = true; options.limit = 20
                case 6: options.since = 40; options.limit = 25
                default: break
                }
                variants.append(options)
            }
        }
        for options in variants {
            let built = try await db.changes(options)
            let written = try #require(try await db.changesSerialized(options))
            #expect(written.lastSeq == built.lastSeq && written.pending == built.pending)
            #expect(written.rows.count == built.rows.count)
            let differing = zip(written.rows, built.rows).first { $0 != $1.bytes }
            #expect(differing == nil, """
                include_docs \(options.includeDocs), filter \(String(describing: options.filter)): \
                written \(differing.map { String(decoding: $0.0, as: UTF8.self) } ?? ""), built \(differing.map { String(decoding: $0.1.bytes, as: UTF8.self) } ?? "")
                """)
        }
        // Selectors and filter functions need the rows as values: not written by the engine.
        var selector = ChangesOptions()
        selector.filter = .selector(try Selector(json: ["kind": "fix"]))
        #expect(try await db.changesSerialized(selector) == nil)
    }

    @Test("_bulk_get: byte for byte the documents built as JSON, every leaf or named revisions, with and without _revisions", arguments: [1, 2] as [UInt64])
    func sameOpenRevisionBytes(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let db = try await Self.fixture(try DatabaseStore(directory: directory.url, maxOpen: 2), seed: seed)
        let changes = try await db.changes(ChangesOptions())
        var requests: [RevisionsRequest] = []
        for (index, row) in changes.rows.enumerated() {
            guard let id = row["id"]?.stringValue, let rev = row["changes"]?[0]?["rev"]?.stringValue.flatMap(Revision.init) else { continue }
            switch index % 3 {
            case 0: requests.append(RevisionsRequest(id: id, revs: nil))
            case 1: requests.append(RevisionsRequest(id: id, revs: [rev, Revision(pos: 9, hash: "0123456789abcdef0123456789abcdef")]))
            default: requests.append(RevisionsRequest(id: id, revs: [Revision(pos: 1, hash: rev.hash)]))
            }
        }
        requests.append(RevisionsRequest(id: "no-such-document", revs: nil))
        for (revs, attachments, latest) in [(false, false, false), (true, false, false), (true, true, true), (false, false, true)] {
            var options = ReadOptions()
            options.revs = revs
            options.attachments = attachments
            let built = try await db.openRevisions(requests, latest: latest, options: options)
            let written = try await db.openRevisionsSerialized(requests, latest: latest, options: options)
            #expect(built.count == written.count)
            for (request, (one, other)) in zip(requests, zip(built, written)) {
                switch (one, other) {
                case let (.success(docs), .success(serialized)):
                    let expected = docs.map { item -> String in
                        switch item {
                        case let .ok(doc): return String(decoding: JSON.object(doc).bytes, as: UTF8.self)
                        case let .missing(rev): return "missing \(rev)"
                        }
                    }
                    let got = serialized.map { item -> String in
                        switch item {
                        case let .ok(bytes): return String(decoding: bytes, as: UTF8.self)
                        case let .missing(rev): return "missing \(rev)"
                        }
                    }
                    #expect(got == expected, "\(request.id), revs \(revs), latest \(latest)")
                case let (.failure(a), .failure(b)):
                    #expect(a.error == b.error)
                default:
                    Issue.record("\(request.id): one path failed, the other did not")
                }
            }
        }
    }
}
