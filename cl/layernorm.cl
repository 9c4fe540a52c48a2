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
 * (the unused ones are ignored). They are separate kernels rather than one testing res for NULL
 * because PoCL 3.1 miscompiles such a test inside the loops of a kernel with barriers (it stores
 * garbage past the row).
 *
 * The _store variants also write the sum back, for pre-LN layers whose residual stream x goes
 * on past the norm (one launch instead of an add and a LayerNorm):
 *
 *   x[r, :] = z[r, :]                                  clattn_layernorm_add_store,
 *                                                      clattn_layernorm_add_bias_store
 *
 * with y another buffer than x (each work-item writes the sum only at the columns it alone
 * reads, in the last pass). z is the same float sum as the variants without _store compute, so
 * the results are the same bytes as an add followed by a LayerNorm.
 *
 * One work-group of CLATTN_REDUCE_WG work-items per row. NDRange: (rows · CLATTN_REDUCE_WG),
 * local (CLATTN_REDUCE_WG). */

#define CLATTN_LAYERNORM_KERNEL(name, INPUT, X_CONST, STORE)                                \
    __kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))                  \
    void name(__global X_CONST float *x, ulong x_off, __global const float *res,            \
              ulong res_off, __global const float *res_bias, __global float *y, ulong y_off, \
              uint rows, uint width, __global const float *weight,                          \
              __global const float *bias, float eps)                                        \
    {                                                                                       \
        __local float partial[CLATTN_REDUCE_WG];                                            \
        uint row = get_group_id(0), t = get_local_id(0);                                    \
        if (row >= rows)                                                                    \
            return; /* uniform across the work-group */                                     \
        __global X_CONST float *xr = x + x_off + (ulong)row * width;                        \
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
        for (uint c = t; c < width; c += CLATTN_REDUCE_WG) {                                \
            float z = INPUT(c);                                                             \
            STORE(xr[c] = z);                                                               \
            yr[c] = (z - mean) * rstd * weight[c] + bias[c];                                \
        }                                                                                   \
    }

#define CLATTN_LN_X(c) (xr[c])
#define CLATTN_LN_X_PLUS_RES(c) (xr[c] + rr[c])
#define CLATTN_LN_X_PLUS_RES_BIAS(c) (xr[c] + (rr[c] + res_bias[c]))

/* STORE(statement): the statement in the _store variants, nothing in the others. */
#define CLATTN_LN_STORE(statement) statement
#define CLATTN_LN_NO_STORE(statement)

CLATTN_LAYERNORM_KERNEL(clattn_layernorm, CLATTN_LN_X, const, CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add, CLATTN_LN_X_PLUS_RES, const, CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add_bias, CLATTN_LN_X_PLUS_RES_BIAS, const,
                        CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add_store, CLATTN_LN_X_PLUS_RES, , CLATTN_LN_STORE)
CLATTN_LAYERNORM_KERNEL(clattn_layernorm_add_bias_store, CLATTN_LN_X_PLUS_RES_BIAS, ,
                        CLATTN_LN_STORE)

/* The same, one work-item per row with 16-wide vectors, for CPU devices (whose barriers are
 * costly and whose lanes a work-group of scalar work-items leaves idle); width a multiple of 16.
 * NDRange: (rows), local (1). */
float clattn_ln_sum16(float16 v)
{
    float8 a = (float8)(v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7) +
               (float8)(v.s8, v.s9, v.sa, v.sb, v.sc, v.sd, v.se, v.sf);
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

#define CLATTN_LAYERNORM_ROWS_KERNEL(name, INPUT16, X_CONST, STORE)                         \
    __kernel void name(__global X_CONST float *x, ulong x_off, __global const float *res,   \
                       ulong res_off, __global const float *res_bias, __global float *y,    \
                       ulong y_off, uint rows, uint width, __global const float *weight,    \
                       __global const float *bias, float eps)                               \
    {                                                                                       \
        uint row = get_global_id(0), n16 = width / 16;                                      \
        if (row >= rows)                                                                    \
            return;                                                                         \
        __global X_CONST float *xr = x + x_off + (ulong)row * width;                        \
        __global const float *rr = res + res_off + (ulong)row * width;                      \
        __global float *yr = y + y_off + (ulong)row * width;                                \
        float16 sum = 0.0f;                                                                 \
        for (uint c = 0; c < n16; c++)                                                      \
            sum += INPUT16(c);                                                              \
        float mean = clattn_ln_sum16(sum) / (float)width;                                   \
        float16 squares = 0.0f;                                                             \
        for (uint c = 0; c < n16; c++) {                                                    \
            float16 dev = INPUT16(c) - mean;                                                \
            squares += dev * dev;                                                           \
        }                                                                                   \
        float rstd = 1.0f / sqrt(clattn_ln_sum16(squares) / (float)width + eps);            \
        for (uint c = 0; c < n16; c++) {                                                    \
            float16 z = INPUT16(c);                                                         \
            STORE(vstore16(z, c, xr));                                                      \
            vstore16((z - mean) * rstd * vload16(c, weight) + vload16(c, bias), c, yr);     \
        }                                                                                   \
    }

#define CLATTN_LN16_X(c) vload16(c, xr)
#define CLATTN_LN16_X_PLUS_RES(c) (vload16(c, xr) + vload16(c, rr))
#define CLATTN_LN16_X_PLUS_RES_BIAS(c) (vload16(c, xr) + (vload16(c, rr) + vload16(c, res_bias)))

CLATTN_LAYERNORM_ROWS_KERNEL(clattn_layernorm_rows, CLATTN_LN16_X, const, CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_ROWS_KERNEL(clattn_layernorm_rows_add, CLATTN_LN16_X_PLUS_RES, const,
                             CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_ROWS_KERNEL(clattn_layernorm_rows_add_bias, CLATTN_LN16_X_PLUS_RES_BIAS, const,
                             CLATTN_LN_NO_STORE)
CLATTN_LAYERNORM_ROWS_KERNEL(clattn_layernorm_rows_add_store, CLATTN_LN16_X_PLUS_RES, ,
                             CLATTN_LN_STORE)
CLATTN_LAYERNORM_ROWS_KERNEL(clattn_layernorm_rows_add_bias_store, CLATTN_LN16_X_PLUS_RES_BIAS, ,
                             CLATTN_LN_STORE)
