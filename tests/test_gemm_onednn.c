/*
 * The oneDNN GEMM provider (src/runtime/gemm_onednn.c, tuning gemm_kernel 2) through
 * clattn__gemm_weighted, against a double-precision reference: odd shapes (edges of oneDNN's
 * 16 x 64 weight blocks in N and K, one row, one column), offsets and strides of A, W and C (the
 * elements of C outside the window untouched), bias and the fused activations (relu, gelu,
 * gelu_tanh) or one left to the caller (silu); every row's bytes the same whatever the row count
 * (batch invariance); a weight kept only in oneDNN's layout, run by CLBlast and the CPU GEMM
 * (unpacked on the fly) and back. Skipped (77) in builds without oneDNN or on devices that are
 * not CPUs.
 */
#include "common/test_util.h"

#include "base/constants.h"
#include "runtime/context_internal.h"
#include "runtime/gemm.h"
#include "runtime/gemm_onednn.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gemm_case {
    size_t m, n, k, pad;
    int bias;
    int act; /* CLATTN_ACT_* */
} gemm_case;

static cl_mem upload(clattn_context *ctx, const float *x, size_t n)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              n * sizeof(float), (void *)x, &err);
    assert_int_equal(err, CL_SUCCESS);
    return m;
}

static double activate(int act, double s)
{
    switch (act) {
    case CLATTN_ACT_RELU: return s > 0 ? s : 0;
    case CLATTN_ACT_GELU: return 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
    case CLATTN_ACT_GELU_TANH:
        return 0.5 * s * (1.0 + tanh(sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
    default: return s;
    }
}

/* One case's host data and its expected C (the window computed in double, the rest as it was). */
typedef struct gemm_data {
    size_t lda, ldb, ldc, aoff, boff, coff, a_len, b_len, c_len;
    float *A, *B, *C, *bias, *want;
} gemm_data;

/* x rounded to bfloat16 (to nearest even), as a float. */
static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof(u));
    return x;
}

static void find_outliers(const float *x, size_t count, bool *outlier);
static void plant_outliers(const gemm_case *c, gemm_data *d);

/* With `bf16`, the reference rounds A and W to bfloat16 first (what CLATTN_PRECISION_BF16
 * computes with), then sums in double, but for A's outliers (find_outliers), which it takes
 * unrounded with the unrounded W. With `plant`, A gets outliers (plant_outliers); *rows_with
 * (may be NULL) receives how many rows have some. */
static void data_make_in(const gemm_case *c, uint64_t seed, bool apply_act, bool bf16,
                         bool plant, gemm_data *d, size_t *rows_with);

static void data_make(const gemm_case *c, uint64_t seed, bool apply_act, gemm_data *d)
{
    data_make_in(c, seed, apply_act, false, false, d, NULL);
}

static void data_make_in(const gemm_case *c, uint64_t seed, bool apply_act, bool bf16,
                         bool plant, gemm_data *d, size_t *rows_with)
{
    d->lda = c->k + c->pad, d->ldb = c->k + 2 * c->pad, d->ldc = c->n + c->pad;
    d->aoff = 3 * c->pad, d->boff = c->pad, d->coff = 2 * c->pad;
    d->a_len = d->aoff + c->m * d->lda, d->b_len = d->boff + c->n * d->ldb;
    d->c_len = d->coff + c->m * d->ldc;
    d->A = malloc(d->a_len * sizeof(float)), d->B = malloc(d->b_len * sizeof(float));
    d->C = malloc(d->c_len * sizeof(float)), d->bias = malloc((c->n + 1) * sizeof(float));
    d->want = malloc(d->c_len * sizeof(float));
    test_fill_uniform(d->A, d->a_len, seed, -1.0f, 1.0f);
    test_fill_uniform(d->B, d->b_len, seed + 1, -1.0f, 1.0f);
    test_fill_uniform(d->C, d->c_len, seed + 2, -1.0f, 1.0f);
    test_fill_uniform(d->bias, c->n + 1, seed + 3, -1.0f, 1.0f);
    memcpy(d->want, d->C, d->c_len * sizeof(float));
    if (plant)
        plant_outliers(c, d);
    bool *outlier = calloc(c->k, sizeof(bool));
    if (rows_with)
        *rows_with = 0;
    for (size_t i = 0; i < c->m; i++) {
        if (bf16)
            find_outliers(d->A + d->aoff + i * d->lda, c->k, outlier);
        if (rows_with)
            for (size_t l = 0; l < c->k; l++)
                if (outlier[l]) {
                    ++*rows_with;
                    break;
                }
        for (size_t j = 0; j < c->n; j++) {
            double s = 0;
            for (size_t l = 0; l < c->k; l++)
                s += bf16 && !outlier[l]
                         ? (double)bf16_round(d->A[d->aoff + i * d->lda + l]) *
                               bf16_round(d->B[d->boff + j * d->ldb + l])
                         : (double)d->A[d->aoff + i * d->lda + l] * d->B[d->boff + j * d->ldb + l];
            if (c->bias)
                s += d->bias[1 + j];
            d->want[d->coff + i * d->ldc + j] = (float)(apply_act ? activate(c->act, s) : s);
        }
    }
    free(outlier);
}

