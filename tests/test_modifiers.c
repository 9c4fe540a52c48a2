/*
 * The attention score modifiers of clattn_sdpa (ALiBi, relative position buckets, sliding window,
 * soft-capping; include/clattn/attention.h) and its rotary embeddings (RoPE) against the float64
 * PyTorch reference of tools/gen_modifier_golden.py (tests/golden/modifiers): each case on the
 * unfused path (output and attention weights) and on every fused variant — the default
 * (micro-tiled on CPUs), the plain unstaged kernel, split-key attention and the __local-staged
 * kernel, forced through CLATTN_TUNE — then ALiBi's slopes against BLOOM's, batch invariance, the
 * attention layer (against its own float64 reference, and against SDPA), grouped-query attention
 * and invalid arguments.
 * Tolerance: the case's (1e-5 absolute against float64, as the SDPA goldens). Small-shape mode
 * (oclgrind): the N = 300 cases, the AUTO path and most tunings are left out.
 */
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR GOLDEN_DIR "/modifiers"

static const char *const cases[] = {
    "alibi", "alibi_causal", "alibi_masks", "relative", "relative_small_buckets",
    "relative_masks_causal", "window", "window_causal", "window_padding", "softcap",
    "softcap_additive", "combined", "combined_causal", "rope_half", "rope_interleaved_partial",
    "rope_half_partial_causal", "rope_combined", "window_long", "window_long_causal",
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))
#define N_SMALL_CASES (N_CASES - 2) /* without the N = 300 ones */

/* Tunings that select each fused variant (appended to the suite's own CLATTN_TUNE). */
static const char *const variant_tunes[] = {
    "fused_untiled=1",                            /* the plain unstaged kernel, 8 queries each */
    "fused_untiled=1,fused_qpw=3,fused_tk=5",     /* the same, 3 queries and 4 keys per step */
    "split_keys=1",                               /* split-key attention + combine */
    "fused_local=1,fused_tk=4,fused_wg=16",       /* staged through __local memory */
    "fused_local=1,fused_tk=3,fused_wg=4,split_keys=1",
};
#define N_TUNES (sizeof(variant_tunes) / sizeof(variant_tunes[0]))

static char suite_tune[256];

typedef struct golden {
    json_t *meta;
    clattn_npy_array *q, *k, *v, *out, *weights, *slopes, *table, *am, *kpm;
} golden;

static clattn_npy_array *load(const char *name, const char *file, bool optional)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s/%s", DIR, name, file);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (!optional) {
            print_error("missing %s\n", path);
            fail();
        }
        return NULL;
    }
    fclose(fp);
    clattn_npy_array *a = NULL;
    if (clattn_npy_read_f32(&a, path) != CLATTN_OK) {
        print_error("%s: %s\n", path, clattn_last_error(NULL));
        fail();
    }
    return a;
}

static golden golden_load(const char *name)
{
    golden g;
    memset(&g, 0, sizeof(g));
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s/meta.json", DIR, name);
    json_error_t err;
    g.meta = json_load_file(path, 0, &err);
    if (!g.meta) {
        print_error("%s: %s\n", path, err.text);
        fail();
    }
    g.q = load(name, "q.npy", false);
    g.k = load(name, "k.npy", false);
    g.v = load(name, "v.npy", false);
    g.out = load(name, "out.npy", false);
    g.weights = load(name, "weights.npy", true);
    g.slopes = load(name, "alibi_slopes.npy", true);
    g.table = load(name, "relative_bias.npy", true);
    g.am = load(name, "attn_mask.npy", true);
    g.kpm = load(name, "key_padding_mask.npy", true);
    return g;
}

static void golden_free(golden *g)
{
    clattn_npy_array **arrays[] = {&g->q, &g->k, &g->v, &g->out, &g->weights,
                                   &g->slopes, &g->table, &g->am, &g->kpm};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        clattn_npy_array_destroy(arrays[i]);
    json_decref(g->meta);
}

