/* The multi-head attention layer: projections (CLBlast), attention, output projection. */
#include "attention_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clattn_mha {
    clattn_context *ctx;
    clattn_mha_config cfg; /* every default resolved */
    size_t qk_width;       /* h·d_k */
    size_t v_width;        /* h·d_v */

    /* Weights, PyTorch layouts. w_in: Wq [h·d_k, E] | Wk [h·d_k, kdim] | Wv [h·d_v, vdim],
     * which for kdim == vdim == E is exactly the packed in_proj_weight [P, E]. */
    cl_mem w_in;
    size_t wk_offset, wv_offset; /* in floats */
    cl_mem b_in;                 /* [2·h·d_k + h·d_v] or NULL */
    cl_mem w_out;                /* [E, h·d_v] or NULL */
    cl_mem b_out;                /* [E] or NULL */
    bool loaded;

    /* Scratch, grown on demand: projections, and the concatenated head outputs. */
    cl_mem proj;
    size_t proj_bytes;
    cl_mem heads;
    size_t heads_bytes;
};

static const char fn_forward[] = "clattn_mha_forward";
static const char fn_load[] = "clattn_mha_load_weights";

void clattn_mha_config_default(clattn_mha_config *config, size_t embed_dim, size_t num_heads)
{
    if (!config)
        return;
    memset(config, 0, sizeof(*config));
    config->embed_dim = embed_dim;
    config->num_heads = num_heads;
    config->in_proj_bias = 1;
    config->out_proj = 1;
    config->out_proj_bias = 1;
}

void clattn_mha_config_timm(clattn_mha_config *config, size_t dim, size_t num_heads, int qkv_bias)
{
    clattn_mha_config_default(config, dim, num_heads);
    if (config)
        config->in_proj_bias = qkv_bias != 0;
}

void clattn_mha_forward_params_default(clattn_mha_forward_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->key_padding_mask_kind = CLATTN_MASK_BOOL;
    params->attn_mask_kind = CLATTN_MASK_BOOL;
    params->average_attn_weights = 1;
    params->path = CLATTN_PATH_AUTO;
}

/* Fills in the defaults and checks the configuration. */
static clattn_status resolve_config(clattn_context *ctx, const clattn_mha_config *in,
                                    clattn_mha_config *out)
{
    static const char fn[] = "clattn_mha_create";
    *out = *in;
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(in->reserved, sizeof(in->reserved)),
                     "%s: invalid argument: config->reserved is not zero (initialise config with "
                     "clattn_mha_config_default)",
                     fn);
    CLATTN_CHECK_ARG(ctx, in->embed_dim > 0, "%s: invalid argument: embed_dim is 0", fn);
    CLATTN_CHECK_ARG(ctx, in->num_heads > 0, "%s: invalid argument: num_heads is 0", fn);
    bool derived = in->head_dim_qk == 0 || in->head_dim_v == 0;
    CLATTN_CHECK_ARG(ctx, !derived || in->embed_dim % in->num_heads == 0,
                     "%s: invalid argument: embed_dim %zu is not divisible by num_heads %zu (set "
                     "head_dim_qk and head_dim_v explicitly)",
                     fn, in->embed_dim, in->num_heads);
    if (out->head_dim_qk == 0)
        out->head_dim_qk = in->embed_dim / in->num_heads;
    if (out->head_dim_v == 0)
        out->head_dim_v = in->embed_dim / in->num_heads;
    if (out->kdim == 0)
        out->kdim = in->embed_dim;
    if (out->vdim == 0)
        out->vdim = in->embed_dim;
    out->in_proj_bias = in->in_proj_bias != 0;
    out->out_proj = in->out_proj != 0;
    out->out_proj_bias = in->out_proj && in->out_proj_bias;
    size_t qk_width, v_width;
    bool ok = clattn__mul_size(out->num_heads, out->head_dim_qk, &qk_width) &&
              clattn__mul_size(out->num_heads, out->head_dim_v, &v_width) &&
              qk_width < (1u << 30) && v_width < (1u << 30) && out->embed_dim < (1u << 30) &&
              out->kdim < (1u << 30) && out->vdim < (1u << 30);
    if (!ok)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: the layer's widths are too large (h·d_k, h·d_v or a dimension "
                            "reaches 2^30)",
                            fn);
    CLATTN_CHECK_ARG(ctx, out->out_proj || out->num_heads * out->head_dim_v == out->embed_dim,
                     "%s: invalid argument: without the output projection, num_heads·head_dim_v "
                     "(%zu) must equal embed_dim (%zu)",
                     fn, out->num_heads * out->head_dim_v, out->embed_dim);
    return CLATTN_OK;
}

