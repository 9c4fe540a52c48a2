/*
 * The multi-head attention layer against the plain-C reference over a grid of configurations
 * (E in {8, 64, 512}, h in {1, 2, 8}, d_k != d_v, kdim/vdim, biases on/off, output projection
 * on/off, every mask kind, chunked scores), against PyTorch's nn.MultiheadAttention and a
 * timm-style Attention through the golden files in tests/golden, and with invalid arguments.
 * Tolerance against the reference: 1e-5 max abs error (unit-scale inputs and weights); against
 * PyTorch: the tolerance stored in each golden case (1e-5).
 */
#include "common/test_util.h"
#include "ref/ref_attention.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden"
#endif

#define TOL 1e-5

static clattn_host_tensor host2(const float *data, size_t rows, size_t cols)
{
    clattn_host_tensor t = {data, 2, {rows, cols, 0, 0}};
    return t;
}

static clattn_host_tensor host1(const float *data, size_t n)
{
    clattn_host_tensor t = {data, 1, {n, 0, 0, 0}};
    return t;
}

static float *random_array(size_t n, uint64_t seed, float scale)
{
    float *x = malloc(n * sizeof(float) + 1);
    test_fill_uniform(x, n, seed, -scale, scale);
    return x;
}

/* ---- reference grid ---- */

typedef struct mha_case {
    size_t E, H, dk, dv, kdim, vdim; /* 0 = defaults */
    size_t B, Nq, Nk;
    bool cross;
    bool packed_weights; /* in_proj_weight rather than q/k/v_proj_weight */
    bool in_bias, out_proj, out_bias;
    int weights; /* 0 none, 1 averaged, 2 per head */
    int key_padding; /* 0 none, 1 bool, 2 additive */
    int attn_mask;   /* 0 none, 1 bool [Nq,Nk], 2 additive [B·H,Nq,Nk] */
    bool causal;
    bool fully_masked; /* batch 0's keys all padded */
    uint64_t workspace_limit;
    float mask_offset, mask_ramp; /* added to the additive attn_mask: offset + ramp·j / (Nk - 1) */
    double tol;                   /* 0: TOL */
} mha_case;

static mha_case base_case(size_t E, size_t H, size_t B, size_t Nq, size_t Nk)
{
    mha_case c;
    memset(&c, 0, sizeof(c));
    c.E = E, c.H = H, c.B = B, c.Nq = Nq, c.Nk = Nk;
    c.packed_weights = true;
    c.in_bias = c.out_proj = c.out_bias = true;
    return c;
}

