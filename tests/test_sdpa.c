/*
 * clattn_sdpa against the plain-C reference: a grid of shapes (odd sizes, Nq != Nk, d_k != d_v),
 * every mask kind and broadcast form, causal, fully masked rows, custom scale, strided views,
 * the chunked path, and invalid arguments.
 * Tolerance: 1e-5 max abs error on outputs and weights for unit-scale inputs.
 */
#include "common/test_util.h"
#include "ref/ref_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

typedef struct mask_spec {
    int ndim; /* 0 = no mask */
    size_t shape[4];
    clattn_mask_kind kind;
} mask_spec;

typedef struct sdpa_case {
    size_t B, H, Nq, Nk, dk, dv;
    mask_spec attn;
    mask_spec key_padding;
    int causal;
    int weights;
    float scale; /* 0 = default */
    int fully_masked_rows; /* force some all-masked rows through the bool attn mask */
    clattn_attention_path path;
    float qk_range;    /* q and k uniform in [-qk_range, qk_range]; 0 = 1 */
    float mask_offset; /* added to every additive attn_mask entry (large logits) */
    float mask_ramp;   /* plus mask_ramp·j / (Nk - 1) for key j: maxima that grow with j */
    double tol;        /* 0 = TOL */
} sdpa_case;

static float *random_mask(const mask_spec *m, uint64_t seed, size_t *count)
{
    size_t n = 1;
    for (int d = 0; d < m->ndim; d++)
        n *= m->shape[d];
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, seed, -2.0f, 1.0f);
    if (m->kind == CLATTN_MASK_BOOL)
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] > 0.2f ? 1.0f : 0.0f;
    *count = n;
    return x;
}

static sdpa_case shape_case(size_t B, size_t H, size_t Nq, size_t Nk, size_t dk, size_t dv)
{
    sdpa_case c;
    memset(&c, 0, sizeof(c));
    c.B = B, c.H = H, c.Nq = Nq, c.Nk = Nk, c.dk = dk, c.dv = dv;
    return c;
}

/* Runs one case on ctx and compares out (and weights) with the reference. */
static void run_case_on(clattn_context *ctx, const sdpa_case *c, uint64_t seed)
{
    size_t B = c->B, H = c->H, Nq = c->Nq, Nk = c->Nk;
    size_t nq = B * H * Nq * c->dk, nk = B * H * Nk * c->dk, nv = B * H * Nk * c->dv;
    size_t no = B * H * Nq * c->dv, nw = B * H * Nq * Nk;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float));
    float *v = malloc(nv * sizeof(float));
    float range = c->qk_range != 0.0f ? c->qk_range : 1.0f;
    double tol = c->tol != 0.0 ? c->tol : TOL;
    test_fill_uniform(q, nq, seed, -range, range);
    test_fill_uniform(k, nk, seed + 1, -range, range);
    test_fill_uniform(v, nv, seed + 2, -1, 1);

    clattn_tensor *tq = test_tensor_from(ctx, 4, (size_t[]){B, H, Nq, c->dk}, q);
    clattn_tensor *tk = test_tensor_from(ctx, 4, (size_t[]){B, H, Nk, c->dk}, k);
    clattn_tensor *tv = test_tensor_from(ctx, 4, (size_t[]){B, H, Nk, c->dv}, v);
    clattn_tensor *to = test_tensor_from(ctx, 4, (size_t[]){B, H, Nq, c->dv}, NULL);
    clattn_tensor *tw = c->weights ? test_tensor_from(ctx, 4, (size_t[]){B, H, Nq, Nk}, NULL) : NULL;

    clattn_sdpa_params params;
    clattn_sdpa_params_default(&params);
    params.causal = c->causal;
    params.scale = c->scale;
    params.attn_weights = tw;
    params.path = c->path;
    ref_masks rm = {0};
    rm.causal = c->causal;

    float *am = NULL, *am_full = NULL, *kp = NULL;
    clattn_tensor *tam = NULL, *tkp = NULL;
    if (c->attn.ndim) {
        size_t n;
        am = random_mask(&c->attn, seed + 3, &n);
        if (c->fully_masked_rows && c->attn.kind == CLATTN_MASK_BOOL)
            for (size_t j = 0; j < c->attn.shape[c->attn.ndim - 1]; j++)
                am[j] = 1.0f; /* the first query row of the mask: every key ignored */
        if (c->attn.kind == CLATTN_MASK_ADDITIVE) {
            size_t last = c->attn.shape[c->attn.ndim - 1];
            for (size_t i = 0; i < n; i++)
                am[i] += c->mask_offset + (last > 1 ? c->mask_ramp * (float)(i % last) /
                                                          (float)(last - 1)
                                                    : 0.0f);
        }
        tam = test_tensor_from(ctx, c->attn.ndim, c->attn.shape, am);
        params.attn_mask = tam;
        params.attn_mask_kind = c->attn.kind;
        am_full = test_expand_mask(am, c->attn.ndim, c->attn.shape, 0, B, H, Nq, Nk);
        rm.attn_mask = am_full;
        rm.attn_mask_bool = c->attn.kind == CLATTN_MASK_BOOL;
        rm.am_sb = H * Nq * Nk, rm.am_sh = Nq * Nk, rm.am_si = Nk, rm.am_sj = 1;
    }
    if (c->key_padding.ndim) {
        size_t n;
        kp = random_mask(&c->key_padding, seed + 4, &n);
        if (c->fully_masked_rows)
            for (size_t j = 0; j < Nk; j++)
                kp[j] = c->key_padding.kind == CLATTN_MASK_BOOL ? 1.0f : -INFINITY;
        tkp = test_tensor_from(ctx, 2, c->key_padding.shape, kp);
        params.key_padding_mask = tkp;
        params.key_padding_mask_kind = c->key_padding.kind;
        /* The reference reads [B, Nk]; expand a broadcast [1, Nk]. */
        float *full = malloc(B * Nk * sizeof(float));
        for (size_t b = 0; b < B; b++)
            memcpy(full + b * Nk, kp + (c->key_padding.shape[0] == 1 ? 0 : b * Nk),
                   Nk * sizeof(float));
        free(kp);
        kp = full;
        rm.key_padding_mask = kp;
        rm.key_padding_bool = c->key_padding.kind == CLATTN_MASK_BOOL;
    }

    clattn_status status = clattn_sdpa(ctx, tq, tk, tv, to, &params);
    if (status != CLATTN_OK)
        print_error("clattn_sdpa: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *got = test_tensor_to_host(to);
    float *want = malloc(no * sizeof(float)), *want_w = malloc(nw * sizeof(float));
    float scale = c->scale != 0.0f ? c->scale : (float)(1.0 / sqrt((double)c->dk));
    ref_sdpa(q, k, v, B, H, Nq, Nk, c->dk, c->dv, scale, &rm, want, want_w);
    assert_close(got, want, no, tol);
    for (size_t i = 0; i < no; i++)
        assert_false(isnan(got[i]));
    if (tw) {
        float *got_w = test_tensor_to_host(tw);
        assert_close(got_w, want_w, nw, tol);
        free(got_w);
    }
    free(got), free(want), free(want_w), free(q), free(k), free(v), free(am), free(am_full);
    free(kp);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
    clattn_tensor_destroy(&to), clattn_tensor_destroy(&tw), clattn_tensor_destroy(&tam);
    clattn_tensor_destroy(&tkp);
}