clattn_status clattn_mha_create(clattn_context *ctx, clattn_mha **out,
                                const clattn_mha_config *config)
{
    CLATTN_CHECK_ARG(NULL, ctx, "clattn_mha_create: invalid argument: ctx is NULL");
    CLATTN_CHECK_ARG(ctx, out, "clattn_mha_create: invalid argument: mha is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, config, "clattn_mha_create: invalid argument: config is NULL");
    clattn_mha_config cfg;
    clattn_status status = resolve_config(ctx, config, &cfg);
    if (status != CLATTN_OK)
        return status;
    clattn_mha *mha = calloc(1, sizeof(*mha));
    if (!mha)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_mha_create: out of host memory");
    mha->ctx = ctx;
    mha->cfg = cfg;
    mha->qk_width = cfg.num_heads * cfg.head_dim_qk;
    mha->v_width = cfg.num_heads * cfg.head_dim_v;
    *out = mha;
    return CLATTN_OK;
}

static void release(cl_mem *mem)
{
    if (*mem)
        clReleaseMemObject(*mem);
    *mem = NULL;
}

void clattn_mha_destroy(clattn_mha **pmha)
{
    if (!pmha || !*pmha)
        return;
    clattn_mha *mha = *pmha;
    release(&mha->w_in);
    release(&mha->b_in);
    release(&mha->w_out);
    release(&mha->b_out);
    release(&mha->proj);
    release(&mha->heads);
    free(mha);
    *pmha = NULL;
}

clattn_status clattn_mha_get_config(const clattn_mha *mha, clattn_mha_config *config)
{
    CLATTN_CHECK_ARG(NULL, mha, "clattn_mha_get_config: invalid argument: mha is NULL");
    CLATTN_CHECK_ARG(mha->ctx, config, "clattn_mha_get_config: invalid argument: config is NULL");
    *config = mha->cfg;
    return CLATTN_OK;
}

/* ---- weights ---- */

/* Checks that a host weight is present (when required) with exactly the shape `want`. */
static clattn_status check_weight(clattn_context *ctx, const char *name,
                                  const clattn_host_tensor *t, int ndim, const size_t *want)
{
    CLATTN_CHECK_ARG(ctx, t->data, "%s: invalid argument: %s is required by the configuration",
                     fn_load, name);
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    if (same)
        return CLATTN_OK;
    char got[96], need[96];
    if (t->ndim >= 1 && t->ndim <= CLATTN_MAX_DIMS)
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
    else
        snprintf(got, sizeof(got), "(ndim %d)", t->ndim);
    clattn__format_shape(need, sizeof(need), ndim, want);
    return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                        "%s: %s has shape %s but the configuration needs %s", fn_load, name, got,
                        need);
}

static clattn_status write_at(clattn_context *ctx, cl_mem mem, size_t offset, const float *data,
                              size_t count, const char *name)
{
    cl_int err = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, offset * sizeof(float),
                                      count * sizeof(float), data, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "%s: writing %s to the device", fn_load, name);
    return CLATTN_OK;
}

static clattn_status upload(clattn_context *ctx, const float *data, size_t count, const char *name,
                            cl_mem *mem)
{
    clattn_status status = clattn__buffer_create(ctx, count * sizeof(float), mem, name);
    if (status == CLATTN_OK && (status = write_at(ctx, *mem, 0, data, count, name)))
        release(mem);
    return status;
}

/* The new weights, built completely before they replace the old ones. */
typedef struct mha_buffers {
    cl_mem w_in, b_in, w_out, b_out;
} mha_buffers;

static void buffers_release(mha_buffers *b)
{
    release(&b->w_in);
    release(&b->b_in);
    release(&b->w_out);
    release(&b->b_out);
}