static void run_case(clattn_context *shared_ctx, const mha_case *c, uint64_t seed)
{
    clattn_context *ctx = shared_ctx;
    double tol = c->tol != 0.0 ? c->tol : TOL;
    if (c->workspace_limit) {
        clattn_context_params params;
        clattn_context_params_default(&params);
        params.log_level = CLATTN_LOG_NONE;
        params.workspace_limit_bytes = c->workspace_limit;
        assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
        assert_int_equal(test_check_fused_variant(ctx), 0);
    }
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, c->E, c->H);
    cfg.head_dim_qk = c->dk, cfg.head_dim_v = c->dv, cfg.kdim = c->kdim, cfg.vdim = c->vdim;
    cfg.in_proj_bias = c->in_bias, cfg.out_proj = c->out_proj, cfg.out_proj_bias = c->out_bias;
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    assert_int_equal(clattn_mha_get_config(mha, &cfg), CLATTN_OK); /* defaults resolved */

    size_t E = cfg.embed_dim, H = cfg.num_heads, dk = cfg.head_dim_qk, dv = cfg.head_dim_v;
    size_t kdim = cfg.kdim, vdim = cfg.vdim, qk = H * dk, vw = H * dv, P = 2 * qk + vw;
    size_t B = c->B, Nq = c->Nq, Nk = c->cross ? c->Nk : c->Nq;
    float *w_in = malloc((qk * E + qk * kdim + vw * vdim) * sizeof(float));
    float *wq = w_in, *wk = w_in + qk * E, *wv = wk + qk * kdim;
    test_fill_uniform(wq, qk * E, seed, -1.0f / sqrtf((float)E), 1.0f / sqrtf((float)E));
    test_fill_uniform(wk, qk * kdim, seed + 1, -1.0f / sqrtf((float)kdim), 1.0f / sqrtf((float)kdim));
    test_fill_uniform(wv, vw * vdim, seed + 2, -1.0f / sqrtf((float)vdim), 1.0f / sqrtf((float)vdim));
    float *b_in = random_array(P, seed + 3, 0.5f);
    float *w_out = random_array(E * vw, seed + 4, 1.0f / sqrtf((float)vw));
    float *b_out = random_array(E, seed + 5, 0.5f);

    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    if (c->packed_weights) {
        w.in_proj_weight = host2(w_in, P, E);
    } else {
        w.q_proj_weight = host2(wq, qk, E);
        w.k_proj_weight = host2(wk, qk, kdim);
        w.v_proj_weight = host2(wv, vw, vdim);
    }
    if (c->in_bias)
        w.in_proj_bias = host1(b_in, P);
    if (c->out_proj)
        w.out_proj_weight = host2(w_out, E, vw);
    if (c->out_proj && c->out_bias)
        w.out_proj_bias = host1(b_out, E);
    clattn_status status = clattn_mha_load_weights(mha, &w);
    if (status != CLATTN_OK)
        print_error("load: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);

    float *query = random_array(B * Nq * E, seed + 6, 1.0f);
    float *key = c->cross ? random_array(B * Nk * kdim, seed + 7, 1.0f) : query;
    float *value = c->cross ? random_array(B * Nk * vdim, seed + 8, 1.0f) : query;
    clattn_tensor *tq = test_tensor_from(ctx, 3, (size_t[]){B, Nq, E}, query);
    clattn_tensor *tk = c->cross ? test_tensor_from(ctx, 3, (size_t[]){B, Nk, kdim}, key) : NULL;
    clattn_tensor *tv = c->cross ? test_tensor_from(ctx, 3, (size_t[]){B, Nk, vdim}, value) : NULL;
    clattn_tensor *to = test_tensor_from(ctx, 3, (size_t[]){B, Nq, E}, NULL);

    clattn_mha_forward_params fp;
    clattn_mha_forward_params_default(&fp);
    fp.causal = c->causal;
    ref_masks rm = {0};
    rm.causal = c->causal;
    float *kp = NULL, *am = NULL;
    clattn_tensor *tkp = NULL, *tam = NULL, *tw = NULL;
    if (c->key_padding) {
        kp = random_array(B * Nk, seed + 9, 1.0f);
        for (size_t i = 0; i < B * Nk; i++) {
            if (c->key_padding == 1)
                kp[i] = kp[i] > 0.4f ? 1.0f : 0.0f;
            if (c->fully_masked && i < Nk)
                kp[i] = c->key_padding == 1 ? 1.0f : -INFINITY;
        }
        tkp = test_tensor_from(ctx, 2, (size_t[]){B, Nk}, kp);
        fp.key_padding_mask = tkp;
        fp.key_padding_mask_kind = c->key_padding == 1 ? CLATTN_MASK_BOOL : CLATTN_MASK_ADDITIVE;
        rm.key_padding_mask = kp;
        rm.key_padding_bool = c->key_padding == 1;
    }
    if (c->attn_mask == 1) {
        am = random_array(Nq * Nk, seed + 10, 1.0f);
        for (size_t i = 0; i < Nq * Nk; i++)
            am[i] = am[i] > 0.3f ? 1.0f : 0.0f;
        tam = test_tensor_from(ctx, 2, (size_t[]){Nq, Nk}, am);
        rm.am_si = Nk, rm.am_sj = 1;
    } else if (c->attn_mask == 2) {
        am = random_array(B * H * Nq * Nk, seed + 10, 1.0f);
        for (size_t i = 0; i < B * H * Nq * Nk; i++)
            am[i] += c->mask_offset + (Nk > 1 ? c->mask_ramp * (float)(i % Nk) / (float)(Nk - 1)
                                              : 0.0f);
        tam = test_tensor_from(ctx, 3, (size_t[]){B * H, Nq, Nk}, am);
        rm.am_sb = H * Nq * Nk, rm.am_sh = Nq * Nk, rm.am_si = Nk, rm.am_sj = 1;
    }
    if (c->attn_mask) {
        fp.attn_mask = tam;
        fp.attn_mask_kind = c->attn_mask == 1 ? CLATTN_MASK_BOOL : CLATTN_MASK_ADDITIVE;
        rm.attn_mask = am;
        rm.attn_mask_bool = c->attn_mask == 1;
    }
    size_t nw = c->weights == 2 ? B * H * Nq * Nk : B * Nq * Nk;
    if (c->weights) {
        tw = c->weights == 2 ? test_tensor_from(ctx, 4, (size_t[]){B, H, Nq, Nk}, NULL)
                             : test_tensor_from(ctx, 3, (size_t[]){B, Nq, Nk}, NULL);
        fp.attn_weights = tw;
        fp.average_attn_weights = c->weights == 1;
    }

    status = clattn_mha_forward(mha, tq, tk, tv, to, &fp);
    if (status != CLATTN_OK)
        print_error("forward: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *got = test_tensor_to_host(to);

    ref_mha rmha = {E, H, dk, dv, kdim, vdim, wq, wk, wv, c->in_bias ? b_in : NULL,
                    c->out_proj ? w_out : NULL, c->out_proj && c->out_bias ? b_out : NULL};
    float *want = malloc(B * Nq * E * sizeof(float));
    float *want_w = malloc(B * H * Nq * Nk * sizeof(float)); /* room for per-head weights */
    ref_mha_forward(&rmha, query, key, value, B, Nq, Nk, &rm, want, want_w, c->weights == 1);
    assert_close(got, want, B * Nq * E, tol);
    if (tw) {
        float *got_w = test_tensor_to_host(tw);
        assert_close(got_w, want_w, nw, tol);
        free(got_w);
    }
    /* The other path gives the same output: fused when the weights were asked (so the call above
     * ran unfused), unfused otherwise. */
    fp.path = tw ? CLATTN_PATH_FUSED : CLATTN_PATH_UNFUSED;
    fp.attn_weights = NULL;
    assert_int_equal(clattn_tensor_fill(to, NAN), CLATTN_OK);
    assert_int_equal(clattn_mha_forward(mha, tq, tk, tv, to, &fp), CLATTN_OK);
    free(got);
    got = test_tensor_to_host(to);
    assert_close(got, want, B * Nq * E, tol);

    free(got), free(want), free(want_w), free(w_in), free(b_in), free(w_out), free(b_out);
    if (c->cross)
        free(key), free(value);
    free(query), free(kp), free(am);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
    clattn_tensor_destroy(&to), clattn_tensor_destroy(&tkp), clattn_tensor_destroy(&tam);
    clattn_tensor_destroy(&tw);
    clattn_mha_destroy(&mha);
    assert_null(mha);
    if (ctx != shared_ctx)
        clattn_context_destroy(&ctx);
}

static void self_attention_over_widths_and_heads(void **state)
{
    test_fixture *f = *state;
    static const size_t dims[][2] = {{8, 1}, {8, 2}, {8, 8}, {64, 1}, {64, 2}, {64, 8}, {512, 8}};
    size_t n = test_small_mode() ? 3 : sizeof(dims) / sizeof(dims[0]);
    for (size_t i = 0; i < n; i++) {
        mha_case c = base_case(dims[i][0], dims[i][1], i % 2 ? 3 : 1, dims[i][0] == 512 ? 7 : 9, 0);
        c.weights = (int)(i % 3);
        run_case(f->ctx, &c, 10 * i + 1);
    }
}

static void head_widths_that_differ_from_e_over_h(void **state)
{
    test_fixture *f = *state;
    /* Table 3 rows (B): d_k = 16 or 32 with h = 8 and E = 64 here; d_k != d_v. */
    mha_case c = base_case(64, 8, 2, 7, 0);
    c.dk = 16, c.dv = 4;
    c.weights = 2;
    run_case(f->ctx, &c, 100);
    c.dk = 3, c.dv = 5;
    c.packed_weights = false;
    run_case(f->ctx, &c, 101);
    mha_case d = base_case(8, 1, 3, 7, 0);
    d.dk = 32, d.dv = 8;
    d.weights = 1;
    run_case(f->ctx, &d, 102);
}

static void cross_attention_with_kdim_and_vdim(void **state)
{
    test_fixture *f = *state;
    mha_case c = base_case(8, 2, 3, 7, 129);
    c.cross = true, c.packed_weights = false;
    c.kdim = 6, c.vdim = 10, c.dk = 3, c.dv = 5;
    c.weights = 2;
    run_case(f->ctx, &c, 200);
    mha_case d = base_case(64, 2, 1, 64, 1);
    d.cross = true, d.packed_weights = false;
    d.weights = 1;
    run_case(f->ctx, &d, 201);
    mha_case e = base_case(16, 4, 2, 1, 7); /* same widths, packed weights, different inputs */
    e.cross = true;
    run_case(f->ctx, &e, 202);
}

static void biases_and_output_projection_switched_off(void **state)
{
    test_fixture *f = *state;
    mha_case c = base_case(16, 4, 2, 5, 0);
    c.in_bias = false, c.out_bias = false;
    run_case(f->ctx, &c, 300);
    c.in_bias = true;
    c.out_proj = false; /* identity: h·d_v == E */
    c.weights = 1;
    run_case(f->ctx, &c, 301);
    c.in_bias = false;
    c.packed_weights = false;
    run_case(f->ctx, &c, 302);
}

static void separate_weights_give_the_packed_result(void **state)
{
    test_fixture *f = *state;
    mha_case c = base_case(16, 2, 2, 6, 0);
    c.packed_weights = false;
    run_case(f->ctx, &c, 400);
}

static void masks_and_causal(void **state)
{
    test_fixture *f = *state;
    for (int kp = 0; kp <= 2; kp++)
        for (int am = 0; am <= 2; am++) {
            mha_case c = base_case(16, 2, 2, 5, 0);
            c.key_padding = kp, c.attn_mask = am;
            c.causal = (kp + am) % 2;
            c.weights = 1 + (kp + am) % 2;
            run_case(f->ctx, &c, 500 + (uint64_t)(3 * kp + am));
        }
    mha_case d = base_case(16, 2, 2, 4, 9); /* cross-attention, causal with Nq < Nk */
    d.cross = true;
    d.causal = true;
    d.key_padding = 1;
    run_case(f->ctx, &d, 520);
}

/* Logits of 40 to 100 (an additive mask that grows with the key index) over 150 keys: split-key
 * attention (chosen here for few queries; forced in "mha-split-keys") gives each split its own
 * maximum, and its combine step must rescale by them (exp(100) overflows a float). */
static void large_logits_across_key_splits(void **state)
{
    test_fixture *f = *state;
    mha_case c = base_case(16, 2, 1, 2, 150);
    c.cross = true;
    c.attn_mask = 2;
    c.mask_offset = 40.0f;
    c.mask_ramp = 60.0f;
    c.tol = 1e-4; /* float logits near 100: ulp 7.6e-6 */
    run_case(f->ctx, &c, 2300);
    c.Nq = 9; /* more queries than one work-item holds */
    c.key_padding = 1;
    run_case(f->ctx, &c, 2310);
}

static void fully_padded_batch_gives_zero_attention(void **state)
{
    test_fixture *f = *state;
    mha_case c = base_case(8, 2, 2, 5, 0);
    c.key_padding = 1, c.fully_masked = true, c.weights = 2;
    run_case(f->ctx, &c, 600);
    c.key_padding = 2, c.weights = 1;
    run_case(f->ctx, &c, 601);
}

static void long_sequences(void **state)
{
    test_fixture *f = *state;
    /* Past 256 keys the fused kernel packs keys and values per head first (on devices without
     * staging), with masks and causal too. */
    mha_case c = base_case(16, 2, 1, 300, 0);
    c.key_padding = 1;
    c.causal = true;
    run_case(f->ctx, &c, 800);
    mha_case d = base_case(16, 4, 2, 7, 290);
    d.cross = true;
    run_case(f->ctx, &d, 801);
}

static void chunked_scores_with_averaged_weights(void **state)
{
    test_fixture *f = *state;
    /* 3 pairs of [7, 7] scores per chunk with h = 2: chunks straddle batches. */
    mha_case c = base_case(16, 2, 3, 7, 0);
    c.workspace_limit = 3 * 7 * 7 * sizeof(float);
    c.weights = 1;
    c.key_padding = 1;
    run_case(f->ctx, &c, 700);
    c.weights = 0;
    run_case(f->ctx, &c, 701);
}

/* ---- PyTorch golden files ---- */

static float *load_npy(const char *dir, const char *name, clattn_npy_array **a)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    clattn_status status = clattn_npy_read_f32(a, path);
    if (status != CLATTN_OK) {
        print_error("%s\n", clattn_last_error(NULL));
        fail();
    }
    return (*a)->f32;
}

