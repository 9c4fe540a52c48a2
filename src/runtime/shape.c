/* Shape checks and the messages that name both shapes. */
#include "shape.h"

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

static bool same_shape(int ndim, const size_t *shape, int want_ndim, const size_t *want)
{
    bool same = ndim == want_ndim;
    for (int d = 0; same && d < ndim; d++)
        same = shape[d] == want[d];
    return same;
}

clattn_status clattn__expect_shape(clattn_context *ctx, const char *function, const char *name,
                                   int ndim, const size_t *shape, int want_ndim,
                                   const size_t *want, const char *meaning)
{
    if (same_shape(ndim, shape, want_ndim, want))
        return CLATTN_OK;
    char got[96], need[96];
    clattn__format_shape(got, sizeof(got), ndim, shape);
    clattn__format_shape(need, sizeof(need), want_ndim, want);
    return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "%s: %s has shape %s but must be %s = %s",
                        function, name, got, meaning, need);
}

clattn_status clattn__expect_host_shape(clattn_context *ctx, const char *function,
                                        const char *what, const char *name,
                                        const clattn_host_tensor *t, int ndim, const size_t *want,
                                        int missing_is_format)
{
    if (!t || !t->data) {
        if (missing_is_format)
            return clattn__fail(ctx, CLATTN_ERROR_FORMAT, "%s: missing tensor %s", function, name);
        return clattn__fail_arg(ctx, function, "%s is required by the configuration", name);
    }
    if (same_shape(t->ndim, t->shape, ndim, want))
        return CLATTN_OK;
    char got[96], need[96];
    if (t->ndim >= 1 && t->ndim <= CLATTN_MAX_DIMS)
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
    else
        snprintf(got, sizeof(got), "(ndim %d)", t->ndim);
    clattn__format_shape(need, sizeof(need), ndim, want);
    return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                        "%s: %s has shape %s but the configuration needs %s", function, what, got,
                        need);
}