/* Every case on both paths: unfused (with the weights when asked) and fused (without). */
static void run_case(clattn_context *ctx, const sdpa_case *c, uint64_t seed)
{
    sdpa_case unfused = *c, fused = *c;
    unfused.path = CLATTN_PATH_UNFUSED;
    run_case_on(ctx, &unfused, seed);
    fused.path = CLATTN_PATH_FUSED;
    fused.weights = 0;
    run_case_on(ctx, &fused, seed);
}

static void matches_reference_over_a_grid_of_shapes(void **state)
{
    test_fixture *f = *state;
    static const size_t seqs[][2] = {{1, 7}, {7, 1}, {7, 7}, {64, 129}, {129, 64}};
    static const size_t widths[][2] = {{8, 5}, {3, 16}};
    size_t nseq = test_small_mode() ? 3 : 5;
    uint64_t seed = 100;
    for (size_t B = 1; B <= 3; B += 2)
        for (size_t H = 1; H <= 2; H++)
            for (size_t s = 0; s < nseq; s++)
                for (size_t w = 0; w < 2; w++) {
                    sdpa_case c = shape_case(B, H, seqs[s][0], seqs[s][1], widths[w][0], widths[w][1]);
                    c.weights = (int)((s + w) % 2);
                    run_case(f->ctx, &c, seed += 10);
                }
}

static void every_attention_mask_form(void **state)
{
    test_fixture *f = *state;
    size_t B = 2, H = 3, Nq = 5, Nk = 7;
    const mask_spec masks[] = {
        {2, {Nq, Nk}, CLATTN_MASK_BOOL},
        {2, {Nq, Nk}, CLATTN_MASK_ADDITIVE},
        {2, {1, Nk}, CLATTN_MASK_BOOL},
        {3, {H, Nq, Nk}, CLATTN_MASK_BOOL},
        {3, {H, Nq, Nk}, CLATTN_MASK_ADDITIVE},
        {3, {1, Nq, 1}, CLATTN_MASK_ADDITIVE},
        {4, {B, H, Nq, Nk}, CLATTN_MASK_BOOL},
        {4, {B, H, Nq, Nk}, CLATTN_MASK_ADDITIVE},
        {4, {1, 1, Nq, Nk}, CLATTN_MASK_ADDITIVE},
        {4, {B, 1, Nq, Nk}, CLATTN_MASK_BOOL},
    };
    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
        sdpa_case c = shape_case(B, H, Nq, Nk, 4, 6);
        c.attn = masks[i];
        c.weights = 1;
        run_case(f->ctx, &c, 300 + i);
    }
}

