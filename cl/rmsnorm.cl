/* RMSNorm row by row (torch.nn.RMSNorm; the norm of Llama-, Qwen- and Gemma-style layers):
 *
 *   y[r, c] = x[r, c] · rstd · weight[c],   rstd = 1 / sqrt(mean(x[r, :]²) + eps)
 *
 * x, y: [rows, width] contiguous from their offsets; y may be x (each work-item writes only the
 * columns it alone reads, after the reduction's barrier). One work-group of CLATTN_REDUCE_WG
 * work-items per row. NDRange: (rows · CLATTN_REDUCE_WG), local (CLATTN_REDUCE_WG). */
/* One row's RMSNorm: yr = xr · rstd · weight over `width` values (yr may be xr), by the
 * work-group (its `partial` for the reduction). */
inline void clattn_rmsnorm_row(__global const float *xr, __global float *yr, uint width,
                               __global const float *weight, float eps, __local float *partial)
{
    uint t = get_local_id(0);
    float squares = 0.0f;
    for (uint c = t; c < width; c += CLATTN_REDUCE_WG)
        squares += xr[c] * xr[c];
    float rstd = 1.0f / sqrt(clattn_group_sum(squares, partial) / (float)width + eps);
    for (uint c = t; c < width; c += CLATTN_REDUCE_WG)
        yr[c] = xr[c] * rstd * weight[c];
}

__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_rmsnorm(__global const float *x, ulong x_off, __global float *y, ulong y_off,
                    uint rows, uint width, __global const float *weight, float eps)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    clattn_rmsnorm_row(x + x_off + (ulong)row * width, y + y_off + (ulong)row * width, width,
                       weight, eps, partial);
}

/* The per-head RMSNorm of the queries and keys (Qwen3's q_norm and k_norm), in place on packed
 * projections: row r of x (from x_off, `pitch` floats apart) holds q_heads query heads of d
 * values, then kv_heads key heads of d values; head j is normed with q_weight (j < q_heads)
 * or k_weight. Each head the bytes clattn_rmsnorm gives it as a row of its own. One launch for
 * both norms of every row. NDRange: (rows · (q_heads + kv_heads) · CLATTN_REDUCE_WG), local
 * (CLATTN_REDUCE_WG). */
__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_rmsnorm_qk_heads(__global float *x, ulong x_off, uint pitch, uint rows,
                             uint q_heads, uint kv_heads, uint d,
                             __global const float *q_weight, __global const float *k_weight,
                             float eps)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint group = get_group_id(0), heads = q_heads + kv_heads;
    if (group >= rows * heads)
        return; /* uniform across the work-group */
    uint row = group / heads, head = group % heads;
    __global float *xr = x + x_off + (ulong)row * pitch + (ulong)head * d;
    clattn_rmsnorm_row(xr, xr, d, head < q_heads ? q_weight : k_weight, eps, partial);
}

/* Row `row` of the residual add with the RMSNorm after it (clattn_add_rmsnorm's body; the
 * work-group's `partial` for the reduction). */
inline void clattn_add_rmsnorm_row(__global float *x, ulong x_off, __global const float *res,
                                   ulong res_off, __global const float *res_bias,
                                   __global float *y, ulong y_off, uint row, uint width,
                                   __global const float *weight, float eps,
                                   __local float *partial)
{
    uint t = get_local_id(0);
    __global float *xr = x + x_off + (ulong)row * width;
    __global const float *rr = res + res_off + (ulong)row * width;
    __global float *yr = y + y_off + (ulong)row * width;
    float squares = 0.0f;
    for (uint c = t; c < width; c += CLATTN_REDUCE_WG) {
        float v = rr[c];
        if (res_bias)
            v += res_bias[c];
        xr[c] += v;
        squares += xr[c] * xr[c];
    }
    float rstd = 1.0f / sqrt(clattn_group_sum(squares, partial) / (float)width + eps);
    for (uint c = t; c < width; c += CLATTN_REDUCE_WG)
        yr[c] = xr[c] * rstd * weight[c];
}

/* The residual add with the RMSNorm after it, one launch (pre-norm layers):
 *
 *   x[r, c] += res[r, c] + res_bias[c];   y = RMSNorm(x)
 *
 * res_bias may be NULL; y must not overlap x or res. The same bytes as clattn_add then
 * clattn_rmsnorm: the same sum per element, then the same reduction over the same values.
 * NDRange: (rows · CLATTN_REDUCE_WG), local (CLATTN_REDUCE_WG). */
__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_add_rmsnorm(__global float *x, ulong x_off, __global const float *res, ulong res_off,
                        __global const float *res_bias, __global float *y, ulong y_off,
                        uint rows, uint width, __global const float *weight, float eps)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    clattn_add_rmsnorm_row(x, x_off, res, res_off, res_bias, y, y_off, row, width, weight, eps,
                           partial);
}

/* Blocks first, first + step, … of row `row` of y's `rows` (width values) quantised into the
 * row's xq, xd and xs, and blocks of 256 into xt unless it is NULL (cl/act_quant.cl). */
inline void clattn_quantize_row_blocks(__global const float *y, uint row, uint rows, uint width,
                                       uint qb, __global char *xq, __global float *xd,
                                       __global short *xs, __global float *xt, uint first,
                                       uint step)
{
    for (uint blk = first; blk < width / qb; blk += step) {
        qi_quantize_block(y + (ulong)row * width, blk, qb, xq + (ulong)row * width,
                          xd + (ulong)row * (width / qb), xs + (ulong)row * (width / 16));
        if (xt && qb == 256)
            qi_transpose_block(xt, row, rows, width / qb, blk,
                               xs + (ulong)row * (width / 16) + (ulong)blk * 16,
                               xd[(ulong)row * (width / qb) + blk]);
    }
}

