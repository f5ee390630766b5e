import CouchCollation
import CouchEngine
import CouchIndexes
import CouchJSON
import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird
import JavaScript
import Logging
import Replication

/// Design documents' HTTP resources: views, `_info`, `_view_cleanup`, and the filter functions
/// of `_changes` (shows, lists, updates and rewrites are `RenderEndpoints`). JavaScript runs in the query server
/// processes; indexes are the engine's.
struct DesignEndpoints: Sendable {
    let api: CouchAPI

    /// The query server's functions, or 501 where this server has no JavaScript engine.
    func designFunctions() throws -> DesignFunctions {
        guard let javascript = api.options.javascript else {
            throw CouchError.notImplemented(
                "JavaScript is not available on this server (build lt with Debian's duktape-dev)")
        }
        return DesignFunctions(queryServer: javascript)
    }

    /// A design document from the database's cache (`not_found` if there is none).
    func designDocument(_ db: DocumentDatabase, _ id: String) async throws -> JSONObject {
        guard let ddoc = try await db.designDocuments().first(where: { $0["_id"]?.stringValue == id }) else {
            throw CouchError.missing
        }
        return ddoc
    }

    /// `GET|POST /{db}/_design/{ddoc}/_view/{view}`: a JavaScript map function (run by the query
    /// server processes, batch by batch) with an optional reducer, indexed incrementally and
    /// persistently by the engine.
    func view(
        _ db: DocumentDatabase, _ ddocID: String, _ name: String, _ request: APIRequest, partition: String? = nil
    ) async throws -> APIResponse {
        try request.requireMethod(.get, .post)
        let request = try Self.withBodyParameters(request)
        let result = try await runView(db, ddocID, name, request, partition: partition)
        var answer: JSONObject =
            result.reduced ? [:] : ["total_rows": .int(result.totalRows), "offset": .int(result.offset)]
        if try request.bool("update_seq") { answer["update_seq"] = .string(db.sequenceString(result.updateSeq)) }
        answer["rows"] = .array(result.rows)
        return .json(.object(answer))
    }

    /// Runs a view query as `_view` (and `_list`) parameters describe it; `partition` confines
    /// it to one partition's documents. A partitioned design document's views (the default in a
    /// partitioned database) answer only in a partition, the others only globally, as in CouchDB.
    func runView(
        _ db: DocumentDatabase, _ ddocID: String, _ name: String, _ request: APIRequest, partition: String? = nil
    ) async throws -> ViewResult {
        let functions = try designFunctions()
        let ddoc = try await designDocument(db, ddocID)
        let view = try functions.view(ddoc, name)
        var query = try viewQuery(request)
        let partitioned = ddoc["options"]?["partitioned"]?.boolValue ?? db.isPartitioned
        if partitioned, partition == nil {
            throw CouchError(
                status: 400, error: "query_parse_error",
                reason: "`partition` parameter is mandatory for queries to this view.")
        }
        if !partitioned, partition != nil {
            throw CouchError(
                status: 400, error: "query_parse_error",
                reason: "`partition` parameter is not supported in this design doc")
        }
        query.idRange = partition.map(Partition.idRange)
        try checkLimit(request, partitioned: partition != nil)
        let stale =
            request.query["stale"] == "ok" || request.query["stale"] == "update_after"
            || request.query["update"] == "false" || request.query["update"] == "lazy"
        if let update = request.query["update"], !["true", "false", "lazy"].contains(update) {
            throw CouchError.badRequest("Invalid value for `update`: \(update) (true, false or lazy)")
        }
        let result = try await db.views.query(view, query, stale: stale)
        if request.query["update"] == "lazy" || request.query["stale"] == "update_after" {
            let logger = api.logger
            Task { do { try await db.views.update(view) } catch { logger.warning("view update failed: \(error)") } }
        }
        return result
    }

    /// CouchDB's `[query_server_config] query_limit` (a global query) or
    /// `partition_query_limit` (one partition): a larger `limit` is a query_parse_error.
    func checkLimit(_ request: APIRequest, partitioned: Bool) throws {
        let key = partitioned ? "partition_query_limit" : "query_limit"
        guard let most = api.config.value("query_server_config", key).flatMap({ Int($0) }),
            let limit = try request.int("limit")
        else { return }
        if limit > most { throw CouchError.queryParse("Limit is too large, must not exceed \(most)") }
    }

    /// A view `POST`'s body members other than `keys` taken as query parameters, as CouchDB's
    /// `parse_body_and_query` takes them (`{"keys": [...], "limit": 1}`; the query string's
    /// win over the body's).
    static func withBodyParameters(_ request: APIRequest) throws -> APIRequest {
        guard request.method == .post, !request.body.isEmpty else { return request }
        try request.requireJSONContentType()
        var merged = request
        // Parameters whose query-string value is a plain string, not JSON.
        let plain: Set<String> = [
            "startkey_docid", "start_key_doc_id", "endkey_docid", "end_key_doc_id", "stale", "update",
        ]
        for (name, value) in try request.jsonObject().members where name != "keys" && request.query[name] == nil {
            merged.query[name] = plain.contains(name) ? (value.stringValue ?? value.text) : value.text
        }
        return merged
    }

