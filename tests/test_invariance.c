/*
 * Batch invariance: a sequence's outputs are the same bytes alone and inside any batch, with any
 * padding (clattn/context.h, "Batch invariance"). Each case computes a target sequence alone
 * (batch 1, no padding), then inside batches of other sequences of other lengths, padded to
 * longer lengths with a key-padding mask, at various rows, and compares the target's rows byte
 * for byte (memcmp): SDPA (also with every score modifier), multi-head attention, the encoder
 * (fused and unfused paths, token input), pooling, decoding steps alone and inside a beam batch
 * (with memories short and long enough for split-key attention), and sentence embeddings (a tiny
 * random BERT on every leg, the real all-MiniLM-L6-v2 on the main one) alone and in batches of 2,
 * 7, 32 and 64, sorted and shuffled.
 */
#include "common/test_util.h"
#include "common/tiny_sentence_model.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Target lengths and padded lengths the attention and encoder cases run through. */
static const size_t target_lengths[] = {1, 2, 7, 8, 9, 16, 17, 40};
#define N_TARGETS (sizeof(target_lengths) / sizeof(target_lengths[0]))

/* A batch around the target: B rows, padded to N, the target at row `row`. */
typedef struct batch_shape {
    size_t B, extra, row; /* N = target length + extra (at least 1 when the target is longer) */
} batch_shape;
static const batch_shape shapes[] = {{2, 0, 1}, {7, 3, 3}, {3, 256, 0}, {32, 9, 31}, {64, 1, 17}};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* Fails with the first differing float of `what` (byte comparison). */
static void assert_same_bytes(const float *alone, const float *batched, size_t n, const char *what,
                              size_t length, size_t B, size_t N)
{
    if (memcmp(alone, batched, n * sizeof(float)) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&alone[i], &batched[i], sizeof(float)) != 0) {
            print_error("%s: target of length %zu inside [%zu, %zu]: element %zu is %.9g alone, "
                        "%.9g batched\n", what, length, B, N, i, alone[i], batched[i]);
            break;
        }
    fail();
}

/* The lengths of the other rows of a batch padded to N: seeded, 1..N. */
static size_t other_length(test_rng *rng, size_t N)
{
    return 1 + (size_t)(test_rng_next(rng) % N);
}

/* A [B, N] key-padding mask (nonzero = padding): row `row` has L real tokens, the others
 * seeded lengths of 1..N. */
static float *padding_mask(size_t B, size_t N, size_t row, size_t L, uint64_t seed)
{
    float *kpm = calloc(B * N, sizeof(float));
    test_rng rng = {seed};
    for (size_t b = 0; b < B; b++) {
        size_t len = b == row ? L : other_length(&rng, N);
        for (size_t j = len; j < N; j++)
            kpm[b * N + j] = 1.0f;
    }
    return kpm;
}

/* A batch [B, N, width] of seeded values in [lo, hi) whose row `row` starts with the target's
 * L rows x [L, width]. */
static float *batch_around(const float *x, size_t L, size_t width, size_t B, size_t N, size_t row,
                           uint64_t seed, float lo, float hi)
{
    float *bx = malloc(B * N * width * sizeof(float));
    test_fill_uniform(bx, B * N * width, seed, lo, hi);
    memcpy(bx + row * N * width, x, L * width * sizeof(float));
    return bx;
}

/* ---- SDPA: q, k, v [B, H, N, d] with a [B, N] key-padding mask ---- */

