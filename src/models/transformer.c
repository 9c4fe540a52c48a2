/* The encoder–decoder Transformer: a model file (of token ids or of float inputs), the
 * teacher-forced forward; generation is generate.c's. */
#include "clattn/safetensors.h"
#include "runtime/buffers.h"
#include "base/constants.h"
#include "base/errors.h"
#include "ops/linear.h"
#include "ops/positional.h"
#include "runtime/positional_table.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include "transformer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_transformer_load";

/* ---- loading ---- */

/* The file's tensors under a name prefix, seen as the encoder's or decoder's own names. */
typedef struct prefixed {
    const clattn_safetensors *st;
    const char *prefix;        /* "encoder." or "decoder." */
    const char *embedding;     /* the file's name for the encoder's embedding.weight, or NULL */
    clattn_host_tensor views[4];
    size_t next;
} prefixed;

static const clattn_host_tensor *view_of(prefixed *p, const clattn_safetensors_tensor *t)
{
    if (!t)
        return NULL;
    clattn_host_tensor *v = &p->views[p->next++ % 4];
    memset(v, 0, sizeof(*v));
    v->data = t->data;
    v->ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < CLATTN_MAX_DIMS; d++)
        v->shape[d] = t->shape[d];
    return v;
}

static const clattn_host_tensor *prefixed_lookup(void *user, const char *name)
{
    prefixed *p = user;
    char full[256];
    if (p->embedding && strcmp(name, "embedding.weight") == 0)
        snprintf(full, sizeof(full), "%s", p->embedding);
    else
        snprintf(full, sizeof(full), "%s%s", p->prefix, name);
    return view_of(p, clattn_safetensors_find(p->st, full));
}

static clattn_status meta_size(const clattn_safetensors *st, const char *path, const char *key,
                               size_t *out)
{
    const char *text = clattn_safetensors_metadata(st, key);
    char *end = NULL;
    unsigned long long v = text && *text >= '0' && *text <= '9' ? strtoull(text, &end, 10) : 0;
    if (!text || !end || *end || v == 0 || v > (1ull << 31))
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"%s\" is %s%s%s, not a positive integer", key,
                               text ? "\"" : "", text ? text : "missing", text ? "\"" : "");
    *out = (size_t)v;
    return CLATTN_OK;
}

/* The optional "num_kv_heads" (nhead when absent), which must divide nhead. */
static clattn_status meta_kv_heads(const clattn_safetensors *st, const char *path, size_t nhead,
                                   size_t *out)
{
    *out = nhead;
    if (!clattn_safetensors_metadata(st, "num_kv_heads"))
        return CLATTN_OK;
    clattn_status status = meta_size(st, path, "num_kv_heads", out);
    if (status == CLATTN_OK && nhead % *out != 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"num_kv_heads\" %zu does not divide nhead %zu", *out,
                               nhead);
    return status;
}

static clattn_status meta_id(const clattn_safetensors *st, const char *path, const char *key,
                             size_t vocab, int64_t *out)
{
    const char *text = clattn_safetensors_metadata(st, key);
    char *end = NULL;
    long long v = text && *text >= '0' && *text <= '9' ? strtoll(text, &end, 10) : -1;
    if (!text || !end || *end || v < 0 || (unsigned long long)v >= vocab)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"%s\" must be a token id below the target vocabulary "
                               "(%zu)",
                               key, vocab);
    *out = v;
    return CLATTN_OK;
}

/* How the model places its tokens: metadata "positional". */
typedef struct positions {
    bool sinusoidal;        /* the paper's table added to both embeddings */
    bool alibi;             /* ALiBi in the encoder's and the decoder's self-attention */
    float rope_theta;       /* > 0: RoPE in the encoder's and the decoder's self-attention */
    uint32_t rotary_dim;    /* 0: all of d_k */
    uint8_t rope_interleaved;
} positions;

/* Metadata "positional": "sinusoidal" (the default of a model of token ids), "none" (the default
 * of a model of float inputs, which never adds a table), "rope" (with the optional rope_theta,
 * rotary_dim, rope_interleaved) or "alibi". */
