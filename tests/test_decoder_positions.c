/*
 * Positions in the decoder's self-attention (RoPE, ALiBi; clattn_decoder_config) against float64
 * PyTorch references of teacher-forced and incremental decoding (tests/golden/decpos_*, written
 * by tools/gen_positional_decoder_golden.py): the teacher-forced forward on the fused and the
 * unfused path, clattn_decoder_step with a float and a half cache against the reference's own
 * incremental decoding, steps against the teacher-forced forward; encoder–decoder model files
 * with metadata positional "rope" | "alibi" (greedy and beam generation, teacher-forced logits);
 * invalid configurations and metadata.
 */
#include "common/test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tolerance of the float cache's steps and the teacher-forced forward against float64: the
 * goldens' "tolerance"; the half cache: their "half_cache_tolerance" (keys and values rounded to
 * 11 significant bits, as clattn_decoder_state_params.half_cache documents). */

static clattn_npy_array *load_npy(const char *dir, const char *name, bool optional, bool ids)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f && optional)
        return NULL;
    if (f)
        fclose(f);
    clattn_npy_array *a = NULL;
    clattn_status status = ids ? clattn_npy_read_i64(&a, path) : clattn_npy_read_f32(&a, path);
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

static size_t size_of(json_t *meta, const char *key)
{
    return (size_t)json_integer_value(json_object_get(meta, key));
}

static double number_of(json_t *meta, const char *key)
{
    return json_number_value(json_object_get(meta, key));
}

static bool flag(json_t *meta, const char *key)
{
    return json_is_true(json_object_get(meta, key));
}

/* Largest errors over all cases, printed at the end of the golden test. */
typedef struct errors {
    double forward, steps, half_steps, steps_vs_forward;
} errors;

static void keep_max(double *worst, double err)
{
    *worst = err > *worst ? err : *worst;
}

/* Rows t0 .. t0 + n of every sequence of x [B, T, E], as a new contiguous [B, n, E] tensor. */
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

/* Feeds tgt [B, T, E] through a new state in meta's "steps" chunks: the outputs [B, T, E]. */
static float *decode_in_steps(clattn_context *ctx, clattn_decoder *dec, json_t *meta,
                              const float *tgt, const clattn_tensor *memory,
                              const clattn_tensor *memory_padding, int half_cache)
{
    size_t B = size_of(meta, "batch"), T = size_of(meta, "tgt_len"), E = size_of(meta, "d_model");
    clattn_decoder_state *st = NULL;
    clattn_decoder_state_params sp;
    clattn_decoder_state_params_default(&sp, B, T);
    sp.half_cache = half_cache;
    assert_int_equal(clattn_decoder_state_create_with(dec, &st, &sp), CLATTN_OK);
    assert_int_equal(clattn_decoder_state_set_memory(st, memory, memory_padding), CLATTN_OK);
    float *out = malloc(B * T * E * sizeof(float));
    json_t *steps = json_object_get(meta, "steps");
    size_t t0 = 0;
    for (size_t s = 0; s < json_array_size(steps); s++) {
        size_t n = (size_t)json_integer_value(json_array_get(steps, s));
        clattn_tensor *x = rows_of(ctx, tgt, B, T, E, t0, n);
        clattn_tensor *y = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, NULL);
        assert_int_equal(clattn_decoder_state_length(st), t0);
        clattn_status status = clattn_decoder_step(st, x, y);
        if (status != CLATTN_OK)
            print_error("%s\n", clattn_last_error(ctx));
        assert_int_equal(status, CLATTN_OK);
        float *got = test_tensor_to_host(y);
        for (size_t b = 0; b < B; b++)
            memcpy(out + (b * T + t0) * E, got + b * n * E, n * E * sizeof(float));
        free(got);
        clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
        t0 += n;
    }
    assert_int_equal(t0, T);
    clattn_decoder_state_destroy(&st);
    return out;
}

