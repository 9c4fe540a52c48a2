/* Shape checks and the messages that name both shapes. */
#include "shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool clattn__layer_number(const char *name, const char *prefix, size_t *number)
{
    size_t skip = strlen(prefix), digits = 0, n = 0;
    if (strncmp(name, prefix, skip) != 0)
        return false;
    for (const char *p = name + skip; *p >= '0' && *p <= '9'; p++, digits++)
        n = 10 * n + (size_t)(*p - '0');
    if (digits == 0 || digits > 9 || name[skip + digits] != '.')
        return false;
    *number = n;
    return true;
}

static int by_value(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends text to buf (holding len characters); false once it no longer fits. */
static bool append(char *buf, size_t size, size_t *len, const char *text)
{
    size_t n = strlen(text);
    if (*len + n + 1 > size)
        return false;
    memcpy(buf + *len, text, n + 1);
    *len += n;
    return true;
}

bool clattn__layers_are(size_t *numbers, size_t count, size_t expected, char *buf, size_t size)
{
    qsort(numbers, count, sizeof(*numbers), by_value);
    size_t distinct = 0;
    for (size_t i = 0; i < count; i++)
        if (i == 0 || numbers[i] != numbers[i - 1])
            numbers[distinct++] = numbers[i];
    bool exact = distinct == expected && (distinct == 0 || numbers[distinct - 1] == expected - 1);
    if (size == 0)
        return exact;
    buf[0] = '\0';
    size_t len = 0;
    if (distinct == 0) {
        append(buf, size, &len, "no layers");
        return exact;
    }
    append(buf, size, &len, distinct == 1 ? "layer " : "layers ");
    for (size_t i = 0; i < distinct;) {
        size_t j = i; /* a run numbers[i..j] of consecutive numbers */
        while (j + 1 < distinct && numbers[j + 1] == numbers[j] + 1)
            j++;
        char run[64];
        if (j == i)
            snprintf(run, sizeof(run), "%s%zu", i ? ", " : "", numbers[i]);
        else
            snprintf(run, sizeof(run), "%s%zu-%zu", i ? ", " : "", numbers[i], numbers[j]);
        if (!append(buf, size, &len, run)) {
            if (!append(buf, size, &len, ", ..."))
                snprintf(buf, size, "layers ...");
            break;
        }
        i = j + 1;
    }
    return exact;
}
