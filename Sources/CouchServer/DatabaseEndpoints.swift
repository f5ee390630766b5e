import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import Hummingbird
import Logging

/// A database and its database-wide resources: create, info, delete, `_all_docs`, `_bulk_docs`,
/// `_bulk_get`, `_revs_diff`, `_local_docs`, `_security`, `_revs_limit`, purge, compaction, partitions.
struct DatabaseEndpoints: Sendable {
    let api: CouchAPI

    /// `/{db}`: info, create, delete, and POST of a new document.
    func databaseEndpoint(_ name: String, _ request: inout APIRequest) async throws -> APIResponse {
        switch request.method {
        case .get, .head:
            let db = try await api.store.open(name)
            try request.user.authorize(.read, to: db)
            return .json(.object(try await api.info(db)))
        case .put:
            try request.requireServerAdmin()
            if let q = request.query["q"], Int(q) == nil { throw CouchError.badRequest("q must be an integer") }
            var partitioned = false
            if let value = request.query["partitioned"] {
                guard value == "true" || value == "false" else {
                    throw CouchError.badRequest("Invalid `partitioned` parameter")
                }
                partitioned = value == "true"
                if partitioned, name.hasPrefix("_") {
                    throw CouchError.badRequest("Cannot partition a system database")
                }
            }
            let created = try await api.store.create(name, partitioned: partitioned)
            if UsersDatabase.isUsersDatabase(name) {
                await UsersDatabase.ensureDesignDocument(created, logger: api.logger)
            }
            var headers = HTTPFields()
            headers[.location] = request.location("/" + CouchURL.encode(name), scheme: api.options.databaseScheme)
            return .json(["ok": true], status: .created, headers: headers)
        case .delete:
            try request.requireServerAdmin()
            if request.query["rev"] != nil {
                throw CouchError.badRequest(
                    "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
            }
            try await api.store.delete(name)
            return .json(["ok": true])
        case .post:
            let db = try await api.store.open(name)
            var input = try DocumentInput(json: try request.json())
            if input.id == nil { input.id = api.config.newID() }
            let id = input.id!
            let rev = try await api.documents.writeDocument(db, input, request: request)
            return api.documents.documentWritten(db, id, rev, request: request)
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST")
        }
    }

    /// `/{db}/_revs_limit`: read (readers) or set (database admins).
    func revsLimit(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.get, .put)
        if request.method == .put {
            try request.user.authorize(.admin, to: db)
            guard case let .int(limit) = try request.json(), limit > 0 else {
                throw CouchError.badRequest("The revs_limit must be a positive integer")
            }
            try await db.setRevsLimit(limit)
            return .ok()
        }
        try request.user.authorize(.read, to: db)
        return .json(.int(db.revsLimit))
    }

