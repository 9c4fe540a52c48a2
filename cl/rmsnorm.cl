/* RMSNorm row by row (torch.nn.RMSNorm; the norm of Llama-, Qwen- and Gemma-style layers):
 *
 *   y[r, c] = x[r, c] · rstd · weight[c],   rstd = 1 / sqrt(mean(x[r, :]²) + eps)
 *
 * x, y: [rows, width] contiguous from their offsets; y may be x (each work-item writes only the
 * columns it alone reads, after the reduction's barrier). One work-group of CLATTN_REDUCE_WG
 * work-items per row. NDRange: (rows · CLATTN_REDUCE_WG), local (CLATTN_REDUCE_WG). */
__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_rmsnorm(__global const float *x, ulong x_off, __global float *y, ulong y_off,
                    uint rows, uint width, __global const float *weight, float eps)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0), t = get_local_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    __global const float *xr = x + x_off + (ulong)row * width;
    __global float *yr = y + y_off + (ulong)row * width;
    float squares = 0.0f;
    for (uint c = t; c < width; c += CLATTN_REDUCE_WG)
        squares += xr[c] * xr[c];
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
    uint row = get_group_id(0), t = get_local_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
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
