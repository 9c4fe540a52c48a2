/*
 * The launches a decoding step fuses give the bytes of the launches they replace, compared with
 * memcmp on seeded random inputs:
 *   clattn__add_rmsnorm   against clattn__add then clattn__rmsnorm (with and without a bias);
 *   clattn__rmsnorm_qk_heads against clattn__rmsnorm on each head as a row of its own;
 *   clattn__rope_append   against clattn__rotary_in_place on the queries and on the keys, then
 *                         the keys and values copied into the cache rows (halves and interleaved
 *                         pairs, a partial rotation, two sequences of three rows after a past).
 * Small shapes: this executable also runs under oclgrind.
 */
#include "common/test_util.h"
#include "ops/elementwise.h"
#include "ops/rotary.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

static float *random_array(size_t n, uint64_t seed, float lo, float hi)
{
    float *x = malloc(n * sizeof(float) + 1);
    test_fill_uniform(x, n, seed, lo, hi);
    return x;
}

static void add_rmsnorm_is_add_then_rmsnorm(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { ROWS = 5, WIDTH = 77 };
    float *x = random_array(ROWS * WIDTH, 1, -3.0f, 3.0f);
    float *res = random_array(ROWS * WIDTH, 2, -3.0f, 3.0f);
    float *bias = random_array(WIDTH, 3, -1.0f, 1.0f);
    float *weight = random_array(WIDTH, 4, 0.5f, 1.5f);
    size_t shape[2] = {ROWS, WIDTH};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        clattn_tensor *x1 = test_tensor_from(ctx, 2, shape, x);
        clattn_tensor *x2 = test_tensor_from(ctx, 2, shape, x);
        clattn_tensor *tr = test_tensor_from(ctx, 2, shape, res);
        clattn_tensor *tb = test_tensor_from(ctx, 1, (size_t[]){WIDTH}, bias);
        clattn_tensor *tw = test_tensor_from(ctx, 1, (size_t[]){WIDTH}, weight);
        clattn_tensor *y1 = test_tensor_from(ctx, 2, shape, res);
        clattn_tensor *y2 = test_tensor_from(ctx, 2, shape, x);
        cl_mem b = with_bias ? tb->mem : NULL;
        assert_int_equal(clattn__add(ctx, x1->mem, 0, tr->mem, 0, b, ROWS, WIDTH), CLATTN_OK);
        assert_int_equal(clattn__rmsnorm(ctx, x1->mem, 0, y1->mem, 0, ROWS, WIDTH, tw->mem, 1e-5f),
                         CLATTN_OK);
        assert_int_equal(clattn__add_rmsnorm(ctx, x2->mem, 0, tr->mem, 0, b, y2->mem, 0, ROWS,
                                             WIDTH, tw->mem, 1e-5f),
                         CLATTN_OK);
        float *sum1 = test_tensor_to_host(x1), *sum2 = test_tensor_to_host(x2);
        float *out1 = test_tensor_to_host(y1), *out2 = test_tensor_to_host(y2);
        assert_memory_equal(sum1, sum2, ROWS * WIDTH * sizeof(float));
        assert_memory_equal(out1, out2, ROWS * WIDTH * sizeof(float));
        free(sum1), free(sum2), free(out1), free(out2);
        clattn_tensor_destroy(&x1), clattn_tensor_destroy(&x2), clattn_tensor_destroy(&tr);
        clattn_tensor_destroy(&tb), clattn_tensor_destroy(&tw);
        clattn_tensor_destroy(&y1), clattn_tensor_destroy(&y2);
    }
    free(x), free(res), free(bias), free(weight);
}

/* Qwen3's q/k head norms in place on packed rows (a pitch past the heads, an offset, heads of
 * a width that is not a multiple of the reduction's work-group) give each head the bytes
 * clattn__rmsnorm gives it as a row of its own, with its own weight; the rest of a row is left
 * as it was. On CPU devices the head norms run one work-item per head, clattn__rmsnorm a
 * work-group per row: the same order, compared here. */
