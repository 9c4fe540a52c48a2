/*
 * Linear layers with 8-bit activations (src/ops/qlinear.h's CLATTN_QLINEAR_INT8,
 * cl/qlinear_int8.cl) on the weights of tests/golden/qlinear (every block type):
 *
 *  - the kernels' bytes are the plain-C reference's (tests/ref/ref_qlinear_int8.c: the blocks
 *    read from ggml's layouts, llama.cpp's activation rule, the promised order), for m = 1, 3,
 *    70 on the matrix–vector, matrix–matrix and automatic paths — so every row is also the same
 *    bytes whatever the batch; rows of five blocks (an odd count) too; and strided, offset rows
 *    of x give the bytes of the rows alone;
 *  - the results are the product the golden holds (float64, gguf-py's dequantisation) within
 *    what rounding the activations to 8 bits can move it (Σ |w| · dx / 2) plus float32's
 *    roundings;
 *  - SwiGLU fused into the epilogue gives the unfused layers' bytes (plain kernel, then
 *    clattn__qlinear_glu);
 *  - other tilings (CLATTN_QLINEAR's mm8r, mm8c, mvc, mvr: 3 × 3, and 5 × 2 for the K-quants'
 *    two-column tile) give the reference's bytes, fused SwiGLU the unfused layers';
 *  - the kernels compiled for AVX512-VNNI where the device is PoCL's CPU device with AVX-512 on
 *    a CPU with AVX512_VNNI (CPUID here), and then also without (CLATTN_QLINEAR's vnni=0): the
 *    reference's bytes either way; elsewhere vnni=1 is refused;
 *  - F32, F16 and BF16 weights keep float32 activations (the float program's bytes), and
 *    switching back to CLATTN_QLINEAR_FLOAT gives the float kernels' bytes again;
 *  - a pre-norm layer's norm that quantises its rows for the layer after it
 *    (clattn__add_rmsnorm_quantize, clattn__qlinear_prequantize) gives the bytes of the norm and
 *    then the layer quantising by itself, and the layer reads those rows until they are
 *    forgotten or overwritten.
 */
#include "common/qlinear_golden.h"
#include "common/test_util.h"
#include "ref/ref_qlinear_int8.h"

#include "ops/elementwise.h"
#include "ops/qlinear.h"

#include <jansson.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {"q4_0", "q4_1", "q5_0", "q5_1",
                                         "q8_0", "q4_k", "q5_k", "q6_k"};
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
    f->ctx = test_context_create(NULL);
    assert_non_null(f->ctx);
    assert_int_equal(clattn__qlinear_program_create(f->ctx, &f->prog), CLATTN_OK);
    assert_int_equal(clattn__qlinear_activations(f->prog), CLATTN_QLINEAR_FLOAT);
    assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, CLATTN_QLINEAR_INT8),
                     CLATTN_OK);
    assert_int_equal(clattn__qlinear_activations(f->prog), CLATTN_QLINEAR_INT8);
    assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, (clattn_qlinear_activations)7),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clattn__qlinear_activations(f->prog), CLATTN_QLINEAR_INT8);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f)
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

/* y [m, ldy] (NaN-filled first) from rows x_row .. of x [., ldx] on `path`. */
static void run(fixture *f, const clattn_qweight *w, clattn_qlinear_path path, bool swiglu,
                size_t m, cl_mem x, size_t x_row, size_t ldx, float *y, size_t ldy)
{
    for (size_t i = 0; i < m * ldy; i++)
        y[i] = NAN;
    cl_mem ym = buffer(f->ctx, m * ldy, y);
    clattn_status s =
        swiglu ? clattn__qlinear_swiglu_path(f->ctx, f->prog, CLATTN_OP_OTHER, path, m, x,
                                             x_row * ldx, ldx, w, ym, 0, ldy)
               : clattn__qlinear_path(f->ctx, f->prog, CLATTN_OP_OTHER, path, m, x,
                                      x_row * ldx, ldx, w, ym, 0, ldy);
    if (s != CLATTN_OK)
        fail_msg("clattn__qlinear: %s", clattn_last_error(f->ctx));
    read_back(f->ctx, ym, m * ldy, y);
    clReleaseMemObject(ym);
}

