/* Element-wise and row-wise kernels around the GEMMs: bias and activation, LayerNorm, RMSNorm,
 * add. */
#include "elementwise.h"
#include "runtime/context_internal.h"
#include "runtime/launch.h"

clattn_status clattn__bias_act(clattn_context *ctx, cl_mem y, size_t y_offset, size_t ld,
                               size_t rows, size_t cols, cl_mem bias, size_t bias_offset,
                               int act)
{
    if (!bias && act == CLATTN_ACT_NONE)
        return CLATTN_OK;
    cl_ulong off = y_offset, ldu = ld, b_off = bias_offset;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_int a = act;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_BIAS_ACT);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, off);
    CLATTN_ARG(&args, ldu);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, c);
    clattn__arg_mem(&args, bias);
    CLATTN_ARG(&args, b_off);
    CLATTN_ARG(&args, a);
    size_t global[2] = {cols, rows};
    return clattn__launch(ctx, &args, "bias_act", 2, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__glu(clattn_context *ctx, cl_mem h, size_t rows, size_t cols, int act)
{
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_int a = act;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_GLU);
    CLATTN_ARG(&args, h);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, c);
    CLATTN_ARG(&args, a);
    size_t global[2] = {cols, rows};
    return clattn__launch(ctx, &args, "glu", 2, global, NULL, CLATTN_OP_OTHER, 0);
}

bool clattn__layernorm_by_rows(const clattn_context *ctx, size_t width)
{
    return ctx->info.local_mem_is_global && width % 16 == 0;
}

/* Launches LayerNorm kernel `id` (cl/layernorm.cl: they all take the same arguments). */
static clattn_status launch_layernorm(clattn_context *ctx, clattn_kernel_id id, bool by_rows,
                                      cl_mem x, size_t x_offset, cl_mem res, size_t res_offset,
                                      cl_mem res_bias, cl_mem y, size_t y_offset, size_t rows,
                                      size_t width, cl_mem weight, cl_mem bias, float eps)
{
    cl_ulong x_off = x_offset, res_off = res_offset, y_off = y_offset;
    cl_uint r = (cl_uint)rows, w = (cl_uint)width;
    /* The variants without a residual ignore res and res_bias: pass x for both. */
    cl_mem res_arg = res ? res : x, res_bias_arg = res_bias ? res_bias : x;
    clattn_kernel_args args = clattn__kernel_args(ctx, id);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, x_off);
    CLATTN_ARG(&args, res_arg);
    CLATTN_ARG(&args, res_off);
    CLATTN_ARG(&args, res_bias_arg);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, w);
    CLATTN_ARG(&args, weight);
    CLATTN_ARG(&args, bias);
    CLATTN_ARG(&args, eps);
    size_t wg = by_rows ? 1 : clattn__reduce_wg(ctx), global = rows * wg;
    return clattn__launch(ctx, &args, "layernorm", 1, &global, &wg, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__layernorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                size_t res_offset, cl_mem res_bias, cl_mem y, size_t y_offset,
                                size_t rows, size_t width, cl_mem weight, cl_mem bias, float eps)
{
    bool by_rows = clattn__layernorm_by_rows(ctx, width);
    clattn_kernel_id id = !res        ? CLATTN_KERNEL_LAYERNORM
                          : !res_bias ? CLATTN_KERNEL_LAYERNORM_ADD
                                      : CLATTN_KERNEL_LAYERNORM_ADD_BIAS;
    if (by_rows)
        id = !res ? CLATTN_KERNEL_LAYERNORM_ROWS
                  : !res_bias ? CLATTN_KERNEL_LAYERNORM_ROWS_ADD
                              : CLATTN_KERNEL_LAYERNORM_ROWS_ADD_BIAS;
    return launch_layernorm(ctx, id, by_rows, x, x_offset, res, res_offset, res_bias, y, y_offset,
                            rows, width, weight, bias, eps);
}

