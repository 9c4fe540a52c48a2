/* The Transformer decoder: configuration, life cycle and the teacher-forced forward pass. */
#include "decoder_internal.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"
#include "ops/elementwise.h"
#include "encoder_internal.h"
#include "mha_internal.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

static const char fn_forward[] = "clattn_decoder_forward";

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

/* The ALiBi slopes of the self-attention's heads, on the device once. */
static clattn_status upload_alibi_slopes(clattn_context *ctx, size_t heads, cl_mem *slopes_mem)
{
    float *slopes = malloc(heads * sizeof(float));
    if (!slopes)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_decoder_create: out of host memory");
    clattn_status status = clattn_alibi_slopes(heads, slopes);
    if (status == CLATTN_OK)
        status = clattn__upload(ctx, slopes, heads, "ALiBi slopes", slopes_mem);
    free(slopes);
    return status;
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
    if (config->alibi && (status = upload_alibi_slopes(ctx, config->nhead, &dec->alibi_slopes))) {
        free(dec);
        return status;
    }
    dec->ctx = ctx;
    dec->cfg = *config;
    dec->cfg.head_dim_qk = resolved.head_dim_qk;
    dec->cfg.head_dim_v = resolved.head_dim_v;
    dec->cfg.norm_first = resolved.norm_first;
    dec->cfg.final_norm = resolved.final_norm;
    dec->cfg.num_kv_heads = kv_heads;
    *out = dec;
    return CLATTN_OK;
}

