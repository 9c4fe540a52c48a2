/*
 * The encoder against the plain-C reference (post/pre-LN, relu/gelu, eps, layers, final norm,
 * padding and causal masks, sinusoidal positions with an offset, token input, d_k != d_model/h,
 * a first layer without norm1), local and global layers (ModernBERT's) against one-layer
 * encoders and a band attention mask, positional encoding, presets, operation counts, random
 * initialisation, invalid arguments.
 * Tolerance against the reference: 1e-4 max abs error (unit-scale activations after LayerNorm).
 */
#include "common/test_util.h"
#include "common/weight_bank.h"
#include "nn/encoder_internal.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4

typedef struct enc_case {
    clattn_encoder_config cfg;
    bool packed;
    size_t B, N;
    bool padding, causal, tokens;
    size_t offset;
} enc_case;

static enc_case make_case(size_t d, size_t h, size_t layers, size_t ff, size_t B, size_t N)
{
    enc_case c;
    memset(&c, 0, sizeof(c));
    clattn_encoder_config_default(&c.cfg, d, h, layers, ff);
    c.packed = true;
    c.B = B, c.N = N;
    return c;
}

static void run_case(clattn_context *ctx, const enc_case *c, uint64_t seed)
{
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c->cfg, c->packed, seed);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &c->cfg), CLATTN_OK);
    clattn_status status = clattn_encoder_load_weights(enc, bank_lookup, bank);
    if (status != CLATTN_OK)
        print_error("load: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);

    size_t B = c->B, N = c->N, d = c->cfg.d_model, T = B * N;
    float *input = malloc(T * d * sizeof(float)), *kpm = calloc(T, sizeof(float));
    int64_t *ids = malloc(T * sizeof(int64_t));
    test_fill_uniform(input, T * d, seed + 1, -1, 1);
    test_rng rng = {seed + 2};
    for (size_t i = 0; i < T; i++) {
        ids[i] = c->cfg.vocab_size ? (int64_t)(test_rng_next(&rng) % c->cfg.vocab_size) : 0;
        kpm[i] = c->padding && i % N >= N - 1 - (i / N) % 2 && i % N > 0 ? 1.0f : 0.0f;
    }
    clattn_tensor *tin = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, input);
    clattn_tensor *tout = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_tensor *tkpm = c->padding ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.key_padding_mask = tkpm;
    p.causal = c->causal;
    p.position_offset = c->offset;
    status = c->tokens ? clattn_encoder_forward_tokens(enc, ids, B, N, tout, &p)
                       : clattn_encoder_forward(enc, tin, tout, &p);
    if (status != CLATTN_OK)
        print_error("forward: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *got = test_tensor_to_host(tout);
    float *want = malloc(T * d * sizeof(float));
    ref_encoder_forward(&bank->ref, c->tokens ? NULL : input, c->tokens ? ids : NULL, B, N,
                        c->padding ? kpm : NULL, c->causal, c->offset, want);
    assert_close(got, want, T * d, TOL);
    /* The unfused attention path gives the same (the default above is the fused one). */
    p.path = CLATTN_PATH_UNFUSED;
    assert_int_equal(c->tokens ? clattn_encoder_forward_tokens(enc, ids, B, N, tout, &p)
                               : clattn_encoder_forward(enc, tin, tout, &p),
                     CLATTN_OK);
    free(got);
    got = test_tensor_to_host(tout);
    assert_close(got, want, T * d, TOL);
    /* The input is not modified. */
    float *in_after = test_tensor_to_host(tin);
    assert_memory_equal(in_after, input, T * d * sizeof(float));

    free(in_after), free(got), free(want), free(input), free(kpm), free(ids);
    clattn_tensor_destroy(&tin), clattn_tensor_destroy(&tout), clattn_tensor_destroy(&tkpm);
    clattn_encoder_destroy(&enc);
    assert_null(enc);
    bank_free(bank);
    free(bank);
}

static void post_and_pre_ln_with_relu_and_gelu(void **state)
{
    test_fixture *f = *state;
    for (int norm_first = 0; norm_first <= 1; norm_first++)
        for (int gelu = 0; gelu <= 1; gelu++) {
            enc_case c = make_case(16, 4, 1, 32, 2, 7);
            c.cfg.norm_first = norm_first;
            c.cfg.activation = gelu ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU;
            run_case(f->ctx, &c, 10 + (uint64_t)(2 * norm_first + gelu));
        }
}

static void layer_norm_eps_values(void **state)
{
    test_fixture *f = *state;
    const float eps[] = {1e-6f, 1e-5f, 1e-3f, 0.5f};
    for (int i = 0; i < 4; i++) {
        enc_case c = make_case(8, 2, 1, 16, 2, 5);
        c.cfg.layer_norm_eps = eps[i];
        c.cfg.norm_first = i % 2;
        run_case(f->ctx, &c, 20 + (uint64_t)i);
    }
}

static void stacks_with_and_without_final_norm(void **state)
{
    test_fixture *f = *state;
    enc_case c = make_case(32, 4, 3, 64, 2, 6);
    c.cfg.final_norm = 1;
    run_case(f->ctx, &c, 30);
    c.cfg.final_norm = 0;
    c.cfg.norm_first = 1;
    c.cfg.activation = CLATTN_ACTIVATION_GELU;
    run_case(f->ctx, &c, 31);
}

static void padding_and_causal_masks(void **state)
{
    test_fixture *f = *state;
    for (int mode = 1; mode <= 3; mode++) {
        enc_case c = make_case(16, 2, 2, 32, 3, 7);
        c.padding = mode & 1;
        c.causal = (mode & 2) != 0;
        c.cfg.norm_first = mode == 2;
        run_case(f->ctx, &c, 40 + (uint64_t)mode);
    }
}