clattn_status clattn__add_layernorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                    size_t res_offset, cl_mem res_bias, cl_mem y,
                                    size_t y_offset, size_t rows, size_t width, cl_mem weight,
                                    cl_mem bias, float eps)
{
    bool by_rows = clattn__layernorm_by_rows(ctx, width);
    clattn_kernel_id id = by_rows ? (res_bias ? CLATTN_KERNEL_LAYERNORM_ROWS_ADD_BIAS_STORE
                                              : CLATTN_KERNEL_LAYERNORM_ROWS_ADD_STORE)
                                  : (res_bias ? CLATTN_KERNEL_LAYERNORM_ADD_BIAS_STORE
                                              : CLATTN_KERNEL_LAYERNORM_ADD_STORE);
    return launch_layernorm(ctx, id, by_rows, x, x_offset, res, res_offset, res_bias, y, y_offset,
                            rows, width, weight, bias, eps);
}

clattn_status clattn__rmsnorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem y,
                              size_t y_offset, size_t rows, size_t width, cl_mem weight,
                              float eps)
{
    cl_ulong x_off = x_offset, y_off = y_offset;
    cl_uint r = (cl_uint)rows, w = (cl_uint)width;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_RMSNORM);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, x_off);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, w);
    CLATTN_ARG(&args, weight);
    CLATTN_ARG(&args, eps);
    size_t wg = clattn__reduce_wg(ctx), global = rows * wg;
    return clattn__launch(ctx, &args, "rmsnorm", 1, &global, &wg, CLATTN_OP_OTHER, 0);
}

/* Whether the RMSNorms after a residual add and of the q/k heads run one work-item per row or
 * head (cl/rmsnorm.cl's _serial kernels, the same bytes): on devices whose local memory is
 * global memory (CPUs), where a work-group's barriers cost more than a row. Measured on a 2-core
 * Xeon VM through PoCL, a 512-token prompt of Qwen3-0.6B's shape: the 28 layers' q/k head norms
 * 72 -> 20 ms, the 55 norms quantising their rows 61 -> 20 ms (clattn__rmsnorm, once a forward,
 * keeps the work-group). */
static bool rmsnorm_serial(const clattn_context *ctx)
{
    return ctx->info.local_mem_is_global;
}

/* Launches an RMSNorm kernel over `items` rows or heads: one work-item each (serial), or a
 * work-group of the reduction's size each. */
static clattn_status launch_rmsnorm(clattn_context *ctx, clattn_kernel_args *args,
                                    const char *name, size_t items, bool serial)
{
    size_t wg = serial ? 1 : clattn__reduce_wg(ctx), global = items * wg;
    return clattn__launch(ctx, args, name, 1, &global, serial ? NULL : &wg, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__rmsnorm_qk_heads(clattn_context *ctx, cl_mem x, size_t x_offset,
                                       size_t pitch, size_t rows, size_t q_heads,
                                       size_t kv_heads, size_t d, cl_mem q_weight,
                                       cl_mem k_weight, float eps)
{
    cl_ulong x_off = x_offset;
    cl_uint p = (cl_uint)pitch, r = (cl_uint)rows, hq = (cl_uint)q_heads, hk = (cl_uint)kv_heads;
    cl_uint w = (cl_uint)d;
    bool serial = rmsnorm_serial(ctx);
    clattn_kernel_args args = clattn__kernel_args(
        ctx, serial ? CLATTN_KERNEL_RMSNORM_QK_HEADS_SERIAL : CLATTN_KERNEL_RMSNORM_QK_HEADS);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, x_off);
    CLATTN_ARG(&args, p);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, hq);
    CLATTN_ARG(&args, hk);
    CLATTN_ARG(&args, w);
    CLATTN_ARG(&args, q_weight);
    CLATTN_ARG(&args, k_weight);
    CLATTN_ARG(&args, eps);
    return launch_rmsnorm(ctx, &args, "rmsnorm_qk_heads", rows * (q_heads + kv_heads), serial);
}

/* The arguments clattn_add_rmsnorm and clattn_add_rmsnorm_quantize share, in their order. */
static clattn_kernel_args add_rmsnorm_args(clattn_context *ctx, clattn_kernel_id kernel,
                                           cl_mem x, size_t x_offset, cl_mem res,
                                           size_t res_offset, cl_mem res_bias, cl_mem y,
                                           size_t y_offset, size_t rows, size_t width,
                                           cl_mem weight, float eps)
{
    cl_ulong x_off = x_offset, res_off = res_offset, y_off = y_offset;
    cl_uint r = (cl_uint)rows, w = (cl_uint)width;
    clattn_kernel_args args = clattn__kernel_args(ctx, kernel);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, x_off);
    CLATTN_ARG(&args, res);
    CLATTN_ARG(&args, res_off);
    clattn__arg_mem(&args, res_bias);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, w);
    CLATTN_ARG(&args, weight);
    CLATTN_ARG(&args, eps);
    return args;
}

