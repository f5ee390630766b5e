// zlib (Debian's zlib1g-dev): the raw deflate streams inside ZIP archives are inflated with it.
// `inflateInit2` is a macro Swift cannot call; this names it as a function.
#include <zlib.h>

/// Starts a raw deflate stream (no zlib or gzip header), as ZIP entries hold them. Z_OK on success.
static inline int lt_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}