static void sinusoidal_positions_with_an_offset(void **state)
{
    test_fixture *f = *state;
    enc_case c = make_case(16, 4, 1, 32, 2, 9);
    c.cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    run_case(f->ctx, &c, 50);
    c.offset = 300; /* beyond the table built so far: it grows */
    run_case(f->ctx, &c, 51);
    enc_case odd = make_case(15, 3, 1, 8, 1, 4); /* odd d_model: the last column is a sine */
    odd.cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    run_case(f->ctx, &odd, 52);
}

static void token_input_with_embedding(void **state)
{
    test_fixture *f = *state;
    enc_case c = make_case(16, 4, 2, 32, 2, 6);
    c.cfg.vocab_size = 11;
    c.cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    c.cfg.final_norm = 1;
    c.tokens = true;
    c.padding = true;
    run_case(f->ctx, &c, 60);
}

static void head_widths_of_table_3_row_b(void **state)
{
    test_fixture *f = *state;
    enc_case c = make_case(32, 8, 1, 64, 2, 5);
    c.cfg.head_dim_qk = 2; /* h·d_k = 16 != d_model (like B-dk16 at 1/16 scale) */
    c.cfg.head_dim_v = 4;
    c.packed = false;
    run_case(f->ctx, &c, 70);
    c.cfg.norm_first = 1;
    c.cfg.head_dim_qk = 5;
    run_case(f->ctx, &c, 71);
}

static void out_may_be_the_input(void **state)
{
    test_fixture *f = *state;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 8, 2, 1, 16);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &cfg, true, 80);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(enc, bank_lookup, bank), CLATTN_OK);
    float x[2 * 3 * 8], want[2 * 3 * 8];
    test_fill_uniform(x, 48, 81, -1, 1);
    clattn_tensor *t = test_tensor_from(f->ctx, 3, (size_t[]){2, 3, 8}, x);
    assert_int_equal(clattn_encoder_forward(enc, t, t, NULL), CLATTN_OK);
    float *got = test_tensor_to_host(t);
    ref_encoder_forward(&bank->ref, x, NULL, 2, 3, NULL, false, 0, want);
    assert_close(got, want, 48, TOL);
    free(got);
    clattn_tensor_destroy(&t);
    clattn_encoder_destroy(&enc);
    bank_free(bank);
    free(bank);
}

/* clattn_encoder_set_positional on an encoder created without a positional encoding (a PyTorch
 * model's case): the output becomes exactly that of the input plus the table, and the
 * reference's; setting it back to none restores the first output. */
static void set_positional_adds_the_table(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    size_t B = 2, N = 9, d = 16, offset = 3, T = B * N;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, d, 4, 2, 32);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &cfg, true, 55);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(enc, bank_lookup, bank), CLATTN_OK);

    float *x = malloc(T * d * sizeof(float)), *x_pe = malloc(T * d * sizeof(float));
    float *pe = malloc((offset + N) * d * sizeof(float)), *want = malloc(T * d * sizeof(float));
    test_fill_uniform(x, T * d, 56, -1, 1);
    ref_sinusoidal(offset + N, d, pe);
    for (size_t i = 0; i < T; i++)
        for (size_t c = 0; c < d; c++)
            x_pe[i * d + c] = x[i * d + c] + pe[(offset + i % N) * d + c];
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, x);
    clattn_tensor *tx_pe = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, x_pe);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.position_offset = offset;

    assert_int_equal(clattn_encoder_forward(enc, tx, ty, &p), CLATTN_OK);
    float *y_none = test_tensor_to_host(ty);
    assert_int_equal(clattn_encoder_forward(enc, tx_pe, ty, &p), CLATTN_OK);
    float *y_shifted = test_tensor_to_host(ty); /* the table added on the host */

    assert_int_equal(clattn_encoder_set_positional(enc, CLATTN_POSITIONAL_SINUSOIDAL), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward(enc, tx, ty, &p), CLATTN_OK);
    float *y_sin = test_tensor_to_host(ty);
    /* Exactly the table's effect: the same as adding it to the input ourselves ... */
    assert_close(y_sin, y_shifted, T * d, 1e-6);
    /* ... which is visible, */
    assert_true(test_max_abs_diff(y_sin, y_none, T * d) > 0.05);
    /* ... and the reference's encoder with the sinusoidal table. */
    bank->ref.sinusoidal = true;
    ref_encoder_forward(&bank->ref, x, NULL, B, N, NULL, false, offset, want);
    assert_close(y_sin, want, T * d, TOL);
    clattn_encoder_config got_cfg;
    assert_int_equal(clattn_encoder_get_config(enc, &got_cfg), CLATTN_OK);
    assert_int_equal(got_cfg.positional, CLATTN_POSITIONAL_SINUSOIDAL);
    /* The unfused path too. */
    p.path = CLATTN_PATH_UNFUSED;
    assert_int_equal(clattn_encoder_forward(enc, tx, ty, &p), CLATTN_OK);
    float *y_sin_unfused = test_tensor_to_host(ty);
    assert_close(y_sin_unfused, want, T * d, TOL);
    p.path = CLATTN_PATH_AUTO;

    /* Back to none: the first output again. */
    assert_int_equal(clattn_encoder_set_positional(enc, CLATTN_POSITIONAL_NONE), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward(enc, tx, ty, &p), CLATTN_OK);
    float *y_again = test_tensor_to_host(ty);
    assert_memory_equal(y_again, y_none, T * d * sizeof(float));
    bank->ref.sinusoidal = false;
    ref_encoder_forward(&bank->ref, x, NULL, B, N, NULL, false, offset, want);
    assert_close(y_again, want, T * d, TOL);

    assert_status_msg(NULL, clattn_encoder_set_positional(NULL, CLATTN_POSITIONAL_NONE),
                      CLATTN_ERROR_INVALID_ARGUMENT, "encoder is NULL");
    assert_status_msg(ctx, clattn_encoder_set_positional(enc, (clattn_positional)7),
                      CLATTN_ERROR_INVALID_ARGUMENT, "positional is 7");
    assert_int_equal(clattn_encoder_get_config(enc, &got_cfg), CLATTN_OK);
    assert_int_equal(got_cfg.positional, CLATTN_POSITIONAL_NONE);

    free(x), free(x_pe), free(pe), free(want), free(y_none), free(y_shifted), free(y_sin);
    free(y_sin_unfused), free(y_again);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tx_pe), clattn_tensor_destroy(&ty);
    clattn_encoder_destroy(&enc);
    bank_free(bank);
    free(bank);
}

