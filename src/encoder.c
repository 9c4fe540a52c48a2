/* The Transformer encoder: configuration, life cycle and the forward pass. */
#include "encoder_internal.h"
#include "attention_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char fn_forward[] = "clattn_encoder_forward";

static clattn_activation_kind activation_kind(clattn_activation a)
{
    return a == CLATTN_ACTIVATION_GELU ? CLATTN_ACT_GELU : CLATTN_ACT_RELU;
}

void clattn_encoder_config_default(clattn_encoder_config *config, size_t d_model, size_t nhead,
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
    config->positional = CLATTN_POSITIONAL_NONE;
}

void clattn_encoder_forward_params_default(clattn_encoder_forward_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->key_padding_mask_kind = CLATTN_MASK_BOOL;
    params->path = CLATTN_PATH_AUTO;
}

static clattn_status resolve_config(clattn_context *ctx, const clattn_encoder_config *in,
                                    clattn_encoder_config *out)
{
    static const char fn[] = "clattn_encoder_create";
    *out = *in;
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(in->reserved, sizeof(in->reserved)),
                     "%s: invalid argument: config->reserved is not zero (initialise config with "
                     "clattn_encoder_config_default)",
                     fn);
    CLATTN_CHECK_ARG(ctx, in->d_model > 0 && in->nhead > 0 && in->num_layers > 0 &&
                              in->dim_feedforward > 0,
                     "%s: invalid argument: d_model (%zu), nhead (%zu), num_layers (%zu) and "
                     "dim_feedforward (%zu) must all be positive",
                     fn, in->d_model, in->nhead, in->num_layers, in->dim_feedforward);
    bool derived = in->head_dim_qk == 0 || in->head_dim_v == 0;
    CLATTN_CHECK_ARG(ctx, !derived || in->d_model % in->nhead == 0,
                     "%s: invalid argument: d_model %zu is not divisible by nhead %zu", fn,
                     in->d_model, in->nhead);
    if (!out->head_dim_qk)
        out->head_dim_qk = in->d_model / in->nhead;
    if (!out->head_dim_v)
        out->head_dim_v = in->d_model / in->nhead;
    CLATTN_CHECK_ARG(ctx, in->activation == CLATTN_ACTIVATION_RELU ||
                              in->activation == CLATTN_ACTIVATION_GELU,
                     "%s: invalid argument: activation is %d", fn, (int)in->activation);
    CLATTN_CHECK_ARG(ctx, in->positional == CLATTN_POSITIONAL_NONE ||
                              in->positional == CLATTN_POSITIONAL_SINUSOIDAL,
                     "%s: invalid argument: positional is %d", fn, (int)in->positional);
    CLATTN_CHECK_ARG(ctx, isfinite(in->layer_norm_eps) && in->layer_norm_eps > 0.0f,
                     "%s: invalid argument: layer_norm_eps must be positive and finite", fn);
    bool sane = in->d_model < (1u << 24) && in->dim_feedforward < (1u << 28) &&
                in->num_layers < (1u << 16) && in->vocab_size < (1u << 31) &&
                in->nhead < (1u << 20) && out->head_dim_qk < (1u << 24) &&
                out->head_dim_v < (1u << 24) && out->head_dim_qk * in->nhead < (1u << 28) &&
                out->head_dim_v * in->nhead < (1u << 28);
    if (!sane)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: the configuration's sizes are too large",
                            fn);
    out->norm_first = in->norm_first != 0;
    out->final_norm = in->final_norm != 0;
    return CLATTN_OK;
}

