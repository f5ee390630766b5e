import CouchEngine
import CouchJSON
import Foundation

/// The device's own databases, on the same engine as the server (so they replicate with it
/// natively): `locations` (what this device recorded, pushed to the user's database) and
/// `places` (places seen or pulled, for offline use), each indexed on `created_at` as the
/// original app's datastores were.
public final class LocalStore: Sendable {
    public let directory: URL
    let store: DatabaseStore
    static let timestamps: MangoIndex = try! MangoIndex(designDocument: "_design/timestamps", name: "timestamps", definition: ["fields": ["created_at"]])

    /// Opens (creating on first use) the store in `directory`.
    public init(directory: URL) throws {
        self.directory = directory
        store = try DatabaseStore(directory: directory, maxOpen: 4)
        for name in ["locations", "places"] where !store.exists(name) { try store.create(name) }
    }

    public var locations: Database { get throws { try store.open("locations") } }
    public var places: Database { get throws { try store.open("places") } }

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

    /// Every place stored on the device.
    public func allPlaces() async throws -> [PlaceDoc] {
        try await newest(places, limit: Int.max).compactMap(PlaceDoc.init(json:))
    }

    /// Logging out: both databases go, and come back empty.
    public func wipe() throws {
        for name in ["locations", "places"] {
            if store.exists(name) { try store.delete(name) }
            try store.create(name)
        }
    }

    func newest(_ db: Database, limit: Int) async throws -> [JSON] {
        var query = FindQuery(selector: try Selector(json: ["created_at": ["$gt": 0]]))
        query.sort = [["created_at"]]
        query.descending = true
        query.limit = limit
        return try await db.find(query, index: LocalStore.timestamps).docs
    }
}
