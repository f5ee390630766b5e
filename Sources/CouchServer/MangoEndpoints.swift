import CouchEngine
import CouchIndexes
import CouchJSON
import Crypto
import Foundation
import Hummingbird

/// Mango: `_find`, `_explain` and `_index`, with the choice of index for a query.
struct MangoEndpoints: Sendable {
    let api: CouchAPI

    /// Parsed `_find` / `_explain` request.
    struct FindRequest {
        var selector: Selector
        var limit = 25
        var skip = 0
        var sort: [(field: String, descending: Bool)] = []
        var fields: [String]?
        var bookmark: String?
        var useIndex: [String]?
        var executionStats = false
        var conflicts = false
        var stable = false
        var update = true
        /// Whether another index may answer when `use_index` cannot (CouchDB's `allow_fallback`).
        var allowFallback = true
        /// The partition the query is confined to (`/{db}/_partition/{p}/_find`).
        var partition: String?
        /// Read quorum; above 1 CouchDB reads each document from the cluster (`total_quorum_docs_examined`).
        var readQuorum = 1

        /// `use_index` as CouchDB's mango_opts reads it: a name (`ddoc`, `_design/ddoc`,
        /// `ddoc/index`, `_design/ddoc/index`) or a list of one or two names; null or `[]` is
        /// none. Empty names are names (of no index: a warning, as in CouchDB). Anything else is
        /// 400 `invalid_index_name`.
        static func parseUseIndex(_ value: JSON) throws -> [String]? {
            func invalid() -> CouchError {
                CouchError(status: 400, error: "invalid_index_name", reason: "Invalid index name: \(value.text)")
            }
            switch value {
            case let .string(text):
                let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                switch parts.count {
                case 1: return parts
                case 2 where parts[0] == "_design": return [parts[1]]
                case 2: return parts
                case 3 where parts[0] == "_design": return [parts[1], parts[2]]
                default: throw invalid()
                }
            case let .array(items):
                let names = items.compactMap(\.stringValue)
                guard names.count == items.count, names.count <= 2 else { throw invalid() }
                return names.isEmpty ? nil : names
            default:
                throw invalid()
            }
        }

        /// Whether `index` alone answers this request (no document is read).
        func isCovered(by index: MangoIndex?) -> Bool {
            guard let index, !conflicts else { return false }
            return index.covers(fields: fields, selector: selector)
        }

        /// `sort`: field names (ascending) or `{field: "asc"|"desc"}`, all in one direction.
        static func parseSort(_ value: JSON) throws -> [(field: String, descending: Bool)] {
            guard case let .array(items) = value else { throw CouchError.badRequest("Invalid sort: must be an array") }
            var sort: [(field: String, descending: Bool)] = []
            for item in items {
                switch item {
                case let .string(field): sort.append((field, false))
                case let .object(object) where object.count == 1:
                    let (field, direction) = object.members[0]
                    guard let d = direction.stringValue, d == "asc" || d == "desc" else {
                        throw CouchError.badRequest("Invalid sort direction for \(field)")
                    }
                    sort.append((field, d == "desc"))
                default: throw CouchError.badRequest("Invalid sort field: \(item)")
                }
            }
            if Set(sort.map(\.descending)).count > 1 {
                throw CouchError.badRequest("Sorts currently only support a single direction for all fields.")
            }
            return sort
        }

        /// CouchDB's answer to a `limit` or `skip` that is no count (here: none beyond `ClientCount.largest`).
        static func notCount(_ key: String, _ value: JSON) -> CouchError {
            CouchError(
                status: 400, error: "invalid_non_neg_integer",
                reason: "\(value) is not an integer greater than or equal to zero (\(key): \(ClientCount.range))")
        }

