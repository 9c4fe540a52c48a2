/* The key/value state of incremental decoding: self-attention caches and cross memory. */
#include "kv_state.h"
#include "runtime/buffers.h"

#include <stdlib.h>
#include <string.h>

void clattn__kv_state_release_memory(clattn_kv_state *st)
{
    for (size_t i = 0; st->memory_k && st->memory_v && i < st->layers; i++) {
        clattn__release_mem(&st->memory_k[i]);
        clattn__release_mem(&st->memory_v[i]);
    }
    clattn__release_mem(&st->memory_mask);
    st->memory_len = 0;
}

void clattn__kv_state_destroy(clattn_kv_state **pst)
{
    if (!pst || !*pst)
        return;
    clattn_kv_state *st = *pst;
    for (size_t i = 0; st->self && i < st->layers; i++) {
        clattn__release_mem(&st->self[i].k);
        clattn__release_mem(&st->self[i].v);
    }
    clattn__kv_state_release_memory(st);
    free(st->self), free(st->memory_k), free(st->memory_v);
    free(st->lengths), free(st->in_use);
    free(st);
    *pst = NULL;
}

clattn_status clattn__kv_state_create(clattn_context *ctx, const char *fn, size_t layers,
                                      size_t batch, size_t capacity, size_t k_width,
                                      size_t v_width, bool half, bool cross,
                                      clattn_kv_state **out)
{
    *out = NULL;
    size_t element = half ? 2 : sizeof(float), rows, kb, vb;
    if (!clattn__mul_size(batch, capacity, &rows) ||
        !clattn__mul_size(rows, k_width * element, &kb) ||
        !clattn__mul_size(rows, v_width * element, &vb) || capacity > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: a cache of %zu x %zu tokens is too large", fn, batch, capacity);
    /* All the layers' caches at once, before allocating any: the device's global memory bounds
     * them even when every buffer is under its maximum allocation. */
    clattn_device_info device;
    clattn_context_device_info(ctx, &device);
    size_t layer, total;
    if (!clattn__add_size(kb, vb, &layer) || !clattn__mul_size(layer, layers, &total) ||
        total > device.global_mem_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: the key/value cache of %zu sequences x %zu tokens x %zu layers "
                            "needs %.1f MiB, more than the device's global memory (%.1f MiB)",
                            fn, batch, capacity, layers,
                            ((double)kb + (double)vb) * (double)layers / 1048576.0,
                            (double)device.global_mem_bytes / 1048576.0);
    clattn_kv_state *st = calloc(1, sizeof(*st));
    if (!st)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    *st = (clattn_kv_state){.ctx = ctx, .layers = layers, .batch = batch, .capacity = capacity,
                            .k_width = k_width, .v_width = v_width, .half = half};
    st->self = calloc(layers, sizeof(*st->self));
    st->lengths = calloc(batch, sizeof(*st->lengths));
    st->in_use = calloc(batch, sizeof(*st->in_use));
    if (cross) {
        st->memory_k = calloc(layers, sizeof(cl_mem));
        st->memory_v = calloc(layers, sizeof(cl_mem));
    }
    clattn_status status = CLATTN_OK;
    if (!st->self || !st->lengths || !st->in_use || (cross && (!st->memory_k || !st->memory_v)))
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; status == CLATTN_OK && i < layers; i++) {
        st->self[i].capacity = capacity;
        st->self[i].half = half;
        if (!(status = clattn__buffer_create(ctx, kb, &st->self[i].k, "the key cache")))
            status = clattn__buffer_create(ctx, vb, &st->self[i].v, "the value cache");
    }
    if (status != CLATTN_OK) {
        clattn__kv_state_destroy(&st);
        return status;
    }
    *out = st;
    return CLATTN_OK;
}

clattn_status clattn__kv_state_alloc_memory(clattn_kv_state *st, const char *fn, size_t S,
                                            cl_mem mask, size_t mask_offset)
{
    clattn_context *ctx = st->ctx;
    clattn__kv_state_release_memory(st);
    CLATTN_CHECK_ARG(ctx, fn, st->memory_k && st->memory_v,
                     "the layers have no cross-attention: there is no memory to set");
    size_t rows = st->batch * S;
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; status == CLATTN_OK && i < st->layers; i++)
        if (!(status = clattn__buffer_create(ctx, rows * st->k_width * 4, &st->memory_k[i],
                                             "the projected memory")))
            status = clattn__buffer_create(ctx, rows * st->v_width * 4, &st->memory_v[i],
                                           "the projected memory");
    if (status == CLATTN_OK && mask &&
        !(status = clattn__buffer_create(ctx, rows * 4, &st->memory_mask, "the memory mask"))) {
        status = clattn__copy_bytes(ctx, mask, mask_offset * sizeof(float), st->memory_mask, 0,
                                    rows * sizeof(float), "%s: copying the mask", fn);
        st->memory_mask_kind = CLATTN_MASK_BOOL;
    }
    if (status != CLATTN_OK)
        clattn__kv_state_release_memory(st);
    return status;
}

/* Copies the first rows[parents[r]] rows of every sequence of cache [batch, capacity, width]
 * (elements of `element` bytes) from `from` (a copy of the cache) back into the cache in the
 * parents' order. */
