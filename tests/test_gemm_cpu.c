/*
 * The CPU GEMM (src/runtime/gemm_cpu.c, cl/gemm_cpu.cl) against a double-precision reference: odd shapes
 * (edges in M, N and K), offsets and strides, every epilogue (bias, beta, relu, gelu), kernel
 * shapes other than the device's default (K blocking, float4/float8 panels, packed A), the argument
 * checks, and the CLATTN_GEMM_CPU override.
 */
#include "common/test_util.h"

#include "runtime/gemm_cpu.h"
#include "runtime/context_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gemm_case {
    size_t m, n, k, pad;
    int bias;
    float beta;
    clattn_gemm_cpu_act act;
} gemm_case;

static cl_mem upload(clattn_context *ctx, const float *x, size_t n)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              n * sizeof(float), (void *)x, &err);
    assert_int_equal(err, CL_SUCCESS);
    return m;
}

/* Runs one case with `g` and compares every element of C (inside and outside the window). */
static void run_case(clattn_context *ctx, clattn_gemm_cpu *g, const gemm_case *c, uint64_t seed)
{
    size_t lda = c->k + c->pad, ldb = c->k + 2 * c->pad, ldc = c->n + c->pad;
    size_t aoff = 3 * c->pad, boff = c->pad, coff = 2 * c->pad;
    size_t a_len = aoff + c->m * lda, b_len = boff + c->n * ldb, c_len = coff + c->m * ldc;
    float *A = malloc(a_len * sizeof(float)), *B = malloc(b_len * sizeof(float)),
          *C = malloc(c_len * sizeof(float)), *bias = malloc((c->n + 1) * sizeof(float)),
          *out = malloc(c_len * sizeof(float)), *want = malloc(c_len * sizeof(float));
    test_fill_uniform(A, a_len, seed, -1.0f, 1.0f);
    test_fill_uniform(B, b_len, seed + 1, -1.0f, 1.0f);
    test_fill_uniform(C, c_len, seed + 2, -1.0f, 1.0f);
    test_fill_uniform(bias, c->n + 1, seed + 3, -1.0f, 1.0f);
    memcpy(want, C, c_len * sizeof(float));
    for (size_t i = 0; i < c->m; i++)
        for (size_t j = 0; j < c->n; j++) {
            double s = 0;
            for (size_t l = 0; l < c->k; l++)
                s += (double)A[aoff + i * lda + l] * B[boff + j * ldb + l];
            if (c->bias)
                s += bias[1 + j];
            if (c->beta != 0.0f)
                s += (double)c->beta * C[coff + i * ldc + j];
            if (c->act == CLATTN_GEMM_CPU_ACT_RELU)
                s = s > 0 ? s : 0;
            else if (c->act == CLATTN_GEMM_CPU_ACT_GELU)
                s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            want[coff + i * ldc + j] = (float)s;
        }

    cl_mem dA = upload(ctx, A, a_len), dB = upload(ctx, B, b_len), dC = upload(ctx, C, c_len),
           dbias = upload(ctx, bias, c->n + 1), packed = NULL;
    assert_int_equal(clattn__gemm_cpu_pack_b(g, ctx->queue, c->n, c->k, dB, boff, ldb, &packed,
                                             NULL),
                     CLATTN_OK);
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, c->m, c->n, c->k, dA, aoff, lda, packed,
                                          c->bias ? dbias : NULL, 1, c->beta, dC, coff, ldc,
                                          c->act, NULL),
                     CLATTN_OK);
    assert_int_equal(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, c_len * sizeof(float), out, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    /* float accumulation over k terms of magnitude <= 1 */
    double tol = 1e-6 * (double)c->k + 1e-5;
    for (size_t i = 0; i < c_len; i++)
        if (!(fabs((double)out[i] - want[i]) <= tol))
            fail_msg("m %zu n %zu k %zu pad %zu bias %d beta %g act %d: C[%zu] = %.7g, want %.7g",
                     c->m, c->n, c->k, c->pad, c->bias, (double)c->beta, (int)c->act, i,
                     (double)out[i], (double)want[i]);
    clReleaseMemObject(dA);
    clReleaseMemObject(dB);
    clReleaseMemObject(dC);
    clReleaseMemObject(dbias);
    clReleaseMemObject(packed);
    free(A);
    free(B);
    free(C);
    free(bias);
    free(out);
    free(want);
}

static const gemm_case cases[] = {
    {1, 1, 1, 0, 0, 0.0f, CLATTN_GEMM_CPU_ACT_NONE},
    {7, 13, 5, 0, 0, 0.0f, CLATTN_GEMM_CPU_ACT_NONE},
    {7, 13, 5, 2, 1, -1.5f, CLATTN_GEMM_CPU_ACT_RELU},
    {129, 257, 65, 0, 0, 0.0f, CLATTN_GEMM_CPU_ACT_NONE},
    {129, 257, 65, 3, 1, 0.0f, CLATTN_GEMM_CPU_ACT_RELU},
    {129, 257, 65, 1, 1, 0.5f, CLATTN_GEMM_CPU_ACT_GELU},
    {33, 32, 300, 1, 0, 1.0f, CLATTN_GEMM_CPU_ACT_NONE},
    {64, 64, 64, 0, 1, 0.0f, CLATTN_GEMM_CPU_ACT_GELU},
    {3, 100, 1, 4, 1, 2.0f, CLATTN_GEMM_CPU_ACT_RELU},
};

