import CouchJSON
import HistoryImport

/// The application API as an OpenAPI 3.1 document, served at `/api/openapi.json`.
enum OpenAPI {
    /// A time: ms since 1970, or an ISO 8601 date or date and time.
    static let time: JSON = [
        "type": "string",
        "pattern":
            "^([0-9]{1,15}(\\.[0-9]+)?|[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?)$",
    ]
    /// `minLon,minLat,maxLon,maxLat`.
    static let bbox: JSON = ["type": "string", "pattern": "^-?[0-9]{1,3}(\\.[0-9]+)?(,-?[0-9]{1,3}(\\.[0-9]+)?){3}$"]

    static func query(_ name: String, _ schema: JSON, _ description: String? = nil) -> JSON {
        var parameter: JSONObject = ["name": .string(name), "in": "query", "schema": schema]
        if let description { parameter["description"] = .string(description) }
        return .object(parameter)
    }

    static func error(_ description: String) -> JSON {
        [
            "description": .string(description),
            "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]],
        ]
    }

    /// An import's query parameters.
    static let importParameters: [JSON] = [
        query(
            "format",
            ["type": "string", "enum": .array(HistoryFormat.allCases.map { .string($0.rawValue) })],
            "The file's format (default: recognised by content)"),
        query("dry_run", ["type": "boolean"], "Read and count; store nothing"),
        query("name", ["type": "string"], "The file's name, for the list of imports"),
        query("lat_column", ["type": "string"], "CSV: the latitude column's header"),
        query("lon_column", ["type": "string"], "CSV: the longitude column's header"),
        query("time_column", ["type": "string"], "CSV: the time column's header"),
    ]

    /// An import's summary (`ImportJob.json`).
    static let importJob: JSON = [
        "application/json": [
            "schema": [
                "type": "object", "required": ["id", "state", "bytes_read", "written", "duplicates", "skipped"],
                "properties": [
                    "id": ["type": "string"],
                    "state": ["type": "string", "enum": ["running", "done", "failed", "cancelled"]],
                    "format": ["type": ["string", "null"]], "file_name": ["type": "string"],
                    "dry_run": ["type": "boolean"],
                    "bytes_read": ["type": "integer"], "written": ["type": "integer"],
                    "duplicates": ["type": "integer"],
                    "skipped": ["type": "object", "additionalProperties": ["type": "integer"]],
                    "error": ["type": "string"], "started_at": ["type": "string"], "finished_at": ["type": "string"],
                    "seconds": ["type": "number"],
                    "entries": [
                        "description": "A ZIP archive's entries that held location histories",
                        "type": "array",
                        "items": [
                            "type": "object", "required": ["name", "format", "locations"],
                            "properties": [
                                "name": ["type": "string"], "format": ["type": "string"],
                                "locations": ["type": "integer"], "error": ["type": "string"],
                            ],
                        ],
                    ],
                ],
            ]
        ]
    ]

    /// The document as served: the operations below, each completed with the answers every
    /// operation of its kind can give (`completed`).
    static let document: JSON = completed(described)

    /// Adds to every operation the statuses the server gives for any request of its kind, so
    /// that clients (and schemathesis) find every answer documented: 400 for a request with
    /// parameters or a body, 413 for a body over the limit, and for operations that take
    /// credentials 401 (none or wrong) and 429 (too many failed logins from this client).
    static func completed(_ document: JSON) -> JSON {
        guard var root = document.objectValue, var paths = root["paths"]?.objectValue else { return document }
        for (path, item) in paths.members {
            guard var operations = item.objectValue else { continue }
            for (method, operation) in operations.members {
                guard var operation = operation.objectValue, var responses = operation["responses"]?.objectValue else {
                    continue
                }
                func add(_ status: String, _ description: String) {
                    if responses[status] == nil { responses[status] = error(description) }
                }
                if operation["parameters"] != nil || operation["requestBody"] != nil {
                    add("400", "Invalid parameters or body")
                }
                if operation["requestBody"] != nil { add("413", "The body is larger than the limit (too_large)") }
                if operation["security"] != nil {
                    add("401", "No or wrong credentials")
                    add("429", "Too many failed logins from this client; try again after the wait it names")
                }
                operation["responses"] = .object(responses)
                operations[method] = .object(operation)
            }
            paths[path] = .object(operations)
        }
        root["paths"] = .object(paths)
        return .object(root)
    }

