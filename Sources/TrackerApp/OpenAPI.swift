import CouchJSON

/// The application API as an OpenAPI 3.1 document, served at `/api/openapi.json`.
enum OpenAPI {
    static func error(_ description: String) -> JSON {
        ["description": .string(description), "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]]
    }

    static let document: JSON = [
        "openapi": "3.1.0",
        "info": [
            "title": "LocationTracker application API",
            "version": "1.0.0",
            "description": "The original Location Tracker server's API (registration, login, places) plus user deletion and OwnTracks ingestion. Locations themselves are written to the user's database on the CouchDB-compatible database port with the credentials a login returns.",
        ],
        "paths": [
            "/api/users/{id}": [
                "put": [
                    "summary": "Register a user: creates their private database lt_locations_user_{id}",
                    "parameters": [["name": "id", "in": "path", "required": true,
                                    "schema": ["type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"]]],
                    "requestBody": ["required": true, "content": ["application/json": ["schema": [
                        "type": "object", "required": ["password"],
                        "properties": ["username": ["type": "string"], "password": ["type": "string", "minLength": 1],
                                       "type": ["type": "string"], "_id": ["type": "string"]],
                    ]]]],
                    "responses": [
                        "201": ["description": "Registered", "content": ["application/json": ["schema": [
                            "type": "object", "properties": ["ok": ["type": "boolean"], "id": ["type": "string"]]]]]],
                        "400": error("Invalid username or missing password"),
                        "409": error("User already exists"),
                    ],
                ],
                "delete": [
                    "summary": "Delete a user, their database and API keys (basic auth as the user, or as a server admin; admins may add locations=purge to purge the user's locations from lt_locations_all)",
                    "security": [["basic": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]],
                                   ["name": "locations", "in": "query", "schema": ["type": "string", "enum": ["purge"]]]],
                    "responses": ["200": ["description": "Deleted"], "401": error("Not the user's password"), "404": error("No such user"),
                                  "429": error("Too many failed attempts")],
                ],
            ],
            "/api/keys": [
                "get": [
                    "summary": "The caller's API keys (one per login or device), without secrets (basic auth: an API key of the user or their own name and password)",
                    "security": [["basic": []]],
                    "responses": [
                        "200": ["description": "API keys", "content": ["application/json": ["schema": [
                            "type": "object", "properties": ["keys": ["type": "array", "items": [
                                "type": "object", "properties": ["api_key": ["type": "string"], "device": ["type": ["string", "null"]],
                                                                 "created_at": ["type": "number"]]]]],
                        ]]]],
                        "401": error("Not authenticated"),
                    ],
                ],
            ],
            "/api/keys/{key}": [
                "delete": [
                    "summary": "Revoke one of the caller's API keys (a lost device); it stops working at once",
                    "security": [["basic": []]],
                    "parameters": [["name": "key", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": ["200": ["description": "Revoked"], "401": error("Not authenticated"), "404": error("No such key of the caller")],
                ],
            ],
            "/api/status": [
                "get": [
                    "summary": "The server's mode and consolidation: databases still to look at or waiting to be retried, databases that cannot be read, locations lt_locations_all refused (server admins)",
                    "security": [["basic": []]],
                    "responses": [
                        "200": ["description": "Status", "content": ["application/json": ["schema": [
                            "type": "object", "properties": ["mode": ["type": "string"], "consolidation": ["type": ["object", "null"]]],
                        ]]]],
                        "401": error("Not authenticated"), "403": error("Not a server admin"), "429": error("Too many failed logins from this client"),
                    ],
                ],
            ],
            "/api/login": [
                "post": [
                    "summary": "Log in: issues a fresh API key (per device) for the user's database",
                    "requestBody": ["required": true, "content": ["application/json": ["schema": [
                        "type": "object", "required": ["username", "password"],
                        "properties": ["username": ["type": "string"], "password": ["type": "string"], "device": ["type": "string"]],
                    ]]]],
                    "responses": [
                        "200": ["description": "Credentials for the user's database", "content": ["application/json": ["schema": [
                            "type": "object",
                            "properties": ["ok": ["type": "boolean"], "api_key": ["type": "string"], "api_password": ["type": "string"],
                                           "location_db_name": ["type": "string"], "location_db_host": ["type": "string"],
                                           "location_db_host_protocol": ["type": "string"]],
                        ]]]],
                        "401": error("Name or password is incorrect"),
                        "429": error("Too many failed logins for this user or client"),
                    ],
                ],
            ],
            "/api/places": [
                "get": [
                    "summary": "Places near a position: the _geo query on lt_places/_design/points/_geo/pointidx, with Cloudant Geo's parameters",
                    "parameters": .array(["lat", "lon", "radius", "rangex", "rangey", "bbox", "g", "relation", "nearest", "limit", "skip",
                                          "bookmark", "include_docs", "format", "stale"].map { ["name": .string($0), "in": "query", "schema": ["type": "string"]] }),
                    "responses": ["200": ["description": "Rows (format=view), or a GeoJSON FeatureCollection"], "400": error("Invalid query")],
                ],
                "post": [
                    "summary": "Add a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "requestBody": ["required": true, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/PlaceInput"]]]],
                    "responses": ["201": ["description": "{ok, id, rev, dataVersion}"], "400": error("Invalid place"), "403": error("Not an admin")],
                ],
            ],
            "/api/places/{id}": [
                "put": [
                    "summary": "Rename or move a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "requestBody": ["required": true, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/PlaceInput"]]]],
                    "responses": ["200": ["description": "{ok, id, rev, dataVersion}"], "400": error("Invalid place"), "403": error("Not an admin"),
                                  "404": error("No such place"), "409": error("Changed meanwhile")],
                ],
                "delete": [
                    "summary": "Delete a place (admins); bumps the places release",
                    "security": [["basic": []], ["cookie": []]],
                    "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": ["200": ["description": "{ok, dataVersion}"], "403": error("Not an admin"), "404": error("No such place")],
                ],
            ],
            "/api/session": [
                "post": [
                    "summary": "Sign in to the dashboard (a tracker user, an admin or an analyst): sets the HttpOnly lt_session cookie. Writes authenticated by the cookie must send X-Requested-With: lt-dashboard",
                    "requestBody": ["required": true, "content": ["application/json": ["schema": [
                        "type": "object", "required": ["username", "password"],
                        "properties": ["username": ["type": "string"], "password": ["type": "string"]],
                    ]]]],
                    "responses": ["200": ["description": "{ok, name, roles, kind: user|admin|analyst}"], "401": error("Name or password is incorrect"),
                                  "429": error("Too many failed attempts")],
                ],
                "get": ["summary": "Who is signed in ({ok, name: null} when nobody, as CouchDB's _session)",
                        "responses": ["200": ["description": "{ok, name, roles, kind}"]]],
                "delete": ["summary": "Sign out", "responses": ["200": ["description": "{ok}"]]],
            ],
            "/api/me/locations": ["get": [
                "summary": "The signed-in user's own newest locations, oldest first",
                "security": [["basic": []], ["cookie": []]],
                "parameters": [["name": "limit", "in": "query", "schema": ["type": "integer", "default": 100, "maximum": 10000]],
                               ["name": "from", "in": "query", "schema": ["type": "number"], "description": "ms since 1970"],
                               ["name": "to", "in": "query", "schema": ["type": "number"], "description": "ms since 1970"]],
                "responses": ["200": ["description": "{locations}"], "401": error("Not signed in"), "403": error("Not a tracker user")],
            ]],
            "/api/me/live": ["get": [
                "summary": "The signed-in user's new locations as server-sent events (event: location)",
                "security": [["basic": []], ["cookie": []]],
                "responses": ["200": ["description": "text/event-stream"], "401": error("Not signed in")],
            ]],
            "/api/owntracks": [
                "post": [
                    "summary": "OwnTracks HTTP mode: a location message stored in the user's database (idempotent); answers []",
                    "security": [["basic": []]],
                    "parameters": [["name": "u", "in": "query", "schema": ["type": "string"]], ["name": "d", "in": "query", "schema": ["type": "string"]],
                                   ["name": "X-Limit-U", "in": "header", "schema": ["type": "string"]],
                                   ["name": "X-Limit-D", "in": "header", "schema": ["type": "string"]]],
                    "requestBody": ["required": true, "content": ["application/json": ["schema": [
                        "type": "object", "required": ["_type"],
                        "properties": ["_type": ["type": "string"], "lat": ["type": "number"], "lon": ["type": "number"], "tst": ["type": "integer"],
                                       "acc": ["type": "number"], "alt": ["type": "number"], "batt": ["type": "number"], "tid": ["type": "string"]],
                    ]]]],
                    "responses": ["200": ["description": "[]"], "400": error("Invalid location"), "401": error("Bad credentials"),
                                  "403": error("Credentials of another user")],
                ],
            ],
            "/api/analysis/locations": [
                "get": [
                    "summary": "Export locations (admins and analysts): one user's or everyone's, by time window and area, streamed",
                    "security": [["basic": []]],
                    "parameters": .array(["user", "from", "to", "bbox", "lat", "lon", "radius", "format"].map {
                        ["name": .string($0), "in": "query", "schema": ["type": "string"]]
                    }),
                    "responses": ["200": ["description": "GeoJSON FeatureCollection, CSV or GPX (format=geojson|csv|gpx)"],
                                  "400": error("Invalid filter or format"), "401": error("No or bad credentials"),
                                  "403": error("Not an admin or analyst"), "404": error("No such user")],
                ],
            ],
            "/api/analysis/users/{name}/stats": [
                "get": [
                    "summary": "Per-user statistics (admins and analysts): count, first and last fix, distance travelled",
                    "security": [["basic": []]],
                    "parameters": [["name": "name", "in": "path", "required": true, "schema": ["type": "string"]]],
                    "responses": ["200": ["description": "{user, count, first, last, distance_m}"], "401": error("No or bad credentials"),
                                  "403": error("Not an admin or analyst"), "404": error("No such user")],
                ],
            ],
            "/api/places/version": ["get": [
                "summary": "The places dataset's version: pull lt_places only when it is newer than yours",
                "responses": ["200": ["description": "{dataVersion}"]],
            ]],
            "/api/places/{id}/adjustments": ["post": [
                "summary": "Report a corrected position for a place (any user: an API key or the user's own password)",
                "security": [["basic": []]],
                "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]]],
                "requestBody": ["required": true, "content": ["application/json": ["schema": [
                    "type": "object", "properties": ["latitude": ["type": "number"], "longitude": ["type": "number"], "comment": ["type": "string"]],
                ]]]],
                "responses": ["201": ["description": "{ok, id}"], "400": error("Invalid position"), "401": error("Bad credentials"),
                              "404": error("No such place")],
            ]],
            "/api/adjustments/mine": ["get": [
                "summary": "The caller's own reports", "security": [["basic": []]],
                "responses": ["200": ["description": "{reports}"], "401": error("Bad credentials")],
            ]],
            "/api/adjustments": ["get": [
                "summary": "Reports with a review status (admins; status=submitted by default)", "security": [["basic": []]],
                "parameters": [["name": "status", "in": "query", "schema": ["type": "string", "enum": ["submitted", "approved", "rejected"]]]],
                "responses": ["200": ["description": "{reports}"], "401": error("Bad credentials"), "403": error("Not an admin")],
            ]],
            "/api/adjustments/{id}/{decision}": ["post": [
                "summary": "Approve (moves the place, keeps its old position, bumps dataVersion) or reject a report (admins)",
                "security": [["basic": []]],
                "parameters": [["name": "id", "in": "path", "required": true, "schema": ["type": "string"]],
                               ["name": "decision", "in": "path", "required": true, "schema": ["type": "string", "enum": ["approve", "reject"]]]],
                "responses": ["200": ["description": "{ok, reviewStatus, dataVersion}"], "403": error("Not an admin"),
                              "404": error("No such report"), "409": error("Already reviewed")],
            ]],
            "/api/openapi.json": ["get": ["summary": "This document", "responses": ["200": ["description": "OpenAPI 3.1"]]]],
        ],
        "components": [
            "securitySchemes": ["basic": ["type": "http", "scheme": "basic"], "cookie": ["type": "apiKey", "in": "cookie", "name": "lt_session"]],
            "schemas": [
                "Error": ["type": "object", "required": ["error"], "properties": ["error": ["type": "string"], "reason": ["type": "string"]]],
                "PlaceInput": ["type": "object", "required": ["name", "latitude", "longitude"],
                               "properties": ["name": ["type": "string"], "latitude": ["type": "number", "minimum": -90, "maximum": 90],
                                              "longitude": ["type": "number", "minimum": -180, "maximum": 180]]],
            ],
        ],
    ]
}