static float *sdpa_run(clattn_context *ctx, const clattn_sdpa_params *base, const float *q,
                       const float *k, const float *v, const float *kpm, size_t B, size_t H,
                       size_t N, size_t d)
{
    size_t shape[4] = {B, H, N, d};
    clattn_tensor *tq = test_tensor_from(ctx, 4, shape, q), *tk = test_tensor_from(ctx, 4, shape, k);
    clattn_tensor *tv = test_tensor_from(ctx, 4, shape, v), *to = test_tensor_from(ctx, 4, shape, NULL);
    clattn_tensor *tm = kpm ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
    clattn_sdpa_params p;
    if (base)
        p = *base;
    else
        clattn_sdpa_params_default(&p);
    p.key_padding_mask = tm;
    p.key_padding_mask_kind = CLATTN_MASK_BOOL;
    clattn_status status = clattn_sdpa(ctx, tq, tk, tv, to, &p);
    if (status != CLATTN_OK)
        print_error("sdpa: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *out = test_tensor_to_host(to);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
    clattn_tensor_destroy(&to), clattn_tensor_destroy(&tm);
    return out;
}

/* base: the parameters besides the key-padding mask (NULL: the defaults). */
static void sdpa_invariance(clattn_context *ctx, const clattn_sdpa_params *base)
{
    const size_t H = 2, d = 16;
    for (size_t t = 0; t < N_TARGETS; t++) {
        size_t L = target_lengths[t], n = H * L * d;
        float *q = malloc(n * sizeof(float)), *k = malloc(n * sizeof(float));
        float *v = malloc(n * sizeof(float));
        test_fill_uniform(q, n, 100 + t, -2, 2);
        test_fill_uniform(k, n, 200 + t, -2, 2);
        test_fill_uniform(v, n, 300 + t, -1, 1);
        float *alone = sdpa_run(ctx, base, q, k, v, NULL, 1, H, L, d);
        for (size_t s = 0; s < N_SHAPES; s++) {
            size_t B = shapes[s].B, N = L + shapes[s].extra, row = shapes[s].row;
            size_t all = B * H * N * d;
            float *bq = malloc(all * sizeof(float)), *bk = malloc(all * sizeof(float));
            float *bv = malloc(all * sizeof(float)), *kpm = padding_mask(B, N, row, L, 700 + s);
            test_fill_uniform(bq, all, 400 + s, -2, 2);
            test_fill_uniform(bk, all, 500 + s, -2, 2);
            test_fill_uniform(bv, all, 600 + s, -1, 1);
            for (size_t h = 0; h < H; h++) /* the target's heads, its first L positions */
                for (size_t i = 0; i < L; i++) {
                    size_t at = ((row * H + h) * N + i) * d, from = (h * L + i) * d;
                    memcpy(bq + at, q + from, d * sizeof(float));
                    memcpy(bk + at, k + from, d * sizeof(float));
                    memcpy(bv + at, v + from, d * sizeof(float));
                }
            float *out = sdpa_run(ctx, base, bq, bk, bv, kpm, B, H, N, d);
            for (size_t h = 0; h < H; h++)
                assert_same_bytes(alone + h * L * d, out + (row * H + h) * N * d, L * d, "sdpa",
                                  L, B, N);
            free(out), free(bq), free(bk), free(bv), free(kpm);
        }
        free(alone), free(q), free(k), free(v);
    }
}

static void sdpa_rows_are_batch_invariant(void **state)
{
    sdpa_invariance(((test_fixture *)*state)->ctx, NULL);
}

/* The same with every score modifier (include/clattn/attention.h): soft-capping, ALiBi, relative
 * buckets and a sliding window narrower than the longest batches (whole key blocks skipped), and
 * rotary embeddings. */
static void modified_sdpa_rows_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    float slopes[2], table[32 * 2];
    assert_int_equal(clattn_alibi_slopes(2, slopes), CLATTN_OK);
    test_fill_uniform(table, 32 * 2, 800, -1, 1);
    clattn_tensor *ts = test_tensor_from(ctx, 1, (size_t[]){2}, slopes);
    clattn_tensor *tt = test_tensor_from(ctx, 2, (size_t[]){32, 2}, table);
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.softcap = 5.0f;
    p.alibi_slopes = ts;
    p.relative_bias = tt;
    p.window = 12;
    clattn_rope_params rope;
    clattn_rope_params_default(&rope);
    p.rope = &rope;
    sdpa_invariance(ctx, &p);
    p.path = CLATTN_PATH_UNFUSED;
    sdpa_invariance(ctx, &p);
    clattn_tensor_destroy(&ts), clattn_tensor_destroy(&tt);
}

