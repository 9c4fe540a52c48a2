/*
 * Linear layers on quantised weights (qlinear.c, cl/qlinear.cl): y[m, n] = x[m, k] · Wᵀ with W
 * [n, k] (PyTorch's layout; ggml's ne = {k, n}) kept on the device in its ggml type — F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K — and decoded as the kernels read it.
 * Activations and outputs are float32; or, with the program's activations set to
 * CLATTN_QLINEAR_INT8, the block types (Q4_0 … Q6_K) run on x's rows quantised to int8 per
 * block (llama.cpp's Q8_0 and Q8_K rules) with integer dot products (cl/qlinear_int8.cl).
 *
 * Batch invariance: every output element is summed in one fixed order (cl/qlinear.cl's header:
 * 16 partial sums over interleaved values, a fixed combining tree), whatever m, the other rows
 * or the path; so row r of y is the same bytes for any m and from either path.
 *
 * Use:
 *
 *   clattn_qlinear_program *prog;  clattn__qlinear_program_create(ctx, &prog);   // once
 *   clattn_qweight w;              clattn__qweight_upload(ctx, CLATTN_GGML_Q4_1, n, k,
 *                                                         bytes, size, &w);        // at load
 *   clattn__qlinear(ctx, prog, CLATTN_OP_FEED_FORWARD, m, x, 0, k, &w, y, 0, n);   // per call
 *   clattn__qweight_release(&w);   clattn__qlinear_program_release(prog);
 *
 * `bytes` are the tensor's data as a GGUF file stores them (n rows of k values, each row
 * k / block_elements blocks). Calls enqueue on the context's queue; failures are recorded on
 * the context (clattn_last_error). A program object is not thread-safe (its kernels' arguments
 * are set per call), as the context is not.
 */
#ifndef CLATTN_QLINEAR_H
#define CLATTN_QLINEAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

/* A weight [n, k] in ggml type `type` (clattn_ggml_type's numbers, formats/gguf.h). */
typedef struct clattn_qweight {
    cl_mem blocks;    /* n · row_bytes bytes: the rows as the file stores them */
    uint32_t type;    /* clattn_ggml_type */
    size_t n, k;      /* output features (rows), input features (values per row) */
    size_t row_bytes; /* bytes of one row: k / block_elements · block_bytes */
} clattn_qweight;

/* The kernels' tiles (cl/qlinear.cl): rows × columns per work-item of each path. */
typedef struct clattn_qlinear_params {
    unsigned mv_rows, mv_cols; /* the matrix–vector path (decode) */
    unsigned mv_cols_wide;     /* its columns for types of 6.5 bits per weight or more */
    unsigned mv_swiglu_cols;   /* the fused SwiGLU's matrix–vector columns (two weight rows
                                * each) for Q4_0, Q4_1, Q5_0 and Q5_1; the other types take
                                * half their plain tile's columns, rounded up */
    unsigned mm_rows, mm_cols; /* the matrix–matrix path (prompt processing) */
    unsigned mm_rows_wide, mm_cols_wide; /* its tile for types of 6.5 bits per weight or more */
    unsigned mv_max_m;         /* m up to this takes the matrix–vector path */
    unsigned mm_item_rows;     /* rows per matrix–matrix work-item (rounded up to whole tiles);
                                * 0: as many as a quarter of the device's cache holds, up to
                                * 256 KiB of x (staged: 1 MiB) */
    unsigned mv_items;         /* matrix–vector work-items along n, each taking a contiguous
                                * run of column tiles; 0: eight per compute unit, more where
                                * a run would be long (qlinear.c) */
    unsigned mm8_rows, mm8_cols; /* the matrix–matrix tile with 8-bit activations */
    unsigned prefetch_bytes;     /* the tiles prefetch their weight rows this far ahead, one
                                  * prefetch per cache line (line_bytes); 0: none */
    unsigned line_bytes;         /* the device's cache line */
    unsigned vnni;               /* 1: the 8-bit kernels compiled for AVX512-VNNI (PoCL's CPU
                                  * device on a CPU that has it; cl/qlinear_int8.cl's QI_VNNI) */
    unsigned mm_stage;           /* 1: the float32 matrix–matrix path decodes a work-item's
                                  * weight rows once into local memory and runs its row tiles
                                  * on those floats (the same values, the same order: the same
                                  * bytes), where they fit (clattn__qlinear_mm_staged); 0:
                                  * every row tile decodes them again. Default 1 on CPU
                                  * devices whose local memory is ordinary cached memory
                                  * (CL_GLOBAL) */
    unsigned mms_rows, mms_cols; /* the staged path's tile, every type alike */
} clattn_qlinear_params;

