/* Incremental decoding: the per-layer key/value caches and the projected memory. */
#include "decoder_internal.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

static void release_memory(clattn_decoder_state *st, size_t layers)
{
    for (size_t i = 0; i < layers; i++) {
        clattn__release_mem(&st->memory_k[i]);
        clattn__release_mem(&st->memory_v[i]);
    }
    clattn__release_mem(&st->memory_mask);
    st->memory_len = 0;
}

void clattn_decoder_state_destroy(clattn_decoder_state **pst)
{
    if (!pst || !*pst)
        return;
    clattn_decoder_state *st = *pst;
    size_t layers = st->dec->cfg.num_layers;
    for (size_t i = 0; st->self && i < layers; i++) {
        clattn__release_mem(&st->self[i].k);
        clattn__release_mem(&st->self[i].v);
    }
    if (st->memory_k && st->memory_v)
        release_memory(st, layers);
    free(st->self), free(st->memory_k), free(st->memory_v);
    free(st);
    *pst = NULL;
}

void clattn_decoder_state_params_default(clattn_decoder_state_params *params, size_t batch,
                                         size_t capacity)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->batch = batch;
    params->capacity = capacity;
}

/* Bytes per cached key or value element. */
static size_t element_size(const clattn_decoder_state *st)
{
    return st->half_cache ? 2 : sizeof(float);
}

clattn_status clattn_decoder_state_create(clattn_decoder *dec, clattn_decoder_state **out,
                                          size_t batch, size_t capacity)
{
    clattn_decoder_state_params params;
    clattn_decoder_state_params_default(&params, batch, capacity);
    return clattn_decoder_state_create_with(dec, out, &params);
}

clattn_status clattn_decoder_state_create_with(clattn_decoder *dec, clattn_decoder_state **out,
                                               const clattn_decoder_state_params *params)
{
    static const char fn[] = "clattn_decoder_state_create";
    CLATTN_CHECK_ARG(NULL, fn, dec, "decoder is NULL");
    clattn_context *ctx = dec->ctx;
    CLATTN_CHECK_ARG(ctx, fn, out, "state is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, params, "params is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_decoder_state_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, params->half_cache == 0 || params->half_cache == 1,
                     "half_cache is %d (0 or 1)", params->half_cache);
    size_t batch = params->batch, capacity = params->capacity;
    CLATTN_CHECK_ARG(ctx, fn, batch > 0 && capacity > 0,
                     "batch (%zu) and capacity (%zu) must be positive", batch, capacity);
    const clattn_decoder_config *c = &dec->cfg;
    size_t qk = c->num_kv_heads * c->head_dim_qk, vw = c->num_kv_heads * c->head_dim_v;
    size_t element = params->half_cache ? 2 : sizeof(float), rows, kb, vb;
    if (!clattn__mul_size(batch, capacity, &rows) || !clattn__mul_size(rows, qk * element, &kb) ||
        !clattn__mul_size(rows, vw * element, &vb) || capacity > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: a cache of %zu x %zu tokens is too large", fn, batch, capacity);
    /* All the layers' caches at once, before allocating any: the device's global memory bounds
     * them even when every buffer is under its maximum allocation. */
    size_t layer, total;
    if (!clattn__add_size(kb, vb, &layer) || !clattn__mul_size(layer, c->num_layers, &total) ||
        total > ctx->info.global_mem_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: the key/value cache of %zu sequences x %zu tokens x %zu layers "
                            "needs %.1f MiB, more than the device's global memory (%.1f MiB)",
                            fn, batch, capacity, c->num_layers,
                            ((double)kb + (double)vb) * (double)c->num_layers / 1048576.0,
                            (double)ctx->info.global_mem_bytes / 1048576.0);
    clattn_decoder_state *st = calloc(1, sizeof(*st));
    if (!st)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    st->dec = dec;
    st->batch = batch;
    st->capacity = capacity;
    st->half_cache = params->half_cache != 0;
    st->self = calloc(c->num_layers, sizeof(*st->self));
    st->memory_k = calloc(c->num_layers, sizeof(cl_mem));
    st->memory_v = calloc(c->num_layers, sizeof(cl_mem));
    clattn_status status = CLATTN_OK;
    if (!st->self || !st->memory_k || !st->memory_v)
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; status == CLATTN_OK && i < c->num_layers; i++) {
        st->self[i].capacity = capacity;
        st->self[i].half = st->half_cache;
        if (!(status = clattn__buffer_create(ctx, kb, &st->self[i].k, "the key cache")))
            status = clattn__buffer_create(ctx, vb, &st->self[i].v, "the value cache");
    }
    if (status != CLATTN_OK) {
        clattn_decoder_state_destroy(&st);
        return status;
    }
    *out = st;
    return CLATTN_OK;
}

