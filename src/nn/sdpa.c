/* clattn_sdpa: scaled dot-product attention on [B, H, N, d] tensors. */
#include "clattn/attention.h"
#include "ops/attention_problem.h"
#include "ops/rotary.h"
#include "runtime/buffers.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

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

void clattn_rope_params_default(clattn_rope_params *params)
{
    if (params)
        memset(params, 0, sizeof(*params));
}

clattn_status clattn_alibi_slopes(size_t num_heads, float *slopes)
{
    CLATTN_CHECK_ARG(NULL, "clattn_alibi_slopes", slopes, "slopes is NULL");
    CLATTN_CHECK_ARG(NULL, "clattn_alibi_slopes", num_heads > 0, "num_heads is 0");
    size_t p = 1;
    while (p * 2 <= num_heads)
        p *= 2;
    for (size_t k = 0; k < p && k < num_heads; k++)
        slopes[k] = (float)exp2(-8.0 * (double)(k + 1) / (double)p);
    for (size_t k = 0; p + k < num_heads; k++)
        slopes[p + k] = (float)exp2(-4.0 * (double)(2 * k + 1) / (double)p);
    return CLATTN_OK;
}

clattn_status clattn_sdpa(clattn_context *ctx, const clattn_tensor *q, const clattn_tensor *k,
                          const clattn_tensor *v, clattn_tensor *out,
                          const clattn_sdpa_params *params)
{
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    clattn_sdpa_params defaults;
    if (!params) {
        clattn_sdpa_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_sdpa_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, params->path >= CLATTN_PATH_AUTO && params->path <= CLATTN_PATH_FUSED,
                     "params->path is %d", (int)params->path);
    CLATTN_CHECK_ARG(ctx, fn, isfinite(params->scale),
                     "params->scale is not finite");

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
    /* Grouped-query attention: keys and values with fewer heads, each shared by a group. */
    p.kv_heads = params->enable_gqa ? k->shape[1] : p.heads;
    if (params->enable_gqa && (p.kv_heads == 0 || p.heads % p.kv_heads != 0))
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: k has %zu heads, which do not divide q's %zu (enable_gqa)", fn,
                            p.kv_heads, p.heads);
    if ((status = clattn__expect_shape(ctx, fn, "k", k->ndim, k->shape, 4,
                                       (size_t[]){p.batch, p.kv_heads, p.seq_k, p.dk},
                                       params->enable_gqa ? "[B, H_kv, Nk, d_k]"
                                                          : "[B, H, Nk, d_k]")) ||
        (status = clattn__expect_shape(ctx, fn, "v", v->ndim, v->shape, 4,
                                       (size_t[]){p.batch, p.kv_heads, p.seq_k, p.dv},
                                       params->enable_gqa ? "[B, H_kv, Nk, d_v]"
                                                          : "[B, H, Nk, d_v]")) ||
        (status = clattn__expect_shape(ctx, fn, "out", out->ndim, out->shape, 4,
                                       (size_t[]){p.batch, p.heads, p.seq_q, p.dv},
                                       "[B, H, Nq, d_v]")))
        return status;

    if ((status = clattn__attn_mask_view(ctx, fn, params->attn_mask, params->attn_mask_kind,
                                         CLATTN_MASK_3D_HEADS, p.batch, p.heads, p.seq_q, p.seq_k,
                                         &p.attn_mask)) ||
        (status = clattn__key_padding_view(ctx, fn, params->key_padding_mask,
                                           params->key_padding_mask_kind, p.batch, p.seq_k,
                                           &p.key_padding_mask)) ||
        (status = clattn__weights_output(ctx, fn, params->attn_weights, 4,
                                         (size_t[]){p.batch, p.heads, p.seq_q, p.seq_k},
                                         "[B, H, Nq, Nk]", params->path)))
        return status;

    clattn_mods_request mods = {params->alibi_slopes, params->relative_bias,
                                params->relative_max_distance, params->window, params->softcap};
    if ((status = clattn__score_mods_of(ctx, fn, &mods, p.heads, &p.mods)))
        return status;
    clattn_rotary_spec rope;
    if (params->rope && (status = clattn__rope_spec_of(ctx, fn, params->rope, p.dk, &rope)))
        return status;

    p.scale = params->scale != 0.0f ? params->scale : (float)(1.0 / sqrt((double)p.dk));
    p.causal = params->causal;
    p.path = params->path;
    if (params->attn_weights) {
        p.weights_layout = CLATTN_WEIGHTS_PER_HEAD;
        p.weights = params->attn_weights->mem;
        p.weights_offset = params->attn_weights->offset;
    }
    if (params->rope && (status = clattn__rope_qk(ctx, &p, &rope, params->rope->key_offset)))
        return status;
    return clattn__attention(ctx, &p);
}
