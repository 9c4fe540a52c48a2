/* LayerNorm with a fused residual add, row by row:
 *
 *   z[r, :] = x[r, :]                                  clattn_layernorm
 *   z[r, :] = x[r, :] + res[r, :]                      clattn_layernorm_add
 *   z[r, :] = x[r, :] + (res[r, :] + res_bias[:])      clattn_layernorm_add_bias
 *   y[r, c] = (z[r, c] - mean(z[r, :])) · rstd · weight[c] + bias[c],
 *   rstd    = 1 / sqrt(var(z[r, :]) + eps)             (biased variance, as PyTorch)
 *
 * x, res, y: [rows, width] contiguous from their offsets; y may be x (in place: every read of a
 * row happens before the barrier that precedes its writes). All three take the same arguments
 * (the unused ones are ignored). They are three kernels rather than one testing res for NULL
 * because PoCL 3.1 miscompiles such a test inside the loops of a kernel with barriers (it stores
 * garbage past the row).
 * One work-group of CLATTN_REDUCE_WG work-items per row. NDRange: (rows · CLATTN_REDUCE_WG),
 * local (CLATTN_REDUCE_WG). */

#define CLATTN_LAYERNORM_KERNEL(name, INPUT)                                                \
    __kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))                 \
    void name(__global const float *x, ulong x_off, __global const float *res,              \
              ulong res_off, __global const float *res_bias, __global float *y, ulong y_off, \
              uint rows, uint width, __global const float *weight,                          \
              __global const float *bias, float eps)                                        \
    {                                                                                       \
        __local float partial[CLATTN_REDUCE_WG];                                            \
        uint row = get_group_id(0), t = get_local_id(0);                                    \
        if (row >= rows)                                                                    \
            return; /* uniform across the work-group */                                     \
        __global const float *xr = x + x_off + (ulong)row * width;                          \
        __global const float *rr = res + res_off + (ulong)row * width;                      \
        __global float *yr = y + y_off + (ulong)row * width;                                \
        float sum = 0.0f;                                                                   \
        for (uint c = t; c < width; c += CLATTN_REDUCE_WG)                                  \
            sum += INPUT(c);                                                                \
        float mean = clattn_group_sum(sum, partial) / (float)width;                         \
        float squares = 0.0f;                                                               \
        for (uint c = t; c < width; c += CLATTN_REDUCE_WG) {                                \
            float dev = INPUT(c) - mean;                                                    \
            squares += dev * dev;                                                           \
        }                                                                                   \
        float rstd = 1.0f / sqrt(clattn_group_sum(squares, partial) / (float)width + eps);  \
        for (uint c = t; c < width; c += CLATTN_REDUCE_WG)                                  \
            yr[c] = (INPUT(c) - mean) * rstd * weight[c] + bias[c];                         \
    }

#define CLATTN_LN_X(c) (xr[c])
#define CLATTN_LN_X_PLUS_RES(c) (xr[c] + rr[c])
#define CLATTN_LN_X_PLUS_RES_BIAS(c) (xr[c] + (rr[c] + res_bias[c]))

CLATTN_LAYERNORM_KERNEL(clattn_layernorm, CLATTN_LN_X)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add, CLATTN_LN_X_PLUS_RES)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add_bias, CLATTN_LN_X_PLUS_RES_BIAS)
