#ifndef CICU_H
#define CICU_H

#include <stdint.h>

/// ICU's root collator (the Unicode Collation Algorithm with CLDR's root order), as Apache
/// CouchDB's view collation opens it: `ucol_open("")`, default attributes. Swift cannot call
/// ICU directly (its functions are renamed per version by macros), so these wrap the few it needs.

/// The shared collator, opened once; NULL if ICU could not open it. Read-only afterwards, so
/// any thread may use it (ICU's collators are thread-safe for const calls).
const void *lt_icu_root_collator(void);

/// The sort key of UTF-16 `text`: bytes whose memcmp order is the collator's order, ending in a
/// single 0 byte and holding no other 0. Writes at most `capacity` bytes and returns the key's
/// full length (call again with a larger buffer when it exceeds `capacity`); 0 on failure.
int32_t lt_icu_sort_key(const void *collator, const uint16_t *text, int32_t length, uint8_t *out, int32_t capacity);

/// Compares two UTF-8 strings with the collator: -1, 0 or 1 (`ucol_strcollUTF8`); `*failed`
/// is set to 1 when ICU reports an error (invalid UTF-8 compares by ICU's substitution).
int32_t lt_icu_compare_utf8(const void *collator, const char *a, int32_t aLength, const char *b, int32_t bLength, int32_t *failed);

/// The collator's version (rules and UCA data) as "a.b.c.d": sort keys stored on disk are only
/// valid for the version that made them.
void lt_icu_collator_version(const void *collator, char *out, int32_t capacity);

#endif
