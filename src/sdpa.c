/* clattn_sdpa: scaled dot-product attention on [B, H, N, d] tensors. */
#include "attention_core.h"

#include <math.h>
#include <string.h>

static const char fn[] = "clattn_sdpa";

void clattn_sdpa_params_default(clattn_sdpa_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->attn_mask_kind = CLATTN_MASK_BOOL;
    params->key_padding_mask_kind = CLATTN_MASK_BOOL;
    params->path = CLATTN_PATH_AUTO;
}

clattn_status clattn__head_view_of(clattn_context *ctx, const char *function, const char *name,
                                   const clattn_tensor *t, clattn_head_view *view)
{
    CLATTN_CHECK_ARG(ctx, t, "%s: invalid argument: %s is NULL", function, name);
    CLATTN_CHECK_ARG(ctx, t->ctx == ctx, "%s: invalid argument: %s belongs to another context",
                     function, name);
    if (t->ndim != 4) {
        char got[96];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: %s has shape %s but must be 4-D [B, H, N, d]", function, name, got);
    }
    CLATTN_CHECK_ARG(ctx, t->strides[3] == 1 || t->shape[3] == 1,
                     "%s: invalid argument: the last dimension of %s must be contiguous (stride "
                     "1, not %zu)",
                     function, name, t->strides[3]);
    view->mem = t->mem;
    view->offset = t->offset;
    view->sb = t->strides[0];
    view->sh = t->strides[1];
    view->sn = t->strides[2];
    return CLATTN_OK;
}

clattn_status clattn__weights_output(clattn_context *ctx, const char *function,
                                     clattn_tensor *weights, int ndim, const size_t *want,
                                     const char *meaning, clattn_attention_path path)
{
    if (!weights)
        return CLATTN_OK;
    if (path == CLATTN_PATH_FUSED)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: the fused path cannot return attention weights; use "
                            "CLATTN_PATH_AUTO or CLATTN_PATH_UNFUSED",
                            function);
    CLATTN_CHECK_ARG(ctx, weights->ctx == ctx,
                     "%s: invalid argument: attn_weights belongs to another context", function);
    clattn_status status =
        clattn__expect_shape(ctx, function, "attn_weights", weights, ndim, want, meaning);
    if (status != CLATTN_OK)
        return status;
    if (!clattn_tensor_is_contiguous(weights))
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: attn_weights must be a contiguous tensor", function);
    return CLATTN_OK;
}

clattn_status clattn_sdpa(clattn_context *ctx, const clattn_tensor *q, const clattn_tensor *k,
                          const clattn_tensor *v, clattn_tensor *out,
                          const clattn_sdpa_params *params)
{
    CLATTN_CHECK_ARG(NULL, ctx, "%s: invalid argument: ctx is NULL", fn);
    clattn_sdpa_params defaults;
    if (!params) {
        clattn_sdpa_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "%s: invalid argument: params->reserved is not zero (initialise params with "
                     "clattn_sdpa_params_default)",
                     fn);
    CLATTN_CHECK_ARG(ctx, params->path >= CLATTN_PATH_AUTO && params->path <= CLATTN_PATH_FUSED,
                     "%s: invalid argument: params->path is %d", fn, (int)params->path);
    CLATTN_CHECK_ARG(ctx, isfinite(params->scale),
                     "%s: invalid argument: params->scale is not finite", fn);

    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    clattn_status status;
    if ((status = clattn__head_view_of(ctx, fn, "q", q, &p.q)) ||
        (status = clattn__head_view_of(ctx, fn, "k", k, &p.k)) ||
        (status = clattn__head_view_of(ctx, fn, "v", v, &p.v)) ||
        (status = clattn__head_view_of(ctx, fn, "out", out, &p.out)))
        return status;

    p.batch = q->shape[0];
    p.heads = q->shape[1];
    p.seq_q = q->shape[2];
    p.dk = q->shape[3];
    p.seq_k = k->shape[2];
    p.dv = v->shape[3];
    if ((status = clattn__expect_shape(ctx, fn, "k", k, 4,
                                       (size_t[]){p.batch, p.heads, p.seq_k, p.dk},
                                       "[B, H, Nk, d_k]")) ||
        (status = clattn__expect_shape(ctx, fn, "v", v, 4,
                                       (size_t[]){p.batch, p.heads, p.seq_k, p.dv},
                                       "[B, H, Nk, d_v]")) ||
        (status = clattn__expect_shape(ctx, fn, "out", out, 4,
                                       (size_t[]){p.batch, p.heads, p.seq_q, p.dv},
                                       "[B, H, Nq, d_v]")))
        return status;

    if ((status = clattn__attn_mask_view(ctx, fn, params->attn_mask, params->attn_mask_kind,
                                         CLATTN_MASK_3D_BATCH, p.batch, p.heads, p.seq_q, p.seq_k,
                                         &p.attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn, params->key_padding_mask,
                                           params->key_padding_mask_kind, p.batch, p.seq_k,
                                           &p.key_padding_mask)) ||
        (status = clattn__weights_output(ctx, fn, params->attn_weights, 4,
                                         (size_t[]){p.batch, p.heads, p.seq_q, p.seq_k},
                                         "[B, H, Nq, Nk]", params->path)))
        return status;

    p.scale = params->scale != 0.0f ? params->scale : (float)(1.0 / sqrt((double)p.dk));
    p.causal = params->causal;
    p.path = params->path;
    if (params->attn_weights) {
        p.weights_layout = CLATTN_WEIGHTS_PER_HEAD;
        p.weights = params->attn_weights->mem;
        p.weights_offset = params->attn_weights->offset;
    }
    return clattn__attention(ctx, &p);
}