static void key_padding_masks(void **state)
{
    test_fixture *f = *state;
    size_t B = 3, H = 2, Nq = 4, Nk = 9;
    const mask_spec masks[] = {
        {2, {B, Nk}, CLATTN_MASK_BOOL},
        {2, {B, Nk}, CLATTN_MASK_ADDITIVE},
        {2, {1, Nk}, CLATTN_MASK_BOOL},
    };
    for (size_t i = 0; i < 3; i++) {
        sdpa_case c = shape_case(B, H, Nq, Nk, 5, 3);
        c.key_padding = masks[i];
        c.weights = 1;
        run_case(f->ctx, &c, 400 + i);
    }
}

static void causal_top_left_also_when_nq_differs_from_nk(void **state)
{
    test_fixture *f = *state;
    const size_t shapes[][2] = {{6, 6}, {4, 9}, {9, 4}, {1, 5}};
    for (size_t i = 0; i < 4; i++) {
        sdpa_case c = shape_case(2, 2, shapes[i][0], shapes[i][1], 4, 4);
        c.causal = 1;
        c.weights = 1;
        run_case(f->ctx, &c, 500 + i);
    }
}

/* Causal attention with 16 queries or more: on CPUs the micro-tiled kernel (16 queries per
 * work-item, keys in tiles of 16) masks a tile element by element only where some query of the
 * work-item must not see some key of the tile; from the second work-item on, that depends on its
 * first query, not its last. Nk = Nq and Nk > Nq (the keys past Nq all masked). */
static void causal_over_many_queries(void **state)
{
    test_fixture *f = *state;
    const size_t shapes[][2] = {{16, 16}, {17, 17}, {33, 33}, {16, 40}, {33, 50}, {130, 130},
                                {130, 147}};
    size_t count = test_small_mode() ? 4 : sizeof(shapes) / sizeof(shapes[0]);
    for (size_t i = 0; i < count; i++) {
        sdpa_case c = shape_case(1, 2, shapes[i][0], shapes[i][1], 8, 5);
        c.causal = 1;
        run_case(f->ctx, &c, 520 + i);
    }
}

static void combined_masks(void **state)
{
    test_fixture *f = *state;
    sdpa_case c = shape_case(2, 2, 6, 8, 4, 5);
    c.attn = (mask_spec){2, {6, 8}, CLATTN_MASK_ADDITIVE};
    c.key_padding = (mask_spec){2, {2, 8}, CLATTN_MASK_BOOL};
    c.causal = 1;
    c.weights = 1;
    run_case(f->ctx, &c, 600);
    c.attn.kind = CLATTN_MASK_BOOL;
    c.key_padding.kind = CLATTN_MASK_ADDITIVE;
    run_case(f->ctx, &c, 601);
}

static void fully_masked_rows_give_zeros_not_nan(void **state)
{
    test_fixture *f = *state;
    /* Query row 0 has every key masked by attn_mask; batch 0 has every key padded. */
    sdpa_case c = shape_case(2, 2, 5, 6, 4, 3);
    c.attn = (mask_spec){2, {5, 6}, CLATTN_MASK_BOOL};
    c.fully_masked_rows = 1;
    c.weights = 1;
    run_case(f->ctx, &c, 700);
    sdpa_case d = shape_case(2, 2, 5, 6, 4, 3);
    d.key_padding = (mask_spec){2, {2, 6}, CLATTN_MASK_BOOL};
    d.fully_masked_rows = 1;
    d.weights = 1;
    run_case(f->ctx, &d, 701);
    d.key_padding.kind = CLATTN_MASK_ADDITIVE; /* -inf added everywhere */
    run_case(f->ctx, &d, 702);
}

static void custom_scale(void **state)
{
    test_fixture *f = *state;
    sdpa_case c = shape_case(1, 2, 5, 5, 8, 8);
    c.scale = 0.5f;
    c.weights = 1;
    run_case(f->ctx, &c, 800);
    c.scale = -0.25f;
    run_case(f->ctx, &c, 801);
}

static void chunked_path_matches_unchunked(void **state)
{
    (void)state;
    /* A workspace limit of 3 pairs' scores forces chunks that straddle batches (H = 2). */
    size_t Nq = 7, Nk = 9;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.log_level = CLATTN_LOG_NONE;
    params.workspace_limit_bytes = 3 * Nq * Nk * sizeof(float);
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
    sdpa_case c = shape_case(3, 2, Nq, Nk, 4, 5);
    c.key_padding = (mask_spec){2, {3, Nk}, CLATTN_MASK_BOOL};
    c.causal = 1;
    run_case(ctx, &c, 900);
    c.weights = 1; /* weights output: scores go straight into it */
    run_case(ctx, &c, 901);
    /* The fused path needs no score workspace at all: a limit below one pair still runs. */
    clattn_context_destroy(&ctx);
    params.workspace_limit_bytes = 16;
    assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
    c.weights = 0;
    c.path = CLATTN_PATH_FUSED;
    run_case_on(ctx, &c, 902);
    clattn_context_destroy(&ctx);
}

