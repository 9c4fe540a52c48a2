/* The multi-head attention layer: projections (CLBlast), attention, output projection. */
#include "clattn/attention.h"
#include "mha_internal.h"
#include "runtime/buffers.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clattn_mha {
    clattn_context *ctx;
    clattn_mha_config cfg; /* every default resolved */
    size_t qk_width;       /* h·d_k: the queries */
    size_t k_width;        /* h_kv·d_k: the keys (h_kv = num_kv_heads) */
    size_t vp_width;       /* h_kv·d_v: the values */
    size_t v_width;        /* h·d_v: the head outputs */
    size_t in_width;       /* the packed projection's rows: qk_width + k_width + vp_width */

    /* Weights, PyTorch layouts. w_in: Wq [h·d_k, E] | Wk [h·d_k, kdim] | Wv [h·d_v, vdim],
     * which for kdim == vdim == E is exactly the packed in_proj_weight [P, E]. */
    cl_mem w_in;
    size_t wk_offset, wv_offset; /* in floats */
    cl_mem b_in;                 /* [2·h·d_k + h·d_v] or NULL */
    cl_mem w_out;                /* [E, h·d_v] or NULL */
    cl_mem b_out;                /* [E] or NULL */
    bool loaded;

    /* The weights as the GEMMs read them (their packed forms are kept here). */
    clattn_gemm_weight in_all;       /* [2·h·d_k + h·d_v, E]: self-attention's one projection */
    clattn_gemm_weight in_q, in_k, in_v; /* the three parts, for cross-attention */
    clattn_gemm_weight out_w;        /* [E, h·d_v] */
    bool self_only; /* w_in kept only packed (clattn__mha_keep_packed_only): no cross-attention */
};

static void gemm_weights_release(clattn_mha *mha)
{
    clattn__gemm_weight_release(&mha->in_all);
    clattn__gemm_weight_release(&mha->in_q);
    clattn__gemm_weight_release(&mha->in_k);
    clattn__gemm_weight_release(&mha->in_v);
    clattn__gemm_weight_release(&mha->out_w);
}

const clattn_gemm_weight *clattn__mha_in_weight(const clattn_mha *mha)
{
    return &mha->in_all;
}

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
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(in->reserved, sizeof(in->reserved)),
                     "config->reserved is not zero (initialise config with "
                     "clattn_mha_config_default)");
    CLATTN_CHECK_ARG(ctx, fn, in->embed_dim > 0, "embed_dim is 0");
    CLATTN_CHECK_ARG(ctx, fn, in->num_heads > 0, "num_heads is 0");
    bool derived = in->head_dim_qk == 0 || in->head_dim_v == 0;
    CLATTN_CHECK_ARG(ctx, fn, !derived || in->embed_dim % in->num_heads == 0,
                     "embed_dim %zu is not divisible by num_heads %zu (set "
                     "head_dim_qk and head_dim_v explicitly)", in->embed_dim, in->num_heads);
    if (out->head_dim_qk == 0)
        out->head_dim_qk = in->embed_dim / in->num_heads;
    if (out->head_dim_v == 0)
        out->head_dim_v = in->embed_dim / in->num_heads;
    if (out->kdim == 0)
        out->kdim = in->embed_dim;
    if (out->vdim == 0)
        out->vdim = in->embed_dim;
    if (out->num_kv_heads == 0)
        out->num_kv_heads = in->num_heads;
    CLATTN_CHECK_ARG(ctx, fn, in->num_heads % out->num_kv_heads == 0,
                     "num_kv_heads %zu does not divide num_heads %zu", out->num_kv_heads,
                     in->num_heads);
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
    CLATTN_CHECK_ARG(ctx, fn, out->out_proj || out->num_heads * out->head_dim_v == out->embed_dim,
                     "without the output projection, num_heads·head_dim_v "
                     "(%zu) must equal embed_dim (%zu)", out->num_heads * out->head_dim_v, out->embed_dim);
    return CLATTN_OK;
}

