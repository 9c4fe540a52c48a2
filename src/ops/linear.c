/* A linear layer: the GEMM (or the quantised kernels), then whatever of bias and activation
 * it did not fuse. */
#include "linear.h"
#include "elementwise.h"

clattn_status clattn__linear(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                             size_t x_offset, size_t ldx, clattn_gemm_weight *w, cl_mem bias,
                             size_t bias_offset, int act, cl_mem y, size_t y_offset, size_t ldy)
{
    clattn_gemm_left left = {bias != NULL, act}; /* what the quantised kernels leave */
    clattn_status status =
        w->quant ? clattn__qlinear(ctx, w->quant->prog, op, m, x, x_offset, ldx, &w->quant->w, y,
                                   y_offset, ldy)
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
        w->quant ? clattn__qlinear(ctx, w->quant->prog, op, m, x, x_offset, ldx, &w->quant->w, y,
                                   y_offset, ldy)
                 : clattn__gemm_weighted(ctx, op, m, x, x_offset, ldx, w, bias, bias_offset,
                                         CLATTN_ACT_NONE, y, y_offset, ldy, &left);
    *bias_left = status == CLATTN_OK && bias && left.bias;
    return status;
}