/* A decoder configured as the case's meta.json says, with the case's weights. */
static clattn_decoder *case_decoder(clattn_context *ctx, const char *dir, json_t *meta)
{
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, size_of(meta, "d_model"), size_of(meta, "nhead"),
                                  size_of(meta, "num_layers"), size_of(meta, "dim_feedforward"));
    cfg.num_kv_heads = size_of(meta, "num_kv_heads");
    cfg.norm_first = flag(meta, "norm_first");
    cfg.final_norm = flag(meta, "final_norm");
    cfg.layer_norm_eps = (float)number_of(meta, "layer_norm_eps");
    const char *positions = json_string_value(json_object_get(meta, "positions"));
    if (strcmp(positions, "alibi") == 0) {
        cfg.alibi = 1;
    } else {
        assert_string_equal(positions, "rope");
        cfg.rope_theta = (float)number_of(meta, "rope_theta");
        cfg.rotary_dim = (uint32_t)size_of(meta, "rotary_dim");
        cfg.rope_interleaved = flag(meta, "rope_interleaved");
    }
    clattn_decoder *dec = NULL;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    char file[1100];
    snprintf(file, sizeof(file), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, file), CLATTN_OK);
    clattn_status status = clattn_decoder_load_weights(dec, st_lookup, st);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_safetensors_destroy(&st);
    return dec;
}

static void run_decoder_case(clattn_context *ctx, const char *dir, errors *worst)
{
    char file[1100];
    snprintf(file, sizeof(file), "%s/meta.json", dir);
    json_error_t error;
    json_t *meta = json_load_file(file, 0, &error);
    assert_non_null(meta);
    double tol = number_of(meta, "tolerance"), half_tol = number_of(meta, "half_cache_tolerance");
    clattn_decoder *dec = case_decoder(ctx, dir, meta);
    clattn_npy_array *tgt = load_npy(dir, "tgt.npy", false, false);
    clattn_npy_array *memory = load_npy(dir, "memory.npy", false, false);
    clattn_npy_array *want = load_npy(dir, "out.npy", false, false);
    clattn_npy_array *want_steps = load_npy(dir, "out_steps.npy", false, false);
    clattn_npy_array *tkp = load_npy(dir, "tgt_key_padding_mask.npy", true, false);
    clattn_npy_array *mkp = load_npy(dir, "memory_key_padding_mask.npy", true, false);
    size_t numel = want->numel;
    clattn_tensor *t_tgt = test_tensor_from(ctx, 3, tgt->shape, tgt->f32);
    clattn_tensor *t_mem = test_tensor_from(ctx, 3, memory->shape, memory->f32);
    clattn_tensor *t_out = test_tensor_from(ctx, 3, tgt->shape, NULL);
    clattn_tensor *t_tkp = tkp ? test_tensor_from(ctx, 2, tkp->shape, tkp->f32) : NULL;
    clattn_tensor *t_mkp = mkp ? test_tensor_from(ctx, 2, mkp->shape, mkp->f32) : NULL;

    /* Teacher-forced, positions 0 .. T - 1, every mask; both attention paths. */
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = 1;
    params.tgt_key_padding_mask = t_tkp;
    params.memory_key_padding_mask = t_mkp;
    for (int path = 0; path < 2; path++) {
        params.path = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
        assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_out, &params), CLATTN_OK);
        float *got = test_tensor_to_host(t_out);
        assert_close(got, want->f32, numel, tol);
        keep_max(&worst->forward, test_max_abs_diff(got, want->f32, numel));
        free(got);
    }

    /* Incremental decoding against the reference's own, with a float and a half cache. */
    float *steps = decode_in_steps(ctx, dec, meta, tgt->f32, t_mem, t_mkp, 0);
    assert_close(steps, want_steps->f32, numel, tol);
    keep_max(&worst->steps, test_max_abs_diff(steps, want_steps->f32, numel));
    float *half = decode_in_steps(ctx, dec, meta, tgt->f32, t_mem, t_mkp, 1);
    assert_close(half, want_steps->f32, numel, half_tol);
    keep_max(&worst->half_steps, test_max_abs_diff(half, want_steps->f32, numel));

    /* The steps equal this library's teacher-forced forward (without the target padding, which
     * a step does not take) to float32 rounding. */
    params.tgt_key_padding_mask = NULL;
    params.path = CLATTN_PATH_AUTO;
    assert_int_equal(clattn_decoder_forward(dec, t_tgt, t_mem, t_out, &params), CLATTN_OK);
    float *full = test_tensor_to_host(t_out);
    assert_close(steps, full, numel, 1e-5);
    keep_max(&worst->steps_vs_forward, test_max_abs_diff(steps, full, numel));
    free(steps), free(half), free(full);

    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_out);
    clattn_tensor_destroy(&t_tkp), clattn_tensor_destroy(&t_mkp);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&memory);
    clattn_npy_array_destroy(&want), clattn_npy_array_destroy(&want_steps);
    clattn_npy_array_destroy(&tkp), clattn_npy_array_destroy(&mkp);
    clattn_decoder_destroy(&dec);
    json_decref(meta);
}