clattn_status clattn_mha_create(clattn_context *ctx, clattn_mha **out,
                                const clattn_mha_config *config)
{
    CLATTN_CHECK_ARG(NULL, "clattn_mha_create", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, "clattn_mha_create", out, "mha is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, "clattn_mha_create", config, "config is NULL");
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
    mha->k_width = cfg.num_kv_heads * cfg.head_dim_qk;
    mha->vp_width = cfg.num_kv_heads * cfg.head_dim_v;
    mha->v_width = cfg.num_heads * cfg.head_dim_v;
    mha->in_width = mha->qk_width + mha->k_width + mha->vp_width;
    *out = mha;
    return CLATTN_OK;
}

void clattn_mha_destroy(clattn_mha **pmha)
{
    if (!pmha || !*pmha)
        return;
    clattn_mha *mha = *pmha;
    gemm_weights_release(mha);
    clattn__release_mem(&mha->w_in);
    clattn__release_mem(&mha->b_in);
    clattn__release_mem(&mha->w_out);
    clattn__release_mem(&mha->b_out);
    free(mha);
    *pmha = NULL;
}

clattn_status clattn_mha_get_config(const clattn_mha *mha, clattn_mha_config *config)
{
    CLATTN_CHECK_ARG(NULL, "clattn_mha_get_config", mha, "mha is NULL");
    CLATTN_CHECK_ARG(mha->ctx, "clattn_mha_get_config", config, "config is NULL");
    *config = mha->cfg;
    return CLATTN_OK;
}

/* ---- weights ---- */

/* Checks that a host weight is present (when required) with exactly the shape `want`. */
static clattn_status check_weight(clattn_context *ctx, const char *name,
                                  const clattn_host_tensor *t, int ndim, const size_t *want)
{
    return clattn__expect_host_shape(ctx, fn_load, name, name, t, ndim, want, 0);
}

/* The new weights, built completely before they replace the old ones. */
typedef struct mha_buffers {
    cl_mem w_in, b_in, w_out, b_out;
} mha_buffers;

static void buffers_release(mha_buffers *b)
{
    clattn__release_mem(&b->w_in);
    clattn__release_mem(&b->b_in);
    clattn__release_mem(&b->w_out);
    clattn__release_mem(&b->b_out);
}

static clattn_status check_all_weights(clattn_mha *mha, const clattn_mha_weights *w, bool packed)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, packed_rows = mha->in_width;
    clattn_status status;
    if (packed) {
        CLATTN_CHECK_ARG(ctx, fn_load, c->kdim == E && c->vdim == E,
                         "in_proj_weight needs kdim == vdim == embed_dim; "
                         "give q_proj_weight, k_proj_weight and v_proj_weight instead");
        if ((status = check_weight(ctx, "in_proj_weight", &w->in_proj_weight, 2,
                                   (size_t[]){packed_rows, E})))
            return status;
    } else {
        if ((status = check_weight(ctx, "q_proj_weight", &w->q_proj_weight, 2,
                                   (size_t[]){mha->qk_width, E})) ||
            (status = check_weight(ctx, "k_proj_weight", &w->k_proj_weight, 2,
                                   (size_t[]){mha->k_width, c->kdim})) ||
            (status = check_weight(ctx, "v_proj_weight", &w->v_proj_weight, 2,
                                   (size_t[]){mha->vp_width, c->vdim})))
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
    CLATTN_CHECK_ARG(NULL, fn_load, mha, "mha is NULL");
    clattn_context *ctx = mha->ctx;
    CLATTN_CHECK_ARG(ctx, fn_load, w, "weights is NULL");
    bool packed = w->in_proj_weight.data != NULL;
    bool separate = w->q_proj_weight.data || w->k_proj_weight.data || w->v_proj_weight.data;
    CLATTN_CHECK_ARG(ctx, fn_load, packed != separate,
                     "give either in_proj_weight or q_proj_weight, "
                     "k_proj_weight and v_proj_weight (%s)", packed ? "both were given" : "neither was given");
    clattn_status status = check_all_weights(mha, w, packed);
    if (status != CLATTN_OK)
        return status;

    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim;
    size_t wq = mha->qk_width * E, wk = mha->k_width * c->kdim, wv = mha->vp_width * c->vdim;
    mha_buffers b = {0};
    status = clattn__buffer_create(ctx, (wq + wk + wv) * sizeof(float), &b.w_in, "in_proj_weight");
    if (status == CLATTN_OK) {
        if (packed)
            status = clattn__write_floats_at(ctx, b.w_in, 0, w->in_proj_weight.data,
                                             wq + wk + wv, "in_proj_weight");
        else if (!(status = clattn__write_floats_at(ctx, b.w_in, 0, w->q_proj_weight.data, wq,
                                                    "q_proj_weight")) &&
                 !(status = clattn__write_floats_at(ctx, b.w_in, wq, w->k_proj_weight.data, wk,
                                                    "k_proj_weight")))
            status = clattn__write_floats_at(ctx, b.w_in, wq + wk, w->v_proj_weight.data, wv,
                                             "v_proj_weight");
    }
    if (status == CLATTN_OK && c->in_proj_bias)
        status = clattn__upload(ctx, w->in_proj_bias.data, mha->in_width, "in_proj_bias",
                                &b.b_in);
    if (status == CLATTN_OK && c->out_proj)
        status = clattn__upload(ctx, w->out_proj_weight.data, E * mha->v_width, "out_proj_weight",
                                &b.w_out);
    if (status == CLATTN_OK && c->out_proj_bias)
        status = clattn__upload(ctx, w->out_proj_bias.data, E, "out_proj_bias", &b.b_out);
    if (status != CLATTN_OK) {
        buffers_release(&b);
        return status;
    }

    gemm_weights_release(mha);
    mha_buffers old = {mha->w_in, mha->b_in, mha->w_out, mha->b_out};
    buffers_release(&old);
    mha->w_in = b.w_in;
    mha->b_in = b.b_in;
    mha->w_out = b.w_out;
    mha->b_out = b.b_out;
    mha->wk_offset = wq;
    mha->wv_offset = wq + wk;
    size_t qk = mha->qk_width, vw = mha->v_width;
    mha->in_all = (clattn_gemm_weight){b.w_in, 0, mha->in_width, E, E, NULL, NULL, NULL};
    mha->in_q = (clattn_gemm_weight){b.w_in, 0, qk, E, E, NULL, NULL, NULL};
    mha->in_k = (clattn_gemm_weight){b.w_in, wq, mha->k_width, c->kdim, c->kdim, NULL, NULL, NULL};
    mha->in_v =
        (clattn_gemm_weight){b.w_in, wq + wk, mha->vp_width, c->vdim, c->vdim, NULL, NULL, NULL};
    mha->out_w = (clattn_gemm_weight){b.w_out, 0, E, vw, vw, NULL, NULL, NULL};
    mha->self_only = false;
    mha->loaded = true;
    return CLATTN_OK;
}

clattn_status clattn__mha_load_quantised(clattn_mha *mha, const clattn_gemm_quant *in,
                                        const clattn_gemm_quant *out, const float *in_bias,
                                        const float *out_bias)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, vw = mha->v_width;
    CLATTN_CHECK_ARG(ctx, fn_load, in && out && c->out_proj && c->kdim == E && c->vdim == E,
                     "quantised weights need self-attention with an output projection");
    /* Each weight may be a chain of row blocks (ops/linear.h): its rows are the parts'. */
    size_t in_rows = clattn__gemm_quant_rows(in, E), out_rows = clattn__gemm_quant_rows(out, vw);
    CLATTN_CHECK_ARG(ctx, fn_load, in_rows == mha->in_width && out_rows == E,
                     "quantised weights [%zu, %zu] and [%zu, %zu] where [%zu, %zu] and [%zu, %zu] "
                     "are needed (0 rows: a part of another width)", in_rows, in->w.k, out_rows,
                     out->w.k, mha->in_width, E, E, vw);
    CLATTN_CHECK_ARG(ctx, fn_load, !in_bias == !c->in_proj_bias && !out_bias == !c->out_proj_bias,
                     "the biases do not match the configuration");
    mha_buffers b = {0};
    clattn_status status = CLATTN_OK;
    if (in_bias)
        status = clattn__upload(ctx, in_bias, mha->in_width, "in_proj_bias", &b.b_in);
    if (status == CLATTN_OK && out_bias)
        status = clattn__upload(ctx, out_bias, E, "out_proj_bias", &b.b_out);
    if (status != CLATTN_OK) {
        buffers_release(&b);
        return status;
    }
    gemm_weights_release(mha);
    mha_buffers old = {mha->w_in, mha->b_in, mha->w_out, mha->b_out};
    buffers_release(&old);
    mha->w_in = mha->w_out = NULL;
    mha->b_in = b.b_in;
    mha->b_out = b.b_out;
    mha->wk_offset = mha->wv_offset = 0;
    mha->in_all = (clattn_gemm_weight){NULL, 0, mha->in_width, E, E, NULL, NULL, in};
    mha->out_w = (clattn_gemm_weight){NULL, 0, E, vw, vw, NULL, NULL, out};
    mha->self_only = true; /* no separate q, k, v weights for cross-attention */
    mha->loaded = true;
    return CLATTN_OK;
}