    /// `/{db}/_security`: read (readers) or replace (database admins), its shape checked.
    func security(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.get, .put)
        guard request.method == .put else {
            try request.user.authorize(.read, to: db)
            return .json(.object(db.security))
        }
        try request.user.authorize(.admin, to: db)
        let security = try request.jsonObject()
        for group in ["admins", "members"] {
            guard let value = security[group] else { continue }
            guard case let .object(object) = value else {
                throw CouchError.badRequest("\(group) must be a JSON object")
            }
            for list in ["names", "roles"] {
                if let entries = object[list], !(entries.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false) {
                    throw CouchError.badRequest("\(group).\(list) must be a JSON list of strings")
                }
            }
        }
        try await db.setSecurity(security)
        return .ok()
    }

    /// `POST /{db}/_purge` (server admins): forgets the given revisions entirely.
    func purge(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        try request.requireServerAdmin()
        let body = try request.jsonObject()
        var purgeRequest: [(id: String, revs: [Revision])] = []
        for (id, value) in body.members {
            if db.isPartitioned { try Partition.validate(documentID: id) }
            guard let list = value.arrayValue else {
                throw CouchError.badRequest("Each purge entry must be a list of revisions")
            }
            purgeRequest.append((id, try list.map { try parseRev($0) }))
        }
        let (purgeSeq, purged) = try await db.purge(purgeRequest)
        return .json(["purge_seq": .string(db.sequenceString(purgeSeq)), "purged": .object(purged)], status: .created)
    }

    /// `POST /{db}/_compact[/{ddoc}]` (database admins): compaction in the background. A
    /// design document's views live in the database's file: compacting them repacks that file
    /// (`DocumentDatabase.compactFile`) and keeps every revision; the database's compaction
    /// also drops the bodies of old revisions first.
    func compact(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        try request.user.authorize(.admin, to: db)
        guard request.header("Content-Type")?.hasPrefix("application/json") == true else {
            throw CouchError(status: 415, error: "bad_content_type", reason: "Content-Type must be application/json")
        }
        var design: String?
        if request.path.count > 2 {
            design = "_design/" + request.path[2]
            _ = try await api.design.designDocument(db, design!)
        }
        if api.compactions.start(db.name, design: design) {
            let (logger, compactions, name) = (api.logger, api.compactions, db.name)
            Task { [design] in
                defer { compactions.finish(name) }
                do {
                    if design == nil {
                        try await db.compact { done, total in compactions.update(name, done: done, total: total) }
                    } else {
                        try await db.compactFile()
                    }
                } catch {
                    logger.error("compaction of \(name)\(design.map { " (\($0))" } ?? "") failed: \(error)")
                }
            }
        }
        return .ok(status: .accepted)
    }

    /// `POST /{db}/_view_cleanup` (database admins): drops the indexes of views no design document has.
    func cleanUpViews(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        try request.user.authorize(.admin, to: db)
        try await api.design.viewCleanup(db)
        return .ok(status: .accepted)
    }

    /// `POST /{db}/_geo_cleanup` (database admins): drops the geo indexes no design document has.
    func cleanUpGeoIndexes(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        try request.user.authorize(.admin, to: db)
        try await api.geoQueries.geoCleanup(db)
        return .ok(status: .accepted)
    }

    /// A document id from the URL that is no special resource: as CouchDB, reading an unknown
    /// `_` resource finds nothing, and writing one is an illegal id.
    func plainDocumentID(_ id: String, _ request: APIRequest) throws -> String {
        guard id.hasPrefix("_") else { return id }
        if request.method == .get || request.method == .head { throw CouchError.missing }
        throw CouchError(
            status: 400, error: "illegal_docid", reason: "Only reserved document ids may start with underscore.")
    }

    func parseRev(_ value: JSON) throws -> Revision {
        guard case let .string(text) = value, let rev = Revision(text) else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return rev
    }

    func parseRevList(_ value: JSON?) throws -> [Revision] {
        guard let value else { return [] }
        guard case let .array(items) = value else { throw CouchError.badRequest("Expected a list of revisions") }
        return try items.map(parseRev)
    }

    // MARK: _all_docs

    func allDocsOptions(_ request: APIRequest, body: JSONObject?) throws -> AllDocsOptions {
        var options = AllDocsOptions()
        // A parameter in the query string wins over the same in a POST body, as in CouchDB.
        func param(_ names: String...) throws -> JSON? {
            for name in names {
                if let value = try request.jsonParam(name) { return value }
                if let value = body?[name] { return value }
            }
            return nil
        }
        func keyString(_ value: JSON?, _ name: String) throws -> String? {
            guard let value else { return nil }
            guard case let .string(s) = value else {
                // Non-string keys sort before (numbers, null) or after (arrays, objects) every id.
                switch value {
                case .array, .object: return "\u{10FFFF}"
                default: return ""
                }
            }
            return s
        }
        options.startKey = try keyString(param("startkey", "start_key"), "startkey")
        options.endKey = try keyString(param("endkey", "end_key"), "endkey")
        if let key = try param("key") {
            // The range from the id to itself, as CouchDB reads `key` (a missing id is no row,
            // not a `not_found` row as with `keys`).
            guard case let .string(id) = key else { throw CouchError.badRequest("key must be a string for _all_docs") }
            options.startKey = id
            options.endKey = id
        }
        if let keys = try param("keys") {
            options.keys = try Self.keyList(keys)
        }
        func bool(_ name: String) throws -> Bool {
            if request.query[name] == nil, let value = body?[name] {
                guard case let .bool(b) = value else {
                    throw CouchError.badRequest("Invalid boolean parameter: \(name)")
                }
                return b
            }
            return try request.bool(name)
        }
        func int(_ name: String) throws -> Int? {
            if request.query[name] == nil, let value = body?[name] {
                guard let i = ClientCount.from(value) else {
                    throw CouchError.badRequest("Invalid value for integer parameter \(name) (\(ClientCount.range))")
                }
                return i
            }
            return try request.int(name)
        }
        options.includeDocs = try bool("include_docs")
        options.descending = try bool("descending")
        options.inclusiveEnd =
            request.query["inclusive_end"] == "false" || body?["inclusive_end"] == .bool(false) ? false : true
        options.limit = try int("limit")
        options.skip = try int("skip") ?? 0
        options.read.conflicts = try bool("conflicts")
        options.read.attachments = try bool("attachments")
        options.read.attEncodingInfo = try bool("att_encoding_info")
        return options
    }

    /// `_all_docs`; `within` narrows it to ids from `low` to `high` (design documents, or one
    /// partition's documents), and `counted` makes `total_rows` and `offset` count only those
    /// (`_design_docs`).
    func allDocs(
        _ db: DocumentDatabase, _ request: APIRequest, within bounds: (low: String, high: String)? = nil,
        counted: Bool = false
    ) async throws -> APIResponse {
        if request.method == .post { try request.requireJSONContentType() }
        let body = request.method == .post ? try request.jsonObject() : nil
        var options = try allDocsOptions(request, body: body)
        if let bounds, options.keys == nil { options = Self.bounded(options, within: bounds) }
        if counted { options.countedRange = bounds }
        // Keys outside the range are not its documents (`_design_docs` with a plain id: no row).
        if counted, let bounds, let keys = options.keys {
            options.keys = keys.filter { key in
                guard let id = key.stringValue else { return true }
                return !id.utf8.lexicographicallyPrecedes(bounds.low.utf8)
                    && id.utf8.lexicographicallyPrecedes(bounds.high.utf8)
            }
        }
        let updateSeq: JSON? =
            try request.bool("update_seq") ? .string(db.sequenceString(try await db.updateSeq())) : nil
        // Answers larger than a page are streamed, page by page in key order.
        let pageSize = 5000
        let requested = options.limit ?? Int.max
        var first = options
        if options.keys == nil { first.limit = min(requested, pageSize) }
        let result = try await db.allDocsSerialized(first)
        if options.keys != nil || result.rows.count < pageSize || requested <= pageSize {
            // As `.json` would write {"total_rows","offset","rows"[,"update_seq"]}, the rows as they came.
            // With `keys` there is no position to give: CouchDB answers `"offset": null`.
            let offset: JSON = options.keys == nil ? .int(result.offset) : .null
            var out =
                Array(JSON.object(["total_rows": .int(result.totalRows), "offset": offset]).bytes.dropLast())
                + Array(#","rows":["#.utf8)
            out.appendJoined(result.rows.lazy.map(\.bytes))
            out.append(UInt8(ascii: "]"))
            if let updateSeq {
                out += #","update_seq":"#.utf8
                updateSeq.write(to: &out)
            }
            out += "}\n".utf8
            return .json(bytes: out)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "must-revalidate"
        let all = options
        let firstLimit = first.limit ?? pageSize
        let stream = ResponseBody { writer in
            var head: JSONObject = ["total_rows": .int(result.totalRows), "offset": .int(result.offset)]
            if let updateSeq { head["update_seq"] = updateSeq }
            // `{"total_rows":..,"offset":..,` then the rows array.
            try await writer.write(ByteBuffer(bytes: JSON.object(head).bytes.dropLast() + Array(",\"rows\":[\n".utf8)))
            var rows = result.rows
            var sent = 0
            var next = all
            next.computeOffset = false
            var pageRequested = firstLimit
            while true {
                var out: [UInt8] = []
                for row in rows {
                    if sent > 0 { out.append(contentsOf: ",\n".utf8) }
                    sent += 1
                    out += row.bytes
                }
                try await writer.write(ByteBuffer(bytes: out))
                guard rows.count == pageRequested, sent < requested, let lastID = rows.last?.id else { break }
                // Continue after the last id: start there and skip it (ids are unique).
                pageRequested = min(pageSize, requested - sent)
                next.startKey = lastID
                next.skip = 1
                next.limit = pageRequested
                rows = try await db.allDocsSerialized(next).rows
            }
            try await writer.write(ByteBuffer(string: "\n]}\n"))
            try await writer.finish(nil)
        }
        return APIResponse(status: .ok, headers: headers, body: stream)
    }

    /// The key range narrowed to `bounds` (`_design_docs`, a partition's ids), in the
    /// direction asked.
    static func bounded(_ options: AllDocsOptions, within bounds: (low: String, high: String)) -> AllDocsOptions {
        var options = options
        if options.descending {
            options.startKey = options.startKey.map { min($0, bounds.high) } ?? bounds.high
            options.endKey = options.endKey.map { max($0, bounds.low) } ?? bounds.low
        } else {
            options.startKey = options.startKey.map { max($0, bounds.low) } ?? bounds.low
            options.endKey = options.endKey.map { min($0, bounds.high) } ?? bounds.high
        }
        return options
    }

    func localDocs(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        let options = try allDocsOptions(request, body: request.method == .post ? try request.jsonObject() : nil)
        let rows = try await db.local.list(options)
        return .json(["total_rows": .null, "offset": .null, "rows": .array(rows)])
    }

    // MARK: _bulk_docs, _bulk_get, _revs_diff

    func bulkDocs(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        try request.requireMethod(.post)
        let body = try request.jsonObject()
        let docs = try Self.bulkDocsList(body)
        var newEdits = true
        if let value = body["new_edits"] {
            guard case let .bool(flag) = value else {
                throw CouchError.badRequest("`new_edits` parameter must be a boolean.")
            }
            newEdits = flag
        }
        if request.query["new_edits"] == "false" { newEdits = false }
        try request.user.authorizeDocumentWrite(to: db)
        // CouchDB 3 does not offer all-or-nothing writes: 417, each document refused, nothing written.
        if body["all_or_nothing"] == .bool(true) {
            let rows: [JSON] = docs.map { doc in
                [
                    "id": doc["_id"] ?? .null, "rev": doc["_rev"] ?? "0-", "error": "not_implemented",
                    "reason": "all_or_nothing is not supported",
                ]
            }
            return .json(.array(rows), status: .expectationFailed)
        }
        return .json(.array(try await write(docs, to: db, newEdits: newEdits, user: request.user)), status: .created)
    }

    /// Writes a `_bulk_docs` request's documents as `user` (whose right to write to `db` is
    /// checked already): its answer's rows. Throws for what CouchDB refuses the whole request
    /// for (an id or attachment name it cannot take).
    func write(_ docs: [JSON], to db: DocumentDatabase, newEdits: Bool, user: UserContext) async throws -> [JSON] {
        let isDbAdmin = (try? user.authorize(.admin, to: db)) != nil
        // Parse and check every document; failures become per-document errors.
        var results = [Result<Revision, CouchError>?](repeating: nil, count: docs.count)
        var ids = [String](repeating: "", count: docs.count)
        var batch: [DocumentInput] = []
        var batchIndex: [Int] = []
        var locals: [(index: Int, id: String, input: LocalDocument)] = []
        // As CouchDB: an id it cannot take, or an attachment name, refuses the whole request.
        for json in docs {
            try DocumentEndpoints.validateAttachmentNames(json["_attachments"]?.objectValue)
            switch json["_id"] {
            case nil: break
            // The underscore rule only: an id lt alone refuses (a NUL) fails its own document,
            // so one such document does not stop a replication's whole batch.
            case .string(let id)? where id.hasPrefix("_") && !id.hasPrefix("_local/"):
                try DocumentInput.validate(id: id)
            // In a partitioned database, so does an id without a valid partition.
            case .string(let id)? where db.isPartitioned && !DocumentInput.holdsNUL(id):
                try Partition.validate(documentID: id)
            case .string?: break
            case _?: throw CouchError(status: 400, error: "illegal_docid", reason: "Document id must be a string")
            }
        }
        // The ids the server assigns, made in one go (one lock on the generator per request).
        var assigned = newEdits ? api.config.newIDs(docs.count { $0["_id"] == nil })[...] : []
        for (i, json) in docs.enumerated() {
            do {
                if case let .string(id)? = json["_id"], id.hasPrefix("_local/") {
                    ids[i] = id
                    locals.append((i, id, try LocalDocument(json: json)))
                    continue
                }
                var input = try DocumentInput(json: json)
                if input.id == nil {
                    if !newEdits { throw CouchError.badRequest("Document id is missing") }
                    input.id = assigned.popFirst() ?? api.config.newID()
                }
                ids[i] = input.id!
                if input.id!.hasPrefix("_design/"), !isDbAdmin {
                    throw CouchError(status: 403, error: "forbidden", reason: "Only admins can write design documents.")
                }
                if UsersDatabase.isUsersDatabase(db.name) {
                    input = try await api.documents.prepareUserDocument(db, input, user: user)
                }
                batch.append(input)
                batchIndex.append(i)
            } catch let error as CouchError {
                if case let .string(id)? = json["_id"] { ids[i] = id }
                results[i] = .failure(error)
            }
        }
        for (index, result) in await Self.writeLocalDocuments(db, locals) { results[index] = result }
        let written = try await db.update(batch, newEdits: newEdits, user: user)
        for (offset, result) in written.enumerated() { results[batchIndex[offset]] = result }
        return Self.bulkDocsRows(results.map { $0! }, ids: ids, docs: docs, newEdits: newEdits)
    }

    /// `_local` documents of a `_bulk_docs` (replication checkpoints), all at once: they share one commit.
    static func writeLocalDocuments(
        _ db: DocumentDatabase, _ locals: [(index: Int, id: String, input: LocalDocument)]
    ) async -> [(Int, Result<Revision, CouchError>)] {
        await withTaskGroup(of: (Int, Result<Revision, CouchError>).self) { group in
            for (index, id, input) in locals {
                group.addTask {
                    do {
                        let rev = try await db.local.put(
                            id: id, rev: input.rev, body: input.body, deleted: input.deleted)
                        return (index, .success(Revision(rev)!))
                    } catch let error as CouchError {
                        return (index, .failure(error))
                    } catch {
                        return (
                            index, .failure(CouchError(status: 500, error: "internal_server_error", reason: "\(error)"))
                        )
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// `_bulk_docs`' answer: a row per document in order, `ok` with the new revision (none
    /// for `new_edits=false`) or the error with its reason (and, for `new_edits=false`, the
    /// revision sent, as CouchDB's `update_doc_result_to_json` writes them).
    static func bulkDocsRows(
        _ results: [Result<Revision, CouchError>], ids: [String], docs: [JSON], newEdits: Bool
    ) -> [JSON] {
        var out: [JSON] = []
        for (i, result) in results.enumerated() {
            switch result {
            case let .success(rev):
                if newEdits { out.append(["ok": true, "id": .string(ids[i]), "rev": .string(rev.description)]) }
            case let .failure(error):
                var row: JSONObject = [
                    "id": .string(ids[i]), "error": .string(error.error), "reason": .string(error.reason),
                ]
                if !newEdits, let rev = docs[i]["_rev"] { row["rev"] = rev }
                out.append(.object(row))
            }
        }
        return out
    }

    func bulkGet(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        let body = try request.jsonObject()
        guard case let .array(docs)? = body["docs"] else { throw CouchError.badRequest("Missing JSON list of 'docs'.") }
        var options = ReadOptions()
        options.revs = try request.bool("revs") || body["revs"] == .bool(true)
        options.attachments = try request.bool("attachments") || body["attachments"] == .bool(true)
        let latest = try request.bool("latest") || body["latest"] == .bool(true)
        // Documents are read together in one transaction: the named revision, or, as CouchDB
        // does without a `rev`, every leaf. `_local` documents are read one by one.
        var batch: [RevisionsRequest] = []
        var batchIndex: [Int: Int] = [:]
        for (i, entry) in docs.enumerated() {
            guard case let .string(id)? = entry["id"], !id.hasPrefix("_local/") else { continue }
            batchIndex[i] = batch.count
            let revs = try entry["rev"].map { [try parseRev($0)] }
            // An empty `atts_since` asks for nothing (CouchDB's replicator sends one per document).
            let since = try entry["atts_since"].map(parseRevList).flatMap { $0.isEmpty ? nil : $0 }
            batch.append(RevisionsRequest(id: id, revs: revs, attsSince: since))
        }
        // Each document comes already written as JSON (from its stored bytes where it can);
        // the answer is written around them: {"results":[{"id":…,"docs":[{"ok":…}|{"error":…}]}]}.
        let batchResults = try await db.openRevisionsSerialized(batch, latest: latest, options: options)
        // Written straight into the answer: each document's bytes are copied once.
        var out = Array(#"{"results":["#.utf8)
        for (i, entry) in docs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            guard case let .string(id)? = entry["id"] else {
                JSON.object([
                    "id": entry["id"] ?? .null,
                    "docs": [
                        [
                            "error": [
                                "id": entry["id"] ?? .null, "rev": entry["rev"] ?? .null, "error": "bad_request",
                                "reason": "Document id must be a string",
                            ]
                        ]
                    ],
                ]).write(to: &out)
                continue
            }
            func failure(rev: JSON, error: String, reason: String) -> JSON {
                ["error": ["id": .string(id), "rev": rev, "error": .string(error), "reason": .string(reason)]]
            }
            out += #"{"id":"#.utf8
            JSON.string(id).write(to: &out)
            out += #","docs":["#.utf8
            do {
                // A partitioned database has no document without a partition (CouchDB names it,
                // with a null revision).
                if db.isPartitioned, !id.hasPrefix("_local/") {
                    do { try Partition.validate(documentID: id) } catch {
                        failure(rev: entry["rev"] ?? .null, error: error.error, reason: error.reason).write(to: &out)
                        out += "]}".utf8
                        continue
                    }
                }
                let opened: [SerializedOpenRevision]
                if let index = batchIndex[i] {
                    opened = try batchResults[index].get()
                } else {
                    opened = [.ok(JSON.object(try await db.local.get(id: id)).bytes)]
                }
                for (index, item) in opened.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    switch item {
                    case let .ok(doc):
                        out += #"{"ok":"#.utf8
                        out += doc
                        out.append(UInt8(ascii: "}"))
                    case let .missing(rev):
                        failure(rev: .string(rev.description), error: "not_found", reason: "missing").write(to: &out)
                    }
                }
            } catch let error as CouchError {
                failure(rev: entry["rev"] ?? "undefined", error: error.error, reason: error.reason).write(to: &out)
            }
            out += "]}".utf8
        }
        out += "]}\n".utf8
        return .json(bytes: out)
    }

    func revsDiff(_ db: DocumentDatabase, _ request: APIRequest, legacy: Bool) async throws -> APIResponse {
        let body = try request.jsonObject()
        var query: [(id: String, revs: [Revision])] = []
        for (id, value) in body.members {
            query.append((id, try parseRevList(value)))
        }
        let diff = try await db.revsDiff(query)
        if legacy {
            var missing = JSONObject()
            for (id, entry) in diff.members { missing[id] = entry["missing"] }
            return .json(["missing_revs": .object(missing)])
        }
        return .json(.object(diff))
    }
}

extension DatabaseEndpoints {
    /// `/{db}/_partition/{partition}[/…]` of a partitioned database: the partition's
    /// information, `_all_docs`, `_find`, `_explain` and views confined to its documents.
    func partitionResource(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        let path = request.path
        guard db.isPartitioned else { throw CouchError.badRequest("database is not partitioned") }
        guard path.count >= 3 else { throw CouchError.badRequest("invalid_partition_req") }
        let partition = path[2]
        try Partition.validate(partition)
        if let named = request.query["partition"], named != partition {
            throw CouchError.badRequest("Conflicting value for `partition` in query string")
        }
        if path.count == 7, path[3] == "_design", path[5] == "_view" {
            try request.user.authorize(.read, to: db)
            return try await api.design.view(db, "_design/" + path[4], path[6], request, partition: partition)
        }
        switch path.count == 4 ? path[3] : (path.count == 3 ? "" : "/") {
        case "":
            try request.requireMethod(.get)
            try request.user.authorize(.read, to: db)
            return .json(.object(try await db.partitionInfo(partition)))
        case "_all_docs":
            try request.requireMethod(.get, .post)
            try request.user.authorize(.read, to: db)
            try api.design.checkLimit(request, partitioned: true)
            return try await allDocs(db, request, within: Partition.idRange(partition))
        case "_find", "_explain":
            try request.requireMethod(.post)
            try request.user.authorize(.read, to: db)
            return path[3] == "_find"
                ? try await api.mango.find(db, request, partition: partition)
                : try await api.mango.explain(db, request, partition: partition)
        default: throw CouchError.missing
        }
    }
}

extension DatabaseEndpoints {
    /// `_bulk_docs`'s `docs` member, or CouchDB's 400 saying what is wrong with it.
    static func bulkDocsList(_ body: JSONObject) throws -> [JSON] {
        guard case let .array(docs)? = body["docs"] else {
            throw CouchError.badRequest(
                body["docs"] == nil ? "POST body must include `docs` parameter." : "`docs` parameter must be an array.")
        }
        return docs
    }

    /// `_all_docs`'s `keys` (body member or parameter) as a list, or CouchDB's 400.
    static func keyList(_ keys: JSON) throws -> [JSON] {
        guard case let .array(list) = keys else { throw CouchError.badRequest("`keys` body member must be an array.") }
        return list
    }
}
