import CouchCollation
import CouchJSON

/// `_sum` as CouchDB computes it (`couch_query_servers:builtin_sum_rows`): numbers add; arrays
/// add element-wise (the shorter one's missing elements taken as they are, unchecked); objects
/// add member-wise by name (members sorted by name), nested freely. A value it cannot add does
/// not fail the request: the reduction becomes `{"error":"builtin_reduce_error","reason":…,
/// "caused_by":…}`, and stays that through later rows.
enum BuiltinSum {
    static let reason =
        "The _sum function requires that map values be numbers, arrays of numbers, or objects. "
        + "Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the "
        + "values for all fields are themselves numbers, arrays of numbers, or objects."

    /// Why adding stopped: the reduction to return instead of a sum.
    struct Stop: Error { let reduction: JSON }

    static func rows(_ values: [JSON]) throws -> JSON {
        var sum: JSON = .int(0)
        do {
            for value in values { sum = try add(value, to: sum) }
        } catch let stop as Stop {
            return stop.reduction
        }
        return sum
    }

    static func add(_ value: JSON, to sum: JSON) throws -> JSON {
        switch (value, sum) {
        case _ where value.isNumber && sum.isNumber:
            return addNumbers(value, sum)
        case let (.array(v), .array(s)):
            return .array(try addArrays(s, v))
        case let (_, .array(s)) where value.isNumber:
            return .array(try addArrays(s, [value]))
        case let (.array(v), _) where sum.isNumber:
            return .array(try addArrays([sum], v))
        case let (.object(props), _):
            if props.members.first(where: { $0.key == "error" })?.value == "builtin_reduce_error" {
                throw Stop(reduction: value)
            }
            if case .int(0) = sum { return value }
            guard case let .object(sumProps) = sum else {
                // An object after a number or an array is where CouchDB's `sum_values` has no
                // case: the request fails (500 `{case_clause,…}`), it is not an error value.
                throw CouchError(
                    status: 500, error: "{case_clause,\(ErlangTerm.format(sum))}",
                    reason: "_sum cannot add an object to \(sum.text)")
            }
            return .object(JSONObject(try addObjects(sorted(props), sorted(sumProps))))
        default:
            throw invalid(value)
        }
    }

    static func addNumbers(_ a: JSON, _ b: JSON) -> JSON {
        if case let .int(x) = a, case let .int(y) = b {
            let (total, overflow) = x.addingReportingOverflow(y)
            if !overflow { return .int(total) }
        }
        return .double((a.doubleValue ?? 0) + (b.doubleValue ?? 0))
    }

    /// Element by element while both have numbers; the rest of the longer one as it is.
    static func addArrays(_ xs: [JSON], _ ys: [JSON]) throws -> [JSON] {
        var out: [JSON] = []
        var i = 0
        while i < xs.count, i < ys.count {
            guard xs[i].isNumber, ys[i].isNumber else { throw invalid(.array(Array(xs[i...]))) }
            out.append(addNumbers(xs[i], ys[i]))
            i += 1
        }
        return out + xs[i...] + ys[i...]
    }

    /// Members merged by name (both sorted by name's bytes, as Erlang sorts binaries).
    static func addObjects(
        _ a: [(key: String, value: JSON)], _ b: [(key: String, value: JSON)]
    ) throws -> [(key: String, value: JSON)] {
        var out: [(key: String, value: JSON)] = []
        var i = 0, j = 0
        while i < a.count, j < b.count {
            if a[i].key == b[j].key {
                out.append((a[i].key, try add(a[i].value, to: b[j].value)))
                i += 1
                j += 1
            } else if a[i].key.utf8.lexicographicallyPrecedes(b[j].key.utf8) {
                out.append(a[i])
                i += 1
            } else {
                out.append(b[j])
                j += 1
            }
        }
        return out + a[i...] + b[j...]
    }

    static func sorted(_ object: JSONObject) -> [(key: String, value: JSON)] {
        object.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    static func invalid(_ cause: JSON) -> Stop {
        Stop(reduction: ["error": "builtin_reduce_error", "reason": .string(reason), "caused_by": cause])
    }
}

/// `_stats` as CouchDB computes it (`builtin_stats`): for numbers, `{sum, count, min, max,
/// sumsqr}`; for arrays of numbers, one such object per position; objects that already hold
/// those five numbers (earlier reductions) are combined. Anything else fails the request with
/// 500 `invalid_value` and CouchDB's words.
enum BuiltinStats {
    /// A partial statistic: sum, count, min, max, sum of squares.
    indirect enum Partial {
        case one(sum: JSON, count: JSON, min: JSON, max: JSON, sumsqr: JSON)
        case many([Partial])
    }