/* clattn_add_rmsnorm, then y's rows quantised for a quantised linear layer with 8-bit
 * activations, block by block as clattn_qlinear_quantize quantises them (cl/act_quant.cl): qb
 * values a block (width a multiple of qb, qb of 16), row r into xq + r·width, xd + r·(width /
 * qb), xs + r·(width / 16) (and xt, as there). y is written as well. One launch instead of two
 * (a decode step's norms before q|k|v and gate|up). NDRange as clattn_add_rmsnorm's. */
__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_add_rmsnorm_quantize(__global float *x, ulong x_off, __global const float *res,
                                 ulong res_off, __global const float *res_bias,
                                 __global float *y, ulong y_off, uint rows, uint width,
                                 __global const float *weight, float eps, uint qb,
                                 __global char *xq, __global float *xd, __global short *xs,
                                 __global float *xt)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    clattn_add_rmsnorm_row(x, x_off, res, res_off, res_bias, y, y_off, row, width, weight, eps,
                           partial);
    barrier(CLK_GLOBAL_MEM_FENCE); /* the row's every y, for the blocks below */
    clattn_quantize_row_blocks(y + y_off, row, rows, width, qb, xq, xd, xs, xt, get_local_id(0),
                               CLATTN_REDUCE_WG);
}

/* ---- The same norms by one work-item per row or head (CPU devices, where a work-group's
 * barriers cost more than a row: src/ops/elementwise.c's choice, clattn__rmsnorm keeping the
 * work-group form). Work-item t's partial sums and clattn_group_sum's tree, in order, by one
 * work-item: the bytes of the kernels above, without a barrier. NDRange: (rows) or (rows ·
 * heads), any local size. */

/* What clattn_group_sum returns to a work-group whose work-item t holds the squares of v[c] for
 * c = t, t + CLATTN_REDUCE_WG, … summed in that order. */
inline float clattn_serial_sum_squares(const __global float *v, uint width)
{
    float partial[CLATTN_REDUCE_WG];
    for (uint t = 0; t < CLATTN_REDUCE_WG; ++t)
        partial[t] = 0.0f;
    uint c0 = 0;
    for (; c0 + CLATTN_REDUCE_WG <= width; c0 += CLATTN_REDUCE_WG)
        for (uint t = 0; t < CLATTN_REDUCE_WG; ++t)
            partial[t] += v[c0 + t] * v[c0 + t];
    for (uint t = 0; c0 + t < width; ++t)
        partial[t] += v[c0 + t] * v[c0 + t];
    for (uint span = CLATTN_REDUCE_WG / 2; span > 0; span >>= 1)
        for (uint t = 0; t < span; ++t)
            partial[t] = partial[t] + partial[t + span];
    return partial[0];
}

/* clattn_rmsnorm_row by one work-item. */
inline void clattn_rmsnorm_row_serial(__global const float *xr, __global float *yr, uint width,
                                      __global const float *weight, float eps)
{
    float rstd = 1.0f / sqrt(clattn_serial_sum_squares(xr, width) / (float)width + eps);
    for (uint c = 0; c < width; c++)
        yr[c] = xr[c] * rstd * weight[c];
}

__kernel void clattn_rmsnorm_qk_heads_serial(__global float *x, ulong x_off, uint pitch,
                                             uint rows, uint q_heads, uint kv_heads, uint d,
                                             __global const float *q_weight,
                                             __global const float *k_weight, float eps)
{
    uint item = get_global_id(0), heads = q_heads + kv_heads;
    if (item >= rows * heads)
        return;
    uint row = item / heads, head = item % heads;
    __global float *xr = x + x_off + (ulong)row * pitch + (ulong)head * d;
    clattn_rmsnorm_row_serial(xr, xr, d, head < q_heads ? q_weight : k_weight, eps);
}

/* clattn_add_rmsnorm_row by one work-item. */
inline void clattn_add_rmsnorm_row_serial(__global float *x, ulong x_off,
                                          __global const float *res, ulong res_off,
                                          __global const float *res_bias, __global float *y,
                                          ulong y_off, uint row, uint width,
                                          __global const float *weight, float eps)
{
    __global float *xr = x + x_off + (ulong)row * width;
    __global const float *rr = res + res_off + (ulong)row * width;
    for (uint c = 0; c < width; c++) {
        float v = rr[c];
        if (res_bias)
            v += res_bias[c];
        xr[c] += v;
    }
    clattn_rmsnorm_row_serial(xr, y + y_off + (ulong)row * width, width, weight, eps);
}

__kernel void clattn_add_rmsnorm_serial(__global float *x, ulong x_off,
                                        __global const float *res, ulong res_off,
                                        __global const float *res_bias, __global float *y,
                                        ulong y_off, uint rows, uint width,
                                        __global const float *weight, float eps)
{
    uint row = get_global_id(0);
    if (row < rows)
        clattn_add_rmsnorm_row_serial(x, x_off, res, res_off, res_bias, y, y_off, row, width,
                                      weight, eps);
}

__kernel void clattn_add_rmsnorm_quantize_serial(
    __global float *x, ulong x_off, __global const float *res, ulong res_off,
    __global const float *res_bias, __global float *y, ulong y_off, uint rows, uint width,
    __global const float *weight, float eps, uint qb, __global char *xq, __global float *xd,
    __global short *xs, __global float *xt)
{
    uint row = get_global_id(0);
    if (row >= rows)
        return;
    clattn_add_rmsnorm_row_serial(x, x_off, res, res_off, res_bias, y, y_off, row, width, weight,
                                  eps);
    clattn_quantize_row_blocks(y + y_off, row, rows, width, qb, xq, xd, xs, xt, 0, 1);
}
