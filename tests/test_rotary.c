/*
 * Rotary position embeddings (RoPE) far from position 0: clattn_sdpa with offsets of 1e8 costs
 * the memory of the positions it rotates, not of the offset (the context's rotary table holds a
 * window of positions, src/runtime/rotary_table.c), and gives the plain-C reference's result
 * (tests/ref/ref_rotary.c), whose angles are checked against transformers'. The windows a table
 * moves through (decoding steps one position at a time, far jumps, a second base) give the bytes
 * of a table built once from position 0.
 */
#include "common/test_util.h"
#include "ref/ref_attention.h"
#include "ref/ref_rotary.h"

#include "ops/rotary.h"
#include "runtime/context_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define FAR 100000000u /* 1e8: a table from position 0 would take 51 GB at d_k = 64 */

/* The reference's angles are PyTorch's: float32 inverse frequencies, float32 position ids and a
 * float32 product. At 1e8 that float product is far from the exact angle (the position rounds
 * to a multiple of 8, the product to a multiple of 8 · inv_freq), so the rule decides the
 * result. Values from transformers 4.57.6 (torch 2.9.1, tools/make-golden-venv.sh):
 *   from transformers import LlamaConfig
 *   from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
 *   rot = LlamaRotaryEmbedding(LlamaConfig(hidden_size=128, num_attention_heads=2,
 *                                          rope_theta=10000.0))
 *   cos, sin = rot(torch.zeros(1, 3, 64), torch.tensor([[100000000, 100000008, 100000039]]))
 *   cos[0, i, k], sin[0, i, k]
 * (the exact angles would give, e.g. at 100000000 and k = 1, cos 0.991204, not -0.998325). */
static void reference_angles_are_transformers(void **state)
{
    (void)state;
    static const struct {
        size_t p, k;
        double cos_a, sin_a;
    } want[] = {
        {100000000, 0, -0.363385081, 0.931639016},  {100000000, 1, -0.998324633, -0.0578610003},
        {100000000, 5, -0.330307543, 0.943873346},  {100000000, 17, -0.714547515, 0.699586928},
        {100000000, 31, -0.663004875, 0.748615086}, {100000008, 0, -0.868852198, -0.49507153},
        {100000008, 1, -0.998324633, -0.0578610003}, {100000008, 5, -0.720805168, -0.693137705},
        {100000008, 17, -0.756848097, 0.653590858}, {100000008, 31, -0.663735628, 0.747967243},
        {100000039, 0, -0.451821148, -0.89210856},  {100000039, 1, -0.47586602, 0.879517794},
        {100000039, 5, 0.790638685, -0.612282991},  {100000039, 17, -0.895020485, 0.446025074},
        {100000039, 31, -0.667379916, 0.744717419},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        double c, s;
        ref_rope_cos_sin(want[i].p, want[i].k, 64, 10000.0, &c, &s);
        if (fabs(c - want[i].cos_a) > 2e-7 || fabs(s - want[i].sin_a) > 2e-7)
            fail_msg("position %zu pair %zu: (%.9g, %.9g), transformers (%.9g, %.9g)", want[i].p,
                     want[i].k, c, s, want[i].cos_a, want[i].sin_a);
    }
}

static long peak_rss_kib(void)
{
    struct rusage usage;
    assert_int_equal(getrusage(RUSAGE_SELF, &usage), 0);
    return usage.ru_maxrss; /* KiB on Linux */
}

typedef struct far_case {
    size_t query_offset, key_offset;
    clattn_attention_path path;
} far_case;

enum { B = 1, H = 2, NQ = 5, NK = 40, D = 64 };

/* clattn_sdpa with RoPE (half-split, all of d_k, θ 10000) at the case's offsets; out and
 * weights (unfused path only) read back. */
static void run_sdpa(clattn_context *ctx, clattn_tensor *const t[5], const far_case *c,
                     float *out, float *weights)
{
    clattn_rope_params rope;
    clattn_rope_params_default(&rope);
    rope.query_offset = c->query_offset;
    rope.key_offset = c->key_offset;
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.rope = &rope;
    p.path = c->path;
    p.attn_weights = c->path == CLATTN_PATH_UNFUSED ? t[4] : NULL;
    assert_int_equal(clattn_sdpa(ctx, t[0], t[1], t[2], t[3], &p), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(t[3], out, B * H * NQ * D), CLATTN_OK);
    if (weights && c->path == CLATTN_PATH_UNFUSED)
        assert_int_equal(clattn_tensor_read(t[4], weights, B * H * NQ * NK), CLATTN_OK);
}

