public import CouchEngine
import CouchIndexes
import CouchJSON
public import Foundation
public import Geo

/// The device's own databases, on the same engine as the server (so they replicate with it
/// natively): `locations` (what this device recorded, pushed to the user's database) and
/// `places` (places seen or pulled, for offline use), each indexed on `created_at` as the
/// original app's datastores were.
public final class LocalStore: Sendable {
    public let directory: URL
    let store: DatabaseStore
    static let timestamps: MangoIndex = try! MangoIndex(
        designDocument: "_design/timestamps", name: "timestamps", definition: ["fields": ["created_at"]])

    /// Opens (creating on first use) the store in `directory`.
    public init(directory: URL) throws {
        self.directory = directory
        store = try DatabaseStore(directory: directory, maxOpen: 4)
        for name in ["locations", "places"] where !store.exists(name) { try store.create(name) }
    }

    public var locations: DocumentDatabase { get throws { try store.open("locations") } }
    public var places: DocumentDatabase { get throws { try store.open("places") } }

    /// Saves a recorded location (a new id when it has none); returns its id.
    @discardableResult
    public func save(_ location: LocationDoc) async throws -> String {
        var doc = location
        if doc.id == nil { doc.id = UUID().uuidString.lowercased() }
        guard case let .object(body) = doc.json else { return doc.id! }
        var input = DocumentInput(id: doc.id, body: body)
        input.body.removeValue(forKey: "_id")
        _ = try await locations.update(input)
        return doc.id!
    }

    /// Saves locations that have ids in one write, leaving alone any the device already has;
    /// returns how many were new.
    public func saveNew(_ batch: [LocationDoc]) async throws -> Int {
        var added = 0
        let db = try locations
        for start in stride(from: 0, to: batch.count, by: 1000) {
            let inputs = batch[start..<min(start + 1000, batch.count)].compactMap { location -> DocumentInput? in
                guard let id = location.id, case var .object(body) = location.json else { return nil }
                body.removeValue(forKey: "_id")
                return DocumentInput(id: id, body: body)
            }
            for result in try await db.update(inputs, newEdits: true) {
                switch result {
                case .success: added += 1
                case .failure(.conflict): continue
                case let .failure(error): throw error
                }
            }
        }
        return added
    }

    /// The newest `limit` locations, oldest first (the path the map draws).
    public func recentLocations(limit: Int = 100) async throws -> [LocationDoc] {
        try await newest(locations, limit: limit).compactMap(LocationDoc.init(json:)).reversed()
    }

    /// Keeps places the device has seen; ones it already has stay as they are.
    public func remember(_ places: [PlaceDoc]) async throws {
        let db = try self.places
        for place in places {
            guard let id = place.id, case let .object(body) = place.json else { continue }
            if let existing = try await db.winningRevision(id: id), !existing.deleted { continue }
            var input = DocumentInput(id: id, body: body)
            input.body.removeValue(forKey: "_id")
            _ = try await db.update(input)
        }
    }

    /// Makes the device's places within `radius` metres of `center` exactly `places` (a region
    /// pulled from the server): new ones added, changed ones updated, ones the server no longer
    /// has there removed. Returns how many documents changed.
    @discardableResult
    public func replacePlaces(near center: Coordinate, radius: Double, with places: [PlaceDoc]) async throws -> Int {
        let db = try self.places
        var stored: [String: (rev: Revision, body: JSONObject)] = [:]
        var inRegion: Set<String> = []
        for doc in try await newest(db, limit: Int.max) {
            guard var body = doc.objectValue, let id = body["_id"]?.stringValue,
                let rev = body["_rev"]?.stringValue.flatMap(Revision.init)
            else { continue }
            body.removeValue(forKey: "_id")
            body.removeValue(forKey: "_rev")
            stored[id] = (rev, body)
            if let place = PlaceDoc(json: doc), Sphere.distance(center, place.coordinate) <= radius {
                inRegion.insert(id)
            }
        }
        var writes: [DocumentInput] = []
        for place in places {
            guard let id = place.id, case var .object(body) = place.json else { continue }
            body.removeValue(forKey: "_id")
            inRegion.remove(id)
            if let existing = stored[id] {
                if existing.body == body { continue }
                writes.append(DocumentInput(id: id, rev: existing.rev, body: body))
            } else {
                writes.append(DocumentInput(id: id, body: body))
            }
        }
        for id in inRegion {
            if let existing = stored[id] { writes.append(DocumentInput(id: id, rev: existing.rev, deleted: true)) }
        }
        guard !writes.isEmpty else { return 0 }
        for case let .failure(error) in try await db.update(writes, newEdits: true) { throw error }
        return writes.count
    }

    /// Changes to `locations` not yet known to be on the server: those after the last sequence
    /// a push completed (0 once a push has caught up).
    public func pendingPush() async throws -> Int {
        let db = try locations
        var options = ChangesOptions()
        options.since = await pushedSeq(db)
        options.limit = 0
        return try await db.changes(options).pending
    }

    static let syncState = "lt-sync"

    func pushedSeq(_ db: DocumentDatabase) async -> Int {
        await state(LocalStore.syncState, in: db)?["pushed_seq"]?.intValue ?? 0
    }

    /// A small state document in `database` (a `_local` one: never replicated).
    func state(_ id: String, in database: DocumentDatabase) async -> JSONObject? {
        try? await database.local.get(id: "_local/" + id)
    }

    func setState(_ id: String, in database: DocumentDatabase, _ body: JSONObject) async throws {
        let existing = await state(id, in: database)
        _ = try await database.local.put(
            id: "_local/" + id, rev: existing?["_rev"]?.stringValue, body: body, deleted: false)
    }

    /// Every place stored on the device.
    public func allPlaces() async throws -> [PlaceDoc] {
        try await newest(places, limit: Int.max).compactMap(PlaceDoc.init(json:))
    }

    /// Logging out: both databases go, and come back empty.
    public func wipe() async throws {
        for name in ["locations", "places"] {
            if store.exists(name) { try await store.delete(name) }
            try await store.create(name)
        }
    }

    func newest(_ db: DocumentDatabase, limit: Int) async throws -> [JSON] {
        var query = FindQuery(selector: try Selector(json: ["created_at": ["$gt": 0]]))
        query.sort = [["created_at"]]
        query.descending = true
        query.limit = limit
        return try await db.mango.find(query, index: LocalStore.timestamps).docs
    }
}