/* The same for token input: set_positional on an encoder with an embedding and no table. */
static void set_positional_with_token_input(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    size_t B = 2, N = 6, d = 16, T = B * N;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, d, 4, 1, 32);
    cfg.vocab_size = 11;
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &cfg, true, 57);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(enc, bank_lookup, bank), CLATTN_OK);
    int64_t ids[12] = {0, 3, 10, 2, 2, 7, 1, 9, 4, 4, 5, 8};
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    float *want = malloc(T * d * sizeof(float));
    assert_int_equal(clattn_encoder_set_positional(enc, CLATTN_POSITIONAL_SINUSOIDAL), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids, B, N, ty, NULL), CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    bank->ref.sinusoidal = true;
    ref_encoder_forward(&bank->ref, NULL, ids, B, N, NULL, false, 0, want);
    assert_close(got, want, T * d, TOL);
    free(got), free(want);
    clattn_tensor_destroy(&ty);
    clattn_encoder_destroy(&enc);
    bank_free(bank);
    free(bank);
}

/* ---- positional encoding ---- */

static void sinusoidal_table_matches_the_paper(void **state)
{
    (void)state;
    size_t d = 512;
    float *pe = malloc(50 * d * sizeof(float));
    assert_int_equal(clattn_sinusoidal_table(pe, 50, d), CLATTN_OK);
    for (size_t c = 0; c < d; c++) /* position 0: sin 0 = 0, cos 0 = 1 */
        assert_true(pe[c] == (c % 2 ? 1.0f : 0.0f));
    assert_true(fabsf(pe[1 * d + 0] - 0.84147098f) < 1e-7f); /* sin(1) */
    assert_true(fabsf(pe[1 * d + 1] - 0.54030231f) < 1e-7f); /* cos(1) */
    /* PE(49, 2·10) = sin(49 / 10000^(20/512)), PE(49, 21) = cos(...) */
    double angle = 49.0 / pow(10000.0, 20.0 / 512.0);
    assert_true(fabs(pe[49 * d + 20] - sin(angle)) < 1e-7);
    assert_true(fabs(pe[49 * d + 21] - cos(angle)) < 1e-7);
    float *ref = malloc(50 * d * sizeof(float));
    ref_sinusoidal(50, d, ref);
    assert_memory_equal(pe, ref, 50 * d * sizeof(float));
    free(pe), free(ref);
    assert_status_msg(NULL, clattn_sinusoidal_table(NULL, 1, 1), CLATTN_ERROR_INVALID_ARGUMENT,
                      "table is NULL");
    float one;
    assert_status_msg(NULL, clattn_sinusoidal_table(&one, 0, 1), CLATTN_ERROR_INVALID_ARGUMENT,
                      "must be positive");
}