static clattn_status read_positions(const clattn_safetensors *st, const char *path, bool tokens,
                                    positions *out)
{
    memset(out, 0, sizeof(*out));
    const char *kind = clattn_safetensors_metadata(st, "positional");
    if (!kind)
        kind = tokens ? "sinusoidal" : "none";
    if (strcmp(kind, "sinusoidal") == 0) {
        out->sinusoidal = tokens;
        return CLATTN_OK;
    }
    if (strcmp(kind, "alibi") == 0) {
        out->alibi = true;
        return CLATTN_OK;
    }
    if (strcmp(kind, "none") == 0)
        return CLATTN_OK;
    if (strcmp(kind, "rope") != 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"positional\" is \"%.32s\", not one of none, "
                               "sinusoidal, rope, alibi",
                               kind);
    const char *theta = clattn_safetensors_metadata(st, "rope_theta");
    const char *dim = clattn_safetensors_metadata(st, "rotary_dim");
    const char *interleaved = clattn_safetensors_metadata(st, "rope_interleaved");
    char *end = NULL;
    out->rope_theta = 10000.0f;
    if (theta) {
        out->rope_theta = strtof(theta, &end);
        if (end == theta || *end || !isfinite(out->rope_theta) || !(out->rope_theta > 0.0f))
            return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                   "metadata \"rope_theta\" is \"%.32s\", not a positive number",
                                   theta);
    }
    if (dim) {
        size_t width;
        clattn_status status = meta_size(st, path, "rotary_dim", &width);
        if (status != CLATTN_OK)
            return status;
        out->rotary_dim = (uint32_t)width;
    }
    if (interleaved && strcmp(interleaved, "true") != 0 && strcmp(interleaved, "false") != 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"rope_interleaved\" is \"%.32s\" (true or false)",
                               interleaved);
    out->rope_interleaved = interleaved && strcmp(interleaved, "true") == 0;
    return CLATTN_OK;
}

/* The layer stacks' shared settings from the metadata. */
static clattn_status read_stack(const clattn_safetensors *st, const char *path,
                                clattn_activation *act, int *norm_first, float *eps)
{
    const char *a = clattn_safetensors_metadata(st, "activation");
    const char *nf = clattn_safetensors_metadata(st, "norm_first");
    const char *e = clattn_safetensors_metadata(st, "layer_norm_eps");
    *act = CLATTN_ACTIVATION_RELU;
    if (a && strcmp(a, "gelu") == 0)
        *act = CLATTN_ACTIVATION_GELU;
    else if (a && strcmp(a, "relu") != 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "metadata \"activation\" is \"%.32s\" (relu or gelu)", a);
    *norm_first = nf && strcmp(nf, "true") == 0;
    *eps = e ? strtof(e, NULL) : 1e-5f;
    if (!(*eps > 0.0f) || !isfinite(*eps))
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"layer_norm_eps\" must be a positive number");
    return CLATTN_OK;
}

/* A 2-D tensor [rows, E] of the file, or a named error. */
static clattn_status table(const clattn_safetensors *st, const char *path, const char *name,
                           size_t E, const clattn_safetensors_tensor **out)
{
    *out = clattn_safetensors_find(st, name);
    if (!*out)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT, "missing tensor %s", name);
    if ((*out)->ndim != 2 || (*out)->shape[1] != E || (*out)->shape[0] == 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "tensor %s must be [vocab, %zu]", name, E);
    return CLATTN_OK;
}

/* The number of layers the file holds under `prefix` ("decoder.layers."): one more than the
 * largest i of a tensor named prefix{i}.*, 0 when there is none. */
static size_t layers_in_file(const clattn_safetensors *st, const char *prefix)
{
    size_t count = 0, len = strlen(prefix);
    for (size_t i = 0; i < st->tensor_count; i++) {
        const char *name = st->tensors[i].name;
        if (strncmp(name, prefix, len) != 0 || name[len] < '0' || name[len] > '9')
            continue;
        char *end = NULL;
        unsigned long long index = strtoull(name + len, &end, 10);
        if (*end == '.' && index < (1ull << 31) && index + 1 > count)
            count = (size_t)index + 1;
    }
    return count;
}

/* The metadata's layer count `key` must be the number of layers the file holds: a smaller one
 * would silently run another model, a larger one fail on a missing tensor. */
static clattn_status check_layer_count(const clattn_safetensors *st, const char *path,
                                       const char *key, const char *prefix, size_t count)
{
    size_t present = layers_in_file(st, prefix);
    if (present == count)
        return CLATTN_OK;
    if (present == 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "metadata \"%s\" is %zu but the file has no %s* tensors", key,
                               count, prefix);
    return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                           "metadata \"%s\" is %zu but the file holds %zu layers (%s0 to %s%zu)",
                           key, count, present, prefix, prefix, present - 1);
}

/* The embeddings: both (a model of token ids) or neither (a model of float inputs, as
 * nn.Transformer's own state_dict). */
