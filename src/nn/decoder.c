/* The Transformer decoder: configuration, life cycle, weights and the teacher-forced forward
 * pass, all through the block stack (cross-attending layers). */
#include "decoder_internal.h"
#include "runtime/buffers.h"
#include "encoder_internal.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

static const char fn_forward[] = "clattn_decoder_forward";
static const char fn_load[] = "clattn_decoder_load_weights";

void clattn_decoder_config_default(clattn_decoder_config *config, size_t d_model, size_t nhead,
                                   size_t num_layers, size_t dim_feedforward)
{
    if (!config)
        return;
    memset(config, 0, sizeof(*config));
    config->d_model = d_model;
    config->nhead = nhead;
    config->num_layers = num_layers;
    config->dim_feedforward = dim_feedforward;
    config->activation = CLATTN_ACTIVATION_RELU;
    config->layer_norm_eps = 1e-5f;
}

void clattn_decoder_forward_params_default(clattn_decoder_forward_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->tgt_mask_kind = CLATTN_MASK_BOOL;
    params->tgt_key_padding_mask_kind = CLATTN_MASK_BOOL;
    params->memory_mask_kind = CLATTN_MASK_BOOL;
    params->memory_key_padding_mask_kind = CLATTN_MASK_BOOL;
    params->path = CLATTN_PATH_AUTO;
}

clattn_status clattn_decoder_create(clattn_context *ctx, clattn_decoder **out,
                                    const clattn_decoder_config *config)
{
    static const char fn[] = "clattn_decoder_create";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, out, "decoder is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, config, "config is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(config->reserved, sizeof(config->reserved)),
                     "config->reserved is not zero (initialise config with "
                     "clattn_decoder_config_default)");
    /* The layer stack's rules are the encoder's: check through them. */
    clattn_encoder_config stack, resolved;
    clattn_encoder_config_default(&stack, config->d_model, config->nhead, config->num_layers,
                                  config->dim_feedforward);
    stack.head_dim_qk = config->head_dim_qk;
    stack.head_dim_v = config->head_dim_v;
    stack.activation = config->activation;
    stack.norm_first = config->norm_first;
    stack.layer_norm_eps = config->layer_norm_eps;
    stack.final_norm = config->final_norm;
    stack.alibi = config->alibi;
    stack.rope_theta = config->rope_theta;
    stack.rotary_dim = config->rotary_dim;
    stack.rope_interleaved = config->rope_interleaved;
    clattn_status status = clattn__resolve_layer_config(ctx, fn, &stack, &resolved);
    if (status != CLATTN_OK)
        return status;
    size_t kv_heads = config->num_kv_heads ? config->num_kv_heads : config->nhead;
    CLATTN_CHECK_ARG(ctx, fn, config->nhead % kv_heads == 0,
                     "num_kv_heads %zu does not divide nhead %zu", kv_heads, config->nhead);
    clattn_decoder *dec = calloc(1, sizeof(*dec));
    if (!dec)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    dec->ctx = ctx;
    dec->cfg = *config;
    dec->cfg.head_dim_qk = resolved.head_dim_qk;
    dec->cfg.head_dim_v = resolved.head_dim_v;
    dec->cfg.norm_first = resolved.norm_first;
    dec->cfg.final_norm = resolved.final_norm;
    dec->cfg.num_kv_heads = kv_heads;
    /* The encoder's layers with grouped-query heads and cross-attention (causal per call). */
    clattn_block_spec spec;
    clattn__block_spec_of_layers(&resolved, &spec);
    spec.kv_heads = kv_heads;
    spec.cross_attention = true;
    if ((status = clattn__block_stack_init(ctx, fn, &spec, &dec->stack))) {
        free(dec);
        return status;
    }
    *out = dec;
    return CLATTN_OK;
}