static const char *meta_string(json_t *meta, const char *key)
{
    json_t *v = json_object_get(meta, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static clattn_tensor *device_of(clattn_context *ctx, const clattn_npy_array *a)
{
    return a ? test_tensor_from(ctx, a->ndim, a->shape, a->f32) : NULL;
}

/* Runs case g on `path` (with the attention weights on the unfused path when the case has them)
 * and compares with the reference. */
static void run_golden(clattn_context *ctx, const char *name, const golden *g,
                       clattn_attention_path path)
{
    clattn_tensor *q = device_of(ctx, g->q), *k = device_of(ctx, g->k), *v = device_of(ctx, g->v);
    clattn_tensor *out = test_tensor_from(ctx, 4, g->out->shape, NULL);
    clattn_tensor *slopes = device_of(ctx, g->slopes), *table = device_of(ctx, g->table);
    clattn_tensor *am = device_of(ctx, g->am), *kpm = device_of(ctx, g->kpm);
    bool want_weights = path == CLATTN_PATH_UNFUSED && g->weights;
    clattn_tensor *w = want_weights ? test_tensor_from(ctx, 4, g->weights->shape, NULL) : NULL;

    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    p.path = path;
    p.causal = json_is_true(json_object_get(g->meta, "causal"));
    p.window = (size_t)json_integer_value(json_object_get(g->meta, "window"));
    p.softcap = (float)json_number_value(json_object_get(g->meta, "softcap"));
    p.relative_max_distance =
        (size_t)json_integer_value(json_object_get(g->meta, "relative_max_distance"));
    p.alibi_slopes = slopes;
    p.relative_bias = table;
    p.attn_mask = am;
    const char *am_kind = meta_string(g->meta, "attn_mask");
    p.attn_mask_kind = am_kind && strcmp(am_kind, "additive") == 0 ? CLATTN_MASK_ADDITIVE
                                                                    : CLATTN_MASK_BOOL;
    p.key_padding_mask = kpm;
    p.attn_weights = w;
    clattn_rope_params rope;
    json_t *r = json_object_get(g->meta, "rope");
    if (json_is_object(r)) {
        clattn_rope_params_default(&rope);
        const char *layout = meta_string(r, "layout");
        assert_non_null(layout);
        rope.layout = strcmp(layout, "interleaved") == 0 ? CLATTN_ROPE_INTERLEAVED
                                                         : CLATTN_ROPE_HALF;
        rope.theta = (float)json_number_value(json_object_get(r, "theta"));
        rope.rotary_dim = (size_t)json_integer_value(json_object_get(r, "rotary_dim"));
        rope.query_offset = (size_t)json_integer_value(json_object_get(r, "query_offset"));
        rope.key_offset = (size_t)json_integer_value(json_object_get(r, "key_offset"));
        p.rope = &rope;
    }
    clattn_status status = clattn_sdpa(ctx, q, k, v, out, &p);
    if (status != CLATTN_OK)
        print_error("%s: %s\n", name, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    double tol = json_number_value(json_object_get(g->meta, "tolerance"));
    assert_true(tol > 0 && tol <= 1e-5);
    float *got = test_tensor_to_host(out);
    size_t n = g->out->numel;
    if (test_max_abs_diff(got, g->out->f32, n) > tol)
        print_error("case %s, path %d: output\n", name, (int)path);
    assert_close(got, g->out->f32, n, tol);
    free(got);
    if (want_weights) {
        float *gw = test_tensor_to_host(w);
        if (test_max_abs_diff(gw, g->weights->f32, g->weights->numel) > tol)
            print_error("case %s: attention weights\n", name);
        assert_close(gw, g->weights->f32, g->weights->numel, tol);
        free(gw);
    }
    clattn_tensor *all[] = {q, k, v, out, slopes, table, am, kpm, w};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        clattn_tensor_destroy(&all[i]);
}

static size_t case_count(void)
{
    return test_small_mode() ? N_SMALL_CASES : N_CASES;
}

/* Each case, fused (the context's default variant) and unfused with the weights. */
static void golden_cases_fused_and_unfused(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    for (size_t c = 0; c < case_count(); c++) {
        golden g = golden_load(cases[c]);
        run_golden(ctx, cases[c], &g, CLATTN_PATH_FUSED);
        run_golden(ctx, cases[c], &g, CLATTN_PATH_UNFUSED);
        if (!test_small_mode()) /* AUTO is the fused path here: once is enough under oclgrind */
            run_golden(ctx, cases[c], &g, CLATTN_PATH_AUTO);
        golden_free(&g);
    }
}

/* Each case on every fused variant. */
static void golden_cases_on_every_fused_variant(void **state)
{
    (void)state;
    size_t tunes = test_small_mode() ? 2 : N_TUNES; /* oclgrind: split keys, then staged */
    for (size_t t = 0; t < tunes; t++) {
        const char *tune = variant_tunes[test_small_mode() ? t + 2 : t];
        char both[512];
        snprintf(both, sizeof(both), "%s%s%s", suite_tune, suite_tune[0] ? "," : "", tune);
        setenv("CLATTN_TUNE", both, 1);
        clattn_context *ctx = test_context_create(NULL);
        unsetenv("CLATTN_TUNE");
        assert_non_null(ctx);
        for (size_t c = 0; c < case_count(); c++) {
            golden g = golden_load(cases[c]);
            run_golden(ctx, cases[c], &g, CLATTN_PATH_FUSED);
            golden_free(&g);
        }
        clattn_context_destroy(&ctx);
    }
}

/* clattn_alibi_slopes against BLOOM's build_alibi_tensor (float32 torch.pow: within 1 ulp). */
static void alibi_slopes_are_blooms(void **state)
{
    (void)state;
    const size_t heads[] = {1, 3, 6, 8, 12};
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        char file[64];
        snprintf(file, sizeof(file), "alibi_slopes_H%zu.npy", heads[i]);
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", DIR, file);
        clattn_npy_array *want = NULL;
        assert_int_equal(clattn_npy_read_f32(&want, path), CLATTN_OK);
        assert_int_equal(want->numel, heads[i]);
        float got[16];
        assert_int_equal(clattn_alibi_slopes(heads[i], got), CLATTN_OK);
        for (size_t h = 0; h < heads[i]; h++)
            assert_true(fabs(got[h] - want->f32[h]) <= 2e-7 * fabs(want->f32[h]));
        clattn_npy_array_destroy(&want);
    }
    float s[1];
    assert_status_msg(NULL, clattn_alibi_slopes(0, s), CLATTN_ERROR_INVALID_ARGUMENT,
                      "num_heads is 0");
    assert_status_msg(NULL, clattn_alibi_slopes(4, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "slopes is NULL");
}

/* A row's bytes do not depend on the batch or its padding with the modifiers either (all of them
 * at once; fused on the context's variant, and unfused). */
static void modified_rows_are_batch_invariant(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const size_t H = 2, d = 8, L = 19, B = 3, N = 40, row = 1;
    float slopes[2], table[16 * 2];
    clattn_alibi_slopes(H, slopes);
    test_fill_uniform(table, 32, 5, -1, 1);
    clattn_tensor *ts = test_tensor_from(ctx, 1, (size_t[]){H}, slopes);
    clattn_tensor *tt = test_tensor_from(ctx, 2, (size_t[]){16, H}, table);
    size_t all = B * H * N * d;
    float *x[3];
    for (int a = 0; a < 3; a++) {
        x[a] = malloc(all * sizeof(float));
        test_fill_uniform(x[a], all, 10 + a, -2, 2);
    }
    float *kpm = calloc(B * N, sizeof(float));
    for (size_t b = 0; b < B; b++)
        for (size_t j = (b == row ? L : N - 5 * b); j < N; j++)
            kpm[b * N + j] = 1.0f;
    for (int path = 0; path < 2; path++) {
        float *outs[2];
        for (int batched = 0; batched < 2; batched++) {
            size_t b_count = batched ? B : 1, n = batched ? N : L;
            float *in[3];
            for (int a = 0; a < 3; a++) { /* alone: the target row's first L positions */
                in[a] = malloc(b_count * H * n * d * sizeof(float));
                for (size_t b = 0; b < b_count; b++)
                    for (size_t h = 0; h < H; h++)
                        memcpy(in[a] + (b * H + h) * n * d,
                               x[a] + ((batched ? b : row) * H + h) * N * d, n * d * sizeof(float));
            }
            size_t shape[4] = {b_count, H, n, d};
            clattn_tensor *q = test_tensor_from(ctx, 4, shape, in[0]);
            clattn_tensor *k = test_tensor_from(ctx, 4, shape, in[1]);
            clattn_tensor *v = test_tensor_from(ctx, 4, shape, in[2]);
            clattn_tensor *o = test_tensor_from(ctx, 4, shape, NULL);
            clattn_tensor *m = batched ? test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm) : NULL;
            clattn_sdpa_params p;
            clattn_sdpa_params_default(&p);
            p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
            p.alibi_slopes = ts;
            p.relative_bias = tt;
            p.relative_max_distance = 20;
            p.window = 8;
            p.softcap = 3.0f;
            clattn_rope_params rope;
            clattn_rope_params_default(&rope);
            rope.rotary_dim = 6;
            p.rope = &rope;
            p.key_padding_mask = m;
            assert_int_equal(clattn_sdpa(ctx, q, k, v, o, &p), CLATTN_OK);
            outs[batched] = test_tensor_to_host(o);
            clattn_tensor_destroy(&q), clattn_tensor_destroy(&k), clattn_tensor_destroy(&v);
            clattn_tensor_destroy(&o), clattn_tensor_destroy(&m);
            for (int a = 0; a < 3; a++)
                free(in[a]);
        }
        for (size_t h = 0; h < H; h++)
            assert_memory_equal(outs[0] + h * L * d, outs[1] + ((row * H + h) * N) * d,
                                L * d * sizeof(float));
        free(outs[0]), free(outs[1]);
    }
    for (int a = 0; a < 3; a++)
        free(x[a]);
    free(kpm);
    clattn_tensor_destroy(&ts), clattn_tensor_destroy(&tt);
}

/* The attention layer against its float64 reference (golden cases mha_*), fused and unfused. */
static void mha_golden_cases(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    static const char *const names[] = {"mha_alibi_relative_softcap", "mha_window_causal"};
    for (size_t c = 0; c < sizeof(names) / sizeof(names[0]); c++) {
        const char *name = names[c];
        char file[1024];
        snprintf(file, sizeof(file), "%s/%s/meta.json", DIR, name);
        json_error_t err;
        json_t *meta = json_load_file(file, 0, &err);
        assert_non_null(meta);
        clattn_npy_array *x = load(name, "x.npy", false), *out = load(name, "out.npy", false);
        clattn_npy_array *w_in = load(name, "in_proj_weight.npy", false);
        clattn_npy_array *b_in = load(name, "in_proj_bias.npy", false);
        clattn_npy_array *w_out = load(name, "out_proj_weight.npy", false);
        clattn_npy_array *b_out = load(name, "out_proj_bias.npy", false);
        clattn_npy_array *slopes = load(name, "alibi_slopes.npy", true);
        clattn_npy_array *table = load(name, "relative_bias.npy", true);
        clattn_npy_array *am = load(name, "attn_mask.npy", true);
        clattn_npy_array *kpm = load(name, "key_padding_mask.npy", true);
        size_t E = x->shape[2], H = (size_t)json_integer_value(json_object_get(meta, "num_heads"));
        clattn_mha_config mc;
        clattn_mha_config_default(&mc, E, H);
        clattn_mha *mha = NULL;
        assert_int_equal(clattn_mha_create(ctx, &mha, &mc), CLATTN_OK);
        clattn_mha_weights mw;
        memset(&mw, 0, sizeof(mw));
        mw.in_proj_weight = (clattn_host_tensor){w_in->f32, 2, {3 * E, E, 0, 0}};
        mw.in_proj_bias = (clattn_host_tensor){b_in->f32, 1, {3 * E, 0, 0, 0}};
        mw.out_proj_weight = (clattn_host_tensor){w_out->f32, 2, {E, E, 0, 0}};
        mw.out_proj_bias = (clattn_host_tensor){b_out->f32, 1, {E, 0, 0, 0}};
        assert_int_equal(clattn_mha_load_weights(mha, &mw), CLATTN_OK);
        clattn_tensor *tx = device_of(ctx, x), *ty = test_tensor_from(ctx, 3, x->shape, NULL);
        clattn_tensor *ts = device_of(ctx, slopes), *tt = device_of(ctx, table);
        clattn_tensor *tam = device_of(ctx, am), *tkpm = device_of(ctx, kpm);
        for (int path = 0; path < 2; path++) {
            clattn_mha_forward_params p;
            clattn_mha_forward_params_default(&p);
            p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
            p.causal = json_is_true(json_object_get(meta, "causal"));
            p.window = (size_t)json_integer_value(json_object_get(meta, "window"));
            p.softcap = (float)json_number_value(json_object_get(meta, "softcap"));
            p.relative_max_distance =
                (size_t)json_integer_value(json_object_get(meta, "relative_max_distance"));
            p.alibi_slopes = ts;
            p.relative_bias = tt;
            p.attn_mask = tam;
            p.attn_mask_kind = CLATTN_MASK_ADDITIVE; /* the layer cases' masks are additive */
            p.key_padding_mask = tkpm;
            clattn_status status = clattn_mha_forward(mha, tx, NULL, NULL, ty, &p);
            if (status != CLATTN_OK)
                print_error("%s: %s\n", name, clattn_last_error(ctx));
            assert_int_equal(status, CLATTN_OK);
            float *got = test_tensor_to_host(ty);
            if (test_max_abs_diff(got, out->f32, out->numel) > 1e-5)
                print_error("case %s, path %d\n", name, (int)p.path);
            assert_close(got, out->f32, out->numel, json_number_value(json_object_get(meta,
                                                                                "tolerance")));
            free(got);
        }
        clattn_tensor *all[] = {tx, ty, ts, tt, tam, tkpm};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
            clattn_tensor_destroy(&all[i]);
        clattn_npy_array **arrays[] = {&x, &out, &w_in, &b_in, &w_out, &b_out, &slopes, &table,
                                       &am, &kpm};
        for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
            clattn_npy_array_destroy(arrays[i]);
        clattn_mha_destroy(&mha);
        json_decref(meta);
    }
}

/* Grouped-query attention with the modifiers and RoPE: the same as plain attention on keys and
 * values whose heads are repeated (PyTorch's enable_gqa), on both paths. */
static void grouped_query_attention_with_modifiers(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const size_t B = 2, H = 4, Hkv = 2, N = 21, d = 8;
    size_t nq = B * H * N * d, nkv = B * Hkv * N * d;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nkv * sizeof(float));
    float *v = malloc(nkv * sizeof(float)), *k_rep = malloc(nq * sizeof(float));
    float *v_rep = malloc(nq * sizeof(float));
    test_fill_uniform(q, nq, 31, -2, 2);
    test_fill_uniform(k, nkv, 32, -2, 2);
    test_fill_uniform(v, nkv, 33, -1, 1);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t from = (b * Hkv + h / (H / Hkv)) * N * d, to = (b * H + h) * N * d;
            memcpy(k_rep + to, k + from, N * d * sizeof(float));
            memcpy(v_rep + to, v + from, N * d * sizeof(float));
        }
    float slopes[4], table[8 * 4];
    clattn_alibi_slopes(H, slopes);
    test_fill_uniform(table, 32, 34, -1, 1);
    clattn_tensor *tq = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, q);
    clattn_tensor *tk = test_tensor_from(ctx, 4, (size_t[]){B, Hkv, N, d}, k);
    clattn_tensor *tv = test_tensor_from(ctx, 4, (size_t[]){B, Hkv, N, d}, v);
    clattn_tensor *tkr = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, k_rep);
    clattn_tensor *tvr = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, v_rep);
    clattn_tensor *to = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, NULL);
    clattn_tensor *ts = test_tensor_from(ctx, 1, (size_t[]){H}, slopes);
    clattn_tensor *tt = test_tensor_from(ctx, 2, (size_t[]){8, H}, table);
    clattn_rope_params rope;
    clattn_rope_params_default(&rope);
    rope.layout = CLATTN_ROPE_INTERLEAVED;
    rope.rotary_dim = 4;
    rope.query_offset = 3;
    for (int path = 0; path < 2; path++) {
        clattn_sdpa_params p;
        clattn_sdpa_params_default(&p);
        p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
        p.alibi_slopes = ts;
        p.relative_bias = tt;
        p.relative_max_distance = 9;
        p.window = 10;
        p.softcap = 3.0f;
        p.rope = &rope;
        assert_int_equal(clattn_sdpa(ctx, tq, tkr, tvr, to, &p), CLATTN_OK);
        float *want = test_tensor_to_host(to);
        p.enable_gqa = 1;
        assert_int_equal(clattn_sdpa(ctx, tq, tk, tv, to, &p), CLATTN_OK);
        float *got = test_tensor_to_host(to);
        assert_close(got, want, nq, 1e-6);
        free(got), free(want);
    }
    clattn_tensor *all[] = {tq, tk, tv, tkr, tvr, to, ts, tt};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        clattn_tensor_destroy(&all[i]);
    free(q), free(k), free(v), free(k_rep), free(v_rep);
}