static clattn_status read_embeddings(const clattn_safetensors *st, const char *path, size_t E,
                                     const clattn_safetensors_tensor **src_emb,
                                     const clattn_safetensors_tensor **tgt_emb)
{
    static const char src_name[] = "src_embedding.weight", tgt_name[] = "tgt_embedding.weight";
    bool has_src = clattn_safetensors_find(st, src_name) != NULL;
    bool has_tgt = clattn_safetensors_find(st, tgt_name) != NULL;
    *src_emb = *tgt_emb = NULL;
    if (!has_src && !has_tgt)
        return CLATTN_OK;
    if (has_src != has_tgt)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "missing tensor %s: a model has both embeddings (token ids) or "
                               "neither (float inputs)",
                               has_src ? tgt_name : src_name);
    clattn_status status = table(st, path, src_name, E, src_emb);
    return status ? status : table(st, path, tgt_name, E, tgt_emb);
}

static clattn_status load_model(clattn_transformer *m, const clattn_safetensors *st,
                                const char *path)
{
    clattn_context *ctx = m->ctx;
    clattn_transformer_info *info = &m->info;
    clattn_activation act = CLATTN_ACTIVATION_RELU;
    int norm_first = 0;
    float eps = 1e-5f;
    const clattn_safetensors_tensor *src_emb, *tgt_emb, *gen_w, *gen_b;
    clattn_status status;
    if ((status = meta_size(st, path, "d_model", &info->d_model)) ||
        (status = meta_size(st, path, "nhead", &info->nhead)) ||
        (status = meta_kv_heads(st, path, info->nhead, &info->num_kv_heads)) ||
        (status = meta_size(st, path, "num_encoder_layers", &info->num_encoder_layers)) ||
        (status = meta_size(st, path, "num_decoder_layers", &info->num_decoder_layers)) ||
        (status = meta_size(st, path, "dim_feedforward", &info->dim_feedforward)) ||
        (status = check_layer_count(st, path, "num_encoder_layers", "encoder.layers.",
                                    info->num_encoder_layers)) ||
        (status = check_layer_count(st, path, "num_decoder_layers", "decoder.layers.",
                                    info->num_decoder_layers)) ||
        (status = read_stack(st, path, &act, &norm_first, &eps)) ||
        (status = read_embeddings(st, path, info->d_model, &src_emb, &tgt_emb)))
        return status;
    const char *tied = clattn_safetensors_metadata(st, "tie_embeddings");
    bool tokens = src_emb != NULL, tie = tokens && tied && strcmp(tied, "true") == 0;
    gen_w = clattn_safetensors_find(st, "generator.weight");
    gen_b = clattn_safetensors_find(st, "generator.bias");
    info->bos_id = info->eos_id = info->pad_id = -1;
    if (tokens) {
        info->src_vocab = src_emb->shape[0];
        info->tgt_vocab = tgt_emb->shape[0];
        if ((status = meta_id(st, path, "bos_id", info->tgt_vocab, &info->bos_id)) ||
            (status = meta_id(st, path, "eos_id", info->tgt_vocab, &info->eos_id)) ||
            (status = meta_id(st, path, "pad_id", info->tgt_vocab, &info->pad_id)))
            return status;
    }
    /* a model of token ids needs its generator (or tied embeddings); a float model's is
     * optional (its forward then gives logits instead of the decoder output) */
    if (!tie && (tokens || gen_w) &&
        (status = table(st, path, "generator.weight", info->d_model, &gen_w)))
        return status;
    if (!tokens && gen_w)
        info->tgt_vocab = gen_w->shape[0];
    if (!tie && gen_w && gen_w->shape[0] != info->tgt_vocab)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "generator.weight has %zu rows but tgt_embedding.weight %zu",
                               gen_w->shape[0], info->tgt_vocab);
    if (gen_b && !gen_w && !tie)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "generator.bias without generator.weight");
    if (gen_b && (gen_b->ndim != 1 || gen_b->shape[0] != info->tgt_vocab))
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "generator.bias must be [%zu]", info->tgt_vocab);

    positions pos;
    if ((status = read_positions(st, path, tokens, &pos)))
        return status;
    m->sinusoidal = pos.sinusoidal;
    clattn_encoder_config ec;
    clattn_encoder_config_default(&ec, info->d_model, info->nhead, info->num_encoder_layers,
                                  info->dim_feedforward);
    ec.activation = act, ec.norm_first = norm_first, ec.layer_norm_eps = eps;
    ec.final_norm = clattn_safetensors_find(st, "encoder.norm.weight") != NULL;
    ec.positional = pos.sinusoidal ? CLATTN_POSITIONAL_SINUSOIDAL : CLATTN_POSITIONAL_NONE;
    ec.vocab_size = info->src_vocab;
    ec.alibi = pos.alibi;
    ec.rope_theta = pos.rope_theta, ec.rotary_dim = pos.rotary_dim;
    ec.rope_interleaved = pos.rope_interleaved;
    clattn_decoder_config dc;
    clattn_decoder_config_default(&dc, info->d_model, info->nhead, info->num_decoder_layers,
                                  info->dim_feedforward);
    dc.activation = act, dc.norm_first = norm_first, dc.layer_norm_eps = eps;
    dc.num_kv_heads = info->num_kv_heads;
    dc.alibi = pos.alibi;
    dc.rope_theta = pos.rope_theta, dc.rotary_dim = pos.rotary_dim;
    dc.rope_interleaved = pos.rope_interleaved;
    dc.final_norm = clattn_safetensors_find(st, "decoder.norm.weight") != NULL;
    prefixed enc_names = {st, "encoder.", tokens ? "src_embedding.weight" : NULL, {{0}}, 0};
    prefixed dec_names = {st, "decoder.", NULL, {{0}}, 0};
    size_t E = info->d_model, V = info->tgt_vocab;
    if ((status = clattn_encoder_create(ctx, &m->encoder, &ec)) ||
        (status = clattn_encoder_load_weights(m->encoder, prefixed_lookup, &enc_names)) ||
        (status = clattn_decoder_create(ctx, &m->decoder, &dc)) ||
        (status = clattn_decoder_load_weights(m->decoder, prefixed_lookup, &dec_names)) ||
        (tokens && (status = clattn__upload(ctx, tgt_emb->data, V * E, "tgt_embedding.weight",
                                            &m->tgt_embedding))) ||
        (gen_w && !tie && (status = clattn__upload(ctx, gen_w->data, V * E, "generator.weight",
                                                   &m->generator_w))) ||
        (gen_b && (status = clattn__upload(ctx, gen_b->data, V, "generator.bias",
                                           &m->generator_b))))
        return status;
    if (tie || gen_w)
        m->generator = (clattn_gemm_weight){tie ? m->tgt_embedding : m->generator_w, 0, V, E, E,
                                            NULL, NULL, NULL};
    return CLATTN_OK;
}

