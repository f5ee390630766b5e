#ifndef CSQLITE_TUNING_H
#define CSQLITE_TUNING_H

/// SQLite settings that only variadic C functions reach (Swift cannot call those).

/// Process-wide, before SQLite's first use: connections allocate page-cache memory page by page
/// as they need it, instead of about 90 KB up front each; no memory statistics (a process-wide
/// mutex on every allocation); URI file names. Returns an SQLite result code (SQLITE_MISUSE
/// when SQLite was already in use, and then changes nothing).
int lt_sqlite_configure_for_many_connections(void);

typedef struct sqlite3 sqlite3;

/// Per connection: closing it leaves its write-ahead log as it is (no checkpoint, no sync,
/// no deleted file); the next open reads the log back. Returns an SQLite result code.
int lt_sqlite_no_checkpoint_on_close(sqlite3 *db);

#endif
