#include "jemalloc_settings.h"

// jemalloc reads this global of the executable at its start. Freed memory goes back to the
// system within a second or so, by jemalloc's own background threads (off the request path),
// instead of being kept for ten seconds and given back only when some thread next allocates:
// a server's memory after a burst (an index build, a large answer) falls back to what it
// holds in use. Measured with `lt-bench compare` (docs/benchmarks.md): the largest RSS
// 103-110 -> 91-94 MiB at the Mango index build, throughput within the run-to-run spread.
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

const char *lt_jemalloc_settings(void) { return malloc_conf; }
