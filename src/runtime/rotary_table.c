/* Rotary embeddings' table: computed on the host as PyTorch computes it, kept on the device. */
#include "rotary_table.h"
#include "buffers.h"
#include "context_internal.h"

#include <math.h>
#include <stdlib.h>

/* The entry holding (pairs, theta), else the one to replace: an empty one, or the least
 * recently used. */
static clattn_rotary_entry *entry_for(clattn_rotary_table *tables, size_t pairs, double theta)
{
    clattn_rotary_entry *victim = &tables->entries[0];
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES; i++) {
        clattn_rotary_entry *e = &tables->entries[i];
        if (e->mem && e->pairs == pairs && e->theta == theta)
            return e;
        if (victim->mem && (!e->mem || e->last_use < victim->last_use))
            victim = e;
    }
    return victim;
}

clattn_status clattn__rotary_table(clattn_context *ctx, size_t positions, size_t pairs,
                                   double theta, cl_mem *out)
{
    clattn_rotary_entry *t = entry_for(&ctx->rope_table, pairs, theta);
    t->last_use = ++ctx->rope_table.calls;
    if (t->mem && t->pairs == pairs && t->theta == theta && t->positions >= positions) {
        *out = t->mem;
        return CLATTN_OK;
    }
    /* Round up so that slowly growing lengths (a decoding cache) do not recompute it each call. */
    size_t rows = (positions + 255) / 256 * 256, count, bytes;
    if (rows < positions || !clattn__mul_size(rows, 2 * pairs, &count) ||
        !clattn__mul_size(count, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "the rotary table [%zu, %zu, 2] overflows size_t", positions, pairs);
    float *host = malloc(bytes);
    if (!host)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for the rotary table [%zu, %zu, 2]", rows, pairs);
    /* As transformers' and the models' own rotary code: inv_freq = 1 / θ^(2k / r) and the angle
     * p · inv_freq in float32 (torch.arange(0, r, 2).float() / r, torch.outer), then the cosine
     * and sine of that float angle (here in double, rounded). At position 8192 the float32
     * angle is off the exact one by up to ~5e-4 rad: the models were trained with it. */
    for (size_t k = 0; k < pairs; k++) {
        float exponent = (float)(2 * k) / (float)(2 * pairs);
        float inv_freq = 1.0f / powf((float)theta, exponent);
        for (size_t p = 0; p < rows; p++) {
            float angle = (float)p * inv_freq;
            host[(p * pairs + k) * 2] = (float)cos((double)angle);
            host[(p * pairs + k) * 2 + 1] = (float)sin((double)angle);
        }
    }
    cl_mem mem = NULL;
    clattn_status status = clattn__buffer_create(ctx, bytes, &mem, "the rotary table");
    if (status == CLATTN_OK &&
        (status = clattn__write_floats_at(ctx, mem, 0, host, count, "the rotary table")))
        clattn__release_mem(&mem);
    free(host);
    if (status != CLATTN_OK)
        return status;
    clattn__release_mem(&t->mem);
    t->mem = mem;
    t->positions = rows;
    t->pairs = pairs;
    t->theta = theta;
    *out = mem;
    return CLATTN_OK;
}

void clattn__rotary_table_release(clattn_rotary_table *tables)
{
    for (size_t i = 0; i < CLATTN_ROTARY_TABLES; i++) {
        clattn_rotary_entry *t = &tables->entries[i];
        clattn__release_mem(&t->mem);
        t->positions = t->pairs = 0;
    }
}
