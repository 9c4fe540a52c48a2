/*
 * Constants shared by the host code and the OpenCL kernels: this file is included by the C
 * sources and embedded before the kernel sources, so both sides read the same values.
 * Plain preprocessor definitions only (valid C and OpenCL C).
 */
#ifndef CLATTN_CONSTANTS_H
#define CLATTN_CONSTANTS_H

/* Mask kinds as the kernels see them. */
#define CLATTN_KMASK_NONE 0
#define CLATTN_KMASK_BOOL 1     /* nonzero = ignore */
#define CLATTN_KMASK_ADDITIVE 2 /* added to the score */

/* Score modifiers (cl/common.cl clattn_modified_score), flags of one mask: the fused programs are
 * specialised on their combination (CLATTN_FUSED_MODS), the unfused path takes it as an argument. */
#define CLATTN_MOD_SOFTCAP 1 /* s = c·tanh(s / c) */
#define CLATTN_MOD_ALIBI 2   /* s -= m_h·|i - j| */
#define CLATTN_MOD_RELPOS 4  /* s += table[bucket(j - i), h] */
#define CLATTN_MOD_WINDOW 8  /* keys with |i - j| > w/2 ignored */

/* Activations applied after a GEMM (bias_act). */
#define CLATTN_ACT_NONE 0
#define CLATTN_ACT_RELU 1
#define CLATTN_ACT_GELU 2 /* exact, with erf (PyTorch's default gelu) */
#define CLATTN_ACT_GELU_TANH 3 /* tanh approximation (gelu_new, gelu_pytorch_tanh) */
#define CLATTN_ACT_SILU 4 /* x·sigmoid(x) (swish) */

/* The largest work-group size of the row reductions (softmax, LayerNorm); the library picks a
 * power of two up to this that the device allows (CLATTN_REDUCE_WG). */
#define CLATTN_REDUCE_WG_MAX 64

/* Keys per tile of the fused kernel's micro-tiled variant (keys stored transposed per tile, one
 * 16-wide vector per component: cl/pack_heads.cl, cl/fused_attention.cl). */
#define CLATTN_KEY_TILE 16
/* Queries per work-item of the micro-tiled variant: one per lane of its 16-wide vectors (the
 * kernel is written for exactly 16: cl/fused_attention.cl). */
#define CLATTN_TILED_QUERIES 16

#endif /* CLATTN_CONSTANTS_H */