static void add_sinusoidal_adds_the_table(void **state)
{
    test_fixture *f = *state;
    size_t B = 2, N = 5, d = 6, offset = 3;
    float x[60], pe[8 * 6];
    test_fill_uniform(x, 60, 90, -1, 1);
    clattn_tensor *t = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, x);
    assert_int_equal(clattn_add_sinusoidal(f->ctx, t, offset), CLATTN_OK);
    float *got = test_tensor_to_host(t);
    ref_sinusoidal(offset + N, d, pe);
    for (size_t i = 0; i < B * N; i++)
        for (size_t c = 0; c < d; c++)
            x[i * d + c] += pe[(offset + i % N) * d + c];
    assert_close(got, x, 60, 1e-6);
    free(got);
    assert_status_msg(NULL, clattn_add_sinusoidal(NULL, t, 0), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(f->ctx, clattn_add_sinusoidal(f->ctx, NULL, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "x is NULL");
    clattn_tensor *flat = test_tensor_from(f->ctx, 1, (size_t[]){6}, NULL);
    assert_status_msg(f->ctx, clattn_add_sinusoidal(f->ctx, flat, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "not 1-D");
    clattn_tensor_destroy(&flat);
    clattn_tensor_destroy(&t);
}

/* ---- presets and counts ---- */

static void presets_follow_table_3(void **state)
{
    (void)state;
    /* name, N, d_model, d_ff, h, d_k, d_v — the paper's Table 3, empty cells = base */
    static const struct {
        const char *name;
        size_t N, d, ff, h, dk, dv;
    } table[] = {
        {"base", 6, 512, 2048, 8, 64, 64},      {"big", 6, 1024, 4096, 16, 64, 64},
        {"A-h1", 6, 512, 2048, 1, 512, 512},    {"A-h4", 6, 512, 2048, 4, 128, 128},
        {"A-h16", 6, 512, 2048, 16, 32, 32},    {"A-h32", 6, 512, 2048, 32, 16, 16},
        {"B-dk16", 6, 512, 2048, 8, 16, 64},    {"B-dk32", 6, 512, 2048, 8, 32, 64},
        {"C-N2", 2, 512, 2048, 8, 64, 64},      {"C-N4", 4, 512, 2048, 8, 64, 64},
        {"C-N8", 8, 512, 2048, 8, 64, 64},      {"C-d256", 6, 256, 2048, 8, 32, 32},
        {"C-d1024", 6, 1024, 2048, 8, 128, 128}, {"C-ff1024", 6, 512, 1024, 8, 64, 64},
        {"C-ff4096", 6, 512, 4096, 8, 64, 64},
    };
    const char *const *names = clattn_encoder_preset_names();
    size_t n = 0;
    for (; names[n]; n++)
        assert_string_equal(names[n], table[n].name);
    assert_int_equal(n, sizeof(table) / sizeof(table[0]));
    for (size_t i = 0; i < n; i++) {
        clattn_encoder_config c;
        assert_int_equal(clattn_encoder_preset(table[i].name, &c), CLATTN_OK);
        assert_int_equal(c.num_layers, table[i].N);
        assert_int_equal(c.d_model, table[i].d);
        assert_int_equal(c.dim_feedforward, table[i].ff);
        assert_int_equal(c.nhead, table[i].h);
        assert_int_equal(c.head_dim_qk, table[i].dk);
        assert_int_equal(c.head_dim_v, table[i].dv);
        assert_int_equal(c.positional, CLATTN_POSITIONAL_SINUSOIDAL);
        assert_int_equal(c.norm_first, 0);
    }
    clattn_encoder_config c;
    assert_status_msg(NULL, clattn_encoder_preset("huge", &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "unknown preset 'huge' (presets: base, big, A-h1");
    assert_status_msg(NULL, clattn_encoder_preset(NULL, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "name is NULL");
    assert_status_msg(NULL, clattn_encoder_preset("base", NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "config is NULL");
}

static void analytic_counts(void **state)
{
    (void)state;
    clattn_encoder_config c;
    assert_int_equal(clattn_encoder_preset("base", &c), CLATTN_OK);
    uint64_t macs[CLATTN_OP_COUNT];
    assert_int_equal(clattn_encoder_count_macs(&c, 4, 1024, macs), CLATTN_OK);
    uint64_t T = 4 * 1024;
    assert_true(macs[CLATTN_OP_IN_PROJECTION] == 6 * T * 512 * 1536);
    assert_true(macs[CLATTN_OP_SCORES] == 6ull * 4 * 8 * 1024 * 1024 * 64);
    assert_true(macs[CLATTN_OP_WEIGHTS_V] == 6ull * 4 * 8 * 1024 * 1024 * 64);
    assert_true(macs[CLATTN_OP_OUT_PROJECTION] == 6 * T * 512 * 512);
    assert_true(macs[CLATTN_OP_FEED_FORWARD] == 6 * T * 2 * 512 * 2048);
    uint64_t params;
    assert_int_equal(clattn_encoder_count_params(&c, &params), CLATTN_OK);
    /* per layer: attention 4·512² + 4·512, feed-forward 2·512·2048 + 2048 + 512, norms 4·512 */
    assert_true(params == 6ull * (4 * 512 * 512 + 4 * 512 + 2 * 512 * 2048 + 2048 + 512 + 4 * 512));
    /* flops' experiment (docs/library.md): timm attention dim 512, [32, 1024, 512]. */
    clattn_mha_config m;
    clattn_mha_config_timm(&m, 512, 8, 0);
    assert_int_equal(clattn_mha_count_macs(&m, 32, 1024, 1024, macs), CLATTN_OK);
    uint64_t total = 0;
    for (int op = 0; op < CLATTN_OP_COUNT; op++)
        total += macs[op];
    assert_true(total == 68719476736ull);
    assert_true(total - macs[CLATTN_OP_OUT_PROJECTION] == 60129542144ull);
    clattn_mha_config_timm(&m, 512, 1, 0);
    m.out_proj = 0;
    assert_int_equal(clattn_mha_count_macs(&m, 32, 1024, 1024, macs), CLATTN_OK);
    total = 0;
    for (int op = 0; op < CLATTN_OP_COUNT; op++)
        total += macs[op];
    assert_true(total == 60129542144ull);
    assert_status_msg(NULL, clattn_encoder_count_macs(NULL, 1, 1, macs),
                      CLATTN_ERROR_INVALID_ARGUMENT, "config is NULL");
    assert_status_msg(NULL, clattn_encoder_count_params(&c, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "params is NULL");
    assert_status_msg(NULL, clattn_mha_count_macs(&m, 1, 1, 1, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "macs is NULL");
}

static void counters_agree_with_the_analytic_count(void **state)
{
    test_fixture *f = *state;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 16, 4, 2, 32);
    cfg.head_dim_qk = 3;
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 5), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(f->ctx, 3, (size_t[]){2, 7, 16}, NULL);
    assert_int_equal(clattn_tensor_fill(x, 0.25f), CLATTN_OK);
    assert_int_equal(clattn_stats_reset(f->ctx), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward(enc, x, x, NULL), CLATTN_OK);
    clattn_stats s;
    assert_int_equal(clattn_stats_get(f->ctx, &s), CLATTN_OK);
    uint64_t macs[CLATTN_OP_COUNT], total = 0;
    assert_int_equal(clattn_encoder_count_macs(&cfg, 2, 7, macs), CLATTN_OK);
    for (int op = 0; op < CLATTN_OP_COUNT; op++) {
        assert_true(s.macs[op] == macs[op]);
        total += macs[op];
    }
    assert_true(s.total_macs == total);
    clattn_tensor_destroy(&x);
    clattn_encoder_destroy(&enc);
}

static void random_weights_are_deterministic(void **state)
{
    test_fixture *f = *state;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 16, 2, 2, 32);
    cfg.vocab_size = 9;
    cfg.final_norm = 1;
    float out[3][2 * 4 * 16];
    const uint64_t seeds[3] = {1, 1, 2};
    int64_t ids[8] = {0, 1, 2, 3, 8, 7, 6, 5};
    for (int i = 0; i < 3; i++) {
        clattn_encoder *enc = NULL;
        assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
        assert_int_equal(clattn_encoder_init_random(enc, seeds[i]), CLATTN_OK);
        clattn_tensor *y = test_tensor_from(f->ctx, 3, (size_t[]){2, 4, 16}, NULL);
        assert_int_equal(clattn_encoder_forward_tokens(enc, ids, 2, 4, y, NULL), CLATTN_OK);
        assert_int_equal(clattn_tensor_read(y, out[i], 128), CLATTN_OK);
        clattn_tensor_destroy(&y);
        clattn_encoder_destroy(&enc);
    }
    assert_memory_equal(out[0], out[1], sizeof(out[0]));
    assert_true(test_max_abs_diff(out[0], out[2], 128) > 1e-3);
    for (int i = 0; i < 128; i++)
        assert_true(isfinite(out[0][i]));
}

/* On the library's CPU GEMM and on oneDNN the encoder keeps its linear weights only packed (held
 * once); a later switch to another GEMM (tuning gemm_kernel 0: CLBlast, 1: the CPU GEMM) unpacks
 * them on the fly and gives the same result to rounding, and switching back gives the first bytes
 * again. */
static void weights_kept_packed_run_on_either_gemm(void **state)
{
    test_fixture *f = *state;
    clattn_tuning saved, tuning;
    assert_int_equal(clattn_context_get_tuning(f->ctx, &saved), CLATTN_OK);
    for (int gated = 0; gated < 2; gated++) {
        clattn_encoder_config cfg;
        clattn_encoder_config_default(&cfg, 32, 4, 2, 64);
        cfg.ffn_gated = (uint8_t)gated;
        cfg.activation = gated ? CLATTN_ACTIVATION_SILU : CLATTN_ACTIVATION_GELU;
        clattn_encoder *enc = NULL;
        assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
        assert_int_equal(clattn_encoder_init_random(enc, 5 + (uint64_t)gated), CLATTN_OK);
        const clattn_ffn *ffn = &enc->stack.weights.layers[0].ffn;
        if (saved.gemm_kernel == 1) /* packed, and the unpacked copies released */
            assert_true(ffn->lin1.packed && !ffn->w1 && ffn->lin2.packed && !ffn->w2);
        else if (saved.gemm_kernel == 2) /* in oneDNN's layout, likewise */
            assert_true(ffn->lin1.onednn && !ffn->w1 && ffn->lin2.onednn && !ffn->w2);
        else
            assert_true(ffn->w1 && ffn->w2);
        float x[2 * 7 * 32], out[4][2 * 7 * 32];
        test_fill_uniform(x, 2 * 7 * 32, 40 + (uint64_t)gated, -1, 1);
        clattn_tensor *tx = test_tensor_from(f->ctx, 3, (size_t[]){2, 7, 32}, x);
        clattn_tensor *ty = test_tensor_from(f->ctx, 3, (size_t[]){2, 7, 32}, NULL);
        /* the context's GEMM, the two others (CLBlast first), the context's again */
        int kernels[4] = {saved.gemm_kernel, 0, saved.gemm_kernel == 1 ? 2 : 1,
                          saved.gemm_kernel};
        for (int run = 0; run < 4; run++) {
            tuning = saved;
            tuning.gemm_kernel = kernels[run];
            clattn_status set = clattn_context_set_tuning(f->ctx, &tuning);
            if (set != CLATTN_OK) { /* gemm_kernel 2 without oneDNN: the context's again */
                assert_int_equal(kernels[run], 2);
                tuning.gemm_kernel = saved.gemm_kernel;
                assert_int_equal(clattn_context_set_tuning(f->ctx, &tuning), CLATTN_OK);
            }
            assert_int_equal(clattn_encoder_forward(enc, tx, ty, NULL), CLATTN_OK);
            assert_int_equal(clattn_tensor_read(ty, out[run], 2 * 7 * 32), CLATTN_OK);
        }
        assert_int_equal(clattn_context_set_tuning(f->ctx, &saved), CLATTN_OK);
        assert_close(out[1], out[0], 2 * 7 * 32, 1e-5);
        assert_close(out[2], out[0], 2 * 7 * 32, 1e-5);
        assert_memory_equal(out[3], out[0], sizeof(out[0]));
        clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
        clattn_encoder_destroy(&enc);
    }
}

/* Every workspace slot has a name for its messages (the unpacked-weight slot, added with the
 * weights kept packed, had none: its allocation failures printed a NULL string). */
static void every_workspace_slot_is_named(void **state)
{
    test_fixture *f = *state;
    size_t too_large = (size_t)f->ctx->info.max_alloc_bytes + 1;
    for (int slot = 0; slot < CLATTN_SLOT_COUNT; slot++) {
        cl_mem mem = NULL;
        assert_int_equal(clattn__workspace_slot(f->ctx, (clattn_slot)slot, too_large, &mem),
                         CLATTN_ERROR_TOO_LARGE);
        const char *message = clattn_last_error(f->ctx);
        assert_non_null(strstr(message, "the "));
        assert_null(strstr(message, "(null)"));
    }
}

/* A long input runs the feed-forward block over blocks of rows (clattn__ffn_chunk_rows): each
 * sequence of a batch whose hidden activations exceed one block equals, byte for byte, the
 * sequence run alone in one block. */
static void long_inputs_run_the_feed_forward_in_blocks(void **state)
{
    test_fixture *f = *state;
    const size_t B = 2, N = 2100, d = 16, ff = 4096;
    for (int gated = 0; gated < 2; gated++) {
        assert_true(clattn__ffn_chunk_rows(B * N, ff, gated) < B * N);
        assert_int_equal(clattn__ffn_chunk_rows(N, ff, gated), gated ? 2048 : N);
        clattn_encoder_config cfg;
        clattn_encoder_config_default(&cfg, d, 2, 1, ff);
        cfg.ffn_gated = (uint8_t)gated;
        clattn_encoder *enc = NULL;
        assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
        assert_int_equal(clattn_encoder_init_random(enc, 9), CLATTN_OK);
        float *x = malloc(B * N * d * sizeof(float)), *all = malloc(B * N * d * sizeof(float));
        float *one = malloc(N * d * sizeof(float));
        test_fill_uniform(x, B * N * d, 41, -1, 1);
        clattn_tensor *tx = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, x);
        clattn_tensor *ty = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, NULL);
        assert_int_equal(clattn_encoder_forward(enc, tx, ty, NULL), CLATTN_OK);
        assert_int_equal(clattn_tensor_read(ty, all, B * N * d), CLATTN_OK);
        for (size_t b = 0; b < B; b++) {
            clattn_tensor *sx = test_tensor_from(f->ctx, 3, (size_t[]){1, N, d}, x + b * N * d);
            clattn_tensor *sy = test_tensor_from(f->ctx, 3, (size_t[]){1, N, d}, NULL);
            assert_int_equal(clattn_encoder_forward(enc, sx, sy, NULL), CLATTN_OK);
            assert_int_equal(clattn_tensor_read(sy, one, N * d), CLATTN_OK);
            assert_memory_equal(one, all + b * N * d, N * d * sizeof(float));
            clattn_tensor_destroy(&sx), clattn_tensor_destroy(&sy);
        }
        for (size_t i = 0; i < B * N * d; i++)
            assert_true(isfinite(all[i]));
        clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
        clattn_encoder_destroy(&enc);
        free(x), free(all), free(one);
    }
}

/* ---- local and global layers, a first layer without norm1 (ModernBERT) ---- */

/* The bank's layer `layer` under the names of layer 0: a one-layer encoder made of it. */
typedef struct one_layer_of {
    weight_bank *bank;
    size_t layer;
} one_layer_of;

static const clattn_host_tensor *one_layer_lookup(void *user, const char *name)
{
    one_layer_of *o = user;
    char renamed[128];
    if (strncmp(name, "layers.0.", 9) != 0)
        return bank_lookup(o->bank, name);
    snprintf(renamed, sizeof(renamed), "layers.%zu.%s", o->layer, name + 9);
    return bank_lookup(o->bank, renamed);
}

/* An encoder of config c with the lookup's weights on x [B, N, d]: its output, malloc'd.
 * padding: [B, N] bool or NULL; band: a bool [N, N] attention mask or NULL. */
static float *run_encoder(clattn_context *ctx, const clattn_encoder_config *c,
                          clattn_weight_lookup lookup, void *user, const float *x, size_t B,
                          size_t N, const float *padding, const float *band,
                          clattn_attention_path path)
{
    clattn_encoder *enc = NULL;
    size_t d = c->d_model;
    assert_int_equal(clattn_encoder_create(ctx, &enc, c), CLATTN_OK);
    clattn_status status = clattn_encoder_load_weights(enc, lookup, user);
    if (status != CLATTN_OK)
        print_error("load: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_tensor *tin = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, x);
    clattn_tensor *tout = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_tensor *tpad = padding ? test_tensor_from(ctx, 2, (size_t[]){B, N}, padding) : NULL;
    clattn_tensor *tband = band ? test_tensor_from(ctx, 2, (size_t[]){N, N}, band) : NULL;
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.key_padding_mask = tpad;
    p.attn_mask = tband;
    p.path = path;
    assert_int_equal(clattn_encoder_forward(enc, tin, tout, &p), CLATTN_OK);
    float *out = test_tensor_to_host(tout);
    clattn_tensor_destroy(&tin), clattn_tensor_destroy(&tout);
    clattn_tensor_destroy(&tpad), clattn_tensor_destroy(&tband);
    clattn_encoder_destroy(&enc);
    return out;
}

/* A pre-LN stack with RoPE of bases 1000 (global layers) and 30 (local layers). */
static clattn_encoder_config local_global_config(size_t layers)
{
    clattn_encoder_config c;
    clattn_encoder_config_default(&c, 16, 2, layers, 24);
    c.norm_first = 1;
    c.rope_theta = 1000.0f;
    c.local_rope_theta = 30.0f;
    c.local_window = 4;
    return c;
}

/* Layers 0 and 2 of a 3-layer stack with global_every 2 are global, layer 1 local: the stack
 * equals three one-layer encoders, global (no window, base rope_theta), local (every layer
 * local: the window and local_rope_theta), global. Dropping the window or the local base
 * changes the result (so the comparison can fail), and both rotary bases stay in the
 * context's tables. */
static void local_layers_alternate_with_global_ones(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t B = 2, N = 11, d = 16;
    clattn_encoder_config stack = local_global_config(3);
    stack.global_every = 2;
    clattn_encoder_config global = local_global_config(1), local = local_global_config(1);
    global.local_window = 0, global.local_rope_theta = 0.0f;
    local.global_every = 0; /* every layer local */
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &stack, true, 41);
    float x[2 * 11 * 16], padding[2 * 11] = {0};
    test_fill_uniform(x, B * N * d, 42, -1, 1);
    padding[N + 8] = padding[N + 9] = padding[N + 10] = 1.0f; /* the second row: 8 tokens */
    for (int path = CLATTN_PATH_UNFUSED; path <= CLATTN_PATH_FUSED; path++) {
        float *want = run_encoder(ctx, &stack, bank_lookup, bank, x, B, N, padding, NULL, path);
        const clattn_rotary_table *tables = &ctx->rope_table;
        double a = tables->entries[0].theta, b = tables->entries[1].theta;
        assert_true((a == 1000.0 && b == 30.0) || (a == 30.0 && b == 1000.0));
        float *h = malloc(sizeof(x)), *next;
        memcpy(h, x, sizeof(x));
        for (size_t i = 0; i < 3; i++, free(h), h = next) {
            one_layer_of o = {bank, i};
            next = run_encoder(ctx, i == 1 ? &local : &global, one_layer_lookup, &o, h, B, N,
                               padding, NULL, path);
        }
        assert_close(h, want, B * N * d, 1e-5);
        clattn_encoder_config changed = stack;
        changed.local_rope_theta = 0.0f; /* the local layer with base 1000 */
        float *other = run_encoder(ctx, &changed, bank_lookup, bank, x, B, N, padding, NULL, path);
        assert_true(test_max_abs_diff(other, want, B * N * d) > 1e-3);
        free(other);
        changed = stack;
        changed.global_every = 1; /* every layer global */
        other = run_encoder(ctx, &changed, bank_lookup, bank, x, B, N, padding, NULL, path);
        assert_true(test_max_abs_diff(other, want, B * N * d) > 1e-3);
        free(other), free(h), free(want);
    }
    bank_free(bank);
    free(bank);
}

/* A local layer sees the keys |i - j| <= local_window / 2: the same as the band of an attention
 * mask in a stack without local layers whose rope_theta is the local base (post-LN, padding). */
static void a_local_window_is_a_band_mask(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t B = 2, N = 13, d = 16;
    clattn_encoder_config local = local_global_config(2);
    local.norm_first = 0;
    local.local_window = 6;
    clattn_encoder_config banded = local;
    banded.local_window = 0, banded.local_rope_theta = 0.0f, banded.rope_theta = 30.0f;
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &local, true, 43);
    float x[2 * 13 * 16], padding[2 * 13] = {0}, band[13 * 13];
    test_fill_uniform(x, B * N * d, 44, -1, 1);
    padding[N + 11] = padding[N + 12] = 1.0f;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            band[i * N + j] = (i > j ? i - j : j - i) > 3 ? 1.0f : 0.0f; /* true: ignored */
    for (int path = CLATTN_PATH_UNFUSED; path <= CLATTN_PATH_FUSED; path++) {
        float *got = run_encoder(ctx, &local, bank_lookup, bank, x, B, N, padding, NULL, path);
        float *want = run_encoder(ctx, &banded, bank_lookup, bank, x, B, N, padding, band, path);
        assert_close(got, want, B * N * d, 1e-5);
        free(got), free(want);
    }
    bank_free(bank);
    free(bank);
}

/* first_norm1_identity: layer 0's attention reads x (the reference without layer 0's norm1),
 * layers.0.norm1.* are not looked up, and the parameter count leaves them out. */
static void first_layer_without_norm1(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t B = 2, N = 7, d = 16;
    clattn_encoder_config c;
    clattn_encoder_config_default(&c, d, 4, 2, 32);
    c.norm_first = 1;
    c.final_norm = 1;
    c.activation = CLATTN_ACTIVATION_GELU;
    c.first_norm1_identity = 1;
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c, true, 45);
    bank_remove(bank, "layers.0.norm1.weight");
    bank_remove(bank, "layers.0.norm1.bias");
    bank->layers[0].norm1_w = bank->layers[0].norm1_b = NULL;
    float x[2 * 7 * 16], want[2 * 7 * 16], padding[2 * 7] = {0};
    test_fill_uniform(x, B * N * d, 46, -1, 1);
    padding[N + 6] = 1.0f;
    ref_encoder_forward(&bank->ref, x, NULL, B, N, padding, false, 0, want);
    float *got = run_encoder(ctx, &c, bank_lookup, bank, x, B, N, padding, NULL, CLATTN_PATH_AUTO);
    assert_close(got, want, B * N * d, TOL);
    uint64_t with = 0, without = 0;
    assert_int_equal(clattn_encoder_count_params(&c, &without), CLATTN_OK);
    c.first_norm1_identity = 0;
    assert_int_equal(clattn_encoder_count_params(&c, &with), CLATTN_OK);
    assert_int_equal(with - without, 2 * d);
    free(got);
    bank_free(bank);
    free(bank);
}