    /// The methods the document lists for a request path (`/api/places/p1` matches
    /// `/api/places/{id}`); nil when no path of the API matches.
    static func methods(for path: [String]) -> [String]? {
        guard let paths = document["paths"]?.objectValue else { return nil }
        for (template, item) in paths.members {
            let parts = template.split(separator: "/").map(String.init)
            guard parts.count == path.count, zip(parts, path).allSatisfy({ $0.hasPrefix("{") || $0 == $1 }) else {
                continue
            }
            // A literal path (`/api/places/version`) wins over a template that also matches it.
            if parts.contains(where: { $0.hasPrefix("{") }),
                let literal = paths.members.first(where: { $0.key.split(separator: "/").map(String.init) == path })
            {
                return literal.value.objectValue?.keys.map { $0.uppercased() }
            }
            return item.objectValue?.keys.map { $0.uppercased() }
        }
        return nil
    }

    static let described: JSON = [
        "openapi": "3.1.0",
        "info": [
            "title": "LocationTracker application API",
            "version": "1.0.0",
            "description":
                "The original Location Tracker server's API (registration, login, places) plus user deletion and OwnTracks ingestion. Locations themselves are written to the user's database on the CouchDB-compatible database port with the credentials a login returns.",
        ],
        "paths": [
            "/api/users/{id}": [
                "put": [
                    "summary": "Register a user: creates their private database lt_locations_user_{id}",
                    "parameters": [
                        [
                            "name": "id", "in": "path", "required": true,
                            "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                        ]
                    ],
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object", "required": ["password"],
                                    "properties": [
                                        "username": ["type": "string"], "password": ["type": "string", "minLength": 1],
                                        "type": ["type": "string"], "_id": ["type": "string"],
                                    ],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "201": [
                            "description": "Registered",
                            "content": [
                                "application/json": [
                                    "schema": [
                                        "type": "object",
                                        "properties": ["ok": ["type": "boolean"], "id": ["type": "string"]],
                                    ]
                                ]
                            ],
                        ],
                        "400": error("Invalid username or missing password"),
                        "403": error(
                            "Registration is closed: only admins register users (--max-registrations-per-hour 0)"),
                        "409": error(
                            "User already exists, or the name is reserved, an admin's or analyst's, or a deleted user's whose locations are kept"
                        ),
                        "429": error("Too many registrations from this address (Retry-After says when to try again)"),
                    ],
                ],
                "delete": [
                    "summary":
                        "Delete a user, their database and API keys (basic auth as the user, or as a server admin). With locations=purge their copies in lt_locations_all are purged too (only theirs); an admin may also purge the copies kept of a user deleted earlier",
                    "security": [["basic": []]],
                    "parameters": [
                        [
                            "name": "id", "in": "path", "required": true,
                            "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                        ],
                        ["name": "locations", "in": "query", "schema": ["type": "string", "enum": ["purge"]]],
                    ],
                    "responses": [
                        "200": ["description": "Deleted"], "400": error("Not a username"),
                        "401": error("Not the user's password"), "404": error("No such user"),
                        "429": error("Too many failed attempts"),
                    ],
                ],
            ],
            "/api/keys": [
                "get": [
                    "summary":
                        "The caller's API keys (one per login or device), without secrets (basic auth: an API key of the user or their own name and password)",
                    "security": [["basic": []]],
                    "responses": [
                        "200": [
                            "description": "API keys",
                            "content": [
                                "application/json": [
                                    "schema": [
                                        "type": "object",
                                        "properties": [
                                            "keys": [
                                                "type": "array",
                                                "items": [
                                                    "type": "object",
                                                    "properties": [
                                                        "api_key": ["type": "string"],
                                                        "device": ["type": ["string", "null"]],
                                                        "created_at": ["type": "number"],
                                                    ],
                                                ],
                                            ]
                                        ],
                                    ]
                                ]
                            ],
                        ],
                        "401": error("Not authenticated"),
                    ],
                ]
            ],
            "/api/keys/{key}": [
                "delete": [
                    "summary": "Revoke one of the caller's API keys (a lost device); it stops working at once",
                    "security": [["basic": []]],
                    "parameters": [["name": "key", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": [
                        "200": ["description": "Revoked"], "401": error("Not authenticated"),
                        "404": error("No such key of the caller"),
                    ],
                ]
            ],
            "/api/status": [
                "get": [
                    "summary":
                        "The server's mode and consolidation: databases still to look at or waiting to be retried, databases that cannot be read, locations lt_locations_all refused (server admins)",
                    "security": [["basic": []]],
                    "responses": [
                        "200": [
                            "description": "Status",
                            "content": [
                                "application/json": [
                                    "schema": [
                                        "type": "object",
                                        "properties": [
                                            "mode": ["type": "string"], "consolidation": ["type": ["object", "null"]],
                                        ],
                                    ]
                                ]
                            ],
                        ],
                        "401": error("Not authenticated"), "403": error("Not a server admin"),
                        "429": error("Too many failed logins from this client"),
                    ],
                ]
            ],
            "/api/login": [
                "post": [
                    "summary": "Log in: issues a fresh API key (per device) for the user's database",
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object", "required": ["username", "password"],
                                    "properties": [
                                        "username": ["type": "string"], "password": ["type": "string"],
                                        "device": ["type": "string"],
                                    ],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "200": [
                            "description": "Credentials for the user's database",
                            "content": [
                                "application/json": [
                                    "schema": [
                                        "type": "object",
                                        "properties": [
                                            "ok": ["type": "boolean"], "api_key": ["type": "string"],
                                            "api_password": ["type": "string"],
                                            "location_db_name": ["type": "string"],
                                            "location_db_host": ["type": "string"],
                                            "location_db_host_protocol": ["type": "string"],
                                        ],
                                    ]
                                ]
                            ],
                        ],
                        "401": error("Name or password is incorrect"),
                        "429": error("Too many failed logins for this user or client"),
                    ],
                ]
            ],
            "/api/places": [
                "get": [
                    "summary":
                        "Places near a position: the _geo query on lt_places/_design/points/_geo/pointidx, with Cloudant Geo's parameters",
                    "parameters": [
                        query(
                            "lat", ["type": "number", "minimum": -90, "maximum": 90],
                            "latitude of the centre (with lon)"),
                        query(
                            "lon", ["type": "number", "minimum": -180, "maximum": 180],
                            "longitude of the centre (with lat)"),
                        query("radius", ["type": "number", "minimum": 0], "metres: a circle around lat/lon"),
                        query(
                            "rangex", ["type": "number", "minimum": 0], "metres east-west: an ellipse (with rangey)"),
                        query(
                            "rangey", ["type": "number", "minimum": 0], "metres north-south: an ellipse (with rangex)"),
                        query("bbox", bbox, "minLon,minLat,maxLon,maxLat"),
                        query("g", ["type": "string"], "a WKT geometry"),
                        query(
                            "relation",
                            [
                                "type": "string",
                                "enum": [
                                    "intersects", "contains", "within", "covers", "covered_by", "disjoint",
                                    "overlaps", "crosses", "touches", "contains_properly",
                                ],
                            ]),
                        query("nearest", ["type": "boolean"]),
                        query("limit", ["type": "integer", "minimum": 0, "maximum": 200, "default": 25]),
                        query("skip", ["type": "integer", "minimum": 0, "maximum": .int(ClientCount.largest)]),
                        query("bookmark", ["type": "string"]),
                        query("include_docs", ["type": "boolean"]),
                        query("format", ["type": "string", "enum": ["view", "geojson", "legacy"]]),
                        query("stale", ["type": "string", "enum": ["ok", "update_after", "false"]]),
                    ],
                    "responses": [
                        "200": ["description": "Rows (format=view), or a GeoJSON FeatureCollection"],
                        "400": error(
                            "Invalid query: exactly one geometry (lat+lon with radius, rangex+rangey or nothing; bbox; g) is needed"
                        ),
                    ],
                ],
                "post": [
                    "summary": "Add a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "requestBody": [
                        "required": true,
                        "content": ["application/json": ["schema": ["$ref": "#/components/schemas/PlaceInput"]]],
                    ],
                    "responses": [
                        "201": ["description": "{ok, id, rev, dataVersion}"], "400": error("Invalid place"),
                        "403": error("Not an admin"),
                    ],
                ],
            ],
            "/api/places/{id}": [
                "put": [
                    "summary": "Rename or move a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "requestBody": [
                        "required": true,
                        "content": ["application/json": ["schema": ["$ref": "#/components/schemas/PlaceInput"]]],
                    ],
                    "responses": [
                        "200": ["description": "{ok, id, rev, dataVersion}"], "400": error("Invalid place"),
                        "403": error("Not an admin"),
                        "404": error("No such place"), "409": error("Changed meanwhile"),
                    ],
                ],
                "delete": [
                    "summary": "Delete a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": [
                        "200": ["description": "{ok, dataVersion}"], "403": error("Not an admin"),
                        "404": error("No such place"),
                    ],
                ],
            ],
            "/api/session": [
                "post": [
                    "summary":
                        "Sign in to the dashboard (a tracker user, an admin or an analyst): sets the HttpOnly lt_session cookie. Writes authenticated by the cookie must send X-Requested-With: lt-dashboard",
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object", "required": ["username", "password"],
                                    "properties": ["username": ["type": "string"], "password": ["type": "string"]],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "200": [
                            "description": "{ok, name, roles, kind: user|admin|analyst, mode: db-per-user|single-db}"
                        ], "401": error("Name or password is incorrect"),
                        "429": error("Too many failed attempts"),
                    ],
                ],
                "get": [
                    "summary": "Who is signed in ({ok, name: null} when nobody, as CouchDB's _session)",
                    "responses": ["200": ["description": "{ok, name, roles, kind, mode}"]],
                ],
                "delete": ["summary": "Sign out", "responses": ["200": ["description": "{ok}"]]],
            ],
            "/api/me/password": [
                "put": [
                    "summary":
                        "Change one's password, given the current one (devices' API keys keep working; dashboard sessions end)",
                    "security": [["basic": []]],
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object", "required": ["current_password", "new_password"],
                                    "properties": [
                                        "current_password": ["type": "string"],
                                        "new_password": ["type": "string", "minLength": 1],
                                    ],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "200": ["description": "{ok}"], "400": error("Missing or empty password"),
                        "401": error("Bad credentials or current password"),
                        "429": error("Too many failed attempts"),
                    ],
                ]
            ],
            "/api/me/locations": [
                "get": [
                    "summary": "The signed-in user's own newest locations, oldest first",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [
                        [
                            "name": "limit", "in": "query",
                            "schema": ["type": "integer", "default": 100, "minimum": 1, "maximum": 10000],
                        ],
                        ["name": "from", "in": "query", "schema": ["type": "number"], "description": "ms since 1970"],
                        ["name": "to", "in": "query", "schema": ["type": "number"], "description": "ms since 1970"],
                    ],
                    "responses": [
                        "200": ["description": "{locations}"],
                        "400": error("A limit or time that is not a number in range"),
                        "401": error("Not signed in"), "403": error("Not a tracker user"),
                    ],
                ]
            ],
            "/api/me/live": [
                "get": [
                    "summary": "The signed-in user's new locations as server-sent events (event: location)",
                    "security": [["basic": []], ["cookie": []]],
                    "responses": ["200": ["description": "text/event-stream"], "401": error("Not signed in")],
                ]
            ],
            "/api/owntracks": [
                "post": [
                    "summary":
                        "OwnTracks HTTP mode: a location message stored in the user's database (idempotent); answers []",
                    "security": [["basic": []]],
                    "parameters": [
                        ["name": "u", "in": "query", "schema": ["type": "string"]],
                        ["name": "d", "in": "query", "schema": ["type": "string"]],
                        ["name": "X-Limit-U", "in": "header", "schema": ["type": "string"]],
                        ["name": "X-Limit-D", "in": "header", "schema": ["type": "string"]],
                    ],
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object", "required": ["_type"],
                                    "properties": [
                                        "_type": ["type": "string"], "lat": ["type": "number"],
                                        "lon": ["type": "number"], "tst": ["type": "integer"],
                                        "acc": ["type": "number"], "alt": ["type": "number"],
                                        "batt": ["type": "number"], "tid": ["type": "string"],
                                    ],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "200": ["description": "[]"], "400": error("Invalid location"), "401": error("Bad credentials"),
                        "403": error("Credentials of another user"),
                    ],
                ]
            ],
            "/api/me/imports": [
                "post": [
                    "summary":
                        "Import a location history file into your locations (Google Takeout Records.json or Semantic Location History, Android/iOS Timeline exports, OwnTracks JSON or .rec, GPX, GeoJSON, CSV, or a ZIP archive of them such as a Takeout download; recognised by content), streamed; repeat-safe (ids from user, time and position). Answers when the file is read: its summary, whose state says whether it was read to its end (docs/importing.md)",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": .array(importParameters),
                    "requestBody": [
                        "required": true,
                        "content": ["application/octet-stream": ["schema": ["type": "string", "format": "binary"]]],
                    ],
                    "responses": [
                        "200": [
                            "description":
                                "The import's summary: state done, cancelled, or failed with error (not a history file, or one that stops part way; what was written before stays)",
                            "content": importJob,
                        ],
                        "400": error("Invalid parameters"),
                        "401": error("Bad credentials"),
                        "429": error("Two imports of this user are running already, or too many failed logins"),
                    ],
                ],
                "get": [
                    "summary": "Your running and recent imports, newest first, with their progress",
                    "security": [["basic": []], ["cookie": []]],
                    "responses": ["200": ["description": "{imports: [summary]}"], "401": error("Bad credentials")],
                ],
            ],
            "/api/me/imports/{id}": [
                "delete": [
                    "summary": "Stop a running import after its current batch",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": ["202": ["description": "Stopping"], "404": error("No running import by that id")],
                ]
            ],
            "/api/users/{id}/imports": [
                "post": [
                    "summary":
                        "Import a location history file for a user (admins; what lt import uses): as POST /api/me/imports",
                    "security": [["basic": []]],
                    "parameters": .array(
                        [
                            [
                                "name": "id", "in": "path", "required": true,
                                "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                            ]
                        ]
                            + importParameters),
                    "requestBody": [
                        "required": true,
                        "content": ["application/octet-stream": ["schema": ["type": "string", "format": "binary"]]],
                    ],
                    "responses": [
                        "200": ["description": "The import's summary (as POST /api/me/imports)", "content": importJob],
                        "400": error("Invalid parameters"),
                        "401": error("Not an admin"), "404": error("No such user"),
                        "429": error("Two imports of this user are running already, or too many failed logins"),
                    ],
                ],
                "get": [
                    "summary": "A user's running and recent imports (admins)",
                    "security": [["basic": []]],
                    "parameters": [
                        [
                            "name": "id", "in": "path", "required": true,
                            "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                        ]
                    ],
                    "responses": ["200": ["description": "{imports: [summary]}"], "401": error("Not an admin")],
                ],
            ],
            "/api/analysis/locations": [
                "get": [
                    "summary":
                        "Export locations (admins and analysts): one user's or everyone's, by time window and area, ordered by user and then time (GPX: a track per user, a segment per UTC day), streamed",
                    "security": [["basic": []]],
                    "parameters": [
                        query("user", ["type": "string"]),
                        query("from", time, "ms since 1970 or ISO 8601"),
                        query("to", time, "ms since 1970 or ISO 8601"),
                        query("bbox", bbox, "minLon,minLat,maxLon,maxLat"),
                        query("lat", ["type": "number", "minimum": -90, "maximum": 90]),
                        query("lon", ["type": "number", "minimum": -180, "maximum": 180]),
                        query("radius", ["type": "number", "minimum": 0]),
                        query("format", ["type": "string", "enum": ["geojson", "csv", "gpx"]]),
                    ],
                    "responses": [
                        "200": ["description": "GeoJSON FeatureCollection, CSV or GPX (format=geojson|csv|gpx)"],
                        "400": error("Invalid filter or format"), "401": error("No or bad credentials"),
                        "403": error("Not an admin or analyst"), "404": error("No such user"),
                    ],
                ]
            ],
            "/api/analysis/users": [
                "get": [
                    "summary":
                        "The people tracked (admins and analysts), in name order: registration, devices (name and since when), the location written last",
                    "security": [["basic": []]],
                    "parameters": [
                        query("limit", ["type": "integer", "minimum": 1, "maximum": 200]),
                        query(
                            "after", ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                            "continue after this name (the answer's next)"),
                    ],
                    "responses": [
                        "200": [
                            "description":
                                "{users: [{name, registered, devices: [{device, since}], last: {time, lat, lon, accuracy} | null}], next}"
                        ],
                        "400": error("Invalid limit or name"), "401": error("No or bad credentials"),
                        "403": error("Not an admin or analyst"),
                    ],
                ]
            ],
            "/api/analysis/users/{name}/stats": [
                "get": [
                    "summary":
                        "Per-user statistics (admins and analysts): count, first and last fix, distance travelled",
                    "security": [["basic": []]],
                    "parameters": [
                        [
                            "name": "name", "in": "path", "required": true,
                            "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"],
                        ]
                    ],
                    "responses": [
                        "200": ["description": "{user, count, first, last, distance_m}"],
                        "401": error("No or bad credentials"),
                        "403": error("Not an admin or analyst"), "404": error("No such user"),
                    ],
                ]
            ],
            "/api/places/version": [
                "get": [
                    "summary": "The places dataset's version: pull lt_places only when it is newer than yours",
                    "responses": ["200": ["description": "{dataVersion}"]],
                ]
            ],
            "/api/places/{id}/adjustments": [
                "post": [
                    "summary":
                        "Report a corrected position for a place (any user: an API key or the user's own password)",
                    "security": [["basic": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "requestBody": [
                        "required": true,
                        "content": [
                            "application/json": [
                                "schema": [
                                    "type": "object",
                                    "properties": [
                                        "latitude": ["type": "number"], "longitude": ["type": "number"],
                                        "comment": ["type": "string"],
                                    ],
                                ]
                            ]
                        ],
                    ],
                    "responses": [
                        "201": ["description": "{ok, id}"], "400": error("Invalid position"),
                        "401": error("Bad credentials"),
                        "404": error("No such place"),
                    ],
                ]
            ],
            "/api/adjustments/mine": [
                "get": [
                    "summary": "The caller's own reports", "security": [["basic": []]],
                    "responses": ["200": ["description": "{reports}"], "401": error("Bad credentials")],
                ]
            ],
            "/api/adjustments": [
                "get": [
                    "summary": "Reports with a review status (admins; status=submitted by default)",
                    "security": [["basic": []]],
                    "parameters": [
                        [
                            "name": "status", "in": "query",
                            "schema": ["type": "string", "enum": ["submitted", "approved", "rejected"]],
                        ]
                    ],
                    "responses": [
                        "200": ["description": "{reports}"], "401": error("Bad credentials"),
                        "403": error("Not an admin"),
                    ],
                ]
            ],
            "/api/adjustments/{id}/{decision}": [
                "post": [
                    "summary":
                        "Approve (moves the place, keeps its old position, bumps dataVersion) or reject a report, or undo that decision (the place moves back; admins)",
                    "security": [["basic": []]],
                    "parameters": [
                        ["name": "id", "in": "path", "required": true, "schema": ["type": "string"]],
                        [
                            "name": "decision", "in": "path", "required": true,
                            "schema": ["type": "string", "enum": ["approve", "reject", "undo"]],
                        ],
                    ],
                    "responses": [
                        "200": ["description": "{ok, reviewStatus, dataVersion}"], "403": error("Not an admin"),
                        "404": error("No such report"),
                        "409": error("Already reviewed; for undo: not reviewed, or the place moved since"),
                    ],
                ]
            ],
            "/api/openapi.json": [
                "get": ["summary": "This document", "responses": ["200": ["description": "OpenAPI 3.1"]]]
            ],
        ],
        "components": [
            "securitySchemes": [
                "basic": ["type": "http", "scheme": "basic"],
                "cookie": ["type": "apiKey", "in": "cookie", "name": "lt_session"],
            ],
            "schemas": [
                "Error": [
                    "type": "object", "required": ["error"],
                    "properties": ["error": ["type": "string"], "reason": ["type": "string"]],
                ],
                "PlaceInput": [
                    "type": "object", "required": ["name", "latitude", "longitude"],
                    "properties": [
                        "name": ["type": "string", "minLength": 1],
                        "latitude": ["type": "number", "minimum": -90, "maximum": 90],
                        "longitude": ["type": "number", "minimum": -180, "maximum": 180],
                    ],
                ],
            ],
        ],
    ]
}
