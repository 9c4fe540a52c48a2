/* Small element-wise kernels around the GEMMs: bias and activation. */
#include "internal.h"

clattn_status clattn__bias_act(clattn_context *ctx, cl_mem y, size_t y_offset, size_t ld,
                               size_t rows, size_t cols, cl_mem bias, size_t bias_offset,
                               clattn_activation_kind act)
{
    if (!bias && act == CLATTN_ACT_NONE)
        return CLATTN_OK;
    cl_ulong off = y_offset, ldu = ld, b_off = bias_offset;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_int a = act;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_BIAS_ACT], 0, CL_SUCCESS};
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, off);
    CLATTN_ARG(&args, ldu);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, c);
    if (bias)
        CLATTN_ARG(&args, bias);
    else
        clattn__arg_null(&args);
    CLATTN_ARG(&args, b_off);
    CLATTN_ARG(&args, a);
    size_t global[2] = {cols, rows};
    return clattn__launch(ctx, &args, "bias_act", 2, global, NULL, CLATTN_OP_OTHER, 0);
}