/* ---- multi-head self-attention: [B, N, E] with a key-padding mask ---- */

static float *mha_run(clattn_context *ctx, clattn_mha *mha, const float *x, const float *kpm,
                      size_t B, size_t N, size_t E)
{
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, x);
    clattn_tensor *to = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    clattn_tensor *tm = kpm ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
    clattn_mha_forward_params p;
    clattn_mha_forward_params_default(&p);
    p.key_padding_mask = tm;
    clattn_status status = clattn_mha_forward(mha, tx, NULL, NULL, to, &p);
    if (status != CLATTN_OK)
        print_error("mha: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *out = test_tensor_to_host(to);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&to), clattn_tensor_destroy(&tm);
    return out;
}

static void mha_rows_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    enum { E = 32, H = 4 };
    static float w_in[3 * E * E], b_in[3 * E], w_out[E * E], b_out[E];
    test_fill_uniform(w_in, 3 * E * E, 5000, -0.3f, 0.3f);
    test_fill_uniform(b_in, 3 * E, 5001, -0.1f, 0.1f);
    test_fill_uniform(w_out, E * E, 5002, -0.3f, 0.3f);
    test_fill_uniform(b_out, E, 5003, -0.1f, 0.1f);
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, E, H);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    w.in_proj_weight = (clattn_host_tensor){w_in, 2, {3 * E, E}};
    w.in_proj_bias = (clattn_host_tensor){b_in, 1, {3 * E}};
    w.out_proj_weight = (clattn_host_tensor){w_out, 2, {E, E}};
    w.out_proj_bias = (clattn_host_tensor){b_out, 1, {E}};
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    for (size_t t = 0; t < N_TARGETS; t++) {
        size_t L = target_lengths[t];
        float *x = malloc(L * E * sizeof(float));
        test_fill_uniform(x, L * E, 5100 + t, -1, 1);
        float *alone = mha_run(ctx, mha, x, NULL, 1, L, E);
        for (size_t s = 0; s < N_SHAPES; s++) {
            size_t B = shapes[s].B, N = L + shapes[s].extra, row = shapes[s].row;
            float *bx = batch_around(x, L, E, B, N, row, 5200 + s, -1, 1);
            float *kpm = padding_mask(B, N, row, L, 5300 + s);
            float *out = mha_run(ctx, mha, bx, kpm, B, N, E);
            assert_same_bytes(alone, out + row * N * E, L * E, "mha", L, B, N);
            free(out), free(bx), free(kpm);
        }
        free(alone), free(x);
    }
    clattn_mha_destroy(&mha);
}

/* ---- the encoder (and with it multi-head attention, LayerNorm, the GEMMs) ---- */

typedef struct encoder_run {
    clattn_encoder *enc;
    size_t d;
    bool tokens;
    clattn_attention_path path;
} encoder_run;