        init(_ body: JSONObject) throws {
            guard let selector = body["selector"] else {
                throw CouchError(status: 400, error: "missing_required_key", reason: "Missing required key: selector")
            }
            self.selector = try Selector(json: selector)
            if let value = body["limit"] {
                guard let n = ClientCount.from(value) else { throw Self.notCount("limit", value) }
                limit = n
            }
            if let value = body["skip"] {
                guard let n = ClientCount.from(value) else { throw Self.notCount("skip", value) }
                skip = n
            }
            if let value = body["sort"] { sort = try Self.parseSort(value) }
            if let value = body["fields"] {
                guard case let .array(items) = value, items.allSatisfy({ $0.stringValue != nil }) else {
                    throw CouchError.badRequest("Invalid fields: must be an array of strings")
                }
                fields = items.compactMap(\.stringValue)
            }
            if let value = body["bookmark"], value != .null {
                guard case let .string(text) = value else {
                    throw CouchError(status: 400, error: "invalid_bookmark", reason: "Invalid bookmark value: \(value)")
                }
                bookmark = text == "nil" || text.isEmpty ? nil : text
            }
            if let value = body["use_index"], value != .null {
                useIndex = try Self.parseUseIndex(value)
            }
            // As CouchDB's mango_opts: booleans must be booleans, `r` a positive integer.
            for key in ["execution_stats", "conflicts", "update", "stable", "allow_fallback"] {
                if let value = body[key], value.boolValue == nil {
                    throw CouchError(
                        status: 400, error: "invalid_boolean", reason: "Invalid boolean value: \(value.text)")
                }
            }
            if let value = body["r"] {
                guard let r = ClientCount.from(value), r >= 1 else {
                    throw CouchError(
                        status: 400, error: "invalid_pos_integer",
                        reason: "\(value.text) is not an integer greater than zero")
                }
                readQuorum = r
            }
            executionStats = body["execution_stats"] == .bool(true)
            conflicts = body["conflicts"] == .bool(true)
            stable = body["stable"] == .bool(true)
            allowFallback = body["allow_fallback"] != .bool(false)
            update = body["update"] != .bool(false)
        }
    }

