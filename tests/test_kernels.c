/*
 * Each attention kernel alone against the plain-C reference (tests/ref), on seeded random inputs
 * of odd sizes. Small shapes: this executable also runs under oclgrind.
 * Tolerances: 2e-6 absolute for unit-scale scores and probabilities (float32 accumulation of at
 * most 33 terms against double).
 */
#include "common/test_util.h"
#include "ops/attention_problem.h"
#include "ops/elementwise.h"
#include "ops/pooling.h"
#include "ops/positional.h"
#include "runtime/launch.h"
#include "runtime/positional_table.h"
#include "runtime/tensor_internal.h"
#include "ref/ref_attention.h"
#include "ref/ref_encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 2e-6

static float *random_array(size_t n, uint64_t seed, float lo, float hi)
{
    float *x = malloc(n * sizeof(float) + 1);
    test_fill_uniform(x, n, seed, lo, hi);
    return x;
}

/* Head view of a contiguous [B, H, N, d] tensor. */
static clattn_head_view contiguous_view(const clattn_tensor *t)
{
    return (clattn_head_view){clattn_tensor_buffer(t), 0, clattn_tensor_stride(t, 0),
                              clattn_tensor_stride(t, 1), clattn_tensor_stride(t, 2)};
}

typedef struct mask_setup {
    int attn;          /* 0 none, 1 bool [Nq,Nk], 2 additive [B,1,Nq,Nk] broadcast over heads */
    int key_padding;   /* 0 none, 1 bool, 2 additive */
    bool causal;
} mask_setup;

/* Scores for pairs [bh0, bh0 + pairs) of a [B, H, Nq, Nk] problem with the given masks. */
static void check_scores(test_fixture *f, size_t B, size_t H, size_t Nq, size_t Nk, size_t dk,
                         size_t bh0, size_t pairs, mask_setup ms, uint64_t seed)
{
    float *q = random_array(B * H * Nq * dk, seed, -1, 1);
    float *k = random_array(B * H * Nk * dk, seed + 1, -1, 1);
    size_t am_count = ms.attn == 1 ? Nq * Nk : B * Nq * Nk;
    float *am = random_array(am_count, seed + 2, -2, 1);
    float *kp = random_array(B * Nk, seed + 3, -2, 0);
    if (ms.attn == 1)
        for (size_t i = 0; i < am_count; i++)
            am[i] = am[i] > 0.3f ? 1.0f : 0.0f;
    if (ms.key_padding == 1)
        for (size_t i = 0; i < B * Nk; i++)
            kp[i] = kp[i] < -1.4f ? 1.0f : 0.0f;

    clattn_tensor *tq = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nq, dk}, q);
    clattn_tensor *tk = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nk, dk}, k);
    clattn_tensor *tam = test_tensor_from(f->ctx, 1, &am_count, am);
    clattn_tensor *tkp = test_tensor_from(f->ctx, 2, (size_t[]){B, Nk}, kp);
    clattn_tensor *ts = test_tensor_from(f->ctx, 3, (size_t[]){pairs, Nq, Nk}, NULL);

    float scale = 1.0f / sqrtf((float)dk);
    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    p.batch = B, p.heads = H, p.seq_q = Nq, p.seq_k = Nk, p.dk = dk, p.dv = 1;
    p.scale = scale;
    p.causal = ms.causal;
    p.q = contiguous_view(tq);
    p.k = contiguous_view(tk);
    ref_masks rm = {0};
    rm.causal = ms.causal;
    if (ms.attn) {
        p.attn_mask = (clattn_mask_view){clattn_tensor_buffer(tam), 0,
                                         ms.attn == 1 ? 0 : Nq * Nk, 0, Nk, 1,
                                         ms.attn == 1 ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE};
        rm.attn_mask = am;
        rm.attn_mask_bool = ms.attn == 1;
        rm.am_sb = p.attn_mask.sb, rm.am_si = Nk, rm.am_sj = 1;
    }
    if (ms.key_padding) {
        p.key_padding_mask = (clattn_mask_view){
            clattn_tensor_buffer(tkp), 0, Nk, 0, 0, 1,
            ms.key_padding == 1 ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE};
        rm.key_padding_mask = kp;
        rm.key_padding_bool = ms.key_padding == 1;
    }
    clattn_score_chunk c = {(cl_uint)H, (cl_uint)pairs, (cl_uint)Nq, (cl_uint)Nk, (cl_uint)bh0,
                            clattn_tensor_buffer(ts), 0};
    assert_int_equal(clattn__launch_scores(f->ctx, &p, &c), CLATTN_OK);
    float *got = test_tensor_to_host(ts);

    float *want = malloc(B * H * Nq * Nk * sizeof(float));
    ref_scores(q, k, B, H, Nq, Nk, dk, scale, &rm, want);
    assert_close(got, want + bh0 * Nq * Nk, pairs * Nq * Nk, TOL);

    free(got), free(want), free(q), free(k), free(am), free(kp);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tam);
    clattn_tensor_destroy(&tkp), clattn_tensor_destroy(&ts);
}

static void scores_without_masks(void **state)
{
    mask_setup none = {0, 0, false};
    check_scores(*state, 1, 1, 1, 1, 1, 0, 1, none, 1);
    check_scores(*state, 2, 3, 7, 5, 3, 0, 6, none, 2);
    check_scores(*state, 3, 2, 5, 9, 16, 0, 6, none, 3);
    check_scores(*state, 1, 1, 33, 17, 8, 0, 1, none, 4);
}

static void scores_of_a_chunk_in_the_middle(void **state)
{
    mask_setup none = {0, 0, false};
    check_scores(*state, 3, 2, 4, 6, 5, 1, 3, none, 5); /* pairs 1..3 straddle batches 0 and 1 */
    check_scores(*state, 2, 3, 3, 3, 2, 5, 1, none, 6); /* the last pair alone */
}