static float *encoder_forward(clattn_context *ctx, const encoder_run *r, const float *x,
                              const int64_t *ids, const float *kpm, size_t B, size_t N)
{
    clattn_tensor *tin = r->tokens ? NULL : test_tensor_from(ctx, 3, (size_t[]){B, N, r->d}, x);
    clattn_tensor *tout = test_tensor_from(ctx, 3, (size_t[]){B, N, r->d}, NULL);
    clattn_tensor *tm = kpm ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.key_padding_mask = tm;
    p.path = r->path;
    clattn_status status = r->tokens ? clattn_encoder_forward_tokens(r->enc, ids, B, N, tout, &p)
                                     : clattn_encoder_forward(r->enc, tin, tout, &p);
    if (status != CLATTN_OK)
        print_error("encoder: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *out = test_tensor_to_host(tout);
    clattn_tensor_destroy(&tin), clattn_tensor_destroy(&tout), clattn_tensor_destroy(&tm);
    return out;
}

static void encoder_case(clattn_context *ctx, const encoder_run *r, size_t vocab)
{
    size_t d = r->d;
    for (size_t t = 0; t < N_TARGETS; t++) {
        size_t L = target_lengths[t];
        float *x = malloc(L * d * sizeof(float));
        int64_t *ids = malloc(L * sizeof(int64_t));
        test_fill_uniform(x, L * d, 1000 + t, -1, 1);
        test_rng id_rng = {1100 + t};
        for (size_t i = 0; i < L; i++)
            ids[i] = (int64_t)(test_rng_next(&id_rng) % vocab);
        float *alone = encoder_forward(ctx, r, x, ids, NULL, 1, L);
        for (size_t s = 0; s < N_SHAPES; s++) {
            size_t B = shapes[s].B, N = L + shapes[s].extra, row = shapes[s].row;
            float *bx = batch_around(x, L, d, B, N, row, 1200 + s, -1, 1);
            float *kpm = padding_mask(B, N, row, L, 1400 + s);
            int64_t *bids = malloc(B * N * sizeof(int64_t));
            test_rng rng = {1300 + s};
            for (size_t i = 0; i < B * N; i++)
                bids[i] = (int64_t)(test_rng_next(&rng) % vocab);
            memcpy(bids + row * N, ids, L * sizeof(int64_t));
            float *out = encoder_forward(ctx, r, bx, bids, kpm, B, N);
            assert_same_bytes(alone, out + row * N * d, L * d,
                              r->path == CLATTN_PATH_UNFUSED ? "encoder (unfused)" : "encoder",
                              L, B, N);
            free(out), free(bx), free(kpm), free(bids);
        }
        free(alone), free(x), free(ids);
    }
}

static clattn_encoder *small_encoder(clattn_context *ctx, size_t vocab)
{
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 32, 4, 2, 64);
    cfg.activation = CLATTN_ACTIVATION_GELU;
    cfg.vocab_size = vocab;
    cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 42), CLATTN_OK);
    return enc;
}

static void encoder_rows_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    encoder_run r = {small_encoder(ctx, 50), 32, false, CLATTN_PATH_AUTO};
    encoder_case(ctx, &r, 50);
    r.tokens = true; /* token ids: embedding, sinusoidal positions */
    encoder_case(ctx, &r, 50);
    clattn_encoder_destroy(&r.enc);
}

static void unfused_encoder_rows_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    encoder_run r = {small_encoder(ctx, 50), 32, false, CLATTN_PATH_UNFUSED};
    encoder_case(ctx, &r, 50);
    clattn_encoder_destroy(&r.enc);
}

/* ---- pooling ---- */

static float *pool_run(clattn_context *ctx, const float *x, const float *kpm, size_t B, size_t N,
                       size_t d, clattn_pooling pooling)
{
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, x);
    clattn_tensor *tm = kpm ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
    clattn_tensor *to = test_tensor_from(ctx, 2, (size_t[]){B, d}, NULL);
    assert_int_equal(clattn_pool(ctx, tx, tm, pooling, 1, to), CLATTN_OK);
    float *out = test_tensor_to_host(to);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tm), clattn_tensor_destroy(&to);
    return out;
}