clattn_status clattn__add_rmsnorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                  size_t res_offset, cl_mem res_bias, cl_mem y, size_t y_offset,
                                  size_t rows, size_t width, cl_mem weight, float eps)
{
    bool serial = rmsnorm_serial(ctx);
    clattn_kernel_args args = add_rmsnorm_args(
        ctx, serial ? CLATTN_KERNEL_ADD_RMSNORM_SERIAL : CLATTN_KERNEL_ADD_RMSNORM, x, x_offset,
        res, res_offset, res_bias, y, y_offset, rows, width, weight, eps);
    return launch_rmsnorm(ctx, &args, "add_rmsnorm", rows, serial);
}

clattn_status clattn__add_rmsnorm_quantize(clattn_context *ctx, cl_mem x, size_t x_offset,
                                           cl_mem res, size_t res_offset, cl_mem res_bias,
                                           cl_mem y, size_t y_offset, size_t rows, size_t width,
                                           cl_mem weight, float eps, size_t qb, cl_mem xq,
                                           cl_mem xd, cl_mem xs, cl_mem xt)
{
    CLATTN_CHECK_ARG(ctx, "clattn__add_rmsnorm_quantize",
                     qb >= 16 && qb % 16 == 0 && width % qb == 0 && xq && xd && xs,
                     "rows of %zu values in blocks of %zu, or a quantised output missing", width,
                     qb);
    bool serial = rmsnorm_serial(ctx);
    clattn_kernel_id id =
        serial ? CLATTN_KERNEL_ADD_RMSNORM_QUANTIZE_SERIAL : CLATTN_KERNEL_ADD_RMSNORM_QUANTIZE;
    clattn_kernel_args args = add_rmsnorm_args(ctx, id, x, x_offset, res, res_offset, res_bias,
                                               y, y_offset, rows, width, weight, eps);
    cl_uint b = (cl_uint)qb;
    CLATTN_ARG(&args, b);
    CLATTN_ARG(&args, xq);
    CLATTN_ARG(&args, xd);
    CLATTN_ARG(&args, xs);
    clattn__arg_mem(&args, xt);
    return launch_rmsnorm(ctx, &args, "add_rmsnorm_quantize", rows, serial);
}

clattn_status clattn__add(clattn_context *ctx, cl_mem y, size_t y_offset, cl_mem x,
                          size_t x_offset, cl_mem bias, size_t rows, size_t width)
{
    size_t n = rows * width;
    cl_ulong y_off = y_offset, x_off = x_offset, count = n;
    cl_uint w = (cl_uint)width;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ADD);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, x_off);
    clattn__arg_mem(&args, bias);
    CLATTN_ARG(&args, w);
    CLATTN_ARG(&args, count);
    return clattn__launch(ctx, &args, "add", 1, &n, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__rows_to_half(clattn_context *ctx, cl_mem src, size_t src_offset,
                                   size_t src_ld, cl_mem dst, size_t dst_offset, size_t dst_sb,
                                   size_t dst_ld, size_t cols, size_t rows, size_t batch)
{
    cl_ulong src_off = src_offset, src_stride = src_ld, dst_off = dst_offset;
    cl_ulong dst_seq = dst_sb, dst_stride = dst_ld;
    cl_uint n_cols = (cl_uint)cols, n_rows = (cl_uint)rows, n_batch = (cl_uint)batch;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ROWS_TO_HALF);
    CLATTN_ARG(&args, src);
    CLATTN_ARG(&args, src_off);
    CLATTN_ARG(&args, src_stride);
    CLATTN_ARG(&args, dst);
    CLATTN_ARG(&args, dst_off);
    CLATTN_ARG(&args, dst_seq);
    CLATTN_ARG(&args, dst_stride);
    CLATTN_ARG(&args, n_cols);
    CLATTN_ARG(&args, n_rows);
    CLATTN_ARG(&args, n_batch);
    size_t global[3] = {cols, rows, batch};
    return clattn__launch(ctx, &args, "rows_to_half", 3, global, NULL, CLATTN_OP_OTHER, 0);
}