    /// The JSON indexes of a database: design documents with `"language": "query"`, as
    /// `_index` lists them (the special `_all_docs` index first).
    func mangoIndexList(_ db: DocumentDatabase) async throws -> [JSON] {
        var list: [JSON] = [
            [
                "ddoc": .null, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]],
            ]
        ]
        for index in try await mangoIndexes(db) {
            list.append(index.listing)
        }
        return list
    }

    func mangoIndexes(_ db: DocumentDatabase) async throws -> [MangoIndex] {
        var indexes: [MangoIndex] = []
        for doc in try await db.designDocuments() {
            guard doc["language"] == .string("query"), let views = doc["views"]?.objectValue,
                let id = doc["_id"]?.stringValue
            else { continue }
            for (name, view) in views.members {
                guard let def = view["options"]?["def"],
                    var index = try? MangoIndex(designDocument: id, name: name, definition: def)
                else {
                    continue
                }
                index.partitioned = doc["options"]?["partitioned"]?.boolValue ?? db.isPartitioned
                indexes.append(index)
            }
        }
        return indexes
    }

    /// CouchDB's warning when a query read many documents per result (`mango_cursor:
    /// index_scan_warning`, its default threshold of 10; with no results, the documents read).
    static func indexScanWarning(docsExamined: Int, returned: Int) -> String? {
        let ratio = returned == 0 ? Double(docsExamined) : Double(docsExamined) / Double(returned)
        guard ratio > 10 else { return nil }
        return "The number of documents examined is high in proportion to the number of results returned. "
            + "Consider adding a more specific index to improve this."
    }

    /// The index `_find` uses, as CouchDB chooses it (see `MangoIndexChoice`), and the warning
    /// CouchDB gives with it. Nil means `_all_docs`. `_find` refuses a sort no index can give
    /// (`_explain` shows no index then).
    func chooseIndex(
        _ db: DocumentDatabase, _ find: FindRequest, explaining: Bool = false
    ) async throws
        -> (index: MangoIndex?, warning: String?, choice: MangoIndexChoice)
    {
        let sortFields = find.sort.map { Selector.splitPath($0.field) }
        let choice = MangoIndexChoice(
            indexes: try await mangoIndexes(db), selector: find.selector, sort: sortFields,
            useIndex: find.useIndex, partition: find.partition)
        // `use_index` names an index; when it cannot answer, CouchDB falls back to the best
        // usable one with a warning, or, with `allow_fallback: false`, refuses (mango_cursor:create).
        var warnings: [String] = []
        if let useIndex = find.useIndex, let first = useIndex.first, !choice.usedNamedIndex {
            let ddoc = first.hasPrefix("_design/") ? first : "_design/\(first)"
            let what = useIndex.count == 2 ? "\(ddoc), \(useIndex[1])" : ddoc
            guard find.allowFallback else {
                throw CouchError(
                    status: 400, error: "invalid_index",
                    reason: "\(what) specified by `use_index` could not be found or it is not suitable.")
            }
            // CouchDB's wording (mango_cursor), one for a design document, one for an index in it.
            warnings.append(
                useIndex.count == 2
                    ? "\(what) was not used because it is not a valid index for this query."
                    : "\(what) was not used because it does not contain a valid index for this query.")
        }
        let warning = { warnings.isEmpty ? nil : warnings.joined(separator: "\n") }
        if let index = choice.index { return (index, warning(), choice) }
        if !choice.foundUsable {
            if explaining { return (nil, warning(), choice) }
            // CouchDB's three wordings: a plain database, one partition, all partitions.
            let scope = !db.isPartitioned ? "" : find.partition != nil ? "partitioned " : "global "
            throw CouchError(
                status: 400, error: "no_usable_index",
                reason: "No \(scope)index exists for this sort, try indexing by the sort fields.")
        }
        if !find.allowFallback, find.useIndex == nil {
            throw CouchError(
                status: 400, error: "invalid_index", reason: "You must specify an index with the `use_index` parameter."
            )
        }
        warnings.append("No matching index found, create an index to optimize query time.")
        return (nil, warning(), choice)
    }

    func find(_ db: DocumentDatabase, _ request: APIRequest, partition: String? = nil) async throws -> APIResponse {
        var find = try FindRequest(try request.jsonObject())
        find.partition = partition
        let (index, warning, _) = try await chooseIndex(db, find)
        let started = ContinuousClock.now
        var offset = 0
        if let bookmark = find.bookmark {
            // A bookmark comes back from the client: its offset is a count like any other.
            guard let bytes = Authenticator.base64urlDecode(bookmark), let json = try? JSON.parse(bytes),
                let n = json["offset"].flatMap(ClientCount.from)
            else {
                throw CouchError(
                    status: 400, error: "invalid_bookmark",
                    reason: "Invalid bookmark value: \(JSON.string(bookmark).text)")
            }
            offset = n
        }
        var query = FindQuery(selector: find.selector)
        query.sort = find.sort.map { Selector.splitPath($0.field) }
        query.descending = find.sort.first?.descending ?? false
        query.skip = offset + find.skip
        query.limit = find.limit
        query.conflicts = find.conflicts
        query.update = find.update
        query.covering = find.isCovered(by: index)
        query.idRange = partition.map(Partition.idRange)
        query.isCancelled = request.clientGone
        let result = try await db.mango.find(query, index: index)
        let docs: [JSON] = result.docs.map { doc in
            guard let fields = find.fields else { return doc }
            var projected = JSONObject()
            for field in fields {
                let path = Selector.splitPath(field)
                guard let value = Selector.lookup(doc, path) else { continue }
                Selector.setPath(&projected, path, value)
            }
            return .object(projected)
        }
        var out: JSONObject = ["docs": .array(docs)]
        out["bookmark"] = .string(Authenticator.base64url(JSON.object(["offset": .int(query.skip + docs.count)]).bytes))
        let warnings = [warning, Self.indexScanWarning(docsExamined: result.docsExamined, returned: docs.count)]
            .compactMap { $0 }
        if !warnings.isEmpty { out["warning"] = .string(warnings.joined(separator: "\n")) }
        if find.executionStats {
            let elapsed = started.duration(to: .now)
            out["execution_stats"] = [
                "total_keys_examined": .int(result.keysExamined),
                "total_docs_examined": .int(find.readQuorum > 1 ? 0 : result.docsExamined),
                "total_quorum_docs_examined": .int(find.readQuorum > 1 ? result.docsExamined : 0),
                "results_returned": .int(docs.count),
                "execution_time_ms": .double(elapsed.seconds * 1000),
            ]
        }
        return .json(.object(out))
    }

    func explain(_ db: DocumentDatabase, _ request: APIRequest, partition: String? = nil) async throws -> APIResponse {
        var find = try FindRequest(try request.jsonObject())
        find.partition = partition
        let (index, _, choice) = try await chooseIndex(db, find, explaining: true)
        let indexJSON: JSON = choice.foundUsable ? index.map(\.listing) ?? MangoIndexChoice.allDocsListing : .null
        return .json([
            "dbname": .string(db.name),
            "index": indexJSON,
            "partitioned": .bool(db.isPartitioned),
            "selector": find.selector.normalizedJSON,
            "opts": [
                "use_index": .array((find.useIndex ?? []).map(JSON.string)), "bookmark": "nil",
                "limit": .int(find.limit),
                "skip": .int(find.skip), "sort": [:],
                "fields": find.fields.map { .array($0.map(JSON.string)) } ?? "all_fields",
                "r": .int(find.readQuorum), "conflicts": .bool(find.conflicts),
                "execution_stats": .bool(find.executionStats),
                "partition": .string(partition ?? ""), "stable": .bool(find.stable), "stale": false,
                "update": .bool(find.update), "allow_fallback": .bool(find.allowFallback),
            ],
            "limit": .int(find.limit),
            "skip": .int(find.skip),
            "fields": find.fields.map { .array($0.map(JSON.string)) } ?? "all_fields",
            "mrargs": mrargs(find, index: index),
            "covering": .bool(find.isCovered(by: index)),
            "index_candidates": choice.candidatesJSON(fields: find.fields),
            "selector_hints": MangoIndexChoice.selectorHints(find.selector),
        ])
    }

    /// The view arguments CouchDB's explain shows (`mango_cursor_view:explain`): the key range
    /// the index is read in, direction, and the read options.
    func mrargs(_ find: FindRequest, index: MangoIndex?) -> JSON {
        var (start, end) =
            index.map { MangoRange.keys(columns: $0.fields, selector: find.selector) }
            ?? MangoRange.idKeys(selector: find.selector)
        let descending = find.sort.first?.descending ?? false
        if descending { swap(&start, &end) }
        return [
            "include_docs": .bool(!find.isCovered(by: index)), "view_type": "map", "reduce": false,
            "partition": find.partition.map(JSON.string) ?? .null,
            "start_key": start, "end_key": end, "direction": descending ? "rev" : "fwd",
            "stable": .bool(find.stable), "update": .bool(find.update),
            "conflicts": find.conflicts ? true : "undefined",
        ]
    }

    /// `_index`: list (GET), create (POST), bulk delete, and delete
    /// (`DELETE /_index/{ddoc}/json/{name}`, the ddoc with or without `_design/`), routed as
    /// CouchDB's mango_httpd does: 405 for a known path with another method, 404 for the rest.
    func index(_ db: DocumentDatabase, _ request: inout APIRequest) async throws -> APIResponse {
        let path = request.path
        switch path.count {
        case 2:
            switch request.method {
            case .get, .head:
                try request.user.authorize(.read, to: db)
                let indexes = try await mangoIndexList(db)
                let limit = try request.query["limit"].map { try Self.indexListCount($0, minimum: 1) } ?? indexes.count
                let skip = min(
                    try request.query["skip"].map { try Self.indexListCount($0, minimum: 0) } ?? 0, indexes.count)
                let page = indexes.dropFirst(skip).prefix(limit)
                return .json(["total_rows": .int(indexes.count), "indexes": .array(Array(page))])
            case .post:
                try request.user.authorize(.admin, to: db)
                return try await createIndex(db, try request.jsonObject(), request: request)
            default:
                throw CouchError.methodNotAllowed("GET,POST")
            }
        case 3 where path[2] == "_bulk_delete":
            try request.requireMethod(.post)
            try request.user.authorize(.admin, to: db)
            guard case let .array(docids)? = try request.jsonObject()["docids"] else {
                throw CouchError(status: 400, error: "missing_required_key", reason: "Missing required key: docids")
            }
            var success: [JSON] = []
            var fail: [JSON] = []
            for ddoc in docids {
                guard let id = ddoc.stringValue else { continue }
                let ddocID = id.hasPrefix("_design/") ? id : "_design/\(id)"
                do {
                    try await deleteIndex(db, ddocID, name: nil, request: request)
                    success.append(["id": .string(ddocID), "ok": true])
                } catch let error as CouchError {
                    fail.append(["id": .string(ddocID), "error": .string(error.error)])
                }
            }
            return .json(["success": .array(success), "fail": .array(fail)])
        case 5, 6:
            guard path.count == 5 || path[2] == "_design" else { throw CouchError.missing }
            let (ddoc, type, name) =
                path.count == 6 ? ("_design/\(path[3])", path[4], path[5]) : (path[2], path[3], path[4])
            guard request.method == .delete else { throw CouchError.methodNotAllowed("DELETE") }
            try request.user.authorize(.admin, to: db)
            guard type == "json" else { throw CouchError.missing }
            try await deleteIndex(
                db, ddoc.hasPrefix("_design/") ? ddoc : "_design/\(ddoc)", name: name, request: request)
            return .ok()
        default:
            throw CouchError.missing
        }
    }

    /// `limit` (at least 1) and `skip` (at least 0) of an index listing.
    static func indexListCount(_ text: String, minimum: Int) throws -> Int {
        guard let value = ClientCount.parse(text), value >= minimum else {
            throw CouchError(
                status: 400, error: "invalid_list_index_params", reason: "Index parameter ranges: limit > 1, skip > 0")
        }
        return value
    }

    /// An index definition checked as CouchDB's mango_opts checks it (known keys only, one
    /// sort direction, a valid partial filter): the definition stored in the design document,
    /// and its fields as `{name: direction}`.
    static func indexDefinition(_ body: JSONObject) throws -> (def: JSONObject, fields: [JSON]) {
        func invalidKey(_ key: String) -> CouchError {
            CouchError(status: 400, error: "invalid_key", reason: "Invalid key \(key) for this request.")
        }
        if let key = body.members.first(where: {
            !["index", "type", "name", "ddoc", "w", "partitioned"].contains($0.key)
        })?.key {
            throw invalidKey(key)
        }
        // Text and Nouveau indexes need a search service; CouchDB without one answers so.
        if case let .string(type)? = body["type"], type == "text" || type == "nouveau" {
            throw CouchError(status: 503, error: "required index service unavailable", reason: type)
        }
        guard body["index"] != nil else {
            throw CouchError(status: 400, error: "missing_required_key", reason: "Missing required key: index")
        }
        guard case let .object(index)? = body["index"], case let .array(fields)? = index["fields"], !fields.isEmpty
        else {
            throw CouchError.badRequest(
                "Index definition must include an `index` object with a non-empty `fields` list")
        }
        if let key = index.members.first(where: { !["fields", "partial_filter_selector"].contains($0.key) })?.key {
            throw invalidKey(key)
        }
        if let type = body["type"], type != .string("json") {
            throw CouchError(
                status: 400, error: "invalid_index_type",
                reason: "Invalid type for index: \(type.text); only json indexes are supported")
        }
        for key in ["name", "ddoc"] {
            guard let value = body[key] else { continue }
            guard case let .string(text) = value, !text.isEmpty, text != "_design/" else {
                throw CouchError(
                    status: 400, error: "invalid_empty_string", reason: "Index name or ddoc cannot be empty string")
            }
        }
        var normalized: [JSON] = []
        var directions: Set<String> = []
        for field in fields {
            switch field {
            case let .string(name) where !name.isEmpty:
                normalized.append([name: "asc"])
                directions.insert("asc")
            case let .object(o)
            where o.count == 1 && !o.members[0].key.isEmpty
                && (o.members[0].value == "asc" || o.members[0].value == "desc"):
                normalized.append(field)
                directions.insert(o.members[0].value.stringValue ?? "")
            default:
                throw CouchError(status: 400, error: "invalid_sort_field", reason: "Invalid sort field: \(field.text)")
            }
        }
        guard directions.count <= 1 else {
            throw CouchError(
                status: 400, error: "unsupported_mixed_sort",
                reason: "Sorts currently only support a single direction for all fields.")
        }
        var def: JSONObject = ["fields": .array(normalized)]
        if let partial = index["partial_filter_selector"] {
            _ = try Selector(json: partial)
            def["partial_filter_selector"] = partial
        }
        return (def, normalized)
    }

    /// `POST /{db}/_index`: a JSON index as a view of a query-language design document, named
    /// after its definition unless named ("exists" when it is there already).
    func createIndex(_ db: DocumentDatabase, _ body: JSONObject, request: APIRequest) async throws -> APIResponse {
        let (def, normalized) = try Self.indexDefinition(body)
        // Named after its definition, so creating the same index again answers "exists".
        let signature = Hex.string(Insecure.MD5.hash(data: JSON.object(def).bytes))
        var ddocID = body["ddoc"]?.stringValue ?? "_design/\(signature)"
        if !ddocID.hasPrefix("_design/") { ddocID = "_design/\(ddocID)" }
        let name = body["name"]?.stringValue ?? signature
        let existing = try? await db.document(id: ddocID)
        if let stored = existing?["views"]?[name]?["options"]?["def"]?.objectValue,
            (try? Self.indexDefinition(["index": .object(stored)]).def) == def
        {
            return .json(["result": "exists", "id": .string(ddocID), "name": .string(name)])
        }
        // Kept as the client wrote its fields (CouchDB's design document does; listings show
        // them as {name: direction}).
        var stored = def
        stored["fields"] = body["index"]?["fields"]
        var doc = existing ?? ["_id": .string(ddocID), "language": "query", "views": [:]]
        // A partitioned database's indexes are partitioned unless asked otherwise (CouchDB
        // keeps the choice in the design document's options).
        if let value = body["partitioned"] {
            guard let partitioned = value.boolValue else {
                throw CouchError(
                    status: 400, error: "invalid_partitioned_value",
                    reason: "Invalid value for partitioned: \(value.text)")
            }
            if partitioned, !db.isPartitioned {
                throw CouchError(
                    status: 400, error: "invalid_partitioned_value",
                    reason: "Partitioned indexes require a partitioned database.")
            }
            if existing == nil, partitioned != db.isPartitioned { doc["options"] = ["partitioned": .bool(partitioned)] }
        }
        guard doc["language"] == .string("query") else {
            throw CouchError.badRequest("Design document \(ddocID) is not a query-language design document")
        }
        var views = doc["views"]?.objectValue ?? JSONObject()
        views[name] = [
            "map": [
                "fields": .object(JSONObject(normalized.compactMap { $0.objectValue?.members.first })),
                "partial_filter_selector": def["partial_filter_selector"] ?? [:],
            ],
            "reduce": "_count",
            "options": ["def": .object(stored)],
        ]
        doc["views"] = .object(views)
        _ = try await api.documents.writeDocument(db, try DocumentInput(json: .object(doc)), request: request)
        return .json(["result": "created", "id": .string(ddocID), "name": .string(name)])
    }

    func deleteIndex(_ db: DocumentDatabase, _ ddocID: String, name: String?, request: APIRequest) async throws {
        guard var doc = try? await db.document(id: ddocID), doc["language"] == .string("query") else {
            throw CouchError.missing
        }
        var views = doc["views"]?.objectValue ?? JSONObject()
        if let name {
            guard views.removeValue(forKey: name) != nil else { throw CouchError.missing }
        } else {
            views = JSONObject()
        }
        var input: DocumentInput
        if views.isEmpty {
            input = DocumentInput(id: ddocID, rev: doc["_rev"]?.stringValue.flatMap(Revision.init), deleted: true)
        } else {
            doc["views"] = .object(views)
            input = try DocumentInput(json: .object(doc))
        }
        input.id = ddocID
        _ = try await api.documents.writeDocument(db, input, request: request)
    }
}