clattn_status clattn_decoder_state_set_memory(clattn_decoder_state *st,
                                              const clattn_tensor *memory,
                                              const clattn_tensor *mask)
{
    static const char fn[] = "clattn_decoder_state_set_memory";
    CLATTN_CHECK_ARG(NULL, fn, st, "state is NULL");
    clattn_decoder *dec = st->dec;
    clattn_context *ctx = dec->ctx;
    const clattn_decoder_config *c = &dec->cfg;
    CLATTN_CHECK_ARG(ctx, fn, dec->loaded, "the decoder has no weights");
    CLATTN_CHECK_ARG(ctx, fn, memory, "memory is NULL");
    CLATTN_CHECK_ARG(ctx, fn, memory->ctx == ctx, "memory belongs to another context");
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(memory), "memory must be contiguous");
    if (memory->ndim != 3 || memory->shape[0] != st->batch || memory->shape[2] != c->d_model ||
        memory->shape[1] == 0)
        return clattn__expect_shape(ctx, fn, "memory", memory->ndim, memory->shape, 3,
                                    (size_t[]){st->batch, memory->ndim == 3 && memory->shape[1]
                                                              ? memory->shape[1]
                                                              : 1,
                                               c->d_model},
                                    "[B, S, d_model]");
    size_t S = memory->shape[1];
    if (mask) {
        CLATTN_CHECK_ARG(ctx, fn, mask->ctx == ctx, "the mask belongs to another context");
        CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(mask), "the mask must be contiguous");
        clattn_status status = clattn__expect_shape(ctx, fn, "memory_key_padding_mask", mask->ndim,
                                                    mask->shape, 2, (size_t[]){st->batch, S},
                                                    "[B, S]");
        if (status != CLATTN_OK)
            return status;
    }
    size_t qk = c->num_kv_heads * c->head_dim_qk, vw = c->num_kv_heads * c->head_dim_v, rows;
    if (!clattn__mul_size(st->batch, S, &rows) || rows > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: the memory is too long", fn);
    release_memory(st, c->num_layers);
    st->length = 0;
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; status == CLATTN_OK && i < c->num_layers; i++)
        if (!(status = clattn__buffer_create(ctx, rows * qk * 4, &st->memory_k[i],
                                             "the projected memory")) &&
            !(status = clattn__buffer_create(ctx, rows * vw * 4, &st->memory_v[i],
                                             "the projected memory")))
            status = clattn__mha_project_kv(dec->weights.layers[i].cross_attn, memory->mem,
                                            memory->offset, st->batch, S, st->memory_k[i],
                                            st->memory_v[i]);
    if (status == CLATTN_OK && mask &&
        !(status = clattn__buffer_create(ctx, rows * 4, &st->memory_mask, "the memory mask"))) {
        cl_int err = clEnqueueCopyBuffer(ctx->queue, mask->mem, st->memory_mask,
                                         mask->offset * sizeof(float), 0, rows * sizeof(float), 0,
                                         NULL, NULL);
        if (err != CL_SUCCESS)
            status = clattn__fail_cl(ctx, err, "%s: copying the mask", fn);
        st->memory_mask_kind = CLATTN_MASK_BOOL;
    }
    if (status != CLATTN_OK) {
        release_memory(st, c->num_layers);
        return status;
    }
    st->memory_len = S;
    return CLATTN_OK;
}

clattn_status clattn_decoder_step(clattn_decoder_state *st, const clattn_tensor *x,
                                  clattn_tensor *out)
{
    static const char fn[] = "clattn_decoder_step";
    CLATTN_CHECK_ARG(NULL, fn, st, "state is NULL");
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    return clattn__decoder_run(st->dec, st, x, NULL, out, &params, fn);
}

size_t clattn_decoder_state_length(const clattn_decoder_state *st)
{
    return st ? st->length : 0;
}

void clattn_decoder_state_reset(clattn_decoder_state *st)
{
    if (st)
        st->length = 0;
}

/* Copies the first `rows` of every sequence of cache [batch, capacity, width] (elements of
 * `element` bytes) from `from` (a copy of the cache) back into the cache in the parents' order. */
static clattn_status gather(clattn_context *ctx, cl_mem cache, cl_mem from, size_t batch,
                            size_t capacity, size_t width, size_t element, size_t rows,
                            const size_t *parents)
{
    size_t seq_bytes = capacity * width * element, used = rows * width * element;
    cl_int err = clEnqueueCopyBuffer(ctx->queue, cache, from, 0, 0, batch * seq_bytes, 0, NULL,
                                     NULL);
    for (size_t r = 0; err == CL_SUCCESS && r < batch && used > 0; r++)
        err = clEnqueueCopyBuffer(ctx->queue, from, cache, parents[r] * seq_bytes, r * seq_bytes,
                                  used, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "reordering the key/value cache");
    return CLATTN_OK;
}

clattn_status clattn__decoder_state_reorder(clattn_decoder_state *st, const size_t *parents)
{
    clattn_decoder *dec = st->dec;
    clattn_context *ctx = dec->ctx;
    const clattn_decoder_config *c = &dec->cfg;
    size_t kw = c->num_kv_heads * c->head_dim_qk, vw = c->num_kv_heads * c->head_dim_v;
    size_t element = element_size(st);
    size_t bytes = st->batch * st->capacity * (kw > vw ? kw : vw) * element;
    cl_mem from = NULL;
    clattn_status status = clattn__buffer_create(ctx, bytes, &from, "a copy of the cache");
    for (size_t i = 0; status == CLATTN_OK && i < c->num_layers; i++)
        if (!(status = gather(ctx, st->self[i].k, from, st->batch, st->capacity, kw, element,
                              st->length, parents)))
            status = gather(ctx, st->self[i].v, from, st->batch, st->capacity, vw, element,
                            st->length, parents);
    if (from) { /* the copies above read it: wait before releasing it */
        cl_int err = clFinish(ctx->queue);
        clReleaseMemObject(from);
        if (status == CLATTN_OK && err != CL_SUCCESS)
            status = clattn__fail_cl(ctx, err, "reordering the key/value cache");
    }
    return status;
}