/* The attention layer takes the same modifiers: with identity projections and no output
 * projection its output is SDPA's on the heads of its input, with the same modifiers (SDPA is
 * checked against PyTorch above). */
static void mha_passes_its_modifiers_to_attention(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const size_t B = 2, N = 21, H = 3, d = 4, E = H * d;
    clattn_mha_config mc;
    clattn_mha_config_default(&mc, E, H);
    mc.in_proj_bias = 0;
    mc.out_proj = 0;
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &mc), CLATTN_OK);
    float *w = calloc(3 * E * E, sizeof(float));
    for (size_t r = 0; r < 3 * E; r++)
        w[r * E + r % E] = 1.0f;
    clattn_mha_weights mw;
    memset(&mw, 0, sizeof(mw));
    mw.in_proj_weight = (clattn_host_tensor){w, 2, {3 * E, E, 0, 0}};
    assert_int_equal(clattn_mha_load_weights(mha, &mw), CLATTN_OK);

    float *x = malloc(B * N * E * sizeof(float)), *heads = malloc(B * N * E * sizeof(float));
    test_fill_uniform(x, B * N * E, 77, -2, 2);
    for (size_t b = 0; b < B; b++) /* [B, N, H, d] → [B, H, N, d] */
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++)
                memcpy(heads + ((b * H + h) * N + n) * d, x + (b * N + n) * E + h * d,
                       d * sizeof(float));
    float slopes[3], table[8 * 3];
    clattn_alibi_slopes(H, slopes);
    test_fill_uniform(table, 8 * 3, 78, -1, 1);
    clattn_tensor *ts = test_tensor_from(ctx, 1, (size_t[]){H}, slopes);
    clattn_tensor *tt = test_tensor_from(ctx, 2, (size_t[]){8, H}, table);
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, x);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    clattn_tensor *th = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, heads);
    clattn_tensor *to = test_tensor_from(ctx, 4, (size_t[]){B, H, N, d}, NULL);
    for (int path = 0; path < 2; path++) {
        clattn_mha_forward_params fp;
        clattn_mha_forward_params_default(&fp);
        fp.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
        fp.causal = path;
        fp.alibi_slopes = ts;
        fp.relative_bias = tt;
        fp.relative_max_distance = 10;
        fp.window = 6;
        fp.softcap = 2.5f;
        clattn_rope_params rope; /* partial, interleaved on one path, with offsets */
        clattn_rope_params_default(&rope);
        rope.layout = path ? CLATTN_ROPE_INTERLEAVED : CLATTN_ROPE_HALF;
        rope.theta = 500.0f;
        rope.rotary_dim = path ? 2 : 4;
        rope.query_offset = 3 + path;
        rope.key_offset = 2;
        fp.rope = &rope;
        assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp), CLATTN_OK);
        clattn_sdpa_params sp;
        clattn_sdpa_params_default(&sp);
        sp.path = fp.path;
        sp.causal = fp.causal;
        sp.alibi_slopes = ts;
        sp.relative_bias = tt;
        sp.relative_max_distance = 10;
        sp.window = 6;
        sp.softcap = 2.5f;
        sp.rope = &rope;
        assert_int_equal(clattn_sdpa(ctx, th, th, th, to, &sp), CLATTN_OK);
        float *y = test_tensor_to_host(ty), *o = test_tensor_to_host(to);
        float *want = malloc(B * N * E * sizeof(float));
        for (size_t b = 0; b < B; b++)
            for (size_t n = 0; n < N; n++)
                for (size_t h = 0; h < H; h++)
                    memcpy(want + (b * N + n) * E + h * d, o + ((b * H + h) * N + n) * d,
                           d * sizeof(float));
        assert_close(y, want, B * N * E, 1e-6);
        /* and the modifiers change the output (the check above is not vacuous) */
        fp.window = 0;
        assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp), CLATTN_OK);
        float *y2 = test_tensor_to_host(ty);
        assert_true(test_max_abs_diff(y2, want, B * N * E) > 1e-3);
        fp.window = 6; /* so does each RoPE offset */
        rope.key_offset = 0;
        assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp), CLATTN_OK);
        float *y3 = test_tensor_to_host(ty);
        assert_true(test_max_abs_diff(y3, want, B * N * E) > 1e-3);
        free(y), free(y2), free(y3), free(o), free(want);
    }
    clattn_mha_forward_params fp;
    clattn_mha_forward_params_default(&fp);
    fp.window = 3;
    assert_status_msg(ctx, clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp),
                      CLATTN_ERROR_INVALID_ARGUMENT, "window is 3");
    clattn_mha_forward_params_default(&fp);
    clattn_rope_params odd;
    clattn_rope_params_default(&odd);
    odd.rotary_dim = 3;
    fp.rope = &odd;
    assert_status_msg(ctx, clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp),
                      CLATTN_ERROR_INVALID_ARGUMENT, "rotary_dim is 3");
    clattn_mha_forward_params_default(&fp);
    fp.relative_bias = ts;
    assert_status_msg(ctx, clattn_mha_forward(mha, tx, NULL, NULL, ty, &fp),
                      CLATTN_ERROR_SHAPE_MISMATCH, "relative_bias has shape [3]");
    clattn_tensor *all[] = {ts, tt, tx, ty, th, to};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        clattn_tensor_destroy(&all[i]);
    clattn_mha_destroy(&mha);
    free(w), free(x), free(heads);
}