static void pooling_is_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const size_t d = 48;
    for (int pooling = CLATTN_POOLING_MEAN; pooling <= CLATTN_POOLING_CLS; pooling++)
        for (size_t t = 0; t < N_TARGETS; t++) {
            size_t L = target_lengths[t];
            float *x = malloc(L * d * sizeof(float));
            test_fill_uniform(x, L * d, 2000 + t, -3, 3);
            float *alone = pool_run(ctx, x, NULL, 1, L, d, (clattn_pooling)pooling);
            for (size_t s = 0; s < N_SHAPES; s++) {
                size_t B = shapes[s].B, N = L + shapes[s].extra, row = shapes[s].row;
                float *bx = batch_around(x, L, d, B, N, row, 2100 + s, -3, 3);
                float *kpm = padding_mask(B, N, row, L, 2200 + s);
                float *out = pool_run(ctx, bx, kpm, B, N, d, (clattn_pooling)pooling);
                assert_same_bytes(alone, out + row * d, d, "pool", L, B, N);
                free(out), free(bx), free(kpm);
            }
            free(alone), free(x);
        }
}

/* ---- decoding steps: one sentence alone, inside a beam batch, among other sentences ---- */

/* Runs `steps` one-token steps of a decoding state of `B` rows over memory [B, S, d] (with its
 * padding mask, may be NULL); tgt[b, t, :] is row b's token t. Returns out[t][b, :] as
 * [steps, B, d]. */
static float *decode(clattn_context *ctx, clattn_decoder *dec, const float *memory,
                     const float *mem_kpm, const float *tgt, size_t B, size_t S, size_t steps,
                     size_t d)
{
    clattn_decoder_state *st = NULL;
    assert_int_equal(clattn_decoder_state_create(dec, &st, B, steps), CLATTN_OK);
    clattn_tensor *tm = test_tensor_from(ctx, 3, (size_t[]){B, S, d}, memory);
    clattn_tensor *tk = mem_kpm ? test_tensor_from(ctx, 2, (size_t[]){B, S}, mem_kpm) : NULL;
    clattn_status status = clattn_decoder_state_set_memory(st, tm, tk);
    if (status != CLATTN_OK)
        print_error("set_memory: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *outs = malloc(steps * B * d * sizeof(float)), *x = malloc(B * d * sizeof(float));
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, 1, d}, NULL);
    clattn_tensor *to = test_tensor_from(ctx, 3, (size_t[]){B, 1, d}, NULL);
    for (size_t t = 0; t < steps; t++) {
        for (size_t b = 0; b < B; b++)
            memcpy(x + b * d, tgt + (b * steps + t) * d, d * sizeof(float));
        assert_int_equal(clattn_tensor_write(tx, x, B * d), CLATTN_OK);
        status = clattn_decoder_step(st, tx, to);
        if (status != CLATTN_OK)
            print_error("step: %s\n", clattn_last_error(ctx));
        assert_int_equal(status, CLATTN_OK);
        assert_int_equal(clattn_tensor_read(to, outs + t * B * d, B * d), CLATTN_OK);
    }
    free(x);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&to), clattn_tensor_destroy(&tm);
    clattn_tensor_destroy(&tk);
    clattn_decoder_state_destroy(&st);
    return outs;
}

/* The sentence's memory [S, d] and target [steps, d] alone, then as row `row` of a batch of B:
 * with `same_memory` (a beam batch: every row attends to the sentence, each with other tokens)
 * or among other sentences padded to S + extra. */
