#include <sqlite3.h>
#include "CSQLiteTuning.h"


int lt_sqlite_no_initial_page_cache(void) {
    return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
}