void clattn_decoder_destroy(clattn_decoder **pdec)
{
    if (!pdec || !*pdec)
        return;
    clattn__decoder_weights_release(&(*pdec)->weights, (*pdec)->cfg.num_layers);
    clattn__release_mem(&(*pdec)->alibi_slopes);
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

/* ---- forward ---- */

/* One pass: sizes, borrowed workspace buffers, and the two attention calls' templates. */
typedef struct pass {
    clattn_decoder *dec;
    clattn_decoder_state *state; /* NULL: teacher-forced over a memory tensor */
    size_t tokens;   /* B·T (or B·n new tokens) */
    cl_mem x;        /* [tokens, d] the activations */
    cl_mem sub;      /* [tokens, d] a sub-layer's output */
    cl_mem normed;   /* [tokens, d] pre-LN's normalised activations */
    cl_mem hidden;   /* [tokens, d_ff] */
    clattn_mha_io self, cross; /* masks, causal, path; query/out filled per layer */
} pass;

static int activation_kind(clattn_activation a)
{
    return a == CLATTN_ACTIVATION_GELU        ? CLATTN_ACT_GELU
           : a == CLATTN_ACTIVATION_GELU_TANH ? CLATTN_ACT_GELU_TANH
           : a == CLATTN_ACTIVATION_SILU      ? CLATTN_ACT_SILU
                                               : CLATTN_ACT_RELU;
}

/* sub = self-attention of `input` (layer i): over the whole target, or over the state's cache. */
static clattn_status attend_self(pass *p, size_t i, cl_mem input)
{
    clattn_mha_io io = p->self;
    io.query = input;
    io.out = p->sub;
    clattn_decoder_layer *l = &p->dec->weights.layers[i];
    if (p->state)
        return clattn__mha_run_cached(l->self_attn, &io, &p->state->self[i], p->state->length);
    return clattn__mha_run(l->self_attn, &io);
}

/* sub = cross-attention of `input` (layer i) over the memory (projected once with a state). */
static clattn_status attend_cross(pass *p, size_t i, cl_mem input)
{
    clattn_mha_io io = p->cross;
    io.query = input;
    io.out = p->sub;
    clattn_decoder_layer *l = &p->dec->weights.layers[i];
    if (p->state)
        return clattn__mha_run_projected(l->cross_attn, &io, p->state->memory_k[i],
                                         p->state->memory_v[i]);
    return clattn__mha_run(l->cross_attn, &io);
}

static clattn_status feed_forward(pass *p, clattn_decoder_layer *l, cl_mem input)
{
    const clattn_decoder_config *c = &p->dec->cfg;
    return clattn__ffn_forward(p->dec->ctx, &l->ffn, p->tokens, c->d_model, c->dim_feedforward,
                               activation_kind(c->activation), input, p->hidden, p->sub);
}

/* x = LN(x + sub (+ bias)). */
static clattn_status add_norm(pass *p, const clattn_norm *n, cl_mem bias)
{
    const clattn_decoder_config *c = &p->dec->cfg;
    return clattn__layernorm(p->dec->ctx, p->x, 0, p->sub, 0, bias, p->x, 0, p->tokens,
                             c->d_model, n->weight, n->bias, c->layer_norm_eps);
}

static clattn_status layer_post_ln(pass *p, size_t i)
{
    clattn_decoder_layer *l = &p->dec->weights.layers[i];
    clattn_status status;
    if ((status = attend_self(p, i, p->x)) || (status = add_norm(p, &l->norm1, NULL)) ||
        (status = attend_cross(p, i, p->x)) || (status = add_norm(p, &l->norm2, NULL)) ||
        (status = feed_forward(p, l, p->x)))
        return status;
    return add_norm(p, &l->norm3, l->ffn.b2);
}

/* normed = LN(x). */
static clattn_status norm_into(pass *p, const clattn_norm *n)
{
    const clattn_decoder_config *c = &p->dec->cfg;
    return clattn__layernorm(p->dec->ctx, p->x, 0, NULL, 0, NULL, p->normed, 0, p->tokens,
                             c->d_model, n->weight, n->bias, c->layer_norm_eps);
}

/* x += sub (+ bias). */
static clattn_status residual(pass *p, cl_mem bias)
{
    return clattn__add(p->dec->ctx, p->x, 0, p->sub, 0, bias, p->tokens, p->dec->cfg.d_model);
}

static clattn_status layer_pre_ln(pass *p, size_t i)
{
    clattn_decoder_layer *l = &p->dec->weights.layers[i];
    clattn_status status;
    if ((status = norm_into(p, &l->norm1)) || (status = attend_self(p, i, p->normed)) ||
        (status = residual(p, NULL)) || (status = norm_into(p, &l->norm2)) ||
        (status = attend_cross(p, i, p->normed)) || (status = residual(p, NULL)) ||
        (status = norm_into(p, &l->norm3)) || (status = feed_forward(p, l, p->normed)))
        return status;
    return residual(p, l->ffn.b2);
}

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

/* The self-attention's positions (ALiBi, RoPE) from the configuration, rows from position 0
 * (a step's past is added by clattn__mha_run_cached). */
static void self_positions(const clattn_decoder *dec, clattn_mha_io *self)
{
    const clattn_decoder_config *c = &dec->cfg;
    if (c->alibi) {
        self->mods.flags |= CLATTN_MOD_ALIBI;
        self->mods.alibi = dec->alibi_slopes;
        self->mods.alibi_offset = 0;
    }
    if (c->rope_theta > 0.0f) {
        self->rope = true;
        self->rope_q = (clattn_rotary_spec){c->rotary_dim ? c->rotary_dim : c->head_dim_qk,
                                            c->rope_interleaved != 0, (double)c->rope_theta, 0};
        self->rope_key_pos0 = 0;
    }
}

/* The teacher-forced pass's attention templates: masks over the whole target and the memory. */
static clattn_status full_templates(pass *p, const clattn_tensor *memory, size_t B, size_t T,
                                    const clattn_decoder_forward_params *params, const char *fn)
{
    clattn_context *ctx = p->dec->ctx;
    size_t S = memory->shape[1], heads = p->dec->cfg.nhead;
    if (memory->shape[0] != B)
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: tgt [%zu, %zu, ...] and memory [%zu, %zu, ...] must share the "
                            "batch size",
                            fn, B, T, memory->shape[0], S);
    p->self.batch = B, p->self.seq_q = T, p->self.seq_k = T;
    p->self.causal = params->tgt_is_causal;
    p->self.path = params->path;
    p->cross.batch = B, p->cross.seq_q = T, p->cross.seq_k = S;
    p->cross.key = p->cross.value = memory->mem;
    p->cross.key_offset = p->cross.value_offset = memory->offset;
    p->cross.path = params->path;
    clattn_status status;
    if ((status = clattn__attn_mask_view(ctx, fn, params->tgt_mask, params->tgt_mask_kind,
                                         CLATTN_MASK_3D_BATCH_X_HEADS, B, heads, T, T,
                                         &p->self.attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn, params->tgt_key_padding_mask,
                                           params->tgt_key_padding_mask_kind, B, T,
                                           &p->self.key_padding_mask)) ||
        (status = clattn__attn_mask_view(ctx, fn, params->memory_mask, params->memory_mask_kind,
                                         CLATTN_MASK_3D_BATCH_X_HEADS, B, heads, T, S,
                                         &p->cross.attn_mask)))
        return status;
    return clattn__key_padding_view(ctx, fn, params->memory_key_padding_mask,
                                    params->memory_key_padding_mask_kind, B, S,
                                    &p->cross.key_padding_mask);
}