clattn_status clattn_encoder_create(clattn_context *ctx, clattn_encoder **out,
                                    const clattn_encoder_config *config)
{
    CLATTN_CHECK_ARG(NULL, ctx, "clattn_encoder_create: invalid argument: ctx is NULL");
    CLATTN_CHECK_ARG(ctx, out, "clattn_encoder_create: invalid argument: encoder is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, config, "clattn_encoder_create: invalid argument: config is NULL");
    clattn_encoder_config cfg;
    clattn_status status = resolve_config(ctx, config, &cfg);
    if (status != CLATTN_OK)
        return status;
    clattn_encoder *enc = calloc(1, sizeof(*enc));
    if (!enc)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_encoder_create: out of host memory");
    enc->ctx = ctx;
    enc->cfg = cfg;
    *out = enc;
    return CLATTN_OK;
}

static void release(cl_mem *mem)
{
    if (*mem)
        clReleaseMemObject(*mem);
    *mem = NULL;
}

void clattn_encoder_destroy(clattn_encoder **penc)
{
    if (!penc || !*penc)
        return;
    clattn_encoder *enc = *penc;
    clattn__encoder_weights_release(&enc->weights, enc->cfg.num_layers);
    release(&enc->x), release(&enc->attn), release(&enc->normed), release(&enc->hidden);
    release(&enc->ids);
    free(enc);
    *penc = NULL;
}

clattn_status clattn_encoder_get_config(const clattn_encoder *enc, clattn_encoder_config *config)
{
    CLATTN_CHECK_ARG(NULL, enc, "clattn_encoder_get_config: invalid argument: encoder is NULL");
    CLATTN_CHECK_ARG(enc->ctx, config, "clattn_encoder_get_config: invalid argument: config is NULL");
    *config = enc->cfg;
    return CLATTN_OK;
}

clattn_status clattn_encoder_set_positional(clattn_encoder *enc, clattn_positional positional)
{
    static const char fn[] = "clattn_encoder_set_positional";
    CLATTN_CHECK_ARG(NULL, enc, "%s: invalid argument: encoder is NULL", fn);
    CLATTN_CHECK_ARG(enc->ctx, positional == CLATTN_POSITIONAL_NONE ||
                                   positional == CLATTN_POSITIONAL_SINUSOIDAL,
                     "%s: invalid argument: positional is %d", fn, (int)positional);
    enc->cfg.positional = positional;
    return CLATTN_OK;
}

/* ---- forward ---- */

/* Grows every scratch buffer to hold `tokens` rows. */
static clattn_status ensure_scratch(clattn_encoder *enc, size_t tokens)
{
    if (enc->x && enc->tokens_capacity >= tokens)
        return CLATTN_OK;
    const clattn_encoder_config *c = &enc->cfg;
    size_t row = c->d_model * sizeof(float), hidden_row = c->dim_feedforward * sizeof(float);
    size_t have[5] = {0, 0, 0, 0, 0};
    cl_mem fresh[5] = {NULL, NULL, NULL, NULL, NULL};
    size_t need[5] = {tokens * row, tokens * row, tokens * row, tokens * hidden_row,
                      tokens * sizeof(cl_int)};
    static const char *const what[5] = {"the encoder activations", "the attention output",
                                        "the normalised activations", "the feed-forward hidden "
                                        "layer", "the token ids"};
    for (int i = 0; i < 5; i++) {
        clattn_status status = clattn__grow_buffer(enc->ctx, &fresh[i], &have[i], need[i], what[i]);
        if (status != CLATTN_OK) {
            for (int j = 0; j < i; j++)
                release(&fresh[j]);
            return status;
        }
    }
    release(&enc->x), release(&enc->attn), release(&enc->normed), release(&enc->hidden);
    release(&enc->ids);
    enc->x = fresh[0], enc->attn = fresh[1], enc->normed = fresh[2], enc->hidden = fresh[3];
    enc->ids = fresh[4];
    enc->tokens_capacity = tokens;
    return CLATTN_OK;
}

typedef struct pass {
    clattn_encoder *enc;
    size_t batch, seq, tokens;
    clattn_mha_forward_params attn_params;
    clattn_tensor *x, *attn, *normed; /* [B, N, d] views of the scratch buffers */
} pass;

static clattn_status layer_post_ln(pass *p, const clattn_encoder_layer *l)
{
    clattn_context *ctx = p->enc->ctx;
    const clattn_encoder_config *c = &p->enc->cfg;
    size_t T = p->tokens, d = c->d_model, ff = c->dim_feedforward;
    float eps = c->layer_norm_eps;
    clattn_status status;
    if ((status = clattn_mha_forward(l->attn, p->x, NULL, NULL, p->attn, &p->attn_params)) ||
        (status = clattn__layernorm(ctx, p->enc->x, 0, p->enc->attn, 0, NULL, p->enc->x, 0, T, d,
                                    l->norm1_w, l->norm1_b, eps)) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_FEED_FORWARD, T, ff, d, p->enc->x, 0, d, l->w1, 0,
                                  d, 0.0f, p->enc->hidden, 0, ff)) ||
        (status = clattn__bias_act(ctx, p->enc->hidden, 0, ff, T, ff, l->b1, 0,
                                   activation_kind(c->activation))) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_FEED_FORWARD, T, d, ff, p->enc->hidden, 0, ff,
                                  l->w2, 0, ff, 0.0f, p->enc->attn, 0, d)))
        return status;
    /* x = LN2(x + (H·W2ᵀ + b2)) */
    return clattn__layernorm(ctx, p->enc->x, 0, p->enc->attn, 0, l->b2, p->enc->x, 0, T, d,
                             l->norm2_w, l->norm2_b, eps);
}

