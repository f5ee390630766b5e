import CouchJSON
import Foundation
import GRDB

/// How many rows of a view's index lie before a key, without walking them: CouchDB answers
/// `offset` from the row counts its B-tree keeps in every inner node; SQLite's B-trees keep
/// none, and `count(*)` of the rows before a key walks them all (a one-key query on a view of
/// 20,000 rows spent most of its time counting). So beside each view's rows a small table
/// (`<view>_blocks`) splits the key order into blocks of a few hundred rows and keeps each
/// block's count: moved by a trigger on every delete (the index update's and a purge's alike),
/// and for the rows an update inserts by `counted(_:)`, block by block for the whole batch (a
/// trigger per insert cost a fifth of a view build). The rows before a key are the counts of the
/// blocks before its block plus the rows of its block up to the key: a sum over n/512 counts and
/// a walk of at most a block.
///
/// A block is named by its first key (collation-key bytes); the first block starts at the empty
/// key, below every key. Blocks are split past `largest` rows and joined to the block before
/// under `smallest` (when the two together stay within `largest`), after each batch the index
/// stores. Rows of one key are never split across blocks, so a block of one very common key
/// stays large (its rows are then walked).
enum ViewPositions {
    static let largest = 1024
    static let smallest = 128

    static func blocks(_ table: String) -> String { table + "_blocks" }

    /// Makes the blocks of `table` (rows already there are counted into blocks: an index built
    /// before blocks existed), with the triggers that keep them.
    static func create(_ db: GRDB.Database, _ table: String) throws {
        let blocks = blocks(table)
        guard try !db.tableExists(blocks) else { return }
        try db.execute(
            sql: """
                CREATE TABLE \(blocks)(start BLOB PRIMARY KEY, rows INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TRIGGER \(table)_counted_delete AFTER DELETE ON \(table) BEGIN
                    UPDATE \(blocks) SET rows = rows - 1 WHERE start = (SELECT max(start) FROM \(blocks) WHERE start <= OLD.key);
                END;
                """)
        // One pass over the rows there are: a new block at the first new key after every
        // `largest / 2` rows.
        var start = Data()
        var count = 0
        var previous: Data?
        let keys = try Data.fetchCursor(db, sql: "SELECT key FROM \(table) ORDER BY key")
        while let key = try keys.next() {
            if count >= largest / 2, key != previous {
                try db.execute(sql: "INSERT INTO \(blocks)(start, rows) VALUES (?, ?)", arguments: [start, count])
                start = key
                count = 0
            }
            count += 1
            previous = key
        }
        try db.execute(sql: "INSERT INTO \(blocks)(start, rows) VALUES (?, ?)", arguments: [start, count])
    }

    /// Counts rows just inserted with these keys into their blocks (one update per block).
    static func counted(_ db: GRDB.Database, _ table: String, keys: [Data]) throws {
        guard !keys.isEmpty else { return }
        let blocks = blocks(table)
        let starts = try Data.fetchAll(db, sql: "SELECT start FROM \(blocks) ORDER BY start")
        guard !starts.isEmpty else { throw CouchError.corrupt("\(blocks) has no blocks") }
        var added = [Int](repeating: 0, count: starts.count)
        for key in keys {
            // The last block starting at or below the key (SQLite compares blobs as these bytes).
            var low = 0, high = starts.count
            while high - low > 1 {
                let middle = (low + high) / 2
                if key.lexicographicallyPrecedes(starts[middle]) { high = middle } else { low = middle }
            }
            added[low] += 1
        }
        let update = try db.cachedStatement(sql: "UPDATE \(blocks) SET rows = rows + ? WHERE start = ?")
        for (index, count) in added.enumerated() where count > 0 {
            try update.execute(arguments: [count, starts[index]])
        }
    }