clattn_status clattn__mha_keep_packed_only(clattn_mha *mha)
{
    bool in_packed = false, out_packed = false;
    clattn_status status = clattn__gemm_weight_pack(mha->ctx, &mha->in_all, &in_packed);
    if (status == CLATTN_OK && mha->w_out)
        status = clattn__gemm_weight_pack(mha->ctx, &mha->out_w, &out_packed);
    if (status != CLATTN_OK)
        return status;
    if (in_packed) {
        clattn__release_mem(&mha->w_in);
        mha->in_all.mem = NULL;
        clattn__gemm_weight_release(&mha->in_q); /* cross-attention's views of w_in */
        clattn__gemm_weight_release(&mha->in_k);
        clattn__gemm_weight_release(&mha->in_v);
        mha->self_only = true;
    }
    if (out_packed) {
        clattn__release_mem(&mha->w_out);
        mha->out_w.mem = NULL;
    }
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
    CLATTN_CHECK_ARG(ctx, fn_forward, t, "%s is NULL", name);
    CLATTN_CHECK_ARG(ctx, fn_forward, t->ctx == ctx, "%s belongs to another context", name);
    if (t->ndim != 3 || t->shape[2] != width) {
        char got[96];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: %s has shape %s but must be [B, N, %s] with %s = %zu", fn_forward,
                            name, got, width_name, width_name, width);
    }
    CLATTN_CHECK_ARG(ctx, fn_forward, clattn_tensor_is_contiguous(t),
                     "%s must be contiguous", name);
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
    CLATTN_CHECK_ARG(ctx, fn_forward, mha->loaded,
                     "the layer has no weights (call "
                     "clattn_mha_load_weights first)");
    CLATTN_CHECK_ARG(ctx, fn_forward, clattn__reserved_is_zero(p->reserved, sizeof(p->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_mha_forward_params_default)");
    CLATTN_CHECK_ARG(ctx, fn_forward, p->path >= CLATTN_PATH_AUTO && p->path <= CLATTN_PATH_FUSED,
                     "params->path is %d", (int)p->path);
    CLATTN_CHECK_ARG(ctx, fn_forward, (key == NULL) == (value == NULL),
                     "key and value must both be given or both be NULL");
    clattn_status status = check_sequence(ctx, "query", query, c->embed_dim, "E");
    if (status != CLATTN_OK)
        return status;
    s->batch = query->shape[0];
    s->seq_q = query->shape[1];
    s->self = !key || (key == query && value == query);
    if (s->self) {
        CLATTN_CHECK_ARG(ctx, fn_forward, c->kdim == c->embed_dim && c->vdim == c->embed_dim,
                         "self-attention (key and value NULL or the query) "
                         "needs kdim == vdim == embed_dim, not %zu and %zu", c->kdim, c->vdim);
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
        return clattn__expect_shape(ctx, fn_forward, "out", out->ndim, out->shape, 3,
                                    (size_t[]){s->batch, s->seq_q, c->embed_dim}, "[B, Nq, E]");
    CLATTN_CHECK_ARG(ctx, fn_forward, !overlaps(out, query) && !overlaps(out, key) && !overlaps(out, value),
                     "out overlaps an input");
    /* Rows are indexed with 32 bits by the kernels; the projections' sizes must not overflow. */
    size_t rows = s->batch * (s->seq_q > s->seq_k ? s->seq_q : s->seq_k), bytes;
    size_t width = mha->in_width;
    if (rows > UINT32_MAX || !clattn__mul_size(rows, width, &bytes) ||
        !clattn__mul_size(3 * bytes, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: %zu x %zu tokens are too many for the projections", fn_forward,
                            s->batch, s->seq_q > s->seq_k ? s->seq_q : s->seq_k);
    return CLATTN_OK;
}

/* io's per-head q/k RMSNorm (when io->q_norm) of the packed projections proj [rows, P]: the
 * queries at column 0, the keys right after them at column h·d_k; one launch, in place. */
static clattn_status norm_qk(clattn_mha *mha, const clattn_mha_io *io, cl_mem proj, size_t rows)
{
    if (!io->q_norm)
        return CLATTN_OK;
    const clattn_mha_config *c = &mha->cfg;
    return clattn__rmsnorm_qk_heads(mha->ctx, proj, 0, mha->in_width, rows, c->num_heads,
                                    c->num_kv_heads, c->head_dim_qk, io->q_norm, io->k_norm,
                                    io->qk_norm_eps);
}

/* Q, K, V projections into the workspace; fills the head views. */
static clattn_status project_inputs(clattn_mha *mha, const clattn_mha_io *io,
                                    clattn_attention_problem *p)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, qk = mha->qk_width, kw = mha->k_width, vw = mha->vp_width;
    size_t dk = c->head_dim_qk, dv = c->head_dim_v;
    size_t rows_q = io->batch * io->seq_q, rows_k = io->batch * io->seq_k;
    cl_mem proj;
    clattn_status status;

    if (!io->key) {
        /* One GEMM on the packed weights: QKV [B·N, P] with Q | K | V in each row. */
        size_t P = mha->in_width;
        if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PROJECTIONS,
                                             rows_q * P * sizeof(float), &proj)) ||
            (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows_q, io->query,
                                     io->query_offset, E, &mha->in_all, mha->b_in, 0,
                                     CLATTN_ACT_NONE, proj, 0, P)) ||
            (status = norm_qk(mha, io, proj, rows_q)))
            return status;
        p->q = (clattn_head_view){proj, 0, io->seq_q * P, dk, P};
        p->k = (clattn_head_view){proj, qk, io->seq_q * P, dk, P};
        p->v = (clattn_head_view){proj, qk + kw, io->seq_q * P, dv, P};
        return CLATTN_OK;
    }

    if (mha->self_only)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: this layer's projections are kept packed for self-attention only",
                            fn_forward);
    /* Three GEMMs: Q [B·Nq, h·d_k] | K [B·Nk, h_kv·d_k] | V [B·Nk, h_kv·d_v], one after
     * another. */
    size_t k_at = rows_q * qk, v_at = k_at + rows_k * kw, total = v_at + rows_k * vw;
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PROJECTIONS, total * sizeof(float),
                                         &proj)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows_q, io->query,
                                 io->query_offset, E, &mha->in_q, mha->b_in, 0, CLATTN_ACT_NONE,
                                 proj, 0, qk)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows_k, io->key, io->key_offset,
                                 c->kdim, &mha->in_k, mha->b_in, qk, CLATTN_ACT_NONE, proj, k_at,
                                 kw)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows_k, io->value,
                                 io->value_offset, c->vdim, &mha->in_v, mha->b_in, qk + kw,
                                 CLATTN_ACT_NONE, proj, v_at, vw)))
        return status;
    p->q = (clattn_head_view){proj, 0, io->seq_q * qk, dk, qk};
    p->k = (clattn_head_view){proj, k_at, io->seq_k * kw, dk, kw};
    p->v = (clattn_head_view){proj, v_at, io->seq_k * vw, dv, vw};
    return CLATTN_OK;
}