static bool is_decoder_case(const char *name)
{
    return strncmp(name, "decpos_", 7) == 0 && strncmp(name, "decpos_s2s_", 11) != 0;
}

static void decoder_matches_the_pytorch_references(void **state)
{
    test_fixture *f = *state;
    DIR *d = opendir(GOLDEN_DIR);
    assert_non_null(d);
    struct dirent *e;
    int cases = 0;
    errors worst = {0, 0, 0, 0};
    while ((e = readdir(d))) {
        if (!is_decoder_case(e->d_name))
            continue;
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, e->d_name);
        run_decoder_case(f->ctx, dir, &worst);
        cases++;
    }
    closedir(d);
    assert_true(cases >= 5);
    print_message("    %d cases, largest errors against float64 PyTorch: teacher-forced %.2e "
                  "(fused and unfused), steps %.2e, steps with a half cache %.2e; steps against "
                  "the forward %.2e\n",
                  cases, worst.forward, worst.steps, worst.half_steps, worst.steps_vs_forward);
}

/* ---- encoder–decoder model files ---- */

/* scores [B] against the json array (each step's logits move them: the ids alone may not see a
 * small error in a step). */
static void check_scores(const double *got, json_t *want, const char *what, const char *dir,
                         double *worst)
{
    for (size_t b = 0; b < json_array_size(want); b++) {
        double expected = json_number_value(json_array_get(want, b));
        double err = fabs(got[b] - expected);
        if (!(err <= 1e-4)) {
            print_error("%s: %s score %zu is %.9g, expected %.9g\n", dir, what, b, got[b],
                        expected);
            fail();
        }
        keep_max(worst, err);
    }
}

/* got [B, max_new] and lengths [B] against want [B, L] (L <= max_new, padded with pad_id as the
 * rest of got's rows) and the lengths json array. */
static void check_ids(const int64_t *got, size_t max_new, int64_t pad,
                      const clattn_npy_array *want, const size_t *lengths, json_t *want_lengths,
                      const char *what, const char *dir)
{
    size_t B = want->shape[0], L = want->shape[1];
    assert_true(L <= max_new);
    for (size_t b = 0; b < B; b++) {
        size_t n = (size_t)json_integer_value(json_array_get(want_lengths, b));
        for (size_t t = 0; t < max_new; t++) {
            int64_t expected = t < L ? want->i64[b * L + t] : pad;
            if (got[b * max_new + t] != expected) {
                print_error("%s: %s sentence %zu differs at %zu: %lld, expected %lld\n", dir,
                            what, b, t, (long long)got[b * max_new + t], (long long)expected);
                fail();
            }
        }
        assert_int_equal(lengths[b], n);
    }
}