static void a_single_pair_beyond_the_workspace_limit_fails(void **state)
{
    (void)state;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.log_level = CLATTN_LOG_NONE;
    params.workspace_limit_bytes = 100;
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
    clattn_tensor *q = test_tensor_from(ctx, 4, (size_t[]){1, 1, 8, 4}, NULL);
    clattn_tensor *o = test_tensor_from(ctx, 4, (size_t[]){1, 1, 8, 4}, NULL);
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.path = CLATTN_PATH_UNFUSED;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_TOO_LARGE,
                      "exceed the workspace limit of 100 bytes");
    clattn_tensor_destroy(&q), clattn_tensor_destroy(&o);
    clattn_context_destroy(&ctx);
}

/* qkv: [B, N, 3, H, d] like timm's packed projection; out: [B, N, H·d] concatenated. */
static void check_strided_views(clattn_context *ctx, size_t N, clattn_attention_path path,
                                uint64_t seed)
{
    size_t B = 2, H = 3, d = 4, row = 3 * H * d;
    size_t total = B * N * row;
    float *qkv = malloc(total * sizeof(float));
    test_fill_uniform(qkv, total, seed, -1, 1);
    clattn_tensor *packed = test_tensor_from(ctx, 1, &total, qkv);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){B, N, H * d}, NULL);
    size_t shape[4] = {B, H, N, d}, strides[4] = {N * row, d, row, 1};
    size_t out_strides[4] = {N * H * d, d, H * d, 1};
    clattn_tensor *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    assert_int_equal(clattn_tensor_view(&q, packed, 0, 4, shape, strides), CLATTN_OK);
    assert_int_equal(clattn_tensor_view(&k, packed, H * d, 4, shape, strides), CLATTN_OK);
    assert_int_equal(clattn_tensor_view(&v, packed, 2 * H * d, 4, shape, strides), CLATTN_OK);
    assert_int_equal(clattn_tensor_view(&o, out, 0, 4, shape, out_strides), CLATTN_OK);
    clattn_sdpa_params params;
    clattn_sdpa_params_default(&params);
    params.path = path;
    assert_int_equal(clattn_sdpa(ctx, q, k, v, o, &params), CLATTN_OK);
    float *got = test_tensor_to_host(out);

    /* Reference on contiguous copies. */
    float *qh = malloc(B * H * N * d * sizeof(float)), *kh = malloc(B * H * N * d * sizeof(float));
    float *vh = malloc(B * H * N * d * sizeof(float)), *oh = malloc(B * H * N * d * sizeof(float));
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t n = 0; n < N; n++)
                for (size_t c = 0; c < d; c++) {
                    size_t src = b * N * row + n * row + h * d + c;
                    size_t dst = ((b * H + h) * N + n) * d + c;
                    qh[dst] = qkv[src], kh[dst] = qkv[src + H * d], vh[dst] = qkv[src + 2 * H * d];
                }
    ref_sdpa(qh, kh, vh, B, H, N, N, d, d, 0.5f, NULL, oh, NULL);
    float *want = malloc(B * N * H * d * sizeof(float));
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t n = 0; n < N; n++)
                memcpy(want + (b * N + n) * H * d + h * d, oh + ((b * H + h) * N + n) * d,
                       d * sizeof(float));
    assert_close(got, want, B * N * H * d, TOL);
    free(got), free(want), free(qkv), free(qh), free(kh), free(vh), free(oh);
    clattn_tensor_destroy(&q), clattn_tensor_destroy(&k), clattn_tensor_destroy(&v);
    clattn_tensor_destroy(&o), clattn_tensor_destroy(&packed), clattn_tensor_destroy(&out);
}

static void strided_views_into_packed_projections(void **state)
{
    test_fixture *f = *state;
    check_strided_views(f->ctx, 5, CLATTN_PATH_FUSED, 1000);
    check_strided_views(f->ctx, 5, CLATTN_PATH_UNFUSED, 1001);
    /* Past 256 keys the fused kernel (without staging) first packs keys and values per head. */
    setenv("CLATTN_TUNE", "fused_local=0", 1);
    clattn_context *ctx = test_context_create(NULL);
    unsetenv("CLATTN_TUNE");
    check_strided_views(ctx, 260, CLATTN_PATH_FUSED, 1002);
    check_strided_views(ctx, 300, CLATTN_PATH_UNFUSED, 1003);
    clattn_context_destroy(&ctx);
}

/* The fused kernel's other variants: staged through __local memory (the GPU default), and other
 * queries per work-item and block sizes, chosen with CLATTN_TUNE. */
