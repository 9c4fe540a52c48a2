/* The Transformer encoder: configuration, life cycle and the forward pass. */
#include "clattn/encoder.h"
#include "encoder_internal.h"
#include "block_stack.h"
#include "runtime/buffers.h"
#include "ops/elementwise.h"
#include "ops/positional.h"
#include "runtime/positional_table.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char fn_forward[] = "clattn_encoder_forward";

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
    params->attn_mask_kind = CLATTN_MASK_BOOL;
    params->path = CLATTN_PATH_AUTO;
}

clattn_status clattn__resolve_layer_config(clattn_context *ctx, const char *fn,
                                           const clattn_encoder_config *in,
                                           clattn_encoder_config *out)
{
    *out = *in;
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(in->reserved, sizeof(in->reserved)),
                     "config->reserved is not zero (initialise config with "
                     "clattn_encoder_config_default)");
    CLATTN_CHECK_ARG(ctx, fn, in->d_model > 0 && in->nhead > 0 && in->num_layers > 0 &&
                              in->dim_feedforward > 0,
                     "d_model (%zu), nhead (%zu), num_layers (%zu) and dim_feedforward (%zu) must "
                     "all be positive",
                     in->d_model, in->nhead, in->num_layers, in->dim_feedforward);
    bool derived = in->head_dim_qk == 0 || in->head_dim_v == 0;
    CLATTN_CHECK_ARG(ctx, fn, !derived || in->d_model % in->nhead == 0,
                     "d_model %zu is not divisible by nhead %zu",
                     in->d_model, in->nhead);
    if (!out->head_dim_qk)
        out->head_dim_qk = in->d_model / in->nhead;
    if (!out->head_dim_v)
        out->head_dim_v = in->d_model / in->nhead;
    CLATTN_CHECK_ARG(ctx, fn, in->activation == CLATTN_ACTIVATION_RELU ||
                              in->activation == CLATTN_ACTIVATION_GELU ||
                              in->activation == CLATTN_ACTIVATION_GELU_TANH ||
                              in->activation == CLATTN_ACTIVATION_SILU,
                     "activation is %d", (int)in->activation);
    CLATTN_CHECK_ARG(ctx, fn, in->ffn_gated <= 1 && in->linear_no_bias <= 1 &&
                              in->norm_no_bias <= 1,
                     "ffn_gated (%u), linear_no_bias (%u) and norm_no_bias (%u) must be 0 or 1",
                     (unsigned)in->ffn_gated, (unsigned)in->linear_no_bias,
                     (unsigned)in->norm_no_bias);
    CLATTN_CHECK_ARG(ctx, fn, in->alibi <= 1 && in->rope_interleaved <= 1,
                     "alibi (%u) and rope_interleaved (%u) must be 0 or 1", (unsigned)in->alibi,
                     (unsigned)in->rope_interleaved);
    CLATTN_CHECK_ARG(ctx, fn,
                     in->rope_theta == 0.0f || (isfinite(in->rope_theta) && in->rope_theta >= 1.0f),
                     "rope_theta is %g: it must be a finite base >= 1 (0: no rotary embeddings)",
                     (double)in->rope_theta);
    CLATTN_CHECK_ARG(ctx, fn, in->rotary_dim % 2 == 0 && in->rotary_dim <= out->head_dim_qk,
                     "rotary_dim is %u: it must be even and at most d_k = %zu",
                     (unsigned)in->rotary_dim, out->head_dim_qk);
    CLATTN_CHECK_ARG(ctx, fn, in->rope_theta == 0.0f || in->rotary_dim ||
                              out->head_dim_qk % 2 == 0,
                     "rotary_dim 0 rotates all of d_k = %zu, which is odd (set an even "
                     "rotary_dim)",
                     out->head_dim_qk);
    CLATTN_CHECK_ARG(ctx, fn, in->first_norm1_identity <= 1,
                     "first_norm1_identity (%u) must be 0 or 1",
                     (unsigned)in->first_norm1_identity);
    CLATTN_CHECK_ARG(ctx, fn, !in->first_norm1_identity || in->norm_first,
                     "first_norm1_identity needs norm_first (pre-LN): a post-LN layer's norm1 "
                     "follows its attention");
    CLATTN_CHECK_ARG(ctx, fn, in->local_window % 2 == 0,
                     "local_window is %u: it must be even (0: no local layers)",
                     (unsigned)in->local_window);
    CLATTN_CHECK_ARG(ctx, fn, in->local_window || (!in->global_every && !in->local_rope_theta),
                     "global_every (%u) and local_rope_theta (%g) need a local_window",
                     (unsigned)in->global_every, (double)in->local_rope_theta);
    CLATTN_CHECK_ARG(ctx, fn,
                     in->local_rope_theta == 0.0f ||
                         (in->rope_theta > 0.0f && isfinite(in->local_rope_theta) &&
                          in->local_rope_theta >= 1.0f),
                     "local_rope_theta is %g: it must be a finite base >= 1 with a rope_theta "
                     "(0: the local layers use rope_theta)",
                     (double)in->local_rope_theta);
    CLATTN_CHECK_ARG(ctx, fn, in->positional == CLATTN_POSITIONAL_NONE ||
                              in->positional == CLATTN_POSITIONAL_SINUSOIDAL ||
                              in->positional == CLATTN_POSITIONAL_LEARNED ||
                              in->positional == CLATTN_POSITIONAL_LEARNED_PADDED,
                     "positional is %d", (int)in->positional);
    CLATTN_CHECK_ARG(ctx, fn, (in->positional != CLATTN_POSITIONAL_LEARNED &&
                               in->positional != CLATTN_POSITIONAL_LEARNED_PADDED) ||
                              in->max_positions > 0,
                     "learned positions need max_positions > 0");
    CLATTN_CHECK_ARG(ctx, fn, in->positional != CLATTN_POSITIONAL_LEARNED_PADDED ||
                              (in->padding_idx >= 0 &&
                               (size_t)in->padding_idx + 1 < in->max_positions),
                     "padding_idx %d must be at least 0 and below max_positions - 1 (%zu)",
                     (int)in->padding_idx, in->max_positions - 1);
    CLATTN_CHECK_ARG(ctx, fn, in->relative_attention_buckets == 0 ||
                              (in->relative_attention_buckets >= 4 &&
                               in->relative_attention_buckets % 2 == 0 &&
                               in->relative_attention_buckets <= 4096),
                     "relative_attention_buckets %u must be 0 or an even number from 4 to 4096",
                     (unsigned)in->relative_attention_buckets);
    if (in->relative_attention_buckets && !out->relative_attention_max_distance)
        out->relative_attention_max_distance = 128;
    CLATTN_CHECK_ARG(ctx, fn, in->relative_attention_buckets == 0 ||
                              out->relative_attention_max_distance >
                                  in->relative_attention_buckets / 4,
                     "relative_attention_max_distance %u must exceed the exact buckets (%u)",
                     (unsigned)out->relative_attention_max_distance,
                     (unsigned)in->relative_attention_buckets / 4);
    CLATTN_CHECK_ARG(ctx, fn, isfinite(in->embedding_scale) && in->embedding_scale >= 0.0f,
                     "embedding_scale must be finite and not negative (0 selects sqrt(d_model))");
    if (out->embedding_scale == 0.0f)
        out->embedding_scale = (float)sqrt((double)in->d_model);
    out->embedding_norm = in->embedding_norm != 0;
    CLATTN_CHECK_ARG(ctx, fn, isfinite(in->layer_norm_eps) && in->layer_norm_eps > 0.0f,
                     "layer_norm_eps must be positive and finite");
    bool sane = in->d_model < (1u << 24) &&
                (in->dim_feedforward << in->ffn_gated) < (1u << 28) &&
                in->num_layers < (1u << 16) && in->vocab_size < (1u << 31) &&
                in->max_positions < (1u << 31) && in->type_vocab_size < (1u << 31) &&
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

