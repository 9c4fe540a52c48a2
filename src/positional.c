/* The paper's sinusoidal positional encoding and the token embedding. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

clattn_status clattn_sinusoidal_table(float *table, size_t positions, size_t d_model)
{
    static const char fn[] = "clattn_sinusoidal_table";
    CLATTN_CHECK_ARG(NULL, table, "%s: invalid argument: table is NULL", fn);
    CLATTN_CHECK_ARG(NULL, positions > 0 && d_model > 0,
                     "%s: invalid argument: positions (%zu) and d_model (%zu) must be positive", fn,
                     positions, d_model);
    size_t count;
    CLATTN_CHECK_ARG(NULL, clattn__mul_size(positions, d_model, &count),
                     "%s: invalid argument: positions · d_model overflows", fn);
    /* PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)). */
    for (size_t c = 0; c < d_model; c++) {
        double inv_freq = 1.0 / pow(10000.0, (double)(c - c % 2) / (double)d_model);
        for (size_t pos = 0; pos < positions; pos++) {
            double angle = (double)pos * inv_freq;
            table[pos * d_model + c] = (float)(c % 2 == 0 ? sin(angle) : cos(angle));
        }
    }
    return CLATTN_OK;
}

clattn_status clattn__positional_table(clattn_context *ctx, size_t positions, size_t d,
                                       cl_mem *out)
{
    if (ctx->pe && ctx->pe_dim == d && ctx->pe_positions >= positions) {
        *out = ctx->pe;
        return CLATTN_OK;
    }
    /* Round up so that slowly growing lengths do not recompute the table every call. */
    size_t rows = (positions + 255) / 256 * 256, count, bytes;
    if (!clattn__mul_size(rows, d, &count) || !clattn__mul_size(count, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "the positional table [%zu, %zu] overflows size_t", positions, d);
    float *host = malloc(bytes);
    if (!host)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for the positional table [%zu, %zu]", rows, d);
    clattn_status status = clattn_sinusoidal_table(host, rows, d);
    cl_mem mem = NULL;
    if (status == CLATTN_OK)
        status = clattn__buffer_create(ctx, bytes, &mem, "the positional table");
    if (status == CLATTN_OK) {
        cl_int err =
            clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            status = clattn__fail_cl(ctx, err, "writing the positional table");
            clReleaseMemObject(mem);
        }
    }
    free(host);
    if (status != CLATTN_OK)
        return status;
    if (ctx->pe)
        clReleaseMemObject(ctx->pe);
    ctx->pe = mem;
    ctx->pe_positions = rows;
    ctx->pe_dim = d;
    *out = mem;
    return CLATTN_OK;
}

clattn_status clattn__add_positional(clattn_context *ctx, cl_mem in, size_t in_offset, cl_mem out,
                                     size_t out_offset, size_t tokens, size_t seq, size_t d,
                                     size_t offset)
{
    cl_mem pe;
    clattn_status status = clattn__positional_table(ctx, offset + seq, d, &pe);
    if (status != CLATTN_OK)
        return status;
    cl_ulong in_off = in_offset, out_off = out_offset, first = offset;
    cl_uint n = (cl_uint)seq, width = (cl_uint)d, count = (cl_uint)tokens;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_ADD_POSITIONAL], 0, CL_SUCCESS};
    CLATTN_ARG(&args, in);
    CLATTN_ARG(&args, in_off);
    CLATTN_ARG(&args, pe);
    CLATTN_ARG(&args, first);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, width);
    CLATTN_ARG(&args, count);
    CLATTN_ARG(&args, out);
    CLATTN_ARG(&args, out_off);
    size_t global[2] = {d, tokens};
    return clattn__launch(ctx, &args, "add_positional", 2, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__embed(clattn_context *ctx, cl_mem ids, cl_mem emb, float scale,
                            bool with_positions, size_t offset, size_t tokens, size_t seq, size_t d,
                            cl_mem x)
{
    cl_mem pe = NULL;
    if (with_positions) {
        clattn_status status = clattn__positional_table(ctx, offset + seq, d, &pe);
        if (status != CLATTN_OK)
            return status;
    }
    cl_ulong first = offset;
    cl_uint n = (cl_uint)seq, width = (cl_uint)d, count = (cl_uint)tokens;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_EMBED], 0, CL_SUCCESS};
    CLATTN_ARG(&args, ids);
    CLATTN_ARG(&args, emb);
    CLATTN_ARG(&args, scale);
    if (pe)
        CLATTN_ARG(&args, pe);
    else
        clattn__arg_null(&args);
    CLATTN_ARG(&args, first);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, width);
    CLATTN_ARG(&args, count);
    CLATTN_ARG(&args, x);
    size_t global[2] = {d, tokens};
    return clattn__launch(ctx, &args, "embed", 2, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn_add_sinusoidal(clattn_context *ctx, clattn_tensor *x, size_t offset)
{
    static const char fn[] = "clattn_add_sinusoidal";
    CLATTN_CHECK_ARG(NULL, ctx, "%s: invalid argument: ctx is NULL", fn);
    CLATTN_CHECK_ARG(ctx, x, "%s: invalid argument: x is NULL", fn);
    CLATTN_CHECK_ARG(ctx, x->ctx == ctx, "%s: invalid argument: x belongs to another context", fn);
    CLATTN_CHECK_ARG(ctx, x->ndim == 3 || x->ndim == 2,
                     "%s: invalid argument: x must be [B, N, d] or [N, d], not %d-D", fn, x->ndim);
    CLATTN_CHECK_ARG(ctx, clattn_tensor_is_contiguous(x),
                     "%s: invalid argument: x must be contiguous", fn);
    size_t d = x->shape[x->ndim - 1], seq = x->shape[x->ndim - 2];
    size_t tokens = clattn_tensor_numel(x) / d;
    CLATTN_CHECK_ARG(ctx, offset <= SIZE_MAX / 2 && seq <= UINT32_MAX && tokens <= UINT32_MAX,
                     "%s: invalid argument: offset %zu or the sequence is too large", fn, offset);
    return clattn__add_positional(ctx, x->mem, x->offset, x->mem, x->offset, tokens, seq, d,
                                  offset);
}
