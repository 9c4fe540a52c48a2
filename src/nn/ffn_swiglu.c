/* The gated feed-forward block with SwiGLU fused into the quantised gate|up layer. */
#include "ffn_swiglu.h"

#include "base/constants.h"
#include "ops/linear.h"
#include "ops/qlinear.h"

/* Gated, SiLU, linear1 kept quantised (in one buffer or split) and no linear1 bias. */
static bool quantised_swiglu(const clattn_ffn *ffn, int act)
{
    return ffn->gated && act == CLATTN_ACT_SILU && ffn->lin1.quant && !ffn->b1;
}

bool clattn__ffn_swiglu_fuses(const clattn_ffn *ffn, size_t ff, int act)
{
    /* The whole gate|up weight in one buffer (a weight split over several by rows holds only
     * its first rows in lin1.quant->w). */
    return quantised_swiglu(ffn, act) && ffn->lin1.quant->w.n == 2 * ff &&
           ffn->lin1.quant->w.k == ffn->lin1.k;
}

/* A quantised gate|up layer split over buffers: the layer into hidden [rows, 2·d_ff], the fused
 * kernels' SwiGLU after it (clattn__qlinear_glu: the same bytes as fused), then linear2 on the
 * gate half; row blocks as clattn__ffn_forward's. */
static clattn_status forward_split(clattn_context *ctx, clattn_ffn *ffn, size_t tokens, size_t d,
                                   size_t ff, cl_mem input, cl_mem hidden, cl_mem out)
{
    size_t chunk = clattn__ffn_chunk_rows(tokens, ff, true);
    clattn_status status = CLATTN_OK;
    for (size_t r0 = 0; r0 < tokens && status == CLATTN_OK; r0 += chunk) {
        size_t rows = tokens - r0 < chunk ? tokens - r0 : chunk;
        status = clattn__linear(ctx, CLATTN_OP_FEED_FORWARD, rows, input, r0 * d, d, &ffn->lin1,
                                NULL, 0, CLATTN_ACT_NONE, hidden, 0, 2 * ff);
        if (status == CLATTN_OK)
            status = clattn__qlinear_glu(ctx, ffn->lin1.quant->prog, hidden, rows, ff);
        if (status == CLATTN_OK)
            status = clattn__linear(ctx, CLATTN_OP_FEED_FORWARD, rows, hidden, 0, 2 * ff,
                                    &ffn->lin2, NULL, 0, CLATTN_ACT_NONE, out, r0 * d, d);
    }
    return status;
}

clattn_status clattn__ffn_forward_swiglu(clattn_context *ctx, clattn_ffn *ffn, size_t tokens,
                                         size_t d, size_t ff, int act, cl_mem input, cl_mem hidden,
                                         cl_mem out)
{
    if (!quantised_swiglu(ffn, act))
        return clattn__ffn_forward(ctx, ffn, tokens, d, ff, act, input, hidden, out);
    if (!clattn__ffn_swiglu_fuses(ffn, ff, act))
        return forward_split(ctx, ffn, tokens, d, ff, input, hidden, out);
    /* hidden [rows, d_ff] = silu(gate)·up, then linear2 on it; row blocks as the unfused
     * block's (hidden holds them: it has room for [rows, 2·d_ff]). */
    const clattn_gemm_quant *q = ffn->lin1.quant;
    size_t chunk = clattn__ffn_chunk_rows(tokens, ff, true);
    clattn_status status = CLATTN_OK;
    for (size_t r0 = 0; r0 < tokens && status == CLATTN_OK; r0 += chunk) {
        size_t rows = tokens - r0 < chunk ? tokens - r0 : chunk;
        status = clattn__qlinear_swiglu(ctx, q->prog, CLATTN_OP_FEED_FORWARD, rows, input, r0 * d,
                                        d, &q->w, hidden, 0, ff);
        if (status == CLATTN_OK)
            status = clattn__linear(ctx, CLATTN_OP_FEED_FORWARD, rows, hidden, 0, ff, &ffn->lin2,
                                    NULL, 0, CLATTN_ACT_NONE, out, r0 * d, d);
    }
    return status;
}
