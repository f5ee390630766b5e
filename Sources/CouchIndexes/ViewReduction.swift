import CouchEngine
import CouchJSON
import Crypto
import Foundation
import GRDB

/// Reducing view rows: a `reduce` function (built-in or JavaScript) over a range, and rows grouped
/// by key (`group`, `group_level`) before each group is reduced.
enum ViewReduction {
    /// Groups rows for reduction: one group for everything, by exact key (`group=true`), or by
    /// the first `level` elements of array keys (`group_level`).
    static func group(
        _ rows: [(key: JSON, id: String, value: JSON)], group: Bool, level: Int?
    ) -> [(JSON, [(key: JSON, id: String, value: JSON)])] {
        guard group || level != nil else { return rows.isEmpty ? [] : [(.null, rows)] }
        var groups: [(JSON, [(key: JSON, id: String, value: JSON)])] = []
        for row in rows {
            var key = row.key
            if let level, case let .array(items) = key { key = .array(Array(items.prefix(level))) }
            if let last = groups.last, JSON.collate(last.0, key) == 0 {
                groups[groups.count - 1].1.append(row)
            } else {
                groups.append((key, [row]))
            }
        }
        return groups
    }

    /// Reduces one group's rows: natively for built-in reducers; for custom ones in chunks,
    /// combining the chunks' results with rereduce until one value is left.
    static func reduce(_ reducer: ViewReducer, _ rows: [(key: JSON, id: String, value: JSON)]) async throws -> JSON {
        switch reducer {
        case let .builtin(builtin):
            return try reduce(builtin, rows.map(\.value))
        case let .custom(reduce, rereduce):
            guard rows.count > reduceChunk else { return try await reduce(rows) }
            var values: [JSON] = []
            for start in stride(from: 0, to: rows.count, by: reduceChunk) {
                values.append(try await reduce(Array(rows[start..<min(start + reduceChunk, rows.count)])))
            }
            while values.count > 1 {
                var next: [JSON] = []
                for start in stride(from: 0, to: values.count, by: reduceChunk) {
                    next.append(try await rereduce(Array(values[start..<min(start + reduceChunk, values.count)])))
                }
                values = next
            }
            return values[0]
        }
    }

    /// Applies a built-in reducer to a group's values, as CouchDB defines them.
    static func reduce(_ reducer: BuiltinReducer, _ values: [JSON]) throws -> JSON {
        switch reducer {
        case .count:
            return .int(values.count)
        case .sum:
            return try values.reduce(JSON.int(0)) { try sum($0, $1) }
        case .stats:
            var count = 0, total = 0.0, sumsqr = 0.0, minimum = Double.infinity, maximum = -Double.infinity
            for value in values {
                guard let x = value.doubleValue else {
                    throw CouchError(status: 500, error: "builtin_reduce_error", reason: "_stats can only reduce numbers: \(value)")
                }
                count += 1
                total += x
                sumsqr += x * x
                minimum = Swift.min(minimum, x)
                maximum = Swift.max(maximum, x)
            }
            return ["sum": .double(total), "count": .int(count), "min": count > 0 ? .double(minimum) : .null,
                    "max": count > 0 ? .double(maximum) : .null, "sumsqr": .double(sumsqr)]
        case .approxCountDistinct:
            // Exact here (CouchDB uses HyperLogLog; exact is within any approximation).
            var seen = Set<[UInt8]>()
            for value in values { seen.insert(value.collationKey) }
            return .int(seen.count)
        }
    }

    /// `_sum`: numbers add; arrays of numbers add element-wise (the shorter padded with 0).
    static func sum(_ a: JSON, _ b: JSON) throws -> JSON {
        switch (a, b) {
        case let (.int(x), .int(y)):
            let (result, overflow) = x.addingReportingOverflow(y)
            return overflow ? .double(Double(x) + Double(y)) : .int(result)
        case let (.array(x), .array(y)):
            return .array(try (0..<Swift.max(x.count, y.count)).map { i in
                try sum(i < x.count ? x[i] : .int(0), i < y.count ? y[i] : .int(0))
            })
        case let (.array(x), _) where b.isNumber:
            return try sum(.array(x), .array([b]))
        case let (_, .array(y)) where a.isNumber:
            return try sum(.array([a]), .array(y))
        default:
            guard let x = a.doubleValue, let y = b.doubleValue else {
                throw CouchError(status: 500, error: "builtin_reduce_error", reason: "_sum can only reduce numbers or arrays of numbers: \(b)")
            }
            return .double(x + y)
        }
    }

    /// Rows a custom reduce function sees at once; larger groups are reduced in chunks
    /// whose results are combined with `rereduce`, as CouchDB reduces b-tree nodes.
    static let reduceChunk = 500
}
