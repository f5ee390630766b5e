// Swift cannot call Duktape's function-like macros; these inline wrappers can.
#include <duktape.h>

static inline duk_context *lt_duk_create(void) { return duk_create_heap_default(); }
static inline void lt_duk_destroy(duk_context *ctx) { duk_destroy_heap(ctx); }

/// Evaluates source; returns 0 on success. The result or error stays on the stack.
static inline int lt_duk_eval(duk_context *ctx, const char *source) { return (int)duk_peval_string(ctx, source); }

/// Calls the global function `name` with one string argument; returns 0 on success.
static inline int lt_duk_call_global(duk_context *ctx, const char *name, const char *argument) {
    duk_get_global_string(ctx, name);
    duk_push_string(ctx, argument);
    return (int)duk_pcall(ctx, 1);
}

static inline const char *lt_duk_string(duk_context *ctx) { return duk_safe_to_string(ctx, -1); }
static inline void lt_duk_pop(duk_context *ctx) { duk_pop(ctx); }
