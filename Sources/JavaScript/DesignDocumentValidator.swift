public import CouchEngine
public import CouchJSON
import Foundation

/// Runs design documents' `validate_doc_update(newDoc, oldDoc, userCtx, secObj)` functions
/// before writes, as CouchDB does: `throw({forbidden: reason})` rejects a write with 403,
/// `throw({unauthorized: reason})` with 401, any other exception with 500 and the reason.
/// Every function must accept a write for it to be stored.
public struct DesignDocumentValidator: WriteValidator {
    /// A validation function's behaviour in Swift: nil accepts the write, an error rejects it.
    public typealias NativeFunction =
        @Sendable (_ write: ProposedWrite, _ user: UserContext, _ security: JSONObject) -> CouchError?

    /// nil where this server has no JavaScript engine: writes to a database with validation
    /// functions are then refused (500), never let through unchecked.
    public let queryServer: QueryServer?
    /// Functions known by their source text, run in Swift instead of JavaScript: the
    /// application's own rules work the same with or without a JavaScript engine, and cost
    /// no query-server round trip. Keyed by the source with surrounding whitespace trimmed.
    public let native: [String: NativeFunction]

    public init(queryServer: QueryServer?, native: [String: NativeFunction] = [:]) {
        self.queryServer = queryServer
        self.native = Dictionary(
            native.map { (DesignDocumentValidator.normalized($0.key), $0.value) }, uniquingKeysWith: { $1 })
    }

    static func normalized(_ source: String) -> String { source.trimmingCharacters(in: .whitespacesAndNewlines) }

    public func validate(
        _ writes: [ProposedWrite], database: DocumentDatabase, designDocuments: [JSONObject], user: UserContext
    ) async throws -> [CouchError?] {
        // The first design document (in id order) that rejects a write gives its error.
        var verdicts = [CouchError?](repeating: nil, count: writes.count)
        var javascript: [JSONObject] = []
        for ddoc in designDocuments {
            guard let source = ddoc["validate_doc_update"]?.stringValue,
                let function = native[DesignDocumentValidator.normalized(source)]
            else {
                javascript.append(ddoc)
                continue
            }
            for (index, write) in writes.enumerated() where verdicts[index] == nil {
                verdicts[index] = function(write, user, database.security)
            }
        }
        guard !javascript.isEmpty else { return verdicts }
        guard let queryServer else {
            let error = CouchError(
                status: 500, error: "javascript_unavailable",
                reason:
                    "This database has validate_doc_update functions, and this server has no JavaScript engine to run them"
            )
            return verdicts.map { $0 ?? error }
        }
        var userContext = user.json.objectValue ?? JSONObject()
        userContext.prepend("db", .string(database.name))
        let security = JSON.object(database.security)
        // One round trip per design document for the whole batch of writes.
        let pairs = JSON.array(writes.map { [.object($0.newDocument), $0.oldDocument.map(JSON.object) ?? .null] })
        for ddoc in javascript {
            let answers: [JSON]
            do {
                let answer = try await queryServer.call(
                    designDocument: ddoc, path: ["validate_doc_update", "batch"],
                    arguments: [pairs, .object(userContext), security])
                guard let list = answer.arrayValue, list.count == writes.count else {
                    throw QueryServer.Failure(
                        kind: .crashed, error: "os_process_error", reason: "Unexpected validation answer")
                }
                answers = list
            } catch let failure as QueryServer.Failure {
                answers = Array(
                    repeating: ["error", .string(failure.error), .string(failure.reason)], count: writes.count)
            }
            for (index, answer) in answers.enumerated() where verdicts[index] == nil {
                verdicts[index] = DesignDocumentValidator.verdict(answer)
            }
        }
        return verdicts
    }

    /// A function's answer for one write: nil (accepted) or the error that rejects it.
    static func verdict(_ answer: JSON) -> CouchError? {
        if let reason = answer["forbidden"] {
            return CouchError(status: 403, error: "forbidden", reason: reason.stringValue ?? reason.text)
        }
        if let reason = answer["unauthorized"] {
            return CouchError(status: 401, error: "unauthorized", reason: reason.stringValue ?? reason.text)
        }
        if case let .array(items) = answer, items.count == 3, items[0] == "error" {
            return CouchError(status: 500, error: items[1].stringValue ?? "error", reason: items[2].stringValue ?? "")
        }
        return nil
    }
}
