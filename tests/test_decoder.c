/*
 * Decoder layers and stacks against PyTorch's nn.TransformerDecoder (tests/golden/dec_*, written
 * by tools/gen_decoder_golden.py and checked there against a float64 NumPy decoder), on both
 * attention paths; invalid arguments.
 */
#include "common/test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clattn_npy_array *load_npy(const char *dir, const char *name, bool optional)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f && optional)
        return NULL;
    if (f)
        fclose(f);
    clattn_npy_array *a = NULL;
    clattn_status status = clattn_npy_read_f32(&a, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return a;
}

static const clattn_host_tensor *st_lookup(void *user, const char *name)
{
    static _Thread_local clattn_host_tensor view;
    const clattn_safetensors_tensor *t = clattn_safetensors_find(user, name);
    if (!t)
        return NULL;
    memset(&view, 0, sizeof(view));
    view.data = t->data;
    view.ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < CLATTN_MAX_DIMS; d++)
        view.shape[d] = t->shape[d];
    return &view;
}

static bool flag(json_t *meta, const char *key)
{
    return json_is_true(json_object_get(meta, key));
}

static size_t size_of(json_t *meta, const char *key)
{
    return (size_t)json_integer_value(json_object_get(meta, key));
}

static double run_case(clattn_context *ctx, const char *dir, clattn_attention_path path)
{
    char file[1100];
    snprintf(file, sizeof(file), "%s/meta.json", dir);
    json_error_t error;
    json_t *meta = json_load_file(file, 0, &error);
    assert_non_null(meta);
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, size_of(meta, "d_model"), size_of(meta, "nhead"),
                                  size_of(meta, "num_layers"), size_of(meta, "dim_feedforward"));
    const char *act = json_string_value(json_object_get(meta, "activation"));
    cfg.activation = strcmp(act, "gelu") == 0 ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU;
    cfg.norm_first = flag(meta, "norm_first");
    cfg.final_norm = flag(meta, "final_norm");
    cfg.layer_norm_eps = (float)json_number_value(json_object_get(meta, "layer_norm_eps"));
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    snprintf(file, sizeof(file), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, file), CLATTN_OK);
    clattn_status status = clattn_decoder_load_weights(dec, st_lookup, st);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);

    clattn_npy_array *tgt = load_npy(dir, "tgt.npy", false);
    clattn_npy_array *memory = load_npy(dir, "memory.npy", false);
    clattn_npy_array *expect = load_npy(dir, "out.npy", false);
    clattn_npy_array *tkp = load_npy(dir, "tgt_key_padding_mask.npy", true);
    clattn_npy_array *mkp = load_npy(dir, "memory_key_padding_mask.npy", true);
    clattn_tensor *t_tgt = test_tensor_from(ctx, 3, tgt->shape, tgt->f32);
    clattn_tensor *t_mem = test_tensor_from(ctx, 3, memory->shape, memory->f32);
    clattn_tensor *t_out = test_tensor_from(ctx, 3, tgt->shape, NULL);
    clattn_tensor *t_tkp = tkp ? test_tensor_from(ctx, 2, tkp->shape, tkp->f32) : NULL;
    clattn_tensor *t_mkp = mkp ? test_tensor_from(ctx, 2, mkp->shape, mkp->f32) : NULL;
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = flag(meta, "causal");
    params.tgt_key_padding_mask = t_tkp;
    params.memory_key_padding_mask = t_mkp;
    params.path = path;
    assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_out, &params), CLATTN_OK);
    float *got = test_tensor_to_host(t_out);
    double err = test_max_abs_diff(got, expect->f32, expect->numel);
    assert_close(got, expect->f32, expect->numel,
                 json_real_value(json_object_get(meta, "tolerance")));
    free(got);
    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_out);
    clattn_tensor_destroy(&t_tkp), clattn_tensor_destroy(&t_mkp);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&memory);
    clattn_npy_array_destroy(&expect), clattn_npy_array_destroy(&tkp);
    clattn_npy_array_destroy(&mkp);
    clattn_safetensors_destroy(&st);
    clattn_decoder_destroy(&dec);
    json_decref(meta);
    return err;
}