static void scores_with_each_mask(void **state)
{
    check_scores(*state, 2, 2, 5, 7, 4, 0, 4, (mask_setup){1, 0, false}, 7);
    check_scores(*state, 2, 2, 5, 7, 4, 0, 4, (mask_setup){2, 0, false}, 8);
    check_scores(*state, 2, 2, 5, 7, 4, 0, 4, (mask_setup){0, 1, false}, 9);
    check_scores(*state, 2, 2, 5, 7, 4, 0, 4, (mask_setup){0, 2, false}, 10);
    check_scores(*state, 2, 2, 5, 7, 4, 0, 4, (mask_setup){0, 0, true}, 11);
    check_scores(*state, 2, 2, 7, 5, 4, 0, 4, (mask_setup){0, 0, true}, 12); /* Nq > Nk */
    check_scores(*state, 2, 3, 6, 6, 3, 2, 3, (mask_setup){2, 1, true}, 13);
    check_scores(*state, 2, 3, 6, 6, 3, 0, 6, (mask_setup){1, 2, false}, 14);
}

static void check_softmax(test_fixture *f, size_t rows, size_t n, uint64_t seed)
{
    float *x = random_array(rows * n, seed, -8, 8);
    /* Some -inf entries, one fully masked row, one row with large values (stability). */
    for (size_t i = 0; i < rows * n; i += 5)
        x[i] = -INFINITY;
    if (rows > 1)
        for (size_t j = 0; j < n; j++)
            x[n + j] = -INFINITY;
    if (rows > 2)
        for (size_t j = 0; j < n; j++)
            x[2 * n + j] += 90.0f;
    clattn_tensor *t = test_tensor_from(f->ctx, 2, (size_t[]){rows, n}, x);
    clattn_score_chunk c = {1, (cl_uint)rows, 1, (cl_uint)n, 0, clattn_tensor_buffer(t), 0};
    assert_int_equal(clattn__launch_softmax(f->ctx, &c), CLATTN_OK);
    float *got = test_tensor_to_host(t);
    ref_softmax_rows(x, rows, n);
    assert_close(got, x, rows * n, TOL);
    for (size_t i = 0; i < rows * n; i++)
        assert_false(isnan(got[i]));
    if (rows > 1)
        for (size_t j = 0; j < n; j++)
            assert_true(got[n + j] == 0.0f);
    free(got), free(x);
    clattn_tensor_destroy(&t);
}

static void softmax_rows_of_odd_lengths(void **state)
{
    check_softmax(*state, 1, 1, 20);
    check_softmax(*state, 3, 1, 21);
    check_softmax(*state, 4, 7, 22);
    check_softmax(*state, 5, 64, 23);
    check_softmax(*state, 3, 129, 24);
    check_softmax(*state, 2, 1000, 25);
}

static void check_head_merge(test_fixture *f, size_t B, size_t H, size_t Nq, size_t Nk, size_t dv,
                             uint64_t seed)
{
    size_t pairs = B * H;
    float *p = random_array(pairs * Nq * Nk, seed, 0, 1);
    float *v = random_array(B * H * Nk * dv, seed + 1, -1, 1);
    clattn_tensor *tp = test_tensor_from(f->ctx, 3, (size_t[]){pairs, Nq, Nk}, p);
    clattn_tensor *tv = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nk, dv}, v);
    clattn_tensor *to = test_tensor_from(f->ctx, 3, (size_t[]){B, Nq, H * dv}, NULL);
    clattn_attention_problem prob;
    memset(&prob, 0, sizeof(prob));
    prob.batch = B, prob.heads = H, prob.seq_q = Nq, prob.seq_k = Nk, prob.dv = dv;
    prob.v = contiguous_view(tv);
    /* Output in the concatenated-heads layout [B, Nq, H·dv]. */
    prob.out = (clattn_head_view){clattn_tensor_buffer(to), 0, Nq * H * dv, dv, H * dv};
    clattn_score_chunk c = {(cl_uint)H, (cl_uint)pairs, (cl_uint)Nq, (cl_uint)Nk, 0,
                            clattn_tensor_buffer(tp), 0};
    assert_int_equal(clattn__launch_head_merge(f->ctx, &prob, &c), CLATTN_OK);
    float *got = test_tensor_to_host(to);

    float *split = malloc(B * H * Nq * dv * sizeof(float));
    float *want = malloc(B * H * Nq * dv * sizeof(float));
    ref_weights_v(p, v, B, H, Nq, Nk, dv, split);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Nq; i++)
                memcpy(want + (b * Nq + i) * H * dv + h * dv, split + ((b * H + h) * Nq + i) * dv,
                       dv * sizeof(float));
    assert_close(got, want, B * Nq * H * dv, 4e-6);
    free(got), free(want), free(split), free(p), free(v);
    clattn_tensor_destroy(&tp), clattn_tensor_destroy(&tv), clattn_tensor_destroy(&to);
}

static void head_merge_writes_concatenated_heads(void **state)
{
    check_head_merge(*state, 1, 1, 1, 1, 1, 30);
    check_head_merge(*state, 2, 3, 5, 7, 4, 31);
    check_head_merge(*state, 3, 2, 7, 1, 5, 32);
    check_head_merge(*state, 1, 4, 3, 33, 2, 33);
}

static void average_heads_over_chunks(void **state)
{
    test_fixture *f = *state;
    size_t B = 3, H = 2, Nq = 3, Nk = 5, chunk_pairs = 4; /* chunks of 4 straddle batches */
    size_t pairs = B * H;
    float *p = random_array(pairs * Nq * Nk, 40, 0, 1);
    clattn_tensor *tp = test_tensor_from(f->ctx, 3, (size_t[]){pairs, Nq, Nk}, p);
    clattn_tensor *tavg = test_tensor_from(f->ctx, 3, (size_t[]){B, Nq, Nk}, NULL);
    assert_int_equal(clattn_tensor_fill(tavg, 0.0f), CLATTN_OK);
    clattn_attention_problem prob;
    memset(&prob, 0, sizeof(prob));
    prob.batch = B, prob.heads = H, prob.seq_q = Nq, prob.seq_k = Nk;
    prob.weights_layout = CLATTN_WEIGHTS_AVERAGED;
    prob.weights = clattn_tensor_buffer(tavg);
    for (size_t bh0 = 0; bh0 < pairs; bh0 += chunk_pairs) {
        size_t n = pairs - bh0 < chunk_pairs ? pairs - bh0 : chunk_pairs;
        /* The chunk's probabilities start at pair bh0 of tp. */
        clattn_score_chunk c = {(cl_uint)H, (cl_uint)n, (cl_uint)Nq, (cl_uint)Nk, (cl_uint)bh0,
                                clattn_tensor_buffer(tp), bh0 * Nq * Nk};
        assert_int_equal(clattn__launch_average_heads(f->ctx, &prob, &c), CLATTN_OK);
    }
    float *got = test_tensor_to_host(tavg);
    float want[3 * 3 * 5];
    for (size_t b = 0; b < B; b++)
        for (size_t ij = 0; ij < Nq * Nk; ij++)
            want[b * Nq * Nk + ij] =
                (float)(((double)p[(b * H) * Nq * Nk + ij] + p[(b * H + 1) * Nq * Nk + ij]) / 2.0);
    assert_close(got, want, B * Nq * Nk, TOL);
    free(got), free(p);
    clattn_tensor_destroy(&tp), clattn_tensor_destroy(&tavg);
}

