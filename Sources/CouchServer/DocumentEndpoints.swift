import CouchEngine
import CouchJSON
import CouchProtocol
import Foundation
import HTTPTypes
import Hummingbird
import MIMEMultipart

/// Documents, their attachments and `_local` documents: read (JSON or multipart), write,
/// delete, copy; `_users` documents are prepared (password hashed) before they are written.
struct DocumentEndpoints: Sendable {
    let api: CouchAPI

    /// Checks who may write `input` and writes it (interactive edit unless `new_edits=false`).
    func writeDocument(
        _ db: DocumentDatabase, _ input: DocumentInput, request: APIRequest, newEdits: Bool = true
    ) async throws -> Revision {
        var input = input
        guard let id = input.id else { throw CouchError.badRequest("Document id is missing") }
        try DocumentInput.validate(id: id)
        try Self.validateAttachmentNames(input.attachments)
        if id.hasPrefix("_design/") {
            try request.user.authorize(.admin, to: db)
        } else {
            try request.user.authorizeDocumentWrite(to: db)
            if UsersDatabase.isUsersDatabase(db.name) {
                input = try await prepareUserDocument(db, input, user: request.user)
            }
        }
        return try await db.update(input, newEdits: newEdits, user: request.user)
    }

    func readOptions(_ request: APIRequest) throws -> ReadOptions {
        var options = ReadOptions()
        let meta = try request.bool("meta")
        options.revs = try request.bool("revs")
        options.revsInfo = try request.bool("revs_info") || meta
        options.conflicts = try request.bool("conflicts") || meta
        options.deletedConflicts = try request.bool("deleted_conflicts") || meta
        options.localSeq = try request.bool("local_seq")
        options.attachments = try request.bool("attachments")
        options.attEncodingInfo = try request.bool("att_encoding_info")
        if let since = try request.jsonParam("atts_since") { options.attsSince = try api.databases.parseRevList(since) }
        return options
    }

    /// `/{db}/{docid}`: GET, HEAD, PUT, DELETE, COPY.
    func documentEndpoint(_ db: DocumentDatabase, _ id: String, _ request: inout APIRequest) async throws -> APIResponse
    {
        switch request.method {
        case .get, .head: return try await readDocument(db, id, request)
        case .put: return try await putDocument(db, id, request)
        case .delete: return try await deleteDocument(db, id, request)
        case .post: return try await formUpload(db, id, request)
        case HTTPRequest.Method("COPY")!: return try await copyDocument(db, id, request)
        default: throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST,PUT,COPY")
        }
    }

