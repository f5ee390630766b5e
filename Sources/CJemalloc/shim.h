// jemalloc (Debian's libjemalloc-dev): linked into `lt`, it replaces the C library's malloc for
// the whole process (SQLite, the Swift runtime, Foundation). This names its version.
#include <stddef.h>
#include <jemalloc/jemalloc.h>

/// jemalloc's version string ("5.3.0-0-g..."), or NULL if it cannot tell.
static inline const char *lt_jemalloc_version(void) {
    const char *version = NULL;
    size_t length = sizeof(version);
    return mallctl("version", (void *)&version, &length, NULL, 0) == 0 ? version : NULL;
}
