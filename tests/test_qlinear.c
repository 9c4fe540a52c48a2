/*
 * Linear layers on quantised weights (src/ops/qlinear.c, cl/qlinear.cl), every ggml type the
 * library runs, against tests/golden/qlinear (tools/gen_qlinear_golden.py: gguf-py's
 * dequantisation of the same raw blocks, the product in float64):
 *
 *  - accuracy: each output within the rounding bound of the kernels' order (below) of the
 *    float64 product, on both paths, for m = 1, 3, 70;
 *  - batch invariance, by memcmp: every type's rows the same bytes for m = 1, 3, 70 on both
 *    paths; and, for F16, Q4_1, Q8_0 and Q6_K (one type per way of decoding), row r's bytes the
 *    same for m = 1, 2, 7, 32, 64, 300, at any position in the batch, with strided inputs and
 *    outputs, and from the matrix–vector and the matrix–matrix path alike;
 *  - the documented reduction order bit for bit (F32 weights, a host reference in that order);
 *  - both paths under other tilings (column tiles per type, work-items walking several tiles;
 *    the matrix–matrix tiles of the narrow and the wide types; the staged and the plain
 *    matrix–matrix kernels) give the same bytes, and each type takes its class's tile;
 *  - the staged matrix–matrix kernels run where they should (by default on CPU devices whose
 *    local memory is ordinary memory, where the decoded rows fit), the plain ones elsewhere;
 *  - the gate|up layer with SwiGLU fused into its epilogue (clattn__qlinear_swiglu): every
 *    type's rows, for m = 1, 5, 37 on both paths, the bytes of the plain kernel followed by
 *    clattn__qlinear_glu, which gives silu(gate)·up (computed here in double) within 2 ulp, on
 *    the golden's sums and on gate values across and past the exponential's range;
 *  - bad weights are refused with messages naming the numbers.
 *
 * The bound: every output is 16 chains of k/16 fused multiply-adds, then 4 additions (the
 * combining tree), all in float32. A chain of j roundings has error at most γ_j · Σ|terms|
 * (γ_j = j·u / (1 − j·u), u = 2^-24), so |y − y_exact| ≤ γ_{k/16+4} · Σ_l |x_l · w_l| (the
 * golden's yabs), plus u·|y| for the golden's own rounding to float32 when the test reads it.
 * The decoded weights are gguf-py's float32 values, except for the types decoded with one fma
 * (Q4_1, Q5_1, Q4_K, Q5_K: w = fma(a, q, m) where gguf-py rounds a·q first): there each weight
 * is within 2u·|w| + 3u·|a·q| of gguf-py's, which adds 2u · yabs + 3u · ydq (the golden's
 * |x|·|a·q|ᵀ).
 */
#include "common/qlinear_golden.h"
#include "common/test_util.h"

#include "formats/gguf.h"
#include "ops/elementwise.h"
#include "ops/qlinear.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {"f32",  "f16",  "bf16", "q4_0", "q4_1", "q5_0",
                                         "q5_1", "q8_0", "q4_k", "q5_k", "q6_k"};
#define TYPE_COUNT (sizeof(type_names) / sizeof(type_names[0]))

typedef struct fixture {
    clattn_context *ctx;
    clattn_qlinear_program *prog;
} fixture;

static int setup(void **state)
{
    test_require_device();
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    /* Profiled: the staging test reads which kernels ran (clattn_stats). */
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.log_level = CLATTN_LOG_NONE;
    params.profiling = 1;
    if (clattn_context_create(&f->ctx, &params) != CLATTN_OK)
        fail_msg("clattn_context_create: %s", clattn_last_error(NULL));
    assert_int_equal(clattn__qlinear_program_create(f->ctx, &f->prog), CLATTN_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f) /* setup failed before it set the state */
        return 0;
    clattn__qlinear_program_release(f->prog);
    clattn_context_destroy(&f->ctx);
    free(f);
    return 0;
}

typedef qlinear_golden golden;
#define golden_load qlinear_golden_load
#define golden_free qlinear_golden_free
#define buffer qlinear_test_buffer
#define read_back qlinear_test_read

/* y [m, ldy] = x [m rows from x_row of an [rows, ldx] array] · Wᵀ on `path`; y NaN-filled first
 * so that an element not written shows. */
static void run_layer(fixture *f, clattn_qlinear_program *prog, bool swiglu,
                      const clattn_qweight *w, clattn_qlinear_path path, size_t m, cl_mem x,
                      size_t x_row, size_t ldx, float *y, size_t ldy)
{
    float *init = malloc(m * ldy * sizeof(float));
    assert_non_null(init);
    for (size_t i = 0; i < m * ldy; i++)
        init[i] = NAN;
    cl_mem ym = buffer(f->ctx, m * ldy, init);
    free(init);
    clattn_status s =
        swiglu ? clattn__qlinear_swiglu_path(f->ctx, prog, CLATTN_OP_OTHER, path, m, x,
                                             x_row * ldx, ldx, w, ym, 0, ldy)
               : clattn__qlinear_path(f->ctx, prog, CLATTN_OP_OTHER, path, m, x, x_row * ldx,
                                      ldx, w, ym, 0, ldy);
    if (s != CLATTN_OK)
        fail_msg("clattn__qlinear%s: %s", swiglu ? "_swiglu" : "", clattn_last_error(f->ctx));
    read_back(f->ctx, ym, m * ldy, y);
    clReleaseMemObject(ym);
}