/* A step's templates: causal self-attention over the cache, cross-attention over the memory. */
static void step_templates(pass *p, size_t B, size_t n)
{
    clattn_decoder_state *st = p->state;
    p->self.batch = B, p->self.seq_q = n, p->self.seq_k = st->length + n;
    p->self.causal = 1;
    p->cross.batch = B, p->cross.seq_q = n, p->cross.seq_k = st->memory_len;
    if (st->memory_mask)
        p->cross.key_padding_mask = (clattn_mask_view){
            st->memory_mask, 0, st->memory_len, 0, 0, 1,
            st->memory_mask_kind == CLATTN_MASK_BOOL ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE};
}

clattn_status clattn__decoder_run(clattn_decoder *dec, clattn_decoder_state *state,
                                  const clattn_tensor *tgt, const clattn_tensor *memory,
                                  clattn_tensor *out, const clattn_decoder_forward_params *params,
                                  const char *fn)
{
    clattn_context *ctx = dec->ctx;
    const clattn_decoder_config *c = &dec->cfg;
    CLATTN_CHECK_ARG(ctx, fn, dec->loaded,
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
    pass p;
    memset(&p, 0, sizeof(p));
    p.dec = dec;
    p.state = state;
    p.tokens = B * T;
    if (state) {
        CLATTN_CHECK_ARG(ctx, fn, B == state->batch,
                         "x has %zu sequences but the state was made for %zu", B, state->batch);
        CLATTN_CHECK_ARG(ctx, fn, state->memory_len > 0,
                         "the state has no memory (call clattn_decoder_state_set_memory first)");
        if (T > state->capacity - state->length)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: %zu new tokens do not fit: the cache holds %zu of its %zu",
                                fn, T, state->length, state->capacity);
        step_templates(&p, B, T);
    } else if ((status = full_templates(&p, memory, B, T, params, fn))) {
        return status;
    }
    self_positions(dec, &p.self);
    size_t row = c->d_model * sizeof(float), hidden_row = c->dim_feedforward * sizeof(float);
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_X, p.tokens * row, &p.x)) ||
        (status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_OUT, p.tokens * row, &p.sub)) ||
        (status = clattn__workspace_slot(ctx, CLATTN_SLOT_FFN_HIDDEN, p.tokens * hidden_row,
                                         &p.hidden)) ||
        (c->norm_first && (status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_NORMED,
                                                           p.tokens * row, &p.normed))))
        return status;

    size_t bytes = p.tokens * row;
    cl_int err = clEnqueueCopyBuffer(ctx->queue, tgt->mem, p.x, tgt->offset * sizeof(float), 0,
                                     bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "%s: copying the target", fn);
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++)
        status = c->norm_first ? layer_pre_ln(&p, i) : layer_post_ln(&p, i);
    if (status != CLATTN_OK)
        return status;
    if (c->final_norm)
        status = clattn__layernorm(ctx, p.x, 0, NULL, 0, NULL, out->mem, out->offset, p.tokens,
                                   c->d_model, dec->weights.norm.weight, dec->weights.norm.bias,
                                   c->layer_norm_eps);
    else if ((err = clEnqueueCopyBuffer(ctx->queue, p.x, out->mem, 0, out->offset * sizeof(float),
                                        bytes, 0, NULL, NULL)) != CL_SUCCESS)
        status = clattn__fail_cl(ctx, err, "%s: copying the result", fn);
    if (status == CLATTN_OK && state)
        state->length += T;
    return status;
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