static void run_model_case(clattn_context *ctx, const char *dir, double *worst_logits,
                           double *worst_scores)
{
    char file[1100];
    snprintf(file, sizeof(file), "%s/meta.json", dir);
    json_error_t error;
    json_t *meta = json_load_file(file, 0, &error);
    assert_non_null(meta);
    snprintf(file, sizeof(file), "%s/model.safetensors", dir);
    clattn_transformer *model = NULL;
    clattn_status status = clattn_transformer_load(ctx, &model, file);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_transformer_info info;
    assert_int_equal(clattn_transformer_get_info(model, &info), CLATTN_OK);
    clattn_npy_array *src = load_npy(dir, "src.npy", false, true);
    clattn_npy_array *pad = load_npy(dir, "src_padding.npy", false, true);
    clattn_npy_array *greedy = load_npy(dir, "greedy.npy", false, true);
    clattn_npy_array *beam = load_npy(dir, "beam.npy", false, true);
    clattn_npy_array *tgt = load_npy(dir, "tgt.npy", false, true);
    clattn_npy_array *logits = load_npy(dir, "logits.npy", false, false);
    size_t B = src->shape[0], S = src->shape[1], L = size_of(meta, "max_new");
    uint8_t *padding = malloc(B * S);
    for (size_t i = 0; i < B * S; i++)
        padding[i] = pad->i64[i] != 0;
    int64_t *out = malloc(B * L * sizeof(int64_t));
    size_t *lengths = malloc(B * sizeof(size_t));
    double *scores = malloc(B * sizeof(double));
    clattn_generate_params gp;
    for (int half = 0; half < 2; half++) { /* greedy with a float and a half cache */
        clattn_generate_params_default(&gp);
        gp.max_new = L;
        gp.half_cache = half;
        gp.alpha = (float)number_of(meta, "alpha");
        gp.scores = half ? NULL : scores;
        assert_int_equal(clattn_transformer_generate(model, src->i64, B, S, padding, &gp, out,
                                                     lengths),
                         CLATTN_OK);
        check_ids(out, L, info.pad_id, greedy, lengths, json_object_get(meta, "greedy_lengths"),
                  half ? "greedy (half cache)" : "greedy", dir);
        if (!half)
            check_scores(scores, json_object_get(meta, "greedy_scores"), "greedy", dir,
                         worst_scores);
    }
    clattn_generate_params_default(&gp);
    gp.max_new = L;
    gp.beam = size_of(meta, "beam");
    gp.alpha = (float)number_of(meta, "alpha");
    gp.scores = scores;
    assert_int_equal(clattn_transformer_generate(model, src->i64, B, S, padding, &gp, out,
                                                 lengths),
                     CLATTN_OK);
    check_ids(out, L, info.pad_id, beam, lengths, json_object_get(meta, "beam_lengths"), "beam", dir);
    check_scores(scores, json_object_get(meta, "beam_scores"), "beam", dir, worst_scores);
    free(scores);

    size_t T = tgt->shape[1], V = logits->shape[2];
    clattn_tensor *t_logits = test_tensor_from(ctx, 3, (size_t[]){B, T, V}, NULL);
    assert_int_equal(clattn_transformer_forward(model, src->i64, B, S, padding, tgt->i64, T,
                                                t_logits),
                     CLATTN_OK);
    float *got = test_tensor_to_host(t_logits);
    assert_close(got, logits->f32, logits->numel, number_of(meta, "tolerance"));
    keep_max(worst_logits, test_max_abs_diff(got, logits->f32, logits->numel));
    free(got), free(out), free(lengths), free(padding);
    clattn_tensor_destroy(&t_logits);
    clattn_npy_array_destroy(&src), clattn_npy_array_destroy(&pad);
    clattn_npy_array_destroy(&greedy), clattn_npy_array_destroy(&beam);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&logits);
    clattn_transformer_destroy(&model);
    json_decref(meta);
}

static void model_files_with_rope_and_alibi_generate_as_pytorch(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"decpos_s2s_rope", "decpos_s2s_alibi"};
    double worst = 0.0, worst_scores = 0.0;
    for (size_t i = 0; i < 2; i++) {
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, cases[i]);
        run_model_case(f->ctx, dir, &worst, &worst_scores);
    }
    print_message("    rope and alibi model files: greedy (float and half cache) and beam ids "
                  "exact, their scores within %.2e; teacher-forced logits within %.2e\n",
                  worst_scores, worst);
}

/* The model file with one metadata value replaced by another of the same length. */
static void write_with_metadata(const char *from, const char *to, const char *old_text,
                                const char *new_text)
{
    size_t size = 0;
    unsigned char *bytes = test_read_file(from, &size);
    assert_non_null(bytes);
    assert_int_equal(strlen(old_text), strlen(new_text));
    unsigned char *at = NULL;
    for (size_t i = 0; i + strlen(old_text) <= size && !at; i++)
        if (memcmp(bytes + i, old_text, strlen(old_text)) == 0)
            at = bytes + i;
    assert_non_null(at);
    memcpy(at, new_text, strlen(new_text));
    test_write_file(to, bytes, size);
    free(bytes);
}