    /// Splits the blocks that grew past `largest` and joins those that shrank under `smallest`
    /// to the block before (inside the transaction that stored the rows).
    static func rebalance(_ db: GRDB.Database, _ table: String) throws {
        let blocks = blocks(table)
        let uneven = try Row.fetchAll(
            db, sql: "SELECT start, rows FROM \(blocks) WHERE rows > ? OR (rows < ? AND start > X'')",
            arguments: [largest, smallest])
        for block in uneven {
            let start: Data = block[0]
            let rows: Int = block[1]
            if rows > largest {
                try split(db, table, start: start, rows: rows)
            } else {
                // Joined to the block before, unless that would make one to split again (a
                // few rows after a key that has a block of its own): then it stays small.
                let before = try Row.fetchOne(
                    db, sql: "SELECT start, rows FROM \(blocks) WHERE start < ? ORDER BY start DESC LIMIT 1",
                    arguments: [start])
                guard let before, (before[1] as Int) + rows <= largest else { continue }
                try db.execute(
                    sql: """
                        UPDATE \(blocks) SET rows = rows + ? WHERE start = ?;
                        DELETE FROM \(blocks) WHERE start = ?;
                        """, arguments: [rows, before[0] as Data, start])
            }
        }
    }

    /// Splits a block at the key of its middle row, or at its first key after its start when the
    /// middle row has the start's key, until no part is past `largest` (a batch may add many
    /// blocks' worth of rows to one); a block of one key stays whole.
    private static func split(_ db: GRDB.Database, _ table: String, start: Data, rows: Int) throws {
        let blocks = blocks(table)
        let next = try Data.fetchOne(db, sql: "SELECT min(start) FROM \(blocks) WHERE start > ?", arguments: [start])
        let inBlock = next == nil ? "key >= ?" : "key >= ? AND key < ?"
        let bounds: [Data] = [start] + (next.map { [$0] } ?? [])
        // Its second key, one seek away: none in a block of one key, which cannot be split (and
        // is not walked again and again to find that out).
        guard
            let second = try Data.fetchOne(
                db, sql: "SELECT key FROM \(table) WHERE \(inBlock) AND key > ? ORDER BY key LIMIT 1",
                arguments: StatementArguments(bounds + [start]))
        else { return }
        var middle =
            try Data.fetchOne(
                db, sql: "SELECT key FROM \(table) WHERE \(inBlock) ORDER BY key LIMIT 1 OFFSET ?",
                arguments: StatementArguments(bounds + [rows / 2])) ?? second
        if middle == start { middle = second }
        let upper =
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM \(table) WHERE key >= ?" + (next == nil ? "" : " AND key < ?"),
                arguments: StatementArguments([middle] + (next.map { [$0] } ?? []))) ?? 0
        try db.execute(
            sql: """
                INSERT INTO \(blocks)(start, rows) VALUES (?, ?);
                UPDATE \(blocks) SET rows = rows - ? WHERE start = ?;
                """, arguments: [middle, upper, upper, start])
        if rows - upper > largest { try split(db, table, start: start, rows: rows - upper) }
        if upper > largest { try split(db, table, start: middle, rows: upper) }
    }

    /// The rows matching `before` (every row before a position, in the query's direction: the
    /// condition of a range that ends there) when the position's key is `key`. Without blocks
    /// (an index not yet updated since they came), the rows are counted.
    static func rowsBefore(
        _ db: GRDB.Database, _ table: String, key: Data, descending: Bool,
        _ before: (condition: String, arguments: [any DatabaseValueConvertible])
    ) throws -> Int {
        func count(_ extra: String, _ bound: Data?) throws -> Int {
            try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM \(table) WHERE (\(before.condition))"
                    + (bound == nil ? "" : " AND " + extra),
                arguments: StatementArguments(before.arguments + (bound.map { [$0] } ?? []))) ?? 0
        }
        let blocks = blocks(table)
        guard try db.tableExists(blocks) else { return try count("", nil) }
        if descending {
            // The blocks after the key's block, and the rows of its block after the position.
            guard
                let next = try Data.fetchOne(
                    db, sql: "SELECT min(start) FROM \(blocks) WHERE start > ?", arguments: [key])
            else {
                return try count("", nil)
            }
            let after =
                try Int.fetchOne(
                    db, sql: "SELECT coalesce(sum(rows), 0) FROM \(blocks) WHERE start >= ?", arguments: [next]) ?? 0
            return after + (try count("key < ?", next))
        }
        let own =
            try Data.fetchOne(db, sql: "SELECT max(start) FROM \(blocks) WHERE start <= ?", arguments: [key]) ?? Data()
        let earlier =
            try Int.fetchOne(db, sql: "SELECT coalesce(sum(rows), 0) FROM \(blocks) WHERE start < ?", arguments: [own])
            ?? 0
        return earlier + (try count("key >= ?", own))
    }
}
