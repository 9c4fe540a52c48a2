/*
 * Small multi-head attention and encoder forward passes against the plain-C reference, and a small
 * decoder with RoPE and ALiBi stepping through its cache against its own forward, sized for
 * oclgrind (each pass well under a minute there): test_mha and test_encoder run whole grids and
 * PyTorch golden files, too slow to interpret. Registered as a unit test, under oclgrind with the
 * keep-buffers shim (all tests), and under oclgrind without it (only
 * nothing_released_before_the_end, selected with CLATTN_TEST_FILTER), see tests/meson.build.
 * Tolerance: 1e-5 for attention (as test_mha), 1e-4 for the encoder (as test_encoder).
 */
#include "common/test_util.h"
#include "common/weight_bank.h"
#include "ref/ref_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, N = 5, E = 8, H = 2, FF = 16 };

/* Random MHA weights, PyTorch's layout: packed in-projection [3E, E], bias [3E], out [E, E], [E]. */
typedef struct mha_weights {
    float w_in[3 * E * E], b_in[3 * E], w_out[E * E], b_out[E];
} mha_weights;

static clattn_mha *small_mha(clattn_context *ctx, mha_weights *w, uint64_t seed)
{
    test_fill_uniform(w->w_in, 3 * E * E, seed, -0.35f, 0.35f);
    test_fill_uniform(w->b_in, 3 * E, seed + 1, -0.5f, 0.5f);
    test_fill_uniform(w->w_out, E * E, seed + 2, -0.35f, 0.35f);
    test_fill_uniform(w->b_out, E, seed + 3, -0.5f, 0.5f);
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, E, H);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    clattn_mha_weights mw = {
        .in_proj_weight = {w->w_in, 2, {3 * E, E, 0, 0}},
        .in_proj_bias = {w->b_in, 1, {3 * E, 0, 0, 0}},
        .out_proj_weight = {w->w_out, 2, {E, E, 0, 0}},
        .out_proj_bias = {w->b_out, 1, {E, 0, 0, 0}},
    };
    assert_int_equal(clattn_mha_load_weights(mha, &mw), CLATTN_OK);
    return mha;
}

static void mha_reference(const mha_weights *w, const float *x, const float *kpm, float *out,
                          float *head_weights)
{
    ref_mha m = {E, H, E / H, E / H, E, E, w->w_in, w->w_in + E * E, w->w_in + 2 * E * E,
                 w->b_in, w->w_out, w->b_out};
    ref_masks rm = {0};
    rm.key_padding_mask = kpm;
    rm.key_padding_bool = true;
    ref_mha_forward(&m, x, x, x, B, N, N, &rm, out, head_weights, false);
}

/* Key padding: the last key of batch 0, the last two of batch 1. */
static void padding(float kpm[B * N])
{
    for (int i = 0; i < B * N; i++)
        kpm[i] = i % N >= N - 1 - i / N ? 1.0f : 0.0f;
}

static void mha_forward_both_paths(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    static mha_weights w;
    clattn_mha *mha = small_mha(ctx, &w, 10);
    float x[B * N * E], kpm[B * N], want[B * N * E], want_w[B * H * N * N];
    test_fill_uniform(x, B * N * E, 11, -1, 1);
    padding(kpm);
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, x);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    clattn_tensor *tkpm = test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm);
    /* Per-head weights (the averaged ones are left to test_mha: under oclgrind 21.10 the
     * averaging kernel's += on the buffer the library zeroed with clEnqueueFillBuffer is reported
     * as uninitialised; oclgrind's fill stores without marking the bytes initialised). */
    clattn_tensor *tw = test_tensor_from(ctx, 4, (size_t[]){B, H, N, N}, NULL);
    mha_reference(&w, x, kpm, want, want_w);

    clattn_mha_forward_params p;
    clattn_mha_forward_params_default(&p);
    p.key_padding_mask = tkpm;
    assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &p), CLATTN_OK); /* fused */
    float *got = test_tensor_to_host(ty);
    assert_close(got, want, B * N * E, 1e-5);
    free(got);
    p.attn_weights = tw; /* unfused, with the weights of every head */
    p.average_attn_weights = 0;
    assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &p), CLATTN_OK);
    got = test_tensor_to_host(ty);
    assert_close(got, want, B * N * E, 1e-5);
    free(got);
    got = test_tensor_to_host(tw);
    assert_close(got, want_w, B * H * N * N, 1e-5);
    free(got);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty), clattn_tensor_destroy(&tkpm);
    clattn_tensor_destroy(&tw);
    clattn_mha_destroy(&mha);
}