static void check_bias_act(test_fixture *f, int act, bool with_bias)
{
    size_t rows = 5, cols = 7, ld = 9, bias_offset = 3;
    float *y = random_array(rows * ld, 50 + act, -3, 3);
    float *bias = random_array(bias_offset + cols, 60 + act, -1, 1);
    clattn_tensor *ty = test_tensor_from(f->ctx, 2, (size_t[]){rows, ld}, y);
    clattn_tensor *tb = test_tensor_from(f->ctx, 1, (size_t[]){bias_offset + cols}, bias);
    assert_int_equal(clattn__bias_act(f->ctx, clattn_tensor_buffer(ty), ld + 1, ld, rows - 1, cols,
                                      with_bias ? clattn_tensor_buffer(tb) : NULL, bias_offset,
                                      act),
                     CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    /* Rows 1..4, columns 1..7 of the [5, 9] block changed; everything else kept. */
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < ld; c++) {
            size_t at = r * ld + c;
            bool inside = r >= 1 && c >= 1 && c <= cols;
            double x = y[at];
            if (inside) {
                if (with_bias)
                    x += bias[bias_offset + c - 1];
                if (act == CLATTN_ACT_RELU)
                    x = x > 0 ? x : 0;
                else if (act == CLATTN_ACT_GELU)
                    x = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
                else if (act == CLATTN_ACT_GELU_TANH) /* Hugging Face's gelu_new */
                    x = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
            }
            float want = (float)x;
            assert_close(&got[at], &want, 1, inside ? 4e-6 : 0.0);
        }
    free(got), free(y), free(bias);
    clattn_tensor_destroy(&ty), clattn_tensor_destroy(&tb);
}

static void bias_and_activations(void **state)
{
    check_bias_act(*state, CLATTN_ACT_NONE, true);
    check_bias_act(*state, CLATTN_ACT_RELU, true);
    check_bias_act(*state, CLATTN_ACT_GELU, true);
    check_bias_act(*state, CLATTN_ACT_RELU, false);
    check_bias_act(*state, CLATTN_ACT_GELU, false);
    check_bias_act(*state, CLATTN_ACT_GELU_TANH, true);
}

/* LayerNorm of x (+ r (+ rb)) into y (or x in place), or with `store` the fused residual add of
 * pre-LN layers: x = x + (r (+ rb)) kept, y = LayerNorm(x) (clattn__add_layernorm). */
static void check_layernorm_variant(test_fixture *f, size_t rows, size_t width, bool residual,
                                    bool res_bias, bool in_place, bool store, uint64_t seed)
{
    float *x = random_array(rows * width, seed, -3, 3);
    float *r = random_array(rows * width, seed + 1, -1, 1);
    float *rb = random_array(width, seed + 2, -1, 1);
    float *w = random_array(width, seed + 3, 0.5f, 1.5f);
    float *b = random_array(width, seed + 4, -0.5f, 0.5f);
    clattn_tensor *tx = test_tensor_from(f->ctx, 2, (size_t[]){rows, width}, x);
    clattn_tensor *tr = test_tensor_from(f->ctx, 2, (size_t[]){rows, width}, r);
    clattn_tensor *trb = test_tensor_from(f->ctx, 1, &width, rb);
    clattn_tensor *tw = test_tensor_from(f->ctx, 1, &width, w);
    clattn_tensor *tb = test_tensor_from(f->ctx, 1, &width, b);
    clattn_tensor *ty = in_place ? tx : test_tensor_from(f->ctx, 2, (size_t[]){rows, width}, NULL);
    float eps = 1e-5f;
    cl_mem mx = clattn_tensor_buffer(tx), my = clattn_tensor_buffer(ty);
    cl_mem mr = residual ? clattn_tensor_buffer(tr) : NULL;
    cl_mem mrb = res_bias ? clattn_tensor_buffer(trb) : NULL;
    cl_mem mw = clattn_tensor_buffer(tw), mb = clattn_tensor_buffer(tb);
    if (store)
        assert_int_equal(clattn__add_layernorm(f->ctx, mx, 0, mr, 0, mrb, my, 0, rows, width, mw,
                                               mb, eps),
                         CLATTN_OK);
    else
        assert_int_equal(clattn__layernorm(f->ctx, mx, 0, mr, 0, mrb, my, 0, rows, width, mw, mb,
                                           eps),
                         CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    float *z = malloc(rows * width * sizeof(float)), *want = malloc(rows * width * sizeof(float));
    for (size_t i = 0; i < rows * width; i++)
        z[i] = residual ? (float)((double)x[i] + ((double)r[i] + (res_bias ? rb[i % width] : 0)))
                        : x[i];
    ref_layernorm(z, w, b, rows, width, eps, want);
    assert_close(got, want, rows * width, 4e-6);
    if (store) { /* the residual stream keeps the sum */
        float *sum = test_tensor_to_host(tx);
        assert_close(sum, z, rows * width, 1e-6);
        free(sum);
    }
    free(got), free(z), free(want), free(x), free(r), free(rb), free(w), free(b);
    if (!in_place)
        clattn_tensor_destroy(&ty);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tr), clattn_tensor_destroy(&trb);
    clattn_tensor_destroy(&tw), clattn_tensor_destroy(&tb);
}