static void create_rejects_bad_local_layers(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder *enc = (clattn_encoder *)0x1;
    clattn_encoder_config c = local_global_config(2);
    c.local_window = 5;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "local_window is 5: it must be even");
    assert_null(enc);
    c = local_global_config(2);
    c.local_window = 0;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "global_every (0) and local_rope_theta (30) need a local_window");
    c.local_rope_theta = 0.0f, c.global_every = 3;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "global_every (3) and local_rope_theta (0) need a local_window");
    c = local_global_config(2);
    c.rope_theta = 0.0f;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "local_rope_theta is 30: it must be a finite base >= 1 with a rope_theta");
    c = local_global_config(2);
    c.local_rope_theta = 0.5f;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "local_rope_theta is 0.5");
    c.local_rope_theta = INFINITY;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "local_rope_theta is inf");
    c = local_global_config(2);
    c.first_norm1_identity = 2;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "first_norm1_identity (2) must be 0 or 1");
    c.first_norm1_identity = 1, c.norm_first = 0;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "first_norm1_identity needs norm_first");
    assert_null(enc);
}

/* ---- invalid arguments ---- */

static void create_rejects_bad_configurations(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder_config c;
    clattn_encoder *enc = (clattn_encoder *)0x1;
    clattn_encoder_config_default(&c, 16, 4, 1, 32);
    assert_status_msg(NULL, clattn_encoder_create(NULL, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(ctx, clattn_encoder_create(ctx, NULL, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "encoder is NULL");
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "config is NULL");
    assert_null(enc);
    clattn_encoder_config_default(&c, 16, 4, 0, 32);
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "num_layers (0)");
    clattn_encoder_config_default(&c, 18, 4, 1, 32);
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "d_model 18 is not divisible by nhead 4");
    clattn_encoder_config_default(&c, 16, 4, 1, 32);
    c.layer_norm_eps = 0.0f;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "layer_norm_eps");
    c.layer_norm_eps = NAN;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "layer_norm_eps");
    clattn_encoder_config_default(&c, 16, 4, 1, 32);
    c.activation = (clattn_activation)5;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "activation is 5");
    clattn_encoder_config_default(&c, 16, 4, 1, 32);
    c.positional = (clattn_positional)7;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "positional is 7");
    clattn_encoder_config_default(&c, 16, 4, 1, 32);
    c.reserved[3] = 1;
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    clattn_encoder_config_default(&c, (size_t)1 << 30, 1, 1, 1);
    assert_status_msg(ctx, clattn_encoder_create(ctx, &enc, &c), CLATTN_ERROR_TOO_LARGE,
                      "too large");
    assert_null(enc);
    clattn_encoder_destroy(NULL);
    clattn_encoder_config_default(NULL, 1, 1, 1, 1);
    clattn_encoder_forward_params_default(NULL);
    assert_status_msg(NULL, clattn_encoder_get_config(NULL, &c), CLATTN_ERROR_INVALID_ARGUMENT,
                      "encoder is NULL");
    assert_status_msg(NULL, clattn_encoder_init_random(NULL, 1), CLATTN_ERROR_INVALID_ARGUMENT,
                      "encoder is NULL");
}