static bool has_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (fp)
        fclose(fp);
    return fp != NULL;
}

static clattn_host_tensor host_of(const clattn_npy_array *a)
{
    clattn_host_tensor t = {a->f32, a->ndim, {0, 0, 0, 0}};
    for (int d = 0; d < a->ndim && d < CLATTN_MAX_DIMS; d++)
        t.shape[d] = a->shape[d];
    return t;
}

static clattn_tensor *device_of(clattn_context *ctx, const clattn_npy_array *a)
{
    return test_tensor_from(ctx, a->ndim, a->shape, a->f32);
}

static size_t json_size(json_t *meta, const char *key)
{
    json_t *v = json_object_get(meta, key);
    assert_true(json_is_integer(v));
    return (size_t)json_integer_value(v);
}

static bool json_flag(json_t *meta, const char *key)
{
    return json_is_true(json_object_get(meta, key));
}

/* Runs one golden case; returns its max abs error on out. */
static double run_golden_mha(clattn_context *ctx, const char *dir, json_t *meta)
{
    size_t E = json_size(meta, "embed_dim"), H = json_size(meta, "num_heads");
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, E, H);
    cfg.kdim = json_size(meta, "kdim");
    cfg.vdim = json_size(meta, "vdim");
    bool bias = json_flag(meta, "bias");
    cfg.in_proj_bias = cfg.out_proj_bias = bias;
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);

    clattn_npy_array *arrays[16] = {NULL};
    memset(arrays, 0, sizeof(arrays));
    int n = 0;
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    if (has_file(dir, "in_proj_weight.npy")) {
        load_npy(dir, "in_proj_weight.npy", &arrays[n]);
        w.in_proj_weight = host_of(arrays[n++]);
    } else {
        load_npy(dir, "q_proj_weight.npy", &arrays[n]);
        w.q_proj_weight = host_of(arrays[n++]);
        load_npy(dir, "k_proj_weight.npy", &arrays[n]);
        w.k_proj_weight = host_of(arrays[n++]);
        load_npy(dir, "v_proj_weight.npy", &arrays[n]);
        w.v_proj_weight = host_of(arrays[n++]);
    }
    if (bias) {
        load_npy(dir, "in_proj_bias.npy", &arrays[n]);
        w.in_proj_bias = host_of(arrays[n++]);
        load_npy(dir, "out_proj_bias.npy", &arrays[n]);
        w.out_proj_bias = host_of(arrays[n++]);
    }
    load_npy(dir, "out_proj_weight.npy", &arrays[n]);
    w.out_proj_weight = host_of(arrays[n++]);
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);

    clattn_npy_array *query = NULL, *key = NULL, *value = NULL, *expect = NULL, *kpm = NULL, *am = NULL;
    clattn_npy_array *expect_w = NULL;
    load_npy(dir, "query.npy", &query);
    load_npy(dir, "out.npy", &expect);
    clattn_tensor *tq = device_of(ctx, query), *tk = NULL, *tv = NULL;
    if (!json_flag(meta, "self_attention")) {
        load_npy(dir, "key.npy", &key);
        load_npy(dir, "value.npy", &value);
        tk = device_of(ctx, key);
        tv = device_of(ctx, value);
    }
    clattn_tensor *to = test_tensor_from(ctx, expect->ndim, expect->shape, NULL);
    clattn_mha_forward_params fp;
    clattn_mha_forward_params_default(&fp);
    fp.causal = json_flag(meta, "causal");
    clattn_tensor *tkpm = NULL, *tam = NULL, *tw = NULL;
    json_t *kind = json_object_get(meta, "key_padding_mask");
    if (json_is_string(kind)) {
        load_npy(dir, "key_padding_mask.npy", &kpm);
        tkpm = device_of(ctx, kpm);
        fp.key_padding_mask = tkpm;
        fp.key_padding_mask_kind =
            strcmp(json_string_value(kind), "bool") == 0 ? CLATTN_MASK_BOOL : CLATTN_MASK_ADDITIVE;
    }
    kind = json_object_get(meta, "attn_mask");
    if (json_is_string(kind)) {
        load_npy(dir, "attn_mask.npy", &am);
        tam = device_of(ctx, am);
        fp.attn_mask = tam;
        fp.attn_mask_kind =
            strcmp(json_string_value(kind), "bool") == 0 ? CLATTN_MASK_BOOL : CLATTN_MASK_ADDITIVE;
    }
    if (json_flag(meta, "need_weights")) {
        load_npy(dir, "attn_weights.npy", &expect_w);
        tw = test_tensor_from(ctx, expect_w->ndim, expect_w->shape, NULL);
        fp.attn_weights = tw;
        fp.average_attn_weights = json_flag(meta, "average_attn_weights");
    }
    clattn_status status = clattn_mha_forward(mha, tq, tk, tv, to, &fp);
    if (status != CLATTN_OK)
        print_error("%s: %s\n", dir, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);

    double tol = json_real_value(json_object_get(meta, "tolerance"));
    float *got = test_tensor_to_host(to);
    double err = test_max_abs_diff(got, expect->f32, expect->numel);
    assert_close(got, expect->f32, expect->numel, tol);
    if (tw) {
        float *got_w = test_tensor_to_host(tw);
        double err_w = test_max_abs_diff(got_w, expect_w->f32, expect_w->numel);
        if (err_w > err)
            err = err_w;
        assert_close(got_w, expect_w->f32, expect_w->numel, tol);
        free(got_w);
    }
    /* And on the other path (fused when weights were asked, else unfused). */
    fp.path = tw ? CLATTN_PATH_FUSED : CLATTN_PATH_UNFUSED;
    fp.attn_weights = NULL;
    assert_int_equal(clattn_tensor_fill(to, NAN), CLATTN_OK);
    assert_int_equal(clattn_mha_forward(mha, tq, tk, tv, to, &fp), CLATTN_OK);
    free(got);
    got = test_tensor_to_host(to);
    double err_other = test_max_abs_diff(got, expect->f32, expect->numel);
    if (err_other > err)
        err = err_other;
    assert_close(got, expect->f32, expect->numel, tol);
    free(got);
    for (int i = 0; i < n; i++)
        clattn_npy_array_destroy(&arrays[i]);
    clattn_npy_array_destroy(&query), clattn_npy_array_destroy(&key), clattn_npy_array_destroy(&value);
    clattn_npy_array_destroy(&expect), clattn_npy_array_destroy(&kpm), clattn_npy_array_destroy(&am);
    clattn_npy_array_destroy(&expect_w);
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&tk), clattn_tensor_destroy(&tv);
    clattn_tensor_destroy(&to), clattn_tensor_destroy(&tkpm), clattn_tensor_destroy(&tam);
    clattn_tensor_destroy(&tw);
    clattn_mha_destroy(&mha);
    return err;
}

