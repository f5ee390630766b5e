#include "CICU.h"

#include <pthread.h>
#include <stdio.h>
#include <unicode/ucol.h>

static UCollator *root = NULL;
static pthread_once_t rootOnce = PTHREAD_ONCE_INIT;

static void openRoot(void) {
    UErrorCode status = U_ZERO_ERROR;
    UCollator *collator = ucol_open("", &status);
    if (U_FAILURE(status)) {
        if (collator != NULL) ucol_close(collator);
        return;
    }
    root = collator;
}

const void *lt_icu_root_collator(void) {
    pthread_once(&rootOnce, openRoot);
    return root;
}

int32_t lt_icu_sort_key(const void *collator, const uint16_t *text, int32_t length, uint8_t *out, int32_t capacity) {
    return ucol_getSortKey((const UCollator *)collator, (const UChar *)text, length, out, capacity);
}

int32_t lt_icu_compare_utf8(const void *collator, const char *a, int32_t aLength, const char *b, int32_t bLength, int32_t *failed) {
    UErrorCode status = U_ZERO_ERROR;
    UCollationResult result = ucol_strcollUTF8((const UCollator *)collator, a, aLength, b, bLength, &status);
    *failed = U_FAILURE(status) ? 1 : 0;
    return (int32_t)result;
}

void lt_icu_collator_version(const void *collator, char *out, int32_t capacity) {
    UVersionInfo version;
    ucol_getVersion((const UCollator *)collator, version);
    snprintf(out, (size_t)capacity, "%u.%u.%u.%u", version[0], version[1], version[2], version[3]);
}