    static func rows(_ values: [JSON]) throws -> JSON {
        guard let first = values.first else { return pack(.one(sum: 0, count: 0, min: 0, max: 0, sumsqr: 0)) }
        var stats = try initial(first)
        for value in values.dropFirst() { stats = try combine(value, stats) }
        return pack(stats)
    }

    static func initial(_ value: JSON) throws -> Partial {
        switch value {
        case let .array(items): return .many(try items.map(initial))
        case _ where value.isNumber: return single(value)
        case let .object(props): return try unpack(props)
        default: throw invalidValue("non-numeric _stats input: \(ErlangTerm.format(value))")
        }
    }

    static func combine(_ value: JSON, _ stats: Partial) throws -> Partial {
        switch (value, stats) {
        case let (.array(items), .many(parts)):
            guard items.count == parts.count else {
                throw CouchError(status: 500, error: "function_clause", reason: "_stats of arrays of different lengths")
            }
            return .many(try zip(items, parts).map { try combine($0, $1) })
        case let (.object(props), _):
            return try merge(try unpack(props), stats, cause: value)
        case _ where value.isNumber:
            return try merge(single(value), stats, cause: value)
        default:
            throw statError(ErlangTerm.format(value))
        }
    }

    static func merge(_ a: Partial, _ b: Partial, cause: JSON) throws -> Partial {
        guard case let .one(s0, c0, min0, max0, q0) = a, case let .one(s1, c1, min1, max1, q1) = b else {
            if case let .one(s, c, mn, mx, q) = a {
                throw statError("{" + [s, c, mn, mx, q].map { ErlangTerm.format($0) }.joined(separator: ",") + "}")
            }
            throw statError(ErlangTerm.format(cause))
        }
        return .one(
            sum: BuiltinSum.addNumbers(s0, s1), count: BuiltinSum.addNumbers(c0, c1),
            min: JSON.collate(min1, min0) < 0 ? min1 : min0, max: JSON.collate(max1, max0) > 0 ? max1 : max0,
            sumsqr: BuiltinSum.addNumbers(q0, q1))
    }

    static func single(_ x: JSON) -> Partial {
        .one(sum: x, count: 1, min: x, max: x, sumsqr: square(x))
    }

    static func square(_ x: JSON) -> JSON {
        if case let .int(n) = x {
            let (product, overflow) = n.multipliedReportingOverflow(by: n)
            if !overflow { return .int(product) }
        }
        let d = x.doubleValue ?? 0
        return .double(d * d)
    }

    /// An earlier reduction's five numbers (CouchDB also accepts them from a map function).
    static func unpack(_ props: JSONObject) throws -> Partial {
        func number(_ name: String) throws -> JSON {
            guard let value = props[name] else {
                throw invalidValue(
                    "user _stats input missing required field \(name) (\(ErlangTerm.format(.object(props), asProplist: true)))"
                )
            }
            guard value.isNumber else {
                throw invalidValue("non-numeric _stats input received for \(name): \(ErlangTerm.format(value))")
            }
            return value
        }
        return .one(
            sum: try number("sum"), count: try number("count"), min: try number("min"), max: try number("max"),
            sumsqr: try number("sumsqr"))
    }

    static func pack(_ stats: Partial) -> JSON {
        switch stats {
        case let .one(sum, count, min, max, sumsqr):
            return ["sum": sum, "count": count, "min": min, "max": max, "sumsqr": sumsqr]
        case let .many(parts):
            return .array(parts.map(pack))
        }
    }

    static func statError(_ term: String) -> CouchError {
        invalidValue("The _stats function requires that map values be numbers or arrays of numbers, not '\(term)'")
    }

    static func invalidValue(_ reason: String) -> CouchError {
        CouchError(status: 500, error: "invalid_value", reason: reason)
    }
}

/// JSON values written as Erlang prints the terms CouchDB decodes them to (`~w`/`~p` on one
/// line), for error messages that quote a value as CouchDB's do.
enum ErlangTerm {
    static func format(_ value: JSON, asProplist: Bool = false) -> String {
        switch value {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case .int, .double: return value.text
        case let .string(s): return binary(s)
        case let .array(items): return "[" + items.map { format($0) }.joined(separator: ",") + "]"
        case let .object(object):
            let list =
                "[" + object.members.map { "{" + binary($0.key) + "," + format($0.value) + "}" }.joined(separator: ",")
                + "]"
            return asProplist ? list : "{" + list + "}"
        }
    }

    static func binary(_ s: String) -> String {
        var out = "<<\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default: out.unicodeScalars.append(scalar)
            }
        }
        let ascii = s.unicodeScalars.allSatisfy { $0.isASCII }
        return out + (ascii ? "\">>" : "\"/utf8>>")
    }
}