/* A window wider than any distance (up to SIZE_MAX - 1) is full attention, on every path. */
static void a_window_wider_than_the_sequence_is_full_attention(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    size_t shape[4] = {2, 2, 19, 8}, n = 2 * 2 * 19 * 8;
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, 91, -2, 2);
    clattn_tensor *q = test_tensor_from(ctx, 4, shape, x);
    clattn_tensor *o = test_tensor_from(ctx, 4, shape, NULL);
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    assert_int_equal(clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_OK);
    float *full = test_tensor_to_host(o);
    const size_t windows[] = {38, 40, SIZE_MAX / 2 - 1, SIZE_MAX - 1};
    for (int path = 0; path < 2; path++)
        for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
            p.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
            p.window = windows[w];
            assert_int_equal(clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_OK);
            float *got = test_tensor_to_host(o);
            assert_close(got, full, n, 1e-6);
            free(got);
        }
    free(full), free(x);
    clattn_tensor_destroy(&q), clattn_tensor_destroy(&o);
}

static void invalid_arguments(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    size_t shape[4] = {1, 3, 5, 4};
    float data[60]; /* every tensor below has at most 60 elements; the valid calls read them */
    test_fill_uniform(data, 60, 3, -1, 1);
    clattn_tensor *q = test_tensor_from(ctx, 4, shape, data);
    clattn_tensor *o = test_tensor_from(ctx, 4, shape, NULL);
    clattn_tensor *slopes2 = test_tensor_from(ctx, 1, (size_t[]){2}, data);
    clattn_tensor *slopes2d = test_tensor_from(ctx, 2, (size_t[]){1, 3}, data);
    clattn_tensor *table = test_tensor_from(ctx, 2, (size_t[]){8, 2}, data);
    clattn_tensor *table3 = test_tensor_from(ctx, 2, (size_t[]){3, 3}, data);
    clattn_tensor *table1d = test_tensor_from(ctx, 1, (size_t[]){24}, data);
    clattn_tensor *table_ok = test_tensor_from(ctx, 2, (size_t[]){8, 3}, data);
    clattn_sdpa_params p;

    clattn_sdpa_params_default(&p);
    p.window = 7;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "window is 7: it must be even");
    clattn_sdpa_params_default(&p);
    p.softcap = -1.0f;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "softcap is -1");
    p.softcap = NAN;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "softcap is nan");
    p.softcap = INFINITY;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "softcap is inf");
    clattn_sdpa_params_default(&p);
    p.alibi_slopes = slopes2;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "alibi_slopes has shape [2]");
    p.alibi_slopes = slopes2d;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "alibi_slopes has shape [1, 3]");
    clattn_sdpa_params_default(&p);
    p.relative_bias = table;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "relative_bias has shape [8, 2] but must be [num_buckets, H] = [8, 3]");
    p.relative_bias = table1d;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_SHAPE_MISMATCH,
                      "relative_bias has shape [24]");
    p.relative_bias = table3;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "3 buckets: at least 4");
    p.relative_bias = table_ok;
    p.relative_max_distance = 2;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "relative_max_distance is 2: it must exceed num_buckets / 4 = 2");
    p.relative_max_distance = 3;
    assert_int_equal(clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_OK);

    clattn_rope_params rope;
    clattn_sdpa_params_default(&p);
    p.rope = &rope;
    clattn_rope_params_default(&rope);
    rope.rotary_dim = 3;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope->rotary_dim is 3: it must be even and at most d_k = 4");
    rope.rotary_dim = 6;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope->rotary_dim is 6");
    clattn_rope_params_default(&rope);
    rope.theta = -1.0f;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope->theta is -1");
    clattn_rope_params_default(&rope);
    rope.layout = (clattn_rope_layout)2;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope->layout is 2");
    clattn_rope_params_default(&rope);
    rope.reserved[31] = 1;
    assert_status_msg(ctx, clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope->reserved is not zero");
    clattn_rope_params_default(&rope);
    assert_int_equal(clattn_sdpa(ctx, q, q, q, o, &p), CLATTN_OK);

    clattn_tensor *all[] = {q, o, slopes2, slopes2d, table, table3, table1d, table_ok};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        clattn_tensor_destroy(&all[i]);
}

