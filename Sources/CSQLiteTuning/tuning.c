#include <sqlite3.h>
#include "CSQLiteTuning.h"


/* Also turns on URI file names, so a connection can name its file system
   (`file:...?vfs=unix-none`). */
int lt_sqlite_no_initial_page_cache(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_config(SQLITE_CONFIG_URI, 1);
}

int lt_sqlite_no_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