static clattn_status layer_pre_ln(pass *p, const clattn_encoder_layer *l)
{
    clattn_context *ctx = p->enc->ctx;
    const clattn_encoder_config *c = &p->enc->cfg;
    size_t T = p->tokens, d = c->d_model, ff = c->dim_feedforward;
    float eps = c->layer_norm_eps;
    clattn_status status;
    if ((status = clattn__layernorm(ctx, p->enc->x, 0, NULL, 0, NULL, p->enc->normed, 0, T, d,
                                    l->norm1_w, l->norm1_b, eps)) ||
        (status = clattn_mha_forward(l->attn, p->normed, NULL, NULL, p->attn, &p->attn_params)) ||
        (status = clattn__add(ctx, p->enc->x, 0, p->enc->attn, 0, NULL, T, d)) ||
        (status = clattn__layernorm(ctx, p->enc->x, 0, NULL, 0, NULL, p->enc->normed, 0, T, d,
                                    l->norm2_w, l->norm2_b, eps)) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_FEED_FORWARD, T, ff, d, p->enc->normed, 0, d,
                                  l->w1, 0, d, 0.0f, p->enc->hidden, 0, ff)) ||
        (status = clattn__bias_act(ctx, p->enc->hidden, 0, ff, T, ff, l->b1, 0,
                                   activation_kind(c->activation))) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_FEED_FORWARD, T, d, ff, p->enc->hidden, 0, ff,
                                  l->w2, 0, ff, 0.0f, p->enc->attn, 0, d)))
        return status;
    /* x = x + (H·W2ᵀ + b2) */
    return clattn__add(ctx, p->enc->x, 0, p->enc->attn, 0, l->b2, T, d);
}

static clattn_status wrap_scratch(pass *p)
{
    clattn_context *ctx = p->enc->ctx;
    size_t shape[3] = {p->batch, p->seq, p->enc->cfg.d_model};
    clattn_status status;
    if ((status = clattn_tensor_wrap(ctx, &p->x, p->enc->x, 0, 3, shape)) ||
        (status = clattn_tensor_wrap(ctx, &p->attn, p->enc->attn, 0, 3, shape)) ||
        (status = clattn_tensor_wrap(ctx, &p->normed, p->enc->normed, 0, 3, shape)))
        return status;
    return CLATTN_OK;
}