static void fused_variants_chosen_by_clattn_tune(void **state)
{
    (void)state;
    static const char *const tunes[] = {
        "fused_local=1,fused_tk=8,fused_wg=16",
        "fused_local=1,fused_tk=3,fused_wg=4",
        "fused_local=0,fused_qpw=1,fused_tk=1,fused_wg=1",
        "fused_local=0,fused_qpw=3,fused_tk=5,fused_wg=2",
    };
    for (size_t t = 0; t < sizeof(tunes) / sizeof(tunes[0]); t++) {
        setenv("CLATTN_TUNE", tunes[t], 1);
        clattn_context *ctx = test_context_create(NULL);
        unsetenv("CLATTN_TUNE");
        assert_non_null(ctx);
        sdpa_case c = shape_case(2, 3, 7, 9, 5, 4);
        c.path = CLATTN_PATH_FUSED;
        run_case_on(ctx, &c, 1100 + t);
        c.causal = 1;
        c.key_padding = (mask_spec){2, {2, 9}, CLATTN_MASK_BOOL};
        run_case_on(ctx, &c, 1110 + t);
        /* Masks without causal: a key block past the last key must not read the masks. */
        c.causal = 0;
        c.attn = (mask_spec){2, {7, 9}, CLATTN_MASK_ADDITIVE};
        run_case_on(ctx, &c, 1140 + t);
        c.attn = (mask_spec){2, {7, 9}, CLATTN_MASK_BOOL};
        c.fully_masked_rows = 1;
        run_case_on(ctx, &c, 1120 + t);
        sdpa_case d = shape_case(1, 2, 33, 1, 3, 16); /* one key; Nq not a multiple of anything */
        d.path = CLATTN_PATH_FUSED;
        run_case_on(ctx, &d, 1130 + t);
        clattn_context_destroy(&ctx);
    }
}

static void a_bad_clattn_tune_is_ignored_with_a_warning(void **state)
{
    (void)state;
    setenv("CLATTN_TUNE", "fused_qpw=0,bogus=3,fused_wg=12,fused_tk=4", 1);
    test_log log;
    clattn_context *ctx = test_context_create(&log);
    unsetenv("CLATTN_TUNE");
    assert_non_null(ctx);
    assert_true(log.count >= 3);
    assert_non_null(strstr(log.last, "CLATTN_TUNE: ignoring"));
    sdpa_case c = shape_case(1, 2, 5, 6, 4, 4);
    run_case(ctx, &c, 1200); /* fused_tk=4 applied, the rest kept at the defaults */
    clattn_context_destroy(&ctx);
}

/* Logits of 100 and more: the softmax must subtract the row maximum (exp(100) overflows float,
 * exp(-200) underflows), in the fused kernel's online softmax (both variants: global and staged
 * through __local memory) and in the unfused row softmax (with the weights). Compared with the
 * double-precision reference; the tolerance allows for float32 scores of magnitude ~500. */
static void large_logits_cases(clattn_context *ctx, clattn_attention_path path, uint64_t seed)
{
    const double tol = 2e-3;
    /* Large scale: unit inputs, scale 40 (scores up to ~±300). Nk = 37 (19 under oclgrind) spans
     * several key blocks, so the running maximum grows from block to block. */
    size_t nq = test_small_mode() ? 5 : 9, nk = test_small_mode() ? 19 : 37;
    sdpa_case c = shape_case(2, 2, nq, nk, 16, 5);
    c.path = path;
    c.weights = path == CLATTN_PATH_UNFUSED;
    c.tol = tol;
    c.scale = 40.0f;
    run_case_on(ctx, &c, seed);
    c.scale = -40.0f; /* very negative rows too */
    run_case_on(ctx, &c, seed + 1);
    /* Large inputs at the default scale (scores up to ~±150), causal. */
    c.scale = 0.0f;
    c.qk_range = 12.0f;
    c.causal = 1;
    run_case_on(ctx, &c, seed + 2);
    /* Fully masked rows (first query row of the bool mask; batch 0 padded away entirely) and
     * partly masked rows, with large logits in the rest. */
    c.causal = 0;
    c.attn = (mask_spec){2, {nq, nk}, CLATTN_MASK_BOOL};
    c.fully_masked_rows = 1;
    run_case_on(ctx, &c, seed + 3);
    c.attn = (mask_spec){0, {0}, CLATTN_MASK_BOOL};
    c.key_padding = (mask_spec){2, {2, nk}, CLATTN_MASK_BOOL};
    run_case_on(ctx, &c, seed + 4);
    /* Additive masks that shift whole rows to about -1000 and +500: every logit is far from 0,
     * and only the shift-invariance of a max-subtracted softmax gives the right answer. */
    c.fully_masked_rows = 0;
    c.key_padding = (mask_spec){2, {2, nk}, CLATTN_MASK_BOOL}; /* partly masked */
    c.attn = (mask_spec){2, {nq, nk}, CLATTN_MASK_ADDITIVE};
    c.qk_range = 1.0f;
    c.mask_offset = -1000.0f;
    run_case_on(ctx, &c, seed + 5);
    c.mask_offset = 500.0f;
    run_case_on(ctx, &c, seed + 6);
}

