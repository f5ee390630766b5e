public import CouchJSON
public import CouchProtocol
import Crypto
import Foundation
public import HTTPServing
import HTTPTypes
public import Logging

/// The Location Tracker application (the reference design's Node.js server): registration,
/// login with per-device API keys, a private database per user, places near a position.
/// Everything it stores goes through `CouchClient`, as CouchDB requests.
public final class TrackerService: CouchBacked {
    /// An error for the application API: status and `{"error", "reason"}`.
    public struct Failure: Error, Sendable {
        public var status: Int
        public var body: JSON
        /// For 405: the methods the path takes (the `Allow` header).
        public var allow: [String]?
        /// For 429: seconds until a retry may succeed (the `Retry-After` header).
        public var retryAfter: Int?

        init(_ status: Int, _ error: String, _ reason: String? = nil) {
            self.status = status
            var object: JSONObject = ["error": .string(error)]
            if let reason { object["reason"] = .string(reason) }
            body = .object(object)
        }
    }

    public static let usersDB = "lt_users"
    /// Users' reports of wrong place positions (admins only: users see their own through the API).
    public static let reportsDB = "lt_place_reports"
    /// The document in `lt_places` whose `dataVersion` grows with every approved change.
    public static let releaseID = "dataset-release"
    public static let placesDB = "lt_places"
    public static let allLocationsDB = "lt_locations_all"
    /// The geo design document of the original system, in every location and place database,
    /// with where a location's time is (`time`, for the dashboard's time window; Cloudant and
    /// CouchDB ignore it).
    public static let pointsDesign: JSON = [
        "_id": "_design/points", "language": "javascript",
        "st_indexes": [
            "pointidx": [
                "index": "function (doc) { if (doc.geometry && doc.geometry.coordinates) { st_index(doc.geometry); }}",
                "time": ["created_at", "properties.timestamp"],
            ]
        ],
    ]

    /// Where users' locations live.
    public enum Mode: String, Sendable, CaseIterable {
        /// A private database per user (`lt_locations_user_<name>`), consolidated into
        /// `lt_locations_all`: the reference design's Part 1, and the default.
        case databasePerUser = "db-per-user"
        /// One database for everyone (`lt_locations_all_envoy`), where each user sees only
        /// their own documents: the reference design's Part 2, with Envoy.
        case singleDatabase = "single-db"
    }

    /// The database every user shares in single-database mode; it is also the one analysts read.
    public static let sharedLocationsDB = "lt_locations_all_envoy"
    /// How the database server must treat `sharedLocationsDB`: owners are the users whose
    /// API keys carry their owner role.
    public static let sharedLocations = SharedDatabase(name: sharedLocationsDB, ownerRolePrefix: "lt_owner_")

    /// Keeps a database's members (analysts) from writing: CouchDB has no read-only members,
    /// so a validation function refuses every write but an admin's.
    static let readOnlyDesign: JSON = [
        "_id": "_design/read-only", "language": "javascript",
        "validate_doc_update":
            "function (newDoc, oldDoc, userCtx) { if (userCtx.roles.indexOf('_admin') === -1) { throw({forbidden: 'Only the server writes here; members read.'}); } }",
    ]

    /// What `readOnlyDesign`'s validation function means, so a server can run it without a
    /// JavaScript engine: writes are refused with 403 `forbidden` and `reason` unless the writer
    /// is a server admin. (The server composition maps `source` to native code.)
    public static let readOnlyValidation = (
        source: readOnlyDesign["validate_doc_update"]!.stringValue!,
        reason: "Only the server writes here; members read."
    )

    let couch: any CouchClient
    /// Where geo queries go (`_geo`, `_geo_grid`): the same database in embedded mode; in
    /// cluster mode this server's own mirrors of `lt_places` and `lt_locations_all`, since
    /// CouchDB has no geo index.
    let geo: any CouchClient
    /// Whether geo queries go elsewhere than the database (cluster mode).
    let separateGeo: Bool
    /// Where devices replicate when that is not this server (cluster mode): `host:port` and
    /// scheme, asked at each sign-in (the node answering then, or a load balancer's address).
    let databaseLocation: (@Sendable () -> (host: String, scheme: String))?
    /// The scheme of this server's database API (`https` when it serves TLS), for devices that
    /// replicate with it.
    let ownDatabaseScheme: String
    public let mode: Mode
    let passwordIterations: Int
    /// Failed password checks, shared with the database API (`CouchAPI.Options.loginThrottle`).
    let throttle: LoginThrottle
    let logger: Logger
    /// Places near a position, their editing, import and corrections.
    public let places: PlaceCatalog
    /// Locations read back: exports, statistics, the dashboard's tracks, map grid and photos.
    public let reports: LocationReports