static const clattn_qlinear_path paths[] = {CLATTN_QLINEAR_MV, CLATTN_QLINEAR_MM,
                                            CLATTN_QLINEAR_AUTO};
static const char *const path_names[] = {"mv", "mm", "auto"};

static void compare(const char *type, const char *what, size_t m, const float *y, size_t ldy,
                    const float *ref, size_t ldr, size_t n)
{
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++)
            if (memcmp(&y[r * ldy + j], &ref[r * ldr + j], sizeof(float)) != 0)
                fail_msg("%s, %s: y[%zu, %zu] is %a (%.9g), the reference's %a (%.9g)", type,
                         what, r, j, y[r * ldy + j], y[r * ldy + j], ref[r * ldr + j],
                         ref[r * ldr + j]);
}

/* Every type: the reference's bytes on every path and m; within the rounding bound of the
 * float64 golden. */
static void reference_bytes(void **state)
{
    fixture *f = *state;
    const size_t ms[] = {70, 1, 3};
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        golden g;
        golden_load(f->ctx, type_names[t], &g);
        float *ref = malloc(g.m * g.n * sizeof(float)), *y = malloc(g.m * g.n * sizeof(float));
        assert_true(ref && y);
        ref_qi_linear(g.type, g.bytes, g.n, g.k, g.x, g.m, g.k, ref, g.n);
        for (size_t i = 0; i < g.m * g.n; i++) {
            size_t r = i / g.n, j = i % g.n;
            double bound = ref_qi_rounding_bound(g.type, g.bytes, g.k, j, g.x + r * g.k) +
                           1e-5 * g.yabs[i] + 1e-6;
            double err = fabs((double)ref[i] - (double)g.y[i]);
            if (!(err <= bound))
                fail_msg("%s: the reference's y[%zu, %zu] = %.9g is %.3g from the golden %.9g, "
                         "beyond the activations' rounding bound %.3g",
                         type_names[t], r, j, ref[i], err, g.y[i], bound);
        }
        cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
        for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
            if (test_small_mode() && ms[mi] > 3)
                continue;
            for (size_t p = 0; p < 3; p++) {
                char what[64];
                snprintf(what, sizeof(what), "m %zu, %s path", ms[mi], path_names[p]);
                run(f, &g.w, paths[p], false, ms[mi], x, 0, g.k, y, g.n);
                compare(type_names[t], what, ms[mi], y, g.n, ref, g.n, g.n);
            }
        }
        clReleaseMemObject(x);
        free(ref);
        free(y);
        golden_free(&g);
    }
}

/* Five blocks a row (two pairs and one left over: cl/qlinear_int8.cl's 32-value two-column tile
 * takes blocks in pairs), built from the golden's rows (blocks 0, 1, 0, 1, 0) and x's columns
 * likewise: the reference's bytes on both paths, for every type. */
static void odd_block_counts(void **state)
{
    fixture *f = *state;
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        golden g;
        golden_load(f->ctx, type_names[t], &g);
        const size_t qk = g.k / 2, k = 5 * qk, row_bytes = g.w.row_bytes;
        const size_t block_bytes = row_bytes / 2, m = test_small_mode() ? 9 : 21;
        unsigned char *bytes = malloc(g.n * 5 * block_bytes);
        float *x = malloc(m * k * sizeof(float)), *ref = malloc(m * g.n * sizeof(float));
        float *y = malloc(m * g.n * sizeof(float));
        assert_true(bytes && x && ref && y);
        for (size_t j = 0; j < g.n; j++)
            for (size_t b = 0; b < 5; b++)
                memcpy(bytes + (j * 5 + b) * block_bytes,
                       g.bytes + j * row_bytes + (b % 2) * block_bytes, block_bytes);
        for (size_t r = 0; r < m; r++)
            for (size_t i = 0; i < k; i++)
                x[r * k + i] = g.x[(r % g.m) * g.k + (i / qk % 2) * qk + i % qk] *
                               (1.0f + 0.125f * (float)(i / qk));
        clattn_qweight w;
        assert_int_equal(clattn__qweight_upload(f->ctx, g.type, g.n, k, bytes,
                                                g.n * 5 * block_bytes, &w),
                         CLATTN_OK);
        ref_qi_linear(g.type, bytes, g.n, k, x, m, k, ref, g.n);
        cl_mem xb = buffer(f->ctx, m * k, x);
        for (size_t p = 0; p < 2; p++) {
            char what[64];
            snprintf(what, sizeof(what), "5 blocks a row, %s path", path_names[p]);
            run(f, &w, paths[p], false, m, xb, 0, k, y, g.n);
            compare(type_names[t], what, m, y, g.n, ref, g.n, g.n);
        }
        clReleaseMemObject(xb);
        clattn__qweight_release(&w);
        free(bytes);
        free(x);
        free(ref);
        free(y);
        golden_free(&g);
    }
}