/* CLATTN_TUNE as this test entry set it (e.g. split_keys=1 in "sdpa-split-keys", fused_untiled=1
 * in "sdpa-untiled"), saved by main before any test changes it. */
static char suite_tune[256];

/* A context with the entry's CLATTN_TUNE followed by `tune` (which wins where both set a key). */
static clattn_context *context_with_tune(const char *tune)
{
    char both[512];
    snprintf(both, sizeof(both), "%s%s%s", suite_tune, suite_tune[0] ? "," : "", tune);
    setenv("CLATTN_TUNE", both, 1);
    clattn_context *ctx = test_context_create(NULL);
    unsetenv("CLATTN_TUNE");
    return ctx;
}

static clattn_context *context_with_fused_local(int local)
{
    clattn_context *ctx =
        context_with_tune(local ? "fused_local=1,fused_tk=8,fused_wg=16" : "fused_local=0");
    assert_non_null(ctx);
    clattn_tuning t;
    assert_int_equal(clattn_context_get_tuning(ctx, &t), CLATTN_OK);
    assert_int_equal(t.fused_local, local);
    return ctx;
}

static void large_logits_fused_global_variant(void **state)
{
    (void)state;
    clattn_context *ctx = context_with_fused_local(0);
    large_logits_cases(ctx, CLATTN_PATH_FUSED, 1300);
    clattn_context_destroy(&ctx);
}

static void large_logits_fused_local_variant(void **state)
{
    (void)state;
    clattn_context *ctx = context_with_fused_local(1);
    large_logits_cases(ctx, CLATTN_PATH_FUSED, 1400);
    clattn_context_destroy(&ctx);
}

static void large_logits_unfused_with_weights(void **state)
{
    test_fixture *f = *state;
    large_logits_cases(f->ctx, CLATTN_PATH_UNFUSED, 1500);
}

/* Split-key attention (flash-decoding) with logits of 40 to 100 that grow with the key index, so
 * that each split has its own maximum: the combine step must weight split s by
 * exp(m_s - max_s m_s) (exp(100) overflows a float). Split keys forced on every test entry. */
static void split_keys_combine_large_logits(void **state)
{
    (void)state;
    clattn_context *ctx = context_with_tune("split_keys=1");
    assert_non_null(ctx);
    const size_t shapes[][2] = {{1, 150}, {3, 150}, {2, 37}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        size_t nq = shapes[i][0], nk = shapes[i][1];
        sdpa_case c = shape_case(1, 2, nq, nk, 8, 5);
        c.path = CLATTN_PATH_FUSED;
        c.attn = (mask_spec){2, {nq, nk}, CLATTN_MASK_ADDITIVE};
        c.mask_offset = 40.0f;
        c.mask_ramp = 60.0f;
        c.tol = 1e-4; /* float logits near 100: ulp 7.6e-6 */
        run_case_on(ctx, &c, 1600 + i);
        c.mask_offset = -100.0f; /* and far below 0 */
        run_case_on(ctx, &c, 1610 + i);
    }
    clattn_context_destroy(&ctx);
}

static void invalid_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *q = test_tensor_from(ctx, 4, (size_t[]){2, 3, 5, 4}, NULL);
    clattn_tensor *k = test_tensor_from(ctx, 4, (size_t[]){2, 3, 7, 4}, NULL);
    clattn_tensor *v = test_tensor_from(ctx, 4, (size_t[]){2, 3, 7, 6}, NULL);
    clattn_tensor *o = test_tensor_from(ctx, 4, (size_t[]){2, 3, 5, 6}, NULL);
    clattn_tensor *flat = test_tensor_from(ctx, 3, (size_t[]){2, 5, 4}, NULL);
    clattn_tensor *bad_k = test_tensor_from(ctx, 4, (size_t[]){2, 3, 7, 5}, NULL);
    clattn_tensor *bad_v = test_tensor_from(ctx, 4, (size_t[]){2, 3, 6, 6}, NULL);
    clattn_tensor *bad_o = test_tensor_from(ctx, 4, (size_t[]){2, 3, 5, 5}, NULL);
    clattn_tensor *mask = test_tensor_from(ctx, 2, (size_t[]){5, 6}, NULL);
    clattn_tensor *kpm = test_tensor_from(ctx, 2, (size_t[]){3, 7}, NULL);
    clattn_tensor *w = test_tensor_from(ctx, 4, (size_t[]){2, 3, 5, 6}, NULL);
    clattn_tensor *strided = NULL;
    assert_int_equal(clattn_tensor_view(&strided, k, 0, 4, (size_t[]){2, 3, 7, 2},
                                        (size_t[]){84, 28, 4, 2}),
                     CLATTN_OK);
    clattn_sdpa_params p;
