import CouchEngine
import CouchCollation
import CouchJSON
import Crypto
import Foundation
import GRDB

/// Reducing view rows: a `reduce` function (built-in or JavaScript) over a range, and rows grouped
/// by key (`group`, `group_level`) before each group is reduced.
enum ViewReduction {
    /// Groups rows for reduction: one group for everything (key null), by exact key
    /// (`group=true`, keys equal under the view's collation), or by the first `n` elements of
    /// array keys (`group_level`; other keys group exactly).
    static func group(
        _ rows: [(key: JSON, id: String, value: JSON)], _ grouping: ViewQuery.Grouping,
        collation: KeyCollation = .unicode
    ) -> [(JSON, [(key: JSON, id: String, value: JSON)])] {
        if grouping == .whole { return rows.isEmpty ? [] : [(.null, rows)] }
        let level: Int? = if case let .level(n) = grouping { n } else { nil }
        var groups: [(JSON, [(key: JSON, id: String, value: JSON)])] = []
        for row in rows {
            var key = row.key
            if let level, case let .array(items) = key { key = .array(Array(items.prefix(level))) }
            if let last = groups.last, JSON.collate(last.0, key, collation) == 0 {
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
            return try reduce(builtin, rows)
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

    /// Applies a built-in reducer to a group's rows, as CouchDB's `couch_query_servers` does.
    static func reduce(_ reducer: BuiltinReducer, _ rows: [(key: JSON, id: String, value: JSON)]) throws -> JSON {
        switch reducer {
        case .count:
            return .int(rows.count)
        case .sum:
            return try BuiltinSum.rows(rows.map(\.value))
        case .stats:
            return try BuiltinStats.rows(rows.map(\.value))
        case .approxCountDistinct:
            // CouchDB estimates the distinct keys with HyperLogLog (precision 11); exact here.
            // Keys as bytes: `é` and `e\u{301}` are two keys (Swift's String equality is one).
            return .int(Set(rows.map(\.key.bytes)).count)
        }
    }

    /// Rows a custom reduce function sees at once; larger groups are reduced in chunks
    /// whose results are combined with `rereduce`, as CouchDB reduces b-tree nodes.
    static let reduceChunk = 500
}