static void run_program(fixture *f, clattn_qlinear_program *prog, const clattn_qweight *w,
                        clattn_qlinear_path path, size_t m, cl_mem x, size_t x_row, size_t ldx,
                        float *y, size_t ldy)
{
    run_layer(f, prog, false, w, path, m, x, x_row, ldx, y, ldy);
}

static void run(fixture *f, const clattn_qweight *w, clattn_qlinear_path path, size_t m,
                cl_mem x, size_t x_row, size_t ldx, float *y, size_t ldy)
{
    run_program(f, f->prog, w, path, m, x, x_row, ldx, y, ldy);
}

static const clattn_qlinear_path paths[] = {CLATTN_QLINEAR_MV, CLATTN_QLINEAR_MM,
                                            CLATTN_QLINEAR_AUTO};
static const char *const path_names[] = {"mv", "mm", "auto"};

/* Accuracy against the float64 golden, every type, both paths; and every result's rows the
 * bytes of the first run's (the largest m on the matrix–vector path). */
static void golden_types(void **state)
{
    fixture *f = *state;
    const size_t ms[] = {70, 1, 3};
    const double u = ldexp(1.0, -24);
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        golden g;
        golden_load(f->ctx, type_names[t], &g);
        cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
        float *y = malloc(g.m * g.n * sizeof(float)), *first = malloc(g.m * g.n * sizeof(float));
        assert_true(y && first);
        size_t first_m = 0;
        const double j = (double)(g.k / 16 + 4), gamma = j * u / (1.0 - j * u);
        for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
            size_t m = ms[mi];
            if (test_small_mode() && m > 3)
                continue;
            for (size_t p = 0; p < 3; p++) {
                run(f, &g.w, paths[p], m, x, 0, g.k, y, g.n);
                for (size_t i = 0; i < m * g.n; i++) {
                    double decode = g.ydq ? 2.0 * u * g.yabs[i] + 3.0 * u * g.ydq[i] : 0.0;
                    double bound = (gamma * g.yabs[i] + decode) * (1.0 + 1e-5) + u * fabs(g.y[i]);
                    double err = fabs((double)y[i] - (double)g.y[i]);
                    if (!(err <= bound))
                        fail_msg("%s, m %zu, %s path: y[%zu, %zu] = %.9g, golden %.9g: error "
                                 "%.3g exceeds the bound %.3g",
                                 type_names[t], m, path_names[p], i / g.n, i % g.n, y[i],
                                 g.y[i], err, bound);
                }
                if (first_m == 0) {
                    memcpy(first, y, m * g.n * sizeof(float));
                    first_m = m;
                } else if (memcmp(y, first, (m < first_m ? m : first_m) * g.n * sizeof(float)))
                    fail_msg("%s, m %zu, %s path: not the bytes of m %zu on the mv path",
                             type_names[t], m, path_names[p], first_m);
            }
        }
        free(y);
        free(first);
        clReleaseMemObject(x);
        golden_free(&g);
    }
}

/* y = x · w in cl/qlinear.cl's documented order: 16 partial sums of fused multiply-adds over
 * the chunks of 16 in order, then the tree q[i] = p[i] + p[i + 8], s[i] = q[i] + q[i + 4],
 * t[i] = s[i] + s[i + 2], y = t[0] + t[1]. */
static float order_reference(const float *x, const float *w, size_t k)
{
    float p[16] = {0}, q[8], s[4], t[2];
    for (size_t c = 0; c < k / 16; c++)
        for (size_t i = 0; i < 16; i++)
            p[i] = fmaf(x[16 * c + i], w[16 * c + i], p[i]);
    for (size_t i = 0; i < 8; i++)
        q[i] = p[i] + p[i + 8];
    for (size_t i = 0; i < 4; i++)
        s[i] = q[i] + q[i + 4];
    for (size_t i = 0; i < 2; i++)
        t[i] = s[i] + s[i + 2];
    return t[0] + t[1];
}

/* The documented order bit for bit: an F32 weight (its values exact on the device) of 7 rows,
 * k = 96, 9 rows of x, on both paths (the matrix-matrix one staged where the device stages):
 * every output the host reference's bytes. */
static void reduction_order(void **state)
{
    fixture *f = *state;
    const size_t n = 7, k = 96, m = 9;
    float *w = malloc(n * k * sizeof(float)), *xs = malloc(m * k * sizeof(float));
    float *y = malloc(m * n * sizeof(float));
    assert_true(w && xs && y);
    test_fill_uniform(w, n * k, 31, -1.0f, 1.0f);
    test_fill_uniform(xs, m * k, 32, -1.0f, 1.0f);
    clattn_qweight qw;
    assert_int_equal(clattn__qweight_upload(f->ctx, CLATTN_GGML_F32, n, k, w,
                                            n * k * sizeof(float), &qw),
                     CLATTN_OK);
    cl_mem x = buffer(f->ctx, m * k, xs);
    for (size_t p = 0; p < 2; p++) {
        run(f, &qw, paths[p], m, x, 0, k, y, n);
        for (size_t r = 0; r < m; r++)
            for (size_t j = 0; j < n; j++) {
                float want = order_reference(xs + r * k, w + j * k, k);
                if (memcmp(&y[r * n + j], &want, sizeof(float)) != 0)
                    fail_msg("%s path: y[%zu, %zu] is %a, the documented order gives %a",
                             path_names[p], r, j, y[r * n + j], want);
            }
    }
    clReleaseMemObject(x);
    clattn__qweight_release(&qw);
    free(w), free(xs), free(y);
}