static clattn_status check_all_weights(clattn_mha *mha, const clattn_mha_weights *w, bool packed)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, packed_rows = 2 * mha->qk_width + mha->v_width;
    clattn_status status;
    if (packed) {
        CLATTN_CHECK_ARG(ctx, c->kdim == E && c->vdim == E,
                         "%s: invalid argument: in_proj_weight needs kdim == vdim == embed_dim; "
                         "give q_proj_weight, k_proj_weight and v_proj_weight instead",
                         fn_load);
        if ((status = check_weight(ctx, "in_proj_weight", &w->in_proj_weight, 2,
                                   (size_t[]){packed_rows, E})))
            return status;
    } else {
        if ((status = check_weight(ctx, "q_proj_weight", &w->q_proj_weight, 2,
                                   (size_t[]){mha->qk_width, E})) ||
            (status = check_weight(ctx, "k_proj_weight", &w->k_proj_weight, 2,
                                   (size_t[]){mha->qk_width, c->kdim})) ||
            (status = check_weight(ctx, "v_proj_weight", &w->v_proj_weight, 2,
                                   (size_t[]){mha->v_width, c->vdim})))
            return status;
    }
    if (c->in_proj_bias &&
        (status = check_weight(ctx, "in_proj_bias", &w->in_proj_bias, 1, &packed_rows)))
        return status;
    if (c->out_proj &&
        (status = check_weight(ctx, "out_proj_weight", &w->out_proj_weight, 2,
                               (size_t[]){E, mha->v_width})))
        return status;
    if (c->out_proj_bias &&
        (status = check_weight(ctx, "out_proj_bias", &w->out_proj_bias, 1, &E)))
        return status;
    return CLATTN_OK;
}

clattn_status clattn_mha_load_weights(clattn_mha *mha, const clattn_mha_weights *w)
{
    CLATTN_CHECK_ARG(NULL, mha, "%s: invalid argument: mha is NULL", fn_load);
    clattn_context *ctx = mha->ctx;
    CLATTN_CHECK_ARG(ctx, w, "%s: invalid argument: weights is NULL", fn_load);
    bool packed = w->in_proj_weight.data != NULL;
    bool separate = w->q_proj_weight.data || w->k_proj_weight.data || w->v_proj_weight.data;
    CLATTN_CHECK_ARG(ctx, packed != separate,
                     "%s: invalid argument: give either in_proj_weight or q_proj_weight, "
                     "k_proj_weight and v_proj_weight (%s)",
                     fn_load, packed ? "both were given" : "neither was given");
    clattn_status status = check_all_weights(mha, w, packed);
    if (status != CLATTN_OK)
        return status;

    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim;
    size_t wq = mha->qk_width * E, wk = mha->qk_width * c->kdim, wv = mha->v_width * c->vdim;
    mha_buffers b = {0};
    status = clattn__buffer_create(ctx, (wq + wk + wv) * sizeof(float), &b.w_in, "in_proj_weight");
    if (status == CLATTN_OK) {
        if (packed)
            status = write_at(ctx, b.w_in, 0, w->in_proj_weight.data, wq + wk + wv,
                              "in_proj_weight");
        else if (!(status = write_at(ctx, b.w_in, 0, w->q_proj_weight.data, wq, "q_proj_weight")) &&
                 !(status = write_at(ctx, b.w_in, wq, w->k_proj_weight.data, wk, "k_proj_weight")))
            status = write_at(ctx, b.w_in, wq + wk, w->v_proj_weight.data, wv, "v_proj_weight");
    }
    if (status == CLATTN_OK && c->in_proj_bias)
        status = upload(ctx, w->in_proj_bias.data, 2 * mha->qk_width + mha->v_width,
                        "in_proj_bias", &b.b_in);
    if (status == CLATTN_OK && c->out_proj)
        status = upload(ctx, w->out_proj_weight.data, E * mha->v_width, "out_proj_weight",
                        &b.w_out);
    if (status == CLATTN_OK && c->out_proj_bias)
        status = upload(ctx, w->out_proj_bias.data, E, "out_proj_bias", &b.b_out);
    if (status != CLATTN_OK) {
        buffers_release(&b);
        return status;
    }

    mha_buffers old = {mha->w_in, mha->b_in, mha->w_out, mha->b_out};
    buffers_release(&old);
    mha->w_in = b.w_in;
    mha->b_in = b.b_in;
    mha->w_out = b.w_out;
    mha->b_out = b.b_out;
    mha->wk_offset = wq;
    mha->wv_offset = wq + wk;
    mha->loaded = true;
    return CLATTN_OK;
}

