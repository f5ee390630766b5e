import GRDB
import GRDBSQLite

/// A value bound to a statement through SQLite's C API.
package enum DirectValue {
    case text(String)
    case integer(Int)
    case real(Double)
    case blob([UInt8])
    case null
}

/// The statements a document write runs for every document (its row's read, its row and its
/// body's insertion), run straight through SQLite's C API: the wrapper's arguments (an array of
/// boxed values per call) and its per-statement bookkeeping were a tenth of a `_bulk_docs`
/// write's time; the same for an index's rows as it is built. Only for cached statements of
/// the write path, inside the write queue's transaction, on tables no GRDB observer watches
/// (lt registers none).
extension GRDB.Statement {
    /// Runs this statement (an insertion, update or deletion) once with `values`.
    package func run(_ values: DirectValue...) throws {
        try stepOnce(values) { code in
            guard code == SQLITE_DONE else { throw failure(code) }
        }
    }

    /// The first row of this query with `values` bound, read by `row` while it is current.
    func first<T>(_ values: DirectValue..., row: (SQLiteStatement) throws -> T) throws -> T? {
        try stepOnce(values) { code in
            switch code {
            case SQLITE_ROW: return try row(sqliteStatement)
            case SQLITE_DONE: return nil
            default: throw failure(code)
            }
        }
    }

    /// Binds `values`, takes one step and hands its result code to `body`; the statement is
    /// reset and its bindings cleared afterwards, whatever happens.
    private func stepOnce<T>(_ values: [DirectValue], _ body: (Int32) throws -> T) throws -> T {
        let statement = sqliteStatement
        sqlite3_reset(statement)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(values, to: statement)
        return try body(sqlite3_step(statement))
    }

    /// Column `column` of the current row as text ("" when NULL).
    static func text(_ row: SQLiteStatement, _ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(row, column) else { return "" }
        return String(
            decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(row, column))), as: UTF8.self)
    }

    private func bind(_ values: [DirectValue], to statement: SQLiteStatement) throws {
        // SQLite copies each value (SQLITE_TRANSIENT), so none need outlive the call.
        let transient = unsafe unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .integer(let integer):
                code = sqlite3_bind_int64(statement, index, Int64(integer))
            case .real(let real):
                code = sqlite3_bind_double(statement, index, real)
            case .null:
                code = sqlite3_bind_null(statement, index)
            case .text(var text):
                code = text.withUTF8 { bytes in
                    // An empty buffer may have no address, which SQLite would bind as NULL.
                    bytes.isEmpty
                        ? sqlite3_bind_text(statement, index, "", 0, transient)
                        : sqlite3_bind_text(statement, index, bytes.baseAddress, Int32(bytes.count), transient)
                }
            case .blob(let blob):
                code = blob.withUnsafeBytes { bytes in
                    bytes.isEmpty
                        ? sqlite3_bind_zeroblob(statement, index, 0)
                        : sqlite3_bind_blob(statement, index, bytes.baseAddress, Int32(bytes.count), transient)
                }
            }
            guard code == SQLITE_OK else { throw failure(code) }
        }
    }

    private func failure(_ code: Int32) -> DatabaseError {
        let connection = sqlite3_db_handle(sqliteStatement)
        return DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: connection.map { String(cString: sqlite3_errmsg($0)) }, sql: sql)
    }
}