static void data_free(gemm_data *d)
{
    free(d->A), free(d->B), free(d->C), free(d->bias), free(d->want);
}

/* Runs one case through clattn__gemm_weighted on the context's tuning; checks every element of
 * C (inside and outside the window) and what the GEMM left to the caller. */
static void run_case_in(clattn_context *ctx, const gemm_case *c, uint64_t seed, bool bf16,
                        bool plant, size_t *rows_with)
{
    gemm_data d;
    bool fused = c->act != CLATTN_ACT_SILU;
    data_make_in(c, seed, fused, bf16, plant, &d, rows_with);
    cl_mem dA = upload(ctx, d.A, d.a_len), dB = upload(ctx, d.B, d.b_len),
           dC = upload(ctx, d.C, d.c_len), dbias = upload(ctx, d.bias, c->n + 1);
    clattn_gemm_weight w = {dB, d.boff, c->n, c->k, d.ldb, NULL, NULL, NULL};
    clattn_gemm_left left;
    assert_int_equal(clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, c->m, dA, d.aoff, d.lda, &w,
                                           c->bias ? dbias : NULL, 1, c->act, dC, d.coff, d.ldc,
                                           &left),
                     CLATTN_OK);
    assert_non_null(w.onednn); /* oneDNN ran it */
    assert_false(left.bias);
    assert_int_equal(left.act, fused ? CLATTN_ACT_NONE : c->act);
    float *out = malloc(d.c_len * sizeof(float));
    assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, d.c_len * sizeof(float), out,
                                         0, NULL, NULL),
                     CL_SUCCESS);
    /* float accumulation over k terms of magnitude <= 1 */
    double tol = 1e-6 * (double)c->k + 1e-5;
    for (size_t i = 0; i < d.c_len; i++)
        if (!(fabs((double)out[i] - d.want[i]) <= tol))
            fail_msg("m %zu n %zu k %zu pad %zu bias %d act %d: C[%zu] = %.7g, want %.7g", c->m,
                     c->n, c->k, c->pad, c->bias, c->act, i, (double)out[i], (double)d.want[i]);
    clattn__gemm_weight_release(&w);
    clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dC);
    clReleaseMemObject(dbias);
    free(out);
    data_free(&d);
}

static void run_case(clattn_context *ctx, const gemm_case *c, uint64_t seed)
{
    run_case_in(ctx, c, seed, false, false, NULL);
}

static const gemm_case cases[] = {
    {1, 1, 1, 0, 0, CLATTN_ACT_NONE},
    {7, 13, 5, 0, 0, CLATTN_ACT_NONE},
    {7, 13, 5, 2, 1, CLATTN_ACT_RELU},
    {129, 257, 65, 0, 0, CLATTN_ACT_NONE},
    {129, 257, 65, 3, 1, CLATTN_ACT_RELU},
    {129, 257, 65, 1, 1, CLATTN_ACT_GELU},
    {33, 65, 17, 5, 1, CLATTN_ACT_GELU_TANH},
    {33, 32, 300, 1, 0, CLATTN_ACT_NONE},
    {64, 64, 64, 0, 1, CLATTN_ACT_GELU},
    {3, 100, 1, 4, 1, CLATTN_ACT_RELU},
    {1, 384, 1536, 0, 1, CLATTN_ACT_NONE},
    {5, 7, 9, 1, 1, CLATTN_ACT_SILU}, /* not fused: left to the caller */
};