/* The attention problem of one call, without the Q/K/V views (filled by the caller). */
static clattn_attention_problem problem_of(const clattn_mha *mha, const clattn_mha_io *io)
{
    const clattn_mha_config *c = &mha->cfg;
    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    p.batch = io->batch;
    p.heads = c->num_heads;
    p.seq_q = io->seq_q;
    p.seq_k = io->seq_k;
    p.dk = c->head_dim_qk;
    p.dv = c->head_dim_v;
    p.scale = (float)(1.0 / sqrt((double)c->head_dim_qk));
    p.kv_heads = c->num_kv_heads;
    p.causal = io->causal;
    p.path = io->path;
    p.no_key_split = io->no_key_split;
    p.attn_mask = io->attn_mask;
    p.key_padding_mask = io->key_padding_mask;
    p.mods = io->mods;
    p.weights_layout = io->weights_layout;
    p.weights = io->weights;
    p.weights_offset = io->weights_offset;
    return p;
}

/* Attention into the head outputs, then the output projection into io->out. With out_bias, a
 * bias the GEMM does not fuse is left to the caller there (clattn__mha_run_out_bias_left). */
static clattn_status attend_and_project_to(clattn_mha *mha, const clattn_mha_io *io,
                                           clattn_attention_problem *p, cl_mem *out_bias)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    /* Head outputs in the concatenated layout [B·Nq, h·d_v]: straight into `out` when there is
     * no output projection (h·d_v == E then). */
    size_t rows_q = io->batch * io->seq_q, vw = mha->v_width, E = c->embed_dim;
    cl_mem heads = io->out;
    size_t heads_offset = io->out_offset;
    clattn_status status;
    if (c->out_proj) {
        status = clattn__workspace_slot(ctx, CLATTN_SLOT_HEADS, rows_q * vw * sizeof(float),
                                        &heads);
        if (status != CLATTN_OK)
            return status;
        heads_offset = 0;
    }
    p->out = (clattn_head_view){heads, heads_offset, io->seq_q * vw, p->dv, vw};
    if ((io->rope && (status = clattn__rope_qk(ctx, p, &io->rope_q, io->rope_key_pos0))) ||
        (status = clattn__attention(ctx, p)))
        return status;
    if (!c->out_proj)
        return CLATTN_OK;
    if (!out_bias)
        return clattn__linear(ctx, CLATTN_OP_OUT_PROJECTION, rows_q, heads, 0, vw, &mha->out_w,
                              mha->b_out, 0, CLATTN_ACT_NONE, io->out, io->out_offset, E);
    bool left = false;
    status = clattn__linear_bias_left(ctx, CLATTN_OP_OUT_PROJECTION, rows_q, heads, 0, vw,
                                      &mha->out_w, mha->b_out, 0, io->out, io->out_offset, E,
                                      &left);
    *out_bias = left ? mha->b_out : NULL;
    return status;
}

