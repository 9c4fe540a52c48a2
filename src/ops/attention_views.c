/* Checking the tensors given to the attention calls and mapping them onto the kernels' views:
 * masks (broadcast strides), head views, the attention-weights output. */
#include "attention_problem.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static int kernel_kind(clattn_mask_kind kind)
{
    return kind == CLATTN_MASK_BOOL ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE;
}

static clattn_status check_mask_tensor(clattn_context *ctx, const char *function, const char *name,
                                       const clattn_tensor *mask, clattn_mask_kind kind)
{
    CLATTN_CHECK_ARG(ctx, function, kind == CLATTN_MASK_BOOL || kind == CLATTN_MASK_ADDITIVE,
                     "%s kind is %d, not a clattn_mask_kind", name,
                     (int)kind);
    CLATTN_CHECK_ARG(ctx, function, mask->ctx == ctx,
                     "%s belongs to another context", name);
    return CLATTN_OK;
}

/* The mask's stride for a dimension that must have size `want` (or 1 to broadcast); -1 when the
 * size does not fit. */
static long long broadcast_stride(const clattn_tensor *mask, int axis, size_t want)
{
    if (mask->shape[axis] == want)
        return want == 1 ? 0 : (long long)mask->strides[axis];
    return mask->shape[axis] == 1 ? 0 : -1;
}

clattn_status clattn__attn_mask_view(clattn_context *ctx, const char *function,
                                     const clattn_tensor *mask, clattn_mask_kind kind,
                                     clattn_mask_3d layout_3d, size_t batch, size_t heads,
                                     size_t seq_q, size_t seq_k, clattn_mask_view *view)
{
    memset(view, 0, sizeof(*view));
    if (!mask)
        return CLATTN_OK;
    clattn_status status = check_mask_tensor(ctx, function, "attn_mask", mask, kind);
    if (status != CLATTN_OK)
        return status;

    /* The shape the mask must match, one entry per mask dimension. */
    size_t want[4];
    const char *forms;
    long long strides[4] = {0, 0, 0, 0}; /* b, h, i, j */
    bool fits = true;
    int nd = mask->ndim;
    if (nd == 2) {
        want[0] = seq_q, want[1] = seq_k;
        strides[2] = broadcast_stride(mask, 0, seq_q);
        strides[3] = broadcast_stride(mask, 1, seq_k);
    } else if (nd == 3 && layout_3d == CLATTN_MASK_3D_HEADS) {
        want[0] = heads, want[1] = seq_q, want[2] = seq_k;
        strides[1] = broadcast_stride(mask, 0, heads);
        strides[2] = broadcast_stride(mask, 1, seq_q);
        strides[3] = broadcast_stride(mask, 2, seq_k);
    } else if (nd == 3) {
        want[0] = batch * heads, want[1] = seq_q, want[2] = seq_k;
        long long s0 = broadcast_stride(mask, 0, batch * heads);
        strides[0] = s0 < 0 ? -1 : s0 * (long long)heads;
        strides[1] = s0;
        strides[2] = broadcast_stride(mask, 1, seq_q);
        strides[3] = broadcast_stride(mask, 2, seq_k);
    } else if (nd == 4) {
        want[0] = batch, want[1] = heads, want[2] = seq_q, want[3] = seq_k;
        for (int d = 0; d < 4; d++)
            strides[d] = broadcast_stride(mask, d, want[d]);
    } else {
        fits = false;
        want[0] = seq_q, want[1] = seq_k;
        nd = 2;
    }
    for (int d = 0; d < 4; d++)
        fits = fits && strides[d] >= 0;
    if (!fits) {
        char got[96], need[96];
        clattn__format_shape(got, sizeof(got), mask->ndim, mask->shape);
        clattn__format_shape(need, sizeof(need), nd, want);
        forms = layout_3d == CLATTN_MASK_3D_HEADS ? "[Nq, Nk], [H, Nq, Nk] or [B, H, Nq, Nk]"
                                                  : "[Nq, Nk], [B*H, Nq, Nk] or [B, H, Nq, Nk]";
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: attn_mask has shape %s but must be %s (forms %s; size-1 "
                            "dimensions broadcast)",
                            function, got, need, forms);
    }
    view->mem = mask->mem;
    view->offset = mask->offset;
    view->sb = (size_t)strides[0];
    view->sh = (size_t)strides[1];
    view->si = (size_t)strides[2];
    view->sj = (size_t)strides[3];
    view->kind = kernel_kind(kind);
    return CLATTN_OK;
}

clattn_status clattn__key_padding_view(clattn_context *ctx, const char *function,
                                       const clattn_tensor *mask, clattn_mask_kind kind,
                                       size_t batch, size_t seq_k, clattn_mask_view *view)
{
    memset(view, 0, sizeof(*view));
    if (!mask)
        return CLATTN_OK;
    clattn_status status = check_mask_tensor(ctx, function, "key_padding_mask", mask, kind);
    if (status != CLATTN_OK)
        return status;
    long long sb = mask->ndim == 2 ? broadcast_stride(mask, 0, batch) : -1;
    long long sj = mask->ndim == 2 ? broadcast_stride(mask, 1, seq_k) : -1;
    if (sb < 0 || sj < 0) {
        char got[96], need[96];
        clattn__format_shape(got, sizeof(got), mask->ndim, mask->shape);
        clattn__format_shape(need, sizeof(need), 2, (size_t[]){batch, seq_k});
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: key_padding_mask has shape %s but must be [B, Nk] = %s", function,
                            got, need);
    }
    view->mem = mask->mem;
    view->offset = mask->offset;
    view->sb = (size_t)sb;
    view->sj = (size_t)sj;
    view->kind = kernel_kind(kind);
    return CLATTN_OK;
}