static void against_the_reference(void **state)
{
    clattn_context *ctx = *state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(ctx, &cases[i], 100 + i);
}

/* CLATTN_PRECISION_BF16: the same cases against the reference on bfloat16-rounded A and W (float
 * accumulation in both), then cases with outliers planted in A (their products in float32).
 * Skipped where the CPU or the device cannot run bf16. */
static void bf16_against_the_reference(void **state)
{
    (void)state;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.precision = CLATTN_PRECISION_BF16;
    clattn_context *ctx = NULL;
    clattn_status status = clattn_context_create(&ctx, &params);
    if (status == CLATTN_ERROR_UNSUPPORTED) {
        printf("    skipped: %s\n", clattn_last_error(NULL));
        skip();
    }
    assert_int_equal(status, CLATTN_OK);
    size_t rows = 0, with = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_case_in(ctx, &cases[i], 300 + i, true, false, &rows);
        assert_int_equal(rows, 0); /* uniform rows have none */
    }
    static const gemm_case planted[] = {
        {37, 1536, 384, 0, 1, CLATTN_ACT_GELU}, {64, 384, 1536, 2, 1, CLATTN_ACT_NONE},
        {16, 70, 300, 1, 1, CLATTN_ACT_RELU},   {5, 64, 4096, 0, 0, CLATTN_ACT_NONE},
    };
    for (size_t i = 0; i < sizeof(planted) / sizeof(planted[0]); i++) {
        run_case_in(ctx, &planted[i], 350 + i, true, true, &rows);
        with += rows;
    }
    printf("    %zu rows with outliers\n", with);
    assert_true(with >= 40);
    clattn_context_destroy(&ctx);
}

/* A row's outliers as CLATTN_PRECISION_INT8 documents them: the elements above 8 times the row's
 * root mean square, the limit doubled while more than 32 are above it. Marks them in outlier[]. */
static void find_outliers(const float *x, size_t count, bool *outlier)
{
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += (double)x[i] * x[i];
    double limit = 8 * sqrt(sum / (double)count);
    size_t above;
    do {
        above = 0;
        for (size_t i = 0; i < count; i++)
            above += fabs((double)x[i]) > limit;
        if (above > 32)
            limit *= 2;
    } while (above > 32);
    for (size_t i = 0; i < count; i++)
        outlier[i] = fabs((double)x[i]) > limit;
}

/* Symmetric int8 of a row, as CLATTN_PRECISION_INT8 documents it: scale = max |x| / 127 over the
 * elements that are not outliers (1 for zeros), q = x·(1 / scale) rounded to nearest, halves
 * away from zero; outliers get q = 0. outlier NULL: none. */
static float quantize(const float *x, size_t count, const bool *outlier, int *q)
{
    float max = 0;
    for (size_t i = 0; i < count; i++)
        if (!outlier || !outlier[i])
            max = fabsf(x[i]) > max ? fabsf(x[i]) : max;
    float scale = max > 0 ? max / 127.0f : 1.0f, inverse = 1.0f / scale;
    for (size_t i = 0; i < count; i++) {
        float r = x[i] * inverse;
        q[i] = outlier && outlier[i] ? 0 : (int)(r >= 0 ? r + 0.5f : r - 0.5f);
    }
    return scale;
}

/* Plants outliers in A's rows, by the row number: none in rows 0, 3, 6, ...; one to three of 40
 * to 170 times the others' magnitude in the others (nothing in rows with k < 64, where they would
 * not stand out: the reference decides either way); in case k 4096, 33 equal ones in row 1, more
 * than a row may have, so that the doubled limit leaves none, and 32 in row 2, exactly as many as
 * a row may have, so that all are kept (±3 among the others scaled to ±1/16: the limit, 8 times
 * the row's root mean square, is then 2.14, and the float32 sum of 32 outliers' products stays
 * well within the tolerance). */