clattn_status clattn_transformer_load(clattn_context *ctx, clattn_transformer **out,
                                      const char *path)
{
    CLATTN_CHECK_ARG(NULL, fn_load, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn_load, out, "model is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn_load, path, "path is NULL");
    clattn_transformer *m = calloc(1, sizeof(*m));
    if (!m)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    m->ctx = ctx;
    clattn_safetensors *st = NULL;
    clattn_status status = clattn_safetensors_read(&st, path);
    if (status == CLATTN_OK)
        status = load_model(m, st, path);
    clattn_safetensors_destroy(&st);
    if (status != CLATTN_OK) {
        clattn_transformer_destroy(&m);
        /* the file's errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    }
    *out = m;
    return CLATTN_OK;
}

void clattn_transformer_destroy(clattn_transformer **pm)
{
    if (!pm || !*pm)
        return;
    clattn_transformer *m = *pm;
    clattn_encoder_destroy(&m->encoder);
    clattn_decoder_destroy(&m->decoder);
    clattn__gemm_weight_release(&m->generator);
    clattn__release_mem(&m->tgt_embedding);
    clattn__release_mem(&m->generator_w);
    clattn__release_mem(&m->generator_b);
    free(m);
    *pm = NULL;
}

clattn_status clattn_transformer_get_info(const clattn_transformer *m,
                                          clattn_transformer_info *info)
{
    static const char fn[] = "clattn_transformer_get_info";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    CLATTN_CHECK_ARG(m->ctx, fn, info, "info is NULL");
    *info = m->info;
    return CLATTN_OK;
}

void clattn_generate_params_default(clattn_generate_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->beam = 1;
    params->alpha = 0.6f;
}

/* ---- running ---- */

/* The source padding [B, S] (nonzero = padding) as a float key-padding mask tensor (new). */
static clattn_status padding_mask(clattn_transformer *m, const char *fn, const uint8_t *padding,
                                  size_t B, size_t S, clattn_tensor **mask)
{
    clattn_context *ctx = m->ctx;
    float *pad = malloc(B * S * sizeof(float));
    if (!pad)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; i < B * S; i++)
        pad[i] = padding[i] ? 1.0f : 0.0f;
    clattn_status status = clattn_tensor_create(ctx, mask, 2, (size_t[]){B, S});
    if (status == CLATTN_OK)
        status = clattn_tensor_write(*mask, pad, B * S);
    free(pad);
    return status;
}

/* The source through the encoder: memory [B, S, E], and the padding as a float mask tensor. */
clattn_status clattn__transformer_encode(clattn_transformer *m, const char *fn,
                                         const int64_t *src, size_t B, size_t S,
                                         const uint8_t *padding, clattn_tensor **memory,
                                         clattn_tensor **mask)
{
    size_t E = m->info.d_model;
    clattn_status status = clattn_tensor_create(m->ctx, memory, 3, (size_t[]){B, S, E});
    if (status == CLATTN_OK && padding)
        status = padding_mask(m, fn, padding, B, S, mask);
    if (status != CLATTN_OK)
        return status;
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = *mask;
    return clattn_encoder_forward_tokens(m->encoder, src, B, S, *memory, &params);
}

/* x [B, n, E] = tgt_embedding[ids]·√E + PE[offset + t] (the table only with m->sinusoidal) for
 * host ids [B, n]. */
clattn_status clattn__transformer_embed(clattn_transformer *m, const char *fn,
                                        const int64_t *ids, size_t B, size_t n, size_t offset,
                                        clattn_tensor *x)
{
    clattn_context *ctx = m->ctx;
    size_t tokens = B * n, E = m->info.d_model;
    cl_int *ids32 = malloc(tokens * sizeof(cl_int));
    if (!ids32)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t t = 0; t < tokens; t++) {
        if (ids[t] < 0 || (uint64_t)ids[t] >= m->info.tgt_vocab) {
            free(ids32);
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: target id %lld at [%zu, %zu] is outside the vocabulary "
                                "[0, %zu)",
                                fn, (long long)ids[t], t / n, t % n, m->info.tgt_vocab);
        }
        ids32[t] = (cl_int)ids[t];
    }
    clattn_embed_args e = {NULL, m->tgt_embedding, (float)sqrt((double)E), NULL, offset, NULL,
                           NULL, NULL};
    clattn_status status =
        clattn__workspace_slot(ctx, CLATTN_SLOT_TOKEN_IDS, tokens * sizeof(cl_int), &e.ids);
    if (status == CLATTN_OK)
        status = clattn__write_bytes(ctx, e.ids, 0, ids32, tokens * sizeof(cl_int),
                                     "%s: writing the target ids", fn);
    free(ids32);
    if (status == CLATTN_OK &&
        !(m->sinusoidal && (status = clattn__positional_table(ctx, offset + n, E, &e.positions))))
        status = clattn__embed(ctx, &e, tokens, n, E, x->mem);
    return status;
}

