/* A linear layer on the device's best GEMM (linear.c): y = act(x·Wᵀ + bias); or, for a weight
 * kept quantised, on the quantised kernels (qlinear.h). */
#ifndef CLATTN_LINEAR_H
#define CLATTN_LINEAR_H

#include "qlinear.h"
#include "runtime/gemm.h"

/* A weight kept in its ggml type on the device with the program that runs it: a
 * clattn_gemm_weight whose `quant` points here (and whose mem is NULL) runs through
 * clattn__qlinear, its bias and activation then in an element-wise epilogue. Owned by whoever
 * loaded it, and it outlives the clattn_gemm_weights that point to it.
 *
 * A weight larger than the device's largest allocation is a chain of row blocks: `w` holds the
 * first w.n rows, `next` the rows after them (NULL: none), every part with the same k. Each
 * part writes its own columns of y (clattn__qlinear sums every output column on its own, in one
 * order), so the output is the same bytes as the unsplit weight's. */
typedef struct clattn_gemm_quant {
    clattn_qweight w;
    clattn_qlinear_program *prog;
    const struct clattn_gemm_quant *next;
} clattn_gemm_quant;

/* The rows of the whole chain that starts at q (the sum of its parts' w.n) when every part's
 * rows hold k values; 0 when one does not. */
size_t clattn__gemm_quant_rows(const clattn_gemm_quant *q, size_t k);

/* y[m, w->n] = act(x[m, w->k]·Wᵀ + bias[bias_offset ..]) (bias may be NULL, act CLATTN_ACT_*),
 * rows of x and y with leading dimensions ldx and ldy; offsets in floats. The GEMM fuses what
 * it can (the CPU GEMM: bias, relu, gelu); an element-wise kernel does the rest. */
clattn_status clattn__linear(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                             size_t x_offset, size_t ldx, clattn_gemm_weight *w, cl_mem bias,
                             size_t bias_offset, int act, cl_mem y, size_t y_offset, size_t ldy);

/* y = x·Wᵀ + bias as clattn__linear without an activation, except that a bias the GEMM does not
 * fuse is left to the caller (*bias_left true), who adds it in its next kernel (a residual add
 * with LayerNorm) instead of an element-wise launch of its own. */
clattn_status clattn__linear_bias_left(clattn_context *ctx, clattn_op op, size_t m, cl_mem x,
                                       size_t x_offset, size_t ldx, clattn_gemm_weight *w,
                                       cl_mem bias, size_t bias_offset, cl_mem y,
                                       size_t y_offset, size_t ldy, bool *bias_left);

#endif /* CLATTN_LINEAR_H */