static void plant_outliers(const gemm_case *c, gemm_data *d)
{
    for (size_t i = 0; i < c->m; i++) {
        float *row = d->A + d->aoff + i * d->lda;
        if (c->k == 4096 && i == 1) {
            for (size_t o = 0; o < 33; o++)
                row[(o * 97 + 5) % c->k] = o % 2 ? 60.0f : -60.0f;
            continue;
        }
        if (c->k == 4096 && i == 2) {
            for (size_t l = 0; l < c->k; l++)
                row[l] /= 16.0f;
            for (size_t o = 0; o < 32; o++)
                row[(o * 97 + 5) % c->k] = o % 2 ? 3.0f : -3.0f;
            continue;
        }
        if (i % 3 == 0 || c->k < 64)
            continue;
        for (size_t o = 0; o < i % 3 + (i % 5 == 1); o++)
            row[(i * 31 + o * 211) % c->k] = (o % 2 ? -1.0f : 1.0f) * (40.0f + 65.0f * (float)o);
    }
}

/* CLATTN_PRECISION_INT8: C = act((Σ qa·qw)·(scale_a[i]·scale_w[j]) + Σ_outliers x·(scale_w[j]·qw)
 * + bias) for ReLU and the GELUs (others are left to the caller), against that computed here with
 * 64-bit integer sums (the outliers' products and the activation in double), with outliers
 * planted in A (plant_outliers) and without. Skipped without VNNI or AMX. */