static void check_layernorm(test_fixture *f, size_t rows, size_t width, bool residual,
                            bool res_bias, bool in_place, uint64_t seed)
{
    check_layernorm_variant(f, rows, width, residual, res_bias, in_place, false, seed);
}

static void layernorm_with_fused_residual(void **state)
{
    check_layernorm(*state, 1, 1, false, false, false, 70);
    check_layernorm(*state, 3, 7, false, false, false, 71);
    check_layernorm(*state, 5, 16, true, false, true, 72);
    check_layernorm(*state, 4, 129, true, true, true, 73);
    check_layernorm(*state, 2, 512, true, true, false, 74);
    /* widths of 16s: CPUs' one-row-per-work-item kernels, each variant */
    check_layernorm(*state, 3, 32, false, false, false, 75);
    check_layernorm(*state, 7, 48, true, false, false, 76);
    check_layernorm(*state, 2, 64, true, true, true, 77);
}

/* clattn__add_layernorm: the sum stored back into x, its LayerNorm into y; widths that take the
 * work-group kernels (not multiples of 16) and, on CPUs, the one-row-per-work-item ones. */
static void layernorm_storing_the_residual_sum(void **state)
{
    check_layernorm_variant(*state, 1, 1, true, false, false, true, 78);
    check_layernorm_variant(*state, 4, 129, true, false, false, true, 79);
    check_layernorm_variant(*state, 3, 300, true, true, false, true, 80);
    check_layernorm_variant(*state, 5, 48, true, false, false, true, 81);
    check_layernorm_variant(*state, 6, 384, true, true, false, true, 82);
}

static void residual_add_with_bias(void **state)
{
    test_fixture *f = *state;
    size_t rows = 5, width = 7, n = rows * width;
    float *y = random_array(n, 80, -1, 1), *x = random_array(n, 81, -1, 1);
    float *bias = random_array(width, 82, -1, 1);
    clattn_tensor *ty = test_tensor_from(f->ctx, 1, &n, y);
    clattn_tensor *tx = test_tensor_from(f->ctx, 1, &n, x);
    clattn_tensor *tb = test_tensor_from(f->ctx, 1, &width, bias);
    assert_int_equal(clattn__add(f->ctx, clattn_tensor_buffer(ty), 0, clattn_tensor_buffer(tx), 0,
                                 clattn_tensor_buffer(tb), rows, width),
                     CLATTN_OK);
    assert_int_equal(clattn__add(f->ctx, clattn_tensor_buffer(ty), 0, clattn_tensor_buffer(tx), 0,
                                 NULL, rows, width),
                     CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    for (size_t i = 0; i < n; i++)
        y[i] = (y[i] + (x[i] + bias[i % width])) + x[i];
    assert_close(got, y, n, 1e-6);
    free(got), free(y), free(x), free(bias);
    clattn_tensor_destroy(&ty), clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tb);
}

/* clattn__rmsnorm (cl/rmsnorm.cl) against ref_rmsnorm: widths below, at and past the
 * work-group's, in place and into another buffer at an offset. */
static void rmsnorm_rows(void **state)
{
    test_fixture *f = *state;
    const size_t widths[] = {1, 7, 64, 129, 300};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
        size_t rows = 3, width = widths[i], n = rows * width, offset = 5;
        float *x = random_array(n, 400 + i, -2, 2), *w = random_array(width, 410 + i, -1, 1);
        float *want = malloc(n * sizeof(float));
        assert_non_null(want);
        ref_rmsnorm(x, w, rows, width, 1e-6f, want);
        size_t out_n = offset + n;
        clattn_tensor *tx = test_tensor_from(f->ctx, 1, &n, x);
        clattn_tensor *tw = test_tensor_from(f->ctx, 1, &width, w);
        clattn_tensor *ty = test_tensor_from(f->ctx, 1, &out_n, NULL);
        assert_int_equal(clattn__rmsnorm(f->ctx, clattn_tensor_buffer(tx), 0,
                                         clattn_tensor_buffer(ty), offset, rows, width,
                                         clattn_tensor_buffer(tw), 1e-6f),
                         CLATTN_OK);
        float *got = test_tensor_to_host(ty);
        assert_close(got + offset, want, n, 1e-6);
        free(got);
        assert_int_equal(clattn__rmsnorm(f->ctx, clattn_tensor_buffer(tx), 0,
                                         clattn_tensor_buffer(tx), 0, rows, width,
                                         clattn_tensor_buffer(tw), 1e-6f),
                         CLATTN_OK);
        got = test_tensor_to_host(tx);
        assert_close(got, want, n, 1e-6);
        free(got), free(x), free(w), free(want);
        clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tw), clattn_tensor_destroy(&ty);
    }
}

