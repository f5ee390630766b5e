import CouchEngine
import CouchCollation
import CouchJSON
import Crypto
import Foundation
import GRDB

/// The SQL conditions for a view query: its key range (`startkey`/`endkey` with their doc ids,
/// `inclusive_end`, `descending`), or one scan per key of `keys`.
enum ViewRange {
    /// The key ranges a view query reads, each a SQL condition with its arguments: one per key
    /// of `keys`, or the range between `startkey` and `endkey` (`ViewIndexes.query` has made
    /// `key` that range); within the partition's ids.
    static func viewScans(
        _ query: ViewQuery, _ collation: KeyCollation
    ) -> [(condition: String, arguments: [any DatabaseValueConvertible])] {
        var parts: [(condition: String, arguments: [any DatabaseValueConvertible])]
        if let keys = query.keys {
            // Each key is the range from it to itself (`inclusive_end` and the `*_docid` bounds
            // apply to each, as CouchDB's `key_opts` makes them).
            parts = keys.map { key in
                var one = query
                one.keys = nil
                one.key = nil
                one.startKey = key
                one.endKey = key
                return viewRange(one, collation)
            }
        } else {
            parts = [ViewRange.viewRange(query, collation)]
        }
        if let (low, high) = query.idRange {
            parts = parts.map { ("(\($0.condition)) AND doc_id >= ? AND doc_id < ?", $0.arguments + [low, high]) }
        }
        return parts
    }

    /// The SQL condition for a query's key range (`startkey`/`endkey`, `*_docid`,
    /// `inclusive_end`, `descending`).
    static func viewRange(
        _ query: ViewQuery, _ collation: KeyCollation
    ) -> (condition: String, arguments: [any DatabaseValueConvertible]) {
        var conditions = ["1"]
        var arguments: [any DatabaseValueConvertible] = []
        let (low, lowID, high, highID) =
            query.descending
            ? (query.endKey, query.endKeyDocID, query.startKey, query.startKeyDocID)
            : (query.startKey, query.startKeyDocID, query.endKey, query.endKeyDocID)
        let lowInclusive = query.descending ? query.inclusiveEnd : true
        let highInclusive = query.descending ? true : query.inclusiveEnd
        // One end of the range: by key, refined by document id when one is given.
        func bound(_ end: JSON, _ docID: String?, lower: Bool, inclusive: Bool) {
            let key = Data(end.collationKey(collation))
            let op = (lower ? ">" : "<") + (inclusive ? "=" : "")
            if let docID {
                conditions.append("(key \(lower ? ">" : "<") ? OR (key = ? AND doc_id \(op) ?))")
                arguments += [key, key, docID]
            } else {
                conditions.append("key \(op) ?")
                arguments.append(key)
            }
        }
        if let low { bound(low, lowID, lower: true, inclusive: lowInclusive) }
        if let high { bound(high, highID, lower: false, inclusive: highInclusive) }
        return (conditions.joined(separator: " AND "), arguments)
    }
}