static void load_weights_names_what_is_missing_or_wrong(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 8, 2, 2, 16);
    cfg.final_norm = 1;
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &cfg, true, 100);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_status_msg(NULL, clattn_encoder_load_weights(NULL, bank_lookup, bank),
                      CLATTN_ERROR_INVALID_ARGUMENT, "encoder is NULL");
    assert_status_msg(ctx, clattn_encoder_load_weights(enc, NULL, bank),
                      CLATTN_ERROR_INVALID_ARGUMENT, "lookup is NULL");

    clattn_host_tensor *w1 = bank_find(bank, "layers.1.linear1.weight");
    w1->shape[0] = 15;
    assert_status_msg(ctx, clattn_encoder_load_weights(enc, bank_lookup, bank),
                      CLATTN_ERROR_SHAPE_MISMATCH,
                      "tensor layers.1.linear1.weight has shape [15, 8] but the configuration "
                      "needs [16, 8]");
    w1->shape[0] = 16;
    bank_remove(bank, "norm.bias");
    assert_status_msg(ctx, clattn_encoder_load_weights(enc, bank_lookup, bank),
                      CLATTN_ERROR_FORMAT, "missing tensor norm.bias");
    bank_remove(bank, "layers.0.self_attn.in_proj_weight");
    assert_status_msg(ctx, clattn_encoder_load_weights(enc, bank_lookup, bank),
                      CLATTN_ERROR_FORMAT, "missing tensor layers.0.self_attn.in_proj_weight");
    /* Still without weights after the failures. */
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){1, 2, 8}, NULL);
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, x, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "has no weights");
    clattn_tensor_destroy(&x);
    clattn_encoder_destroy(&enc);
    bank_free(bank);
    free(bank);
}

