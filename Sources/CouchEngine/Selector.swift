import CouchCollation
public import CouchJSON
import Foundation
import LinearRegex

/// A Mango selector, parsed once and matched against many documents.
///
/// The semantics follow CouchDB's `mango_selector.erl`: comparisons use view collation (so
/// values of different types compare by type order), a condition on a missing field fails
/// except `{"$exists": false}`, and `$in`/`$nin` on an array value look at its elements.
public indirect enum Selector: Sendable {
    case and([Selector])
    case or([Selector])
    case nor([Selector])
    case not(Selector)
    /// Applies the inner selector to the value at a dotted path.
    case field([String], Selector)
    /// A condition on the current value.
    case condition(Condition)

    public enum Condition: Sendable {
        case eq(JSON), ne(JSON), lt(JSON), lte(JSON), gt(JSON), gte(JSON)
        case exists(Bool)
        case type(String)
        case `in`([JSON]), nin([JSON])
        case all([JSON])
        case size(Int)
        case mod(divisor: Int, remainder: Int)
        case regex(RegexBox)
        case beginsWith(String)
        case elemMatch(Selector)
        case allMatch(Selector)
        case keyMapMatch(Selector)
    }

    /// A compiled `$regex`: PCRE's syntax over bytes as CouchDB reads it, matched in linear time
    /// (`LinearRegex`), so no pattern holds a core for long; a document whose match needs more
    /// than `budget(for:)` steps does not match, as CouchDB's engine gives up at its match limit.
    public final class RegexBox: Sendable {
        let pattern: String
        let regex: LinearRegex
        init(_ pattern: String) throws(CouchError) {
            self.pattern = pattern
            do { regex = try LinearRegex(pattern) } catch {
                // CouchDB's error for a pattern its engine refuses; the reason says why.
                let why =
                    error.kind == .syntax ? error.reason : "\(error.reason) (this server matches $regex in linear time)"
                throw CouchError(
                    status: 400, error: "bad_arg",
                    reason: "Bad argument for operator $regex: \(JSON.string(pattern).text): \(why)")
            }
        }

        /// Steps one document's match may take: CouchDB's match limit (10,000,000), or more for a
        /// long value, so that linear work always finishes (64 states alive at every byte).
        static func budget(for bytes: Int) -> Int {
            max(10_000_000, bytes.multipliedReportingOverflow(by: 64).partialValue)
        }

        func matches(_ s: String) -> Bool {
            regex.matches(s, budget: RegexBox.budget(for: s.utf8.count))
        }
    }

    /// The conditions that every match must satisfy on `path`: those in the top-level
    /// conjunction (explicit `$and` or implicit), in any nesting of field objects.
    public func conditions(on path: [String]) -> [Condition] {
        switch self {
        case let .and(parts): return parts.flatMap { $0.conditions(on: path) }
        case let .field(fieldPath, inner):
            guard path.starts(with: fieldPath) else { return [] }
            let rest = Array(path.dropFirst(fieldPath.count))
            if rest.isEmpty { return inner.directConditions }
            return inner.conditions(on: rest)
        default: return []
        }
    }

    private var directConditions: [Condition] {
        switch self {
        case let .condition(c): return [c]
        case let .and(parts): return parts.flatMap(\.directConditions)
        default: return []
        }
    }

    /// The range of raw ids (`id >= low AND id < high`, by bytes) that every document this
    /// selector matches lies in, from the `$beginsWith` conditions on `_id` of its top-level
    /// conjunction (the longest); nil when it has none. A scan reads only that range, so a
    /// shared database's owner (whose selectors carry their `owner:` prefix) has other owners'
    /// documents neither examined nor counted.
    public var idPrefixRange: (low: String, high: String)? {
        let prefixes = conditions(on: ["_id"]).compactMap { condition -> String? in
            if case let .beginsWith(prefix) = condition { return prefix }
            return nil
        }
        guard let longest = prefixes.max(by: { $0.utf8.count < $1.utf8.count }), !longest.isEmpty else { return nil }
        return Selector.prefixRange(longest)
    }

    /// `[prefix, successor)`: every string that starts with `prefix` (by bytes) and no other,
    /// the successor being the prefix with its last character moved one code point on (UTF-8
    /// keeps code point order); nil when that character is the last code point.
    static func prefixRange(_ prefix: String) -> (low: String, high: String)? {
        var scalars = Array(prefix.unicodeScalars)
        guard let last = scalars.popLast() else { return nil }
        var next = last.value + 1
        if (0xD800...0xDFFF).contains(next) { next = 0xE000 }
        guard let successor = Unicode.Scalar(next) else { return nil }
        var high = String.UnicodeScalarView()
        high.append(contentsOf: scalars)
        high.append(successor)
        return (prefix, String(high))
    }

    /// The prefix when this selector is exactly `{"_id": {"$beginsWith": prefix}}`: a
    /// changes feed can then filter on ids alone, without reading any document body.
    public var idPrefix: String? {
        guard case let .field(path, .condition(.beginsWith(prefix))) = self, path == ["_id"] else { return nil }
        return prefix
    }

    static let types: Set<String> = ["null", "boolean", "number", "string", "array", "object"]

    /// Parses a selector object as sent to `_find`, `_changes` or `_index`.
    public init(json: JSON) throws(CouchError) {
        guard case let .object(object) = json else {
            throw CouchError(
                status: 400, error: "invalid_selector_json", reason: "Selector must be a JSON object, not: \(json)")
        }
        self = try Selector.parse(object)
    }

    /// `inField`: inside a field's object, where conditions (`$gt`, ...) apply to that field;
    /// at the top of a selector (and in `$and`/`$or`/`$nor`/`$not` there) a condition has no
    /// field to apply to, and CouchDB refuses it.
    static func parse(_ object: JSONObject, inField: Bool = false) throws(CouchError) -> Selector {
        var parts: [Selector] = []
        for (key, value) in object.members {
            if key.hasPrefix("$") {
                if !inField, !combinationOperators.contains(key) {
                    throw CouchError(
                        status: 400, error: "invalid_selector",
                        reason: "One or more conditions is missing a field name.")
                }
                parts.append(try parseOperator(key, value, inField: inField))
            } else {
                let path = Selector.splitPath(key)
                guard !path.isEmpty, !path.contains(where: \.isEmpty) else {
                    throw CouchError(status: 400, error: "invalid_field_name", reason: "Invalid field name: \(key).")
                }
                parts.append(.field(path, try parseValueSelector(value)))
            }
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    /// Operators that combine selectors rather than test a field.
    static let combinationOperators: Set<String> = ["$and", "$or", "$nor", "$not"]

    /// A field's selector: an object of operators (and nested fields), or a value meaning `$eq`.
    static func parseValueSelector(_ value: JSON) throws(CouchError) -> Selector {
        if case let .object(object) = value, !object.isEmpty {
            return try parse(object, inField: true)
        }
        return .condition(.eq(value))
    }

    static func selectorList(_ op: String, _ value: JSON, inField: Bool) throws(CouchError) -> [Selector] {
        guard case let .array(items) = value else { throw CouchError.badRequest("\(op) requires an array argument") }
        var result: [Selector] = []
        for item in items {
            guard case let .object(object) = item else {
                throw CouchError.badRequest("\(op) requires an array of objects")
            }
            result.append(try parse(object, inField: inField))
        }
        return result
    }

    static func parseOperator(_ op: String, _ value: JSON, inField: Bool = true) throws(CouchError) -> Selector {
        switch op {
        case "$and": return .and(try selectorList(op, value, inField: inField))
        case "$or": return .or(try selectorList(op, value, inField: inField))
        case "$nor": return .nor(try selectorList(op, value, inField: inField))
        case "$not":
            guard case let .object(object) = value else {
                throw CouchError.badRequest("$not requires an object argument")
            }
            return .not(try parse(object, inField: inField))
        case "$eq": return .condition(.eq(value))
        case "$ne": return .condition(.ne(value))
        case "$lt": return .condition(.lt(value))
        case "$lte": return .condition(.lte(value))
        case "$gt": return .condition(.gt(value))
        case "$gte": return .condition(.gte(value))
        case "$exists":
            guard case let .bool(flag) = value else { throw CouchError.badRequest("$exists requires a boolean") }
            return .condition(.exists(flag))
        case "$type":
            guard case let .string(name) = value, types.contains(name) else {
                throw CouchError.badRequest("$type must be one of null, boolean, number, string, array, object")
            }
            return .condition(.type(name))
        case "$in", "$nin", "$all":
            guard case let .array(items) = value else {
                throw CouchError.badRequest("\(op) requires an array argument")
            }
            return .condition(op == "$in" ? .in(items) : op == "$nin" ? .nin(items) : .all(items))
        case "$size":
            guard let n = value.intValue, n >= 0 else {
                throw CouchError.badRequest("$size requires a non-negative integer")
            }
            return .condition(.size(n))
        case "$mod":
            guard case let .array(args) = value, args.count == 2, let d = args[0].intValue, let r = args[1].intValue,
                d != 0,
                case .int = args[0], case .int = args[1]
            else {
                throw CouchError.badRequest("$mod requires [Divisor, Remainder] integers with a non-zero divisor")
            }
            return .condition(.mod(divisor: d, remainder: r))
        case "$regex":
            guard case let .string(pattern) = value else { throw invalidOperator(op) }
            return .condition(.regex(try RegexBox(pattern)))
        case "$beginsWith":
            guard case let .string(prefix) = value else { throw invalidOperator(op) }
            return .condition(.beginsWith(prefix))
        case "$elemMatch", "$allMatch", "$keyMapMatch":
            guard case .object = value else { throw CouchError.badRequest("\(op) requires an object argument") }
            let inner = try parseValueSelector(value)
            return .condition(
                op == "$elemMatch" ? .elemMatch(inner) : op == "$allMatch" ? .allMatch(inner) : .keyMapMatch(inner))
        case "$text":
            throw CouchError.badRequest("$text requires a text index, which this server does not provide")
        default:
            throw invalidOperator(op)
        }
    }

    static func invalidOperator(_ op: String) -> CouchError {
        CouchError(status: 400, error: "invalid_operator", reason: "Invalid operator: \(op)")
    }

    /// Splits `a.b\.c` into `["a", "b.c"]`.
    public static func splitPath(_ key: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var escaped = false
        for ch in key {
            if escaped {
                current.append(ch)
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else if ch == "." {
                parts.append(current)
                current = ""
            } else {
                current.append(ch)
            }
        }
        parts.append(current)
        return parts
    }

    /// The normalized form CouchDB reports (in `_explain`): implicit `$and` and `$eq` made
    /// explicit, nested field objects flattened to dotted paths.
    public var normalizedJSON: JSON { normalized(prefix: []) }

    private func normalized(prefix: [String]) -> JSON {
        switch self {
        case let .and(parts):
            return wrapField(
                prefix, ["$and": .array(parts.map { $0.normalized(prefix: prefix.isEmpty ? [] : prefix) })])
        case let .or(parts): return wrapField(prefix, ["$or": .array(parts.map { $0.normalized(prefix: []) })])
        case let .nor(parts): return wrapField(prefix, ["$nor": .array(parts.map { $0.normalized(prefix: []) })])
        case let .not(inner): return wrapField(prefix, ["$not": inner.normalized(prefix: [])])
        case let .field(path, inner):
            return inner.normalized(prefix: prefix + path)
        case let .condition(condition):
            return wrapField(prefix, condition.json)
        }
    }

    private func wrapField(_ path: [String], _ value: JSON) -> JSON {
        guard !path.isEmpty else { return value }
        let name = path.map { $0.replacingOccurrences(of: ".", with: "\\.") }.joined(separator: ".")
        return .object(JSONObject([(name, value)]))
    }

    /// True when this selector is exactly `{"$exists": false}`, the one condition a missing
    /// field satisfies.
    var isExistsFalse: Bool {
        if case .condition(.exists(false)) = self { return true }
        return false
    }

    /// Matches a whole document (or any value).
    public func matches(_ value: JSON) -> Bool { matches(Optional(value)) }

    func matches(_ value: JSON?) -> Bool {
        switch self {
        case let .and(parts): return parts.allSatisfy { $0.matches(value) }
        // As CouchDB's mango_selector: an empty `$or` is true, so an empty `$nor` is false.
        case let .or(parts): return parts.isEmpty || parts.contains { $0.matches(value) }
        case let .nor(parts): return !(parts.isEmpty || parts.contains { $0.matches(value) })
        case let .not(inner): return !inner.matches(value)
        case let .field(path, inner):
            guard let found = Selector.lookup(value, path) else {
                return inner.isExistsFalse || inner.isNegatedMissingOK
            }
            return inner.matches(found)
        case let .condition(condition):
            guard let value else { return condition.isExistsFalse }
            return condition.matches(value)
        }
    }

    /// `$and` of conditions containing only `$exists: false` (e.g. from a two-key object).
    private var isNegatedMissingOK: Bool {
        if case let .and(parts) = self { return parts.allSatisfy { $0.isExistsFalse } }
        return false
    }

    /// Puts `value` at a dotted path, making the objects on the way.
    public static func setPath(_ object: inout JSONObject, _ path: [String], _ value: JSON) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value
            return
        }
        var child = object[first]?.objectValue ?? JSONObject()
        setPath(&child, Array(path.dropFirst()), value)
        object[first] = .object(child)
    }

    /// Every field path the selector tests (a nested field object gives its inner paths; the
    /// selectors of `$elemMatch` and the like test the field's own value).
    public var fieldPaths: [[String]] {
        switch self {
        case let .and(parts), let .or(parts), let .nor(parts): return parts.flatMap(\.fieldPaths)
        case let .not(inner): return inner.fieldPaths
        case let .field(path, inner):
            let nested = inner.fieldPaths.map { path + $0 }
            return nested.isEmpty || inner.hasDirectCondition ? [path] + nested : nested
        case .condition: return []
        }
    }

    private var hasDirectCondition: Bool {
        switch self {
        case .condition: return true
        case let .and(parts), let .or(parts), let .nor(parts): return parts.contains(where: \.hasDirectCondition)
        case let .not(inner): return inner.hasDirectCondition
        case .field: return false
        }
    }

    /// The value at `path`, or nil when some step is missing.
    /// A segment that is a number picks an array's element, as in CouchDB's `mango_doc:get_field`.
    public static func lookup(_ value: JSON?, _ path: [String]) -> JSON? {
        var current = value
        for key in path {
            switch current {
            case let .object(object)?:
                guard let next = object[key] else { return nil }
                current = next
            case let .array(items)?:
                guard let position = Int(key), key.allSatisfy(\.isASCII), items.indices.contains(position) else {
                    return nil
                }
                current = items[position]
            default:
                return nil
            }
        }
        return current
    }
}

extension Selector.Condition {
    /// `{"$op": argument}`.
    var json: JSON {
        let (op, arg): (String, JSON)
        switch self {
        case let .eq(v): (op, arg) = ("$eq", v)
        case let .ne(v): (op, arg) = ("$ne", v)
        case let .lt(v): (op, arg) = ("$lt", v)
        case let .lte(v): (op, arg) = ("$lte", v)
        case let .gt(v): (op, arg) = ("$gt", v)
        case let .gte(v): (op, arg) = ("$gte", v)
        case let .exists(b): (op, arg) = ("$exists", .bool(b))
        case let .type(t): (op, arg) = ("$type", .string(t))
        case let .in(v): (op, arg) = ("$in", .array(v))
        case let .nin(v): (op, arg) = ("$nin", .array(v))
        case let .all(v): (op, arg) = ("$all", .array(v))
        case let .size(n): (op, arg) = ("$size", .int(n))
        case let .mod(d, r): (op, arg) = ("$mod", [.int(d), .int(r)])
        case let .regex(box): (op, arg) = ("$regex", .string(box.pattern))
        case let .beginsWith(p): (op, arg) = ("$beginsWith", .string(p))
        case let .elemMatch(s): (op, arg) = ("$elemMatch", s.normalizedJSON)
        case let .allMatch(s): (op, arg) = ("$allMatch", s.normalizedJSON)
        case let .keyMapMatch(s): (op, arg) = ("$keyMapMatch", s.normalizedJSON)
        }
        return .object(JSONObject([(op, arg)]))
    }

    var isExistsFalse: Bool {
        if case .exists(false) = self { return true }
        return false
    }

    func matches(_ value: JSON) -> Bool {
        switch self {
        case let .eq(arg): return JSON.collate(value, arg) == 0
        case let .ne(arg): return JSON.collate(value, arg) != 0
        case let .lt(arg): return JSON.collate(value, arg) < 0
        case let .lte(arg): return JSON.collate(value, arg) <= 0
        case let .gt(arg): return JSON.collate(value, arg) > 0
        case let .gte(arg): return JSON.collate(value, arg) >= 0
        case let .exists(flag): return flag
        case let .type(name): return value.typeName == name
        case let .in(args):
            if case let .array(values) = value {
                return args.contains { arg in values.contains { JSON.collate($0, arg) == 0 } }
            }
            return args.contains { JSON.collate(value, $0) == 0 }
        case let .nin(args):
            if case let .array(values) = value {
                return !args.contains { arg in values.contains { JSON.collate($0, arg) == 0 } }
            }
            return !args.contains { JSON.collate(value, $0) == 0 }
        case let .all(args):
            guard case let .array(values) = value else { return false }
            return args.allSatisfy { arg in values.contains { JSON.collate($0, arg) == 0 } }
        case let .size(n):
            guard case let .array(values) = value else { return false }
            return values.count == n
        case let .mod(divisor, remainder):
            guard case let .int(i) = value else { return false }
            // Int.min % -1 overflows (and traps); its remainder is 0.
            let (r, overflow) = i.remainderReportingOverflow(dividingBy: divisor)
            return (overflow ? 0 : r) == remainder
        case let .regex(box):
            guard case let .string(s) = value else { return false }
            return box.matches(s)
        case let .beginsWith(prefix):
            // By bytes, as CouchDB compares (String.hasPrefix would take "e\u{301}" for "é").
            guard case let .string(s) = value else { return false }
            return s.utf8.starts(with: prefix.utf8)
        case let .elemMatch(inner):
            guard case let .array(values) = value else { return false }
            return values.contains { inner.matches($0) }
        case let .allMatch(inner):
            guard case let .array(values) = value, !values.isEmpty else { return false }
            return values.allSatisfy { inner.matches($0) }
        case let .keyMapMatch(inner):
            guard case let .object(object) = value else { return false }
            return object.members.contains { inner.matches(.string($0.key)) }
        }
    }
}
