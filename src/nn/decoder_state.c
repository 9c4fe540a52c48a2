/* Incremental decoding: the public state over the block stack's key/value state. */
#include "decoder_internal.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

void clattn_decoder_state_destroy(clattn_decoder_state **pst)
{
    if (!pst || !*pst)
        return;
    clattn__kv_state_destroy(&(*pst)->kv);
    free(*pst);
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
    const clattn_block_spec *s = &dec->stack.spec;
    clattn_kv_state *kv;
    clattn_status status = clattn__kv_state_create(
        ctx, fn, s->num_layers, batch, capacity, s->kv_heads * s->head_dim_qk,
        s->kv_heads * s->head_dim_v, params->half_cache != 0, s->cross_attention, &kv);
    if (status != CLATTN_OK)
        return status;
    clattn_decoder_state *st = calloc(1, sizeof(*st));
    if (!st) {
        clattn__kv_state_destroy(&kv);
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    }
    st->dec = dec;
    st->kv = kv;
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
    size_t batch = st->kv->batch;
    CLATTN_CHECK_ARG(ctx, fn, dec->stack.loaded, "the decoder has no weights");
    CLATTN_CHECK_ARG(ctx, fn, memory, "memory is NULL");
    CLATTN_CHECK_ARG(ctx, fn, memory->ctx == ctx, "memory belongs to another context");
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(memory), "memory must be contiguous");
    if (memory->ndim != 3 || memory->shape[0] != batch || memory->shape[2] != c->d_model ||
        memory->shape[1] == 0)
        return clattn__expect_shape(ctx, fn, "memory", memory->ndim, memory->shape, 3,
                                    (size_t[]){batch, memory->ndim == 3 && memory->shape[1]
                                                          ? memory->shape[1]
                                                          : 1,
                                               c->d_model},
                                    "[B, S, d_model]");
    size_t S = memory->shape[1];
    if (mask) {
        CLATTN_CHECK_ARG(ctx, fn, mask->ctx == ctx, "the mask belongs to another context");
        CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(mask), "the mask must be contiguous");
        clattn_status status = clattn__expect_shape(ctx, fn, "memory_key_padding_mask", mask->ndim,
                                                    mask->shape, 2, (size_t[]){batch, S},
                                                    "[B, S]");
        if (status != CLATTN_OK)
            return status;
    }
    size_t rows;
    if (!clattn__mul_size(batch, S, &rows) || rows > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: the memory is too long", fn);
    return clattn__block_stack_set_memory(&dec->stack, st->kv, fn, memory->mem, memory->offset, S,
                                          mask ? mask->mem : NULL, mask ? mask->offset : 0);
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
    return st ? st->kv->lengths[0] : 0; /* every sequence at one length */
}

void clattn_decoder_state_reset(clattn_decoder_state *st)
{
    if (st)
        clattn__kv_state_clear(st->kv);
}

clattn_status clattn__decoder_state_reorder(clattn_decoder_state *st, const size_t *parents)
{
    return clattn__kv_state_reorder(st->kv, parents);
}