/* ---- forward ---- */

static bool overlaps(const clattn_tensor *a, const clattn_tensor *b)
{
    if (!a || !b || a->mem != b->mem)
        return false;
    size_t a_end = a->offset + clattn_tensor_numel(a), b_end = b->offset + clattn_tensor_numel(b);
    return a->offset < b_end && b->offset < a_end;
}

/* Checks a [B, N, width] contiguous input or output. */
static clattn_status check_sequence(clattn_context *ctx, const char *name, const clattn_tensor *t,
                                    size_t width, const char *width_name)
{
    CLATTN_CHECK_ARG(ctx, t, "%s: invalid argument: %s is NULL", fn_forward, name);
    CLATTN_CHECK_ARG(ctx, t->ctx == ctx, "%s: invalid argument: %s belongs to another context",
                     fn_forward, name);
    if (t->ndim != 3 || t->shape[2] != width) {
        char got[96];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: %s has shape %s but must be [B, N, %s] with %s = %zu", fn_forward,
                            name, got, width_name, width_name, width);
    }
    CLATTN_CHECK_ARG(ctx, clattn_tensor_is_contiguous(t),
                     "%s: invalid argument: %s must be contiguous", fn_forward, name);
    return CLATTN_OK;
}

typedef struct forward_shapes {
    size_t batch, seq_q, seq_k;
    bool self;
} forward_shapes;

static clattn_status check_forward(clattn_mha *mha, const clattn_tensor *query,
                                   const clattn_tensor *key, const clattn_tensor *value,
                                   const clattn_tensor *out, const clattn_mha_forward_params *p,
                                   forward_shapes *s)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    CLATTN_CHECK_ARG(ctx, mha->loaded,
                     "%s: invalid argument: the layer has no weights (call "
                     "clattn_mha_load_weights first)",
                     fn_forward);
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(p->reserved, sizeof(p->reserved)),
                     "%s: invalid argument: params->reserved is not zero (initialise params with "
                     "clattn_mha_forward_params_default)",
                     fn_forward);
    CLATTN_CHECK_ARG(ctx, p->path >= CLATTN_PATH_AUTO && p->path <= CLATTN_PATH_FUSED,
                     "%s: invalid argument: params->path is %d", fn_forward, (int)p->path);
    CLATTN_CHECK_ARG(ctx, (key == NULL) == (value == NULL),
                     "%s: invalid argument: key and value must both be given or both be NULL",
                     fn_forward);
    clattn_status status = check_sequence(ctx, "query", query, c->embed_dim, "E");
    if (status != CLATTN_OK)
        return status;
    s->batch = query->shape[0];
    s->seq_q = query->shape[1];
    s->self = !key || (key == query && value == query);
    if (s->self) {
        CLATTN_CHECK_ARG(ctx, c->kdim == c->embed_dim && c->vdim == c->embed_dim,
                         "%s: invalid argument: self-attention (key and value NULL or the query) "
                         "needs kdim == vdim == embed_dim, not %zu and %zu",
                         fn_forward, c->kdim, c->vdim);
        s->seq_k = s->seq_q;
    } else {
        if ((status = check_sequence(ctx, "key", key, c->kdim, "kdim")) ||
            (status = check_sequence(ctx, "value", value, c->vdim, "vdim")))
            return status;
        s->seq_k = key->shape[1];
        if (key->shape[0] != s->batch || value->shape[0] != s->batch ||
            value->shape[1] != s->seq_k)
            return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                                "%s: query [%zu, %zu, ...], key [%zu, %zu, ...] and value [%zu, "
                                "%zu, ...] must share the batch size, and key and value the "
                                "sequence length",
                                fn_forward, query->shape[0], query->shape[1], key->shape[0],
                                key->shape[1], value->shape[0], value->shape[1]);
    }
    if ((status = check_sequence(ctx, "out", out, c->embed_dim, "E")))
        return status;
    if (out->shape[0] != s->batch || out->shape[1] != s->seq_q)
        return clattn__expect_shape(ctx, fn_forward, "out", out, 3,
                                    (size_t[]){s->batch, s->seq_q, c->embed_dim}, "[B, Nq, E]");
    CLATTN_CHECK_ARG(ctx, !overlaps(out, query) && !overlaps(out, key) && !overlaps(out, value),
                     "%s: invalid argument: out overlaps an input", fn_forward);
    /* Rows are indexed with 32 bits by the kernels; the projections' sizes must not overflow. */
    size_t rows = s->batch * (s->seq_q > s->seq_k ? s->seq_q : s->seq_k), bytes;
    size_t width = 2 * mha->qk_width + mha->v_width;
    if (rows > UINT32_MAX || !clattn__mul_size(rows, width, &bytes) ||
        !clattn__mul_size(3 * bytes, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: %zu x %zu tokens are too many for the projections", fn_forward,
                            s->batch, s->seq_q > s->seq_k ? s->seq_q : s->seq_k);
    return CLATTN_OK;
}

