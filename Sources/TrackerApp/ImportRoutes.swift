import CouchJSON
import HistoryImport
import HTTPServing
import Hummingbird

/// `/api/me/imports` (a user's own history files) and `/api/users/{name}/imports` (an admin's,
/// for `lt import`): `POST` streams a file in and answers when it is imported, `GET` lists
/// running and recent imports with their progress, `DELETE …/{id}` stops a running one.
extension TrackerHTTP {
    func importRoutes(_ api: RouterGroup<ClientRequestContext>) {
        api.post("me/imports") { request, context in
            try await startImport(for: try await requireUser(request, context), request)
        }
        api.get("me/imports") { request, context in
            listImports(of: try await requireUser(request, context))
        }
        api.delete("me/imports/:id") { request, context in
            try cancelImport(context.parameter("id"), of: try await requireUser(request, context))
        }
        api.post("users/:name/imports") { request, context in
            let user = try await importingAdmin(request, context)
            return try await startImport(for: user, request)
        }
        api.get("users/:name/imports") { request, context in
            listImports(of: try await importingAdmin(request, context))
        }
        api.delete("users/:name/imports/:id") { request, context in
            try cancelImport(context.parameter("id"), of: try await importingAdmin(request, context))
        }
    }

    /// The user an admin imports for (`/api/users/{name}/imports`).
    private func importingAdmin(_ request: Request, _ context: ClientRequestContext) async throws -> String {
        _ = try await requireRole(["_admin"], request, context, purpose: "Importing for another user is for admins")
        let user = try context.parameters.require("name")
        try TrackerService.validate(username: user)
        return user
    }

    /// Runs an import of the request's body: query `format` (else detected), `dry_run=true`,
    /// `name` (the file's), and for CSV `lat_column`, `lon_column`, `time_column`.
    private func startImport(for user: String, _ request: Request) async throws -> Response {
        let query = TrackerHTTP.query(request)
        var asked = HistoryImports.Request(dryRun: query["dry_run"] == "true", fileName: query["name"])
        if let format = query["format"], !format.isEmpty {
            guard let known = HistoryFormat(rawValue: format) else {
                throw TrackerService.Failure(
                    400, "bad_request",
                    "`format` must be one of \(HistoryFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            asked.format = known
        }
        if query["lat_column"] != nil || query["lon_column"] != nil || query["time_column"] != nil {
            asked.columns = CSVColumns.Names(
                latitude: query["lat_column"], longitude: query["lon_column"], time: query["time_column"])
        }
        // The request succeeded whatever became of the file: the summary's state says (a file
        // that is no history, or stops part way, is `failed` with its error and what was written).
        return TrackerHTTP.reply(try await imports.run(user: user, asked, body: request.body).json)
    }

    private func listImports(of user: String) -> Response {
        TrackerHTTP.reply(["imports": .array(imports.list(of: user).map(\.json))])
    }

    private func cancelImport(_ id: String, of user: String) throws -> Response {
        guard imports.cancel(id, of: user) else {
            throw TrackerService.Failure(404, "not_found", "No running import \(id)")
        }
        return TrackerHTTP.reply(["ok": true, "id": .string(id)], status: .accepted)
    }
}