void clattn_decoder_destroy(clattn_decoder **pdec)
{
    if (!pdec || !*pdec)
        return;
    clattn__block_stack_release(&(*pdec)->stack);
    free(*pdec);
    *pdec = NULL;
}

clattn_status clattn_decoder_get_config(const clattn_decoder *dec, clattn_decoder_config *config)
{
    static const char fn[] = "clattn_decoder_get_config";
    CLATTN_CHECK_ARG(NULL, fn, dec, "decoder is NULL");
    CLATTN_CHECK_ARG(dec->ctx, fn, config, "config is NULL");
    *config = dec->cfg;
    return CLATTN_OK;
}

/* ---- weights: nn.TransformerDecoder's names, through the block stack ---- */

clattn_status clattn_decoder_load_weights(clattn_decoder *dec, clattn_weight_lookup lookup,
                                          void *user_data)
{
    CLATTN_CHECK_ARG(NULL, fn_load, dec, "decoder is NULL");
    return clattn__block_stack_load(&dec->stack, fn_load, lookup, user_data, NULL, NULL);
}

clattn_status clattn_decoder_init_random(clattn_decoder *dec, uint64_t seed)
{
    static const char fn[] = "clattn_decoder_init_random";
    CLATTN_CHECK_ARG(NULL, fn, dec, "decoder is NULL");
    return clattn__block_stack_init_random(&dec->stack, fn, fn_load, seed, NULL, NULL);
}

/* ---- forward ---- */

/* Checks a contiguous [B, N, d_model] sequence of this context. */
static clattn_status check_sequence(clattn_decoder *dec, const char *fn, const char *name,
                                    const clattn_tensor *t)
{
    clattn_context *ctx = dec->ctx;
    CLATTN_CHECK_ARG(ctx, fn, t, "%s is NULL", name);
    CLATTN_CHECK_ARG(ctx, fn, t->ctx == ctx, "%s belongs to another context", name);
    if (t->ndim != 3 || t->shape[2] != dec->cfg.d_model || t->shape[0] == 0 || t->shape[1] == 0) {
        char got[96];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: %s has shape %s but must be [B, N, d_model] with d_model = %zu "
                            "and B, N > 0",
                            fn, name, got, dec->cfg.d_model);
    }
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(t), "%s must be contiguous", name);
    return CLATTN_OK;
}

/* The teacher-forced run's attention templates: masks over the whole target and the memory. */
static clattn_status full_templates(clattn_decoder *dec, clattn_block_run *run,
                                    const clattn_tensor *memory, size_t B, size_t T,
                                    const clattn_decoder_forward_params *params, const char *fn)
{
    clattn_context *ctx = dec->ctx;
    size_t S = memory->shape[1], heads = dec->cfg.nhead;
    if (memory->shape[0] != B)
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: tgt [%zu, %zu, ...] and memory [%zu, %zu, ...] must share the "
                            "batch size",
                            fn, B, T, memory->shape[0], S);
    clattn_mha_io *self = &run->self, *cross = &run->cross;
    self->batch = B, self->seq_q = T, self->seq_k = T;
    self->causal = params->tgt_is_causal;
    self->path = params->path;
    cross->batch = B, cross->seq_q = T, cross->seq_k = S;
    cross->key = cross->value = memory->mem;
    cross->key_offset = cross->value_offset = memory->offset;
    cross->path = params->path;
    clattn_status status;
    if ((status = clattn__attn_mask_view(ctx, fn, params->tgt_mask, params->tgt_mask_kind,
                                         CLATTN_MASK_3D_BATCH_X_HEADS, B, heads, T, T,
                                         &self->attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn, params->tgt_key_padding_mask,
                                           params->tgt_key_padding_mask_kind, B, T,
                                           &self->key_padding_mask)) ||
        (status = clattn__attn_mask_view(ctx, fn, params->memory_mask, params->memory_mask_kind,
                                         CLATTN_MASK_3D_BATCH_X_HEADS, B, heads, T, S,
                                         &cross->attn_mask)))
        return status;
    return clattn__key_padding_view(ctx, fn, params->memory_key_padding_mask,
                                    params->memory_key_padding_mask_kind, B, S,
                                    &cross->key_padding_mask);
}