static void model_file_rejects_bad_positional_metadata(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    char dir[512], path[700];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "decpos"), 0);
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    static const struct {
        const char *old_text, *new_text, *message;
    } bad[] = {
        {"\"positional\":\"rope\"", "\"positional\":\"ropy\"",
         "metadata \"positional\" is \"ropy\", not one of none, sinusoidal, rope, alibi"},
        {"\"rotary_dim\":\"4\"", "\"rotary_dim\":\"3\"",
         "rotary_dim is 3: it must be even and at most d_k = 4"},
        {"\"rotary_dim\":\"4\"", "\"rotary_dim\":\"6\"",
         "rotary_dim is 6: it must be even and at most d_k = 4"},
        {"\"rope_theta\":\"10000.0\"", "\"rope_theta\":\"-1000.0\"",
         "metadata \"rope_theta\" is \"-1000.0\", not a positive number"},
        {"\"rope_interleaved\":\"false\"", "\"rope_interleaved\":\"fals0\"",
         "metadata \"rope_interleaved\" is \"fals0\" (true or false)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_with_metadata(GOLDEN_DIR "/decpos_s2s_rope/model.safetensors", path,
                            bad[i].old_text, bad[i].new_text);
        clattn_transformer *model = (clattn_transformer *)0x1;
        clattn_status status = clattn_transformer_load(ctx, &model, path);
        assert_int_not_equal(status, CLATTN_OK);
        assert_null(model);
        const char *message = clattn_last_error(ctx);
        if (!strstr(message, bad[i].message)) {
            print_error("got \"%s\", expected it to contain \"%s\"\n", message, bad[i].message);
            fail();
        }
    }
    remove(path);
    test_temp_dir_remove(dir);
}

/* ---- the configuration ---- */

static void configuration_is_checked(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    /* The new fields came from the reserved bytes: the size is what it was. */
    if (sizeof(size_t) == 8)
        assert_int_equal(sizeof(clattn_decoder_config), 128);
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, 16, 2, 1, 16); /* d_k 8 */
    assert_int_equal(cfg.alibi, 0);
    assert_true(cfg.rope_theta == 0.0f);
    clattn_decoder *dec = (clattn_decoder *)0x1;
    cfg.rope_theta = 10000.0f;
    cfg.rotary_dim = 5;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rotary_dim is 5: it must be even and at most d_k = 8");
    assert_null(dec);
    cfg.rotary_dim = 10;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rotary_dim is 10: it must be even and at most d_k = 8");
    cfg.rotary_dim = 0;
    cfg.rope_theta = -1.0f;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope_theta is -1");
    cfg.rope_theta = 10000.0f;
    cfg.rope_interleaved = 2;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rope_interleaved (2) must be 0 or 1");
    cfg.rope_interleaved = 0;
    cfg.alibi = 3;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "alibi (3) and rope_interleaved (0) must be 0 or 1");
    cfg.alibi = 0;
    cfg.reserved[42] = 1;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "config->reserved is not zero");
    cfg.reserved[42] = 0;
    /* d_k 5 (head_dim_qk): rotary_dim 0 would rotate an odd width. */
    cfg.head_dim_qk = 5;
    assert_status_msg(ctx, clattn_decoder_create(ctx, &dec, &cfg), CLATTN_ERROR_INVALID_ARGUMENT,
                      "rotary_dim 0 rotates all of d_k = 5, which is odd");
    cfg.rotary_dim = 4;
    cfg.alibi = 1;
    assert_int_equal(clattn_decoder_create(ctx, &dec, &cfg), CLATTN_OK);
    clattn_decoder_config got;
    assert_int_equal(clattn_decoder_get_config(dec, &got), CLATTN_OK);
    assert_int_equal(got.alibi, 1);
    assert_int_equal(got.rotary_dim, 4);
    assert_true(got.rope_theta == 10000.0f);
    clattn_decoder_destroy(&dec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decoder_matches_the_pytorch_references),
        cmocka_unit_test(model_files_with_rope_and_alibi_generate_as_pytorch),
        cmocka_unit_test(model_file_rejects_bad_positional_metadata),
        cmocka_unit_test(configuration_is_checked),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