typedef enum clattn_qlinear_path {
    CLATTN_QLINEAR_AUTO = 0, /* by m: mv_max_m */
    CLATTN_QLINEAR_MV = 1,
    CLATTN_QLINEAR_MM = 2,
} clattn_qlinear_path;

typedef struct clattn_qlinear_program clattn_qlinear_program;

/* What the block types' kernels multiply the weights with. */
typedef enum clattn_qlinear_activations {
    CLATTN_QLINEAR_FLOAT = 0, /* x as it is, float32 (the default) */
    CLATTN_QLINEAR_INT8 = 1,  /* x's rows quantised to int8 per block, then integer products
                               * (cl/qlinear_int8.cl: its order, also batch-invariant) */
} clattn_qlinear_activations;

/* Whether a float32 matrix-matrix call on a weight of k columns (swiglu: a stacked gate|up
 * weight) takes the staged kernels: params.mm_stage and the work-item's decoded rows within the
 * device's local memory. Otherwise the plain ones (the same bytes). */
bool clattn__qlinear_mm_staged(const clattn_qlinear_program *prog, size_t k, bool swiglu);

/* Builds cl/qlinear.cl for the context's device with tiles from its facts (overridable field by
 * field with CLATTN_QLINEAR="mvr=4,mvc=1,mvcw=1,mvsc=2,mvi=0,mmr=8,mmc=2,mmrw=6,mmcw=4,mvmax=32,
 * mmi=0,mm8r=8,mm8c=2,pf=2048,vnni=0,mms=1,mmsr=6,mmsc=4"; a pair it cannot read, an unknown key
 * or a value out of range is CLATTN_ERROR_INVALID_ARGUMENT naming the pair, and vnni=1 where the
 * device cannot take it is CLATTN_ERROR_INVALID_ARGUMENT naming the device). */
clattn_status clattn__qlinear_program_create(clattn_context *ctx, clattn_qlinear_program **out);
void clattn__qlinear_program_release(clattn_qlinear_program *prog);
clattn_qlinear_params clattn__qlinear_params(const clattn_qlinear_program *prog);
/* The options its programs were built with (the float program's; the 8-bit one adds
 * -DQL_HELPERS_ONLY). */
const char *clattn__qlinear_build_options(const clattn_qlinear_program *prog);

/* The activations of the calls that follow (every weight this program runs). The first switch
 * to CLATTN_QLINEAR_INT8 builds its kernels (a second program; its failure leaves the
 * activations as they were). */
clattn_status clattn__qlinear_set_activations(clattn_context *ctx, clattn_qlinear_program *prog,
                                              clattn_qlinear_activations activations);
clattn_qlinear_activations clattn__qlinear_activations(const clattn_qlinear_program *prog);

/* Whether `type` runs on 8-bit activations under CLATTN_QLINEAR_INT8 (the block types). */
int clattn__qlinear_type_int8(uint32_t type);

/* Whether `type` has kernels here; its block (values, bytes) when it does. */
int clattn__qlinear_type_supported(uint32_t type, size_t *block_elements, size_t *block_bytes);

/* Uploads a weight of `type` [n, k] from `size` bytes at `bytes` (exactly n rows of whole
 * blocks; F32/F16/BF16 need k a multiple of 16) into *w. An unsupported type, a k that is not
 * whole blocks or a wrong size is CLATTN_ERROR_INVALID_ARGUMENT naming the numbers. */
clattn_status clattn__qweight_upload(clattn_context *ctx, uint32_t type, size_t n, size_t k,
                                     const void *bytes, size_t size, clattn_qweight *w);
/* Releases w->blocks and zeroes *w. Accepts a zeroed weight. */
void clattn__qweight_release(clattn_qweight *w);

/* y[y_offset + r·ldy + j] = Σ_l x[x_offset + r·ldx + l] · W[j, l] for r < m, j < n (offsets
 * and strides in floats; ldx ≥ k, ldy ≥ n), on the path m chooses; `op` is the counter the
 * multiply-adds go to. m = 0 is a no-op. */
