#ifndef LT_JEMALLOC_SETTINGS_H
#define LT_JEMALLOC_SETTINGS_H

/// The settings this build gives jemalloc (its `malloc_conf`, read when jemalloc starts, before
/// `main`); `MALLOC_CONF` in the environment is read after them and overrides them.
const char *lt_jemalloc_settings(void);

#endif
