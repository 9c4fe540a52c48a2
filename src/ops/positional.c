/* Adding the positional table, and the token embedding (kernels in cl/embedding.cl). */
#include "clattn/encoder.h"
#include "positional.h"
#include "elementwise.h"
#include "runtime/launch.h"
#include "runtime/positional_table.h"
#include "runtime/tensor_internal.h"

clattn_status clattn__add_positional(clattn_context *ctx, cl_mem pe, cl_mem in, size_t in_offset,
                                     cl_mem out, size_t out_offset, size_t tokens, size_t seq,
                                     size_t d, size_t offset)
{
    cl_ulong in_off = in_offset, out_off = out_offset, first = offset;
    cl_uint n = (cl_uint)seq, width = (cl_uint)d, count = (cl_uint)tokens;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ADD_POSITIONAL);
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

/* The arguments clattn_embed and clattn_embed_layernorm_rows share. */
static void embed_args(clattn_kernel_args *args, const clattn_embed_args *e, size_t tokens,
                       size_t seq, size_t d, cl_mem x)
{
    cl_ulong first = e->position_offset;
    cl_uint n = (cl_uint)seq, width = (cl_uint)d, count = (cl_uint)tokens;
    float scale = e->scale;
    CLATTN_ARG(args, e->ids);
    CLATTN_ARG(args, e->table);
    CLATTN_ARG(args, scale);
    clattn__arg_mem(args, e->positions);
    CLATTN_ARG(args, first);
    CLATTN_ARG(args, n);
    CLATTN_ARG(args, width);
    CLATTN_ARG(args, count);
    clattn__arg_mem(args, e->type_table ? e->types : NULL);
    clattn__arg_mem(args, e->type_table);
    clattn__arg_mem(args, e->positions ? e->position_rows : NULL);
    CLATTN_ARG(args, x);
}

clattn_status clattn__embed(clattn_context *ctx, const clattn_embed_args *e, size_t tokens,
                            size_t seq, size_t d, cl_mem x)
{
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_EMBED);
    embed_args(&args, e, tokens, seq, d, x);
    size_t global[2] = {d, tokens};
    return clattn__launch(ctx, &args, "embed", 2, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__embed_layernorm(clattn_context *ctx, const clattn_embed_args *e,
                                      size_t tokens, size_t seq, size_t d, cl_mem x,
                                      cl_mem weight, cl_mem bias, float eps)
{
    /* One launch where LayerNorm itself runs a row per work-item. */
    if (!clattn__layernorm_by_rows(ctx, d)) {
        clattn_status status = clattn__embed(ctx, e, tokens, seq, d, x);
        if (status != CLATTN_OK)
            return status;
        return clattn__layernorm(ctx, x, 0, NULL, 0, NULL, x, 0, tokens, d, weight, bias, eps);
    }
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_EMBED_LAYERNORM_ROWS);
    embed_args(&args, e, tokens, seq, d, x);
    CLATTN_ARG(&args, weight);
    CLATTN_ARG(&args, bias);
    CLATTN_ARG(&args, eps);
    size_t global = tokens, local = 1;
    return clattn__launch(ctx, &args, "embed_layernorm", 1, &global, &local, CLATTN_OP_OTHER, 0);
}

clattn_status clattn_add_sinusoidal(clattn_context *ctx, clattn_tensor *x, size_t offset)
{
    static const char fn[] = "clattn_add_sinusoidal";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, x, "x is NULL");
    CLATTN_CHECK_ARG(ctx, fn, x->ctx == ctx, "x belongs to another context");
    CLATTN_CHECK_ARG(ctx, fn, x->ndim == 3 || x->ndim == 2,
                     "x must be [B, N, d] or [N, d], not %d-D", x->ndim);
    CLATTN_CHECK_ARG(ctx, fn, clattn_tensor_is_contiguous(x),
                     "x must be contiguous");
    size_t d = x->shape[x->ndim - 1], seq = x->shape[x->ndim - 2];
    size_t tokens = clattn_tensor_numel(x) / d;
    CLATTN_CHECK_ARG(ctx, fn, offset <= SIZE_MAX / 2 && seq <= UINT32_MAX && tokens <= UINT32_MAX,
                     "offset %zu or the sequence is too large", offset);
    cl_mem pe;
    clattn_status status = clattn__positional_table(ctx, offset + seq, d, &pe);
    if (status != CLATTN_OK)
        return status;
    return clattn__add_positional(ctx, pe, x->mem, x->offset, x->mem, x->offset, tokens, seq, d,
                                  offset);
}