/* Row r's bytes: the same whatever m, the row's place in the batch, the strides and the path. */
static void batch_invariance(void **state)
{
    fixture *f = *state;
    const size_t big = test_small_mode() ? 9 : 300;
    const size_t ms[] = {1, 2, 7, 32, 64, 300};
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        /* One type per way of decoding (the kernels share everything else; golden_types
         * compares every type's paths); under oclgrind three. */
        if (strcmp(type_names[t], "q4_1") != 0 && strcmp(type_names[t], "q8_0") != 0 &&
            strcmp(type_names[t], "q6_k") != 0 &&
            (test_small_mode() || strcmp(type_names[t], "f16") != 0))
            continue;
        golden g;
        golden_load(f->ctx, type_names[t], &g);
        const size_t n = g.n, k = g.k, ldx = k + 16, ldy = n + 3;
        float *xs = malloc(big * ldx * sizeof(float));
        float *ref = malloc(big * n * sizeof(float));
        float *y = malloc(big * ldy * sizeof(float));
        assert_true(xs && ref && y);
        test_fill_uniform(xs, big * ldx, 7 + t, -1.0f, 1.0f);
        cl_mem x = buffer(f->ctx, big * ldx, xs);
        /* The reference: all rows at once, matrix–matrix path, contiguous output. */
        run(f, &g.w, CLATTN_QLINEAR_MM, big, x, 0, ldx, ref, n);
        for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
            size_t m = ms[mi];
            if (m > big)
                continue;
            size_t first = (big - m) / 2; /* the rows sit anywhere in the batch */
            for (size_t p = 0; p < 2; p++) { /* mv and mm (auto is one of them) */
                run(f, &g.w, paths[p], m, x, first, ldx, y, ldy);
                for (size_t r = 0; r < m; r++) {
                    const float *a = y + r * ldy, *b = ref + (first + r) * n;
                    if (memcmp(a, b, n * sizeof(float)) == 0)
                        continue;
                    size_t j = 0;
                    while (j + 1 < n && memcmp(a + j, b + j, sizeof(float)) == 0)
                        j++;
                    fail_msg("%s: row %zu computed in a batch of %zu on the %s path differs "
                             "from the same row in a batch of %zu (matrix-matrix path): column "
                             "%zu is %a, not %a",
                             type_names[t], first + r, m, path_names[p], big, j, a[j], b[j]);
                }
            }
        }
        clReleaseMemObject(x);
        free(xs);
        free(ref);
        free(y);
        golden_free(&g);
    }
}

/* The name of the one qlinear kernel that ran since the last clattn_stats_reset. */
static const char *ran_kernel(fixture *f, char *name, size_t size)
{
    clattn_stats s;
    assert_int_equal(clattn_stats_get(f->ctx, &s), CLATTN_OK);
    if (s.kernel_count != 1)
        fail_msg("%zu kernels ran, not one", s.kernel_count);
    snprintf(name, size, "%s", s.kernels[0].name);
    return name;
}

/* CLATTN_TEST_QUICK=1: a slow device (CI's rusticl leg, where each new kernel takes seconds to
 * compile). */
static bool quick_mode(void)
{
    const char *v = getenv("CLATTN_TEST_QUICK");
    return v && strcmp(v, "1") == 0;
}

/* Both paths, plain and with SwiGLU fused, under another tiling (CLATTN_QLINEAR):
 * matrix–vector column tiles that do not divide n (38 columns: 13 tiles of 3, 19 of 2; the
 * fused SwiGLU's 19: 7 tiles of 3 for Q4_1), several tiles per work-item in uneven runs (6
 * work-items: runs of 3 or 4 tiles, a last run of one, an idle work-item), its weight rows
 * prefetched another distance than the default's; matrix–matrix tiles of 5 × 3 for the types
 * under 6.5 bits per weight and 3 × 5 for the others (neither divides 38 columns or 37 rows),
 * and the other matrix–matrix kernels than the default program's (plain where it stages, staged
 * in tiles of 5 × 3 where it does not: both kernels' bytes equal on every shape); where the
 * default program stages, a second program staging in tiles of 5 × 3 (not on slow devices);
 * for the 4/5-bit and the wider types alike (Q4_1 and Q8_0: the kernels differ by type only in
 * the decoder, which golden_types covers): every row the bytes of the default program's
 * matrix–matrix path (which prefetches nothing). Each type's tiles, read from the program's
 * build options, are its class's. (One tiling and two types: each program and kernel is
 * compiled anew, minutes on llvmpipe.)
 * Also the default program's prefetch distance (32 of the device's cache lines on a CPU, none
 * elsewhere) and matrix–matrix tiles (with AVX-512's 32 registers, PoCL's native float width
 * 16: 8 × 2 for the narrow types, 6 × 4 for the wide ones). */
