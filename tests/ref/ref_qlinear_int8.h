/*
 * Plain-C reference of the linear layers with 8-bit activations (src/ops/qlinear.h's
 * CLATTN_QLINEAR_INT8, cl/qlinear_int8.cl): each weight block's values read from ggml's block
 * layouts (ggml-quants.c's dequantize_row_* as documented there, written here one value at a
 * time), the activations quantised by llama.cpp's Q8_0 / Q8_K rule, and the order the kernels
 * promise: per block, integer sums per lane of four values, then float32 fma's; 8 lanes and an
 * offset combined in a fixed tree. The same bytes as the kernels, so tests compare by memcmp.
 */
#ifndef CLATTN_REF_QLINEAR_INT8_H
#define CLATTN_REF_QLINEAR_INT8_H

#include <stddef.h>
#include <stdint.h>

/* Whether ggml type `type` (Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14)
 * is one the reference knows; its block (values, bytes). */
int ref_qi_type(uint32_t type, size_t *block_values, size_t *block_bytes);

/* Row x[k] quantised in blocks of qb values: q[k], d[k / qb], sums s[k / 16]. */
void ref_qi_quantize(const float *x, size_t k, size_t qb, int8_t *q, float *d, int16_t *s);

/* y[r·ldy + j] for r < m, j < n: x [m, ldx] times the weight's rows (`bytes`, n rows of k values
 * in `type`), with 8-bit activations. */
void ref_qi_linear(uint32_t type, const unsigned char *bytes, size_t n, size_t k, const float *x,
                   size_t m, size_t ldx, float *y, size_t ldy);

/* Σ_l |W[j, l]| · dx_l / 2 over row r of x (dx_l: the scale of the block holding l): how far
 * the activations' rounding can move y[r, j] (the float32 roundings aside). */
double ref_qi_rounding_bound(uint32_t type, const unsigned char *bytes, size_t k, size_t j,
                             const float *x_row);

#endif