void clattn__block_spec_of_layers(const clattn_encoder_config *c, clattn_block_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->num_layers = c->num_layers;
    s->d_model = c->d_model;
    s->norm = CLATTN_NORM_LAYER;
    s->norm_bias = !c->norm_no_bias;
    s->norm_first = c->norm_first != 0;
    s->first_norm_identity = c->first_norm1_identity != 0;
    s->final_norm = c->final_norm != 0;
    s->norm_eps = c->layer_norm_eps;
    s->nhead = c->nhead;
    s->kv_heads = c->nhead;
    s->head_dim_qk = c->head_dim_qk;
    s->head_dim_v = c->head_dim_v;
    s->alibi = c->alibi != 0;
    s->rope_theta = c->rope_theta;
    s->rotary_dim = c->rotary_dim;
    s->rope_interleaved = c->rope_interleaved != 0;
    s->local_window = c->local_window;
    s->global_every = c->global_every;
    s->local_rope_theta = c->local_rope_theta;
    s->relative_buckets = c->relative_attention_buckets;
    s->relative_max_distance = c->relative_attention_max_distance;
    s->d_ff = c->dim_feedforward;
    s->ffn_gated = c->ffn_gated != 0;
    s->activation = clattn__activation_kind(c->activation);
    s->linear_bias = !c->linear_no_bias;
}