static const char *const narrow_types[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k"};
static const char *const wide_types[] = {"f32", "f16", "bf16", "q8_0", "q6_k"};

/* The program's build options give each type the tiles of its class. */
static void expect_type_tiles(const clattn_qlinear_program *prog, const char *setting)
{
    clattn_qlinear_params p = clattn__qlinear_params(prog);
    const char *options = clattn__qlinear_build_options(prog);
    for (size_t wide = 0; wide < 2; wide++) {
        const char *const *names = wide ? wide_types : narrow_types;
        size_t count = wide ? sizeof(wide_types) / sizeof(wide_types[0])
                            : sizeof(narrow_types) / sizeof(narrow_types[0]);
        for (size_t i = 0; i < count; i++) {
            /* The fused SwiGLU's matrix-vector columns: mvsc for the 32-value types, half
             * the plain tile's for the K-quants and the wide types. */
            unsigned mv_cols = wide ? p.mv_cols_wide : p.mv_cols;
            bool k_quant = names[i][strlen(names[i]) - 1] == 'k';
            unsigned swiglu_cols = wide || k_quant ? (mv_cols + 1) / 2 : p.mv_swiglu_cols;
            char want[128];
            snprintf(want, sizeof(want),
                     " -DQL_MV_C_%s=%u -DQL_MV_SC_%s=%u -DQL_MM_R_%s=%u -DQL_MM_C_%s=%u ",
                     names[i], mv_cols, names[i], swiglu_cols, names[i],
                     wide ? p.mm_rows_wide : p.mm_rows, names[i],
                     wide ? p.mm_cols_wide : p.mm_cols);
            size_t size = strlen(options) + 2;
            char *padded = malloc(size); /* a space after the last option too */
            assert_non_null(padded);
            snprintf(padded, size, "%s ", options);
            bool found = strstr(padded, want) != NULL;
            free(padded);
            if (!found)
                fail_msg("%s: the build options lack \"%s\": %s", setting, want, options);
        }
    }
}

static void tilings(void **state)
{
    fixture *f = *state;
    clattn_qlinear_params defaults = clattn__qlinear_params(f->prog);
    cl_ulong local_bytes = 0;
    assert_int_equal(clGetDeviceInfo(clattn_context_device(f->ctx), CL_DEVICE_LOCAL_MEM_SIZE,
                                     sizeof(local_bytes), &local_bytes, NULL),
                     CL_SUCCESS);
    cl_device_type type = 0;
    cl_uint native = 0;
    cl_device_id device = clattn_context_device(f->ctx);
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL),
                     CL_SUCCESS);
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(native),
                                     &native, NULL),
                     CL_SUCCESS);
    assert_true(defaults.line_bytes >= 16);
    assert_int_equal(defaults.prefetch_bytes,
                     (type & CL_DEVICE_TYPE_CPU) ? 32 * defaults.line_bytes : 0);
    /* 32 vector registers (AVX-512) or fewer. */
    const unsigned want[5] = {native >= 16 ? 2 : 1, native >= 16 ? 8 : 3, native >= 16 ? 2 : 4,
                              native >= 16 ? 6 : 3, 4};
    const unsigned tile[5] = {defaults.mv_swiglu_cols, defaults.mm_rows, defaults.mm_cols,
                              defaults.mm_rows_wide, defaults.mm_cols_wide};
    for (size_t i = 0; i < 5; i++)
        if (tile[i] != want[i])
            fail_msg("native width %u: default tile field %zu (mvsc, mmr, mmc, mmrw, mmcw) is %u, "
                     "not %u",
                     native, i, tile[i], want[i]);
    expect_type_tiles(f->prog, "defaults");
    /* The other matrix-matrix kernels than the default's: the plain ones where it stages
     * (staging), else the staged ones, in a tile of 5 x 3; where it stages, also (but on slow
     * devices) the staged ones in that tile. */
    const unsigned other_stage = !defaults.mm_stage, d = defaults.mv_items;
    char setting[128];
    snprintf(setting, sizeof(setting),
             "mvc=3,mvcw=2,mvsc=3,mvi=6,pf=320,mmr=5,mmc=3,mmrw=3,mmcw=5,mms=%u,mmsr=5,mmsc=3",
             other_stage);
    const char *const settings[] = {setting, "mmsr=5,mmsc=3,mmi=10"};
    const unsigned tiles[][12] = {
        {3, 2, 3, 6, 320, 5, 3, 3, 5, other_stage, 5, 3},
        {defaults.mv_cols, defaults.mv_cols_wide, defaults.mv_swiglu_cols, d,
         defaults.prefetch_bytes, defaults.mm_rows, defaults.mm_cols, defaults.mm_rows_wide,
         defaults.mm_cols_wide, 1, 5, 3}};
    const size_t settings_run = defaults.mm_stage && !quick_mode() ? 2 : 1;
    const size_t ms[] = {1, 5, 37};
    for (size_t s = 0; s < settings_run; s++) {
        clattn_qlinear_program *prog = NULL;
        setenv("CLATTN_QLINEAR", settings[s], 1);
        clattn_status status = clattn__qlinear_program_create(f->ctx, &prog);
        unsetenv("CLATTN_QLINEAR");
        if (status != CLATTN_OK)
            fail_msg("%s: %s", settings[s], clattn_last_error(f->ctx));
        clattn_qlinear_params p = clattn__qlinear_params(prog);
        const unsigned got[12] = {p.mv_cols,      p.mv_cols_wide,   p.mv_swiglu_cols,
                                  p.mv_items,     p.prefetch_bytes, p.mm_rows,
                                  p.mm_cols,      p.mm_rows_wide,   p.mm_cols_wide,
                                  p.mm_stage,     p.mms_rows,       p.mms_cols};
        for (size_t i = 0; i < 12; i++)
            assert_int_equal(got[i], tiles[s][i]);
        if (!strstr(clattn__qlinear_build_options(prog), " -DQL_MMS_R=5 -DQL_MMS_C=3 "))
            fail_msg("%s: the build options lack the staged tile 5 x 3: %s", settings[s],
                     clattn__qlinear_build_options(prog));
        /* Three columns: the fused SwiGLU stages four rows (two columns' gate and up), the
         * plain layer three; a k where three fit local memory and four do not. */
        const size_t k_odd = (local_bytes / 16 + 16) / 16 * 16;
        assert_int_equal(clattn__qlinear_mm_staged(prog, k_odd, false), p.mm_stage != 0);
        assert_false(clattn__qlinear_mm_staged(prog, k_odd, true));
        expect_type_tiles(prog, settings[s]);
        for (size_t t = 0; t < TYPE_COUNT; t++) {
            if (strcmp(type_names[t], "q4_1") != 0 && strcmp(type_names[t], "q8_0") != 0)
                continue;
            golden g;
            golden_load(f->ctx, type_names[t], &g);
            cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
            float *y = malloc(g.m * g.n * sizeof(float)), *ref = malloc(g.m * g.n * sizeof(float));
            assert_true(y && ref);
            for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
                size_t m = ms[mi];
                if (m > g.m || (test_small_mode() && m > 5))
                    continue;
                /* The plain layer [m, 38], then the fused SwiGLU [m, 19] (the weight's rows as
                 * [gate 19; up 19]). */
                for (size_t swiglu = 0; swiglu < 2; swiglu++) {
                    size_t n = swiglu ? g.n / 2 : g.n;
                    run_layer(f, f->prog, swiglu, &g.w, CLATTN_QLINEAR_MM, m, x, 0, g.k, ref, n);
                    for (size_t pi = 0; pi < 2; pi++) {
                        assert_int_equal(clattn_stats_reset(f->ctx), CLATTN_OK);
                        run_layer(f, prog, swiglu, &g.w, paths[pi], m, x, 0, g.k, y, n);
                        if (paths[pi] == CLATTN_QLINEAR_MM) { /* staged or plain, as set */
                            size_t rows = swiglu ? 2 * ((p.mms_cols + 1) / 2) : p.mms_cols;
                            bool staged = p.mm_stage && rows * g.k * 4 <= local_bytes;
                            char kernel[64], name[CLATTN_STATS_NAME_SIZE];
                            snprintf(kernel, sizeof(kernel), "qlinear_%smm%s",
                                     swiglu ? "swiglu_" : "", staged ? "_staged" : "");
                            if (strcmp(ran_kernel(f, name, sizeof(name)), kernel) != 0)
                                fail_msg("%s: %s ran, not %s", settings[s], name, kernel);
                        }
                        for (size_t i = 0; i < m * n; i++)
                            if (memcmp(&y[i], &ref[i], sizeof(float)) != 0)
                                fail_msg("%s, %s, m %zu: the %s%s path's y[%zu, %zu] is %a, not "
                                         "the default matrix-matrix path's %a",
                                         type_names[t], settings[s], m,
                                         swiglu ? "SwiGLU " : "", path_names[pi], i / n, i % n,
                                         y[i], ref[i]);
                    }
                }
            }
            free(y);
            free(ref);
            clReleaseMemObject(x);
            golden_free(&g);
        }
        clattn__qlinear_program_release(prog);
    }
}