clattn_status clattn__qlinear(clattn_context *ctx, clattn_qlinear_program *prog, clattn_op op,
                              size_t m, cl_mem x, size_t x_offset, size_t ldx,
                              const clattn_qweight *w, cl_mem y, size_t y_offset, size_t ldy);
/* The same on a given path (tests and benchmarks; both give the same bytes). */
clattn_status clattn__qlinear_path(clattn_context *ctx, clattn_qlinear_program *prog,
                                   clattn_op op, clattn_qlinear_path path, size_t m, cl_mem x,
                                   size_t x_offset, size_t ldx, const clattn_qweight *w, cl_mem y,
                                   size_t y_offset, size_t ldy);

/* A gated feed-forward's first layer with SwiGLU fused into its epilogue: w stacks [gate rows;
 * up rows], n = w->n / 2 of each (w->n even), and y[y_offset + r·ldy + j] = silu(g)·u for r < m,
 * j < n, where g and u are what clattn__qlinear computes for columns j and n + j. The bytes are
 * those of clattn__qlinear into [m, 2n] followed by clattn__qlinear_glu (same reduction order,
 * same float expression on vectors of eight), for any m and either path; one launch instead of
 * two, and the [m, 2n] intermediate is never written. */
clattn_status clattn__qlinear_swiglu(clattn_context *ctx, clattn_qlinear_program *prog,
                                     clattn_op op, size_t m, cl_mem x, size_t x_offset, size_t ldx,
                                     const clattn_qweight *w, cl_mem y, size_t y_offset,
                                     size_t ldy);
/* The SwiGLU of a quantised gate|up layer that did not fuse it (one split over buffers): h
 * [rows, 2·cols], gate columns then up columns, gets silu(gate)·up in its first cols columns —
 * the fused kernels' expression and exponential (cl/qlinear.cl's ql_swiglu8 and ql_exp8, written
 * out: ops/elementwise.h's clattn__glu uses the device's exp, which may differ in the last bit). */
clattn_status clattn__qlinear_glu(clattn_context *ctx, clattn_qlinear_program *prog, cl_mem h,
                                  size_t rows, size_t cols);
/* The same on a given path (tests and benchmarks). */
clattn_status clattn__qlinear_swiglu_path(clattn_context *ctx, clattn_qlinear_program *prog,
                                          clattn_op op, clattn_qlinear_path path, size_t m,
                                          cl_mem x, size_t x_offset, size_t ldx,
                                          const clattn_qweight *w, cl_mem y, size_t y_offset,
                                          size_t ldy);

/* 8-bit rows made by another kernel. With 8-bit activations every call first quantises x's
 * rows (one launch); a kernel that writes those rows itself can quantise them as it writes them
 * (ops/elementwise.h's clattn__add_rmsnorm_quantize: a pre-norm layer's norm before q|k|v and
 * before gate|up), one launch fewer per call. Its caller asks where with
 * clattn__qlinear_prequantize, giving the type of the weight that reads the rows first and the
 * rows themselves (x, x_offset, ldx: m rows of k values); then enqueues the kernel that fills
 * *rows; then the calls on exactly those rows, whose weight's blocks have rows->block values,
 * use them as they are (a chain's parts of another block size quantise as usual). They stand
 * for the rows until the next call that quantises (it overwrites them), the next
 * clattn__qlinear_prequantize or clattn__qlinear_prequantized_forget, which the caller calls
 * once the rows' readers are done (x may be written again after that). */
typedef struct clattn_qlinear_rows {
    cl_mem q, d, s; /* xq [m, k] int8, xd [m, k / block] float, xs [m, k / 16] short: NULL when
                     * the weight reads float rows (its type, or float activations) */
    cl_mem t;       /* the 512-bit K-quant tiles' copy of xs and xd (cl/act_quant.cl's
                     * qi_transpose_block), for blocks of 256 where the tiles read it; or NULL */
    size_t block;   /* values per block: 32, or 256 for the K-quants */
} clattn_qlinear_rows;

clattn_status clattn__qlinear_prequantize(clattn_context *ctx, clattn_qlinear_program *prog,
                                         uint32_t type, size_t m, size_t k, cl_mem x,
                                         size_t x_offset, size_t ldx, clattn_qlinear_rows *rows);
void clattn__qlinear_prequantized_forget(clattn_qlinear_program *prog);

#endif /* CLATTN_QLINEAR_H */
