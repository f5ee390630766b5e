import CouchEngine
import CouchJSON
import Foundation
import JavaScript

extension CouchAPI {
    /// `GET|POST /{db}/_design/{ddoc}/_view/{view}`: a JavaScript map function (run by the query
    /// server processes, batch by batch) with an optional built-in reducer, indexed
    /// incrementally and persistently by the engine.
    func view(_ db: Database, _ ddocID: String, _ name: String, _ request: APIRequest) async throws -> APIResponse {
        try requireMethod(request, .get, .post)
        try authorize(db, request.user, .read)
        guard let javascript = options.javascript else {
            throw EngineError.notImplemented("JavaScript is not available on this server (build lt with Debian's duktape-dev)")
        }
        let ddoc = try await db.document(id: ddocID)
        guard let definition = ddoc["views"]?[name]?.objectValue, let mapSource = definition["map"]?.stringValue else {
            throw EngineError.notFound("missing_named_view")
        }
        if let language = ddoc["language"]?.stringValue, language != "javascript" {
            throw EngineError.badRequest("Design document language \(language) is not supported for views")
        }
        var reducer: BuiltinReducer?
        if let reduceSource = definition["reduce"]?.stringValue {
            guard let builtin = BuiltinReducer(rawValue: reduceSource.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw EngineError.notImplemented("JavaScript reduce functions are not supported yet; use _count, _sum, _stats or _approx_count_distinct")
            }
            reducer = builtin
        }
        let view = ViewDefinition(code: mapSource, batchMap: { docs in
            let commands: [JSON] = [["reset"], ["add_fun", .string(mapSource)]] + docs.map { ["map_doc", .object($0)] }
            let answers = try await javascript.run(commands)
            return answers.dropFirst(2).map { answer in
                (answer[0]?.arrayValue ?? []).map { pair in (key: pair[0] ?? .null, value: pair[1] ?? .null) }
            }
        }, reduce: reducer)

        let body = request.method == .post ? try request.jsonObject() : nil
        func param(_ names: String...) throws -> JSON? {
            for name in names {
                if let value = body?[name] { return value }
                if let value = try request.jsonParam(name) { return value }
            }
            return nil
        }
        var query = ViewQuery()
        query.key = try param("key")
        if let keys = try param("keys") {
            guard case let .array(list) = keys else { throw EngineError.badRequest("`keys` must be an array") }
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
        if request.query["reduce"] != nil { query.reduce = try request.bool("reduce") }
        query.group = try request.bool("group")
        query.groupLevel = try request.int("group_level")
        let stale = request.query["stale"] == "ok" || request.query["stale"] == "update_after"
            || request.query["update"] == "false" || request.query["update"] == "lazy"
        do {
            let result = try await db.queryView(view, query, stale: stale)
            if request.query["update"] == "lazy" || request.query["stale"] == "update_after" {
                let logger = self.logger
                Task { do { try await db.updateView(view) } catch { logger.warning("view update failed: \(error)") } }
            }
            if query.reduce ?? (reducer != nil) {
                return .json(["rows": .array(result.rows)])
            }
            return .json(["total_rows": .int(result.totalRows), "offset": .int(result.offset), "rows": .array(result.rows)])
        } catch let failure as QueryServer.Failure {
            throw EngineError(status: 500, error: failure.error, reason: failure.reason)
        }
    }
}