static void int8_against_the_reference(void **state)
{
    (void)state;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.precision = CLATTN_PRECISION_INT8;
    clattn_context *ctx = NULL;
    clattn_status status = clattn_context_create(&ctx, &params);
    if (status == CLATTN_ERROR_UNSUPPORTED) {
        printf("    skipped: %s\n", clattn_last_error(NULL));
        skip();
    }
    assert_int_equal(status, CLATTN_OK);
    static const gemm_case int8_cases[] = {
        {1, 1, 1, 0, 0, CLATTN_ACT_NONE},   {7, 13, 5, 2, 1, CLATTN_ACT_RELU},
        {129, 257, 65, 3, 1, CLATTN_ACT_GELU}, {33, 65, 300, 1, 0, CLATTN_ACT_NONE},
        {64, 384, 1536, 0, 1, CLATTN_ACT_NONE}, {37, 1536, 384, 0, 1, CLATTN_ACT_RELU},
        {37, 1536, 384, 0, 1, CLATTN_ACT_GELU}, {9, 70, 30, 2, 1, CLATTN_ACT_GELU_TANH},
        {5, 7, 9, 1, 1, CLATTN_ACT_SILU},
        /* with outliers planted in A */
        {37, 1536, 384, 0, 1, CLATTN_ACT_GELU}, {64, 384, 1536, 2, 1, CLATTN_ACT_NONE},
        {16, 70, 300, 1, 1, CLATTN_ACT_RELU},   {5, 64, 4096, 0, 0, CLATTN_ACT_NONE},
    };
    const size_t planted_from = 9;
    size_t planted_rows = 0; /* rows with outliers, in all: the cases did exercise them */
    size_t full_rows = 0;    /* rows with exactly 32, as many as a row may keep */
    for (size_t t = 0; t < sizeof(int8_cases) / sizeof(int8_cases[0]); t++) {
        const gemm_case *c = &int8_cases[t];
        gemm_data d;
        data_make(c, 500 + t, false, &d);
        if (t >= planted_from)
            plant_outliers(c, &d);
        int *qa = malloc(c->m * c->k * sizeof(int)), *qw = malloc(c->n * c->k * sizeof(int));
        float *sa = malloc(c->m * sizeof(float)), *sw = malloc(c->n * sizeof(float));
        bool *outlier = malloc(c->m * c->k * sizeof(bool));
        for (size_t i = 0; i < c->m; i++) {
            find_outliers(d.A + d.aoff + i * d.lda, c->k, outlier + i * c->k);
            size_t count = 0;
            for (size_t l = 0; l < c->k; l++)
                count += outlier[i * c->k + l];
            bool any = count > 0;
            planted_rows += any;
            full_rows += count == 32;
            if (t < planted_from)
                assert_false(any); /* uniform rows have none */
            sa[i] = quantize(d.A + d.aoff + i * d.lda, c->k, outlier + i * c->k, qa + i * c->k);
        }
        for (size_t j = 0; j < c->n; j++)
            sw[j] = quantize(d.B + d.boff + j * d.ldb, c->k, NULL, qw + j * c->k);
        for (size_t i = 0; i < c->m; i++)
            for (size_t j = 0; j < c->n; j++) {
                long long acc = 0;
                double extra = 0;
                for (size_t l = 0; l < c->k; l++) {
                    acc += (long long)qa[i * c->k + l] * qw[j * c->k + l];
                    if (outlier[i * c->k + l])
                        extra += (double)d.A[d.aoff + i * d.lda + l] * sw[j] * qw[j * c->k + l];
                }
                double v = (double)((float)acc * (sa[i] * sw[j])) + extra +
                           (c->bias ? d.bias[1 + j] : 0.0);
                d.want[d.coff + i * d.ldc + j] = (float)activate(c->act, v);
            }
        cl_mem dA = upload(ctx, d.A, d.a_len), dB = upload(ctx, d.B, d.b_len),
               dC = upload(ctx, d.C, d.c_len), dbias = upload(ctx, d.bias, c->n + 1);
        clattn_gemm_weight w = {dB, d.boff, c->n, c->k, d.ldb, NULL, NULL, NULL};
        clattn_gemm_left left;
        assert_int_equal(clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, c->m, dA, d.aoff, d.lda, &w,
                                               c->bias ? dbias : NULL, 1, c->act, dC, d.coff,
                                               d.ldc, &left),
                         CLATTN_OK);
        assert_false(left.bias);
        /* int8 applies ReLU and the GELUs, and leaves SiLU to the caller */
        assert_int_equal(left.act, c->act == CLATTN_ACT_SILU ? CLATTN_ACT_SILU : CLATTN_ACT_NONE);
        float *out = malloc(d.c_len * sizeof(float));
        assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, d.c_len * sizeof(float),
                                             out, 0, NULL, NULL),
                         CL_SUCCESS);
        for (size_t i = 0; i < d.c_len; i++)
            if (!(fabs((double)out[i] - d.want[i]) <= 1e-5 * (1 + fabs((double)d.want[i]))))
                fail_msg("int8 m %zu n %zu k %zu: C[%zu] = %.7g, want %.7g", c->m, c->n, c->k, i,
                         (double)out[i], (double)d.want[i]);
        clattn__gemm_weight_release(&w);
        clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dC);
        clReleaseMemObject(dbias);
        free(out), free(qa), free(qw), free(sa), free(sw), free(outlier);
        data_free(&d);
    }
    printf("    %zu rows with outliers, %zu with 32\n", planted_rows, full_rows);
    assert_true(planted_rows >= 40);
    assert_int_equal(full_rows, 1);
    clattn_context_destroy(&ctx);
}

/* Batch invariance: each row of a 37-row product, computed alone and inside blocks of other row
 * counts (1, 2, 5, 16, 36 rows from it), has the same bytes; K 1536 and 384 (MiniLM's
 * feed-forward and attention widths). With `plant`, every third row has an outlier (bf16's and
 * int8's decomposition). */