/* Q, K, V projections into mha->proj; fills the head views. */
static clattn_status project_inputs(clattn_mha *mha, const clattn_tensor *query,
                                    const clattn_tensor *key, const clattn_tensor *value,
                                    const forward_shapes *s, clattn_attention_problem *p)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, qk = mha->qk_width, vw = mha->v_width;
    size_t dk = c->head_dim_qk, dv = c->head_dim_v;
    size_t rows_q = s->batch * s->seq_q, rows_k = s->batch * s->seq_k;
    clattn_status status;

    if (s->self) {
        /* One GEMM on the packed weights: QKV [B·N, P] with Q | K | V in each row. */
        size_t P = 2 * qk + vw;
        if ((status = clattn__grow_buffer(ctx, &mha->proj, &mha->proj_bytes, rows_q * P * sizeof(float),
                           "the Q/K/V projections")) ||
            (status = clattn__gemm_nt(ctx, CLATTN_OP_IN_PROJECTION, rows_q, P, E, query->mem,
                                      query->offset, E, mha->w_in, 0, E, 0.0f, mha->proj, 0, P)) ||
            (status = clattn__bias_act(ctx, mha->proj, 0, P, rows_q, P, mha->b_in, 0,
                                       CLATTN_ACT_NONE)))
            return status;
        p->q = (clattn_head_view){mha->proj, 0, s->seq_q * P, dk, P};
        p->k = (clattn_head_view){mha->proj, qk, s->seq_q * P, dk, P};
        p->v = (clattn_head_view){mha->proj, 2 * qk, s->seq_q * P, dv, P};
        return CLATTN_OK;
    }

    /* Three GEMMs: Q [B·Nq, h·d_k] | K [B·Nk, h·d_k] | V [B·Nk, h·d_v], one after another. */
    size_t k_at = rows_q * qk, v_at = k_at + rows_k * qk, total = v_at + rows_k * vw;
    if ((status = clattn__grow_buffer(ctx, &mha->proj, &mha->proj_bytes, total * sizeof(float),
                       "the Q/K/V projections")) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_IN_PROJECTION, rows_q, qk, E, query->mem,
                                  query->offset, E, mha->w_in, 0, E, 0.0f, mha->proj, 0, qk)) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_IN_PROJECTION, rows_k, qk, c->kdim, key->mem,
                                  key->offset, c->kdim, mha->w_in, mha->wk_offset, c->kdim, 0.0f,
                                  mha->proj, k_at, qk)) ||
        (status = clattn__gemm_nt(ctx, CLATTN_OP_IN_PROJECTION, rows_k, vw, c->vdim, value->mem,
                                  value->offset, c->vdim, mha->w_in, mha->wv_offset, c->vdim, 0.0f,
                                  mha->proj, v_at, vw)))
        return status;
    if (mha->b_in &&
        ((status = clattn__bias_act(ctx, mha->proj, 0, qk, rows_q, qk, mha->b_in, 0,
                                    CLATTN_ACT_NONE)) ||
         (status = clattn__bias_act(ctx, mha->proj, k_at, qk, rows_k, qk, mha->b_in, qk,
                                    CLATTN_ACT_NONE)) ||
         (status = clattn__bias_act(ctx, mha->proj, v_at, vw, rows_k, vw, mha->b_in, 2 * qk,
                                    CLATTN_ACT_NONE))))
        return status;
    p->q = (clattn_head_view){mha->proj, 0, s->seq_q * qk, dk, qk};
    p->k = (clattn_head_view){mha->proj, k_at, s->seq_k * qk, dk, qk};
    p->v = (clattn_head_view){mha->proj, v_at, s->seq_k * vw, dv, vw};
    return CLATTN_OK;
}

