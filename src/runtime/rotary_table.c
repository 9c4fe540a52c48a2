/* Rotary embeddings' table: computed on the host as PyTorch computes it, for the window of
 * positions in use, kept on the device. */
#include "rotary_table.h"
#include "buffers.h"
#include "context_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Windows start and end on multiples of GRAIN positions, so that positions moving on one at a
 * time (a decoding cache) find their rows already there for GRAIN calls. */
#define GRAIN 256
/* A table is extended to take a new window in only while the union spans at most MERGE times
 * the new window (so that a window moving on, or two windows taking turns, do not rebuild it at
 * every call, and no table grows past MERGE times what a call needs). */
#define MERGE 4

float clattn__rope_inv_freq(size_t k, size_t pairs, double theta)
{
    float exponent = (float)(2 * k) / (float)(2 * pairs);
    return 1.0f / powf((float)theta, exponent);
}

/* The rows of positions first .. first + rows - 1: host [rows, pairs] pairs (cos, sin). */
static void compute_rows(float *host, size_t first, size_t rows, size_t pairs, double theta,
                         const float *inv_freqs)
{
    /* As transformers' and the models' own rotary code: inv_freq = 1 / θ^(2k / r) (or the
     * scaled table) and the angle p · inv_freq in float32 (torch.arange(0, r, 2).float() / r,
     * torch.outer), then the cosine and sine of that float angle (here in double, rounded). At
     * position 8192 the float32 angle is off the exact one by up to ~5e-4 rad: the models were
     * trained with it. The position p is rounded to float32 first, as PyTorch's float position
     * ids are: beyond 2^24 neighbouring positions share an angle. */
    for (size_t k = 0; k < pairs; k++) {
        float inv_freq = inv_freqs ? inv_freqs[k] : clattn__rope_inv_freq(k, pairs, theta);
        for (size_t i = 0; i < rows; i++) {
            float angle = (float)(first + i) * inv_freq;
            host[(i * pairs + k) * 2] = (float)cos((double)angle);
            host[(i * pairs + k) * 2 + 1] = (float)sin((double)angle);
        }
    }
}

/* Fills t with the positions lo .. hi - 1 (a new buffer; the old one is released only once the
 * new one is complete, so that on failure t is unchanged). */
static clattn_status build(clattn_context *ctx, clattn_rotary_entry *t, size_t lo, size_t hi,
                           size_t pairs, double theta, const float *inv_freq)
{
    size_t rows = hi - lo, count, bytes;
    if (rows > UINT32_MAX || !clattn__mul_size(rows, 2 * pairs, &count) ||
        !clattn__mul_size(count, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "the rotary table [%zu, %zu, 2] is too large (the kernels index at "
                            "most 2^32 - 1 positions at once)", rows, pairs);
    float *host = malloc(bytes);
    float *key = inv_freq ? malloc(pairs ? pairs * sizeof(float) : 1) : NULL; /* its own copy */
    if (key)
        memcpy(key, inv_freq, pairs * sizeof(float));
    if (!host || (inv_freq && !key)) {
        free(host);
        free(key);
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for the rotary table [%zu, %zu, 2]", rows, pairs);
    }
    compute_rows(host, lo, rows, pairs, theta, inv_freq);
    cl_mem mem = NULL;
    clattn_status status = clattn__buffer_create(ctx, bytes, &mem, "the rotary table");
    if (status == CLATTN_OK &&
        (status = clattn__write_floats_at(ctx, mem, 0, host, count, "the rotary table")))
        clattn__release_mem(&mem);
    free(host);
    if (status != CLATTN_OK) {
        free(key);
        return status;
    }
    clattn__release_mem(&t->mem);
    free(t->inv_freq);
    t->inv_freq = key;
    t->mem = mem;
    t->first = lo;
    t->positions = rows;
    t->pairs = pairs;
    t->theta = theta;
    return CLATTN_OK;
}

static bool holds_base(const clattn_rotary_entry *e, size_t pairs, double theta,
                       const float *inv_freq)
{
    if (!e->mem || e->pairs != pairs || e->theta != theta || !e->inv_freq != !inv_freq)
        return false;
    return !inv_freq || memcmp(e->inv_freq, inv_freq, pairs * sizeof(float)) == 0;
}

clattn_status clattn__rotary_table(clattn_context *ctx, size_t first, size_t count, size_t pairs,
                                   double theta, const float *inv_freq, cl_mem *out,
                                   size_t *out_first)
{
    if (count == 0)
        count = 1; /* a table to hand out all the same */
    if (count > SIZE_MAX - first)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "rotary positions %zu + %zu overflow size_t", first, count);
    size_t end = first + count;
    clattn_rotary_table *tables = &ctx->rope_table;
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES; i++) {
        clattn_rotary_entry *e = &tables->entries[i];
        if (holds_base(e, pairs, theta, inv_freq) && e->first <= first &&
            end - e->first <= e->positions) {
            e->last_use = ++tables->calls;
            *out = e->mem;
            *out_first = e->first;
            return CLATTN_OK;
        }
    }
    /* The window on multiples of GRAIN (its end as it is where rounding up would overflow). */
    size_t lo = first / GRAIN * GRAIN;
    size_t hi = end % GRAIN == 0 || end > SIZE_MAX - GRAIN ? end : end + (GRAIN - end % GRAIN);
    size_t span = hi - lo;
    clattn_rotary_entry *t = NULL;
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES && !t; i++) {
        clattn_rotary_entry *e = &tables->entries[i];
        if (!holds_base(e, pairs, theta, inv_freq))
            continue;
        size_t union_lo = e->first < lo ? e->first : lo;
        size_t union_hi = e->first + e->positions > hi ? e->first + e->positions : hi;
        if ((union_hi - union_lo) / MERGE <= span) {
            t = e;
            lo = union_lo, hi = union_hi;
        }
    }
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES && !t; i++) /* else an empty one */
        if (!tables->entries[i].mem)
            t = &tables->entries[i];
    if (!t) { /* else the one used least recently */
        t = &tables->entries[0];
        for (size_t i = 1; i < CLATTN_ROTARY_TABLES; i++)
            if (tables->entries[i].last_use < t->last_use)
                t = &tables->entries[i];
    }
    clattn_status status = build(ctx, t, lo, hi, pairs, theta, inv_freq);
    if (status != CLATTN_OK)
        return status;
    t->last_use = ++tables->calls;
    *out = t->mem;
    *out_first = t->first;
    return CLATTN_OK;
}

void clattn__rotary_table_release(clattn_rotary_table *tables)
{
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES; i++) {
        clattn_rotary_entry *e = &tables->entries[i];
        clattn__release_mem(&e->mem);
        free(e->inv_freq);
        e->inv_freq = NULL;
        e->first = e->positions = e->pairs = 0;
    }
}