static void decoder_case(clattn_context *ctx, clattn_decoder *dec, size_t S, size_t B, size_t row,
                         bool same_memory, size_t extra)
{
    const size_t d = 32, steps = 9;
    float *memory = malloc(S * d * sizeof(float)), *tgt = malloc(steps * d * sizeof(float));
    test_fill_uniform(memory, S * d, 3000 + S, -1, 1);
    test_fill_uniform(tgt, steps * d, 3100 + S, -1, 1);
    float *alone = decode(ctx, dec, memory, NULL, tgt, 1, S, steps, d);
    size_t Sp = same_memory ? S : S + extra;
    float *bmem = malloc(B * Sp * d * sizeof(float)), *btgt = malloc(B * steps * d * sizeof(float));
    float *kpm = same_memory ? NULL : calloc(B * Sp, sizeof(float));
    test_fill_uniform(bmem, B * Sp * d, 3200 + S, -1, 1);
    test_fill_uniform(btgt, B * steps * d, 3300 + S, -1, 1);
    test_rng rng = {3400 + S};
    for (size_t b = 0; b < B; b++) {
        if (same_memory || b == row)
            memcpy(bmem + b * Sp * d, memory, S * d * sizeof(float));
        if (kpm) {
            size_t len = b == row ? S : other_length(&rng, Sp);
            for (size_t j = len; j < Sp; j++)
                kpm[b * Sp + j] = 1.0f;
        }
    }
    memcpy(btgt + row * steps * d, tgt, steps * d * sizeof(float));
    float *outs = decode(ctx, dec, bmem, kpm, btgt, B, Sp, steps, d);
    for (size_t t = 0; t < steps; t++)
        assert_same_bytes(alone + t * d, outs + (t * B + row) * d, d,
                          same_memory ? "decoder step (beam batch)" : "decoder step (padded)", S,
                          B, Sp);
    free(outs), free(alone), free(memory), free(tgt), free(bmem), free(btgt), free(kpm);
}

static void decoder_steps_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 32, 4, 2, 64);
    cfg.final_norm = 1;
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    assert_int_equal(clattn_decoder_init_random(dec, 7), CLATTN_OK);
    decoder_case(ctx, dec, 11, 4, 2, true, 0);   /* a beam of 4 */
    decoder_case(ctx, dec, 300, 5, 0, true, 0);  /* a memory long enough for split keys */
    decoder_case(ctx, dec, 11, 6, 3, false, 20); /* among other sentences, padded */
    decoder_case(ctx, dec, 1, 3, 1, false, 6);
    clattn_decoder_destroy(&dec);
}

/* ---- sentence embeddings: a tiny random BERT, and the real all-MiniLM-L6-v2 ---- */

#define N_TEXTS 64

/* Texts of 0 to max_words words (the first eight of 0 to 7 words). */
static char **make_texts(size_t max_words)
{
    static const char *words[] = {"the", "of", "and", "to", "in", "is", "was", "for", "on", "that",
                                  "with", "quick", "brown", "fox", "zebra", "embedding", "batch",
                                  "padding", "tokens", "device"};
    char **texts = malloc(N_TEXTS * sizeof(char *));
    test_rng rng = {4000};
    for (size_t i = 0; i < N_TEXTS; i++) {
        size_t count = i < 8 ? i : (size_t)(test_rng_next(&rng) % (max_words + 1));
        texts[i] = calloc(count * 12 + 1, 1);
        for (size_t w = 0; w < count; w++) {
            if (w)
                strcat(texts[i], " ");
            strcat(texts[i], words[test_rng_next(&rng) % 20]);
        }
    }
    return texts;
}

static void embed(clattn_sentence_model *m, const char *const *texts, size_t count,
                  size_t batch_size, float *out)
{
    clattn_embed_params p;
    clattn_embed_params_default(&p);
    p.batch_size = batch_size;
    assert_int_equal(clattn_sentence_model_embed(m, texts, NULL, count, out, &p, NULL), CLATTN_OK);
}

/* Fails with the first differing float of text `index`'s embedding. */
static void assert_same_embedding(const float *alone, const float *batched, size_t d,
                                  size_t index, const char *how)
{
    if (memcmp(alone, batched, d * sizeof(float)) == 0)
        return;
    for (size_t i = 0; i < d; i++)
        if (memcmp(&alone[i], &batched[i], sizeof(float)) != 0) {
            print_error("text %zu embedded %s: element %zu is %.9g alone, %.9g batched\n",
                        index + 1, how, i, alone[i], batched[i]);
            break;
        }
    fail();
}

/* Each of N_TEXTS texts alone, then all of them in batches of 2, 7, 32 and 64 (sorted by length
 * inside the call), then shuffled in calls of 21 texts in batches of 7 (other neighbours, other
 * padded lengths): every embedding the same bytes. */