/* The staged matrix–matrix kernels (cl/qlinear.cl's clattn_qlinear_mm_staged_<type>, decoding
 * a work-item's weight rows once into local memory): by default on CPU devices whose local
 * memory is ordinary cached memory (CL_GLOBAL), with a tile of 6 × 4 (32 registers) or 3 × 4; taken
 * for the plain and the fused SwiGLU layer where the decoded rows fit the device's local memory,
 * else the plain matrix–matrix kernels: a Q8_0 weight of 3 rows whose k is past local memory's
 * share (k = local bytes / (4 · 4 columns) + 32) takes them, with the matrix–vector path's bytes.
 * (tilings compares the staged and the plain kernels' bytes on Q4_1 and Q8_0 at m = 1, 5, 37.) */
static void staging(void **state)
{
    fixture *f = *state;
    cl_device_id device = clattn_context_device(f->ctx);
    cl_device_local_mem_type local_type = CL_LOCAL;
    cl_ulong local_bytes = 0;
    cl_uint native = 0;
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_TYPE, sizeof(local_type),
                                     &local_type, NULL),
                     CL_SUCCESS);
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local_bytes),
                                     &local_bytes, NULL),
                     CL_SUCCESS);
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(native),
                                     &native, NULL),
                     CL_SUCCESS);
    clattn_qlinear_params p = clattn__qlinear_params(f->prog);
    cl_device_type type = 0;
    assert_int_equal(clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL),
                     CL_SUCCESS);
    assert_int_equal(p.mm_stage, local_type == CL_GLOBAL && (type & CL_DEVICE_TYPE_CPU));
    assert_int_equal(p.mms_rows, native >= 16 ? 6 : 3);
    assert_int_equal(p.mms_cols, 4);
    char want[64], name[CLATTN_STATS_NAME_SIZE];
    snprintf(want, sizeof(want), " -DQL_MMS_R=%u -DQL_MMS_C=%u ", p.mms_rows, p.mms_cols);
    if (!strstr(clattn__qlinear_build_options(f->prog), want))
        fail_msg("the build options lack \"%s\": %s", want, clattn__qlinear_build_options(f->prog));
    /* The golden Q4_1 weight (38 x k): both layers, 5 rows. */
    golden g;
    golden_load(f->ctx, "q4_1", &g);
    cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
    float *y = malloc(g.m * g.n * sizeof(float));
    assert_non_null(y);
    for (size_t swiglu = 0; swiglu < 2; swiglu++) {
        size_t rows = swiglu ? 2 * ((p.mms_cols + 1) / 2) : p.mms_cols;
        bool fits = rows * g.k * sizeof(float) <= local_bytes;
        assert_int_equal(clattn__qlinear_mm_staged(f->prog, g.k, swiglu), p.mm_stage && fits);
        assert_int_equal(clattn_stats_reset(f->ctx), CLATTN_OK);
        run_layer(f, f->prog, swiglu, &g.w, CLATTN_QLINEAR_MM, 5, x, 0, g.k, y,
                  swiglu ? g.n / 2 : g.n);
        snprintf(want, sizeof(want), "qlinear_%smm%s", swiglu ? "swiglu_" : "",
                 p.mm_stage && fits ? "_staged" : "");
        if (strcmp(ran_kernel(f, name, sizeof(name)), want) != 0)
            fail_msg("%s layer of k %zu: %s ran, not %s", swiglu ? "SwiGLU" : "plain", g.k, name,
                     want);
    }
    free(y);
    clReleaseMemObject(x);
    golden_free(&g);
    /* A weight too wide to stage. */
    const size_t n = 3, m = 2, k = ((size_t)local_bytes / (4 * sizeof(float)) + 32) / 32 * 32;
    const size_t blocks = k / 32, bytes = n * blocks * 34;
    unsigned char *raw = malloc(bytes);
    float *xs = malloc(m * k * sizeof(float)), *ymm = malloc(m * n * sizeof(float));
    float *ymv = malloc(m * n * sizeof(float));
    assert_true(raw && xs && ymm && ymv);
    test_rng rng = {12345};
    for (size_t b = 0; b < n * blocks; b++) {
        raw[b * 34] = 0x00, raw[b * 34 + 1] = 0x20; /* d = 2^-7 (float16 0x2000) */
        for (size_t i = 0; i < 32; i++)
            raw[b * 34 + 2 + i] = (unsigned char)(test_rng_next(&rng) >> 56);
    }
    test_fill_uniform(xs, m * k, 99, -1.0f, 1.0f);
    clattn_qweight w;
    assert_int_equal(clattn__qweight_upload(f->ctx, CLATTN_GGML_Q8_0, n, k, raw, bytes, &w),
                     CLATTN_OK);
    assert_false(clattn__qlinear_mm_staged(f->prog, k, false));
    cl_mem xw = buffer(f->ctx, m * k, xs);
    assert_int_equal(clattn_stats_reset(f->ctx), CLATTN_OK);
    run_layer(f, f->prog, false, &w, CLATTN_QLINEAR_MM, m, xw, 0, k, ymm, n);
    if (strcmp(ran_kernel(f, name, sizeof(name)), "qlinear_mm") != 0)
        fail_msg("k %zu (local memory %llu bytes): %s ran, not qlinear_mm", k,
                 (unsigned long long)local_bytes, name);
    run_layer(f, f->prog, false, &w, CLATTN_QLINEAR_MV, m, xw, 0, k, ymv, n);
    for (size_t i = 0; i < m * n; i++)
        if (memcmp(&ymm[i], &ymv[i], sizeof(float)) != 0)
            fail_msg("k %zu: the matrix-matrix path's y[%zu] is %a, the matrix-vector path's %a",
                     k, i, ymm[i], ymv[i]);
    clReleaseMemObject(xw);
    clattn__qweight_release(&w);
    free(raw), free(xs), free(ymm), free(ymv);
}