static double run_golden_timm(clattn_context *ctx, const char *dir, json_t *meta)
{
    clattn_mha_config cfg;
    bool qkv_bias = json_flag(meta, "qkv_bias");
    clattn_mha_config_timm(&cfg, json_size(meta, "dim"), json_size(meta, "num_heads"), qkv_bias);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    clattn_npy_array *qkv_w = NULL, *qkv_b = NULL, *proj_w = NULL, *proj_b = NULL, *x = NULL, *expect = NULL;
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    load_npy(dir, "qkv_weight.npy", &qkv_w);
    load_npy(dir, "proj_weight.npy", &proj_w);
    load_npy(dir, "proj_bias.npy", &proj_b);
    w.in_proj_weight = host_of(qkv_w);
    w.out_proj_weight = host_of(proj_w);
    w.out_proj_bias = host_of(proj_b);
    if (qkv_bias) {
        load_npy(dir, "qkv_bias.npy", &qkv_b);
        w.in_proj_bias = host_of(qkv_b);
    }
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    load_npy(dir, "x.npy", &x);
    load_npy(dir, "out.npy", &expect);
    clattn_tensor *tx = device_of(ctx, x);
    clattn_tensor *to = test_tensor_from(ctx, expect->ndim, expect->shape, NULL);
    assert_int_equal(clattn_mha_forward(mha, tx, NULL, NULL, to, NULL), CLATTN_OK);
    float *got = test_tensor_to_host(to);
    double err = test_max_abs_diff(got, expect->f32, expect->numel);
    assert_close(got, expect->f32, expect->numel, json_real_value(json_object_get(meta, "tolerance")));
    free(got);
    clattn_npy_array_destroy(&qkv_w), clattn_npy_array_destroy(&qkv_b), clattn_npy_array_destroy(&proj_w);
    clattn_npy_array_destroy(&proj_b), clattn_npy_array_destroy(&x), clattn_npy_array_destroy(&expect);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&to);
    clattn_mha_destroy(&mha);
    return err;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void matches_pytorch_golden_files(void **state)
{
    test_fixture *f = *state;
    DIR *d = opendir(GOLDEN_DIR);
    assert_non_null(d);
    char *names[256];
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && count < 256;)
        if (strncmp(e->d_name, "mha_", 4) == 0 || strncmp(e->d_name, "seed_", 5) == 0 ||
            strncmp(e->d_name, "timm_", 5) == 0)
            names[count++] = strdup(e->d_name);
    closedir(d);
    qsort(names, count, sizeof(names[0]), compare_names);
    assert_true(count >= 18);
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        char dir[900], path[1024];
        snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, names[i]);
        snprintf(path, sizeof(path), "%s/meta.json", dir);
        json_error_t jerr;
        json_t *meta = json_load_file(path, 0, &jerr);
        if (!meta)
            print_error("%s: %s\n", path, jerr.text);
        assert_non_null(meta);
        const char *kind = json_string_value(json_object_get(meta, "kind"));
        assert_non_null(kind);
        double err = strcmp(kind, "timm_attention") == 0 ? run_golden_timm(f->ctx, dir, meta)
                                                         : run_golden_mha(f->ctx, dir, meta);
        printf("    golden %-28s max abs error %.3g\n", names[i], err);
        if (err > worst)
            worst = err;
        json_decref(meta);
        free(names[i]);
    }
    printf("    largest error against PyTorch over %zu cases: %.3g\n", count, worst);
}