/* logits [rows, V] = h [rows, E]·generatorᵀ + bias. */
clattn_status clattn__transformer_logits(clattn_transformer *m, const clattn_tensor *h,
                                         size_t rows, clattn_tensor *logits)
{
    return clattn__linear(m->ctx, CLATTN_OP_OTHER, rows, h->mem, h->offset, m->info.d_model,
                          &m->generator, m->generator_b, 0, CLATTN_ACT_NONE, logits->mem,
                          logits->offset, m->info.tgt_vocab);
}

clattn_status clattn__transformer_check_src(clattn_transformer *m, const char *fn,
                                            const int64_t *src, size_t B, size_t S)
{
    CLATTN_CHECK_ARG(m->ctx, fn, src, "src is NULL");
    CLATTN_CHECK_ARG(m->ctx, fn, B > 0 && S > 0, "batch (%zu) and src_len (%zu) must be positive",
                     B, S);
    if (m->info.src_vocab == 0)
        return clattn__fail(m->ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: the model has no embeddings: it takes float inputs "
                            "(clattn_transformer_forward_float), not token ids",
                            fn);
    return CLATTN_OK;
}

clattn_status clattn_transformer_forward(clattn_transformer *m, const int64_t *src, size_t B,
                                         size_t S, const uint8_t *src_padding, const int64_t *tgt,
                                         size_t T, clattn_tensor *logits)
{
    static const char fn[] = "clattn_transformer_forward";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_status status = clattn__transformer_check_src(m, fn, src, B, S);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, fn, tgt && T > 0, "tgt is NULL or tgt_len is 0");
    CLATTN_CHECK_ARG(ctx, fn, logits && logits->ctx == ctx, "logits is NULL or of another context");
    size_t E = m->info.d_model, V = m->info.tgt_vocab;
    if ((status = clattn__expect_shape(ctx, fn, "logits", logits->ndim, logits->shape, 3,
                                       (size_t[]){B, T, V}, "[B, T, V_tgt]")))
        return status;
    clattn_tensor *memory = NULL, *mask = NULL, *x = NULL, *h = NULL;
    if (!(status = clattn__transformer_encode(m, fn, src, B, S, src_padding, &memory, &mask)) &&
        !(status = clattn_tensor_create(ctx, &x, 3, (size_t[]){B, T, E})) &&
        !(status = clattn_tensor_create(ctx, &h, 3, (size_t[]){B, T, E})) &&
        !(status = clattn__transformer_embed(m, fn, tgt, B, T, 0, x))) {
        clattn_decoder_forward_params params;
        clattn_decoder_forward_params_default(&params);
        params.tgt_is_causal = 1;
        params.memory_key_padding_mask = mask;
        if (!(status = clattn_decoder_forward(m->decoder, x, memory, h, &params)))
            status = clattn__transformer_logits(m, h, B * T, logits);
    }
    clattn_tensor_destroy(&memory), clattn_tensor_destroy(&mask);
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&h);
    return status;
}