/* The fused gate|up layer: the golden weight's 38 rows as [gate 19; up 19] (19 columns: tiles of
 * 2 do not divide them), y = silu(gate)·up by clattn__qlinear_swiglu, every row the bytes of
 * the unfused layers (clattn__qlinear into [m, 38] on the matrix–matrix path for the largest m,
 * then clattn__qlinear_glu, itself within 2 ulp of silu(gate)·up in double), for every m and
 * path. Every type; on slow devices (CLATTN_TEST_QUICK) one
 * type per way of decoding, and under oclgrind Q4_1 alone with m up to 5 (the fused kernels
 * differ from the plain ones in their weight rows and store only, which every type shares). */
static void swiglu_fused(void **state)
{
    fixture *f = *state;
    const size_t ms[] = {1, 5, 37};
    const size_t big = test_small_mode() ? 5 : 37;
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        bool q4_1 = strcmp(type_names[t], "q4_1") == 0;
        if ((test_small_mode() && !q4_1) ||
            (quick_mode() && !q4_1 && strcmp(type_names[t], "q8_0") != 0 &&
             strcmp(type_names[t], "q6_k") != 0))
            continue;
        golden g;
        golden_load(f->ctx, type_names[t], &g);
        assert_true(g.n % 2 == 0 && g.m >= big);
        const size_t n = g.n / 2, ldy = n + 3;
        cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
        float *ref = malloc(big * g.n * sizeof(float)), *y = malloc(big * ldy * sizeof(float));
        assert_true(ref && y);
        /* The unfused reference: the plain kernel, then clattn__qlinear_glu in place. */
        cl_mem h = buffer(f->ctx, big * g.n, NULL);
        if (clattn__qlinear_path(f->ctx, f->prog, CLATTN_OP_OTHER, CLATTN_QLINEAR_MM, big, x, 0,
                                 g.k, &g.w, h, 0, g.n) != CLATTN_OK)
            fail_msg("%s: the plain layer: %s", type_names[t], clattn_last_error(f->ctx));
        float *plain = malloc(big * g.n * sizeof(float));
        assert_non_null(plain);
        read_back(f->ctx, h, big * g.n, plain);
        if (clattn__qlinear_glu(f->ctx, f->prog, h, big, n) != CLATTN_OK)
            fail_msg("%s: clattn__qlinear_glu: %s", type_names[t], clattn_last_error(f->ctx));
        read_back(f->ctx, h, big * g.n, ref);
        clReleaseMemObject(h);
        for (size_t r = 0; r < big; r++)
            for (size_t j = 0; j < n; j++) {
                double gate = plain[r * g.n + j], up = plain[r * g.n + n + j];
                double want = gate / (1.0 + exp(-gate)) * up, got = ref[r * g.n + j];
                if (!(fabs(got - want) <= 2.0 * 0x1p-23 * fabs(want) + 1e-30))
                    fail_msg("%s: clattn__qlinear_glu's [%zu, %zu] is %.9g, silu(%.9g)·%.9g "
                             "is %.9g",
                             type_names[t], r, j, got, gate, up, want);
                if (memcmp(&ref[r * g.n + n + j], &plain[r * g.n + n + j], sizeof(float)) != 0)
                    fail_msg("%s: clattn__qlinear_glu changed up value [%zu, %zu]", type_names[t],
                             r, j);
            }
        free(plain);
        for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
            size_t m = ms[mi];
            if (m > big)
                continue;
            for (size_t p = 0; p < 2; p++) { /* mv and mm */
                for (size_t i = 0; i < m * ldy; i++)
                    y[i] = NAN;
                cl_mem ym = buffer(f->ctx, m * ldy, y);
                if (clattn__qlinear_swiglu_path(f->ctx, f->prog, CLATTN_OP_OTHER, paths[p], m, x,
                                                0, g.k, &g.w, ym, 0, ldy) != CLATTN_OK)
                    fail_msg("%s: clattn__qlinear_swiglu: %s", type_names[t],
                             clattn_last_error(f->ctx));
                read_back(f->ctx, ym, m * ldy, y);
                clReleaseMemObject(ym);
                for (size_t r = 0; r < m; r++)
                    for (size_t j = 0; j < n; j++)
                        if (memcmp(&y[r * ldy + j], &ref[r * g.n + j], sizeof(float)) != 0)
                            fail_msg("%s, m %zu, %s path: fused y[%zu, %zu] is %a, not the "
                                     "unfused layers' %a",
                                     type_names[t], m, path_names[p], r, j, y[r * ldy + j],
                                     ref[r * g.n + j]);
            }
        }
        free(ref);
        free(y);
        clReleaseMemObject(x);
        golden_free(&g);
    }
}