/* ---- invalid arguments ---- */

static void create_rejects_bad_configurations(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_mha_config cfg;
    clattn_mha *mha = (clattn_mha *)0x1;
    clattn_mha_config_default(&cfg, 16, 4);
    assert_status_msg(NULL, clattn_mha_create(NULL, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(ctx, clattn_mha_create(ctx, NULL, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "mha is NULL");
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "config is NULL");
    assert_null(mha);
    clattn_mha_config_default(&cfg, 0, 4);
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "embed_dim is 0");
    clattn_mha_config_default(&cfg, 16, 0);
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "num_heads is 0");
    clattn_mha_config_default(&cfg, 10, 4);
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "embed_dim 10 is not divisible by num_heads 4");
    cfg.head_dim_qk = 3, cfg.head_dim_v = 5; /* explicit widths: fine */
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    clattn_mha_destroy(&mha);
    cfg.out_proj = 0; /* identity needs h·d_v = 20 == E = 10 */
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "num_heads·head_dim_v (20) must equal embed_dim (10)");
    clattn_mha_config_default(&cfg, 16, 4);
    cfg.reserved[0] = 1;
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    clattn_mha_config_default(&cfg, (size_t)1 << 40, 1);
    assert_status_msg(ctx, clattn_mha_create(ctx, &mha, &cfg), CLATTN_ERROR_TOO_LARGE,
                      "too large");
    assert_null(mha);
    clattn_mha_destroy(NULL);
    clattn_mha_config_default(NULL, 1, 1);
    clattn_mha_config_timm(NULL, 1, 1, 0);
    clattn_mha_forward_params_default(NULL);
    assert_status_msg(NULL, clattn_mha_get_config(NULL, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "mha is NULL");
}

