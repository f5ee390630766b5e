#include <sqlite3.h>
#include "CSQLiteTuning.h"


/* Also turns on URI file names, so a connection can name its file system
   (`file:...?vfs=unix-none`), and turns off SQLite's memory statistics: with them, every
   allocation and free of every connection takes one process-wide mutex, which threads
   opening and writing thousands of databases at once queue for. */
int lt_sqlite_configure_for_many_connections(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_config(SQLITE_CONFIG_URI, 1);
}

int lt_sqlite_no_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