static void embeddings_are_batch_invariant(clattn_context *ctx, const char *dir, size_t max_words)
{
    clattn_sentence_model *m = NULL;
    clattn_status status = clattn_sentence_model_load(ctx, &m, dir);
    if (status != CLATTN_OK)
        print_error("load: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_get_info(m, &info), CLATTN_OK);
    size_t d = info.hidden_size;
    char **texts = make_texts(max_words);
    float *alone = malloc(N_TEXTS * d * sizeof(float)), *got = malloc(N_TEXTS * d * sizeof(float));
    for (size_t i = 0; i < N_TEXTS; i++)
        embed(m, (const char *const *)&texts[i], 1, 1, alone + i * d);
    static const size_t batch_sizes[] = {2, 7, 32, 64};
    for (size_t s = 0; s < 4; s++) {
        embed(m, (const char *const *)texts, N_TEXTS, batch_sizes[s], got);
        char how[64];
        snprintf(how, sizeof(how), "in batches of %zu", batch_sizes[s]);
        for (size_t i = 0; i < N_TEXTS; i++)
            assert_same_embedding(alone + i * d, got + i * d, d, i, how);
    }
    size_t order[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++)
        order[i] = i;
    test_rng rng = {4100};
    for (size_t i = N_TEXTS - 1; i > 0; i--) {
        size_t j = (size_t)(test_rng_next(&rng) % (i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    const char *shuffled[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++)
        shuffled[i] = texts[order[i]];
    for (size_t first = 0; first < N_TEXTS; first += 21) {
        size_t count = first + 21 <= N_TEXTS ? 21 : N_TEXTS - first;
        embed(m, shuffled + first, count, 7, got);
        for (size_t i = 0; i < count; i++)
            assert_same_embedding(alone + order[first + i] * d, got + i * d, d, order[first + i],
                                  "shuffled, in batches of 7");
    }
    for (size_t i = 0; i < N_TEXTS; i++)
        free(texts[i]);
    free(texts), free(alone), free(got);
    clattn_sentence_model_destroy(&m);
}

/* The tiny BERT folder of tests/common/tiny_sentence_model.h. */
static void tiny_sentence_embeddings_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    char dir[4096];
    tiny_sentence_model_create(dir, sizeof(dir));
    embeddings_are_batch_invariant(ctx, dir, 12); /* up to 62 tokens: the model's 64 positions */
    test_temp_dir_remove(dir);
}

/* The real model, texts of up to 260 words (truncated to its 256 tokens). Its own test entry
 * (suite real-model: the main leg only; the rusticl and sanitizer legs run the tiny model). */
static void real_sentence_embeddings_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const char *dir = test_real_model_or_skip();
    embeddings_are_batch_invariant(ctx, dir, 260);
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sdpa_rows_are_batch_invariant),
        cmocka_unit_test(modified_sdpa_rows_are_batch_invariant),
        cmocka_unit_test(mha_rows_are_batch_invariant),
        cmocka_unit_test(encoder_rows_are_batch_invariant),
        cmocka_unit_test(unfused_encoder_rows_are_batch_invariant),
        cmocka_unit_test(pooling_is_batch_invariant),
        cmocka_unit_test(decoder_steps_are_batch_invariant),
        cmocka_unit_test(tiny_sentence_embeddings_are_batch_invariant),
        cmocka_unit_test(real_sentence_embeddings_are_batch_invariant),
    };
    /* CLATTN_TEST_FILTER / CLATTN_TEST_SKIP: run or leave out the tests whose names match (the
     * meson entries split the real model's case from the others). */
    const char *only = getenv("CLATTN_TEST_FILTER"), *skip = getenv("CLATTN_TEST_SKIP");
    if (only && *only)
        cmocka_set_test_filter(only);
    if (skip && *skip)
        cmocka_set_skip_filter(skip);
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