static void matches_pytorch_golden_files(void **state)
{
    test_fixture *f = *state;
    DIR *d = opendir(GOLDEN_DIR);
    assert_non_null(d);
    struct dirent *e;
    int cases = 0;
    double worst = 0.0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "dec_", 4) != 0)
            continue;
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, e->d_name);
        for (int p = 0; p < 2; p++) { /* the fused and the unfused attention path */
            double err = run_case(f->ctx, dir, p ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED);
            worst = err > worst ? err : worst;
        }
        cases++;
    }
    closedir(d);
    assert_true(cases >= 6);
    print_message("    largest error against PyTorch over %d decoder cases, both paths: %.2e\n",
                  cases, worst);
}

/* Rows t0 .. t0 + n of every sequence of x [B, T, E], as a new contiguous [B, n, E] tensor. */
/* The half-precision cache against the float forward: unit-scale data, two layers. */
#define HALF_TOL 2e-3

static clattn_tensor *rows_of(clattn_context *ctx, const float *x, size_t B, size_t T, size_t E,
                              size_t t0, size_t n)
{
    float *part = malloc(B * n * E * sizeof(float));
    for (size_t b = 0; b < B; b++)
        memcpy(part + b * n * E, x + (b * T + t0) * E, n * E * sizeof(float));
    clattn_tensor *t = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, part);
    free(part);
    return t;
}

/* Incremental decoding with the key/value cache equals the teacher-forced causal forward at
 * every position: a prompt of 3 tokens, then one token per step; post- and pre-LN, with and
 * without grouped-query attention. */
static void incremental_steps_equal_the_full_forward(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    size_t B = 2, T = 7, S = 6, E = 16;
    /* post-LN and pre-LN with 4 heads; grouped-query (2 kv heads) and multi-query (1); the
     * half-precision cache (to HALF_TOL: keys and values rounded to 11 significant bits). */
    const size_t kv_heads[6] = {0, 0, 2, 1, 0, 2};
    const int half[6] = {0, 0, 0, 0, 1, 1};
    for (int run = 0; run < 6; run++) {
        int norm_first = run % 2;
        double tol = half[run] ? HALF_TOL : 1e-5, largest = 0.0;
        clattn_decoder_config cfg;
        clattn_decoder_config_default(&cfg, E, 4, 2, 32);
        cfg.activation = CLATTN_ACTIVATION_GELU;
        cfg.norm_first = norm_first;
        cfg.final_norm = norm_first;
        cfg.num_kv_heads = kv_heads[run];
        clattn_decoder *dec = NULL;
        assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
        assert_int_equal(clattn_decoder_init_random(dec, 40 + (uint64_t)run), CLATTN_OK);
        float tgt[2 * 7 * 16], mem[2 * 6 * 16], pad[2 * 6] = {0};
        test_fill_uniform(tgt, B * T * E, 41, -1.0f, 1.0f);
        test_fill_uniform(mem, B * S * E, 42, -1.0f, 1.0f);
        pad[S - 1] = pad[S - 2] = pad[S + 2] = 1.0f; /* padded memory positions */
        clattn_tensor *t_tgt = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, tgt);
        clattn_tensor *t_mem = test_tensor_from(ctx, 3, (size_t[]){B, S, E}, mem);
        clattn_tensor *t_pad = test_tensor_from(ctx, 2, (size_t[]){B, S}, pad);
        clattn_tensor *t_full = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, NULL);
        clattn_decoder_forward_params params;
        clattn_decoder_forward_params_default(&params);
        params.tgt_is_causal = 1;
        params.memory_key_padding_mask = t_pad;
        assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_full, &params), CLATTN_OK);
        float *full = test_tensor_to_host(t_full);

        clattn_decoder_state *st = NULL;
        clattn_decoder_state_params sp;
        clattn_decoder_state_params_default(&sp, B, T);
        sp.half_cache = half[run];
        assert_int_equal(clattn_decoder_state_create_with(dec, &st, &sp), CLATTN_OK);
        assert_int_equal(clattn_decoder_state_set_memory(st, t_mem, t_pad), CLATTN_OK);
        clattn_tensor_destroy(&t_pad); /* the state keeps its own copy */
        size_t t0 = 0;
        while (t0 < T) {
            size_t n = t0 == 0 ? 3 : 1;
            clattn_tensor *x = rows_of(ctx, tgt, B, T, E, t0, n);
            clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, NULL);
            assert_int_equal(clattn_decoder_step(st, x, y), CLATTN_OK);
            float *got = test_tensor_to_host(y);
            for (size_t b = 0; b < B; b++) {
                assert_close(got + b * n * E, full + (b * T + t0) * E, n * E, tol);
                double diff = test_max_abs_diff(got + b * n * E, full + (b * T + t0) * E, n * E);
                largest = diff > largest ? diff : largest;
            }
            free(got);
            clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
            t0 += n;
            assert_int_equal(clattn_decoder_state_length(st), t0);
        }
        /* The cache is full: one more token is refused and changes nothing. */
        clattn_tensor *x = rows_of(ctx, tgt, B, T, E, 0, 1);
        clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){B, 1, E}, NULL);
        assert_status_msg(ctx, clattn_decoder_step(st, x, y), CLATTN_ERROR_OUT_OF_RANGE,
                          "1 new tokens do not fit: the cache holds 7 of its 7");
        assert_int_equal(clattn_decoder_state_length(st), T);
        /* After a reset the first token decodes as position 0 again. */
        clattn_decoder_state_reset(st);
        assert_int_equal(clattn_decoder_step(st, x, y), CLATTN_OK);
        float *got = test_tensor_to_host(y);
        for (size_t b = 0; b < B; b++)
            assert_close(got + b * E, full + b * T * E, E, tol);
        free(got), free(full);
        if (half[run]) { /* the halves are used: not the float cache's result */
            print_message("    half cache, %zu kv heads: largest difference %.2e\n",
                          kv_heads[run] ? kv_heads[run] : 4, largest);
            assert_true(largest > 1e-6);
        }
        clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
        clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem);
        clattn_tensor_destroy(&t_full);
        clattn_decoder_state_destroy(&st);
        assert_null(st);
        clattn_decoder_destroy(&dec);
    }
}