/* Rows taken from the middle of a strided x, into a strided y: the rows' own bytes. */
static void strided_rows(void **state)
{
    fixture *f = *state;
    static const char *const types[] = {"q4_1", "q8_0", "q6_k"};
    const size_t big = test_small_mode() ? 9 : 40, m = test_small_mode() ? 5 : 33;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        golden g;
        golden_load(f->ctx, types[t], &g);
        const size_t ldx = g.k + 16, ldy = g.n + 3, first = 2;
        float *xs = malloc(big * ldx * sizeof(float)), *ref = malloc(m * g.n * sizeof(float));
        float *y = malloc(m * ldy * sizeof(float));
        assert_true(xs && ref && y);
        test_fill_uniform(xs, big * ldx, 11 + t, -3.0f, 3.0f);
        ref_qi_linear(g.type, g.bytes, g.n, g.k, xs + first * ldx, m, ldx, ref, g.n);
        cl_mem x = buffer(f->ctx, big * ldx, xs);
        for (size_t p = 0; p < 2; p++) {
            run(f, &g.w, paths[p], false, m, x, first, ldx, y, ldy);
            compare(types[t], path_names[p], m, y, ldy, ref, g.n, g.n);
        }
        clReleaseMemObject(x);
        free(xs);
        free(ref);
        free(y);
        golden_free(&g);
    }
}

/* The fused gate|up layer: the unfused layers' bytes (19 gate, 19 up rows). */
/* Type `name`'s SwiGLU layer fused (f->prog's tiles) against the unfused layers' bytes (the plain
 * kernel, then clattn__qlinear_glu), for m = 1, 5 and `big` on both paths. */
static void check_swiglu(fixture *f, const char *name, size_t big)
{
    golden g;
    golden_load(f->ctx, name, &g);
    const size_t n = g.n / 2, ldy = n + 3;
    cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
    float *ref = malloc(big * g.n * sizeof(float)), *y = malloc(big * ldy * sizeof(float));
    assert_true(ref && y);
    cl_mem h = buffer(f->ctx, big * g.n, NULL);
    if (clattn__qlinear_path(f->ctx, f->prog, CLATTN_OP_OTHER, CLATTN_QLINEAR_MM, big, x, 0, g.k,
                             &g.w, h, 0, g.n) != CLATTN_OK ||
        clattn__qlinear_glu(f->ctx, f->prog, h, big, n) != CLATTN_OK)
        fail_msg("%s: the unfused layers: %s", name, clattn_last_error(f->ctx));
    read_back(f->ctx, h, big * g.n, ref);
    clReleaseMemObject(h);
    const size_t ms[] = {1, 5, big};
    for (size_t mi = 0; mi < 3; mi++) {
        if (ms[mi] > big)
            continue;
        for (size_t p = 0; p < 2; p++) {
            char what[64];
            snprintf(what, sizeof(what), "fused, m %zu, %s path", ms[mi], path_names[p]);
            run(f, &g.w, paths[p], true, ms[mi], x, 0, g.k, y, ldy);
            compare(name, what, ms[mi], y, ldy, ref, g.n, n);
        }
    }
    clReleaseMemObject(x);
    free(ref);
    free(y);
    golden_free(&g);
}

static void swiglu_fused(void **state)
{
    fixture *f = *state;
    const size_t big = test_small_mode() ? 5 : 40;
    for (size_t t = 0; t < TYPE_COUNT; t++) {
        if (test_small_mode() && strcmp(type_names[t], "q4_k") != 0)
            continue;
        check_swiglu(f, type_names[t], big);
    }
}

/* f->prog on the golden weight of `type`, the first m rows: the reference's bytes on the
 * matrix–vector and matrix–matrix paths, and the fused SwiGLU layer the unfused layers'. */
