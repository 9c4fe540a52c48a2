/* Element-wise and row-wise kernels around the GEMMs (elementwise.c): bias and activation,
 * LayerNorm with a fused residual add, RMSNorm, the residual add of pre-LN layers, rows stored as half
 * floats. Offsets in elements. */
#ifndef CLATTN_ELEMENTWISE_H
#define CLATTN_ELEMENTWISE_H

#include "base/constants.h"
#include "base/errors.h"

/* y[r, c] = act(y[r, c] + bias[bias_offset + c]) on y[rows, cols] (leading dimension ld);
 * bias NULL adds nothing; act is CLATTN_ACT_*. */
clattn_status clattn__bias_act(clattn_context *ctx, cl_mem y, size_t y_offset, size_t ld,
                               size_t rows, size_t cols, cl_mem bias, size_t bias_offset, int act);

/* h[r, c] = act(h[r, c])·h[r, cols + c] for r < rows, c < cols, in place on h [rows, 2·cols]
 * (contiguous): the gated feed-forward's product of the gate and up projections. */
clattn_status clattn__glu(clattn_context *ctx, cl_mem h, size_t rows, size_t cols, int act);

/* Whether LayerNorm over rows of `width` runs one work-item per row with 16-wide vectors (CPU
 * devices, whose barriers are costly: width a multiple of 16) rather than a work-group per row. */
bool clattn__layernorm_by_rows(const clattn_context *ctx, size_t width);

/* y = LayerNorm(x + (res + res_bias)) row by row on [rows, width] contiguous blocks; res and
 * res_bias may be NULL; y may be x. */
clattn_status clattn__layernorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                size_t res_offset, cl_mem res_bias, cl_mem y, size_t y_offset,
                                size_t rows, size_t width, cl_mem weight, cl_mem bias, float eps);

/* The residual add and the LayerNorm after it in one launch (pre-LN layers):
 *   x = x + (res + res_bias);  y = LayerNorm(x)
 * row by row on [rows, width] contiguous blocks; res_bias may be NULL; y must not overlap x.
 * The same bytes as clattn__add then clattn__layernorm. */
clattn_status clattn__add_layernorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                    size_t res_offset, cl_mem res_bias, cl_mem y,
                                    size_t y_offset, size_t rows, size_t width, cl_mem weight,
                                    cl_mem bias, float eps);

/* y = RMSNorm(x) row by row on [rows, width] contiguous blocks: x · rsqrt(mean(x²) + eps) ·
 * weight (cl/rmsnorm.cl); y may be x. */
clattn_status clattn__rmsnorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem y,
                              size_t y_offset, size_t rows, size_t width, cl_mem weight,
                              float eps);

/* Qwen3's per-head q and k RMSNorm in place on packed projections: row r < rows of x (from
 * x_offset, `pitch` floats apart) holds q_heads query heads of d values, then kv_heads key heads
 * of d values; query heads are normed with q_weight [d], key heads with k_weight [d]. Each head
 * gets the bytes clattn__rmsnorm gives it as a row of its own; one launch. */
clattn_status clattn__rmsnorm_qk_heads(clattn_context *ctx, cl_mem x, size_t x_offset,
                                       size_t pitch, size_t rows, size_t q_heads,
                                       size_t kv_heads, size_t d, cl_mem q_weight,
                                       cl_mem k_weight, float eps);

/* x = x + (res + res_bias);  y = RMSNorm(x), row by row on [rows, width] contiguous blocks, in
 * one launch; res_bias may be NULL; y must not overlap x or res. The same bytes as clattn__add
 * then clattn__rmsnorm. */
clattn_status clattn__add_rmsnorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                  size_t res_offset, cl_mem res_bias, cl_mem y, size_t y_offset,
                                  size_t rows, size_t width, cl_mem weight, float eps);

/* clattn__add_rmsnorm, then y's rows quantised for 8-bit activations in blocks of qb values
 * (cl/act_quant.cl, the rows a quantised linear layer reads: ops/qlinear.h's
 * clattn__qlinear_prequantize) into xq [rows, width] int8, xd [rows, width / qb] float and xs
 * [rows, width / 16] short, and blocks of 256 into xt (cl/act_quant.cl's qi_transpose_block)
 * unless it is NULL; width a multiple of qb, qb of 16. One launch for the two. */
clattn_status clattn__add_rmsnorm_quantize(clattn_context *ctx, cl_mem x, size_t x_offset,
                                           cl_mem res, size_t res_offset, cl_mem res_bias,
                                           cl_mem y, size_t y_offset, size_t rows, size_t width,
                                           cl_mem weight, float eps, size_t qb, cl_mem xq,
                                           cl_mem xd, cl_mem xs, cl_mem xt);

/* y[r, c] += x[r, c] + bias[c] on [rows, width] contiguous blocks; bias may be NULL. */
clattn_status clattn__add(clattn_context *ctx, cl_mem y, size_t y_offset, cl_mem x,
                          size_t x_offset, cl_mem bias, size_t rows, size_t width);

/* Rows of floats stored as IEEE half floats (a half-precision key/value cache): for b < batch,
 * t < rows, c < cols: dst[dst_offset + b·dst_sb + t·dst_ld + c] =
 * half(src[src_offset + (b·rows + t)·src_ld + c]), rounded to nearest even. */
clattn_status clattn__rows_to_half(clattn_context *ctx, cl_mem src, size_t src_offset,
                                   size_t src_ld, cl_mem dst, size_t dst_offset, size_t dst_sb,
                                   size_t dst_ld, size_t cols, size_t rows, size_t batch);

#endif /* CLATTN_ELEMENTWISE_H */