static void forward_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 8, 2, 1, 16);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 3), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){2, 3, 8}, NULL);
    clattn_tensor *wide = test_tensor_from(ctx, 3, (size_t[]){2, 3, 9}, NULL);
    clattn_tensor *short_out = test_tensor_from(ctx, 3, (size_t[]){2, 2, 8}, NULL);
    clattn_tensor *kpm = test_tensor_from(ctx, 2, (size_t[]){2, 4}, NULL);
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    assert_status_msg(NULL, clattn_encoder_forward(NULL, x, x, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "encoder is NULL");
    assert_status_msg(ctx, clattn_encoder_forward(enc, NULL, x, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "input is NULL");
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    assert_status_msg(ctx, clattn_encoder_forward(enc, wide, x, NULL), CLATTN_ERROR_SHAPE_MISMATCH,
                      "input has shape [2, 3, 9] but must be [B, N, d_model] with d_model = 8");
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, short_out, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "out has shape [2, 2, 8] but must be [B, N, d_model] = [2, 3, 8]");
    p.key_padding_mask = kpm;
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, x, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "key_padding_mask has shape [2, 4] but must be [B, Nk] = [2, 3]");
    clattn_encoder_forward_params_default(&p);
    p.reserved[1] = 1;
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, x, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    clattn_encoder_forward_params_default(&p);
    p.path = (clattn_attention_path)3;
    assert_status_msg(ctx, clattn_encoder_forward(enc, x, x, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "path is 3");
    int64_t ids[6] = {0};
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, ids, 2, 3, x, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "no token embedding");
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&wide), clattn_tensor_destroy(&short_out);
    clattn_tensor_destroy(&kpm);
    clattn_encoder_destroy(&enc);
}