/* The modifier fields keep the parameters' size: they took bytes of `reserved`. */
static void params_layout(void **state)
{
    (void)state;
    clattn_sdpa_params p;
    clattn_sdpa_params_default(&p);
    assert_null(p.alibi_slopes);
    assert_null(p.relative_bias);
    assert_int_equal(p.window, 0);
    assert_true(p.softcap == 0.0f);
    assert_null(p.rope);
    clattn_rope_params r;
    memset(&r, 0xff, sizeof(r));
    clattn_rope_params_default(&r);
    assert_int_equal(r.layout, CLATTN_ROPE_HALF);
    assert_true(r.theta == 0.0f);
    assert_int_equal(r.rotary_dim, 0);
    if (sizeof(void *) == 8) {
        assert_int_equal(sizeof(clattn_sdpa_params), 120);
        assert_int_equal(sizeof(clattn_mha_forward_params), 112);
    }
}

int main(void)
{
    const char *filter = getenv("CLATTN_TEST_FILTER");
    const char *tune = getenv("CLATTN_TUNE");
    snprintf(suite_tune, sizeof(suite_tune), "%s", tune ? tune : "");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_cases_fused_and_unfused),
        cmocka_unit_test(golden_cases_on_every_fused_variant),
        cmocka_unit_test(alibi_slopes_are_blooms),
        cmocka_unit_test(modified_rows_are_batch_invariant),
        cmocka_unit_test(mha_golden_cases),
        cmocka_unit_test(mha_passes_its_modifiers_to_attention),
        cmocka_unit_test(grouped_query_attention_with_modifiers),
        cmocka_unit_test(a_window_wider_than_the_sequence_is_full_attention),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(params_layout),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