clattn_status clattn__decoder_run(clattn_decoder *dec, clattn_decoder_state *state,
                                  const clattn_tensor *tgt, const clattn_tensor *memory,
                                  clattn_tensor *out, const clattn_decoder_forward_params *params,
                                  const char *fn)
{
    clattn_context *ctx = dec->ctx;
    const clattn_decoder_config *c = &dec->cfg;
    CLATTN_CHECK_ARG(ctx, fn, dec->stack.loaded,
                     "the decoder has no weights (load them, or call clattn_decoder_init_random)");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_decoder_forward_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, params->path >= CLATTN_PATH_AUTO && params->path <= CLATTN_PATH_FUSED,
                     "params->path is %d", (int)params->path);
    clattn_status status;
    if ((status = check_sequence(dec, fn, state ? "x" : "tgt", tgt)) ||
        (!state && (status = check_sequence(dec, fn, "memory", memory))) ||
        (status = check_sequence(dec, fn, "out", out)))
        return status;
    size_t B = tgt->shape[0], T = tgt->shape[1];
    if ((status = clattn__expect_shape(ctx, fn, "out", out->ndim, out->shape, 3,
                                       (size_t[]){B, T, c->d_model}, "[B, T, d_model]")))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, out->mem != tgt->mem && (!memory || out->mem != memory->mem),
                     "out must not share a buffer with the inputs");
    size_t longest = memory && memory->shape[1] > T ? memory->shape[1] : T, tokens;
    if (!clattn__mul_size(B, longest, &tokens) || tokens > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: %zu x %zu tokens are too many", fn,
                            B, longest);
    clattn_block_run run;
    memset(&run, 0, sizeof(run));
    run.tokens = B * T;
    run.out = out->mem;
    run.out_offset = out->offset;
    run.function = fn;
    if (state) {
        clattn_kv_state *kv = state->kv;
        CLATTN_CHECK_ARG(ctx, fn, B == kv->batch,
                         "x has %zu sequences but the state was made for %zu", B, kv->batch);
        CLATTN_CHECK_ARG(ctx, fn, !dec->stack.spec.cross_attention || kv->memory_len > 0,
                         "the state has no memory (call clattn_decoder_state_set_memory first)");
        if (T > kv->capacity - kv->lengths[0]) /* every sequence at one length */
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: %zu new tokens do not fit: the cache holds %zu of its %zu",
                                fn, T, kv->lengths[0], kv->capacity);
        run.kv = kv;
        run.self.batch = B, run.self.seq_q = T;
        run.cross.batch = B, run.cross.seq_q = T;
    } else if ((status = full_templates(dec, &run, memory, B, T, params, fn))) {
        return status;
    }
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_X,
                                         run.tokens * c->d_model * sizeof(float), &run.x)))
        return status;
    if ((status = clattn__copy_bytes(ctx, tgt->mem, tgt->offset * sizeof(float), run.x, 0,
                                     run.tokens * c->d_model * sizeof(float),
                                     "%s: copying the target", fn)))
        return status;
    return clattn__block_stack_run(&dec->stack, &run);
}

clattn_status clattn_decoder_forward(clattn_decoder *dec, const clattn_tensor *tgt,
                                     const clattn_tensor *memory, clattn_tensor *out,
                                     const clattn_decoder_forward_params *params)
{
    CLATTN_CHECK_ARG(NULL, fn_forward, dec, "decoder is NULL");
    clattn_decoder_forward_params defaults;
    if (!params) {
        clattn_decoder_forward_params_default(&defaults);
        params = &defaults;
    }
    return clattn__decoder_run(dec, NULL, tgt, memory, out, params, fn_forward);
}