static void encoder_forward(clattn_context *ctx, clattn_encoder *enc, weight_bank *bank,
                            clattn_tensor *tx, const float *x, const float *kpm,
                            clattn_tensor *tkpm)
{
    float want[B * N * E];
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    ref_encoder_forward(&bank->ref, x, NULL, B, N, kpm, false, 0, want);
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.key_padding_mask = tkpm;
    for (int path = 0; path < 2; path++) {
        p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
        assert_int_equal(clattn_encoder_forward(enc, tx, ty, &p), CLATTN_OK);
        float *got = test_tensor_to_host(ty);
        assert_close(got, want, B * N * E, 1e-4);
        free(got);
    }
    clattn_tensor_destroy(&ty);
}

static void encoder_post_and_pre_ln(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    float x[B * N * E], kpm[B * N];
    test_fill_uniform(x, B * N * E, 20, -1, 1);
    padding(kpm);
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, x);
    clattn_tensor *tkpm = test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm);
    for (int norm_first = 0; norm_first <= 1; norm_first++) {
        clattn_encoder_config cfg;
        clattn_encoder_config_default(&cfg, E, H, 1, FF);
        cfg.norm_first = norm_first;
        cfg.activation = norm_first ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU;
        cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
        weight_bank *bank = malloc(sizeof(*bank));
        bank_init(bank, &cfg, true, 21 + (uint64_t)norm_first);
        clattn_encoder *enc = NULL;
        assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
        assert_int_equal(clattn_encoder_load_weights(enc, bank_lookup, bank), CLATTN_OK);
        encoder_forward(ctx, enc, bank, tx, x, kpm, tkpm);
        clattn_encoder_destroy(&enc);
        bank_free(bank);
        free(bank);
    }
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tkpm);
}

/*
 * The run under oclgrind without the keep-buffers shim (tests/oclgrind_keep_buffers.c), which
 * would hide a buffer used after its last release. It is safe from oclgrind 21.10's stale
 * shadow-state false positive, which needs a buffer *created* after another was freed (the new
 * one may reuse the freed one's id): here every buffer is freed only at the very end. Destroying
 * the view of x merely drops a reference (x still holds one), and everything the forward passes
 * allocate (scratch, weights) comes before any buffer is freed. A library that freed x's buffer
 * with the view (say, a view that forgot to retain it) makes the passes below use a released
 * buffer, which oclgrind reports (the shim would have kept it alive).
 */
static void nothing_released_before_the_end(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    static mha_weights w;
    float x[B * N * E], kpm[B * N], want[B * N * E], want_w[B * H * N * N];
    test_fill_uniform(x, B * N * E, 30, -1, 1);
    padding(kpm);
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, x);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    clattn_tensor *tkpm = test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm);
    clattn_mha *mha = small_mha(ctx, &w, 31);
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, E, H, 1, FF);
    cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &cfg, true, 32);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(enc, bank_lookup, bank), CLATTN_OK);

    clattn_tensor *view = NULL; /* rows 1.. of batch 0, dropped at once */
    assert_int_equal(clattn_tensor_view(&view, tx, E, 2, (size_t[]){N - 1, E}, NULL), CLATTN_OK);
    clattn_tensor_destroy(&view);

    clattn_mha_forward_params p;
    clattn_mha_forward_params_default(&p);
    p.key_padding_mask = tkpm;
    assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &p), CLATTN_OK);
    float got[B * N * E];
    assert_int_equal(clattn_tensor_read(ty, got, B * N * E), CLATTN_OK);
    mha_reference(&w, x, kpm, want, want_w);
    assert_close(got, want, B * N * E, 1e-5);

    clattn_encoder_forward_params ep;
    clattn_encoder_forward_params_default(&ep);
    ep.key_padding_mask = tkpm;
    assert_int_equal(clattn_encoder_forward(enc, tx, ty, &ep), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(ty, got, B * N * E), CLATTN_OK);
    ref_encoder_forward(&bank->ref, x, NULL, B, N, kpm, false, 0, want);
    assert_close(got, want, B * N * E, 1e-4);

    clattn_encoder_destroy(&enc);
    clattn_mha_destroy(&mha);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty), clattn_tensor_destroy(&tkpm);
    bank_free(bank);
    free(bank);
}