clattn_status clattn_encoder_create(clattn_context *ctx, clattn_encoder **out,
                                    const clattn_encoder_config *config)
{
    CLATTN_CHECK_ARG(NULL, "clattn_encoder_create", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, "clattn_encoder_create", out, "encoder is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, "clattn_encoder_create", config, "config is NULL");
    clattn_encoder_config cfg;
    clattn_status status = clattn__resolve_layer_config(ctx, "clattn_encoder_create", config, &cfg);
    if (status != CLATTN_OK)
        return status;
    clattn_encoder *enc = calloc(1, sizeof(*enc));
    if (!enc)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_encoder_create: out of host memory");
    enc->ctx = ctx;
    enc->cfg = cfg;
    /* Self-attention only: the layers' weights held packed. */
    clattn_block_spec spec;
    clattn__block_spec_of_layers(&cfg, &spec);
    spec.packed_only = true;
    if ((status = clattn__block_stack_init(ctx, "clattn_encoder_create", &spec, &enc->stack))) {
        free(enc);
        return status;
    }
    *out = enc;
    return CLATTN_OK;
}

void clattn_encoder_destroy(clattn_encoder **penc)
{
    if (!penc || !*penc)
        return;
    clattn_encoder *enc = *penc;
    clattn__encoder_weights_release(&enc->weights);
    clattn__block_stack_release(&enc->stack);
    free(enc);
    *penc = NULL;
}

clattn_status clattn_encoder_get_config(const clattn_encoder *enc, clattn_encoder_config *config)
{
    CLATTN_CHECK_ARG(NULL, "clattn_encoder_get_config", enc, "encoder is NULL");
    CLATTN_CHECK_ARG(enc->ctx, "clattn_encoder_get_config", config, "config is NULL");
    *config = enc->cfg;
    return CLATTN_OK;
}

clattn_status clattn_encoder_set_positional(clattn_encoder *enc, clattn_positional positional)
{
    static const char fn[] = "clattn_encoder_set_positional";
    CLATTN_CHECK_ARG(NULL, fn, enc, "encoder is NULL");
    CLATTN_CHECK_ARG(enc->ctx, fn, positional == CLATTN_POSITIONAL_NONE ||
                                   positional == CLATTN_POSITIONAL_SINUSOIDAL ||
                                   positional == CLATTN_POSITIONAL_LEARNED ||
                                   positional == CLATTN_POSITIONAL_LEARNED_PADDED,
                     "positional is %d", (int)positional);
    bool learned = positional == CLATTN_POSITIONAL_LEARNED ||
                   positional == CLATTN_POSITIONAL_LEARNED_PADDED;
    CLATTN_CHECK_ARG(enc->ctx, fn, !learned || enc->weights.pos_embedding,
                     "the encoder has no learned position table (pos_embedding.weight)");
    CLATTN_CHECK_ARG(enc->ctx, fn,
                     positional != CLATTN_POSITIONAL_LEARNED_PADDED ||
                         (enc->cfg.padding_idx >= 0 &&
                          (size_t)enc->cfg.padding_idx + 1 < enc->cfg.max_positions),
                     "LEARNED_PADDED needs a padding_idx below max_positions - 1 (it is %d)",
                     (int)enc->cfg.padding_idx);
    enc->cfg.positional = positional;
    return CLATTN_OK;
}

/* ---- forward ---- */

/* One forward pass: sizes, the activations buffer, the attention call's template. */
typedef struct pass {
    clattn_encoder *enc;
    size_t batch, seq, tokens;
    cl_mem x;           /* [T, d_model] the activations */
    clattn_mha_io attn; /* masks, causal, path; the stack adds its modifiers */
    size_t position_offset;
} pass;

/* The first row of the position table that position `offset` reads: LEARNED_PADDED counts from
 * padding_idx + 1. */
static size_t first_position_row(const clattn_encoder_config *c, size_t offset)
{
    return c->positional == CLATTN_POSITIONAL_LEARNED_PADDED ? (size_t)c->padding_idx + 1 + offset
                                                             : offset;
}

/* Runs the layer stack and the final norm on p->x (already holding the embedded input) into
 * out. */
static clattn_status run_layers(pass *p, clattn_tensor *out)
{
    clattn_block_run run = {.tokens = p->tokens,
                            .x = p->x,
                            .self = p->attn,
                            .position_offset = p->position_offset,
                            .out = out->mem,
                            .out_offset = out->offset,
                            .function = fn_forward};
    return clattn__block_stack_run(&p->enc->stack, &run);
}

/* Borrows the activations' workspace slot (the stack borrows the others). */
static clattn_status borrow_workspace(pass *p)
{
    return clattn__workspace_slot(p->enc->ctx, CLATTN_SLOT_LAYER_X,
                                  p->tokens * p->enc->cfg.d_model * sizeof(float), &p->x);
}

/* Checks what both forward functions share and prepares the pass. */
static clattn_status begin_pass(clattn_encoder *enc, const char *fn, size_t batch, size_t seq,
                                const clattn_tensor *out, const clattn_encoder_forward_params *params,
                                pass *p)
{
    clattn_context *ctx = enc->ctx;
    const clattn_encoder_config *c = &enc->cfg;
    CLATTN_CHECK_ARG(ctx, fn, enc->stack.loaded,
                     "the encoder has no weights (load them, or call "
                     "clattn_encoder_init_random)");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_encoder_forward_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, out, "out is NULL");
    CLATTN_CHECK_ARG(ctx, fn, out->ctx == ctx, "out belongs to another context");
    clattn_status status = clattn__expect_shape(ctx, fn, "out", out->ndim, out->shape, 3,
                                                (size_t[]){batch, seq, c->d_model},
                                                "[B, N, d_model]");
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(out),
                     "out must be contiguous");
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
    p->attn.batch = batch;
    p->attn.seq_q = seq;
    p->attn.seq_k = seq;
    p->attn.causal = params->causal;
    p->attn.path = params->path;
    p->position_offset = params->position_offset;
    /* The mask is checked once, before any work is enqueued, for every layer. */
    if ((status = clattn__key_padding_view(ctx, fn, params->key_padding_mask,
                                           params->key_padding_mask_kind, batch, seq,
                                           &p->attn.key_padding_mask)))
        return status;
    if (params->attn_mask && c->relative_attention_buckets)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: params->attn_mask is not supported with a relative position bias "
                            "(relative_attention_buckets %u): the bias is the layers' attention "
                            "mask",
                            fn, (unsigned)c->relative_attention_buckets);
    if ((status = clattn__attn_mask_view(ctx, fn, params->attn_mask, params->attn_mask_kind,
                                         CLATTN_MASK_3D_BATCH_X_HEADS, batch, c->nhead, seq, seq,
                                         &p->attn.attn_mask)))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, params->path >= CLATTN_PATH_AUTO && params->path <= CLATTN_PATH_FUSED,
                     "params->path is %d", (int)params->path);
    size_t first = first_position_row(c, params->position_offset);
    if ((c->positional == CLATTN_POSITIONAL_LEARNED ||
         c->positional == CLATTN_POSITIONAL_LEARNED_PADDED) &&
        (first > c->max_positions || seq > c->max_positions - first))
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                            "%s: positions %zu to %zu are beyond the learned position table's %zu "
                            "rows (max_position_embeddings)",
                            fn, first, first + seq - 1, c->max_positions);
    return borrow_workspace(p);
}