static void embedding_and_positions(void **state)
{
    test_fixture *f = *state;
    size_t vocab = 7, d = 6, B = 2, N = 5, T = B * N, offset = 4;
    float *emb = random_array(vocab * d, 90, -1, 1);
    cl_int ids[10] = {0, 6, 3, 3, 1, 2, 5, 4, 0, 6};
    clattn_tensor *temb = test_tensor_from(f->ctx, 2, (size_t[]){vocab, d}, emb);
    clattn_tensor *tx = test_tensor_from(f->ctx, 2, (size_t[]){T, d}, NULL);
    float *in_host = random_array(T * d, 91, -1, 1);
    clattn_tensor *tin = test_tensor_from(f->ctx, 2, (size_t[]){T, d}, in_host);
    cl_int err;
    cl_mem tids = clCreateBuffer(clattn_context_cl_context(f->ctx), CL_MEM_READ_WRITE |
                                 CL_MEM_COPY_HOST_PTR, sizeof(ids), ids, &err);
    assert_int_equal(err, CL_SUCCESS);
    float pe[9 * 6], want[60];
    ref_sinusoidal(offset + N, d, pe);
    cl_mem table;
    assert_int_equal(clattn__positional_table(f->ctx, offset + N, d, &table), CLATTN_OK);
    /* Token types: a [3, d] table and ids per token (BERT's segment embedding). */
    float *type_emb = random_array(3 * d, 92, -1, 1);
    clattn_tensor *ttype = test_tensor_from(f->ctx, 2, (size_t[]){3, d}, type_emb);
    cl_int types[10] = {0, 1, 2, 0, 0, 1, 1, 2, 2, 0};
    cl_mem ttypes = clCreateBuffer(clattn_context_cl_context(f->ctx), CL_MEM_READ_WRITE |
                                   CL_MEM_COPY_HOST_PTR, sizeof(types), types, &err);
    assert_int_equal(err, CL_SUCCESS);
    for (int with_pe = 0; with_pe <= 1; with_pe++)
        for (int with_types = 0; with_types <= 1; with_types++) {
            clattn_embed_args e = {tids, clattn_tensor_buffer(temb), 2.5f,
                                   with_pe ? table : NULL, offset, with_types ? ttypes : NULL,
                                   with_types ? clattn_tensor_buffer(ttype) : NULL, NULL};
            assert_int_equal(clattn__embed(f->ctx, &e, T, N, d, clattn_tensor_buffer(tx)),
                             CLATTN_OK);
            float *got = test_tensor_to_host(tx);
            for (size_t t = 0; t < T; t++)
                for (size_t c = 0; c < d; c++)
                    want[t * d + c] = (emb[ids[t] * d + c] * 2.5f +
                                       (with_types ? type_emb[types[t] * d + c] : 0.0f)) +
                                      (with_pe ? pe[(offset + t % N) * d + c] : 0.0f);
            assert_close(got, want, T * d, 1e-6);
            free(got);
        }
    free(type_emb);
    clReleaseMemObject(ttypes);
    clattn_tensor_destroy(&ttype);
    /* The positional add alone: out = in + PE. */
    assert_int_equal(clattn__add_positional(f->ctx, table, clattn_tensor_buffer(tin), 0,
                                            clattn_tensor_buffer(tx), 0, T, N, d, offset),
                     CLATTN_OK);
    float *got = test_tensor_to_host(tx);
    float *in = test_tensor_to_host(tin);
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < d; c++)
            want[t * d + c] = in[t * d + c] + pe[(offset + t % N) * d + c];
    assert_close(got, want, T * d, 1e-6);
    free(got), free(in), free(emb), free(in_host);
    clReleaseMemObject(tids);
    clattn_tensor_destroy(&temb), clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tin);
}

/* clattn__embed_layernorm (BERT's embeddings with their LayerNorm) against the embedding and
 * LayerNorm in plain C: d = 48 takes CPUs' one-launch kernel, d = 6 the embedding and LayerNorm
 * launches; with and without positions (from the sinusoidal table, or per-token rows) and token
 * types. */
static void check_embedding_layernorm(test_fixture *f, size_t d, uint64_t seed)
{
    size_t vocab = 7, B = 2, N = 5, T = B * N, offset = 3, positions = offset + N + 2;
    float *emb = random_array(vocab * d, seed, -1, 1);
    float *type_emb = random_array(3 * d, seed + 1, -1, 1);
    float *w = random_array(d, seed + 2, 0.5f, 1.5f);
    float *b = random_array(d, seed + 3, -0.5f, 0.5f);
    cl_int ids[10] = {0, 6, 3, 3, 1, 2, 5, 4, 0, 6};
    cl_int types[10] = {0, 1, 2, 0, 0, 1, 1, 2, 2, 0};
    cl_int rows[10] = {9, 4, 5, 6, 7, 3, 8, 0, 1, 2};
    float *pe = malloc(positions * d * sizeof(float));
    ref_sinusoidal(positions, d, pe);
    cl_mem table;
    assert_int_equal(clattn__positional_table(f->ctx, positions, d, &table), CLATTN_OK);
    clattn_tensor *temb = test_tensor_from(f->ctx, 2, (size_t[]){vocab, d}, emb);
    clattn_tensor *ttype = test_tensor_from(f->ctx, 2, (size_t[]){3, d}, type_emb);
    clattn_tensor *tw = test_tensor_from(f->ctx, 1, &d, w);
    clattn_tensor *tb = test_tensor_from(f->ctx, 1, &d, b);
    clattn_tensor *tx = test_tensor_from(f->ctx, 2, (size_t[]){T, d}, NULL);
    cl_int err;
    cl_context cl = clattn_context_cl_context(f->ctx);
    cl_mem tids = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(ids), ids,
                                 &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem ttypes = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(types),
                                   types, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem trows = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(rows), rows,
                                  &err);
    assert_int_equal(err, CL_SUCCESS);
    float *z = malloc(T * d * sizeof(float)), *want = malloc(T * d * sizeof(float));
    /* positions: none, table rows from the offset, per-token rows */
    for (int with_pe = 0; with_pe <= 2; with_pe++)
        for (int with_types = 0; with_types <= 1; with_types++) {
            clattn_embed_args e = {tids, clattn_tensor_buffer(temb), 1.5f,
                                   with_pe ? table : NULL, offset, with_types ? ttypes : NULL,
                                   with_types ? clattn_tensor_buffer(ttype) : NULL,
                                   with_pe == 2 ? trows : NULL};
            assert_int_equal(clattn__embed_layernorm(f->ctx, &e, T, N, d,
                                                     clattn_tensor_buffer(tx),
                                                     clattn_tensor_buffer(tw),
                                                     clattn_tensor_buffer(tb), 1e-12f),
                             CLATTN_OK);
            float *got = test_tensor_to_host(tx);
            for (size_t t = 0; t < T; t++) {
                size_t row = with_pe == 2 ? (size_t)rows[t] : offset + t % N;
                for (size_t c = 0; c < d; c++)
                    z[t * d + c] = (emb[ids[t] * d + c] * 1.5f +
                                    (with_types ? type_emb[types[t] * d + c] : 0.0f)) +
                                   (with_pe ? pe[row * d + c] : 0.0f);
            }
            ref_layernorm(z, w, b, T, d, 1e-12f, want);
            assert_close(got, want, T * d, 4e-6);
            free(got);
        }
    free(z), free(want), free(emb), free(type_emb), free(w), free(b), free(pe);
    clReleaseMemObject(tids), clReleaseMemObject(ttypes), clReleaseMemObject(trows);
    clattn_tensor_destroy(&temb), clattn_tensor_destroy(&ttype), clattn_tensor_destroy(&tw);
    clattn_tensor_destroy(&tb), clattn_tensor_destroy(&tx);
}