    /// `POST /{db}/{docid}` with `multipart/form-data` (an HTML form's file upload, as CouchDB
    /// takes it): the `_attachments` files added to the revision `_rev` names (or `_doc` as the
    /// whole document). The `Referer` must be this host, so another site's page cannot post
    /// a form with the visitor's session cookie.
    func formUpload(_ db: DocumentDatabase, _ id: String, _ request: APIRequest) async throws -> APIResponse {
        // Rights first: the answers below must not tell a stranger whether the document exists.
        try authorizeRead(db, id, request.user)
        try request.user.authorizeDocumentWrite(to: db)
        guard let referer = request.header("Referer") else { throw CouchError.badRequest("Referer header required.") }
        let names = ForwardedHeaders.names.withLock { $0 }
        let host = request.header(names.host) ?? request.authority ?? ""
        guard URLComponents(string: referer).map({ ($0.host ?? "") + ($0.port.map { ":\($0)" } ?? "") }) == host else {
            throw CouchError.badRequest("Referer header must match host.")
        }
        let contentType = request.header("Content-Type") ?? ""
        guard
            contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                == "multipart/form-data",
            let boundary = Multipart.boundary(of: contentType)
        else {
            throw CouchError(status: 415, error: "bad_content_type", reason: "Content-Type must be multipart/form-data")
        }
        let parts: [Multipart.Part]
        do { parts = try Multipart.parse(request.body, boundary: boundary) } catch {
            throw CouchError.badRequest("\(error)")
        }
        func field(_ part: Multipart.Part) -> (name: String, filename: String?)? {
            guard let disposition = part.headers["content-disposition"] else { return nil }
            var name: String?, filename: String?
            for parameter in disposition.split(separator: ";").dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard pair.count == 2 else { continue }
                let value =
                    pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2
                    ? String(pair[1].dropFirst().dropLast()) : pair[1]
                if pair[0] == "name" { name = value } else if pair[0] == "filename" { filename = value }
            }
            return name.map { ($0, filename) }
        }
        var input: DocumentInput
        if let docPart = parts.first(where: { field($0)?.name == "_doc" }) {
            input = try DocumentInput(json: try JSON.parse(docPart.body))
            input.id = id
        } else {
            guard let revPart = parts.first(where: { field($0)?.name == "_rev" }),
                let rev = Revision(
                    String(decoding: revPart.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            else {
                throw CouchError.badRequest("A form upload needs the document's _rev (or a _doc)")
            }
            input = try DocumentInput(json: .object(try await db.document(id: id, rev: rev)))
        }
        var attachments = input.attachments ?? JSONObject()
        for part in parts {
            guard let (name, filename) = field(part), name == "_attachments", let filename, !filename.isEmpty else {
                continue
            }
            attachments.removeValue(forKey: filename)
            attachments[filename] = [
                "content_type": .string(part.headers["content-type"] ?? "application/octet-stream"), "follows": true,
            ]
            input.attachmentBodies[filename] = part.body
        }
        input.attachments = attachments
        let rev = try await writeDocument(db, input, request: request)
        return documentWritten(db, id, rev, request: request)
    }

    /// `GET /{db}/{docid}`: one revision (`rev`), several (`open_revs`), as JSON or as
    /// `multipart/related` with attachment bodies; 304 for a matching `If-None-Match`.
    func readDocument(_ db: DocumentDatabase, _ id: String, _ request: APIRequest) async throws -> APIResponse {
        try authorizeRead(db, id, request.user)
        let options = try readOptions(request)
        if let openRevs = request.query["open_revs"] {
            return try await openRevisions(db, id, openRevs, options: options, request: request)
        }
        let rev = try request.query["rev"].map { text -> Revision in
            guard let rev = Revision(text) else { throw CouchError.badRequest("Invalid rev format") }
            return rev
        }
        var readOptions = options
        let wantsMultipart = request.header("Accept")?.contains("multipart/related") == true
        readOptions.attachmentsFollow = wantsMultipart
        let doc = try await db.document(id: id, rev: rev, options: readOptions)
        // As CouchDB: an answer carrying metadata (conflicts, revs_info, local_seq) has no
        // ETag, so no cache (a browser's, CouchDB-Python's) answers a later read from it —
        // the revision stays the same when a conflicting leaf is deleted.
        let hasMeta = ["_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq"].contains { doc[$0] != nil }
        let etag = "\"\(doc["_rev"]?.stringValue ?? "")\""
        if wantsMultipart {
            let part = try await documentPart(db, doc)
            if part.headers[0].1.hasPrefix("multipart/related") {
                var headers = HTTPFields()
                headers[.contentType] = part.headers[0].1
                if !hasMeta { headers[.eTag] = etag }
                return APIResponse(
                    status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: part.body)))
            }
        }
        var headers = HTTPFields()
        if !hasMeta {
            headers[.eTag] = etag
            if request.ifNoneMatch(etag), rev == nil {
                return APIResponse(status: .notModified, headers: headers, body: ResponseBody())
            }
        }
        return .json(.object(doc), headers: headers)
    }

    /// `PUT /{db}/{docid}`: a JSON or `multipart/related` body; the revision edited from
    /// `rev`, `If-Match` or the body (which must agree).
    func putDocument(_ db: DocumentDatabase, _ id: String, _ request: APIRequest) async throws -> APIResponse {
        var input: DocumentInput
        let contentType = request.header("Content-Type") ?? ""
        if contentType.lowercased().hasPrefix("multipart/related") {
            input = try multipartDocument(request, contentType: contentType)
        } else {
            input = try DocumentInput(json: try request.json())
        }
        input.id = id  // as CouchDB: the URL names the document, whatever `_id` the body has
        if let rev = request.query["rev"]
            ?? request.header("If-Match")?.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        {
            guard let parsed = Revision(rev) else { throw CouchError.badRequest("Invalid rev format") }
            if let bodyRev = input.rev, bodyRev != parsed {
                throw CouchError.badRequest(
                    request.query["rev"] != nil
                        ? "Document rev from request body and query string have different values"
                        : "Document rev and etag have different values")
            }
            input.rev = parsed
        }
        let newEdits = request.query["new_edits"] != "false"
        let rev: Revision
        do {
            rev = try await writeDocument(db, input, request: request, newEdits: newEdits)
        } catch let error as CouchError where error.status == 409 && request.query["batch"] == "ok" {
            // Batch mode: CouchDB accepts the write before it is tried, and a conflict found
            // then is dropped without a word; the answer is the same 202.
            return .json(["ok": true, "id": .string(id)], status: .accepted)
        }
        return documentWritten(db, id, rev, request: request)
    }

    /// `DELETE /{db}/{docid}?rev=`: a deletion revision (409 without a revision).
    func deleteDocument(_ db: DocumentDatabase, _ id: String, _ request: APIRequest) async throws -> APIResponse {
        guard
            let text = request.query["rev"]
                ?? request.header("If-Match")?.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        else {
            // CouchDB: 404 for a document that is not there, 409 for one that is (told only to
            // whoever may read it).
            try authorizeRead(db, id, request.user)
            guard let current = try await db.winningRevision(id: id), !current.deleted else { throw CouchError.missing }
            throw CouchError.conflict
        }
        guard let rev = Revision(text) else { throw CouchError.badRequest("Invalid rev format") }
        guard try await db.winningRevision(id: id) != nil else { throw CouchError.missing }
        let newRev = try await writeDocument(db, DocumentInput(id: id, rev: rev, deleted: true), request: request)
        return documentWritten(db, id, newRev, request: request, status: .ok)
    }

    /// `COPY /{db}/{docid}` with a `Destination: target[?rev=R]` header.
    func copyDocument(_ db: DocumentDatabase, _ id: String, _ request: APIRequest) async throws -> APIResponse {
        try authorizeRead(db, id, request.user)
        guard let destination = request.header("Destination"), !destination.isEmpty else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        // As CouchDB: the destination is a document of this database, never another server.
        if destination.hasPrefix("http://") || destination.hasPrefix("https://") {
            throw CouchError.badRequest("Destination URL must be relative.")
        }
        var targetID = destination
        var targetRev: Revision?
        if let question = destination.firstIndex(of: "?") {
            targetID = String(destination[..<question])
            let query = CouchURL.parameters(String(destination[destination.index(after: question)...]))
            if let rev = query["rev"] {
                guard let parsed = Revision(rev) else { throw CouchError.badRequest("Invalid rev format") }
                targetRev = parsed
            }
        }
        targetID = CouchURL.decode(Substring(targetID), plusAsSpace: false)
        let sourceRev = try request.query["rev"].map { text -> Revision in
            guard let rev = Revision(text) else { throw CouchError.badRequest("Invalid rev format") }
            return rev
        }
        let source = try await db.document(id: id, rev: sourceRev)
        var input = try DocumentInput(json: .object(source))
        input.id = targetID
        input.rev = targetRev
        let rev = try await writeDocument(db, input, request: request)
        return documentWritten(db, targetID, rev, request: request)
    }

    func documentWritten(
        _ db: DocumentDatabase, _ id: String, _ rev: Revision, request: APIRequest,
        status: HTTPResponse.Status = .created,
        location: String?? = nil
    ) -> APIResponse {
        var headers = HTTPFields()
        headers[.eTag] = "\"\(rev)\""
        // An attachment's write names the attachment, its deletion nothing (CouchDB).
        if let path = location ?? APIRequest.documentPath(db.name, id) {
            headers[.location] = request.location(path, scheme: api.options.databaseScheme)
        }
        if request.query["batch"] == "ok" {
            // CouchDB answers batch mode before the write is durable, without the revision.
            return .json(["ok": true, "id": .string(id)], status: .accepted, headers: headers)
        }
        return .json(
            ["ok": true, "id": .string(id), "rev": .string(rev.description)], status: status, headers: headers)
    }

    func authorizeRead(_ db: DocumentDatabase, _ id: String, _ user: UserContext) throws {
        if UsersDatabase.isUsersDatabase(db.name), !user.isServerAdmin, id.hasPrefix("org.couchdb.user:") {
            try user.authorizeUserDocument(in: db)
            guard let name = user.name else { throw CouchError.unauthorized }
            guard id == "org.couchdb.user:\(name)" else {
                throw CouchError.forbidden("You may only read your own user document.")
            }
            return
        }
        try user.authorize(.read, to: db)
    }

    /// `open_revs`: several revisions, as a JSON array or as `multipart/mixed`.
    func openRevisions(
        _ db: DocumentDatabase, _ id: String, _ raw: String, options: ReadOptions, request: APIRequest
    ) async throws -> APIResponse {
        let revs: [Revision]?
        if raw == "all" {
            revs = nil
        } else {
            guard let json = try? JSON.parse(raw) else { throw CouchError.badRequest("Invalid open_revs") }
            revs = try api.databases.parseRevList(json)
        }
        // CouchDB answers multipart unless the client's `Accept` rules it out (no header, or
        // `*/*`, takes multipart).
        let multipart = AcceptHeader.accepts("multipart/mixed", header: request.header("Accept"))
        var options = options
        // As CouchDB: a multipart answer carries attachment bodies (all of them, or those newer
        // than `atts_since`) as parts of their own, with their encoding, whatever `attachments` says.
        options.attachmentsFollow = multipart
        if multipart { options.attachments = true }
        let results = try await db.openRevisions(
            id: id, revs: revs, latest: try request.bool("latest"), options: options)
        if multipart {
            let boundary = Hex.random(bytes: 16)
            var parts: [(headers: [(String, String)], body: [UInt8])] = []
            for result in results {
                switch result {
                case let .ok(doc):
                    parts.append(try await documentPart(db, doc))
                case let .missing(rev):
                    parts.append(
                        (
                            [("Content-Type", "application/json; error=\"true\"")],
                            JSON.object(["missing": .string(rev.description)]).bytes
                        ))
                }
            }
            var headers = HTTPFields()
            headers[.contentType] = "multipart/mixed; boundary=\"\(boundary)\""
            return APIResponse(
                status: .ok, headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: Multipart.build(parts, boundary: boundary))))
        }
        return .json(
            .array(
                results.map { result in
                    switch result {
                    case let .ok(doc): return ["ok": .object(doc)]
                    case let .missing(rev): return ["missing": .string(rev.description)]
                    }
                }))
    }

    /// One document as a MIME part: plain JSON, or, when attachments follow, a nested
    /// `multipart/related` body with the JSON first and each attachment body after it, as
    /// CouchDB sends `open_revs` to replicators.
    func documentPart(
        _ db: DocumentDatabase, _ doc: JSONObject
    ) async throws -> (headers: [(String, String)], body: [UInt8]) {
        let following = (doc["_attachments"]?.objectValue ?? JSONObject()).members.filter {
            $0.value["follows"] == .bool(true)
        }
        guard !following.isEmpty, let id = doc["_id"]?.stringValue,
            let rev = doc["_rev"]?.stringValue.flatMap(Revision.init)
        else {
            return ([("Content-Type", "application/json")], JSON.object(doc).bytes)
        }
        let boundary = Hex.random(bytes: 16)
        var parts: [(headers: [(String, String)], body: [UInt8])] = [
            ([("Content-Type", "application/json")], JSON.object(doc).bytes)
        ]
        for (name, meta) in following {
            // The stored bytes go out as they are, gzip included, as CouchDB sends them.
            let (_, data) = try await db.attachment(docID: id, rev: rev, name: name, encoded: true)
            var headers = [
                ("Content-Disposition", "attachment; filename=\"\(name)\""),
                ("Content-Type", meta["content_type"]?.stringValue ?? "application/octet-stream"),
                ("Content-Length", String(data.count)),
            ]
            if let encoding = meta["encoding"]?.stringValue, encoding != "identity" {
                headers.append(("Content-Encoding", encoding))
            }
            parts.append((headers, data))
        }
        return (
            [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")],
            Multipart.build(parts, boundary: boundary)
        )
    }

    /// A `multipart/related` document upload: the JSON document first, then the bodies of
    /// attachments marked `follows`, in the order they appear in `_attachments`.
    func multipartDocument(_ request: APIRequest, contentType: String) throws -> DocumentInput {
        guard let boundary = Multipart.boundary(of: contentType) else {
            throw CouchError.badRequest("Multipart body without boundary")
        }
        let parts: [Multipart.Part]
        do { parts = try Multipart.parse(request.body, boundary: boundary) } catch {
            throw CouchError.badRequest(error.description)
        }
        guard let first = parts.first else { throw CouchError.badRequest("Empty multipart body") }
        let json: JSON
        do { json = try JSON.parse(first.body) } catch {
            throw CouchError.badRequest("The first multipart part must be the JSON document")
        }
        var input = try DocumentInput(json: json)
        let following = (input.attachments ?? JSONObject()).members.filter { $0.value["follows"] == .bool(true) }.map(
            \.key)
        var remaining = Array(parts.dropFirst())
        for name in following {
            // Prefer the part that names the attachment; else take them in order.
            if let index = remaining.firstIndex(where: {
                $0.headers["content-disposition"]?.contains("filename=\"\(name)\"") == true
            }) {
                input.attachmentBodies[name] = remaining.remove(at: index).body
            } else if !remaining.isEmpty {
                input.attachmentBodies[name] = remaining.removeFirst().body
            } else {
                throw CouchError.badRequest("Attachment \(name) follows, but its part is missing")
            }
        }
        return input
    }

    // MARK: Attachments

    /// `/{db}/{docid}/{attachment}`: GET, HEAD, PUT, DELETE.
    func attachmentEndpoint(
        _ db: DocumentDatabase, _ id: String, _ name: String, _ request: APIRequest
    ) async throws -> APIResponse {
        let rev = try request.query["rev"].map { text -> Revision in
            guard let rev = Revision(text) else { throw CouchError.badRequest("Invalid rev format") }
            return rev
        }
        switch request.method {
        case .get, .head:
            try authorizeRead(db, id, request.user)
            // A gzip-stored body goes out as stored to a client that accepts gzip, decoded otherwise.
            let acceptsGzip = AcceptEncoding.accepts("gzip", header: request.header("Accept-Encoding"))
            let (meta, data) = try await db.attachment(docID: id, rev: rev, name: name, encoded: acceptsGzip)
            let encoding = meta["encoding"]?.stringValue ?? "identity"
            var headers = HTTPFields()
            if let digest = meta["digest"]?.stringValue {
                // CouchDB's attachment ETag is the digest's base64, without the `md5-` prefix.
                let etag = "\"\(digest.hasPrefix("md5-") ? String(digest.dropFirst(4)) : digest)\""
                headers[.eTag] = etag
                if request.ifNoneMatch(etag) {
                    return APIResponse(status: .notModified, headers: headers, body: ResponseBody())
                }
            }
            headers[.cacheControl] = "must-revalidate"
            headers[.contentType] = meta["content_type"]?.stringValue ?? "application/octet-stream"
            if acceptsGzip, encoding != "identity" { headers[.contentEncoding] = encoding }
            // Ranges of a body stored as it is (CouchDB serves a compressed one whole).
            guard encoding == "identity" else {
                headers[.acceptRanges] = "none"
                return APIResponse(
                    status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
            }
            headers[.acceptRanges] = "bytes"
            return try Self.ranged(data, headers: headers, range: request.header("Range"))
        case .put, .delete:
            var input: DocumentInput
            if let current = try await db.winningRevision(id: id), !current.deleted || rev != nil {
                guard let rev else { throw CouchError.conflict }
                let doc: JSONObject
                do { doc = try await db.document(id: id, rev: rev) } catch let error as CouchError
                    where error.status == 404
                {
                    // CouchDB: 409 {"error":"not_found","reason":"missing_rev"}.
                    throw CouchError(status: 409, error: "not_found", reason: "missing_rev")
                }
                input = try DocumentInput(json: .object(doc))
            } else {
                if request.method == .delete { throw CouchError.missing }
                if rev != nil { throw CouchError.conflict }
                input = DocumentInput(id: id)
                if let current = try await db.winningRevision(id: id) { input.rev = current.rev }
            }
            var attachments = input.attachments ?? JSONObject()
            if request.method == .delete {
                guard attachments.removeValue(forKey: name) != nil else {
                    throw CouchError.notFound("Document is missing attachment")
                }
            } else {
                // A body sent with `Content-Encoding: gzip` arrives here decoded (CouchRequestBody).
                // The new attachment goes first, as CouchDB puts it (its revision id depends on the order).
                attachments.removeValue(forKey: name)
                attachments.members.insert(
                    (
                        name,
                        [
                            "content_type": .string(request.header("Content-Type") ?? "application/octet-stream"),
                            "follows": true,
                        ]
                    ), at: 0)
                input.attachmentBodies[name] = request.body
            }
            input.attachments = attachments
            let newRev = try await writeDocument(db, input, request: request)
            return documentWritten(
                db, id, newRev, request: request, status: request.method == .delete ? .ok : .created,
                location: request.method == .delete
                    ? .some(nil) : APIRequest.documentPath(db.name, id, attachment: name))
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// CouchDB's `validate_attachment_names`: a name may not start with `_` (a whole request
    /// is refused for one such name, `_bulk_docs` too).
    static func validateAttachmentNames(_ attachments: JSONObject?) throws {
        for (name, _) in attachments?.members ?? [] where name.hasPrefix("_") {
            throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
        }
    }

    /// An attachment's body, or the ranges of it a `Range` header asks for, as CouchDB answers
    /// them: one range is a 206 with `Content-Range`; several a 206 `multipart/byteranges`; none
    /// it can satisfy a 416; anything else the whole body.
    static func ranged(_ data: [UInt8], headers: HTTPFields, range: String?) throws -> APIResponse {
        var headers = headers
        switch ByteRanges.parse(range, length: data.count) {
        case .whole:
            return APIResponse(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        case .unsatisfiable:
            throw CouchError(
                status: 416, error: "requested_range_not_satisfiable", reason: "Requested range not satisfiable")
        case .ranges(let ranges) where ranges.count == 1:
            let range = ranges[0]
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(data.count)"
            return APIResponse(
                status: .partialContent, headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: data[range])))
        case .ranges(let ranges):
            let boundary = Hex.random(bytes: 16)
            let type = headers[.contentType] ?? "application/octet-stream"
            var body = Array("--\(boundary)".utf8)
            for range in ranges {
                body += Array(
                    "\r\nContent-Type: \(type)\r\nContent-Range: bytes \(range.lowerBound)-\(range.upperBound)/\(data.count)\r\n\r\n"
                        .utf8)
                body += data[range]
                body += Array("\r\n--\(boundary)".utf8)
            }
            body += Array("--".utf8)
            headers[.contentType] = "multipart/byteranges; boundary=\"\(boundary)\""
            return APIResponse(
                status: .partialContent, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        }
    }

    // MARK: _local documents

    func localDocument(_ db: DocumentDatabase, _ id: String, _ request: inout APIRequest) async throws -> APIResponse {
        switch request.method {
        case .get, .head:
            try request.user.authorize(.read, to: db)
            return .json(.object(try await db.local.get(id: id)))
        case .put:
            try request.user.authorize(.write, to: db)
            let input = try LocalDocument(json: try request.json())
            let rev = try await db.local.put(
                id: id, rev: request.query["rev"] ?? input.rev, body: input.body, deleted: input.deleted)
            return .json(["ok": true, "id": .string(id), "rev": .string(rev)], status: .created)
        case .delete:
            try request.user.authorize(.write, to: db)
            _ = try await db.local.put(id: id, rev: request.query["rev"], body: JSONObject(), deleted: true)
            return .json(["ok": true, "id": .string(id), "rev": "0-0"])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    // MARK: _users

    /// Applies the `_users` rules before a write (`UsersDatabase.check`: the id names the user,
    /// `type` is `user`, only admins set roles and never system roles, a user edits only their
    /// own document), and replaces a plaintext `password` by its PBKDF2-SHA256 hash.
    func prepareUserDocument(
        _ db: DocumentDatabase, _ input: DocumentInput, user: UserContext
    ) async throws -> DocumentInput {
        var input = input
        guard let id = input.id else { throw CouchError.badRequest("Document id is missing") }
        if id.hasPrefix("_design/") {
            try user.authorize(.admin, to: db)
            return input
        }
        let prefix = "org.couchdb.user:"
        guard id.hasPrefix(prefix) else {
            throw CouchError.forbidden("Document ID must be of the form org.couchdb.user:name")
        }
        let existing = try? await db.document(id: id)
        // The rules that keep users apart (`UsersDatabase.accessProblem`), before a password is
        // hashed; the design document's validation judges the rest after.
        var proposed = input.body
        proposed.prepend("_id", .string(id))
        if input.deleted { proposed["_deleted"] = true }
        if let problem = UsersDatabase.accessProblem(proposed, old: existing, user: user, security: db.security) {
            if user.name == nil { throw CouchError.unauthorized }
            throw problem
        }
        if input.deleted { return input }
        if let password = input.body.removeValue(forKey: "password") {
            guard case let .string(plain) = password else {
                throw CouchError.forbidden("doc.password must be a string")
            }
            let rules =
                api.config.value("chttpd_auth", "password_regexp")
                ?? api.config.value("couch_httpd_auth", "password_regexp")
            try PasswordRequirements(rules).check(plain)
            let hash = try await Passwords.hash(plain, iterations: api.options.pbkdf2Iterations)
            for key in ["password_scheme", "iterations", "pbkdf2_prf", "salt", "derived_key", "password_sha"] {
                input.body.removeValue(forKey: key)
            }
            input.body["password_scheme"] = "pbkdf2"
            input.body["iterations"] = .int(hash.iterations)
            input.body["pbkdf2_prf"] = .string(hash.prf)
            input.body["salt"] = .string(hash.salt)
            input.body["derived_key"] = .string(hash.derivedKey)
        } else if let existing, input.body["derived_key"] == nil {
            // Keep the stored hash when a user edits other fields without a new password.
            for key in ["password_scheme", "iterations", "pbkdf2_prf", "salt", "derived_key"] {
                if let value = existing[key] { input.body[key] = value }
            }
        }
        return input
    }
}