/* The positional table added before the first layer, or NULL. */
static clattn_status positions_table(pass *p, size_t offset, cl_mem *table)
{
    const clattn_encoder_config *c = &p->enc->cfg;
    *table = NULL;
    if (c->positional == CLATTN_POSITIONAL_LEARNED ||
        c->positional == CLATTN_POSITIONAL_LEARNED_PADDED)
        *table = p->enc->weights.pos_embedding;
    else if (c->positional == CLATTN_POSITIONAL_SINUSOIDAL)
        return clattn__positional_table(p->enc->ctx, offset + p->seq, c->d_model, table);
    return CLATTN_OK;
}

/* The embedding LayerNorm (BERT's embeddings.LayerNorm), when the model has one. */
static clattn_status embedding_norm(pass *p)
{
    const clattn_encoder_config *c = &p->enc->cfg;
    if (!c->embedding_norm)
        return CLATTN_OK;
    return clattn__layernorm(p->enc->ctx, p->x, 0, NULL, 0, NULL, p->x, 0, p->tokens, c->d_model,
                             p->enc->weights.embedding_norm.weight,
                             p->enc->weights.embedding_norm.bias,
                             c->layer_norm_eps);
}

/* Host ids of a pass, [B, N]: the public call's int64, or the library's own int32. */
typedef struct id_array {
    const int64_t *wide;
    const int32_t *narrow;
} id_array;

