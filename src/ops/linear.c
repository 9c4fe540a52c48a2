/* A linear layer: the GEMM (or the quantised kernels), then whatever of bias and activation
 * it did not fuse. */
#include "linear.h"
#include "elementwise.h"

size_t clattn__gemm_quant_rows(const clattn_gemm_quant *q, size_t k)
{
    size_t rows = 0;
    for (; q; q = q->next) {
        if (q->w.k != k)
            return 0;
        rows += q->w.n;
    }
    return rows;
}

/* y = x·Wᵀ for a weight kept quantised, part by part of its chain: each part's rows are the
 * next columns of y (same ldy), so y is the unsplit weight's bytes. */
static clattn_status quant_linear(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                                  size_t x_offset, size_t ldx, const clattn_gemm_quant *q,
                                  cl_mem y, size_t y_offset, size_t ldy)
{
    clattn_status status = CLATTN_OK;
    for (size_t first = 0; q && status == CLATTN_OK; first += q->w.n, q = q->next)
        status = clattn__qlinear(ctx, q->prog, op, m, x, x_offset, ldx, &q->w, y,
                                 y_offset + first, ldy);
    return status;
}

clattn_status clattn__linear(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                             size_t x_offset, size_t ldx, clattn_gemm_weight *w, cl_mem bias,
                             size_t bias_offset, int act, cl_mem y, size_t y_offset, size_t ldy)
{
    clattn_gemm_left left = {bias != NULL, act}; /* what the quantised kernels leave */
    clattn_status status =
        w->quant ? quant_linear(ctx, op, m, x, x_offset, ldx, w->quant, y, y_offset, ldy)
                 : clattn__gemm_weighted(ctx, op, m, x, x_offset, ldx, w, bias, bias_offset, act,
                                         y, y_offset, ldy, &left);
    if (status != CLATTN_OK || (!left.bias && left.act == CLATTN_ACT_NONE))
        return status;
    return clattn__bias_act(ctx, y, y_offset, ldy, m, w->n, left.bias ? bias : NULL, bias_offset,
                            left.act);
}

clattn_status clattn__linear_bias_left(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                                       size_t x_offset, size_t ldx, clattn_gemm_weight *w,
                                       cl_mem bias, size_t bias_offset, cl_mem y,
                                       size_t y_offset, size_t ldy, bool *bias_left)
{
    clattn_gemm_left left = {true, CLATTN_ACT_NONE}; /* what the quantised kernels leave */
    clattn_status status =
        w->quant ? quant_linear(ctx, op, m, x, x_offset, ldx, w->quant, y, y_offset, ldy)
                 : clattn__gemm_weighted(ctx, op, m, x, x_offset, ldx, w, bias, bias_offset,
                                         CLATTN_ACT_NONE, y, y_offset, ldy, &left);
    *bias_left = status == CLATTN_OK && bias && left.bias;
    return status;
}