static void check_row_invariance(clattn_context *ctx, bool plant)
{
    static const size_t shapes[][2] = {{384, 1536}, {1536, 384}, {96, 384}};
    const size_t M = 37;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        size_t n = shapes[s][0], k = shapes[s][1];
        float *A = malloc(M * k * sizeof(float)), *B = malloc(n * k * sizeof(float)),
              *bias = malloc(n * sizeof(float)), *all = malloc(M * n * sizeof(float)),
              *part = malloc(M * n * sizeof(float));
        test_fill_uniform(A, M * k, 7 + s, -1, 1);
        for (size_t i = 1; plant && i < M; i += 3)
            A[i * k + (i * 37) % k] = i % 2 ? 75.0f : -75.0f;
        test_fill_uniform(B, n * k, 8 + s, -1, 1);
        test_fill_uniform(bias, n, 9 + s, -1, 1);
        cl_mem dA = upload(ctx, A, M * k), dB = upload(ctx, B, n * k), dbias = upload(ctx, bias, n),
               dC = upload(ctx, all, M * n);
        clattn_gemm_weight w = {dB, 0, n, k, k, NULL, NULL, NULL};
        clattn_gemm_left left;
        assert_int_equal(clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, M, dA, 0, k, &w, dbias, 0,
                                               CLATTN_ACT_GELU, dC, 0, n, &left),
                         CLATTN_OK);
        assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, M * n * sizeof(float),
                                             all, 0, NULL, NULL),
                         CL_SUCCESS);
        static const size_t blocks[] = {1, 2, 5, 16, 36};
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
            for (size_t r0 = 0; r0 < M; r0 += blocks[b]) {
                size_t rows = r0 + blocks[b] <= M ? blocks[b] : M - r0;
                assert_int_equal(clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, rows, dA, r0 * k, k,
                                                       &w, dbias, 0, CLATTN_ACT_GELU, dC, r0 * n,
                                                       n, &left),
                                 CLATTN_OK);
            }
            assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0,
                                                 M * n * sizeof(float), part, 0, NULL, NULL),
                             CL_SUCCESS);
            if (memcmp(part, all, M * n * sizeof(float)) != 0)
                fail_msg("n %zu k %zu: rows in blocks of %zu differ from the 37-row product", n, k,
                         blocks[b]);
        }
        clattn__gemm_weight_release(&w);
        clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dbias);
        clReleaseMemObject(dC);
        free(A), free(B), free(bias), free(all), free(part);
    }
}

/* Float32: where oneDNN's matmul is brgemm (clattn__onednn_f32_row_invariant), the rows keep
 * their bytes; elsewhere (AVX2's jit sgemm, whose rows change with the row count) the default
 * tuning must not choose oneDNN, so that the library's defaults stay batch-invariant (an
 * explicit gemm_kernel 2 is then the caller's choice; the other tests check its accuracy). */
static void rows_are_the_same_whatever_the_row_count(void **state)
{
    clattn_context *ctx = *state;
    if (clattn__onednn_f32_row_invariant()) {
        check_row_invariance(ctx, false);
        return;
    }
    clattn_context *plain = test_context_create(NULL);
    assert_non_null(plain);
    clattn_tuning tuning;
    assert_int_equal(clattn_context_get_tuning(plain, &tuning), CLATTN_OK);
    printf("    oneDNN's float32 matmul is not brgemm here: the default GEMM is %d, not oneDNN\n",
           tuning.gemm_kernel);
    assert_int_not_equal(tuning.gemm_kernel, 2);
    clattn_context_destroy(&plain);
}

/* The same for bf16 and int8, with outliers in some rows; each skipped where it cannot run. */
static void reduced_precision_rows_are_the_same_whatever_the_row_count(void **state)
{
    (void)state;
    static const int precisions[] = {CLATTN_PRECISION_BF16, CLATTN_PRECISION_INT8};
    for (size_t p = 0; p < 2; p++) {
        clattn_context_params params;
        clattn_context_params_default(&params);
        params.precision = precisions[p];
        clattn_context *ctx = NULL;
        clattn_status status = clattn_context_create(&ctx, &params);
        if (status == CLATTN_ERROR_UNSUPPORTED) {
            printf("    precision %d skipped: %s\n", precisions[p], clattn_last_error(NULL));
            continue;
        }
        assert_int_equal(status, CLATTN_OK);
        /* On a CPU with AMX the library keeps oneDNN off it (gemm_onednn.c's cap_isa): oneDNN
         * chose AMX for some row counts only, and its bytes differ (37 rows on AMX, 1 row on
         * AVX512_BF16 gave other results for 96 columns). */
        void *dnnl = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
        assert_non_null(dnnl);
        int (*effective)(void) = NULL;
        *(void **)&effective = dlsym(dnnl, "dnnl_get_effective_cpu_isa");
        assert_non_null(effective);
        const unsigned amx = 0x3e7; /* dnnl_cpu_isa_avx512_core_amx (oneapi/dnnl/dnnl_types.h) */
        if (((unsigned)effective() & amx) == amx)
            fail_msg("oneDNN dispatches to AMX (effective ISA %#x)", (unsigned)effective());
        dlclose(dnnl);
        check_row_invariance(ctx, true);
        clattn_context_destroy(&ctx);
    }
}

