/// An error with CouchDB's meaning: an HTTP status, a short `error` word and a human `reason`.
/// The engine speaks no HTTP, but CouchDB defines its errors this way, and every layer, from
/// the engine to the application, reports them unchanged as `{"error","reason"}`.
public struct CouchError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let error: String
    public let reason: String

    public init(status: Int, error: String, reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    public var description: String { "\(status) \(error): \(reason)" }

    public static let conflict = CouchError(status: 409, error: "conflict", reason: "Document update conflict.")
    public static let missing = CouchError(status: 404, error: "not_found", reason: "missing")
    public static let deleted = CouchError(status: 404, error: "not_found", reason: "deleted")
    public static let databaseNotFound = CouchError(status: 404, error: "not_found", reason: "Database does not exist.")
    public static let databaseExists = CouchError(
        status: 412, error: "file_exists", reason: "The database could not be created, the file already exists.")

    /// CouchDB's 404 for a design function that is not there: `missing json key: K`, K the first
    /// key of `path` the design document lacks (`shows` when it has none, else the name).
    public static func missingKey(_ path: [String], in object: JSONObject) -> CouchError {
        var current = JSON.object(object)
        for key in path {
            guard let next = current[key] else { return notFound("missing json key: \(key)") }
            current = next
        }
        return notFound("missing json key: \(path.last ?? "")")
    }

    public static func notFound(_ reason: String) -> CouchError {
        CouchError(status: 404, error: "not_found", reason: reason)
    }
    public static func badRequest(_ reason: String) -> CouchError {
        CouchError(status: 400, error: "bad_request", reason: reason)
    }
    public static func invalidDocument(_ reason: String) -> CouchError {
        CouchError(status: 400, error: "doc_validation", reason: reason)
    }
    public static func illegalDatabaseName(_ name: String) -> CouchError {
        CouchError(
            status: 400, error: "illegal_database_name",
            reason:
                "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."
        )
    }
    public static func missingStub(_ name: String) -> CouchError {
        CouchError(status: 412, error: "missing_stub", reason: "Invalid attachment stub in the document for \(name)")
    }
    public static func corrupt(_ what: String) -> CouchError {
        CouchError(status: 500, error: "internal_server_error", reason: "Corrupt \(what) in storage.")
    }
    /// A failure of the machine (a file that cannot be written or synced), not of the request.
    public static func internalError(_ reason: String) -> CouchError {
        CouchError(status: 500, error: "internal_server_error", reason: reason)
    }
    public static func forbidden(_ reason: String) -> CouchError {
        CouchError(status: 403, error: "forbidden", reason: reason)
    }
}