static void type_gives_reference_bytes(fixture *f, const char *type, size_t m)
{
    golden g;
    golden_load(f->ctx, type, &g);
    float *ref = malloc(m * g.n * sizeof(float)), *y = malloc(m * g.n * sizeof(float));
    assert_true(ref && y);
    ref_qi_linear(g.type, g.bytes, g.n, g.k, g.x, m, g.k, ref, g.n);
    cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
    for (size_t p = 0; p < 2; p++) {
        run(f, &g.w, paths[p], false, m, x, 0, g.k, y, g.n);
        compare(type, path_names[p], m, y, g.n, ref, g.n, g.n);
    }
    clReleaseMemObject(x);
    free(ref);
    free(y);
    golden_free(&g);
    check_swiglu(f, type, m);
}

/* Another tiling (CLATTN_QLINEAR `tiles`, whose matrix–matrix rows are `rows`, and whose build
 * options hold `option` when not NULL): the reference's bytes for a 32-value and a K-quant type
 * on both paths, and the fused SwiGLU layer the unfused layers' bytes. */
static void tiling_gives_reference_bytes(fixture *f, const char *tiles, unsigned rows,
                                         const char *option)
{
    setenv("CLATTN_QLINEAR", tiles, 1);
    clattn_qlinear_program *prog = NULL;
    clattn_status status = clattn__qlinear_program_create(f->ctx, &prog);
    unsetenv("CLATTN_QLINEAR");
    assert_int_equal(status, CLATTN_OK);
    assert_int_equal(clattn__qlinear_set_activations(f->ctx, prog, CLATTN_QLINEAR_INT8),
                     CLATTN_OK);
    assert_int_equal(clattn__qlinear_params(prog).mm8_rows, rows);
    if (option && !strstr(clattn__qlinear_build_options(prog), option))
        fail_msg("%s: the build options lack \"%s\": %s", tiles, option,
                 clattn__qlinear_build_options(prog));
    clattn_qlinear_program *saved = f->prog;
    f->prog = prog;
    static const char *const types[] = {"q4_1", "q6_k"};
    for (size_t t = 0; t < 2; t++)
        type_gives_reference_bytes(f, types[t], test_small_mode() ? 4 : 11);
    f->prog = saved;
    clattn__qlinear_program_release(prog);
}

/* Matrix–matrix tiles of 3 × 3, which divide neither the 38 columns nor the rows; matrix–vector
 * tiles of 2 columns, 3 rows; the fused SwiGLU's matrix–vector tile of 3 columns for Q4_1 (19
 * columns: 6 tiles and one). */
static void other_tiling(void **state)
{
    tiling_gives_reference_bytes(*state, "mm8r=3,mm8c=3,mvc=2,mvcw=2,mvr=3,mvsc=3", 3,
                                 " -DQL_MV_SC_q4_1=3 ");
}

/* Two columns on an odd number of rows (5): the K-quants' two-column tile on x86 with AVX512BW
 * (cl/qlinear_int8.cl's QI_WIDE2_TILE_THEN) pairs rows for its offsets and has one left over. */
static void two_column_tiling(void **state)
{
    tiling_gives_reference_bytes(*state, "mm8r=5,mm8c=2", 5, NULL);
}

/* Whether this device should take the AVX512-VNNI kernels: PoCL's CPU device with AVX-512
 * (native float width 16) on a CPU whose CPUID says AVX512_VNNI (leaf 7, subleaf 0, ECX bit 11). */
static bool expect_vnni(fixture *f)
{
#if defined(__x86_64__) || defined(__i386__)
    cl_device_id device = clattn_context_device(f->ctx);
    cl_platform_id platform;
    char name[256] = "";
    cl_device_type type = 0;
    cl_uint native = 0;
    clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(platform), &platform, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof(name), name, NULL);
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(native), &native, NULL);
    unsigned a, b, c, d;
    return (type & CL_DEVICE_TYPE_CPU) && strstr(name, "Portable Computing Language") &&
           native >= 16 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
#else
    (void)f;
    return false;
#endif
}

/* The VNNI choice follows the device; where it is taken, the kernels without it (vnni=0) give
 * the reference's bytes for every type on both paths too (and the default program's, which
 * reference_bytes checks); where it is not, asking for it is refused. */