/* Prompts of 16 to 33 tokens after a cache of 3 to 36: causal attention with a shift (query i
 * sees keys up to past + i) on the fused kernel's micro-tiled variant (16 queries per work-item,
 * keys in tiles of 16) that CPUs run for every query count. Each chunk equals the teacher-forced
 * causal forward at its positions. */
static void long_prompts_after_a_cache_equal_the_full_forward(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { B = 1, T = 69, S = 5, E = 16 };
    static const size_t chunks[] = {3, 16, 17, 33};
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, E, 2, 1, 32);
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    assert_int_equal(clattn_decoder_init_random(dec, 77), CLATTN_OK);
    static float tgt[B * T * E], mem[B * S * E];
    test_fill_uniform(tgt, B * T * E, 78, -1.0f, 1.0f);
    test_fill_uniform(mem, B * S * E, 79, -1.0f, 1.0f);
    clattn_tensor *t_tgt = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, tgt);
    clattn_tensor *t_mem = test_tensor_from(ctx, 3, (size_t[]){B, S, E}, mem);
    clattn_tensor *t_full = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, NULL);
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = 1;
    assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_full, &params), CLATTN_OK);
    float *full = test_tensor_to_host(t_full);
    clattn_decoder_state *st = NULL;
    assert_int_equal(clattn_decoder_state_create(dec, &st, B, T), CLATTN_OK);
    assert_int_equal(clattn_decoder_state_set_memory(st, t_mem, NULL), CLATTN_OK);
    size_t t0 = 0;
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        size_t n = chunks[c];
        clattn_tensor *x = rows_of(ctx, tgt, B, T, E, t0, n);
        clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, NULL);
        assert_int_equal(clattn_decoder_step(st, x, y), CLATTN_OK);
        float *got = test_tensor_to_host(y);
        assert_close(got, full + t0 * E, n * E, 1e-5);
        free(got);
        clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
        t0 += n;
    }
    assert_int_equal(t0, T);
    free(full);
    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_full);
    clattn_decoder_state_destroy(&st);
    clattn_decoder_destroy(&dec);
}