clattn_status clattn_transformer_forward_float(clattn_transformer *m, const clattn_tensor *src,
                                               const uint8_t *src_padding,
                                               const clattn_tensor *tgt, clattn_tensor *out)
{
    static const char fn[] = "clattn_transformer_forward_float";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    CLATTN_CHECK_ARG(ctx, fn, src && src->ctx == ctx, "src is NULL or of another context");
    CLATTN_CHECK_ARG(ctx, fn, tgt && tgt->ctx == ctx, "tgt is NULL or of another context");
    CLATTN_CHECK_ARG(ctx, fn, out && out->ctx == ctx, "out is NULL or of another context");
    if (m->info.src_vocab != 0)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: the model has embeddings: it takes token ids "
                            "(clattn_transformer_forward), not float inputs",
                            fn);
    size_t E = m->info.d_model, V = m->info.tgt_vocab;
    clattn_status status;
    size_t B = src->ndim > 0 ? src->shape[0] : 0, S = src->ndim > 1 ? src->shape[1] : 0;
    size_t T = tgt->ndim > 1 ? tgt->shape[1] : 0;
    if ((status = clattn__expect_shape(ctx, fn, "src", src->ndim, src->shape, 3,
                                       (size_t[]){B, S, E}, "[B, S, d_model]")))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, B > 0 && S > 0, "src [%zu, %zu, %zu] is empty", B, S, E);
    if ((status = clattn__expect_shape(ctx, fn, "tgt", tgt->ndim, tgt->shape, 3,
                                       (size_t[]){B, T, E}, "[B, T, d_model]")))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, T > 0, "tgt [%zu, 0, %zu] is empty", B, E);
    if ((status = clattn__expect_shape(ctx, fn, "out", out->ndim, out->shape, 3,
                                       (size_t[]){B, T, V ? V : E},
                                       V ? "[B, T, V] (the model has a generator)"
                                         : "[B, T, d_model]")))
        return status;
    clattn_tensor *memory = NULL, *mask = NULL, *h = NULL;
    clattn_encoder_forward_params enc;
    clattn_encoder_forward_params_default(&enc);
    clattn_decoder_forward_params dec;
    clattn_decoder_forward_params_default(&dec);
    dec.tgt_is_causal = 1;
    if (!(status = clattn_tensor_create(ctx, &memory, 3, (size_t[]){B, S, E})) &&
        (!src_padding || !(status = padding_mask(m, fn, src_padding, B, S, &mask))) &&
        (!V || !(status = clattn_tensor_create(ctx, &h, 3, (size_t[]){B, T, E})))) {
        enc.key_padding_mask = mask;
        dec.memory_key_padding_mask = mask;
        if (!(status = clattn_encoder_forward(m->encoder, src, memory, &enc)) &&
            !(status = clattn_decoder_forward(m->decoder, tgt, memory, V ? h : out, &dec)) && V)
            status = clattn__transformer_logits(m, h, B * T, out);
    }
    clattn_tensor_destroy(&memory), clattn_tensor_destroy(&mask), clattn_tensor_destroy(&h);
    return status;
}