static void vnni_either_way(void **state)
{
    fixture *f = *state;
    const bool vnni = clattn__qlinear_params(f->prog).vnni;
    assert_int_equal(vnni, expect_vnni(f));
    assert_int_equal(strstr(clattn__qlinear_build_options(f->prog), "-DQI_VNNI") != NULL, vnni);
    setenv("CLATTN_QLINEAR", vnni ? "vnni=0" : "vnni=1", 1);
    clattn_qlinear_program *prog = NULL;
    clattn_status status = clattn__qlinear_program_create(f->ctx, &prog);
    unsetenv("CLATTN_QLINEAR");
    if (!vnni) {
        assert_int_equal(status, CLATTN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(clattn_last_error(f->ctx), "AVX512_VNNI"));
        print_message("vnni_either_way: this device has no AVX512-VNNI kernels; checked that "
                      "vnni=1 is refused\n");
        return;
    }
    assert_int_equal(status, CLATTN_OK);
    assert_false(clattn__qlinear_params(prog).vnni);
    assert_null(strstr(clattn__qlinear_build_options(prog), "-DQI_VNNI"));
    assert_int_equal(clattn__qlinear_set_activations(f->ctx, prog, CLATTN_QLINEAR_INT8),
                     CLATTN_OK);
    clattn_qlinear_program *saved = f->prog;
    f->prog = prog;
    for (size_t t = 0; t < TYPE_COUNT; t++)
        type_gives_reference_bytes(f, type_names[t], test_small_mode() ? 3 : 11);
    f->prog = saved;
    clattn__qlinear_program_release(prog);
}

/* F16 keeps float32 activations (the float program's bytes); Q4_1 switched back to float gives
 * the float kernels' bytes, which are not the 8-bit ones. */
static void float_types_and_switching(void **state)
{
    fixture *f = *state;
    static const char *const types[] = {"f16", "q4_1"};
    for (size_t t = 0; t < 2; t++) {
        golden g;
        golden_load(f->ctx, types[t], &g);
        const size_t m = 3;
        cl_mem x = buffer(f->ctx, g.m * g.k, g.x);
        float *a = malloc(m * g.n * sizeof(float)), *b = malloc(m * g.n * sizeof(float));
        assert_true(a && b);
        run(f, &g.w, CLATTN_QLINEAR_MV, false, m, x, 0, g.k, a, g.n);
        assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, CLATTN_QLINEAR_FLOAT),
                         CLATTN_OK);
        run(f, &g.w, CLATTN_QLINEAR_MV, false, m, x, 0, g.k, b, g.n);
        assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, CLATTN_QLINEAR_INT8),
                         CLATTN_OK);
        bool same = memcmp(a, b, m * g.n * sizeof(float)) == 0;
        if (t == 0 && !same)
            fail_msg("f16 with 8-bit activations set: not the float kernels' bytes");
        if (t == 1 && same)
            fail_msg("q4_1: the float and the 8-bit kernels gave the same bytes");
        clReleaseMemObject(x);
        free(a);
        free(b);
        golden_free(&g);
    }
}

static void write_floats(clattn_context *ctx, cl_mem mem, const float *from, size_t floats)
{
    assert_int_equal(clEnqueueWriteBuffer(clattn_context_queue(ctx), mem, CL_TRUE, 0,
                                          floats * sizeof(float), from, 0, NULL, NULL),
                     CL_SUCCESS);
}

/* The 512-bit K-quant tile's copy of m quantised rows of k values in blocks of 256 (rows->t,
 * cl/act_quant.cl's qi_transpose_block) against the rows' own sums and scales: in groups of 8
 * rows, for each block and sub-block j of 32 values, each row's xs[2j] + xs[2j + 1] twice, then
 * each row's dx twice; a group's rows past m are row m − 1's. */