static void state_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 8, 2, 1, 16);
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    assert_int_equal(clattn_decoder_init_random(dec, 3), CLATTN_OK);
    clattn_decoder_state *st = (clattn_decoder_state *)0x1;
    assert_status_msg(ctx, clattn_decoder_state_create(dec, &st, 0, 4),
                      CLATTN_ERROR_INVALID_ARGUMENT, "batch (0) and capacity (4) must be positive");
    assert_null(st);
    clattn_decoder_state_params sp;
    clattn_decoder_state_params_default(&sp, 2, 4);
    sp.half_cache = 2;
    assert_status_msg(ctx, clattn_decoder_state_create_with(dec, &st, &sp),
                      CLATTN_ERROR_INVALID_ARGUMENT, "half_cache is 2 (0 or 1)");
    sp.half_cache = 1;
    sp.reserved[5] = 1;
    assert_status_msg(ctx, clattn_decoder_state_create_with(dec, &st, &sp),
                      CLATTN_ERROR_INVALID_ARGUMENT, "reserved");
    assert_status_msg(ctx, clattn_decoder_state_create_with(dec, &st, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params is NULL");
    assert_null(st);
    assert_int_equal(clattn_decoder_state_create(dec, &st, 2, 4), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){2, 1, 8}, NULL);
    clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){2, 1, 8}, NULL);
    clattn_tensor *mem3 = test_tensor_from(ctx, 3, (size_t[]){3, 5, 8}, NULL);
    clattn_tensor *x3 = test_tensor_from(ctx, 3, (size_t[]){3, 1, 8}, NULL);
    clattn_tensor *y3 = test_tensor_from(ctx, 3, (size_t[]){3, 1, 8}, NULL);
    assert_status_msg(ctx, clattn_decoder_step(st, x, y), CLATTN_ERROR_INVALID_ARGUMENT,
                      "the state has no memory");
    assert_status_msg(ctx, clattn_decoder_state_set_memory(st, mem3, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "memory has shape [3, 5, 8] but must be");
    clattn_tensor *mem = test_tensor_from(ctx, 3, (size_t[]){2, 5, 8}, NULL);
    assert_int_equal(clattn_decoder_state_set_memory(st, mem, NULL), CLATTN_OK);
    assert_status_msg(ctx, clattn_decoder_step(st, x3, y3), CLATTN_ERROR_INVALID_ARGUMENT,
                      "x has 3 sequences but the state was made for 2");
    assert_int_equal(clattn_decoder_step(st, x, y), CLATTN_OK);
    assert_int_equal(clattn_decoder_state_length(st), 1);
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&y), clattn_tensor_destroy(&mem);
    clattn_tensor_destroy(&mem3), clattn_tensor_destroy(&x3), clattn_tensor_destroy(&y3);
    clattn_decoder_state_destroy(&st);
    clattn_decoder_state_destroy(NULL);
    assert_int_equal(clattn_decoder_state_length(NULL), 0);
    clattn_decoder_destroy(&dec);
}