static void embedding_with_layernorm(void **state)
{
    check_embedding_layernorm(*state, 48, 95);
    check_embedding_layernorm(*state, 6, 96);
}

/* IEEE half bits of x, rounded to nearest even (finite, normal-range inputs: |x| in [2^-14,
 * 65504] or 0, as the tests use). */
static uint16_t half_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    uint32_t sign = (u >> 16) & 0x8000u, exponent = (u >> 23) & 0xffu, mantissa = u & 0x7fffffu;
    if (exponent == 0)
        return (uint16_t)sign;
    uint32_t h = ((exponent - 112u) << 10) | (mantissa >> 13), rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the right result too */
    return (uint16_t)(sign | h);
}

static float half_value(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu;
    uint32_t u = exponent ? sign | ((exponent + 112u) << 23) | ((uint32_t)(h & 0x3ffu) << 13)
                          : sign;
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

/* Rounds x (values with |x| >= 2^-14, or 0) to half precision in place; fills bits. */
static void to_half(float *x, uint16_t *bits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (fabsf(x[i]) < 1.0f / 16384)
            x[i] = 0.0f;
        bits[i] = half_bits(x[i]);
        x[i] = half_value(bits[i]);
    }
}

/* clattn_rows_to_half writes the host's round-to-nearest-even halves, bit for bit, at its rows:
 * [2 sequences, 3 rows, 5 columns] from columns 2.. of rows 9 floats apart into rows 4.. of a
 * [2, 8, 5] cache. */
static void rows_to_half_rounds_to_nearest_even(void **state)
{
    test_fixture *f = *state;
    enum { B = 2, N = 3, W = 5, PITCH = 9, CAP = 8, PAST = 4 };
    float *src = random_array(B * N * PITCH, 600, -3, 3);
    src[2] = 1.0f + 1.0f / 2048;       /* a tie: rounds to even (1.0) */
    src[3] = 1.0f + 3.0f / 2048;       /* a tie: rounds to even (1 + 2/1024) */
    src[4] = -(1.0f + 1.0f / 4096);    /* below half an ulp: rounds down */
    clattn_tensor *tsrc = test_tensor_from(f->ctx, 1, (size_t[]){B * N * PITCH}, src);
    cl_int err;
    uint16_t init[B * CAP * W];
    memset(init, 0xff, sizeof(init));
    cl_mem dst = clCreateBuffer(clattn_context_cl_context(f->ctx),
                                CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(init), init,
                                &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clattn__rows_to_half(f->ctx, clattn_tensor_buffer(tsrc), 2, PITCH, dst,
                                          PAST * W, CAP * W, W, W, N, B),
                     CLATTN_OK);
    uint16_t got[B * CAP * W];
    assert_int_equal(clEnqueueReadBuffer(clattn_context_queue(f->ctx), dst, CL_TRUE, 0,
                                         sizeof(got), got, 0, NULL, NULL),
                     CL_SUCCESS);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < CAP; t++)
            for (size_t c = 0; c < W; c++) {
                uint16_t want = t >= PAST && t < PAST + N
                                    ? half_bits(src[(b * N + t - PAST) * PITCH + 2 + c])
                                    : 0xffff; /* untouched */
                assert_int_equal(got[(b * CAP + t) * W + c], want);
            }
    assert_int_equal(half_bits(src[2]), 0x3c00);
    assert_int_equal(half_bits(src[3]), 0x3c02);
    clReleaseMemObject(dst);
    clattn_tensor_destroy(&tsrc);
    free(src);
}

/* The padding mask of right-padded rows made on the device from their lengths (the sentence
 * embeddings' batches): 1 from each row's length on, 0 before it, written at an offset and
 * nothing around it touched; lengths 0 and N included. */
static void padding_from_lengths_marks_each_tail(void **state)
{
    test_fixture *f = *state;
    enum { B = 4, N = 7, OFFSET = 3 };
    const uint32_t lengths[B] = {7, 0, 3, 1};
    cl_int err;
    cl_mem lens = clCreateBuffer(clattn_context_cl_context(f->ctx),
                                 CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(lengths),
                                 (void *)lengths, &err);
    assert_int_equal(err, CL_SUCCESS);
    float init[OFFSET + B * N + 2];
    for (size_t i = 0; i < OFFSET + B * N + 2; i++)
        init[i] = -5.0f;
    cl_mem pad = clCreateBuffer(clattn_context_cl_context(f->ctx),
                                CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(init), init,
                                &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clattn__padding_from_lengths(f->ctx, lens, B, N, pad, OFFSET), CLATTN_OK);
    float got[OFFSET + B * N + 2];
    assert_int_equal(clEnqueueReadBuffer(clattn_context_queue(f->ctx), pad, CL_TRUE, 0,
                                         sizeof(got), got, 0, NULL, NULL),
                     CL_SUCCESS);
    for (size_t i = 0; i < OFFSET + B * N + 2; i++) {
        float want = -5.0f; /* untouched */
        if (i >= OFFSET && i < OFFSET + B * N) {
            size_t b = (i - OFFSET) / N, j = (i - OFFSET) % N;
            want = j < lengths[b] ? 0.0f : 1.0f;
        }
        assert_float_equal(got[i], want, 0.0f);
    }
    clReleaseMemObject(pad);
    clReleaseMemObject(lens);
}

/* Split-key attention (flash-decoding) through the fused path, forced by the tuning, against
 * ref_sdpa: every mask kind, a split whose keys are all masked, a query with no key left; with
 * half-float keys and values (kv_half: the reference then reads the same rounded values), split
 * and whole. */
