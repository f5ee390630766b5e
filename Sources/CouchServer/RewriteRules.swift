package import CouchJSON
import CouchProtocol
import Foundation

/// A design document's declarative `rewrites` array, resolved as CouchDB 3's `chttpd_rewrite`
/// resolves it: the first rule whose `method` and `from` match the path after `_rewrite` gives
/// the new path (`to`, with `:name` and `*` filled in), relative to the design document, and
/// its query (the rule's `query` with variables filled in, then every binding of the path and
/// the request's query string not named by the rule's query).
///
/// Rules: `from` and `to` are paths of literal segments, `:name` (one segment, bound) and `*`
/// (the rest of the path); `query` an object whose string values may be `:name` or `*` (or
/// arrays holding `:name`); `formats` maps a name to `int` or `bool`. Values of `key`,
/// `startkey`, `start_key`, `endkey`, `end_key` and `keys` are JSON both ways.
package struct RewriteRules {
    enum Segment: Equatable {
        case literal(String)
        /// `:name`, or `*` where it is not the last segment (CouchDB binds it to one segment).
        case variable(String)
        /// `*` at the end: the rest of the path.
        case rest
    }

    struct Rule {
        /// nil matches every method.
        var method: String?
        var from: [Segment]
        var to: [Segment]
        var query: [(String, JSON)]
        var formats: [String: String]
    }

    /// A binding: a path variable's segment (a string) or a query parameter's value.
    typealias Bindings = [(name: String, value: JSON)]

    let rules: [Rule]

    /// The query parameters CouchDB reads as JSON in a rewrite.
    static let jsonParameters: Set<String> = ["key", "startkey", "start_key", "endkey", "end_key", "keys"]

    /// The rules of a `rewrites` array. With `secure` (CouchDB's `[chttpd] secure_rewrites`,
    /// the default), a rule climbing more than two levels (out of the database) is refused.
    package init(_ rules: [JSON], secure: Bool) throws {
        self.rules = try rules.compactMap { rule in
            guard let rule = rule.objectValue else { return nil }
            guard let to = rule["to"]?.stringValue else {
                throw CouchError(status: 500, error: "error", reason: "invalid_rewrite_target")
            }
            return Rule(
                method: rule["method"]?.stringValue,
                from: try rule["from"]?.stringValue.map { try Self.segments($0, secure: secure) } ?? [.rest],
                to: try Self.segments(to, secure: secure),
                query: rule["query"]?.objectValue?.members.map { ($0.key, $0.value) } ?? [],
                formats: (rule["formats"]?.objectValue?.members ?? []).reduce(into: [:]) { formats, member in
                    if let format = member.value.stringValue { formats[member.key] = format }
                })
        }
    }

    /// A rule path's segments; empty segments are dropped.
    static func segments(_ path: String, secure: Bool) throws -> [Segment] {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var segments: [Segment] = []
        var climbs = 0
        for (index, part) in parts.enumerated() {
            if part == ".." {
                if climbs == 2, secure {
                    throw CouchError(status: 500, error: "insecure_rewrite_rule", reason: "too many ../.. segments")
                }
                climbs += 1
            }
            if part == "*" {
                segments.append(index == parts.count - 1 ? .rest : .variable("*"))
            } else if part.hasPrefix(":") {
                segments.append(.variable(String(part.dropFirst())))
            } else {
                segments.append(.literal(part))
            }
        }
        return segments
    }

    /// The request's query string as a rewrite binds it: the JSON parameters parsed (a value
    /// that is not JSON stays the text it is).
    static func queryBindings(_ pairs: [(String, String)]) -> Bindings {
        pairs.map { name, value in
            (
                name,
                jsonParameters.contains(name)
                    ? ((try? JSON.parse(Array(value.utf8))) ?? .string(value)) : .string(value)
            )
        }
    }

    /// The new path and query (escaped, relative to the design document: `_view/x?k=v`,
    /// `../../other`), or nil when no rule matches.
    package func resolve(method: String, path: [String], query: [(String, String)]) -> String? {
        let requestQuery = Self.queryBindings(query)
        for rule in rules where rule.method == nil || rule.method == method {
            guard let (remaining, pathBindings) = Self.bind(rule.from, path) else { continue }
            let bindings = pathBindings + requestQuery
            let ruleQuery: Bindings = rule.query.reversed().map { name, value in
                (name, Self.fill(value, bindings, rule.formats))
            }
            let named = Set(ruleQuery.map(\.name))
            let final = bindings.filter { !named.contains($0.name) } + ruleQuery
            let segments = Self.newPath(rule.to, final, remaining)
            let parameters = final.reversed().compactMap { binding -> (String, String)? in
                guard binding.name != "*" else { return nil }
                return (binding.name, Self.queryText(binding.name, binding.value))
            }
            var target = segments.map(Self.quotePlus).joined(separator: "/")
            if !parameters.isEmpty {
                target +=
                    "?" + parameters.map { Self.quotePlus($0.0) + "=" + Self.quotePlus($0.1) }.joined(separator: "&")
            }
            return target
        }
        return nil
    }

    /// Matches a rule's `from` against the path: the segments left for `*`, and the variables
    /// bound (the latest first, as CouchDB looks them up).
    static func bind(_ from: [Segment], _ path: [String]) -> (remaining: [String], bindings: Bindings)? {
        var bindings: Bindings = []
        var index = 0
        for segment in from {
            if segment == .rest { return (Array(path[index...]), bindings) }
            guard index < path.count else { return nil }
            switch segment {
            case .literal(let text): guard text == path[index] else { return nil }
            case .variable(let name): bindings.insert((name, .string(path[index])), at: 0)
            case .rest: break
            }
            index += 1
        }
        return index == path.count ? ([], bindings) : nil
    }

    /// A rule's query value with `:name` (and a lone `*`) replaced by what is bound to it.
    static func fill(_ value: JSON, _ bindings: Bindings, _ formats: [String: String]) -> JSON {
        switch value {
        case .string(let text) where text == "*":
            return variable("*", bindings, default: value, formats)
        case .string(let text) where text.hasPrefix(":"):
            return variable(String(text.dropFirst()), bindings, default: value, formats)
        case .array(let items):
            return .array(
                items.map { item in
                    if case let .string(text) = item, text.hasPrefix(":") {
                        return variable(String(text.dropFirst()), bindings, default: item, formats)
                    }
                    return item
                })
        default:
            return value
        }
    }

    static func variable(
        _ name: String, _ bindings: Bindings, default fallback: JSON, _ formats: [String: String]
    ) -> JSON {
        let value = bindings.first { $0.name == name }?.value ?? fallback
        guard let format = formats[name], case let .string(text) = value else { return value }
        switch format {
        case "int": return Int(text).map(JSON.int) ?? value
        case "bool":
            switch text.lowercased() {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: return value
            }
        default: return value
        }
    }

    /// `to` with its variables filled: `*` ends it with the rest of the request's path; a
    /// variable bound to nothing is `undefined`, as in CouchDB.
    static func newPath(_ to: [Segment], _ bindings: Bindings, _ remaining: [String]) -> [String] {
        var path: [String] = []
        for segment in to {
            switch segment {
            case .rest, .variable("*"): return path + remaining
            case .literal(let text): path.append(text)
            case .variable(let name):
                path.append(bindings.first { $0.name == name }.map { segmentText($0.value) } ?? "undefined")
            }
        }
        return path
    }

    static func segmentText(_ value: JSON) -> String {
        if case let .string(text) = value { return text }
        return value.text
    }

    /// A query value as text: JSON for the key parameters, strings as they are.
    static func queryText(_ name: String, _ value: JSON) -> String {
        jsonParameters.contains(name) ? value.text : segmentText(value)
    }

    /// mochiweb's `quote_plus`: all but letters, digits and `-_.~` escaped, a space as `+`.
    static func quotePlus(_ text: String) -> String {
        CouchURL.encode(text).replacingOccurrences(of: "%20", with: "+")
    }

    /// CouchDB's `normalize_path`: `.` dropped, `..` removes the segment before it (kept at
    /// the start), empty segments dropped; always absolute.
    package static func normalized(_ path: String) -> String {
        var segments: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..":
                if segments.isEmpty || segments.last == ".." { segments.append(part) } else { segments.removeLast() }
            default: segments.append(part)
            }
        }
        return "/" + segments.joined(separator: "/")
    }
}
