import CouchEngine
import CouchJSON

/// Runs design documents' `validate_doc_update(newDoc, oldDoc, userCtx, secObj)` functions
/// before writes, as CouchDB does: `throw({forbidden: reason})` rejects a write with 403,
/// `throw({unauthorized: reason})` with 401, any other exception with 500 and the reason.
/// Every function must accept a write for it to be stored.
public struct DesignDocumentValidator: WriteValidator {
    /// nil where this server has no JavaScript engine: writes to a database with validation
    /// functions are then refused (500), never let through unchecked.
    public let queryServer: QueryServer?

    public init(queryServer: QueryServer?) {
        self.queryServer = queryServer
    }

    public func validate(
        _ writes: [ProposedWrite], database: Database, designDocuments: [JSONObject], user: UserContext
    ) async throws -> [EngineError?] {
        guard let queryServer else {
            let error = EngineError(
                status: 500, error: "javascript_unavailable",
                reason: "This database has validate_doc_update functions, and this server has no JavaScript engine to run them")
            return writes.map { _ in error }
        }
        var userContext = user.json.objectValue ?? JSONObject()
        userContext.prepend("db", .string(database.name))
        let security = JSON.object(database.security)
        var verdicts: [EngineError?] = []
        verdicts.reserveCapacity(writes.count)
        for write in writes {
            var verdict: EngineError?
            for ddoc in designDocuments where verdict == nil {
                let arguments: [JSON] = [
                    .object(write.newDocument), write.oldDocument.map(JSON.object) ?? .null, .object(userContext), security,
                ]
                do {
                    let answer = try await queryServer.call(designDocument: ddoc, path: ["validate_doc_update"], arguments: arguments)
                    if let reason = answer["forbidden"] {
                        verdict = EngineError(status: 403, error: "forbidden", reason: reason.stringValue ?? reason.text)
                    } else if let reason = answer["unauthorized"] {
                        verdict = EngineError(status: 401, error: "unauthorized", reason: reason.stringValue ?? reason.text)
                    }
                } catch let failure as QueryServer.Failure {
                    verdict = EngineError(status: 500, error: failure.error, reason: failure.reason)
                }
            }
            verdicts.append(verdict)
        }
        return verdicts
    }
}