static void rmsnorm_qk_heads_is_rmsnorm_per_head(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { ROWS = 3, QH = 3, KH = 2, D = 72, PITCH = (QH + KH) * D + 5, OFF = 7 };
    const size_t n = OFF + ROWS * PITCH;
    float *x = random_array(n, 5, -4.0f, 4.0f);
    float *qw = random_array(D, 6, 0.5f, 1.5f), *kw = random_array(D, 7, 0.5f, 1.5f);
    clattn_tensor *tx = test_tensor_from(ctx, 1, (size_t[]){n}, x);
    clattn_tensor *tq = test_tensor_from(ctx, 1, (size_t[]){D}, qw);
    clattn_tensor *tk = test_tensor_from(ctx, 1, (size_t[]){D}, kw);
    assert_int_equal(clattn__rmsnorm_qk_heads(ctx, tx->mem, OFF, PITCH, ROWS, QH, KH, D, tq->mem,
                                              tk->mem, 1e-6f),
                     CLATTN_OK);
    float *got = test_tensor_to_host(tx);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t h = 0; h < QH + KH; h++) {
            const float *head = x + OFF + r * PITCH + h * D;
            clattn_tensor *row = test_tensor_from(ctx, 1, (size_t[]){D}, head);
            clattn_tensor *out = test_tensor_from(ctx, 1, (size_t[]){D}, head);
            assert_int_equal(clattn__rmsnorm(ctx, row->mem, 0, out->mem, 0, 1, D,
                                             h < QH ? tq->mem : tk->mem, 1e-6f),
                             CLATTN_OK);
            float *want = test_tensor_to_host(out);
            assert_memory_equal(got + OFF + r * PITCH + h * D, want, D * sizeof(float));
            free(want);
            clattn_tensor_destroy(&row), clattn_tensor_destroy(&out);
        }
    for (size_t r = 0; r < ROWS; r++)
        assert_memory_equal(got + OFF + r * PITCH + (QH + KH) * D,
                            x + OFF + r * PITCH + (QH + KH) * D, 5 * sizeof(float));
    assert_memory_equal(got, x, OFF * sizeof(float));
    free(got), free(x), free(qw), free(kw);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk);
}

static void rope_append_is_rotations_then_copies(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { B = 2, N = 3, H = 3, HKV = 1, D = 8, DV = 6, CAP = 7, PAST = 2 };
    const size_t kw = HKV * D, vw = HKV * DV, qk = H * D, pitch = qk + kw + vw;
    float *proj = random_array(B * N * pitch, 5, -2.0f, 2.0f);
    float *k_init = random_array(B * CAP * kw, 6, -1.0f, 1.0f);
    float *v_init = random_array(B * CAP * vw, 7, -1.0f, 1.0f);
    for (int interleaved = 0; interleaved < 2; interleaved++) {
        clattn_rotary_spec spec = {6, interleaved, 10000.0, 5, NULL}; /* 6, 7 not rotated */
        /* the separate launches, the copies made on the host */
        clattn_tensor *p1 = test_tensor_from(ctx, 2, (size_t[]){B * N, pitch}, proj);
        clattn_head_view q_view = {p1->mem, 0, N * pitch, D, pitch};
        clattn_head_view k_view = {p1->mem, qk, N * pitch, D, pitch};
        assert_int_equal(clattn__rotary_in_place(ctx, &q_view, B, H, N, &spec), CLATTN_OK);
        assert_int_equal(clattn__rotary_in_place(ctx, &k_view, B, HKV, N, &spec), CLATTN_OK);
        float *want_proj = test_tensor_to_host(p1);
        float *want_k = malloc(B * CAP * kw * sizeof(float));
        float *want_v = malloc(B * CAP * vw * sizeof(float));
        memcpy(want_k, k_init, B * CAP * kw * sizeof(float));
        memcpy(want_v, v_init, B * CAP * vw * sizeof(float));
        for (size_t b = 0; b < B; b++)
            for (size_t r = 0; r < N; r++) {
                const float *row = want_proj + (b * N + r) * pitch;
                memcpy(want_k + (b * CAP + PAST + r) * kw, row + qk, kw * sizeof(float));
                memcpy(want_v + (b * CAP + PAST + r) * vw, row + qk + kw, vw * sizeof(float));
            }
        /* the fused launch */
        clattn_tensor *p2 = test_tensor_from(ctx, 2, (size_t[]){B * N, pitch}, proj);
        clattn_tensor *kc = test_tensor_from(ctx, 2, (size_t[]){B * CAP, kw}, k_init);
        clattn_tensor *vc = test_tensor_from(ctx, 2, (size_t[]){B * CAP, vw}, v_init);
        clattn_rope_append_args a = {p2->mem, 0,       pitch,       B,        N,
                                     H,       HKV,     D,           DV,       kc->mem,
                                     vc->mem, PAST * kw, CAP * kw, PAST * vw, CAP * vw};
        assert_int_equal(clattn__rope_append(ctx, &a, &spec), CLATTN_OK);
        float *got_proj = test_tensor_to_host(p2);
        float *got_k = test_tensor_to_host(kc), *got_v = test_tensor_to_host(vc);
        for (size_t row = 0; row < B * N; row++) /* the queries: rotated in place */
            assert_memory_equal(got_proj + row * pitch, want_proj + row * pitch,
                                qk * sizeof(float));
        assert_memory_equal(got_k, want_k, B * CAP * kw * sizeof(float));
        assert_memory_equal(got_v, want_v, B * CAP * vw * sizeof(float));
        free(want_proj), free(want_k), free(want_v), free(got_proj), free(got_k), free(got_v);
        clattn_tensor_destroy(&p1), clattn_tensor_destroy(&p2);
        clattn_tensor_destroy(&kc), clattn_tensor_destroy(&vc);
    }
    free(proj), free(k_init), free(v_init);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(add_rmsnorm_is_add_then_rmsnorm),
        cmocka_unit_test(rmsnorm_qk_heads_is_rmsnorm_per_head),
        cmocka_unit_test(rope_append_is_rotations_then_copies),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
