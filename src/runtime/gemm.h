/* The projection GEMMs (gemm.c): CLBlast, the library's CPU GEMM (gemm_cpu.c) or oneDNN
 * (gemm_onednn.c), as the context's tuning says (clattn_tuning.gemm_kernel 0, 1 or 2). */
#ifndef CLATTN_GEMM_H
#define CLATTN_GEMM_H

#include <stdbool.h>

#include "base/errors.h"
#include "gemm_cpu.h"
#include "tuning.h"

struct clattn_onednn_weight;
struct clattn_gemm_quant;

/* A weight B [n, k] (PyTorch's [out, in] layout) as the GEMMs read it: where it lives, and its
 * packed forms for the library's CPU GEMM and for oneDNN, each made on first use and kept until
 * the weight is released (the layer that owns the weight owns this). */
typedef struct clattn_gemm_weight {
    cl_mem mem;    /* B; not owned here (the layer's buffer) */
    size_t offset; /* in floats */
    size_t n, k, ld;
    cl_mem packed; /* owned; NULL until first used by the CPU GEMM */
    struct clattn_onednn_weight *onednn; /* owned; NULL until first used by oneDNN */
    /* Not owned; NULL for a float weight. Set, the weight is kept in a ggml type on the device
     * (ops/linear.h's clattn_gemm_quant, mem NULL) and clattn__linear runs it through the
     * quantised kernels (ops/qlinear.h); the GEMMs here never see it. */
    const struct clattn_gemm_quant *quant;
} clattn_gemm_weight;

/* What keeps `precision` (clattn_precision, not FP32) from running on the context: written into
 * `missing` (the CPU feature, oneDNN, the device type), true; false when nothing does. */
bool clattn__precision_missing(clattn_context *ctx, int precision, char *missing, size_t size);

/* Releases the packed forms (not the weight itself) and clears the struct. */
void clattn__gemm_weight_release(clattn_gemm_weight *w);

/* When the context's GEMM is the library's CPU GEMM or oneDNN (tuning gemm_kernel 1 or 2), packs
 * w now for it and sets *packed: its owner may then release the weight's buffer and clear
 * w->mem, so that the weight is held once (those GEMMs read only their packed form). A weight
 * without mem is unpacked into the workspace whenever another GEMM runs it (the tuning changed
 * afterwards): CLBlast then reads it from there each time, the other packed form is made from it
 * once. Slower, still exact. */
clattn_status clattn__gemm_weight_pack(clattn_context *ctx, clattn_gemm_weight *w, bool *packed);

/* What a GEMM left for the caller's epilogue kernel. */
typedef struct clattn_gemm_left {
    bool bias; /* the bias is still to be added */
    int act;   /* CLATTN_ACT_* still to be applied (CLATTN_ACT_NONE: nothing) */
} clattn_gemm_left;

/* C[m, n] = act(A[m, k]·Wᵀ + bias) with the tuning's kernel: oneDNN (gemm_kernel 2: bias, relu,
 * gelu and gelu_tanh fused as its post-ops), the library's CPU GEMM (gemm_kernel 1: bias, relu
 * and gelu fused into its store) or CLBlast (bias and activation left to the caller). *left says
 * what remains. Leading dimensions and offsets in floats. */
clattn_status clattn__gemm_weighted(clattn_context *ctx, clattn_op op, size_t m, cl_mem a,
                                    size_t a_offset, size_t lda, clattn_gemm_weight *w,
                                    cl_mem bias, size_t bias_offset, int act, cl_mem c,
                                    size_t c_offset, size_t ldc, clattn_gemm_left *left);

/* C[m, n] = A[m, k] · B[n, k]ᵀ + beta · C[m, n], row-major, leading dimensions and offsets in
 * floats. B is a PyTorch weight [out, in] used as it is. Counted under `op`. */
clattn_status clattn__gemm_nt(clattn_context *ctx, clattn_op op, size_t m, size_t n, size_t k,
                              cl_mem a, size_t a_offset, size_t lda, cl_mem b, size_t b_offset,
                              size_t ldb, float beta, cl_mem c, size_t c_offset, size_t ldc);
/* Hands Xgemm parameters to CLBlast for the context's device (process-wide CLBlast state): the
 * caller's own (clattn_context_set_gemm_parameters), used as they are. Returns NULL on success,
 * else the name of CLBlast's refusal. */
const char *clattn__gemm_apply_params(cl_device_id device, const clattn_gemm_params *gemm);
/* The same for the parameters context creation chose (and, on GPUs, CLBlast kept on its main GEMM
 * kernel for every size: batch invariance): those from a tuning cache are remembered
 * with their fallback, which clattn__gemm_nt applies (with a warning naming the cache) should
 * CLBlast fail to build or launch them. */
const char *clattn__gemm_apply_chosen(cl_device_id device, const clattn_gemm_choice *choice);
/* Releases CLBlast's compiled programs (after the last context is gone). */
void clattn__gemm_clear_cache(void);
/* Releases the context's CPU GEMM program (context destruction). */
void clattn__gemm_cpu_destroy(clattn_gemm_cpu **g);

#endif /* CLATTN_GEMM_H */