static void load_weights_checks_every_shape(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, 8, 2);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    float buf[512] = {0};
    clattn_mha_weights w;
#define RESET()                                                                            \
    do {                                                                                   \
        memset(&w, 0, sizeof(w));                                                          \
        w.in_proj_weight = host2(buf, 24, 8);                                              \
        w.in_proj_bias = host1(buf, 24);                                                   \
        w.out_proj_weight = host2(buf, 8, 8);                                              \
        w.out_proj_bias = host1(buf, 8);                                                   \
    } while (0)
    RESET();
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    assert_status_msg(NULL, clattn_mha_load_weights(NULL, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "mha is NULL");
    assert_status_msg(ctx, clattn_mha_load_weights(mha, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "weights is NULL");
    w.in_proj_weight = host2(buf, 24, 7);
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "in_proj_weight has shape [24, 7] but the configuration needs [24, 8]");
    RESET();
    w.in_proj_weight = host2(buf, 48, 8); /* h·(2·d_k + d_v) inconsistent with the weight */
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "needs [24, 8]");
    RESET();
    w.q_proj_weight = host2(buf, 8, 8);
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "both were given");
    RESET();
    w.in_proj_weight.data = NULL;
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "neither was given");
    RESET();
    w.in_proj_bias = host1(buf, 23);
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "in_proj_bias has shape [23]");
    RESET();
    w.in_proj_bias.data = NULL;
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "in_proj_bias is required");
    RESET();
    w.out_proj_weight = host1(buf, 64);
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "out_proj_weight has shape [64]");
    RESET();
    w.out_proj_bias.data = NULL;
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "out_proj_bias is required");
    RESET();
    w.out_proj_weight.ndim = 9;
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "(ndim 9)");
    clattn_mha_destroy(&mha);

    /* Separate weights with kdim/vdim; in_proj_weight is refused there, and so is
     * self-attention (PyTorch refuses it too). */
    clattn_mha_config_default(&cfg, 8, 2);
    cfg.kdim = 6, cfg.vdim = 10;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    RESET();
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_INVALID_ARGUMENT,
                      "in_proj_weight needs kdim == vdim == embed_dim");
    w.in_proj_weight.data = NULL;
    w.q_proj_weight = host2(buf, 8, 8);
    w.k_proj_weight = host2(buf, 8, 6);
    w.v_proj_weight = host2(buf, 8, 6);
    assert_status_msg(ctx, clattn_mha_load_weights(mha, &w), CLATTN_ERROR_SHAPE_MISMATCH,
                      "v_proj_weight has shape [8, 6] but the configuration needs [8, 10]");
    w.v_proj_weight = host2(buf, 8, 10);
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){1, 3, 8}, NULL);
    clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){1, 3, 8}, NULL);
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "self-attention (key and value NULL or the query) needs kdim == vdim == "
                      "embed_dim, not 6 and 10");
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
#undef RESET
    clattn_mha_destroy(&mha);
}