#define RESET() clattn_sdpa_params_default(&p)

    RESET();
    assert_status_msg(NULL, clattn_sdpa(NULL, q, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(ctx, clattn_sdpa(ctx, NULL, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "q is NULL");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, NULL, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "k is NULL");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, NULL, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "v is NULL");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, NULL, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "out is NULL");
    assert_status_msg(ctx, clattn_sdpa(ctx, flat, k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "q has shape [2, 5, 4] but must be 4-D");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, bad_k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "k has shape [2, 3, 7, 5] but must be [B, H, Nk, d_k] = [2, 3, 7, 4]");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, bad_v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "v has shape [2, 3, 6, 6]");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, bad_o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "out has shape [2, 3, 5, 5]");
    assert_status_msg(ctx, clattn_sdpa(ctx, q, strided, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "last dimension of k must be contiguous");
    p.attn_mask = mask;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "attn_mask has shape [5, 6] but must be [5, 7]");
    /* A 3-D mask is [H, Nq, Nk], right-aligned as torch broadcasts: [B, Nq, Nk] (B 2 != H 3) is
     * refused instead of being read per batch. */
    clattn_tensor *batch_mask = NULL;
    assert_int_equal(clattn_tensor_create(ctx, &batch_mask, 3, (size_t[]){2, 5, 7}), CLATTN_OK);
    p.attn_mask = batch_mask;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "attn_mask has shape [2, 5, 7] but must be [3, 5, 7] (forms [Nq, Nk], "
                      "[H, Nq, Nk] or [B, H, Nq, Nk]");
    clattn_tensor_destroy(&batch_mask);
    RESET();
    p.attn_mask = w;
    p.attn_mask_kind = (clattn_mask_kind)7;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "attn_mask kind is 7");
    RESET();
    p.key_padding_mask = kpm;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "key_padding_mask has shape [3, 7] but must be [B, Nk] = [2, 7]");
    RESET();
    p.attn_weights = w;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "attn_weights has shape [2, 3, 5, 6] but must be [B, H, Nq, Nk]");
    RESET();
    p.attn_weights = o; /* right size class but wrong shape is covered above; fused + weights: */
    p.path = CLATTN_PATH_FUSED;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_UNSUPPORTED,
                      "fused path cannot return attention weights");
    RESET();
    p.reserved[10] = 1;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    RESET();
    p.scale = NAN;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "scale is not finite");
    RESET();
    p.path = (clattn_attention_path)9;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "path is 9");
    /* A tensor of another context. */
    clattn_context *other = test_context_create(NULL);
    clattn_tensor *foreign = test_tensor_from(other, 4, (size_t[]){2, 3, 5, 4}, NULL);
    assert_status_msg(ctx, clattn_sdpa(ctx, foreign, k, v, o, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "q belongs to another context");
    clattn_tensor_destroy(&foreign);
    clattn_context_destroy(&other);
#undef RESET
    clattn_tensor_destroy(&q), clattn_tensor_destroy(&k), clattn_tensor_destroy(&v);
    clattn_tensor_destroy(&o), clattn_tensor_destroy(&flat), clattn_tensor_destroy(&bad_k);
    clattn_tensor_destroy(&bad_v), clattn_tensor_destroy(&bad_o), clattn_tensor_destroy(&mask);
    clattn_tensor_destroy(&kpm), clattn_tensor_destroy(&w), clattn_tensor_destroy(&strided);
}

static void params_default_tolerates_null(void **state)
{
    (void)state;
    clattn_sdpa_params_default(NULL);
    clattn_sdpa_params p;
    memset(&p, 0xff, sizeof(p));
    clattn_sdpa_params_default(&p);
    assert_true(p.scale == 0.0f);
    assert_null(p.attn_mask);
    assert_null(p.attn_weights);
    assert_int_equal(p.path, CLATTN_PATH_AUTO);
    assert_int_equal(p.attn_mask_kind, CLATTN_MASK_BOOL);
}

/* Grouped-query and multi-query attention (enable_gqa): equal to the reference on keys and
 * values whose heads are repeated H / H_kv times (PyTorch's repeat_interleave), on both paths,
 * with a causal mask and key padding. */