/* Runs the layers and the final norm on enc->x (already holding the embedded input) into out. */
static clattn_status run_layers(pass *p, clattn_tensor *out)
{
    clattn_encoder *enc = p->enc;
    const clattn_encoder_config *c = &enc->cfg;
    clattn_status status = wrap_scratch(p);
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++)
        status = c->norm_first ? layer_pre_ln(p, &enc->weights.layers[i])
                               : layer_post_ln(p, &enc->weights.layers[i]);
    if (status == CLATTN_OK) {
        size_t d = c->d_model;
        if (c->final_norm) {
            status = clattn__layernorm(enc->ctx, enc->x, 0, NULL, 0, NULL, out->mem, out->offset,
                                       p->tokens, d, enc->weights.norm_w, enc->weights.norm_b,
                                       c->layer_norm_eps);
        } else {
            cl_int err = clEnqueueCopyBuffer(enc->ctx->queue, enc->x, out->mem, 0,
                                             out->offset * sizeof(float),
                                             p->tokens * d * sizeof(float), 0, NULL, NULL);
            if (err != CL_SUCCESS)
                status = clattn__fail_cl(enc->ctx, err, "%s: copying the result", fn_forward);
        }
    }
    clattn_tensor_destroy(&p->x), clattn_tensor_destroy(&p->attn);
    clattn_tensor_destroy(&p->normed);
    return status;
}

/* Checks what both forward functions share and prepares the pass. */
static clattn_status begin_pass(clattn_encoder *enc, const char *fn, size_t batch, size_t seq,
                                const clattn_tensor *out, const clattn_encoder_forward_params *params,
                                pass *p)
{
    clattn_context *ctx = enc->ctx;
    const clattn_encoder_config *c = &enc->cfg;
    CLATTN_CHECK_ARG(ctx, enc->loaded,
                     "%s: invalid argument: the encoder has no weights (load them, or call "
                     "clattn_encoder_init_random)",
                     fn);
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "%s: invalid argument: params->reserved is not zero (initialise params with "
                     "clattn_encoder_forward_params_default)",
                     fn);
    CLATTN_CHECK_ARG(ctx, out, "%s: invalid argument: out is NULL", fn);
    CLATTN_CHECK_ARG(ctx, out->ctx == ctx, "%s: invalid argument: out belongs to another context",
                     fn);
    clattn_status status = clattn__expect_shape(ctx, fn, "out", out, 3,
                                                (size_t[]){batch, seq, c->d_model},
                                                "[B, N, d_model]");
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, clattn_tensor_is_contiguous(out),
                     "%s: invalid argument: out must be contiguous", fn);
    size_t tokens;
    if (!clattn__mul_size(batch, seq, &tokens) || tokens > UINT32_MAX ||
        params->position_offset > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: %zu x %zu tokens are too many", fn,
                            batch, seq);
    memset(p, 0, sizeof(*p));
    p->enc = enc;
    p->batch = batch;
    p->seq = seq;
    p->tokens = tokens;
    clattn_mha_forward_params_default(&p->attn_params);
    p->attn_params.key_padding_mask = params->key_padding_mask;
    p->attn_params.key_padding_mask_kind = params->key_padding_mask_kind;
    p->attn_params.causal = params->causal;
    p->attn_params.path = params->path;
    /* Check the mask now, before any work is enqueued. */
    clattn_mask_view unused;
    if (params->key_padding_mask &&
        (status = clattn__key_padding_view(ctx, fn, params->key_padding_mask,
                                           params->key_padding_mask_kind, batch, seq, &unused)))
        return status;
    CLATTN_CHECK_ARG(ctx, params->path >= CLATTN_PATH_AUTO && params->path <= CLATTN_PATH_FUSED,
                     "%s: invalid argument: params->path is %d", fn, (int)params->path);
    return ensure_scratch(enc, tokens);
}