static void check_all(clattn_context *ctx, const clattn_gemm_cpu_params *params)
{
    char error[1024] = "";
    clattn_gemm_cpu *g = NULL;
    clattn_status s = clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, params, &g, error,
                                              sizeof(error));
    if (s != CLATTN_OK)
        fail_msg("clattn__gemm_cpu_create: %s", error);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(ctx, g, &cases[i], 100 + i);
    clattn__gemm_cpu_release(g);
}

static void test_default_parameters(void **state)
{
    check_all(*state, NULL);
}

static void test_other_shapes(void **state)
{
    /* K blocks (several, and a partial last one), narrow panels, several micro-tiles per
     * work-item, float4 and float8 vectors, A packed per call (with and without K blocks) */
    static const clattn_gemm_cpu_params variants[] = {
        {16, 2, 12, 16, 0, 0}, {8, 1, 3, 7, 2, 0}, {4, 3, 5, 0, 3, 0}, {8, 2, 6, 64, 1, 0},
        {16, 2, 12, 0, 0, 1}, {8, 1, 5, 16, 2, 1}};
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
        check_all(*state, &variants[i]);
}

static void test_invalid_arguments(void **state)
{
    clattn_context *ctx = *state;
    clattn_gemm_cpu *g = NULL;
    char error[256] = "";
    clattn_gemm_cpu_params bad = {3, 0, 0, 0, 0, 0};
    assert_int_equal(clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, &bad, &g, error,
                                             sizeof(error)),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    assert_non_null(strstr(error, "vw=3"));
    assert_int_equal(clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, NULL, &g, error,
                                             sizeof(error)),
                     CLATTN_OK);
    float x[64] = {0};
    cl_mem buf = upload(ctx, x, 64), packed = NULL;
    /* ldb < k */
    assert_int_equal(clattn__gemm_cpu_pack_b(g, ctx->queue, 2, 8, buf, 0, 4, &packed, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_null(packed);
    assert_int_equal(clattn__gemm_cpu_pack_b(g, ctx->queue, 2, 8, buf, 0, 8, &packed, NULL),
                     CLATTN_OK);
    /* lda < k, ldc < n, an unknown activation, k 0 */
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, 2, 2, 8, buf, 0, 4, packed, NULL, 0, 0.0f,
                                          buf, 0, 2, CLATTN_GEMM_CPU_ACT_NONE, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, 2, 2, 8, buf, 0, 8, packed, NULL, 0, 0.0f,
                                          buf, 0, 1, CLATTN_GEMM_CPU_ACT_NONE, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, 2, 2, 8, buf, 0, 8, packed, NULL, 0, 0.0f,
                                          buf, 0, 2, (clattn_gemm_cpu_act)7, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn__gemm_cpu_error(g), "act=7"));
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, 2, 2, 0, buf, 0, 8, packed, NULL, 0, 0.0f,
                                          buf, 0, 2, CLATTN_GEMM_CPU_ACT_NONE, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    /* m or n of 0: nothing to do */
    assert_int_equal(clattn__gemm_cpu_run(g, ctx->queue, 0, 2, 8, buf, 0, 8, packed, NULL, 0, 0.0f,
                                          buf, 0, 2, CLATTN_GEMM_CPU_ACT_NONE, NULL),
                     CLATTN_OK);
    assert_int_equal(clattn__gemm_cpu_packed_bytes(g, 1, 3),
                     (size_t)clattn__gemm_cpu_params(g).vw * clattn__gemm_cpu_params(g).nv * 3 *
                         sizeof(float));
    clReleaseMemObject(packed);
    clReleaseMemObject(buf);
    clattn__gemm_cpu_release(g);
}

/* CLATTN_GEMM_CPU replaces the derived parameters and the override's fields; a bad pair is
 * refused naming it. */
static void test_environment_override(void **state)
{
    clattn_context *ctx = *state;
    clattn_gemm_cpu *g = NULL;
    char error[256] = "";
    const clattn_gemm_cpu_params derived = {0}, override = {8, 2, 6, 0, 0, 0};
    setenv("CLATTN_GEMM_CPU", " nv = 1, mr=5,pa=1,kc=16", 1);
    clattn_status s = clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, &override, &g, error,
                                              sizeof(error));
    if (s != CLATTN_OK)
        fail_msg("clattn__gemm_cpu_create: %s", error);
    clattn_gemm_cpu_params p = clattn__gemm_cpu_params(g);
    assert_int_equal(p.vw, 8);
    assert_int_equal(p.nv, 1);
    assert_int_equal(p.mr, 5);
    assert_int_equal(p.kc, 16);
    assert_int_equal(p.pack_a, 1);
    run_case(ctx, g, &cases[0], 100);
    clattn__gemm_cpu_release(g);
    g = NULL;
    setenv("CLATTN_GEMM_CPU", "mr=5,nv=9", 1);
    assert_int_equal(clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, &derived, &g, error,
                                             sizeof(error)),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    assert_string_equal(error, "CLATTN_GEMM_CPU: \"nv=9\": nv is out of its range 1..8");
    setenv("CLATTN_GEMM_CPU", "vw=3", 1);
    assert_int_equal(clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, NULL, &g, error,
                                             sizeof(error)),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "vw=3 (2, 4, 8, 16)"));
    unsetenv("CLATTN_GEMM_CPU");
}

static int setup(void **state)
{
    test_require_device();
    unsetenv("CLATTN_GEMM_CPU");
    clattn_context *ctx = test_context_create(NULL);
    if (!ctx)
        return -1;
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
        cmocka_unit_test(test_default_parameters),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_environment_override),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
