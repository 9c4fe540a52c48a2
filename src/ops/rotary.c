/* Rotary position embeddings: one kernel per operand, reading a head view and writing a
 * contiguous rotated copy; the cosines and sines come from the context's table. */
#include "rotary.h"
#include "runtime/context_internal.h"
#include "runtime/rotary_table.h"

#include <stdint.h>

clattn_status clattn__rotary(clattn_context *ctx, const clattn_head_view *x, size_t batch,
                             size_t heads, size_t n, size_t d, const clattn_rotary_spec *spec,
                             cl_mem out, size_t out_offset, clattn_head_view *rotated)
{
    if (spec->pos0 > UINT32_MAX - n)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "rotary positions %zu + %zu exceed the kernel's 32-bit range",
                            spec->pos0, n);
    cl_mem table;
    clattn_status status =
        clattn__rotary_table(ctx, spec->pos0 + n, spec->rot_dim / 2, spec->theta, &table);
    if (status != CLATTN_OK)
        return status;
    cl_ulong y_off = out_offset;
    cl_uint h = (cl_uint)heads, pairs = (cl_uint)(batch * heads), rows = (cl_uint)n;
    cl_uint width = (cl_uint)d, rot_dim = (cl_uint)spec->rot_dim, pos0 = (cl_uint)spec->pos0;
    cl_int interleaved = spec->interleaved;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_ROTARY], 0, CL_SUCCESS};
    clattn__head_view_args(&args, x);
    CLATTN_ARG(&args, out);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, h);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, rows);
    CLATTN_ARG(&args, width);
    CLATTN_ARG(&args, rot_dim);
    CLATTN_ARG(&args, interleaved);
    CLATTN_ARG(&args, table);
    CLATTN_ARG(&args, pos0);
    size_t global[3] = {d, n, batch * heads};
    *rotated = (clattn_head_view){out, out_offset, heads * n * d, n * d, d};
    return clattn__launch(ctx, &args, "rotary", 3, global, NULL, CLATTN_OP_OTHER, 0);
}
