import CouchEngine
import CouchIndexes
import CouchJSON
import Foundation
import Geo
import LTTestSupport
import Testing

/// The geo index from Swift, in-process (as the device SDK answers place queries offline).
@Suite("Geo indexes in the engine")
struct GeoIndexTests {
    static let source = "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); }}"

    @Test("db.geo.query answers Cloudant's parameters in-process; updates are incremental, invalid geometries skipped, the index persists")
    func inProcess() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try DatabaseStore(directory: directory.url)
        let db = try await store.create("places")
        let extract = try #require(GeoIndexDefinition.native(Self.source))
        let index = GeoIndexDefinition(code: Self.source, extract: extract)
        func point(_ id: String, _ lon: Double, _ lat: Double) -> DocumentInput {
            DocumentInput(id: id, body: ["geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]]])
        }
        _ = try await db.update([point("a", 13.4050, 52.5200), point("b", 13.4100, 52.5210), point("far", 2.35, 48.85),
                                 DocumentInput(id: "bad", body: ["geometry": ["type": "Point", "coordinates": [13.4, 95]]]),
                                 DocumentInput(id: "none", body: ["name": "no geometry"])], newEdits: true)
        let request = try GeoRequest(parameters: ["lat": "52.52", "lon": "13.405", "radius": "1000", "nearest": "true", "include_docs": "true"])
        let first = try await db.geo.query(index, request)
        #expect(first.hits.map(\.hit.id) == ["a", "b"])
        #expect(first.hits[0].doc?["_id"] == "a" && !first.more)
        #expect(first.update.skipped.map(\.id) == ["bad"])
        #expect(first.hits[1].hit.distance > 300 && first.hits[1].hit.distance < 400)
        // Moving "b" away and adding "c" is seen by the next query.
        let rev = try #require(try await db.winningRevision(id: "b")?.rev)
        _ = try await db.update(DocumentInput(id: "b", rev: rev, body: ["geometry": ["type": "Point", "coordinates": [0, 0]]]))
        _ = try await db.update(point("c", 13.4051, 52.5201))
        #expect(try await db.geo.query(index, request).hits.map(\.hit.id) == ["a", "c"])
        // A new store on the same files answers from the persisted index without updating it.
        let reopened = try await DatabaseStore(directory: directory.url).open("places")
        var stale = request
        stale.stale = true
        #expect(try await reopened.geo.query(index, stale).hits.map(\.hit.id) == ["a", "c"])
        #expect(try await reopened.geo.info(index).docCount == 4)  // a, b, c, far

        // Purged to the last revision, a document leaves the changes feed: it must leave the
        // index as well, the loaded one and the persisted one (a deleted user's locations).
        let cRev = try #require(try await db.winningRevision(id: "c")?.rev)
        _ = try await db.purge([(id: "c", revs: [cRev])])
        #expect(try await db.geo.query(index, request).hits.map(\.hit.id) == ["a"])
        let again = try await DatabaseStore(directory: directory.url).open("places")
        #expect(try await again.geo.query(index, stale).hits.map(\.hit.id) == ["a"])
        #expect(try await again.geo.info(index).docCount == 3)
    }
}