static clattn_status gather(clattn_context *ctx, cl_mem cache, cl_mem from, size_t batch,
                            size_t capacity, size_t width, size_t element, const size_t *rows,
                            const size_t *parents)
{
    size_t seq_bytes = capacity * width * element;
    const char *what = "reordering the key/value cache";
    clattn_status status = clattn__copy_bytes(ctx, cache, 0, from, 0, batch * seq_bytes, "%s",
                                              what);
    for (size_t r = 0; status == CLATTN_OK && r < batch; r++) {
        size_t used = rows[parents[r]] * width * element;
        if (used > 0)
            status = clattn__copy_bytes(ctx, from, parents[r] * seq_bytes, cache, r * seq_bytes,
                                        used, "%s", what);
    }
    return status;
}

clattn_status clattn__kv_state_reorder(clattn_kv_state *st, const size_t *parents)
{
    clattn_context *ctx = st->ctx;
    size_t kw = st->k_width, vw = st->v_width, element = st->half ? 2 : sizeof(float);
    size_t bytes = st->batch * st->capacity * (kw > vw ? kw : vw) * element;
    cl_mem from = NULL;
    size_t *old = malloc(st->batch * sizeof(*old));
    if (!old)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "reordering the key/value cache: out of host memory");
    memcpy(old, st->lengths, st->batch * sizeof(*old));
    clattn_status status = clattn__buffer_create(ctx, bytes, &from, "a copy of the cache");
    for (size_t i = 0; status == CLATTN_OK && i < st->layers; i++)
        if (!(status = gather(ctx, st->self[i].k, from, st->batch, st->capacity, kw, element,
                              old, parents)))
            status = gather(ctx, st->self[i].v, from, st->batch, st->capacity, vw, element,
                            old, parents);
    for (size_t r = 0; status == CLATTN_OK && r < st->batch; r++)
        st->lengths[r] = old[parents[r]];
    free(old);
    if (from) { /* the copies above read it: wait before releasing it */
        status = clattn__wait(ctx, status, "reordering the key/value cache");
        clReleaseMemObject(from);
    }
    return status;
}

bool clattn__kv_state_common_length(const clattn_kv_state *st, size_t *length)
{
    for (size_t b = 1; b < st->batch; b++)
        if (st->lengths[b] != st->lengths[0])
            return false;
    *length = st->lengths[0];
    return true;
}

void clattn__kv_state_clear(clattn_kv_state *st)
{
    memset(st->lengths, 0, st->batch * sizeof(*st->lengths));
}

/* ---- slots ---- */

clattn_status clattn__kv_state_acquire(clattn_kv_state *st, const char *fn, size_t *slot)
{
    for (size_t b = 0; b < st->batch; b++)
        if (!st->in_use[b]) {
            st->in_use[b] = true;
            st->lengths[b] = 0;
            *slot = b;
            return CLATTN_OK;
        }
    return clattn__fail(st->ctx, CLATTN_ERROR_OUT_OF_RANGE,
                        "%s: all %zu sequences of the key/value state are in use", fn, st->batch);
}

/* Checks that `slot` names a sequence in use. */
static clattn_status check_slot(const clattn_kv_state *st, const char *fn, size_t slot)
{
    CLATTN_CHECK_ARG(st->ctx, fn, slot < st->batch && st->in_use[slot],
                     "sequence %zu of the key/value state is not in use (%zu sequences)", slot,
                     st->batch);
    return CLATTN_OK;
}

clattn_status clattn__kv_state_release_slot(clattn_kv_state *st, const char *fn, size_t slot)
{
    clattn_status status = check_slot(st, fn, slot);
    if (status != CLATTN_OK)
        return status;
    st->in_use[slot] = false;
    st->lengths[slot] = 0;
    return CLATTN_OK;
}

clattn_status clattn__kv_state_truncate(clattn_kv_state *st, const char *fn, size_t slot,
                                        size_t length)
{
    clattn_status status = check_slot(st, fn, slot);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(st->ctx, fn, length <= st->lengths[slot],
                     "sequence %zu holds %zu tokens: it cannot be truncated to %zu", slot,
                     st->lengths[slot], length);
    st->lengths[slot] = length;
    return CLATTN_OK;
}

clattn_status clattn__kv_state_copy(clattn_kv_state *st, const char *fn, size_t from, size_t to)
{
    clattn_status status;
    if ((status = check_slot(st, fn, from)) || (status = check_slot(st, fn, to)))
        return status;
    if (from == to)
        return CLATTN_OK;
    size_t element = st->half ? 2 : sizeof(float), rows = st->lengths[from];
    for (size_t i = 0; i < st->layers && rows > 0; i++) {
        size_t kseq = st->capacity * st->k_width * element, vseq = st->capacity * st->v_width * element;
        if ((status = clattn__copy_bytes(st->ctx, st->self[i].k, from * kseq, st->self[i].k,
                                         to * kseq, rows * st->k_width * element,
                                         "%s: copying sequence %zu of the key/value state", fn,
                                         from)) ||
            (status = clattn__copy_bytes(st->ctx, st->self[i].v, from * vseq, st->self[i].v,
                                         to * vseq, rows * st->v_width * element,
                                         "%s: copying sequence %zu of the key/value state", fn,
                                         from)))
            return status;
    }
    st->lengths[to] = rows;
    return CLATTN_OK;
}