/* A one-layer decoder with RoPE (interleaved, 2 of 4 channels) and ALiBi, 2 query heads on 1
 * key/value head: steps of 2, 1, 1, 1 tokens with a float and a half cache equal the causal
 * teacher-forced forward (1e-5; the half cache 2e-3): the in-place rotation of the new queries
 * and keys (cl/rotary.cl clattn_rotary_in_place) and the cache's offset under oclgrind (the
 * half cache there, see below). */
static void decoder_steps_with_rope_and_alibi(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { T = 5, S = 3 };
    static const size_t steps[] = {2, 1, 1, 1};
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, E, H, 1, FF);
    cfg.num_kv_heads = 1;
    cfg.alibi = 1;
    cfg.rope_theta = 100.0f;
    cfg.rotary_dim = 2;
    cfg.rope_interleaved = 1;
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    assert_int_equal(clattn_decoder_init_random(dec, 50), CLATTN_OK);
    float tgt[B * T * E], mem[B * S * E], full[B * T * E];
    test_fill_uniform(tgt, B * T * E, 51, -1, 1);
    test_fill_uniform(mem, B * S * E, 52, -1, 1);
    clattn_tensor *t_tgt = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, tgt);
    clattn_tensor *t_mem = test_tensor_from(ctx, 3, (size_t[]){B, S, E}, mem);
    clattn_tensor *t_out = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, NULL);
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = 1;
    assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_out, &params), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(t_out, full, B * T * E), CLATTN_OK);
    /* Under oclgrind (small mode) the half cache only: oclgrind 21.10 does not mark what
     * clEnqueueCopyBufferRect writes (the float cache's append) as initialised, and reports the
     * attention's reads of it; the half cache is written by a kernel. */
    for (int half = test_small_mode() ? 1 : 0; half < 2; half++) {
        clattn_decoder_state *st = NULL;
        clattn_decoder_state_params sp;
        clattn_decoder_state_params_default(&sp, B, T);
        sp.half_cache = half;
        assert_int_equal(clattn_decoder_state_create_with(dec, &st, &sp), CLATTN_OK);
        assert_int_equal(clattn_decoder_state_set_memory(st, t_mem, NULL), CLATTN_OK);
        size_t t0 = 0;
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            size_t n = steps[i];
            float x[B * T * E], got[B * T * E];
            for (size_t b = 0; b < B; b++)
                memcpy(x + b * n * E, tgt + (b * T + t0) * E, n * E * sizeof(float));
            clattn_tensor *t_x = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, x);
            clattn_tensor *t_y = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, NULL);
            assert_int_equal(clattn_decoder_step(st, t_x, t_y), CLATTN_OK);
            assert_int_equal(clattn_tensor_read(t_y, got, B * n * E), CLATTN_OK);
            for (size_t b = 0; b < B; b++)
                assert_close(got + b * n * E, full + (b * T + t0) * E, n * E,
                             half ? 2e-3 : 1e-5);
            clattn_tensor_destroy(&t_x), clattn_tensor_destroy(&t_y);
            t0 += n;
        }
        clattn_decoder_state_destroy(&st);
    }
    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_out);
    clattn_decoder_destroy(&dec);
}

int main(void)
{
    const char *filter = getenv("CLATTN_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mha_forward_both_paths),
        cmocka_unit_test(encoder_post_and_pre_ln),
        cmocka_unit_test(nothing_released_before_the_end),
        cmocka_unit_test(decoder_steps_with_rope_and_alibi),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