/* clattn__qlinear_glu's SiLU (cl/qlinear.cl's ql_exp8: SLEEF's expf written out) across the range
 * that matters and past it: gate values from −110 to 110 in steps of 1/64 (1/4 under oclgrind),
 * zeros, subnormals, the ends of the exponential's range (±87.3, ±88.72, ±100, ±104) and beyond,
 * ±inf and NaN, times up = 1 and −0.75, against silu(gate)·up in double: within 2 ulp (plus
 * 1e-36, where e^−gate leaves float's range and the quotient flushes to zero), the same infinity,
 * NaN where double's is NaN. */
static void glu_exponential_range(void **state)
{
    fixture *f = *state;
    static const float special[] = {
        0.0f,     -0.0f,     0x1p-149f, -0x1p-149f, 1e-30f,   -1e-30f,  87.3f,    -87.3f,
        88.72f,   -88.72f,   88.73f,    -88.73f,    99.99f,   -99.99f,  100.0f,   -100.0f,
        100.01f,  -100.01f,  103.99f,   -103.99f,   104.01f,  -104.01f, 150.0f,   -150.0f,
        1e30f,    -1e30f,    3.4e38f,   -3.4e38f,   INFINITY, -INFINITY, NAN};
    const size_t per_unit = test_small_mode() ? 4 : 64, sweep = 220 * per_unit + 1;
    const size_t nspecial = sizeof(special) / sizeof(special[0]), cols = sweep + nspecial;
    const float ups[2] = {1.0f, -0.75f};
    float *h = malloc(2 * 2 * cols * sizeof(float)), *got = malloc(2 * 2 * cols * sizeof(float));
    assert_true(h && got);
    for (size_t r = 0; r < 2; r++)
        for (size_t j = 0; j < cols; j++) {
            h[r * 2 * cols + j] = j < sweep ? -110.0f + (float)j / (float)per_unit
                                            : special[j - sweep];
            h[r * 2 * cols + cols + j] = ups[r];
        }
    cl_mem hm = buffer(f->ctx, 2 * 2 * cols, h);
    if (clattn__qlinear_glu(f->ctx, f->prog, hm, 2, cols) != CLATTN_OK)
        fail_msg("clattn__qlinear_glu: %s", clattn_last_error(f->ctx));
    read_back(f->ctx, hm, 2 * 2 * cols, got);
    clReleaseMemObject(hm);
    for (size_t r = 0; r < 2; r++)
        for (size_t j = 0; j < cols; j++) {
            double gate = h[r * 2 * cols + j], up = ups[r];
            double want = gate / (1.0 + exp(-gate)) * up;
            float y = got[r * 2 * cols + j];
            bool ok = isnan(want)   ? isnan(y)
                      : isinf(want) ? (double)y == want
                                    : fabs(y - want) <= 2.0 * 0x1p-23 * fabs(want) + 1e-36;
            if (!ok)
                fail_msg("silu(%.9g)·%g is %.9g, clattn__qlinear_glu gave %.9g", gate, up, want,
                         y);
        }
    free(h);
    free(got);
}

