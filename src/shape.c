/* Shape checks and messages shared by the public functions. */
#include "internal.h"

#include <stdio.h>

void clattn__format_shape(char *buf, size_t size, int ndim, const size_t *shape)
{
    size_t len = 0;
    int n = snprintf(buf, size, "[");
    for (int d = 0; d < ndim && n >= 0 && (size_t)n < size - len; d++) {
        len += (size_t)n;
        n = snprintf(buf + len, size - len, "%s%zu", d ? ", " : "", shape[d]);
    }
    if (n >= 0 && (size_t)n < size - len) {
        len += (size_t)n;
        snprintf(buf + len, size - len, "]");
    }
}

bool clattn__reserved_is_zero(const uint8_t *reserved, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (reserved[i])
            return false;
    return true;
}

clattn_status clattn__expect_shape(clattn_context *ctx, const char *function, const char *name,
                                   const clattn_tensor *t, int ndim, const size_t *want,
                                   const char *meaning)
{
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    if (same)
        return CLATTN_OK;
    char got[96], need[96];
    clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
    clattn__format_shape(need, sizeof(need), ndim, want);
    return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "%s: %s has shape %s but must be %s = %s",
                        function, name, got, meaning, need);
}