static int64_t id_at(id_array ids, size_t t)
{
    return ids.wide ? ids.wide[t] : ids.narrow[t];
}

/* Checks host ids against [0, limit) — the one check they get — and uploads them as int32
 * into a workspace slot (int32 ids as they are; int64 ones narrowed into a copy first). */
static clattn_status upload_ids(pass *p, const char *fn, const char *what, id_array ids,
                                size_t limit, clattn_slot slot, cl_mem *mem)
{
    clattn_context *ctx = p->enc->ctx;
    for (size_t t = 0; t < p->tokens; t++) {
        int64_t id = id_at(ids, t);
        if (id < 0 || (uint64_t)id >= limit)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: %s %lld at [%zu, %zu] is outside the vocabulary [0, %zu)", fn,
                                what, (long long)id, t / p->seq, t % p->seq, limit);
    }
    cl_int *narrowed = NULL;
    const cl_int *ids32 = ids.narrow;
    if (ids.wide) {
        if (!(narrowed = malloc(p->tokens * sizeof(cl_int))))
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                                fn);
        for (size_t t = 0; t < p->tokens; t++)
            narrowed[t] = (cl_int)ids.wide[t];
        ids32 = narrowed;
    }
    clattn_status status = clattn__workspace_slot(ctx, slot, p->tokens * sizeof(cl_int), mem);
    if (status == CLATTN_OK)
        status = clattn__write_bytes(ctx, *mem, 0, ids32, p->tokens * sizeof(cl_int),
                                     "%s: writing the %ss", fn, what);
    free(narrowed);
    return status;
}

