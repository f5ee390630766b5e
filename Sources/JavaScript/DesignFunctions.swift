import CouchCollation
public import CouchEngine
public import CouchIndexes
import Foundation
public import CouchJSON

/// Design-document functions run by the query server, as the engine's types: views
/// (`ViewDefinition`), `_changes` filters (`DocumentFilter`) and reduce functions.
public struct DesignFunctions: Sendable {
    public let queryServer: QueryServer

    public init(queryServer: QueryServer) {
        self.queryServer = queryServer
    }

    /// The names of a design document's views (`views.lib` holds modules, not a view).
    public static func viewNames(_ ddoc: JSONObject) -> [String] {
        (ddoc["views"]?.objectValue?.members ?? []).compactMap { name, view in
            name != "lib" && view["map"]?.stringValue != nil ? name : nil
        }
    }

    /// The index signature of a view: its map source and the `views.lib` modules it may
    /// `require`. Known without running JavaScript (for `_info` and `_view_cleanup`).
    public static func viewSignature(_ ddoc: JSONObject, _ name: String) -> String? {
        guard let map = ddoc["views"]?[name]?["map"]?.stringValue else { return nil }
        let collation = KeyCollation(viewOptions: ddoc["views"]?[name]?["options"])
        return ViewDefinition.signature(
            code: viewCode(map: map, lib: ddoc["views"]?["lib"], options: ddoc["options"]), collation: collation)
    }

    /// Everything a view's rows depend on: its map, the modules it may require, and the design
    /// document's `include_design` and `local_seq` options (which change what it is given).
    static func viewCode(map: String, lib: JSON?, options: JSON?) -> String {
        let (includeDesign, localSeq) = documentOptions(options)
        return map + "\u{0}" + (lib?.text ?? "") + (includeDesign ? "\u{0}include_design" : "")
            + (localSeq ? "\u{0}local_seq" : "")
    }

    static func documentOptions(_ options: JSON?) -> (includeDesign: Bool, localSeq: Bool) {
        (options?["include_design"] == true, options?["local_seq"] == true)
    }

    /// The view `name` of a design document, mapped (and reduced, if it has a JavaScript
    /// reduce function) by the query server.
    public func view(_ ddoc: JSONObject, _ name: String) throws -> ViewDefinition {
        guard name != "lib", let definition = ddoc["views"]?[name]?.objectValue,
            let map = definition["map"]?.stringValue
        else {
            throw CouchError.notFound("missing_named_view")
        }
        if let language = ddoc["language"]?.stringValue, language != "javascript" {
            throw CouchError(
                status: 400, error: "unsupported_language",
                reason: "Design document language \(language) is not supported")
        }
        let lib = ddoc["views"]?["lib"]
        let code = DesignFunctions.viewCode(map: map, lib: lib, options: ddoc["options"])
        let collation = KeyCollation(viewOptions: definition["options"])
        let signature = ViewDefinition.signature(code: code, collation: collation)
        let queryServer = self.queryServer
        var reducer: ViewReducer?
        if let source = definition["reduce"]?.stringValue {
            let trimmed = source.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.hasPrefix("_") {
                guard let builtin = BuiltinReducer(source: trimmed) else {
                    throw CouchError.badRequest("Unknown builtin reduce function: \(trimmed)")
                }
                reducer = .builtin(builtin)
            } else {
                reducer = .custom(
                    reduce: { rows in
                        try await Self.translating { try await queryServer.reduce(functions: [source], rows: rows)[0] }
                    },
                    rereduce: { values in
                        try await Self.translating {
                            try await queryServer.rereduce(functions: [source], values: values)[0]
                        }
                    })
            }
        }
        var view = ViewDefinition(
            code: code,
            batchMap: { docs in
                let results = try await Self.translating {
                    try await queryServer.map(key: signature, functions: [map], lib: lib, documents: docs)
                }
                return results.map { $0.first ?? [] }
            }, reduce: reducer, collation: collation)
        (view.includeDesign, view.localSeq) = DesignFunctions.documentOptions(ddoc["options"])
        return view
    }

    /// A `_changes` filter from `filters.<name>`: `filter(doc, req)` for each document.
    public func filter(_ ddoc: JSONObject, _ name: String, request: JSON) throws -> DocumentFilter {
        guard ddoc["filters"]?[name]?.stringValue != nil else {
            throw CouchError.missingKey(["filters", name], in: ddoc)
        }
        let queryServer = self.queryServer
        return { docs in
            try await Self.verdicts(
                queryServer, ddoc, ["filters", name], [.array(docs.map(JSON.object)), request], count: docs.count)
        }
    }

    /// The `_view` filter: documents the view's map function emits at least one row for.
    public func viewFilter(_ ddoc: JSONObject, _ view: String) throws -> DocumentFilter {
        guard view != "lib", ddoc["views"]?[view]?["map"]?.stringValue != nil else {
            throw CouchError.missingKey(["views", view, "map"], in: ddoc)
        }
        let queryServer = self.queryServer
        return { docs in
            try await Self.verdicts(
                queryServer, ddoc, ["views", view, "map"], [.array(docs.map(JSON.object))], count: docs.count)
        }
    }

    static func verdicts(
        _ queryServer: QueryServer, _ ddoc: JSONObject, _ path: [String], _ arguments: [JSON], count: Int
    ) async throws -> [Bool] {
        let answer = try await translating {
            try await queryServer.call(designDocument: ddoc, path: path, arguments: arguments)
        }
        guard answer[0] == true, let list = answer[1]?.arrayValue, list.count == count else {
            throw CouchError(status: 500, error: "os_process_error", reason: "Unexpected filter answer")
        }
        return list.map { $0 == true }
    }

    /// Query server failures as CouchDB's errors: the query server's words, with the status
    /// CouchDB gives an error a function throws by one of its names (`not_found` 404,
    /// `not_acceptable` 406, ...); 500 for any other.
    public static func translating<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let failure as QueryServer.Failure {
            let status = failure.kind == .javascript ? statuses[failure.error] ?? 500 : 500
            throw CouchError(status: status, error: failure.error, reason: failure.reason)
        }
    }

    /// The HTTP status of CouchDB's error names a design function may throw.
    static let statuses: [String: Int] = [
        "bad_request": 400, "query_parse_error": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404,
        "method_not_allowed": 405, "not_acceptable": 406, "conflict": 409,
    ]
}