static clattn_status attend_and_project(clattn_mha *mha, const clattn_mha_io *io,
                                        clattn_attention_problem *p)
{
    return attend_and_project_to(mha, io, p, NULL);
}

clattn_status clattn__mha_run(clattn_mha *mha, const clattn_mha_io *io)
{
    clattn_attention_problem p = problem_of(mha, io);
    clattn_status status = project_inputs(mha, io, &p);
    if (status != CLATTN_OK)
        return status;
    return attend_and_project(mha, io, &p);
}

clattn_status clattn__mha_run_out_bias_left(clattn_mha *mha, const clattn_mha_io *io,
                                            cl_mem *out_bias)
{
    *out_bias = NULL;
    clattn_attention_problem p = problem_of(mha, io);
    clattn_status status = project_inputs(mha, io, &p);
    if (status != CLATTN_OK)
        return status;
    return attend_and_project_to(mha, io, &p, out_bias);
}

/* Copies rows [B, n] of `width` floats, `pitch` floats apart, from src at column `column` into
 * dst's rows past .. past + n of [B, capacity, width], as half floats when `half`. */
static clattn_status append_rows(clattn_context *ctx, cl_mem src, size_t column, size_t pitch,
                                 cl_mem dst, size_t capacity, size_t past, size_t batch,
                                 size_t n, size_t width, bool half)
{
    if (half)
        return clattn__rows_to_half(ctx, src, column, pitch, dst, past * width, capacity * width,
                                    width, width, n, batch);
    const size_t f = sizeof(float);
    clattn_rect_copy rect = {.src_origin = {column * f, 0, 0},
                             .dst_origin = {0, past, 0},
                             .region = {width * f, n, batch},
                             .src_row_pitch = pitch * f,
                             .src_slice_pitch = n * pitch * f,
                             .dst_row_pitch = width * f,
                             .dst_slice_pitch = capacity * width * f};
    return clattn__copy_rect(ctx, src, dst, &rect, "appending keys and values to the cache");
}