static void grouped_query_attention(void **state)
{
    test_fixture *f = *state;
    size_t B = 2, H = 6, Nq = 5, Nk = 9, dk = 4, dv = 6;
    const size_t kv_heads[] = {3, 2, 1};
    for (size_t g = 0; g < 3; g++)
        for (int path = 0; path < 2; path++) {
            size_t Hkv = kv_heads[g], group = H / Hkv;
            float *q = malloc(B * H * Nq * dk * sizeof(float));
            float *k = malloc(B * Hkv * Nk * dk * sizeof(float));
            float *v = malloc(B * Hkv * Nk * dv * sizeof(float));
            float *k_rep = malloc(B * H * Nk * dk * sizeof(float));
            float *v_rep = malloc(B * H * Nk * dv * sizeof(float));
            float *want = malloc(B * H * Nq * dv * sizeof(float));
            test_fill_uniform(q, B * H * Nq * dk, 900 + g, -1, 1);
            test_fill_uniform(k, B * Hkv * Nk * dk, 910 + g, -1, 1);
            test_fill_uniform(v, B * Hkv * Nk * dv, 920 + g, -1, 1);
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H; h++) {
                    size_t hk = h / group;
                    memcpy(k_rep + (b * H + h) * Nk * dk, k + (b * Hkv + hk) * Nk * dk,
                           Nk * dk * sizeof(float));
                    memcpy(v_rep + (b * H + h) * Nk * dv, v + (b * Hkv + hk) * Nk * dv,
                           Nk * dv * sizeof(float));
                }
            float kp[2 * 9] = {0};
            kp[8] = kp[9 + 7] = kp[9 + 8] = 1.0f; /* padded keys */
            ref_masks rm = {0};
            rm.causal = true;
            rm.key_padding_mask = kp;
            rm.key_padding_bool = true;
            ref_sdpa(q, k_rep, v_rep, B, H, Nq, Nk, dk, dv, 1.0f / sqrtf((float)dk), &rm, want,
                     NULL);
            clattn_tensor *tq = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nq, dk}, q);
            clattn_tensor *tk = test_tensor_from(f->ctx, 4, (size_t[]){B, Hkv, Nk, dk}, k);
            clattn_tensor *tv = test_tensor_from(f->ctx, 4, (size_t[]){B, Hkv, Nk, dv}, v);
            clattn_tensor *tkp = test_tensor_from(f->ctx, 2, (size_t[]){B, Nk}, kp);
            clattn_tensor *to = test_tensor_from(f->ctx, 4, (size_t[]){B, H, Nq, dv}, NULL);
            clattn_sdpa_params p;
            clattn_sdpa_params_default(&p);
            p.enable_gqa = 1;
            p.causal = 1;
            p.key_padding_mask = tkp;
            p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
            assert_int_equal(clattn_sdpa(f->ctx, tq, tk, tv, to, &p), CLATTN_OK);
            float *got = test_tensor_to_host(to);
            assert_close(got, want, B * H * Nq * dv, TOL);
            free(got);
            /* Without enable_gqa fewer key heads are a shape error; with it, a non-divisor. */
            if (Hkv > 1) {
                p.enable_gqa = 0;
                assert_status_msg(f->ctx, clattn_sdpa(f->ctx, tq, tk, tv, to, &p),
                                  CLATTN_ERROR_SHAPE_MISMATCH, "but must be [B, H, Nk, d_k]");
            }
            clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
            clattn_tensor_destroy(&tkp), clattn_tensor_destroy(&to);
            free(q), free(k), free(v), free(k_rep), free(v_rep), free(want);
        }
    clattn_tensor *tq = test_tensor_from(f->ctx, 4, (size_t[]){1, 6, 2, 4}, NULL);
    clattn_tensor *tk = test_tensor_from(f->ctx, 4, (size_t[]){1, 4, 3, 4}, NULL);
    clattn_tensor *to = test_tensor_from(f->ctx, 4, (size_t[]){1, 6, 2, 4}, NULL);
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.enable_gqa = 1;
    assert_status_msg(f->ctx, clattn_sdpa(f->ctx, tq, tk, tk, to, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "k has 4 heads, which do not divide q's 6");
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&to);
}

int main(void)
{
    const char *filter = getenv("CLATTN_TEST_FILTER"); /* e.g. "large_logits*" */
    const char *tune = getenv("CLATTN_TUNE");
    snprintf(suite_tune, sizeof(suite_tune), "%s", tune ? tune : "");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_reference_over_a_grid_of_shapes),
        cmocka_unit_test(every_attention_mask_form),
        cmocka_unit_test(key_padding_masks),
        cmocka_unit_test(causal_top_left_also_when_nq_differs_from_nk),
        cmocka_unit_test(causal_over_many_queries),
        cmocka_unit_test(combined_masks),
        cmocka_unit_test(fully_masked_rows_give_zeros_not_nan),
        cmocka_unit_test(custom_scale),
        cmocka_unit_test(chunked_path_matches_unchunked),
        cmocka_unit_test(a_single_pair_beyond_the_workspace_limit_fails),
        cmocka_unit_test(strided_views_into_packed_projections),
        cmocka_unit_test(fused_variants_chosen_by_clattn_tune),
        cmocka_unit_test(a_bad_clattn_tune_is_ignored_with_a_warning),
        cmocka_unit_test(large_logits_fused_global_variant),
        cmocka_unit_test(large_logits_fused_local_variant),
        cmocka_unit_test(large_logits_unfused_with_weights),
        cmocka_unit_test(split_keys_combine_large_logits),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(grouped_query_attention),
        cmocka_unit_test(params_default_tolerates_null),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