    /// - Parameters:
    ///   - passwordIterations: PBKDF2-SHA256 iterations for users' passwords.
    ///   - mode: a database per user (default) or one shared database.
    ///   - geo: where geo queries go, when not to `couch` (cluster mode: this server's mirrors).
    ///   - databaseLocation: the database devices replicate with, when not this server.
    ///   - ownDatabaseScheme: this server's database API's scheme, when devices replicate with it.
    ///   - throttle: failed logins, shared with the database API when both run in one process.
    public init(
        couch: any CouchClient, geo: (any CouchClient)? = nil,
        databaseLocation: (@Sendable () -> (host: String, scheme: String))? = nil,
        ownDatabaseScheme: String = "http", mode: Mode = .databasePerUser,
        passwordIterations: Int = Passwords.defaultIterations, throttle: LoginThrottle = LoginThrottle(),
        logger: Logger = Logger(label: "lt.app")
    ) {
        self.throttle = throttle
        self.databaseLocation = databaseLocation
        self.ownDatabaseScheme = ownDatabaseScheme
        self.couch = couch
        self.geo = geo ?? couch
        separateGeo = geo != nil
        self.mode = mode
        self.passwordIterations = passwordIterations
        self.logger = logger
        places = PlaceCatalog(couch: couch, geo: geo ?? couch, logger: logger)
        reports = LocationReports(couch: couch, geo: geo ?? couch, separateGeo: geo != nil, mode: mode, logger: logger)
    }

    /// The private database of a user (database-per-user mode).
    public static func locationDB(for username: String) -> String { "lt_locations_user_" + username }

    /// The database a user's device replicates with in this mode.
    public func locationDatabase(for username: String) -> String {
        mode == .singleDatabase ? TrackerService.sharedLocationsDB : TrackerService.locationDB(for: username)
    }

    /// The database holding everyone's locations, which analysts read.
    public var analysisDatabase: String {
        mode == .singleDatabase ? TrackerService.sharedLocationsDB : TrackerService.allLocationsDB
    }

    /// The role that reads and writes a user's database; each of the user's API keys has it.
    static func ownerRole(_ username: String) -> String { "lt_owner_" + username }

    /// Where a user's documents are kept in a database everyone's share (`lt_locations_all`,
    /// and the shared database of single-database mode): under `<user>:`, so no user's id can
    /// name another's document.
    static func namespace(of user: String) throws -> OwnerNamespace {
        guard let namespace = OwnerNamespace(owner: user) else {
            throw Failure(400, "bad_request", "\(user) cannot own documents: not a username")
        }
        return namespace
    }

    // MARK: Setup

    /// Creates the application's databases on first start, as the original `admin.js` did:
    /// `lt_users` (admins only), `lt_places` seeded with `places` (under their ids, each given
    /// `created_at`, which the original client needs), `lt_locations_all` (admins and the `analyst` role),
    /// and the `_design/points` geo index where locations and places live.
    public func prepare(places: [JSON]) async throws {
        // Consolidation follows `_db_updates`, which Apache CouchDB answers (404 otherwise) only
        // when its `_global_changes` database exists: a node set up without `_cluster_setup`
        // has none. Created here, as that setup would.
        if try await couch.request(.get, "/_db_updates", query: ["limit": "1"], body: nil).status == 404,
            try await createDatabase("_global_changes")
        {
            logger.notice("created _global_changes on the cluster: CouchDB's _db_updates needs it")
        }
        _ = try await createDatabase(TrackerService.usersDB)
        if try await createDatabase(TrackerService.placesDB) {
            // Under the places' own ids, so importing the same file later changes nothing.
            let seeded = try await self.places.importPlaces(places, announce: false)
            logger.info("created \(TrackerService.placesDB) with \(seeded.created) places")
        }
        try await ensureDesign(TrackerService.placesDB)
        // Everyone's locations: members (analysts) read them; in single-database mode users
        // reach their own documents there as owners, which the database server enforces.
        let all = analysisDatabase
        _ = try await createDatabase(all)
        try await expect(
            couch.request(
                .put, "/\(all)/_security",
                body: [
                    "admins": ["names": [], "roles": ["_admin"]],
                    "members": ["names": [], "roles": ["_admin", "analyst"]],
                ]), "secure \(all)")
        try await ensureDesign(all)
        // Members read; only admins (the server's own consolidation and deletions) write.
        let readOnly = try await couch.request(.put, "/\(all)/_design/read-only", body: TrackerService.readOnlyDesign)
        guard readOnly.ok || readOnly.status == 409 else {
            throw failure(readOnly, "protect \(all) from writes by its readers")
        }
        try await self.places.prepareCorrections()
        if separateGeo { try await preparePurgeNotices() }
        if mode == .databasePerUser { try await upgradeConsolidatedCopies() }
    }