static void forward_rejects_bad_tensors(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, 8, 2);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){2, 5, 8}, NULL);
    clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){2, 5, 8}, NULL);
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "has no weights");
    float buf[512] = {0};
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    w.in_proj_weight = host2(buf, 24, 8);
    w.in_proj_bias = host1(buf, 24);
    w.out_proj_weight = host2(buf, 8, 8);
    w.out_proj_bias = host1(buf, 8);
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    assert_int_equal(clattn_mha_forward(mha, x, NULL, NULL, y, NULL), CLATTN_OK);

    clattn_tensor *wide = test_tensor_from(ctx, 3, (size_t[]){2, 5, 9}, NULL);
    clattn_tensor *other_batch = test_tensor_from(ctx, 3, (size_t[]){3, 5, 8}, NULL);
    clattn_tensor *short_out = test_tensor_from(ctx, 3, (size_t[]){2, 4, 8}, NULL);
    clattn_tensor *w_avg = test_tensor_from(ctx, 3, (size_t[]){2, 5, 5}, NULL);
    clattn_tensor *w_bad = test_tensor_from(ctx, 3, (size_t[]){2, 5, 4}, NULL);
    clattn_tensor *mask = test_tensor_from(ctx, 2, (size_t[]){5, 4}, NULL);
    clattn_tensor *kpm = test_tensor_from(ctx, 2, (size_t[]){2, 6}, NULL);
    clattn_tensor *alias = NULL;
    assert_int_equal(clattn_tensor_view(&alias, x, 8, 3, (size_t[]){2, 4, 8}, NULL), CLATTN_OK);
    clattn_mha_forward_params p;
    clattn_mha_forward_params_default(&p);

    assert_status_msg(NULL, clattn_mha_forward(NULL, x, NULL, NULL, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "mha is NULL");
    assert_status_msg(ctx, clattn_mha_forward(mha, NULL, NULL, NULL, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "query is NULL");
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    assert_status_msg(ctx, clattn_mha_forward(mha, wide, NULL, NULL, y, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "query has shape [2, 5, 9] but must be [B, N, E]");
    assert_status_msg(ctx, clattn_mha_forward(mha, x, x, NULL, y, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "both be given or both be NULL");
    assert_status_msg(ctx, clattn_mha_forward(mha, x, other_batch, other_batch, y, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "must share the batch size");
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, short_out, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "out has shape [2, 4, 8] but must be [B, Nq, E]");
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, alias, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "out has shape [2, 4, 8]");
    clattn_tensor *alias_full = NULL;
    assert_int_equal(clattn_tensor_view(&alias_full, x, 0, 3, (size_t[]){2, 5, 8}, NULL), CLATTN_OK);
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, alias_full, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out overlaps an input");
    p.attn_weights = w_bad;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_SHAPE_MISMATCH, "attn_weights has shape [2, 5, 4] but must be [B, Nq, Nk]");
    p.attn_weights = w_avg;
    p.average_attn_weights = 0;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_SHAPE_MISMATCH, "must be [B, h, Nq, Nk]");
    p.average_attn_weights = 1;
    p.path = CLATTN_PATH_FUSED;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p), CLATTN_ERROR_UNSUPPORTED,
                      "fused path cannot return attention weights");
    clattn_mha_forward_params_default(&p);
    p.attn_mask = mask;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_SHAPE_MISMATCH, "attn_mask has shape [5, 4] but must be [5, 5]");
    clattn_mha_forward_params_default(&p);
    p.key_padding_mask = kpm;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_SHAPE_MISMATCH, "key_padding_mask has shape [2, 6]");
    clattn_mha_forward_params_default(&p);
    p.reserved[sizeof(p.reserved) - 1] = 1;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_INVALID_ARGUMENT, "reserved");
    clattn_mha_forward_params_default(&p);
    p.path = (clattn_attention_path)-1;
    assert_status_msg(ctx, clattn_mha_forward(mha, x, NULL, NULL, y, &p),
                      CLATTN_ERROR_INVALID_ARGUMENT, "path is -1");

    clattn_tensor_destroy(&x), clattn_tensor_destroy(&y), clattn_tensor_destroy(&wide);
    clattn_tensor_destroy(&other_batch), clattn_tensor_destroy(&short_out);
    clattn_tensor_destroy(&w_avg), clattn_tensor_destroy(&w_bad), clattn_tensor_destroy(&mask);
    clattn_tensor_destroy(&kpm), clattn_tensor_destroy(&alias), clattn_tensor_destroy(&alias_full);
    clattn_mha_destroy(&mha);
}

static void projections_are_counted(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    size_t E = 16, H = 4, B = 2, N = 5;
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, E, H);
    clattn_mha *mha = NULL;
    assert_int_equal(clattn_mha_create(ctx, &mha, &cfg), CLATTN_OK);
    float *buf = calloc(4 * E * E, sizeof(float));
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    w.in_proj_weight = host2(buf, 3 * E, E);
    w.in_proj_bias = host1(buf, 3 * E);
    w.out_proj_weight = host2(buf, E, E);
    w.out_proj_bias = host1(buf, E);
    assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){B, N, E}, NULL);
    assert_int_equal(clattn_tensor_fill(x, 0.5f), CLATTN_OK);
    assert_int_equal(clattn_stats_reset(ctx), CLATTN_OK);
    assert_int_equal(clattn_mha_forward(mha, x, NULL, NULL, y, NULL), CLATTN_OK);
    clattn_stats s;
    assert_int_equal(clattn_stats_get(ctx, &s), CLATTN_OK);
    /* fvcore's counts: B·N·E·3E, B·H·N·N·(E/H) twice, B·N·E·E. */
    assert_int_equal(s.macs[CLATTN_OP_IN_PROJECTION], B * N * E * 3 * E);
    assert_int_equal(s.macs[CLATTN_OP_SCORES], B * N * N * E);
    assert_int_equal(s.macs[CLATTN_OP_WEIGHTS_V], B * N * N * E);
    assert_int_equal(s.macs[CLATTN_OP_OUT_PROJECTION], B * N * E * E);
    assert_int_equal(s.total_macs, B * N * E * 3 * E + 2 * B * N * N * E + B * N * E * E);
    free(buf);
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
    clattn_mha_destroy(&mha);
}

/* Grouped-query and multi-query attention layers (num_kv_heads): equal to the reference layer
 * whose key/value projections repeat each kv head's rows for its group of query heads; packed
 * weights with causal self-attention, separate weights with cross-attention. */