static void check_split_keys(test_fixture *f, size_t B, size_t H, size_t Nq, size_t Nk,
                             size_t dk, size_t dv, mask_setup ms, uint64_t seed, bool kv_half,
                             int split_mode)
{
    float *q = random_array(B * H * Nq * dk, seed, -1, 1);
    float *k = random_array(B * H * Nk * dk, seed + 1, -1, 1);
    float *v = random_array(B * H * Nk * dv, seed + 2, -1, 1);
    uint16_t *k_half = malloc(B * H * Nk * dk * sizeof(uint16_t) + 1);
    uint16_t *v_half = malloc(B * H * Nk * dv * sizeof(uint16_t) + 1);
    to_half(k, k_half, kv_half ? B * H * Nk * dk : 0);
    to_half(v, v_half, kv_half ? B * H * Nk * dv : 0);
    float *am = random_array(Nq * Nk, seed + 3, -2, 1);
    float *kp = calloc(B * Nk, sizeof(float));
    if (ms.attn == 1)
        for (size_t i = 0; i < Nq * Nk; i++)
            am[i] = am[i] > 0.3f ? 1.0f : 0.0f;
    /* Batch 0: its first keys (a whole split) are padding; batch 1: every key is. */
    for (size_t j = 0; j < Nk; j++) {
        kp[j] = j < Nk / 2 ? 1.0f : 0.0f;
        if (B > 1)
            kp[Nk + j] = 1.0f;
    }
    clattn_tensor *tq = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nq, dk}, q);
    clattn_tensor *tk = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nk, dk}, k);
    clattn_tensor *tv = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nk, dv}, v);
    if (kv_half) { /* the halves over the tensors' first bytes (views count elements) */
        cl_command_queue queue = clattn_context_queue(f->ctx);
        assert_int_equal(clEnqueueWriteBuffer(queue, clattn_tensor_buffer(tk), CL_TRUE, 0,
                                              B * H * Nk * dk * 2, k_half, 0, NULL, NULL),
                         CL_SUCCESS);
        assert_int_equal(clEnqueueWriteBuffer(queue, clattn_tensor_buffer(tv), CL_TRUE, 0,
                                              B * H * Nk * dv * 2, v_half, 0, NULL, NULL),
                         CL_SUCCESS);
    }
    clattn_tensor *tam = test_tensor_from(f->ctx, 2, (size_t[]){Nq, Nk}, am);
    clattn_tensor *tkp = test_tensor_from(f->ctx, 2, (size_t[]){B, Nk}, kp);
    clattn_tensor *to = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nq, dv}, NULL);
    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    p.batch = B, p.heads = H, p.seq_q = Nq, p.seq_k = Nk, p.dk = dk, p.dv = dv;
    p.scale = 1.0f / sqrtf((float)dk);
    p.causal = ms.causal;
    p.q = contiguous_view(tq), p.k = contiguous_view(tk), p.v = contiguous_view(tv);
    p.out = contiguous_view(to);
    p.path = CLATTN_PATH_FUSED;
    p.kv_half = kv_half;
    ref_masks rm = {0};
    rm.causal = ms.causal;
    if (ms.attn) {
        int kind = ms.attn == 1 ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE;
        p.attn_mask = (clattn_mask_view){clattn_tensor_buffer(tam), 0, 0, 0, Nk, 1, kind};
        rm.attn_mask = am, rm.attn_mask_bool = ms.attn == 1, rm.am_si = Nk, rm.am_sj = 1;
    }
    if (ms.key_padding) {
        p.key_padding_mask = (clattn_mask_view){clattn_tensor_buffer(tkp), 0, Nk, 0, 0, 1,
                                                CLATTN_KMASK_BOOL};
        rm.key_padding_mask = kp, rm.key_padding_bool = true;
    }
    clattn_tuning saved, tuning;
    assert_int_equal(clattn_context_get_tuning(f->ctx, &saved), CLATTN_OK);
    tuning = saved;
    tuning.split_keys = split_mode;
    assert_int_equal(clattn_context_set_tuning(f->ctx, &tuning), CLATTN_OK);
    if (split_mode == CLATTN_SPLIT_KEYS_ALWAYS)
        assert_true(clattn__attention_key_splits(f->ctx, &p, 1) >= 2);
    assert_int_equal(clattn__attention(f->ctx, &p), CLATTN_OK);
    assert_int_equal(clattn_context_set_tuning(f->ctx, &saved), CLATTN_OK);
    float *got = test_tensor_to_host(to);
    float *want = malloc(B * H * Nq * dv * sizeof(float));
    ref_sdpa(q, k, v, B, H, Nq, Nk, dk, dv, p.scale, &rm, want, NULL);
    assert_close(got, want, B * H * Nq * dv, TOL);
    free(got), free(want), free(q), free(k), free(v), free(am), free(kp);
    free(k_half), free(v_half);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
    clattn_tensor_destroy(&tam), clattn_tensor_destroy(&tkp), clattn_tensor_destroy(&to);
}

static void split_key_attention(void **state)
{
    test_fixture *f = *state;
    const int always = CLATTN_SPLIT_KEYS_ALWAYS;
    check_split_keys(f, 1, 3, 1, 37, 8, 5, (mask_setup){0, 0, false}, 500, false, always);
    check_split_keys(f, 2, 2, 1, 41, 16, 8, (mask_setup){0, 1, false}, 510, false, always);
    check_split_keys(f, 1, 2, 3, 29, 4, 4, (mask_setup){1, 0, false}, 520, false, always);
    check_split_keys(f, 2, 1, 2, 23, 8, 3, (mask_setup){2, 1, false}, 530, false, always);
    check_split_keys(f, 1, 2, 9, 9, 8, 8, (mask_setup){0, 0, true}, 540, false, always);
}

/* The same with half-float keys and values, split and whole. */
static void half_key_value_attention(void **state)
{
    test_fixture *f = *state;
    const int always = CLATTN_SPLIT_KEYS_ALWAYS, never = CLATTN_SPLIT_KEYS_NEVER;
    check_split_keys(f, 2, 2, 1, 41, 16, 8, (mask_setup){0, 1, false}, 550, true, always);
    check_split_keys(f, 1, 2, 9, 9, 8, 8, (mask_setup){0, 0, true}, 560, true, always);
    check_split_keys(f, 2, 3, 3, 19, 8, 5, (mask_setup){2, 1, false}, 570, true, never);
    check_split_keys(f, 1, 2, 11, 11, 4, 4, (mask_setup){0, 0, true}, 580, true, never);
}