static void bad_weights(void **state)
{
    fixture *f = *state;
    unsigned char bytes[2 * 20] = {0};
    clattn_qweight w;
    assert_status_msg(f->ctx, clattn__qweight_upload(f->ctx, CLATTN_GGML_Q2_K, 1, 256,
                                                          bytes, sizeof(bytes), &w),
                           CLATTN_ERROR_INVALID_ARGUMENT, "ggml type 10");
    assert_status_msg(f->ctx, clattn__qweight_upload(f->ctx, CLATTN_GGML_Q4_1, 1, 48,
                                                          bytes, sizeof(bytes), &w),
                           CLATTN_ERROR_INVALID_ARGUMENT, "multiple of 32");
    assert_status_msg(f->ctx, clattn__qweight_upload(f->ctx, CLATTN_GGML_Q4_1, 2, 32,
                                                          bytes, 39, &w),
                           CLATTN_ERROR_INVALID_ARGUMENT, "not 39");
    assert_status_msg(f->ctx, clattn__qweight_upload(f->ctx, CLATTN_GGML_F16, 1, 8, bytes,
                                                          16, &w),
                           CLATTN_ERROR_INVALID_ARGUMENT, "multiple of 16");
    assert_null(w.blocks);
    assert_int_equal(clattn__qweight_upload(f->ctx, CLATTN_GGML_Q4_1, 2, 32, bytes,
                                            sizeof(bytes), &w),
                     CLATTN_OK);
    cl_mem x = buffer(f->ctx, 64, NULL), y = buffer(f->ctx, 4, NULL);
    assert_status_msg(f->ctx, clattn__qlinear(f->ctx, f->prog, CLATTN_OP_OTHER, 1, x, 0,
                                                   16, &w, y, 0, 2),
                           CLATTN_ERROR_INVALID_ARGUMENT, "ldx 16 (k 32)");
    assert_int_equal(clattn__qlinear(f->ctx, f->prog, CLATTN_OP_OTHER, 0, x, 0, 32, &w, y, 0, 2),
                     CLATTN_OK);
    assert_status_msg(f->ctx, clattn__qlinear_swiglu(f->ctx, f->prog, CLATTN_OP_OTHER, 1, x, 0,
                                                     32, &w, y, 0, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ldy 0 (n 1)");
    clattn_qweight odd = w;
    odd.n = 1;
    assert_status_msg(f->ctx, clattn__qlinear_swiglu(f->ctx, f->prog, CLATTN_OP_OTHER, 1, x, 0,
                                                     32, &odd, y, 0, 1),
                      CLATTN_ERROR_INVALID_ARGUMENT, "even number of rows, not 1");
    clReleaseMemObject(x);
    clReleaseMemObject(y);
    clattn__qweight_release(&w);
    assert_null(w.blocks);
    /* A weight over the device's largest allocation (lowered for the test) is refused with the
     * numbers; one within it is made. */
    setenv("CLATTN_MAX_ALLOC_BYTES", "1024", 1);
    clattn_context *small = test_context_create(NULL);
    unsetenv("CLATTN_MAX_ALLOC_BYTES");
    assert_non_null(small);
    unsigned char big[2 * 32 * 20] = {0}; /* Q4_1 [2, 1024]: 1280 bytes */
    assert_status_msg(small, clattn__qweight_upload(small, CLATTN_GGML_Q4_1, 2, 1024, big,
                                                    sizeof(big), &w),
                      CLATTN_ERROR_TOO_LARGE,
                      "a q4_1 weight needs 1280 bytes, more than the device's maximum "
                      "allocation of 1024 bytes");
    assert_int_equal(clattn__qweight_upload(small, CLATTN_GGML_Q4_1, 1, 1024, big, 640, &w),
                     CLATTN_OK);
    clattn__qweight_release(&w);
    clattn_context_destroy(&small);
}

/* A CLATTN_QLINEAR pair that cannot be read refuses the program, naming the pair. */
static void tuning_errors(void **state)
{
    fixture *f = *state;
    static const char *const bad[][2] = {
        {"mvc=0", "\"mvc=0\": mvc is out of its range 1..16"},
        {"mvr=2,mvcw=17", "\"mvcw=17\": mvcw is out of its range 1..16"},
        {"tiles=4", "\"tiles=4\": unknown key \"tiles\""},
        {"mm8c=0", "\"mm8c=0\": mm8c is out of its range 1..16"},
        {"mm8r=17", "\"mm8r=17\": mm8r is out of its range 1..16"},
        {"pf=1048577", "\"pf=1048577\": pf is out of its range 0..1048576"},
        {"mmrw=0", "\"mmrw=0\": mmrw is out of its range 1..16"},
        {"mmr=8,mmcw=17", "\"mmcw=17\": mmcw is out of its range 1..16"},
        {"mvsc=17", "\"mvsc=17\": mvsc is out of its range 1..16"},
        {"mms=2", "\"mms=2\": mms is out of its range 0..1"},
        {"mmsr=0", "\"mmsr=0\": mmsr is out of its range 1..16"},
        {"mmsc=17", "\"mmsc=17\": mmsc is out of its range 1..16"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        clattn_qlinear_program *prog = NULL;
        setenv("CLATTN_QLINEAR", bad[i][0], 1);
        clattn_status status = clattn__qlinear_program_create(f->ctx, &prog);
        unsetenv("CLATTN_QLINEAR");
        assert_int_equal(status, CLATTN_ERROR_INVALID_ARGUMENT);
        assert_null(prog);
        if (!strstr(clattn_last_error(f->ctx), bad[i][1]))
            fail_msg("%s: %s", bad[i][0], clattn_last_error(f->ctx));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_types),
        cmocka_unit_test(batch_invariance),
        cmocka_unit_test(reduction_order),
        cmocka_unit_test(tilings),
        cmocka_unit_test(staging),
        cmocka_unit_test(swiglu_fused),
        cmocka_unit_test(glu_exponential_range),
        cmocka_unit_test(tuning_errors),
        cmocka_unit_test(bad_weights),
    };
    return cmocka_run_group_tests_name("qlinear", tests, setup, teardown);
}