static void grouped_query_attention_layer(void **state)
{
    test_fixture *f = *state;
    size_t E = 12, H = 6, dk = 2, dv = 2, B = 2, Nq = 5, Nk = 7;
    const size_t kv_heads[] = {3, 2, 1};
    for (size_t g = 0; g < 3; g++)
        for (int cross = 0; cross <= 1; cross++) {
            size_t Hkv = kv_heads[g], group = H / Hkv, qk = H * dk, kw = Hkv * dk, vw = Hkv * dv;
            size_t nk = cross ? Nk : Nq;
            float *w_in = malloc((qk + kw + vw) * E * sizeof(float));
            float *b_in = malloc((qk + kw + vw) * sizeof(float));
            float *w_out = malloc(E * H * dv * sizeof(float)), *b_out = malloc(E * sizeof(float));
            float *x = malloc(B * Nq * E * sizeof(float)), *kv = malloc(B * nk * E * sizeof(float));
            test_fill_uniform(w_in, (qk + kw + vw) * E, 700 + g, -0.5f, 0.5f);
            test_fill_uniform(b_in, qk + kw + vw, 710 + g, -0.2f, 0.2f);
            test_fill_uniform(w_out, E * H * dv, 720 + g, -0.5f, 0.5f);
            test_fill_uniform(b_out, E, 730 + g, -0.2f, 0.2f);
            test_fill_uniform(x, B * Nq * E, 740 + g, -1, 1);
            test_fill_uniform(kv, B * nk * E, 750 + g, -1, 1);
            /* The reference layer: key and value rows repeated per query head. */
            float *wk_rep = malloc(qk * E * sizeof(float)), *wv_rep = malloc(H * dv * E * sizeof(float));
            float *b_rep = malloc((2 * qk + H * dv) * sizeof(float));
            memcpy(b_rep, b_in, qk * sizeof(float));
            for (size_t h = 0; h < H; h++) {
                size_t hk = h / group;
                memcpy(wk_rep + h * dk * E, w_in + (qk + hk * dk) * E, dk * E * sizeof(float));
                memcpy(wv_rep + h * dv * E, w_in + (qk + kw + hk * dv) * E, dv * E * sizeof(float));
                memcpy(b_rep + qk + h * dk, b_in + qk + hk * dk, dk * sizeof(float));
                memcpy(b_rep + 2 * qk + h * dv, b_in + qk + kw + hk * dv, dv * sizeof(float));
            }
            ref_mha m = {E, H, dk, dv, E, E, w_in, wk_rep, wv_rep, b_rep, w_out, b_out};
            ref_masks rm = {0};
            rm.causal = !cross;
            float *want = malloc(B * Nq * E * sizeof(float));
            ref_mha_forward(&m, x, cross ? kv : x, cross ? kv : x, B, Nq, nk, &rm, want, NULL,
                            false);

            clattn_mha_config cfg;
            clattn_mha_config_default(&cfg, E, H);
            cfg.head_dim_qk = dk, cfg.head_dim_v = dv;
            cfg.num_kv_heads = Hkv;
            clattn_mha *mha = NULL;
            assert_int_equal(clattn_mha_create(f->ctx, &mha, &cfg), CLATTN_OK);
            clattn_mha_weights w;
            memset(&w, 0, sizeof(w));
            if (cross) {
                w.q_proj_weight = (clattn_host_tensor){w_in, 2, {qk, E}};
                w.k_proj_weight = (clattn_host_tensor){w_in + qk * E, 2, {kw, E}};
                w.v_proj_weight = (clattn_host_tensor){w_in + (qk + kw) * E, 2, {vw, E}};
            } else {
                w.in_proj_weight = (clattn_host_tensor){w_in, 2, {qk + kw + vw, E}};
            }
            w.in_proj_bias = (clattn_host_tensor){b_in, 1, {qk + kw + vw}};
            w.out_proj_weight = (clattn_host_tensor){w_out, 2, {E, H * dv}};
            w.out_proj_bias = (clattn_host_tensor){b_out, 1, {E}};
            assert_int_equal(clattn_mha_load_weights(mha, &w), CLATTN_OK);
            clattn_tensor *tx = test_tensor_from(f->ctx, 3, (size_t[]){B, Nq, E}, x);
            clattn_tensor *tkv = test_tensor_from(f->ctx, 3, (size_t[]){B, nk, E}, kv);
            clattn_tensor *to = test_tensor_from(f->ctx, 3, (size_t[]){B, Nq, E}, NULL);
            clattn_mha_forward_params p;
            clattn_mha_forward_params_default(&p);
            p.causal = !cross;
            assert_int_equal(clattn_mha_forward(mha, tx, cross ? tkv : NULL, cross ? tkv : NULL,
                                                to, &p),
                             CLATTN_OK);
            float *got = test_tensor_to_host(to);
            assert_close(got, want, B * Nq * E, TOL);
            free(got), free(want), free(wk_rep), free(wv_rep), free(b_rep);
            free(w_in), free(b_in), free(w_out), free(b_out), free(x), free(kv);
            clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tkv), clattn_tensor_destroy(&to);
            clattn_mha_destroy(&mha);
        }
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, 12, 6);
    cfg.num_kv_heads = 4;
    clattn_mha *mha = NULL;
    assert_status_msg(f->ctx, clattn_mha_create(f->ctx, &mha, &cfg),
                      CLATTN_ERROR_INVALID_ARGUMENT, "num_kv_heads 4 does not divide num_heads 6");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(self_attention_over_widths_and_heads),
        cmocka_unit_test(head_widths_that_differ_from_e_over_h),
        cmocka_unit_test(cross_attention_with_kdim_and_vdim),
        cmocka_unit_test(biases_and_output_projection_switched_off),
        cmocka_unit_test(separate_weights_give_the_packed_result),
        cmocka_unit_test(masks_and_causal),
        cmocka_unit_test(large_logits_across_key_splits),
        cmocka_unit_test(fully_padded_batch_gives_zero_attention),
        cmocka_unit_test(long_sequences),
        cmocka_unit_test(chunked_scores_with_averaged_weights),
        cmocka_unit_test(matches_pytorch_golden_files),
        cmocka_unit_test(create_rejects_bad_configurations),
        cmocka_unit_test(load_weights_checks_every_shape),
        cmocka_unit_test(forward_rejects_bad_tensors),
        cmocka_unit_test(projections_are_counted),
        cmocka_unit_test(grouped_query_attention_layer),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