/* A weight packed for oneDNN and its buffer released (as the layers do) runs on CLBlast and on
 * the CPU GEMM too (unpacked from oneDNN's layout), to float rounding, and on oneDNN again with
 * the first bytes. */
static void weight_kept_only_in_onednn_layout(void **state)
{
    clattn_context *ctx = *state;
    const gemm_case c = {9, 70, 33, 0, 1, CLATTN_ACT_RELU};
    gemm_data d;
    data_make(&c, 55, true, &d);
    cl_mem dA = upload(ctx, d.A, d.a_len), dB = upload(ctx, d.B, d.b_len),
           dC = upload(ctx, d.C, d.c_len), dbias = upload(ctx, d.bias, c.n + 1);
    clattn_gemm_weight w = {dB, d.boff, c.n, c.k, d.ldb, NULL, NULL, NULL};
    bool packed;
    assert_int_equal(clattn__gemm_weight_pack(ctx, &w, &packed), CLATTN_OK);
    assert_true(packed && w.onednn && !w.packed);
    clReleaseMemObject(dB);
    w.mem = NULL;
    clattn_tuning saved, tuning;
    assert_int_equal(clattn_context_get_tuning(ctx, &saved), CLATTN_OK);
    float out[4][9 * 70];
    for (int run = 0; run < 4; run++) {
        tuning = saved;
        tuning.gemm_kernel = run == 1 ? 0 : run == 2 ? 1 : 2;
        assert_int_equal(clattn_context_set_tuning(ctx, &tuning), CLATTN_OK);
        clattn_gemm_left left;
        assert_int_equal(clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, c.m, dA, d.aoff, d.lda, &w,
                                               dbias, 1, c.act, dC, d.coff, d.ldc, &left),
                         CLATTN_OK);
        if (left.bias || left.act != CLATTN_ACT_NONE) /* CLBlast: the caller's epilogue */
            assert_true(run == 1 && left.bias && left.act == CLATTN_ACT_RELU);
        assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, sizeof(out[run]),
                                             out[run], 0, NULL, NULL),
                         CL_SUCCESS);
        if (run == 1) /* what the caller would add */
            for (size_t i = 0; i < c.m * c.n; i++) {
                double s = out[1][i] + d.bias[1 + i % c.n];
                out[1][i] = (float)(s > 0 ? s : 0);
            }
    }
    assert_int_equal(clattn_context_set_tuning(ctx, &saved), CLATTN_OK);
    assert_close(out[0], d.want, c.m * c.n, 1e-4);
    assert_close(out[1], out[0], c.m * c.n, 1e-5);
    assert_close(out[2], out[0], c.m * c.n, 1e-5);
    assert_memory_equal(out[3], out[0], sizeof(out[0]));
    assert_non_null(w.packed); /* the CPU GEMM's form, made from the unpacked weight */
    clattn__gemm_weight_release(&w);
    clReleaseMemObject(dA), clReleaseMemObject(dC), clReleaseMemObject(dbias);
    data_free(&d);
}

static int setup(void **state)
{
    test_require_device();
    clattn_context *ctx = test_context_create(NULL);
    if (!ctx)
        return -1;
    clattn_tuning tuning;
    if (clattn_context_get_tuning(ctx, &tuning) != CLATTN_OK)
        return -1;
    tuning.gemm_kernel = 2;
    if (clattn_context_set_tuning(ctx, &tuning) != CLATTN_OK) {
        printf("SKIP: gemm_kernel 2 is not available: %s\n", clattn_last_error(ctx));
        clattn_context_destroy(&ctx);
        exit(TEST_SKIP_EXIT);
    }
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    clattn_context *ctx = *state;
    clattn_context_destroy(&ctx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(against_the_reference),
        cmocka_unit_test(bf16_against_the_reference),
        cmocka_unit_test(reduced_precision_rows_are_the_same_whatever_the_row_count),
        cmocka_unit_test(int8_against_the_reference),
        cmocka_unit_test(rows_are_the_same_whatever_the_row_count),
        cmocka_unit_test(weight_kept_only_in_onednn_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