/* RoBERTa's positions (transformers' create_position_ids_from_input_ids): a padding id reads row
 * padding_idx, any other token padding_idx + offset + the count of non-padding ids of its row
 * up to and including it. Uploaded as int32 rows into a workspace slot. */
static clattn_status upload_position_rows(pass *p, const char *fn, id_array ids,
                                          size_t offset, cl_mem *mem)
{
    clattn_context *ctx = p->enc->ctx;
    int64_t pad = p->enc->cfg.padding_idx;
    cl_int *rows = malloc(p->tokens * sizeof(cl_int));
    if (!rows)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t b = 0; b < p->batch; b++) {
        size_t count = 0;
        for (size_t n = 0; n < p->seq; n++) {
            size_t t = b * p->seq + n;
            int64_t id = id_at(ids, t);
            count += id != pad;
            rows[t] = (cl_int)(id == pad ? pad : pad + (int64_t)(offset + count));
        }
    }
    clattn_status status = clattn__workspace_slot(ctx, CLATTN_SLOT_POSITION_ROWS,
                                                  p->tokens * sizeof(cl_int), mem);
    if (status == CLATTN_OK)
        status = clattn__write_bytes(ctx, *mem, 0, rows, p->tokens * sizeof(cl_int),
                                     "%s: writing the position rows", fn);
    free(rows);
    return status;
}

clattn_status clattn_encoder_forward(clattn_encoder *enc, const clattn_tensor *input,
                                     clattn_tensor *out,
                                     const clattn_encoder_forward_params *params)
{
    CLATTN_CHECK_ARG(NULL, fn_forward, enc, "encoder is NULL");
    clattn_context *ctx = enc->ctx;
    clattn_encoder_forward_params defaults;
    if (!params) {
        clattn_encoder_forward_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, fn_forward, input, "input is NULL");
    CLATTN_CHECK_ARG(ctx, fn_forward, input->ctx == ctx,
                     "input belongs to another context");
    size_t d = enc->cfg.d_model;
    if (input->ndim != 3 || input->shape[2] != d) {
        char got[96];
        clattn__format_shape(got, sizeof(got), input->ndim, input->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: input has shape %s but must be [B, N, d_model] with d_model = %zu",
                            fn_forward, got, d);
    }
    CLATTN_CHECK_ARG(ctx, fn_forward, clattn_tensor_is_contiguous(input),
                     "input must be contiguous");
    pass p;
    clattn_status status =
        begin_pass(enc, fn_forward, input->shape[0], input->shape[1], out, params, &p);
    if (status != CLATTN_OK)
        return status;
    cl_mem table;
    if ((status = positions_table(&p, params->position_offset, &table)))
        return status;
    if (table) {
        status = clattn__add_positional(ctx, table, input->mem, input->offset, p.x, 0, p.tokens,
                                        p.seq, d, first_position_row(&enc->cfg,
                                                                     params->position_offset));
    } else {
        status = clattn__copy_bytes(ctx, input->mem, input->offset * sizeof(float), p.x, 0,
                                    p.tokens * d * sizeof(float), "%s: copying the input",
                                    fn_forward);
    }
    if (status != CLATTN_OK || (status = embedding_norm(&p)))
        return status;
    return run_layers(&p, out);
}

/* The token path of clattn_encoder_forward_tokens and clattn__encoder_forward_ids32: ids and
 * type ids (type_ids.wide and .narrow NULL: none) checked once against their vocabularies and
 * uploaded, embedded, then the layers. */