/* Rotates the new queries (q_view, num_heads heads) and keys (k_view, num_kv_heads heads) of
 * the projection buffer in place. The keys' heads follow the queries' in every row, so when
 * both take the same positions one launch rotates them as num_heads + num_kv_heads heads. */
static clattn_status rotate_qk(clattn_mha *mha, const clattn_head_view *q_view,
                               const clattn_head_view *k_view, size_t batch, size_t n,
                               const clattn_rotary_spec *q_spec, const clattn_rotary_spec *k_spec)
{
    const clattn_mha_config *c = &mha->cfg;
    bool adjacent = k_view->mem == q_view->mem && k_view->sb == q_view->sb &&
                    k_view->sn == q_view->sn && k_view->sh == q_view->sh &&
                    k_view->offset == q_view->offset + c->num_heads * q_view->sh;
    if (adjacent && q_spec->pos0 == k_spec->pos0)
        return clattn__rotary_in_place(mha->ctx, q_view, batch, c->num_heads + c->num_kv_heads,
                                       n, q_spec);
    clattn_status status =
        clattn__rotary_in_place(mha->ctx, q_view, batch, c->num_heads, n, q_spec);
    if (status == CLATTN_OK)
        status = clattn__rotary_in_place(mha->ctx, k_view, batch, c->num_kv_heads, n, k_spec);
    return status;
}

/* With RoPE on a float cache whose queries and keys take the same positions, the rotations
 * and both appends of a step are one launch (clattn__rope_append, the same bytes): batch
 * sequences of n rows from proj row `first_row`, sequence b's cache rows from
 * (seq0 + b)·capacity + past. *done: whether it ran. */
static clattn_status rope_append_fused(clattn_mha *mha, const clattn_mha_io *io,
                                       const clattn_kv_cache *cache, cl_mem proj,
                                       size_t first_row, size_t batch, size_t n, size_t seq0,
                                       size_t past, const clattn_rotary_spec *q_spec,
                                       const clattn_rotary_spec *k_spec, bool *done)
{
    const clattn_mha_config *c = &mha->cfg;
    size_t kw = mha->k_width, vw = mha->vp_width, cap = cache->capacity;
    *done = io->rope && !cache->half && q_spec->pos0 == k_spec->pos0;
    if (!*done)
        return CLATTN_OK;
    clattn_rope_append_args a = {proj, first_row * mha->in_width, mha->in_width, batch, n,
                                 c->num_heads, c->num_kv_heads, c->head_dim_qk, c->head_dim_v,
                                 cache->k, cache->v, (seq0 * cap + past) * kw, cap * kw,
                                 (seq0 * cap + past) * vw, cap * vw};
    return clattn__rope_append(mha->ctx, &a, q_spec);
}

clattn_status clattn__mha_run_cached(clattn_mha *mha, const clattn_mha_io *io,
                                     const clattn_kv_cache *cache, size_t past)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, qk = mha->qk_width, kw = mha->k_width, vw = mha->vp_width;
    size_t P = mha->in_width, n = io->seq_q, rows = io->batch * n;
    cl_mem proj;
    clattn_status status;
    /* With RoPE the new queries and keys are rotated in the projection buffer at their
     * positions past .. past + n - 1 before the keys are cached: the cache holds rotated keys
     * (as transformers' models keep them), float or half alike, and no step rotates it again. */
    clattn_rotary_spec q_spec = io->rope_q, k_spec = io->rope_q;
    q_spec.pos0 += past;
    k_spec.pos0 = io->rope_key_pos0 + past;
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PROJECTIONS, rows * P * sizeof(float),
                                         &proj)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows, io->query, io->query_offset,
                                 E, &mha->in_all, mha->b_in, 0, CLATTN_ACT_NONE, proj, 0, P)) ||
        (status = norm_qk(mha, io, proj, rows)))
        return status;
    clattn_head_view q_view = {proj, 0, n * P, c->head_dim_qk, P};
    clattn_head_view k_view = {proj, qk, n * P, c->head_dim_qk, P};
    bool fused;
    if ((status = rope_append_fused(mha, io, cache, proj, 0, io->batch, n, 0, past, &q_spec,
                                    &k_spec, &fused)))
        return status;
    if (!fused &&
        ((io->rope &&
          (status = rotate_qk(mha, &q_view, &k_view, io->batch, n, &q_spec, &k_spec))) ||
         (status = append_rows(ctx, proj, qk, P, cache->k, cache->capacity, past, io->batch, n,
                               kw, cache->half)) ||
         (status = append_rows(ctx, proj, qk + kw, P, cache->v, cache->capacity, past,
                               io->batch, n, vw, cache->half))))
        return status;
    clattn_mha_io step = *io;
    step.seq_k = past + n;
    step.rope = false; /* rotated above */
    clattn_attention_problem p = problem_of(mha, &step);
    p.causal_shift = past;
    p.q = q_view;
    p.k = (clattn_head_view){cache->k, 0, cache->capacity * kw, c->head_dim_qk, kw};
    p.v = (clattn_head_view){cache->v, 0, cache->capacity * vw, c->head_dim_v, vw};
    p.kv_half = cache->half;
    return attend_and_project(mha, &step, &p);
}

