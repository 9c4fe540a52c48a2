/*
 * The projection GEMMs through oneDNN (gemm_onednn.c; built when meson finds oneDNN:
 * CLATTN_HAVE_ONEDNN), for CPU devices whose buffers are host memory (PoCL's CPU device, Mesa's
 * llvmpipe): C = act(A·Wᵀ + bias) runs as oneDNN's matmul primitive on the buffers' mapped
 * memory (zero-copy where the driver maps in place, as PoCL does), the bias and the activation
 * fused into it, W reordered once into the layout oneDNN prefers.
 *
 * Each call first finishes the context's queue (oneDNN then owns the cores, with as many OpenMP
 * threads as the device has compute units, which spin only briefly afterwards: see the loading in
 * gemm_onednn.c), maps A, bias and C (where the device maps in place, each buffer once, its
 * address kept), runs the primitive on the calling thread and unmaps: OpenCL work queued
 * afterwards sees C.
 *
 * Batch invariance (clattn/context.h): one primitive per row count M, every one with the same
 * weight layout; oneDNN's brgemm kernels then sum each output over K in the same blocks, in the
 * same order, whatever M is (checked by tests/test_invariance.c and tests/test_gemm_onednn.c). A
 * runtime M (one primitive for every M) would select oneDNN's older jit GEMM, whose M = 1 path
 * (a GEMV) sums in another order.
 *
 * OpenMP's thread count is set on the calling thread (omp_set_num_threads: its nthreads-var),
 * which a caller using OpenMP itself on that thread inherits.
 *
 * Not thread-safe per context (like the context itself).
 */
#ifndef CLATTN_GEMM_ONEDNN_H
#define CLATTN_GEMM_ONEDNN_H

#include <stdbool.h>

#include "base/errors.h"

/* Whether oneDNN can run: the build has it (else nothing below exists: gemm_onednn.c is not
 * built) and its library loads. The first call loads it (dlopen, see gemm_onednn.c: OpenMP's
 * wait policy); thread-safe. */
#ifdef CLATTN_HAVE_ONEDNN
bool clattn__onednn_available(void);
#else
static inline bool clattn__onednn_available(void)
{
    return false;
}
#endif

/* Whether oneDNN's float32 matmul gives a row the same bytes whatever the number of rows
 * (batch invariance, clattn/context.h): where it runs as brgemm (AVX-512 and newer: its blocks
 * follow the instruction set, n and k, never m). On AVX2 it runs its jit sgemm ("gemm:jit"),
 * whose rows changed with the row count: a tiny LLM's 3-token prompt and its 7-token forward
 * gave the shared rows different logits on a Zen 3 EPYC (tests/test_llm.c, the Hugging Face
 * folders). False where oneDNN is unavailable. Thread-safe; the first call asks oneDNN. */
#ifdef CLATTN_HAVE_ONEDNN
bool clattn__onednn_f32_row_invariant(void);
#else
static inline bool clattn__onednn_f32_row_invariant(void)
{
    return false;
}
#endif

/* Whether oneDNN's bf16 and int8 matmuls keep a row's bytes whatever the row count: true unless
 * oneDNN may dispatch them to AMX, whose bytes differ from AVX512_BF16's and which it picks for
 * some shapes only. Loading oneDNN caps it below AMX (process-wide); this is false where the cap
 * could not be set (oneDNN had dispatched in this process before) on a CPU with AMX, or where
 * oneDNN is unavailable. Thread-safe. */
#ifdef CLATTN_HAVE_ONEDNN
bool clattn__onednn_reduced_row_invariant(void);
#else
static inline bool clattn__onednn_reduced_row_invariant(void)
{
    return false;
}
#endif

/* The per-context state (engine, stream, primitives by shape): made on first use, released by
 * clattn__onednn_destroy at context destruction. */
typedef struct clattn_onednn clattn_onednn;
void clattn__onednn_destroy(clattn_onednn **o);

/* A weight W [n, k] in oneDNN's preferred layout (host memory, owned by oneDNN). */
typedef struct clattn_onednn_weight clattn_onednn_weight;

/* Reorders W [n, k] (element (j, l) at b[b_offset + j·ldb + l], in floats) into *out. */
clattn_status clattn__onednn_weight_create(clattn_context *ctx, size_t n, size_t k, cl_mem b,
                                           size_t b_offset, size_t ldb,
                                           clattn_onednn_weight **out);
/* Writes W back as a contiguous [n, k] into `dst` (a buffer of at least n·k floats). */
clattn_status clattn__onednn_weight_unpack(clattn_context *ctx, const clattn_onednn_weight *w,
                                           cl_mem dst);
/* Releases *w (NULL is fine) and clears the pointer. */
void clattn__onednn_weight_release(clattn_onednn_weight **w);

/* Whether the product with w fuses CLATTN_ACT_* `act` (relu, gelu, gelu_tanh, in every
 * precision: int8 applies ReLU as it scales back and the GELUs with oneDNN's eltwise
 * primitive): else the caller applies it. */
bool clattn__onednn_fuses(const clattn_onednn_weight *w, int act);

/* C[m, n] = act(A[m, k]·Wᵀ + bias[n]) with W from clattn__onednn_weight_create; bias may be NULL;
 * act is fused when clattn__onednn_fuses(w, act), else ignored (the caller applies it). Leading
 * dimensions and offsets in floats. *ms receives the call's time in milliseconds (for the
 * profile: the call runs on the host, outside OpenCL's events). */
clattn_status clattn__onednn_run(clattn_context *ctx, size_t m, cl_mem a, size_t a_offset,
                                 size_t lda, const clattn_onednn_weight *w, cl_mem bias,
                                 size_t bias_offset, int act, cl_mem c, size_t c_offset,
                                 size_t ldc, double *ms);

#endif /* CLATTN_GEMM_ONEDNN_H */
