// jemalloc (Debian's libjemalloc-dev): linked into `lt`, it replaces the C library's malloc for
// the whole process (SQLite, the Swift runtime, Foundation). This names its version.
#include <stddef.h>
#include <stdint.h>
#include <jemalloc/jemalloc.h>

/// jemalloc's version string ("5.3.0-0-g..."), or NULL if it cannot tell.
static inline const char *lt_jemalloc_version(void) {
    const char *version = NULL;
    size_t length = sizeof(version);
    return mallctl("version", (void *)&version, &length, NULL, 0) == 0 ? version : NULL;
}

/// jemalloc's statistics, refreshed: bytes allocated by the program, in active pages, resident,
/// mapped and retained (kept mapped but given back). 0 on success.
static inline int lt_jemalloc_stats(size_t *allocated, size_t *active, size_t *resident, size_t *mapped, size_t *retained) {
    uint64_t epoch = 1;
    size_t epochLength = sizeof(epoch);
    mallctl("epoch", (void *)&epoch, &epochLength, (void *)&epoch, epochLength);
    size_t length = sizeof(size_t);
    if (mallctl("stats.allocated", (void *)allocated, &length, NULL, 0) != 0) return -1;
    if (mallctl("stats.active", (void *)active, &length, NULL, 0) != 0) return -1;
    if (mallctl("stats.resident", (void *)resident, &length, NULL, 0) != 0) return -1;
    if (mallctl("stats.mapped", (void *)mapped, &length, NULL, 0) != 0) return -1;
    if (mallctl("stats.retained", (void *)retained, &length, NULL, 0) != 0) return -1;
    return 0;
}