    /// `_view` query parameters, from the query string or a POST body.
    func viewQuery(_ request: APIRequest) throws -> ViewQuery {
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObject() : nil
        func param(_ names: String...) throws -> JSON? {
            for name in names {
                if let value = try request.jsonParam(name) { return value }
                if let value = body?[name] { return value }
            }
            return nil
        }
        var query = ViewQuery()
        query.key = try param("key")
        if let keys = try param("keys") {
            guard case let .array(list) = keys else { throw CouchError.badRequest("`keys` member must be an array.") }
            query.keys = list
        }
        query.startKey = try param("startkey", "start_key")
        query.endKey = try param("endkey", "end_key")
        query.startKeyDocID = request.query["startkey_docid"] ?? request.query["start_key_doc_id"]
        query.endKeyDocID = request.query["endkey_docid"] ?? request.query["end_key_doc_id"]
        query.inclusiveEnd = request.query["inclusive_end"] != "false"
        query.descending = try request.bool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        query.includeDocs = try request.bool("include_docs")
        query.conflicts = try request.bool("conflicts")
        query.attachments = try request.bool("attachments")
        query.attEncodingInfo = try request.bool("att_encoding_info")
        if request.query["reduce"] != nil { query.reduce = try request.bool("reduce") }
        query.group = request.query["group"] == nil ? nil : try request.bool("group")
        query.groupLevel = try request.int("group_level")
        return query
    }

    /// `GET /{db}/_design/{ddoc}/_info`: the state of the design document's view index.
    func designInfo(_ db: DocumentDatabase, _ ddocID: String) async throws -> APIResponse {
        let ddoc = try await designDocument(db, ddocID)
        let signatures = DesignFunctions.viewNames(ddoc).compactMap { DesignFunctions.viewSignature(ddoc, $0) }
        let state = try await db.views.state(signatures: signatures)
        let signature = ViewDefinition.digest(signatures.sorted().joined(separator: ","))
        return .json([
            "name": .string(String(ddocID.dropFirst("_design/".count))),
            "view_index": [
                "signature": .string(signature), "language": .string(ddoc["language"]?.stringValue ?? "javascript"),
                "sizes": [
                    "file": .int(state.bytes), "external": .int(state.dataBytes), "active": .int(state.dataBytes),
                ],
                "update_seq": .int(state.updateSeq), "purge_seq": 0, "updater_running": false,
                "compact_running": .bool(api.compactions.isRunning(db.name)),
                "waiting_clients": 0, "waiting_commit": false,
                "updates_pending": [
                    "minimum": .int(state.pending), "preferred": .int(state.pending), "total": .int(state.pending),
                ],
                "collator_versions": [.string(KeyCollation.collatorVersion)],
            ],
        ])
    }

    /// `POST /{db}/_view_cleanup`: drops view indexes no design document uses any more, and
    /// Mango indexes without their design document.
    func viewCleanup(_ db: DocumentDatabase) async throws {
        let ddocs = try await db.designDocuments()
        let live = Set(
            ddocs.flatMap { ddoc in
                DesignFunctions.viewNames(ddoc).compactMap { DesignFunctions.viewSignature(ddoc, $0) }
            })
        try await db.views.drop(except: live)
        try await db.mango.drop(except: try await api.mango.mangoIndexes(db))
    }

    /// Filter functions for replications from local databases: `req.query` is the
    /// replication's `query_params`.
    static func makeFilterResolver(_ javascript: QueryServer?) -> FilterResolver? {
        guard let javascript else { return nil }
        let functions = DesignFunctions(queryServer: javascript)
        return { db, name, queryParams in
            let (ddocID, function) = try ReplicationFilter.designPath(name, queryParams)
            guard let ddoc = try await db.designDocuments().first(where: { $0["_id"]?.stringValue == ddocID }) else {
                throw ReplicationError(.fatal, "The filter's design document \(ddocID) does not exist in \(db.name)")
            }
            if name == "_view" { return try functions.viewFilter(ddoc, function) }
            let req: JSON = [
                "info": .object(try await db.info()), "id": .null, "method": "GET", "query": .object(queryParams),
                "headers": [:], "body": "undefined", "form": [:], "cookie": [:],
                "userCtx": ["db": .string(db.name), "name": .null, "roles": ["_admin"]], "secObj": .object(db.security),
            ]
            return try functions.filter(ddoc, function, request: req)
        }
    }

    /// The `_changes` filter named by `filter=ddoc/name` or `filter=_view&view=ddoc/name`.
    func designFilter(_ db: DocumentDatabase, _ name: String, _ request: APIRequest) async throws -> DocumentFilter {
        let functions = try designFunctions()
        if name == "_view" {
            guard let view = request.query["view"], let slash = view.firstIndex(of: "/") else {
                throw CouchError.badRequest("`view` filter parameter is not provided.")
            }
            let ddoc = try await designDocument(db, "_design/" + view[..<slash])
            return try functions.viewFilter(ddoc, String(view[view.index(after: slash)...]))
        }
        guard let slash = name.firstIndex(of: "/") else {
            throw CouchError.badRequest(
                "`filter` parameter is not correct: \(name) (use ddoc/name, _view, _doc_ids, _selector or _design)")
        }
        let ddoc = try await designDocument(db, "_design/" + name[..<slash])
        return try functions.filter(
            ddoc, String(name[name.index(after: slash)...]),
            request: try await api.render.javascriptRequest(db, request, id: nil))
    }
}
