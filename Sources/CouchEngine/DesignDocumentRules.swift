import CouchJSON

/// CouchDB's built-in reduce functions, computed natively (by the views of
/// `CouchIndexes`); design documents may name only these after `_`.
public enum BuiltinReducer: String, Sendable, CaseIterable {
    case count = "_count"
    case sum = "_sum"
    case stats = "_stats"
    case approxCountDistinct = "_approx_count_distinct"

    /// The reducer a view's `reduce` source names: CouchDB reads only the name's start, so
    /// `"_sum\n"` and `"_statsorama"` are `_sum` and `_stats`.
    public init?(source: String) {
        guard
            let reducer = [Self.sum, .count, .stats, .approxCountDistinct].first(where: {
                source.hasPrefix($0.rawValue)
            })
        else { return nil }
        self = reducer
    }
}

/// The shape CouchDB requires of a design document before storing it
/// (`couch_mrview:validate_ddoc_fields`): the type of each known member, a `map` in every
/// view (an object for `"language": "query"`, source text otherwise), and only CouchDB's
/// built-in reduce names after `_`. A refusal is 400 `invalid_design_doc` with CouchDB's reason.
enum DesignDocumentRules {
    enum Kind: String {
        case object, string, array, boolean
        func admits(_ value: JSON) -> Bool {
            switch (self, value) {
            case (.object, .object), (.string, .string), (.array, .array), (.boolean, .bool): return true
            default: return false
            }
        }
    }

    /// A step of a rule: a named member, or every member of an object (`any`).
    enum Step {
        case member(String, [Kind])
        case any([Kind])
    }

    static func rules(mapKind: Kind) -> [[Step]] {
        [
            [.member("filters", [.object]), .any([.object, .string])],
            [.member("language", [.string])],
            [.member("lists", [.object]), .any([.object, .string])],
            [.member("options", [.object])],
            [.member("options", [.object]), .member("include_design", [.boolean])],
            [.member("options", [.object]), .member("local_seq", [.boolean])],
            [.member("options", [.object]), .member("partitioned", [.boolean])],
            [.member("rewrites", [.string, .array])],
            [.member("shows", [.object]), .any([.object, .string])],
            [.member("updates", [.object]), .any([.object, .string])],
            [.member("validate_doc_update", [.string])],
            [.member("views", [.object]), .member("lib", [.object])],
            [.member("views", [.object]), .any([.object]), .member("map", [mapKind])],
            [.member("views", [.object]), .any([.object]), .member("reduce", [.string])],
        ]
    }

    static func validate(_ body: JSONObject) throws(CouchError) {
        let mapKind: Kind = body["language"] == .string("query") ? .object : .string
        for rule in rules(mapKind: mapKind) {
            if let (path, kinds) = firstMismatch(.object(body), rule[...], path: []) {
                // CouchDB names the types in the reverse of the rule's order.
                let types = kinds.reversed().map(\.rawValue).joined(separator: " or ")
                throw invalid("`\(path.joined(separator: "."))` field must have \(types) type")
            }
        }
        guard case let .object(views)? = body["views"] else { return }
        for (name, view) in views.members where name != "lib" {
            guard let map = view["map"], map != .null else { throw invalid("View `\(name)` must contain map function") }
            if case let .string(reduce)? = view["reduce"], reduce.hasPrefix("_"),
                BuiltinReducer(source: reduce) == nil
            {
                throw invalid("`\(reduce)` is not a supported reduce function.")
            }
        }
    }

    /// The path and expected kinds of the first member that breaks the rule; absent members pass.
    private static func firstMismatch(_ value: JSON, _ steps: ArraySlice<Step>, path: [String]) -> ([String], [Kind])? {
        guard let step = steps.first, case let .object(object) = value else { return nil }
        switch step {
        case let .member(key, kinds):
            guard let child = object[key] else { return nil }
            guard kinds.contains(where: { $0.admits(child) }) else { return (path + [key], kinds) }
            return firstMismatch(child, steps.dropFirst(), path: path + [key])
        case let .any(kinds):
            for (key, child) in object.members {
                guard kinds.contains(where: { $0.admits(child) }) else { return (path + [key], kinds) }
                if let found = firstMismatch(child, steps.dropFirst(), path: path + [key]) { return found }
            }
            return nil
        }
    }

    private static func invalid(_ reason: String) -> CouchError {
        CouchError(status: 400, error: "invalid_design_doc", reason: reason)
    }
}