/* Copies the n rows of `width` floats at column `column` of src [.., pitch] from row first_row
 * into rows past .. past + n - 1 of sequence `seq` of dst [seqs, capacity, width] (half floats
 * when `half`). */
static clattn_status append_seq_rows(clattn_context *ctx, cl_mem src, size_t column,
                                     size_t pitch, size_t first_row, cl_mem dst, size_t capacity,
                                     size_t seq, size_t past, size_t n, size_t width, bool half)
{
    size_t at = (seq * capacity + past) * width;
    if (half)
        return clattn__rows_to_half(ctx, src, first_row * pitch + column, pitch, dst, at,
                                    capacity * width, width, width, n, 1);
    const size_t f = sizeof(float);
    clattn_rect_copy rect = {.src_origin = {column * f, first_row, 0},
                             .dst_origin = {0, seq * capacity + past, 0},
                             .region = {width * f, n, 1},
                             .src_row_pitch = pitch * f,
                             .dst_row_pitch = width * f};
    return clattn__copy_rect(ctx, src, dst, &rect, "appending keys and values to the cache");
}

clattn_status clattn__mha_run_cached_seqs(clattn_mha *mha, const clattn_mha_io *io,
                                          const clattn_kv_cache *cache, const size_t *slot,
                                          const size_t *past, const size_t *pos)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t E = c->embed_dim, qk = mha->qk_width, kw = mha->k_width, vw = mha->vp_width;
    size_t hw = mha->v_width; /* the heads' outputs: h·d_v (vw: the values', h_kv·d_v) */
    size_t P = mha->in_width, n = io->seq_q, rows = io->batch * n, cap = cache->capacity;
    cl_mem proj, heads = io->out;
    size_t heads_offset = io->out_offset;
    clattn_status status;
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PROJECTIONS, rows * P * sizeof(float),
                                         &proj)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows, io->query, io->query_offset,
                                 E, &mha->in_all, mha->b_in, 0, CLATTN_ACT_NONE, proj, 0, P)) ||
        (status = norm_qk(mha, io, proj, rows)))
        return status;
    if (c->out_proj) {
        if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_HEADS, rows * hw * sizeof(float),
                                             &heads)))
            return status;
        heads_offset = 0;
    }
    for (size_t b = 0; b < io->batch && status == CLATTN_OK; b++) {
        clattn_head_view q_view = {proj, b * n * P, n * P, c->head_dim_qk, P};
        clattn_head_view k_view = {proj, b * n * P + qk, n * P, c->head_dim_qk, P};
        clattn_rotary_spec spec = io->rope_q;
        spec.pos0 = pos[b];
        bool fused;
        if ((status = rope_append_fused(mha, io, cache, proj, b * n, 1, n, slot[b], past[b],
                                        &spec, &spec, &fused)))
            break;
        if (!fused &&
            ((io->rope && (status = rotate_qk(mha, &q_view, &k_view, 1, n, &spec, &spec))) ||
             (status = append_seq_rows(ctx, proj, qk, P, b * n, cache->k, cap, slot[b], past[b],
                                       n, kw, cache->half)) ||
             (status = append_seq_rows(ctx, proj, qk + kw, P, b * n, cache->v, cap, slot[b],
                                       past[b], n, vw, cache->half))))
            break;
        clattn_mha_io step = *io;
        step.batch = 1;
        step.seq_k = past[b] + n;
        clattn_attention_problem p = problem_of(mha, &step);
        memset(&p.attn_mask, 0, sizeof(p.attn_mask));
        memset(&p.key_padding_mask, 0, sizeof(p.key_padding_mask));
        p.causal_shift = past[b];
        p.q = q_view;
        p.k = (clattn_head_view){cache->k, slot[b] * cap * kw, cap * kw, c->head_dim_qk, kw};
        p.v = (clattn_head_view){cache->v, slot[b] * cap * vw, cap * vw, c->head_dim_v, vw};
        p.kv_half = cache->half;
        p.out = (clattn_head_view){heads, heads_offset + b * n * hw, n * hw, p.dv, hw};
        status = clattn__attention(ctx, &p);
    }
    if (status != CLATTN_OK || !c->out_proj)
        return status;
    return clattn__linear(ctx, CLATTN_OP_OUT_PROJECTION, rows, heads, 0, hw, &mha->out_w,
                          mha->b_out, 0, CLATTN_ACT_NONE, io->out, io->out_offset, E);
}