/* When the keys are split: never under NEVER, only for many keys and few work-items under AUTO,
 * with two keys or more under ALWAYS; never an empty split at the end. */
static void split_key_choice(void **state)
{
    test_fixture *f = *state;
    clattn_tuning saved, tuning;
    assert_int_equal(clattn_context_get_tuning(f->ctx, &saved), CLATTN_OK);
    clattn_attention_problem p;
    memset(&p, 0, sizeof(p));
    p.batch = 1, p.heads = 1, p.seq_q = 1, p.seq_k = 64 * 1000, p.dk = p.dv = 64;
    const int modes[3] = {CLATTN_SPLIT_KEYS_AUTO, CLATTN_SPLIT_KEYS_ALWAYS,
                          CLATTN_SPLIT_KEYS_NEVER};
    for (int m = 0; m < 3; m++) {
        tuning = saved;
        tuning.split_keys = modes[m];
        assert_int_equal(clattn_context_set_tuning(f->ctx, &tuning), CLATTN_OK);
        size_t splits = clattn__attention_key_splits(f->ctx, &p, 1);
        if (modes[m] == CLATTN_SPLIT_KEYS_NEVER) {
            assert_int_equal(splits, 1);
            continue;
        }
        /* One query of one head against 64000 keys under-fills any device. */
        assert_true(splits >= 2 && splits <= 1000);
        size_t chunk = (p.seq_k + splits - 1) / splits;
        assert_true((splits - 1) * chunk < p.seq_k);
        clattn_attention_problem few_keys = p;
        few_keys.seq_k = 100; /* under two splits of 64 keys */
        assert_int_equal(clattn__attention_key_splits(f->ctx, &few_keys, 1),
                         modes[m] == CLATTN_SPLIT_KEYS_AUTO ? 1 : 4);
        clattn_attention_problem busy = p; /* far more work-items than the device runs */
        busy.batch = 1 << 20;
        /* Batch invariance: the automatic choice depends on the key count and the device only,
         * so a huge batch splits as one sequence does; forced splits still follow the batch. */
        assert_int_equal(clattn__attention_key_splits(f->ctx, &busy, 1),
                         modes[m] == CLATTN_SPLIT_KEYS_AUTO ? splits : 4);
        clattn_attention_problem two_queries = p; /* automatic splits serve single queries */
        two_queries.seq_q = 2;
        if (modes[m] == CLATTN_SPLIT_KEYS_AUTO)
            assert_int_equal(clattn__attention_key_splits(f->ctx, &two_queries, 1), 1);
        clattn_attention_problem one_key = p;
        one_key.seq_k = 1;
        assert_int_equal(clattn__attention_key_splits(f->ctx, &one_key, 1), 1);
    }
    tuning = saved;
    tuning.split_keys = 3;
    assert_status_msg(f->ctx, clattn_context_set_tuning(f->ctx, &tuning),
                      CLATTN_ERROR_INVALID_ARGUMENT, "split_keys is 3");
    assert_int_equal(clattn_context_set_tuning(f->ctx, &saved), CLATTN_OK);
}

/* The work-group sizes a CPU device gets for kernels that leave theirs open: powers of two that
 * divide the global size, within the cap, and few of them whatever the shapes (PoCL compiles and
 * keeps one object per size). */
static void cpu_work_group_sizes_are_few(void **state)
{
    (void)state;
    const size_t limits[3] = {0, 4096, 64};
    for (int li = 0; li < 3; li++) {
        size_t cap = limits[li] == 0 || limits[li] > 256 ? 256 : limits[li];
        bool seen[257][257] = {{false}};
        size_t distinct = 0;
        for (size_t g0 = 1; g0 <= 300; g0++)
            for (size_t g1 = 1; g1 <= 64; g1++) {
                size_t global[2] = {g0, g1}, local[2] = {0, 0};
                clattn__cpu_local_size(limits[li], 2, global, local);
                for (int d = 0; d < 2; d++) {
                    assert_true(local[d] >= 1 && (local[d] & (local[d] - 1)) == 0);
                    assert_int_equal(global[d] % local[d], 0);
                }
                assert_true(local[0] * local[1] <= cap);
                /* the largest such size: doubling either would break a rule */
                assert_true(global[0] % (2 * local[0]) != 0 || 2 * local[0] * local[1] > cap);
                assert_true(global[1] % (2 * local[1]) != 0 || 2 * local[0] * local[1] > cap);
                if (!seen[local[0]][local[1]]) {
                    seen[local[0]][local[1]] = true;
                    distinct++;
                }
            }
        assert_true(distinct <= 45); /* 19,200 shapes; PoCL's own choice gives hundreds */
    }
    size_t g[3] = {384, 7, 12}, l[3];
    clattn__cpu_local_size(0, 3, g, l);
    assert_true(l[0] == 128 && l[1] == 1 && l[2] == 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_work_group_sizes_are_few),
        cmocka_unit_test(scores_without_masks),
        cmocka_unit_test(scores_of_a_chunk_in_the_middle),
        cmocka_unit_test(scores_with_each_mask),
        cmocka_unit_test(softmax_rows_of_odd_lengths),
        cmocka_unit_test(head_merge_writes_concatenated_heads),
        cmocka_unit_test(average_heads_over_chunks),
        cmocka_unit_test(bias_and_activations),
        cmocka_unit_test(layernorm_with_fused_residual),
        cmocka_unit_test(layernorm_storing_the_residual_sum),
        cmocka_unit_test(residual_add_with_bias),
        cmocka_unit_test(rmsnorm_rows),
        cmocka_unit_test(embedding_and_positions),
        cmocka_unit_test(embedding_with_layernorm),
        cmocka_unit_test(split_key_attention),
        cmocka_unit_test(rows_to_half_rounds_to_nearest_even),
        cmocka_unit_test(padding_from_lengths_marks_each_tail),
        cmocka_unit_test(half_key_value_attention),
        cmocka_unit_test(split_key_choice),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