static void check_transposed_copy(clattn_context *ctx, const clattn_qlinear_rows *rows, size_t m,
                                  size_t k)
{
    const size_t blocks = k / 256, groups = (m + 7) / 8, floats = groups * blocks * 144;
    float *t = malloc(floats * sizeof(float)), *d = malloc(m * blocks * sizeof(float));
    short *s = malloc(m * (k / 16) * sizeof(short));
    assert_true(rows->block == 256 && t && d && s);
    cl_command_queue q = clattn_context_queue(ctx);
    assert_int_equal(clEnqueueReadBuffer(q, rows->t, CL_TRUE, 0, floats * sizeof(float), t, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(q, rows->d, CL_TRUE, 0, m * blocks * sizeof(float), d,
                                         0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(q, rows->s, CL_TRUE, 0, m * (k / 16) * sizeof(short),
                                         s, 0, NULL, NULL),
                     CL_SUCCESS);
    for (size_t r = 0; r < groups * 8; r++) {
        size_t src = r < m ? r : m - 1;
        for (size_t b = 0; b < blocks; b++) {
            const float *at = t + ((r / 8) * blocks + b) * 144 + 2 * (r % 8);
            const short *sums = s + src * (k / 16) + b * 16;
            for (size_t j = 0; j <= 8; j++) {
                float want = j < 8 ? (float)(sums[2 * j] + sums[2 * j + 1]) : d[src * blocks + b];
                if (at[16 * j] != want || at[16 * j + 1] != want)
                    fail_msg("the copy's row %zu, block %zu, %s %zu: %g, %g, not %g", r, b,
                             j < 8 ? "sub-block" : "scale", j, at[16 * j], at[16 * j + 1], want);
            }
        }
    }
    free(t), free(d), free(s);
}

/* A pre-norm layer's norm that quantises its rows for the projection after it
 * (clattn__add_rmsnorm_quantize into the rows clattn__qlinear_prequantize gives): the norm's
 * bytes and the layer's bytes are those of the norm, then the layer quantising its input
 * itself, and the layer does read the quantised rows (the float rows, overwritten with NaN
 * afterwards, are not read); once forgotten, or after another call's quantisation overwrote
 * them, the layer quantises its input again. Float activations get no rows to fill. Where the
 * tiles read the K-quants' transposed copy (check_transposed_copy), both quantisations write it
 * right, 11 rows: a whole group of 8 and one completed by the last row. */
static void norm_quantises_for_the_reader(void **state)
{
    fixture *f = *state;
    static const char *const types[] = {"q4_1", "q4_k"};
    const float eps = 1e-5f;
    /* CLATTN_TEST_QUICK=1 (slow devices: CI's rusticl leg): the 32-value blocks alone */
    const char *quick = getenv("CLATTN_TEST_QUICK");
    size_t count = quick && *quick && strcmp(quick, "0") != 0 ? 1 : 2;
    for (size_t t = 0; t < count; t++) {
        golden g;
        golden_load(f->ctx, types[t], &g);
        size_t block = 0, m = g.m < 11 ? g.m : 11, k = g.k, mk = m * k;
        assert_true(clattn__qlinear_type_supported(g.type, &block, NULL));
        float *x0 = malloc(mk * sizeof(float)), *res = malloc(mk * sizeof(float)),
              *nw = malloc(k * sizeof(float)), *y1 = malloc(mk * sizeof(float)),
              *y2 = malloc(mk * sizeof(float)), *nan = malloc(mk * sizeof(float)),
              *a = malloc(m * g.n * sizeof(float)), *b = malloc(m * g.n * sizeof(float));
        assert_true(x0 && res && nw && y1 && y2 && nan && a && b);
        test_fill_uniform(x0, mk, 11 + t, -2, 2);
        test_fill_uniform(res, mk, 12 + t, -1, 1);
        test_fill_uniform(nw, k, 13 + t, 0.5, 1.5);
        for (size_t i = 0; i < mk; i++)
            nan[i] = NAN;
        cl_mem xa = buffer(f->ctx, mk, x0), xb = buffer(f->ctx, mk, x0);
        cl_mem rm = buffer(f->ctx, mk, res), wm = buffer(f->ctx, k, nw);
        cl_mem ya = buffer(f->ctx, mk, nan), yb = buffer(f->ctx, mk, nan);
        /* the norm, then the layer quantising its input itself */
        assert_int_equal(clattn__add_rmsnorm(f->ctx, xa, 0, rm, 0, NULL, ya, 0, m, k, wm, eps),
                         CLATTN_OK);
        run(f, &g.w, CLATTN_QLINEAR_AUTO, false, m, ya, 0, k, a, g.n);
        /* the layer's own quantisation on the matrix–matrix path leaves the 512-bit tile's copy
         * in the scratch the rows below are given (where that tile reads one) */
        clattn_qlinear_rows rows;
        run(f, &g.w, CLATTN_QLINEAR_MM, false, m, ya, 0, k, b, g.n);
        assert_int_equal(clattn__qlinear_prequantize(f->ctx, f->prog, g.type, m, k, ya, 0, k,
                                                     &rows),
                         CLATTN_OK);
        if (rows.t)
            check_transposed_copy(f->ctx, &rows, m, k);
        clattn__qlinear_prequantized_forget(f->prog);
        /* the norm quantising for it */
        assert_int_equal(clattn__qlinear_prequantize(f->ctx, f->prog, g.type, m, k, yb, 0, k,
                                                     &rows),
                         CLATTN_OK);
        assert_true(rows.q && rows.d && rows.s);
        assert_int_equal(rows.block, block);
        assert_int_equal(clattn__add_rmsnorm_quantize(f->ctx, xb, 0, rm, 0, NULL, yb, 0, m, k,
                                                      wm, eps, rows.block, rows.q, rows.d,
                                                      rows.s, rows.t),
                         CLATTN_OK);
        if (rows.t)
            check_transposed_copy(f->ctx, &rows, m, k);
        read_back(f->ctx, ya, mk, y1);
        read_back(f->ctx, yb, mk, y2);
        assert_memory_equal(y1, y2, mk * sizeof(float));
        read_back(f->ctx, xa, mk, y1);
        read_back(f->ctx, xb, mk, y2);
        assert_memory_equal(y1, y2, mk * sizeof(float)); /* the residual sums */
        /* the float rows gone: the layer reads the quantised ones, on both paths */
        write_floats(f->ctx, yb, nan, mk);
        for (size_t p = 0; p < 2; p++) {
            run(f, &g.w, paths[p], false, m, yb, 0, k, b, g.n);
            compare(types[t], "norm-quantised rows", m, b, g.n, a, g.n, g.n);
        }
        /* forgotten: the layer quantises its (NaN) input again */
        clattn__qlinear_prequantized_forget(f->prog);
        run(f, &g.w, CLATTN_QLINEAR_AUTO, false, m, yb, 0, k, b, g.n);
        assert_true(isnan(b[0]));
        /* overwritten by another call's quantisation: likewise */
        assert_int_equal(clattn__qlinear_prequantize(f->ctx, f->prog, g.type, m, k, yb, 0, k,
                                                     &rows),
                         CLATTN_OK);
        assert_int_equal(clattn__add_rmsnorm_quantize(f->ctx, xb, 0, rm, 0, NULL, yb, 0, m, k,
                                                      wm, eps, rows.block, rows.q, rows.d,
                                                      rows.s, rows.t),
                         CLATTN_OK);
        write_floats(f->ctx, yb, nan, mk);
        run(f, &g.w, CLATTN_QLINEAR_AUTO, false, m, xa, 0, k, b, g.n);
        run(f, &g.w, CLATTN_QLINEAR_AUTO, false, m, yb, 0, k, b, g.n);
        assert_true(isnan(b[0]));
        /* float activations: no rows to fill */
        assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, CLATTN_QLINEAR_FLOAT),
                         CLATTN_OK);
        assert_int_equal(clattn__qlinear_prequantize(f->ctx, f->prog, g.type, m, k, yb, 0, k,
                                                     &rows),
                         CLATTN_OK);
        assert_null(rows.q);
        assert_int_equal(clattn__qlinear_set_activations(f->ctx, f->prog, CLATTN_QLINEAR_INT8),
                         CLATTN_OK);
        cl_mem mems[6] = {xa, xb, rm, wm, ya, yb};
        for (size_t i = 0; i < 6; i++)
            clReleaseMemObject(mems[i]);
        free(x0), free(res), free(nw), free(y1), free(y2), free(nan), free(a), free(b);
        golden_free(&g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_bytes),
        cmocka_unit_test(strided_rows),
        cmocka_unit_test(odd_block_counts),
        cmocka_unit_test(swiglu_fused),
        cmocka_unit_test(other_tiling),
        cmocka_unit_test(two_column_tiling),
        cmocka_unit_test(vnni_either_way),
        cmocka_unit_test(float_types_and_switching),
        cmocka_unit_test(norm_quantises_for_the_reader),
    };
    return cmocka_run_group_tests_name("qlinear_int8", tests, setup, teardown);
}