clattn_status clattn__mha_project_kv(clattn_mha *mha, cl_mem x, size_t x_offset, size_t batch,
                                     size_t seq, cl_mem k, cl_mem v)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t rows = batch * seq, qk = mha->qk_width, kw = mha->k_width, vw = mha->vp_width;
    clattn_status status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows, x, x_offset, c->kdim,
                                          &mha->in_k, mha->b_in, qk, CLATTN_ACT_NONE, k, 0, kw);
    if (status != CLATTN_OK)
        return status;
    return clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows, x, x_offset, c->vdim, &mha->in_v,
                          mha->b_in, qk + kw, CLATTN_ACT_NONE, v, 0, vw);
}

clattn_status clattn__mha_run_projected(clattn_mha *mha, const clattn_mha_io *io, cl_mem k,
                                        cl_mem v)
{
    clattn_context *ctx = mha->ctx;
    const clattn_mha_config *c = &mha->cfg;
    size_t qk = mha->qk_width, kw = mha->k_width, vw = mha->vp_width;
    size_t rows = io->batch * io->seq_q;
    cl_mem proj;
    clattn_status status;
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PROJECTIONS, rows * qk * sizeof(float),
                                         &proj)) ||
        (status = clattn__linear(ctx, CLATTN_OP_IN_PROJECTION, rows, io->query, io->query_offset,
                                 c->embed_dim, &mha->in_q, mha->b_in, 0, CLATTN_ACT_NONE, proj, 0,
                                 qk)))
        return status;
    clattn_attention_problem p = problem_of(mha, io);
    p.q = (clattn_head_view){proj, 0, io->seq_q * qk, c->head_dim_qk, qk};
    p.k = (clattn_head_view){k, 0, io->seq_k * kw, c->head_dim_qk, kw};
    p.v = (clattn_head_view){v, 0, io->seq_k * vw, c->head_dim_v, vw};
    return attend_and_project(mha, io, &p);
}

clattn_status clattn_mha_forward(clattn_mha *mha, const clattn_tensor *query,
                                 const clattn_tensor *key, const clattn_tensor *value,
                                 clattn_tensor *out, const clattn_mha_forward_params *params)
{
    CLATTN_CHECK_ARG(NULL, fn_forward, mha, "mha is NULL");
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

    clattn_mha_io io;
    memset(&io, 0, sizeof(io));
    io.batch = s.batch;
    io.seq_q = s.seq_q;
    io.seq_k = s.seq_k;
    io.query = query->mem;
    io.query_offset = query->offset;
    if (!s.self) {
        io.key = key->mem;
        io.key_offset = key->offset;
        io.value = value->mem;
        io.value_offset = value->offset;
    }
    io.out = out->mem;
    io.out_offset = out->offset;
    io.causal = params->causal;
    io.path = params->path;
    size_t heads = mha->cfg.num_heads;
    if (params->attn_weights) {
        bool average = params->average_attn_weights != 0;
        io.weights_layout = average ? CLATTN_WEIGHTS_AVERAGED : CLATTN_WEIGHTS_PER_HEAD;
        io.weights = params->attn_weights->mem;
        io.weights_offset = params->attn_weights->offset;
        status = average ? clattn__weights_output(ctx, fn_forward, params->attn_weights, 3,
                                                  (size_t[]){s.batch, s.seq_q, s.seq_k},
                                                  "[B, Nq, Nk]", params->path)
                         : clattn__weights_output(ctx, fn_forward, params->attn_weights, 4,
                                                  (size_t[]){s.batch, heads, s.seq_q, s.seq_k},
                                                  "[B, h, Nq, Nk]", params->path);
        if (status != CLATTN_OK)
            return status;
    }
    if ((status = clattn__attn_mask_view(ctx, fn_forward, params->attn_mask,
                                         params->attn_mask_kind, CLATTN_MASK_3D_BATCH_X_HEADS,
                                         s.batch, heads, s.seq_q, s.seq_k, &io.attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn_forward, params->key_padding_mask,
                                           params->key_padding_mask_kind, s.batch, s.seq_k,
                                           &io.key_padding_mask)))
        return status;
    clattn_mods_request mods = {params->alibi_slopes, params->relative_bias,
                                params->relative_max_distance, params->window, params->softcap};
    if ((status = clattn__score_mods_of(ctx, fn_forward, &mods, heads, &io.mods)))
        return status;
    if (params->rope) {
        if ((status = clattn__rope_spec_of(ctx, fn_forward, params->rope, mha->cfg.head_dim_qk,
                                           &io.rope_q)))
            return status;
        io.rope = true;
        io.rope_key_pos0 = params->rope->key_offset;
    }
    return clattn__mha_run(mha, &io);
}
