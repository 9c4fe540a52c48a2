/*
 * The golden cases of the quantised linear layers (tests/golden/qlinear/<type>/,
 * tools/gen_qlinear_golden.py: random raw blocks of one ggml type, x, and gguf-py's float64
 * product): loaded and the weight uploaded, for tests/test_qlinear.c and test_qlinear_int8.c.
 */
#ifndef CLATTN_TEST_QLINEAR_GOLDEN_H
#define CLATTN_TEST_QLINEAR_GOLDEN_H

#include "clattn/npy.h"
#include "ops/qlinear.h"

#include <stddef.h>
#include <stdint.h>

typedef struct qlinear_golden {
    clattn_qweight w;      /* the weight on the device */
    uint32_t type;         /* its ggml type */
    size_t n, k, m;
    unsigned char *bytes;  /* the weight's raw blocks, n rows */
    float *x;              /* [m, k] */
    float *y, *yabs;       /* [m, n]: the product and Σ|x·w| in float64, rounded */
    float *ydq;            /* [m, n] |x|·|a·q|ᵀ for the types decoded with fma, else NULL */
    clattn_npy_array *arrays[4];
} qlinear_golden;

/* Loads tests/golden/qlinear/<type> and uploads its weight (a failure fails the test). */
void qlinear_golden_load(clattn_context *ctx, const char *type, qlinear_golden *g);
void qlinear_golden_free(qlinear_golden *g);

/* A device buffer of `floats` floats, copied from init when it is not NULL. */
cl_mem qlinear_test_buffer(clattn_context *ctx, size_t floats, const float *init);
/* Reads `floats` floats of mem into out (blocking). */
void qlinear_test_read(clattn_context *ctx, cl_mem mem, size_t floats, float *out);

#endif