clattn_status clattn_encoder_forward(clattn_encoder *enc, const clattn_tensor *input,
                                     clattn_tensor *out,
                                     const clattn_encoder_forward_params *params)
{
    CLATTN_CHECK_ARG(NULL, enc, "%s: invalid argument: encoder is NULL", fn_forward);
    clattn_context *ctx = enc->ctx;
    clattn_encoder_forward_params defaults;
    if (!params) {
        clattn_encoder_forward_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, input, "%s: invalid argument: input is NULL", fn_forward);
    CLATTN_CHECK_ARG(ctx, input->ctx == ctx,
                     "%s: invalid argument: input belongs to another context", fn_forward);
    size_t d = enc->cfg.d_model;
    if (input->ndim != 3 || input->shape[2] != d) {
        char got[96];
        clattn__format_shape(got, sizeof(got), input->ndim, input->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: input has shape %s but must be [B, N, d_model] with d_model = %zu",
                            fn_forward, got, d);
    }
    CLATTN_CHECK_ARG(ctx, clattn_tensor_is_contiguous(input),
                     "%s: invalid argument: input must be contiguous", fn_forward);
    pass p;
    clattn_status status =
        begin_pass(enc, fn_forward, input->shape[0], input->shape[1], out, params, &p);
    if (status != CLATTN_OK)
        return status;
    if (enc->cfg.positional == CLATTN_POSITIONAL_SINUSOIDAL) {
        status = clattn__add_positional(ctx, input->mem, input->offset, enc->x, 0, p.tokens,
                                        p.seq, d, params->position_offset);
    } else {
        cl_int err = clEnqueueCopyBuffer(ctx->queue, input->mem, enc->x,
                                         input->offset * sizeof(float), 0,
                                         p.tokens * d * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            status = clattn__fail_cl(ctx, err, "%s: copying the input", fn_forward);
    }
    if (status != CLATTN_OK)
        return status;
    return run_layers(&p, out);
}

clattn_status clattn_encoder_forward_tokens(clattn_encoder *enc, const int64_t *ids, size_t batch,
                                            size_t seq, clattn_tensor *out,
                                            const clattn_encoder_forward_params *params)
{
    static const char fn[] = "clattn_encoder_forward_tokens";
    CLATTN_CHECK_ARG(NULL, enc, "%s: invalid argument: encoder is NULL", fn);
    clattn_context *ctx = enc->ctx;
    const clattn_encoder_config *c = &enc->cfg;
    clattn_encoder_forward_params defaults;
    if (!params) {
        clattn_encoder_forward_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, c->vocab_size > 0,
                     "%s: invalid argument: the encoder has no token embedding (vocab_size 0)", fn);
    CLATTN_CHECK_ARG(ctx, ids, "%s: invalid argument: ids is NULL", fn);
    CLATTN_CHECK_ARG(ctx, batch > 0 && seq > 0,
                     "%s: invalid argument: batch (%zu) and seq (%zu) must be positive", fn, batch,
                     seq);
    pass p;
    clattn_status status = begin_pass(enc, fn, batch, seq, out, params, &p);
    if (status != CLATTN_OK)
        return status;
    cl_int *ids32 = malloc(p.tokens * sizeof(cl_int));
    if (!ids32)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t t = 0; t < p.tokens; t++) {
        if (ids[t] < 0 || (uint64_t)ids[t] >= c->vocab_size) {
            free(ids32);
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: token id %lld at [%zu, %zu] is outside the vocabulary "
                                "[0, %zu)",
                                fn, (long long)ids[t], t / seq, t % seq, c->vocab_size);
        }
        ids32[t] = (cl_int)ids[t];
    }
    cl_int err = clEnqueueWriteBuffer(ctx->queue, enc->ids, CL_TRUE, 0, p.tokens * sizeof(cl_int),
                                      ids32, 0, NULL, NULL);
    free(ids32);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "%s: writing the token ids", fn);
    /* The paper's section 3.4: embeddings multiplied by sqrt(d_model). */
    float scale = (float)sqrt((double)c->d_model);
    status = clattn__embed(ctx, enc->ids, enc->weights.embedding, scale,
                           c->positional == CLATTN_POSITIONAL_SINUSOIDAL, params->position_offset,
                           p.tokens, seq, c->d_model, enc->x);
    if (status != CLATTN_OK)
        return status;
    return run_layers(&p, out);
}