    /// Writes `pointsDesign` into `db`, or brings an older one (written by an earlier version)
    /// up to date.
    func ensureDesign(_ db: String) async throws {
        let path = "/\(db)/_design/points"
        let reply = try await couch.request(.put, path, body: TrackerService.pointsDesign)
        guard reply.status == 409 else {
            guard reply.ok else { throw failure(reply, "write the geo index of \(db)") }
            return
        }
        let current = try expect(try await couch.request(.get, path), "read the geo index of \(db)").json
        guard current["st_indexes"] != TrackerService.pointsDesign["st_indexes"], let rev = current["_rev"] else {
            return
        }
        var updated = TrackerService.pointsDesign.objectValue!
        updated["_rev"] = rev
        let written = try await couch.request(.put, path, body: .object(updated))
        guard written.ok || written.status == 409 else { throw failure(written, "update the geo index of \(db)") }
    }

    // MARK: Users

    /// Whether a user name can name a database (`lt_locations_user_<name>`) and a CouchDB user.
    static func validate(username: String) throws {
        let bytes = Array(username.utf8)
        guard let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), bytes.count <= 64,
            bytes.allSatisfy({
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            })
        else {
            throw Failure(
                400, "bad_request",
                "A username is 1 to 64 lowercase letters, digits, _ or -, starting with a letter (it names the user's database)"
            )
        }
    }

    /// `PUT /api/users/:id`: creates the user's private database (with the geo index, readable
    /// and writable only by the user's API keys) and the user, whose password is stored only
    /// as a PBKDF2-SHA256 hash.
    public func register(username: String, password: JSON?) async throws -> JSON {
        try TrackerService.validate(username: username)
        guard case let .string(password)? = password, !password.isEmpty else {
            throw Failure(400, "bad_request", "A non-empty `password` string is required")
        }
        let existing = try await couch.request(.get, "/\(TrackerService.usersDB)/\(username)")
        if existing.ok { throw Failure(409, "User already exists") }
        try await requireFree(username)
        try await requireNoKeptCopies(username)
        let db = locationDatabase(for: username)
        let hash = try await Passwords.hash(password, iterations: passwordIterations)
        // The user's database and the user document are written at the same time; the
        // database's access rules and geo index together, so they share one commit.
        async let prepared: Void = mode == .databasePerUser ? prepareUserDatabase(db, username) : ()
        async let userWrite = couch.request(
            .put, "/\(TrackerService.usersDB)/\(username)",
            body: [
                "type": "user", "username": .string(username), "location_db": .string(db),
                "password_scheme": "pbkdf2", "pbkdf2_prf": .string(hash.prf), "iterations": .int(hash.iterations),
                "salt": .string(hash.salt), "derived_key": .string(hash.derivedKey),
                "created_at": JSON.millisecondsNow(),
            ])
        let saved = try await userWrite
        do {
            try await prepared
        } catch {
            if saved.ok, let rev = saved.json["rev"]?.stringValue {
                _ = try? await couch.request(
                    .delete, "/\(TrackerService.usersDB)/\(username)", query: ["rev": rev], body: nil)
            }
            throw error
        }
        if saved.status == 409 { throw Failure(409, "User already exists") }
        try expect(saved, "save user \(username)")
        logger.info("registered \(username)")
        return ["ok": true, "id": .string(username)]
    }

    /// Names no tracker user may take: the form of API keys' names, the usual names of
    /// administrators, and (checked in `requireFree`) the database server's admins and
    /// analysts, who sign in to the dashboard by name too: one name, one person there and in
    /// the logs. (A plain `_users` account of the same name — a replicating client — is
    /// another kind of identity, and does not hold the name.)
    static let reservedNames: Set<String> = [
        "admin", "administrator", "root", "system", "analyst", "anonymous", "lt", "couchdb", "nobody",
    ]

    /// 409 unless `username` is free for a tracker user: not reserved, not an API key's form,
    /// not a server admin's, not a database user's with the admin or analyst role.
    func requireFree(_ username: String) async throws {
        if TrackerService.reservedNames.contains(username) || username.hasPrefix("key-") {
            throw Failure(409, "conflict", "The name \(username) is reserved; choose another")
        }
        let admin = try await couch.request(.get, "/_node/_local/_config/admins/" + CouchURL.encode(username))
        let account = try await couch.request(.get, "/_users/org.couchdb.user:" + CouchURL.encode(username))
        let roles = Set((account.ok ? account.json["roles"]?.arrayValue ?? [] : []).compactMap(\.stringValue))
        if admin.ok || !roles.isDisjoint(with: ["_admin", "analyst"]) {
            throw Failure(
                409, "conflict",
                "The name \(username) belongs to an admin or analyst of the database server; choose another")
        }
    }

    /// Refuses a name whose earlier holder was deleted with their locations kept for analysts
    /// (`lt_locations_all` still holds copies under `<name>:`): a new user of that name would
    /// write into those copies' namespace, and could replace or delete them.
    func requireNoKeptCopies(_ username: String) async throws {
        guard mode == .databasePerUser else { return }
        let namespace = try TrackerService.namespace(of: username)
        let kept = try await couch.request(
            .get, "/\(TrackerService.allLocationsDB)/_all_docs",
            query: [
                "startkey": JSON.string(namespace.prefix).text, "endkey": JSON.string(namespace.upperBound).text,
                "inclusive_end": "false", "limit": "1",
            ], body: nil)
        try expect(kept, "look for kept locations of \(username)")
        if !(kept.json["rows"]?.arrayValue ?? []).isEmpty {
            throw Failure(
                409, "conflict",
                "The name \(username) belonged to a deleted user whose locations are kept for analysis; choose another name, or an admin purges them first (DELETE /api/users/\(username)?locations=purge)"
            )
        }
    }

    /// A new user's private database: created, readable and writable only by the user's
    /// API keys (`_security`), with the geo index.
    func prepareUserDatabase(_ db: String, _ username: String) async throws {
        // One shard: a user's database is small, and on a cluster each shard is n files, a
        // changes feed to merge and internal replication to run (apache/couchdb#851).
        _ = try await createDatabase(db, shards: 1)
        async let secured = couch.request(
            .put, "/\(db)/_security",
            body: [
                "admins": ["names": [], "roles": ["_admin"]],
                "members": ["names": [], "roles": [.string(TrackerService.ownerRole(username))]],
            ])
        async let designed: Void = ensureDesign(db)
        try expect(try await secured, "secure \(db)")
        try await designed
    }

    /// `POST /api/login`: checks the password and issues a fresh API key (a random 128-bit
    /// secret) for this device, which can read and write the user's database and nothing
    /// else. Repeated failures per user and per client address are throttled.
    public func login(
        username: String, password: String, client: String, host: String, device: String?
    ) async throws -> JSON {
        try throttle.check(account: username, client: client)
        let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/\(username)")
        let user = reply.ok ? reply.json : .null
        let stored = Passwords.Hash(stored: user, defaultIterations: passwordIterations)
        // Unknown users cost a full hash too, so they cannot be told apart by timing.
        let valid = await Passwords.verify(password, against: stored) && user != .null
        guard valid else {
            throttle.failed(account: username, client: client)
            throw Failure(401, "unauthorized", "Name or password is incorrect.")
        }
        throttle.succeeded(account: username, client: client)
        let key = "key-" + Hex.random(bytes: 16)
        let secret = Hex.random(bytes: 16)
        // A fast hash is enough for a random 128-bit secret (one PBKDF2 iteration, as CouchDB
        // stores it), so every request with it costs microseconds, not a PBKDF2 run.
        let hash = try await Passwords.hash(secret, iterations: 1)
        var keyDoc: JSONObject = [
            "type": "user", "name": .string(key), "roles": [.string(TrackerService.ownerRole(username))],
            "password_scheme": "pbkdf2", "pbkdf2_prf": .string(hash.prf), "iterations": 1,
            "salt": .string(hash.salt), "derived_key": .string(hash.derivedKey),
            "lt_user": .string(username), "created_at": JSON.millisecondsNow(),
        ]
        if let device { keyDoc["device"] = .string(device) }
        try await expect(
            couch.request(.put, "/_users/org.couchdb.user:\(key)", body: .object(keyDoc)), "create an API key")
        let location = databaseLocation?()
        return [
            "ok": true, "api_key": .string(key), "api_password": .string(secret),
            "location_db_name": .string(locationDatabase(for: username)),
            "location_db_host": .string(location?.host ?? host),
            "location_db_host_protocol": .string(location?.scheme ?? ownDatabaseScheme),
        ]
    }

    /// `PUT /api/me/password`: a new password for `username`, given the current one. API keys
    /// (devices) keep working; dashboard sessions end (the caller ends them).
    public func changePassword(username: String, current: String, new password: String) async throws {
        guard !password.isEmpty else { throw Failure(400, "bad_request", "The new password must not be empty") }
        let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/\(username)")
        guard reply.ok, case var .object(user) = reply.json else {
            throw Failure(404, "not_found", "No user \(username)")
        }
        guard
            await Passwords.verify(
                current, against: Passwords.Hash(stored: reply.json, defaultIterations: passwordIterations))
        else {
            throw Failure(401, "unauthorized", "The current password is not right")
        }
        let hash = try await Passwords.hash(password, iterations: passwordIterations)
        user["pbkdf2_prf"] = .string(hash.prf)
        user["iterations"] = .int(hash.iterations)
        user["salt"] = .string(hash.salt)
        user["derived_key"] = .string(hash.derivedKey)
        user["password_changed_at"] = JSON.millisecondsNow()
        let saved = try await couch.request(.put, "/\(TrackerService.usersDB)/\(username)", body: .object(user))
        if saved.status == 409 { throw Failure(409, "conflict", "The account changed meanwhile; try again") }
        try expect(saved, "save the new password of \(username)")
        logger.info("\(username) changed their password")
    }

    /// `GET /api/keys`: the user's API keys (one per login, usually one per device), never their secrets.
    public func apiKeys(of username: String) async throws -> JSON {
        let reply = try await couch.request(
            .post, "/_users/_find",
            body: [
                "selector": ["lt_user": .string(username)], "fields": ["name", "device", "created_at"],
                "limit": 100_000,
            ])
        try expect(reply, "list the API keys of \(username)")
        let keys = (reply.json["docs"]?.arrayValue ?? []).map { doc -> JSON in
            [
                "api_key": doc["name"] ?? .null, "device": doc["device"] ?? .null,
                "created_at": doc["created_at"] ?? .null,
            ]
        }.sorted { ($0["created_at"]?.doubleValue ?? 0) < ($1["created_at"]?.doubleValue ?? 0) }
        return ["keys": .array(keys)]
    }

    /// `DELETE /api/keys/:key`: revokes one of the user's API keys (a lost device); it stops
    /// opening the database at once.
    public func revokeKey(_ key: String, of username: String) async throws -> JSON {
        let path = "/_users/org.couchdb.user:\(CouchURL.encode(key))"
        let reply = try await couch.request(.get, path)
        // Another user's key is as unknown as a key that never was.
        guard key.hasPrefix("key-"), reply.ok, reply.json["lt_user"]?.stringValue == username,
            let rev = reply.json["_rev"]?.stringValue
        else {
            throw Failure(404, "not_found", "No API key \(key) of \(username)")
        }
        try await expect(couch.request(.delete, path, query: ["rev": rev], body: nil), "revoke an API key")
        logger.info("revoked API key \(key) of \(username)")
        return ["ok": true, "api_key": .string(key)]
    }

    /// `DELETE /api/users/:id`: removes the user's database, their API keys and the user. The
    /// caller proves who they are with the user's password (or is an admin, `asAdmin`).
    public func deleteUser(
        username: String, password: String?, asAdmin: Bool, purgeLocations: Bool = false
    ) async throws -> JSON {
        try TrackerService.validate(username: username)
        let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/\(username)")
        guard reply.ok else {
            // A user deleted earlier with their locations kept: an admin may still purge those.
            if asAdmin, purgeLocations, mode == .databasePerUser,
                case let purged = try await purgeConsolidated(username), purged > 0
            {
                logger.info("purged \(purged) kept locations of the deleted user \(username)")
                return ["ok": true, "id": .string(username), "purged_locations": .int(purged)]
            }
            throw Failure(404, "not_found", "No user \(username)")
        }
        let user = reply.json
        if !asAdmin {
            let stored = Passwords.Hash(stored: user, defaultIterations: passwordIterations)
            guard let password, await Passwords.verify(password, against: stored) else {
                throw Failure(401, "unauthorized", "Deleting a user needs that user's password or an admin")
            }
        }
        // API keys first, so nothing can write to the database while it goes.
        let keys = try await couch.request(
            .post, "/_users/_find",
            body: [
                "selector": ["lt_user": .string(username)], "fields": ["_id", "_rev"], "limit": 100_000,
            ])
        try expect(keys, "list the API keys of \(username)")
        let deletions: [JSON] = (keys.json["docs"]?.arrayValue ?? []).map {
            ["_id": $0["_id"] ?? .null, "_rev": $0["_rev"] ?? .null, "_deleted": true]
        }
        if !deletions.isEmpty {
            try await expect(
                couch.request(.post, "/_users/_bulk_docs", body: ["docs": .array(deletions)]), "revoke API keys")
        }
        var purged = 0
        switch mode {
        case .databasePerUser:
            if purgeLocations { purged = try await purgeConsolidated(username) }
            let dropped = try await couch.request(.delete, "/\(TrackerService.locationDB(for: username))")
            guard dropped.ok || dropped.status == 404 else {
                throw failure(dropped, "delete the database of \(username)")
            }
            // A user registered again later under this name starts consolidating from scratch.
            let checkpointPath =
                "/\(TrackerService.allLocationsDB)/_local/consolidated-\(TrackerService.locationDB(for: username))"
            let checkpoint = try await couch.request(.get, checkpointPath)
            if checkpoint.ok, let rev = checkpoint.json["_rev"]?.stringValue {
                _ = try await couch.request(.delete, checkpointPath, query: ["rev": rev], body: nil)
            }
        case .singleDatabase:
            // The user's part of the shared database is their database: it goes entirely.
            purged = try await purgeOwned(username)
        }
        try await expect(
            couch.request(
                .delete, "/\(TrackerService.usersDB)/\(username)", query: ["rev": user["_rev"]?.stringValue ?? ""],
                body: nil),
            "delete user \(username)")
        logger.info("deleted user \(username), \(deletions.count) API keys and \(purged) consolidated locations")
        var answer: JSONObject = ["ok": true, "id": .string(username)]
        if purgeLocations || mode == .singleDatabase { answer["purged_locations"] = .int(purged) }
        return .object(answer)
    }

    /// Purges (leaves no tombstone) the user's copies from `lt_locations_all`: the documents
    /// under their namespace (`<user>:`), page by page, and nothing else — whatever ids their
    /// own database holds.
    func purgeConsolidated(_ username: String) async throws -> Int {
        let namespace = try TrackerService.namespace(of: username)
        return try await purgeRange(TrackerService.allLocationsDB, (namespace.prefix, namespace.upperBound))
    }

    /// Purges every document of `db` whose id is in `range` (start included, end not), a page
    /// at a time: each time the range's first page again, since what was purged is gone.
    /// How many there were.
    func purgeRange(_ db: String, _ range: (start: String, end: String)) async throws -> Int {
        var purged = 0
        while true {
            let reply = try await couch.request(
                .get, "/\(db)/_all_docs",
                query: [
                    "startkey": JSON.string(range.start).text, "endkey": JSON.string(range.end).text,
                    "inclusive_end": "false", "limit": "1000",
                ], body: nil)
            if reply.status == 404 { return purged }
            try expect(reply, "read \(db)")
            let ids = (reply.json["rows"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
            guard !ids.isEmpty else { return purged }
            let done = try await purgeEverywhere(ids, from: db)
            purged += done
            // Nothing of the page could go: reading it again would find the same.
            guard done > 0 else { return purged }
        }
    }

    /// Purges a user's documents from the shared database (single-database mode), and
    /// deletes their `_local` documents (replication checkpoints).
    func purgeOwned(_ username: String) async throws -> Int {
        let db = TrackerService.sharedLocationsDB
        let namespace = try TrackerService.namespace(of: username)
        let purged = try await purgeRange(db, (namespace.prefix, namespace.upperBound))
        let locals = try await couch.request(
            .get, "/\(db)/_local_docs",
            query: [
                "startkey": JSON.string(namespace.stored("_local/")).text,
                "endkey": JSON.string("_local/" + namespace.upperBound).text,
            ], body: nil)
        for row in locals.json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"]?.stringValue else { continue }
            _ = try await couch.request(
                .delete, "/\(db)/_local/\(CouchURL.encode(String(id.dropFirst(7))))", query: ["rev": rev], body: nil)
        }
        return purged
    }

    /// Purges every leaf revision (tombstones too) of the documents `ids` from `db` on
    /// `client` (the application's database unless given), reading their revisions 500 at a
    /// time; how many were there.
    func purge(_ ids: [String], from db: String, on client: (any CouchClient)? = nil) async throws -> Int {
        let client = client ?? couch
        var request: JSONObject = [:]
        for start in stride(from: 0, to: ids.count, by: 500) {
            let keys = ids[start..<min(start + 500, ids.count)].map(JSON.string)
            let reply = try await client.request(
                .post, "/\(db)/_all_docs",
                query: ["include_docs": "true", "conflicts": "true", "deleted_conflicts": "true"],
                body: ["keys": .array(keys)])
            try expect(reply, "read the revisions to purge from \(db)")
            for row in reply.json["rows"]?.arrayValue ?? [] {
                guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"] else { continue }
                let others =
                    (row["doc"]?["_conflicts"]?.arrayValue ?? [])
                    + (row["doc"]?["_deleted_conflicts"]?.arrayValue ?? [])
                request[id] = .array([rev] + others)
            }
        }
        guard !request.isEmpty else { return 0 }
        try await expect(client.request(.post, "/\(db)/_purge", body: .object(request)), "purge locations")
        return request.count
    }

    /// Purges `ids` from `db` and, in cluster mode, records the purge in `lt_purges` so that
    /// every instance purges them from its own copy of `db` too (purges do not replicate).
    func purgeEverywhere(_ ids: [String], from db: String) async throws -> Int {
        let purged = try await purge(ids, from: db)
        if separateGeo, purged > 0 { try await recordPurge(ids, from: db) }
        return purged
    }

    // MARK: Account state

    /// Which kind of account a name is, where its state is kept.
    public enum AccountKind: Sendable {
        /// A tracker user: `lt_users`.
        case trackerUser
        /// An API key: a `_users` document of the key's user.
        case apiKey
        /// An admin or analyst: a database server admin, or a `_users` document.
        case databaseUser
    }

    /// A digest of an account's state now — its stored password hash and roles — to tell
    /// whether it changed since a session or feed began; nil when it no longer exists. A
    /// changed password, a removed role, a revoked key or a deleted account all change it.
    public func accountState(name: String, kind: AccountKind) async throws -> String? {
        func stored(_ doc: JSON, _ fields: [String]) -> [String] { fields.map { doc[$0]?.text ?? "-" } }
        var parts: [String]
        switch kind {
        case .trackerUser:
            guard (try? TrackerService.validate(username: name)) != nil else { return nil }
            let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/\(name)")
            guard reply.ok else { return nil }
            parts = ["user"] + stored(reply.json, ["derived_key", "salt", "iterations", "pbkdf2_prf"])
        case .apiKey, .databaseUser:
            if kind == .databaseUser {
                let admin = try await couch.request(.get, "/_node/_local/_config/admins/" + CouchURL.encode(name))
                if admin.ok, let hash = admin.json.stringValue { return TrackerService.digest(["admin", name, hash]) }
            }
            let reply = try await couch.request(.get, "/_users/org.couchdb.user:" + CouchURL.encode(name))
            guard reply.ok, reply.json["_deleted"] != true else { return nil }
            parts =
                ["_users"]
                + stored(
                    reply.json, ["derived_key", "salt", "password_sha", "iterations", "pbkdf2_prf", "roles", "lt_user"])
        }
        return TrackerService.digest([name] + parts)
    }

    static func digest(_ parts: [String]) -> String {
        Hex.string(Array(SHA256.hash(data: Array(parts.joined(separator: "\u{0}").utf8))))
    }

    // MARK: OwnTracks

    /// Who a basic-auth pair is: an API key of a user (`key-…` and its secret, checked with
    /// its one-iteration hash) or a user's own name and password. nil when neither matches.
    public func authenticate(name: String, secret: String) async throws -> String? {
        if name.hasPrefix("key-") {
            let reply = try await couch.request(.get, "/_users/org.couchdb.user:\(name)")
            guard reply.ok, let user = reply.json["lt_user"]?.stringValue else { return nil }
            return await Passwords.verify(secret, against: Passwords.Hash(stored: reply.json, defaultIterations: 1))
                ? user : nil
        }
        guard (try? TrackerService.validate(username: name)) != nil else { return nil }
        let reply = try await couch.request(.get, "/\(TrackerService.usersDB)/\(name)")
        guard reply.ok else { return nil }
        return await Passwords.verify(
            secret, against: Passwords.Hash(stored: reply.json, defaultIterations: passwordIterations)) ? name : nil
    }

    /// `POST /api/owntracks`: an OwnTracks app's HTTP-mode message. A `location` becomes a
    /// location document (GeoJSON Feature, as the original app writes them) in the user's
    /// database, with an id made of device and fix time, so a message posted twice is stored
    /// once; other message types are accepted and ignored. Answers `[]` (no friends' positions).
    public func ownTracks(user: String, device: String, message: JSONObject) async throws -> JSON {
        guard message["_type"]?.stringValue == "location" else { return [] }
        guard let lat = message["lat"]?.doubleValue, let lon = message["lon"]?.doubleValue,
            let tst = message["tst"]?.doubleValue
        else {
            throw Failure(400, "bad_request", "A location needs numbers `lat`, `lon` and `tst`")
        }
        guard lat.isFinite, lon.isFinite, (-90...90).contains(lat), (-180...180).contains(lon) else {
            throw Failure(400, "bad_request", "`lat` must be within [-90, 90] and `lon` within [-180, 180]")
        }
        // Seconds since 1970, before the year 5000: it names the document (`Int(tst)`), which
        // a larger number would trap on.
        guard tst.isFinite, (0..<1e11).contains(tst) else {
            throw Failure(400, "bad_request", "`tst` must be seconds since 1970 (0 to 99999999999)")
        }
        let deviceID = device.isEmpty ? "default" : device
        let id = "owntracks-\(deviceID)-\(Int(tst))"
        var properties: JSONObject = [
            "username": .string(user), "timestamp": .double(tst * 1000), "background": true,
            "device": .string(deviceID), "source": "owntracks",
        ]
        // Numbers in the units location documents hold (OwnTracks' `vel` is km/h, a document's
        // `velocity` m/s, as devices and imports store it); a value of the wrong kind is left out.
        let numbers: [(String, String)] = [
            ("acc", "accuracy"), ("alt", "altitude"), ("cog", "course"), ("batt", "battery"),
            ("vac", "vertical_accuracy"),
        ]
        for (from, to) in numbers {
            if let value = message[from], value.doubleValue?.isFinite == true { properties[to] = value }
        }
        if let kmh = message["vel"]?.doubleValue, kmh.isFinite { properties["velocity"] = .double(kmh / 3.6) }
        for (from, to) in [("t", "trigger"), ("tid", "tracker_id"), ("conn", "connection")] {
            if let value = message[from], value.stringValue != nil { properties[to] = value }
        }
        let doc: JSON = [
            "type": "Feature", "created_at": JSON.milliseconds((tst * 1000).rounded()),
            "geometry": ["type": "Point", "coordinates": [.double(lon), .double(lat)]],
            "properties": .object(properties),
        ]
        let stored = mode == .singleDatabase ? try TrackerService.namespace(of: user).stored(id) : id
        let reply = try await couch.request(
            .put, "/\(locationDatabase(for: user))/\(CouchURL.encode(stored))", body: doc)
        guard reply.ok || reply.status == 409 else { throw failure(reply, "store an OwnTracks location") }
        return []
    }

}