clattn_status clattn_mha_forward(clattn_mha *mha, const clattn_tensor *query,
                                 const clattn_tensor *key, const clattn_tensor *value,
                                 clattn_tensor *out, const clattn_mha_forward_params *params)
{
    CLATTN_CHECK_ARG(NULL, mha, "%s: invalid argument: mha is NULL", fn_forward);
    clattn_context *ctx = mha->ctx;
    clattn_mha_forward_params defaults;
    if (!params) {
        clattn_mha_forward_params_default(&defaults);
        params = &defaults;
    }
    forward_shapes s = {0, 0, 0, false};
    clattn_status status = check_forward(mha, query, key, value, out, params, &s);
    if (status != CLATTN_OK)
        return status;

    const clattn_mha_config *c = &mha->cfg;
    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    p.batch = s.batch;
    p.heads = c->num_heads;
    p.seq_q = s.seq_q;
    p.seq_k = s.seq_k;
    p.dk = c->head_dim_qk;
    p.dv = c->head_dim_v;
    p.scale = (float)(1.0 / sqrt((double)c->head_dim_qk));
    p.causal = params->causal;
    p.path = params->path;
    if (params->attn_weights) {
        bool average = params->average_attn_weights != 0;
        p.weights_layout = average ? CLATTN_WEIGHTS_AVERAGED : CLATTN_WEIGHTS_PER_HEAD;
        p.weights = params->attn_weights->mem;
        p.weights_offset = params->attn_weights->offset;
        status = average ? clattn__weights_output(ctx, fn_forward, params->attn_weights, 3,
                                                  (size_t[]){s.batch, s.seq_q, s.seq_k},
                                                  "[B, Nq, Nk]", params->path)
                         : clattn__weights_output(ctx, fn_forward, params->attn_weights, 4,
                                                  (size_t[]){s.batch, p.heads, s.seq_q, s.seq_k},
                                                  "[B, h, Nq, Nk]", params->path);
        if (status != CLATTN_OK)
            return status;
    }
    if ((status = clattn__attn_mask_view(ctx, fn_forward, params->attn_mask,
                                         params->attn_mask_kind, CLATTN_MASK_3D_BATCH_X_HEADS,
                                         s.batch, p.heads, s.seq_q, s.seq_k, &p.attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn_forward, params->key_padding_mask,
                                           params->key_padding_mask_kind, s.batch, s.seq_k,
                                           &p.key_padding_mask)))
        return status;

    status = project_inputs(mha, query, key, value, &s, &p);
    if (status != CLATTN_OK)
        return status;

    /* Head outputs in the concatenated layout [B·Nq, h·d_v]: straight into `out` when there is
     * no output projection (h·d_v == E then). */
    size_t rows_q = s.batch * s.seq_q, vw = mha->v_width, E = c->embed_dim;
    if (c->out_proj) {
        status = clattn__grow_buffer(ctx, &mha->heads, &mha->heads_bytes, rows_q * vw * sizeof(float),
                      "the attention output");
        if (status != CLATTN_OK)
            return status;
        p.out = (clattn_head_view){mha->heads, 0, s.seq_q * vw, p.dv, vw};
    } else {
        p.out = (clattn_head_view){out->mem, out->offset, s.seq_q * vw, p.dv, vw};
    }
    if ((status = clattn__attention(ctx, &p)))
        return status;
    if (!c->out_proj)
        return CLATTN_OK;
    if ((status = clattn__gemm_nt(ctx, CLATTN_OP_OUT_PROJECTION, rows_q, E, vw, mha->heads, 0, vw,
                                  mha->w_out, 0, vw, 0.0f, out->mem, out->offset, E)))
        return status;
    return clattn__bias_act(ctx, out->mem, out->offset, E, rows_q, E, mha->b_out, 0,
                            CLATTN_ACT_NONE);
}