clattn_status clattn__head_view_of(clattn_context *ctx, const char *function, const char *name,
                                   const clattn_tensor *t, clattn_head_view *view)
{
    CLATTN_CHECK_ARG(ctx, function, t, "%s is NULL", name);
    CLATTN_CHECK_ARG(ctx, function, t->ctx == ctx, "%s belongs to another context", name);
    if (t->ndim != 4) {
        char got[96];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: %s has shape %s but must be 4-D [B, H, N, d]", function, name, got);
    }
    CLATTN_CHECK_ARG(ctx, function, t->strides[3] == 1 || t->shape[3] == 1,
                     "the last dimension of %s must be contiguous (stride "
                     "1, not %zu)", name, t->strides[3]);
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
    CLATTN_CHECK_ARG(ctx, function, weights->ctx == ctx,
                     "attn_weights belongs to another context");
    clattn_status status =
        clattn__expect_shape(ctx, function, "attn_weights", weights->ndim, weights->shape, ndim, want, meaning);
    if (status != CLATTN_OK)
        return status;
    if (!clattn_tensor_is_contiguous(weights))
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: attn_weights must be a contiguous tensor", function);
    return CLATTN_OK;
}

/* A modifier tensor: same context, row-major contiguous. */
static clattn_status check_mod_tensor(clattn_context *ctx, const char *function, const char *name,
                                      const clattn_tensor *t)
{
    CLATTN_CHECK_ARG(ctx, function, t->ctx == ctx, "%s belongs to another context", name);
    size_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        CLATTN_CHECK_ARG(ctx, function, t->shape[d] == 1 || t->strides[d] == stride,
                         "%s is not contiguous (dimension %d has stride %zu, not %zu)", name, d,
                         t->strides[d], stride);
        stride *= t->shape[d];
    }
    return CLATTN_OK;
}

clattn_status clattn__score_mods_of(clattn_context *ctx, const char *function,
                                    const clattn_mods_request *r, size_t heads,
                                    clattn_score_mods *mods)
{
    memset(mods, 0, sizeof(*mods));
    clattn_status status;
    CLATTN_CHECK_ARG(ctx, function, isfinite(r->softcap) && r->softcap >= 0.0f,
                     "softcap is %g: it must be a finite c > 0 (0 for none)", (double)r->softcap);
    CLATTN_CHECK_ARG(ctx, function, r->window % 2 == 0,
                     "window is %zu: it must be even (query i sees keys |i - j| <= window / 2; "
                     "0 for none)", r->window);
    if (r->softcap > 0.0f) {
        mods->flags |= CLATTN_MOD_SOFTCAP;
        mods->softcap = r->softcap;
    }
    if (r->window) {
        mods->flags |= CLATTN_MOD_WINDOW;
        mods->window = r->window; /* bounded by the distances there are in clattn__mod_args */
    }
    if (r->alibi_slopes) {
        const clattn_tensor *t = r->alibi_slopes;
        if ((status = check_mod_tensor(ctx, function, "alibi_slopes", t)) ||
            (status = clattn__expect_shape(ctx, function, "alibi_slopes", t->ndim, t->shape, 1,
                                           (size_t[]){heads}, "[H]")))
            return status;
        mods->flags |= CLATTN_MOD_ALIBI;
        mods->alibi = t->mem;
        mods->alibi_offset = t->offset;
    }
    if (r->relative_bias) {
        const clattn_tensor *t = r->relative_bias;
        if ((status = check_mod_tensor(ctx, function, "relative_bias", t)))
            return status;
        size_t buckets = t->ndim == 2 ? t->shape[0] : 0;
        if ((status = clattn__expect_shape(ctx, function, "relative_bias", t->ndim, t->shape, 2,
                                           (size_t[]){buckets, heads}, "[num_buckets, H]")))
            return status;
        size_t max_distance = r->relative_max_distance ? r->relative_max_distance : 128;
        CLATTN_CHECK_ARG(ctx, function, buckets >= 4 && buckets <= UINT32_MAX,
                         "relative_bias has %zu buckets: at least 4 are needed", buckets);
        size_t max_exact = buckets / 4;
        CLATTN_CHECK_ARG(ctx, function, max_distance > max_exact,
                         "relative_max_distance is %zu: it must exceed num_buckets / 4 = %zu",
                         max_distance, max_exact);
        mods->flags |= CLATTN_MOD_RELPOS;
        mods->rel = t->mem;
        mods->rel_offset = t->offset;
        mods->rel_buckets = buckets;
        /* PyTorch: math.log(max_distance / max_exact) in double, used as a float32 divisor */
        mods->rel_log_ratio = (float)log((double)max_distance / (double)max_exact);
    }
    return CLATTN_OK;
}