/* Offsets of 1e8 (and past 2^32: the kernels index the table from the window's start) grow the
 * peak resident memory by far less than 1 GiB (a table from position 0 takes 51 GB at 1e8, and
 * 4.97 GB and 20 s at 1e7), keep every table of the context small, and give the reference's
 * outputs and weights. Measured after a first call at offset 0, which builds the kernels and
 * the workspace: what the far calls add is what they cost. */
static void far_offsets_cost_their_window_not_their_offset(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t qs[4] = {B, H, NQ, D}, ks[4] = {B, H, NK, D}, ws[4] = {B, H, NQ, NK};
    float q[B * H * NQ * D], k[B * H * NK * D], v[B * H * NK * D];
    test_fill_uniform(q, B * H * NQ * D, 71, -1, 1);
    test_fill_uniform(k, B * H * NK * D, 72, -1, 1);
    test_fill_uniform(v, B * H * NK * D, 73, -1, 1);
    clattn_tensor *t[5] = {test_tensor_from(ctx, 4, qs, q), test_tensor_from(ctx, 4, ks, k),
                           test_tensor_from(ctx, 4, ks, v), NULL, NULL};
    assert_int_equal(clattn_tensor_create(ctx, &t[3], 4, qs), CLATTN_OK);
    assert_int_equal(clattn_tensor_create(ctx, &t[4], 4, ws), CLATTN_OK);
    static float out[B * H * NQ * D], weights[B * H * NQ * NK], plain[B * H * NQ * D];
    for (int path = CLATTN_PATH_UNFUSED; path <= CLATTN_PATH_FUSED; path++)
        run_sdpa(ctx, t, &(far_case){0, 0, (clattn_attention_path)path}, plain, NULL);
    assert_int_equal(clattn_context_finish(ctx), CLATTN_OK);

    const far_case cases[] = {
        {FAR, FAR, CLATTN_PATH_UNFUSED},
        {FAR, FAR, CLATTN_PATH_FUSED},
        {FAR + 13, 7, CLATTN_PATH_UNFUSED},                /* queries and keys far apart */
        {(1ull << 33) + 500, (1ull << 33) + 490, CLATTN_PATH_FUSED}, /* past 2^32 */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const far_case *c = &cases[i];
        long before = peak_rss_kib();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        run_sdpa(ctx, t, c, out, weights);
        assert_int_equal(clattn_context_finish(ctx), CLATTN_OK);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long grown = peak_rss_kib() - before;
        print_message("    offsets %zu, %zu: peak resident memory +%ld KiB, %.3f s\n",
                      c->query_offset, c->key_offset, grown,
                      (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        assert_true(grown < 1024L * 1024L); /* 1 GiB */
        for (size_t e = 0; e < CLATTN_ROTARY_TABLES; e++)
            assert_true(ctx->rope_table.entries[e].positions <= 4096);

        float rq[B * H * NQ * D], rk[B * H * NK * D];
        static float want[B * H * NQ * D], want_w[B * H * NQ * NK];
        memcpy(rq, q, sizeof(q)), memcpy(rk, k, sizeof(k));
        ref_rope(rq, B, H, NQ, D, D, false, 10000.0, c->query_offset);
        ref_rope(rk, B, H, NK, D, D, false, 10000.0, c->key_offset);
        ref_sdpa(rq, rk, v, B, H, NQ, NK, D, D, 1.0f / sqrtf((float)D), NULL, want, want_w);
        assert_close(out, want, B * H * NQ * D, 1e-5);
        if (c->path == CLATTN_PATH_UNFUSED)
            assert_close(weights, want_w, B * H * NQ * NK, 1e-5);
        /* the comparison can fail: these rotations change the result */
        assert_true(test_max_abs_diff(out, plain, B * H * NQ * D) > 1e-3);
    }
    for (int i = 0; i < 5; i++)
        clattn_tensor_destroy(&t[i]);
}

/* Positions whose end passes SIZE_MAX are refused, naming them. */
static void positions_past_size_max_are_refused(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t shape[4] = {1, 1, 3, 4};
    float x[12] = {0};
    clattn_tensor *q = test_tensor_from(ctx, 4, shape, x), *o = test_tensor_from(ctx, 4, shape, x);
    clattn_rope_params rope;
    clattn_rope_params_default(&rope);
    rope.query_offset = SIZE_MAX - 1;
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.rope = &rope;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_TOO_LARGE,
                      "overflow size_t");
    clattn_tensor_destroy(&q), clattn_tensor_destroy(&o);
}

enum { ROWS = 300, HEADS = 2, WIDTH = 8 };

/* Rotates rows first .. first + n - 1 of every head of x [1, HEADS, ROWS, WIDTH] in place at
 * positions pos0 .. pos0 + n - 1. */
static void rotate_rows(clattn_context *ctx, clattn_tensor *x, size_t first, size_t n,
                        size_t pos0, double theta, size_t rot_dim, bool interleaved)
{
    clattn_head_view view = {clattn_tensor_buffer(x), first * WIDTH, HEADS * ROWS * WIDTH,
                             ROWS * WIDTH, WIDTH};
    clattn_rotary_spec spec = {rot_dim, interleaved, theta, pos0, NULL};
    assert_int_equal(clattn__rotary_in_place(ctx, &view, 1, HEADS, n, &spec), CLATTN_OK);
}

/* Rotating one position at a time (a decoding cache's steps), or in blocks, while other calls
 * move the tables away (far positions, a second base, the least recently used table replaced)
 * gives the bytes of rotating all rows at once from position 0. */
static void moving_windows_give_the_bytes_of_one_table(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t shape[4] = {1, HEADS, ROWS, WIDTH}, n = HEADS * ROWS * WIDTH;
    float x[HEADS * ROWS * WIDTH], at_once[HEADS * ROWS * WIDTH], got[HEADS * ROWS * WIDTH];
    test_fill_uniform(x, n, 81, -1, 1);
    clattn_tensor *all = test_tensor_from(ctx, 4, shape, x), *steps = test_tensor_from(ctx, 4, shape, x),
                  *other = test_tensor_from(ctx, 4, shape, x);
    for (int base = 0; base < 2; base++) {
        double theta = base ? 500.0 : 10000.0;
        size_t rot = base ? 6 : 8;
        bool inter = base == 1;
        assert_int_equal(clattn_tensor_write(all, x, n), CLATTN_OK);
        assert_int_equal(clattn_tensor_write(steps, x, n), CLATTN_OK);
        rotate_rows(ctx, all, 0, ROWS, 0, theta, rot, inter);
        for (size_t i = 0; i < ROWS; i++) {
            rotate_rows(ctx, steps, i, 1, i, theta, rot, inter);
            if (i % 40 == 0) /* far away with the same base, then another base */
                rotate_rows(ctx, other, 0, 4, FAR + i, theta, rot, inter);
            if (i % 70 == 0)
                rotate_rows(ctx, other, 0, 3, 3 * i, 30.0, 4, false);
        }
        assert_int_equal(clattn_tensor_read(all, at_once, n), CLATTN_OK);
        assert_int_equal(clattn_tensor_read(steps, got, n), CLATTN_OK);
        assert_memory_equal(got, at_once, sizeof(got));
        /* blocks of 37 from the end backwards: windows moving down */
        assert_int_equal(clattn_tensor_write(steps, x, n), CLATTN_OK);
        for (size_t end = ROWS; end > 0;) {
            size_t first = end > 37 ? end - 37 : 0;
            rotate_rows(ctx, steps, first, end - first, first, theta, rot, inter);
            rotate_rows(ctx, other, 0, 2, FAR / 2 + first, theta, rot, inter);
            end = first;
        }
        assert_int_equal(clattn_tensor_read(steps, got, n), CLATTN_OK);
        assert_memory_equal(got, at_once, sizeof(got));
        /* and the reference's rotation (the positions decide: rows differ from the input) */
        float want[HEADS * ROWS * WIDTH];
        memcpy(want, x, sizeof(x));
        ref_rope(want, 1, HEADS, ROWS, WIDTH, rot, inter, theta, 0);
        assert_close(at_once, want, n, 1e-6);
        for (size_t e = 0; e < CLATTN_ROTARY_TABLES; e++)
            assert_true(ctx->rope_table.entries[e].positions <= 4096);
    }
    clattn_tensor_destroy(&all), clattn_tensor_destroy(&steps), clattn_tensor_destroy(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_angles_are_transformers),
        cmocka_unit_test(far_offsets_cost_their_window_not_their_offset),
        cmocka_unit_test(positions_past_size_max_are_refused),
        cmocka_unit_test(moving_windows_give_the_bytes_of_one_table),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