static void token_ids_out_of_range(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 8, 2, 1, 16);
    cfg.vocab_size = 5;
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 4), CLATTN_OK);
    clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){2, 3, 8}, NULL);
    int64_t ids[6] = {0, 1, 2, 3, 4, 5};
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, ids, 2, 3, y, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "token id 5 at [1, 2] is outside the vocabulary [0, 5)");
    ids[5] = -1;
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, ids, 2, 3, y, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "token id -1 at [1, 2]");
    ids[5] = 4;
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids, 2, 3, y, NULL), CLATTN_OK);
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, NULL, 2, 3, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ids is NULL");
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, ids, 0, 3, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "must be positive");
    clattn_tensor_destroy(&y);
    clattn_encoder_destroy(&enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(post_and_pre_ln_with_relu_and_gelu),
        cmocka_unit_test(layer_norm_eps_values),
        cmocka_unit_test(stacks_with_and_without_final_norm),
        cmocka_unit_test(padding_and_causal_masks),
        cmocka_unit_test(sinusoidal_positions_with_an_offset),
        cmocka_unit_test(token_input_with_embedding),
        cmocka_unit_test(head_widths_of_table_3_row_b),
        cmocka_unit_test(out_may_be_the_input),
        cmocka_unit_test(set_positional_adds_the_table),
        cmocka_unit_test(set_positional_with_token_input),
        cmocka_unit_test(sinusoidal_table_matches_the_paper),
        cmocka_unit_test(add_sinusoidal_adds_the_table),
        cmocka_unit_test(presets_follow_table_3),
        cmocka_unit_test(analytic_counts),
        cmocka_unit_test(counters_agree_with_the_analytic_count),
        cmocka_unit_test(random_weights_are_deterministic),
        cmocka_unit_test(weights_kept_packed_run_on_either_gemm),
        cmocka_unit_test(every_workspace_slot_is_named),
        cmocka_unit_test(long_inputs_run_the_feed_forward_in_blocks),
        cmocka_unit_test(local_layers_alternate_with_global_ones),
        cmocka_unit_test(a_local_window_is_a_band_mask),
        cmocka_unit_test(first_layer_without_norm1),
        cmocka_unit_test(create_rejects_bad_local_layers),
        cmocka_unit_test(create_rejects_bad_configurations),
        cmocka_unit_test(load_weights_names_what_is_missing_or_wrong),
        cmocka_unit_test(forward_rejects_bad_arguments),
        cmocka_unit_test(token_ids_out_of_range),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
