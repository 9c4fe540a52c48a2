/* Device-aware defaults for our kernels, and the CLATTN_TUNE override. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static bool is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

/* Applies one "key=value" of CLATTN_TUNE; false when it is not understood. */
static bool apply(clattn_tuning *t, const char *key, size_t key_len, const char *value)
{
    char *end;
    unsigned long v = strtoul(value, &end, 10);
    if (end == value || (*end && *end != ',') || value[0] == '-')
        return false;
#define KEY(name) (key_len == strlen(name) && strncmp(key, name, key_len) == 0)
    if (KEY("fused_qpw") && v >= 1 && v <= 16)
        t->fused_qpw = v;
    else if (KEY("fused_tk") && v >= 1 && v <= 256)
        t->fused_tk = v;
    else if (KEY("fused_wg") && is_pow2(v) && v <= 1024)
        t->fused_wg = v;
    else if (KEY("fused_local") && v <= 1)
        t->fused_local = (int)v;
    else
        return false;
#undef KEY
    return true;
}

void clattn__tuning_init(clattn_context *ctx)
{
    clattn_tuning *t = &ctx->tuning;
    size_t max_wg = ctx->info.max_work_group_size ? ctx->info.max_work_group_size : 1;
    if (ctx->info.local_mem_is_global) {
        /* CPUs (PoCL): no staging; several queries per work-item reuse each key row from cache. */
        t->fused_local = 0;
        t->fused_qpw = 4;
        t->fused_tk = 16;
        t->fused_wg = 8;
    } else {
        /* GPUs: the work-group shares each block of keys and values through __local memory. */
        t->fused_local = 1;
        t->fused_qpw = 1;
        t->fused_tk = 32;
        t->fused_wg = 64;
    }
    const char *env = getenv("CLATTN_TUNE");
    for (const char *p = env; p && *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || (comma && eq > comma) || !apply(t, p, (size_t)(eq - p), eq + 1))
            clattn__log(ctx, CLATTN_LOG_WARNING, "CLATTN_TUNE: ignoring \"%.*s\" (keys: "
                        "fused_qpw 1-16, fused_tk 1-256, fused_wg a power of two, fused_local 0/1)",
                        (int)len, p);
        p = comma ? comma + 1 : p + len;
    }
    while (t->fused_wg > max_wg)
        t->fused_wg /= 2;
}
