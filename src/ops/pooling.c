/* Pooling token states into one vector per sequence (mean over real tokens, or [CLS]), and L2
 * normalisation: sentence-transformers' Pooling and Normalize modules. */
#include "pooling.h"
#include "runtime/launch.h"
#include "runtime/shape.h"
#include "runtime/tensor_internal.h"

#include <stdint.h>

clattn_status clattn__pool(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem pad,
                           size_t pad_offset, size_t batch, size_t seq, size_t d,
                           clattn_pooling pooling, int normalize, cl_mem out, size_t out_offset)
{
    cl_ulong x_off = x_offset, pad_off = pad_offset, out_off = out_offset;
    cl_uint b = (cl_uint)batch, n = (cl_uint)seq, width = (cl_uint)d;
    size_t global[2] = {d, batch};
    clattn_status status;
    if (pooling == CLATTN_POOLING_MEAN) {
        clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_POOL_MEAN);
        CLATTN_ARG(&args, x);
        CLATTN_ARG(&args, x_off);
        clattn__arg_mem(&args, pad);
        CLATTN_ARG(&args, pad_off);
        CLATTN_ARG(&args, b);
        CLATTN_ARG(&args, n);
        CLATTN_ARG(&args, width);
        CLATTN_ARG(&args, out);
        CLATTN_ARG(&args, out_off);
        status = clattn__launch(ctx, &args, "pool_mean", 2, global, NULL, CLATTN_OP_OTHER, 0);
    } else {
        clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_POOL_CLS);
        CLATTN_ARG(&args, x);
        CLATTN_ARG(&args, x_off);
        CLATTN_ARG(&args, b);
        CLATTN_ARG(&args, n);
        CLATTN_ARG(&args, width);
        CLATTN_ARG(&args, out);
        CLATTN_ARG(&args, out_off);
        status = clattn__launch(ctx, &args, "pool_cls", 2, global, NULL, CLATTN_OP_OTHER, 0);
    }
    if (status != CLATTN_OK || !normalize)
        return status;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_L2_NORMALIZE);
    CLATTN_ARG(&args, out);
    CLATTN_ARG(&args, out_off);
    CLATTN_ARG(&args, b);
    CLATTN_ARG(&args, width);
    size_t wg = clattn__reduce_wg(ctx), rows = batch * wg;
    return clattn__launch(ctx, &args, "l2_normalize", 1, &rows, &wg, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__padding_from_lengths(clattn_context *ctx, cl_mem lengths, size_t batch,
                                           size_t seq, cl_mem pad, size_t pad_offset)
{
    cl_ulong pad_off = pad_offset;
    cl_uint b = (cl_uint)batch, n = (cl_uint)seq;
    size_t global[2] = {seq, batch};
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_PADDING_FROM_LENGTHS);
    CLATTN_ARG(&args, lengths);
    CLATTN_ARG(&args, b);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, pad);
    CLATTN_ARG(&args, pad_off);
    return clattn__launch(ctx, &args, "padding_from_lengths", 2, global, NULL, CLATTN_OP_OTHER,
                          0);
}

/* Checks a contiguous tensor of this context. */
static clattn_status check_tensor(clattn_context *ctx, const char *fn, const char *name,
                                  const clattn_tensor *t)
{
    CLATTN_CHECK_ARG(ctx, fn, t, "%s is NULL", name);
    CLATTN_CHECK_ARG(ctx, fn, t->ctx == ctx, "%s belongs to another context", name);
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(t), "%s must be contiguous", name);
    return CLATTN_OK;
}

clattn_status clattn_pool(clattn_context *ctx, const clattn_tensor *x,
                          const clattn_tensor *padding_mask, clattn_pooling pooling,
                          int normalize, clattn_tensor *out)
{
    static const char fn[] = "clattn_pool";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    clattn_status status = check_tensor(ctx, fn, "x", x);
    if (status != CLATTN_OK || (status = check_tensor(ctx, fn, "out", out)))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, pooling == CLATTN_POOLING_MEAN || pooling == CLATTN_POOLING_CLS,
                     "pooling is %d", (int)pooling);
    if (x->ndim != 3) {
        char got[96];
        clattn__format_shape(got, sizeof(got), x->ndim, x->shape);
        return clattn__fail(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                            "%s: x has shape %s but must be [B, N, d]", fn, got);
    }
    size_t B = x->shape[0], N = x->shape[1], d = x->shape[2];
    CLATTN_CHECK_ARG(ctx, fn, B <= UINT32_MAX && N <= UINT32_MAX && d <= UINT32_MAX,
                     "x's dimensions exceed the kernels' 32-bit range");
    if ((status = clattn__expect_shape(ctx, fn, "out", out->ndim, out->shape, 2,
                                       (size_t[]){B, d}, "[B, d]")))
        return status;
    if (padding_mask &&
        ((status = check_tensor(ctx, fn, "padding_mask", padding_mask)) ||
         (status = clattn__expect_shape(ctx, fn, "padding_mask", padding_mask->ndim,
                                        padding_mask->shape, 2, (size_t[]){B, N}, "[B, N]"))))
        return status;
    CLATTN_CHECK_ARG(ctx, fn, out->mem != x->mem, "out must not share x's buffer");
    return clattn__pool(ctx, x->mem, x->offset, padding_mask ? padding_mask->mem : NULL,
                        padding_mask ? padding_mask->offset : 0, B, N, d, pooling, normalize != 0,
                        out->mem, out->offset);
}
