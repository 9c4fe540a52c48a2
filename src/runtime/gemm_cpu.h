/*
 * SGEMM for CPU-like OpenCL devices (cl/gemm_cpu.cl): C = act(A·Bᵀ + bias + beta·C) with B in
 * PyTorch's [out, in] weight layout, packed once per weight into vector-wide K-major panels.
 *
 * Self-contained: it needs only an OpenCL context, device and queue (no clattn_context), so that
 * src/runtime/gemm.c can call it for devices where it beats CLBlast (CPUs: CL_DEVICE_TYPE_CPU, or
 * CL_DEVICE_LOCAL_MEM_TYPE == CL_GLOBAL). Typical use:
 *
 *   clattn_gemm_cpu *g;  clattn__gemm_cpu_create(cl_ctx, device, NULL, &g);
 *   cl_mem wp;           clattn__gemm_cpu_pack_b(g, queue, n, k, w, 0, k, &wp, NULL);  // at load
 *   clattn__gemm_cpu_run(g, queue, m, n, k, x, 0, k, wp, bias, 0, 0.0f, y, 0, n,
 *                        CLATTN_GEMM_CPU_ACT_NONE, NULL);                          // per call
 *   clReleaseMemObject(wp);  clattn__gemm_cpu_release(g);
 *
 * Failures return a clattn_status and leave a message in clattn__gemm_cpu_error(g) (for create,
 * the message is written to `error` when it is not NULL).
 */
#ifndef CLATTN_GEMM_CPU_H
#define CLATTN_GEMM_CPU_H

#include "clattn/common.h"

#include <stddef.h>

typedef enum clattn_gemm_cpu_act {
    CLATTN_GEMM_CPU_ACT_NONE = 0,
    CLATTN_GEMM_CPU_ACT_RELU = 1,
    CLATTN_GEMM_CPU_ACT_GELU = 2, /* exact: 0.5·x·(1 + erf(x/√2)) */
} clattn_gemm_cpu_act;

/* The kernel's shape. 0 in a field of an override means "derive it from the device". */
typedef struct clattn_gemm_cpu_params {
    unsigned vw; /* vector width in floats (4, 8, 16): CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT */
    unsigned nv; /* vectors per micro-tile row: panel width nr = vw·nv */
    unsigned mr; /* rows per micro-tile: mr·nv accumulators + nv B vectors fit the registers */
    unsigned kc; /* K block in floats (panel block kc·nr·4 bytes stays in L1); 0 = whole K */
    unsigned mb; /* micro-tiles per work-item; 0 = chosen per call for enough work-items */
    unsigned pack_a; /* 1: copy A into K-major micro-panels per call (a scratch buffer kept by
                      * the object) before the product; 0: read A in place (the default) */
} clattn_gemm_cpu_params;

typedef struct clattn_gemm_cpu clattn_gemm_cpu;

/* Builds the program for `device`. `override` (may be NULL) replaces the derived parameters
 * field by field; the environment variable CLATTN_GEMM_CPU ("vw=16,nv=2,mr=12,kc=256,mb=2,pa=1")
 * too, and a pair of it that runtime/env_tuning.h does not read (an unknown key, a value out of
 * the key's range) is CLATTN_ERROR_INVALID_ARGUMENT naming it. */
clattn_status clattn__gemm_cpu_create(cl_context context, cl_device_id device,
                                      const clattn_gemm_cpu_params *override,
                                      clattn_gemm_cpu **out, char *error, size_t error_size);
void clattn__gemm_cpu_release(clattn_gemm_cpu *g);

/* The parameters in use and the build options they became. */
clattn_gemm_cpu_params clattn__gemm_cpu_params(const clattn_gemm_cpu *g);
const char *clattn__gemm_cpu_options(const clattn_gemm_cpu *g);
const char *clattn__gemm_cpu_error(const clattn_gemm_cpu *g);

/* Bytes of the packed form of an [n, k] B: ceil(n / nr)·nr·k floats. */
size_t clattn__gemm_cpu_packed_bytes(const clattn_gemm_cpu *g, size_t n, size_t k);

/* Packs B[n, k] (element (j, l) at b[b_offset + j·ldb + l], offsets and strides in floats) into a
 * new buffer *packed (the caller releases it). Enqueued on `queue`; `event` may be NULL. */
clattn_status clattn__gemm_cpu_pack_b(clattn_gemm_cpu *g, cl_command_queue queue, size_t n,
                                      size_t k, cl_mem b, size_t b_offset, size_t ldb,
                                      cl_mem *packed, cl_event *event);
/* The inverse: B [n, k] (contiguous) from packed (clattn__gemm_cpu_pack_b's, the same n and k). */
clattn_status clattn__gemm_cpu_unpack_b(clattn_gemm_cpu *g, cl_command_queue queue, size_t n,
                                        size_t k, cl_mem packed, cl_mem b);

/* C[m, n] = act(A[m, k]·Bᵀ + bias[n] + beta·C), A row-major with row stride lda, C with ldc,
 * offsets and strides in floats; `packed` from clattn__gemm_cpu_pack_b with the same n and k;
 * `bias` may be NULL; C is not read when beta is 0. m, n or k of 0 is a no-op (k 0 with m·n > 0
 * is refused). Enqueued on `queue`; `event` may be NULL (with pack_a it is the product's event;
 * the packing runs before it on the same in-order queue). Not thread-safe per object: the kernel
 * arguments and the A scratch buffer are the object's. */
clattn_status clattn__gemm_cpu_run(clattn_gemm_cpu *g, cl_command_queue queue, size_t m, size_t n,
                                   size_t k, cl_mem a, size_t a_offset, size_t lda, cl_mem packed,
                                   cl_mem bias, size_t bias_offset, float beta, cl_mem c,
                                   size_t c_offset, size_t ldc, clattn_gemm_cpu_act act,
                                   cl_event *event);

#endif