static void rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 8, 2, 1, 16);
    clattn_decoder *dec = (clattn_decoder *)0x1;
    cfg.nhead = 3;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_decoder_create: invalid argument: d_model 8 is not divisible by "
                      "nhead 3");
    assert_null(dec);
    cfg.nhead = 2;
    cfg.reserved[0] = 1;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    cfg.reserved[0] = 0;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    clattn_tensor *tgt = test_tensor_from(ctx, 3, (size_t[]){2, 3, 8}, NULL);
    clattn_tensor *mem = test_tensor_from(ctx, 3, (size_t[]){2, 5, 8}, NULL);
    clattn_tensor *other_batch = test_tensor_from(ctx, 3, (size_t[]){1, 5, 8}, NULL);
    clattn_tensor *wide = test_tensor_from(ctx, 3, (size_t[]){2, 5, 9}, NULL);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){2, 3, 8}, NULL);
    clattn_tensor *bad_kpm = test_tensor_from(ctx, 2, (size_t[]){2, 4}, NULL);
    assert_status_msg(ctx, clattn_decoder_forward(dec, tgt, mem, out, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "the decoder has no weights");
    assert_int_equal(clattn_decoder_init_random(dec, 7), CLATTN_OK);
    assert_int_equal(clattn_decoder_forward(dec, tgt, mem, out, NULL), CLATTN_OK);
    assert_status_msg(ctx, clattn_decoder_forward(dec, tgt, other_batch, out, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "must share the batch size");
    assert_status_msg(ctx, clattn_decoder_forward(dec, tgt, wide, out, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH,
                      "memory has shape [2, 5, 9] but must be [B, N, d_model] with d_model = 8");
    assert_status_msg(ctx, clattn_decoder_forward(dec, tgt, mem, mem, NULL),
                      CLATTN_ERROR_SHAPE_MISMATCH, "out has shape [2, 5, 8]");
    assert_status_msg(ctx, clattn_decoder_forward(dec, NULL, mem, out, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "tgt is NULL");
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.memory_key_padding_mask = bad_kpm;
    assert_status_msg(ctx, clattn_decoder_forward(dec, tgt, mem, out, &params),
                      CLATTN_ERROR_SHAPE_MISMATCH,
                      "key_padding_mask has shape [2, 4] but must be [B, Nk] = [2, 5]");
    assert_status_msg(NULL, clattn_decoder_forward(NULL, tgt, mem, out, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "decoder is NULL");
    clattn_tensor_destroy(&tgt), clattn_tensor_destroy(&mem), clattn_tensor_destroy(&out);
    clattn_tensor_destroy(&other_batch), clattn_tensor_destroy(&wide);
    clattn_tensor_destroy(&bad_kpm);
    clattn_decoder_destroy(&dec);
    assert_null(dec);
    clattn_decoder_destroy(NULL);
}

/* ---- grouped-query attention ---- */

/* Seeded decoder weights made on request by name, for `heads` query heads of width d and
 * `kv_heads` key/value heads; with `expand`, the same weights with each kv head's K and V rows
 * (and biases) repeated for every query head that reads it: an ordinary multi-head decoder that
 * must compute exactly what the grouped one does. */
typedef struct gqa_weights {
    size_t E, heads, kv_heads, d, ff;
    bool expand;
    size_t count;
    float *arrays[96];
    clattn_host_tensor tensors[96];
} gqa_weights;

static float *seeded(const char *name, const char *part, size_t n, float lo, float hi)
{
    uint64_t seed = 1469598103934665603ull; /* FNV-1a of name and part */
    for (const char *c = name; *c; c++)
        seed = (seed ^ (unsigned char)*c) * 1099511628211ull;
    for (const char *c = part; *c; c++)
        seed = (seed ^ (unsigned char)*c) * 1099511628211ull;
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, seed, lo, hi);
    return x;
}

/* rows [kv_heads·block] → [heads·block] with query head h's block from kv head h / group. */
static void put_heads(const gqa_weights *w, const float *kv, size_t block, float *out)
{
    size_t heads = w->expand ? w->heads : w->kv_heads, group = w->heads / w->kv_heads;
    for (size_t h = 0; h < heads; h++)
        memcpy(out + h * block, kv + (w->expand ? h / group : h) * block, block * sizeof(float));
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const clattn_host_tensor *gqa_lookup(void *user, const char *name)
{
    gqa_weights *w = user;
    size_t E = w->E, d = w->d, qw = w->heads * d, kv = w->kv_heads * d;
    size_t kw = w->expand ? qw : kv; /* the K and V widths in this file */
    size_t rows = 0, cols = 0;
    float *data = NULL;
    if (has_suffix(name, "q_proj_weight")) {
        rows = qw, cols = E, data = seeded(name, "", qw * E, -0.5f, 0.5f);
    } else if (has_suffix(name, "k_proj_weight") || has_suffix(name, "v_proj_weight")) {
        float *base = seeded(name, "", kv * E, -0.5f, 0.5f);
        rows = kw, cols = E, data = malloc(kw * E * sizeof(float));
        put_heads(w, base, d * E, data);
        free(base);
    } else if (has_suffix(name, "in_proj_bias")) {
        float *q = seeded(name, "q", qw, -0.2f, 0.2f), *k = seeded(name, "k", kv, -0.2f, 0.2f);
        float *v = seeded(name, "v", kv, -0.2f, 0.2f);
        rows = qw + 2 * kw, data = malloc(rows * sizeof(float));
        memcpy(data, q, qw * sizeof(float));
        put_heads(w, k, d, data + qw);
        put_heads(w, v, d, data + qw + kw);
        free(q), free(k), free(v);
    } else if (has_suffix(name, "out_proj.weight")) {
        rows = E, cols = qw, data = seeded(name, "", E * qw, -0.3f, 0.3f);
    } else if (has_suffix(name, "linear1.weight")) {
        rows = w->ff, cols = E, data = seeded(name, "", w->ff * E, -0.3f, 0.3f);
    } else if (has_suffix(name, "linear2.weight")) {
        rows = E, cols = w->ff, data = seeded(name, "", E * w->ff, -0.3f, 0.3f);
    } else if (has_suffix(name, "linear1.bias")) {
        rows = w->ff, data = seeded(name, "", w->ff, -0.1f, 0.1f);
    } else if (has_suffix(name, ".weight")) { /* LayerNorms */
        rows = E, data = seeded(name, "", E, 0.8f, 1.2f);
    } else if (has_suffix(name, ".bias")) { /* out_proj, linear2, LayerNorms */
        rows = E, data = seeded(name, "", E, -0.1f, 0.1f);
    } else {
        return NULL;
    }
    assert_true(w->count < 96);
    clattn_host_tensor *t = &w->tensors[w->count];
    w->arrays[w->count++] = data;
    memset(t, 0, sizeof(*t));
    t->data = data;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    return t;
}

static clattn_decoder *gqa_decoder(clattn_context *ctx, size_t kv_heads, bool expand)
{
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 16, 4, 2, 24);
    cfg.num_kv_heads = expand ? 0 : kv_heads;
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    gqa_weights w = {16, 4, kv_heads, 4, 24, expand, 0, {0}, {{0}}};
    clattn_status status = clattn_decoder_load_weights(dec, gqa_lookup, &w);
    for (size_t i = 0; i < w.count; i++)
        free(w.arrays[i]);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    return dec;
}

/* A decoder with 2 (and 1) key/value heads for 4 query heads equals the decoder whose K and V
 * projections repeat each kv head for its query heads (PyTorch's enable_gqa semantics), with a
 * causal target and a padded memory; its state caches the kv heads only. */
static void grouped_query_attention_equals_repeated_kv_heads(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    size_t B = 2, T = 5, S = 4, E = 16;
    float tgt[2 * 5 * 16], mem[2 * 4 * 16], pad[2 * 4] = {0, 0, 0, 1, 0, 0, 1, 1};
    test_fill_uniform(tgt, B * T * E, 61, -1.0f, 1.0f);
    test_fill_uniform(mem, B * S * E, 62, -1.0f, 1.0f);
    clattn_tensor *t_tgt = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, tgt);
    clattn_tensor *t_mem = test_tensor_from(ctx, 3, (size_t[]){B, S, E}, mem);
    clattn_tensor *t_pad = test_tensor_from(ctx, 2, (size_t[]){B, S}, pad);
    clattn_tensor *t_out = test_tensor_from(ctx, 3, (size_t[]){B, T, E}, NULL);
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = 1;
    params.memory_key_padding_mask = t_pad;
    for (size_t kv_heads = 1; kv_heads <= 2; kv_heads++) {
        clattn_decoder *grouped = gqa_decoder(ctx, kv_heads, false);
        clattn_decoder *repeated = gqa_decoder(ctx, kv_heads, true);
        clattn_decoder_config got_cfg;
        assert_int_equal(clattn_decoder_get_config(grouped, &got_cfg), CLATTN_OK);
        assert_int_equal(got_cfg.num_kv_heads, kv_heads);
        assert_int_equal(clattn_decoder_get_config(repeated, &got_cfg), CLATTN_OK);
        assert_int_equal(got_cfg.num_kv_heads, 4); /* 0 selected nhead */
        assert_int_equal(clattn_decoder_forward(repeated, t_tgt, t_mem, t_out, &params),
                         CLATTN_OK);
        float *want = test_tensor_to_host(t_out);
        assert_int_equal(clattn_decoder_forward(grouped, t_tgt, t_mem, t_out, &params),
                         CLATTN_OK);
        float *got = test_tensor_to_host(t_out);
        assert_close(got, want, B * T * E, 1e-5);
        free(got), free(want);
        clattn_decoder_destroy(&grouped), clattn_decoder_destroy(&repeated);
    }
    /* num_kv_heads must divide nhead. */
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 16, 4, 1, 24);
    cfg.num_kv_heads = 3;
    clattn_decoder *dec = NULL;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "num_kv_heads 3 does not divide nhead 4");
    assert_null(dec);
    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_pad);
    clattn_tensor_destroy(&t_out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_pytorch_golden_files),
        cmocka_unit_test(rejects_bad_arguments),
        cmocka_unit_test(incremental_steps_equal_the_full_forward),
        cmocka_unit_test(long_prompts_after_a_cache_equal_the_full_forward),
        cmocka_unit_test(state_rejects_bad_arguments),
        cmocka_unit_test(grouped_query_attention_equals_repeated_kv_heads),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