static clattn_status forward_ids(clattn_encoder *enc, const char *fn, id_array ids,
                                 id_array type_ids, size_t batch, size_t seq, clattn_tensor *out,
                                 const clattn_encoder_forward_params *params)
{
    clattn_context *ctx = enc->ctx;
    const clattn_encoder_config *c = &enc->cfg;
    CLATTN_CHECK_ARG(ctx, fn, c->vocab_size > 0,
                     "the encoder has no token embedding (vocab_size 0)");
    CLATTN_CHECK_ARG(ctx, fn, ids.wide || ids.narrow, "ids is NULL");
    CLATTN_CHECK_ARG(ctx, fn, batch > 0 && seq > 0,
                     "batch (%zu) and seq (%zu) must be positive", batch,
                     seq);
    pass p;
    clattn_status status = begin_pass(enc, fn, batch, seq, out, params, &p);
    if (status != CLATTN_OK)
        return status;
    bool typed = type_ids.wide || type_ids.narrow;
    CLATTN_CHECK_ARG(ctx, fn, !typed || c->type_vocab_size > 0,
                     "params->token_type_ids given but the encoder has no token type embedding");
    clattn_embed_args e = {NULL, enc->weights.embedding, c->embedding_scale, NULL,
                           params->position_offset, NULL, enc->weights.type_embedding, NULL};
    if ((status = upload_ids(&p, fn, "token id", ids, c->vocab_size, CLATTN_SLOT_TOKEN_IDS,
                             &e.ids)) ||
        (status = positions_table(&p, params->position_offset, &e.positions)) ||
        (c->positional == CLATTN_POSITIONAL_LEARNED_PADDED &&
         (status = upload_position_rows(&p, fn, ids, params->position_offset, &e.position_rows))))
        return status;
    if (e.type_table) { /* type 0 for every token unless given */
        if (typed)
            status = upload_ids(&p, fn, "token type id", type_ids, c->type_vocab_size,
                                CLATTN_SLOT_TOKEN_TYPES, &e.types);
        else if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_TOKEN_TYPES,
                                                  p.tokens * sizeof(cl_int), &e.types)) ==
                 CLATTN_OK) {
            const cl_int zero = 0;
            status = clattn__fill_bytes(ctx, e.types, &zero, sizeof(zero), 0,
                                        p.tokens * sizeof(cl_int), "%s: zeroing the token types",
                                        fn);
        }
        if (status != CLATTN_OK)
            return status;
    }
    /* The embedding LayerNorm, when the model has one, in the same launch where it can be. */
    if (c->embedding_norm)
        status = clattn__embed_layernorm(ctx, &e, p.tokens, seq, c->d_model, p.x,
                                         enc->weights.embedding_norm.weight,
                                         enc->weights.embedding_norm.bias, c->layer_norm_eps);
    else
        status = clattn__embed(ctx, &e, p.tokens, seq, c->d_model, p.x);
    if (status != CLATTN_OK)
        return status;
    return run_layers(&p, out);
}

clattn_status clattn_encoder_forward_tokens(clattn_encoder *enc, const int64_t *ids, size_t batch,
                                            size_t seq, clattn_tensor *out,
                                            const clattn_encoder_forward_params *params)
{
    static const char fn[] = "clattn_encoder_forward_tokens";
    CLATTN_CHECK_ARG(NULL, fn, enc, "encoder is NULL");
    clattn_encoder_forward_params defaults;
    if (!params) {
        clattn_encoder_forward_params_default(&defaults);
        params = &defaults;
    }
    return forward_ids(enc, fn, (id_array){ids, NULL}, (id_array){params->token_type_ids, NULL},
                       batch, seq, out, params);
}

clattn_status clattn__encoder_forward_ids32(clattn_encoder *enc, const char *fn,
                                            const int32_t *ids, const int32_t *type_ids,
                                            size_t batch, size_t seq, clattn_tensor *out,
                                            const clattn_encoder_forward_params *params)
{
    CLATTN_CHECK_ARG(enc->ctx, fn, !params->token_type_ids,
                     "params->token_type_ids: give the int32 type ids instead");
    return forward_ids(enc, fn, (id_array){NULL, ids}, (id_array){NULL, type_ids}, batch, seq,
                       out, params);
}
