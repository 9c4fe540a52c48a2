/*
 * Scaled RoPE in decoder-only models (src/nn/rope_scaling.h, src/llm/llm_config.c, llm_hf.c):
 * a small random Llama 3.1-style model (tests/golden/llm_rope, tools/gen_llm_rope_golden.py)
 * against transformers' float64 logits of its Hugging Face folder, within 1e-4 at each of 96
 * positions (where the scaling moves 7 of its 8 rotary pairs: 3 smoothed, 4 four times
 * slower, by up to radians):
 *   - the folder (rope_scaling "llama3"): the rotary inverse frequencies the bytes transformers
 *     computes, the logits teacher-forced and as a prompt then decode steps (the fused
 *     RoPE+append kernel on the scaled table);
 *   - the same weights as llama.cpp's converter writes them, with rope_freqs.weight (frequency
 *     factors), and with rope.scaling.type "linear" against transformers' "linear";
 *   - the same model with its scaling switched off gives logits far from the goldens (so that
 *     the comparisons above can fail);
 *   - what stays refused (yarn in a GGUF or a folder, a llama3 rope_scaling missing a number,
 *     a rope_freqs.weight of the wrong type or length), each named.
 */
#include "common/test_util.h"

#include "llm/llm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROPE_GOLDEN GOLDEN_DIR "/llm_rope"
#define TOL 1e-4

static void golden_path(char *path, size_t size, const char *name)
{
    snprintf(path, size, "%s/%s", ROPE_GOLDEN, name);
}

static clattn_llm_model *load(clattn_context *ctx, const char *name)
{
    char path[512];
    golden_path(path, sizeof(path), name);
    clattn_llm_model *m = NULL;
    if (clattn__llm_model_load(ctx, "test", path, &m) != CLATTN_OK)
        fail_msg("loading %s: %s", path, clattn_last_error(NULL));
    return m;
}

static clattn_npy_array *golden_f32(const char *name)
{
    char path[512];
    golden_path(path, sizeof(path), name);
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_f32(&a, path), CLATTN_OK);
    return a;
}

/* The first n of the golden ids. */
static int32_t *golden_ids(size_t *n)
{
    char path[512];
    golden_path(path, sizeof(path), "ids.npy");
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_i64(&a, path), CLATTN_OK);
    int32_t *ids = malloc(a->numel * sizeof(int32_t));
    assert_non_null(ids);
    for (size_t i = 0; i < a->numel; i++)
        ids[i] = (int32_t)a->i64[i];
    *n = a->numel;
    clattn_npy_array_destroy(&a);
    return ids;
}

/* The model's rotary inverse frequencies against transformers' (golden `name`): within `ulps`
 * units in the last place (0: the same bytes). */
static void check_inv_freq(const clattn_llm_model *m, const char *name, int ulps)
{
    clattn_npy_array *want = golden_f32(name);
    const clattn_block_spec *s = &m->cfg.spec;
    assert_true(s->rope_scaled);
    assert_int_equal(want->numel, s->rotary_dim / 2);
    for (size_t k = 0; k < want->numel; k++) {
        float got = s->rope_inv_freq[k], ref = want->f32[k];
        int32_t a, b;
        memcpy(&a, &got, 4), memcpy(&b, &ref, 4);
        if (abs(a - b) > ulps)
            fail_msg("%s: pair %zu: inv_freq %.9g, transformers %.9g", name, k, (double)got,
                     (double)ref);
    }
    clattn_npy_array_destroy(&want);
}

/* Teacher-forced logits of the first n golden ids against golden `name` [n, vocab]; *worst
 * receives the largest difference. With decode, also a prompt of n / 2 then decode steps of one
 * token, each the bytes of the teacher-forced row. */
static void check_logits(clattn_llm_model *m, const char *name, size_t n, bool decode,
                         double *worst)
{
    size_t all, V = m->cfg.vocab;
    int32_t *ids = golden_ids(&all);
    assert_true(n <= all);
    clattn_npy_array *want = golden_f32(name);
    assert_int_equal(want->numel, n * V);
    float *got = malloc(n * V * sizeof(float)), *step = malloc(V * sizeof(float));
    assert_non_null(got), assert_non_null(step);
    assert_int_equal(clattn__llm_logits(m, "test", ids, n, got), CLATTN_OK);
    *worst = test_max_abs_diff(got, want->f32, n * V);
    assert_close(got, want->f32, n * V, TOL);
    if (decode) {
        clattn_kv_state *kv = NULL;
        size_t slot, prompt = n / 2;
        assert_int_equal(clattn__llm_state_create(m, "test", 1, n, false, &kv), CLATTN_OK);
        assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
        assert_int_equal(clattn__llm_step(m, "test", kv, &slot, 1, prompt, ids, false, step),
                         CLATTN_OK);
        assert_memory_equal(step, got + (prompt - 1) * V, V * sizeof(float));
        for (size_t t = prompt; t < n; t++) {
            assert_int_equal(clattn__llm_step(m, "test", kv, &slot, 1, 1, ids + t, false, step),
                             CLATTN_OK);
            assert_memory_equal(step, got + t * V, V * sizeof(float));
        }
        clattn__kv_state_destroy(&kv);
    }
    free(got), free(step), free(ids);
    clattn_npy_array_destroy(&want);
}

static void hf_llama3_matches_transformers(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_llm_model *m = load(ctx, "hf_llama3");
    check_inv_freq(m, "llama3_inv_freq.npy", 0);
    double worst;
    check_logits(m, "llama3_logits.npy", 96, true, &worst);
    print_message("hf_llama3   max |logit - transformers float64| = %.3g\n", worst);
    clattn__llm_model_free(&m);
}

/* llama.cpp divides each pair's frequency by its factor (1 / ((1 - s) / factor + s) for the
 * smoothed pairs) where transformers mixes the two frequencies: the same up to a rounding. */
static void gguf_rope_freqs_match_transformers(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_llm_model *m = load(ctx, "llama3.gguf");
    assert_true(m->cfg.spec.rope_interleaved);
    check_inv_freq(m, "llama3_inv_freq.npy", 2);
    double worst;
    check_logits(m, "llama3_logits.npy", 96, true, &worst);
    print_message("llama3.gguf max |logit - transformers float64| = %.3g\n", worst);
    clattn__llm_model_free(&m);
}

static void gguf_linear_matches_transformers(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_llm_model *m = load(ctx, "linear.gguf");
    check_inv_freq(m, "linear_inv_freq.npy", 0);
    double worst;
    check_logits(m, "linear_logits.npy", 48, false, &worst);
    print_message("linear.gguf max |logit - transformers float64| = %.3g\n", worst);
    clattn__llm_model_free(&m);
}

/* The folder with its scaling switched off after loading: far from the goldens at these
 * positions (at least 0.5; the scaled model is within 1e-4). */
static void unscaled_rope_differs(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_llm_model *m = load(ctx, "hf_llama3");
    m->stack.spec.rope_scaled = false;
    size_t n, V = m->cfg.vocab;
    int32_t *ids = golden_ids(&n);
    clattn_npy_array *want = golden_f32("llama3_logits.npy");
    float *got = malloc(n * V * sizeof(float));
    assert_non_null(got);
    assert_int_equal(clattn__llm_logits(m, "test", ids, n, got), CLATTN_OK);
    double diff = test_max_abs_diff(got, want->f32, n * V);
    print_message("unscaled    max |logit - transformers float64| = %.3g\n", diff);
    assert_true(diff > 0.5);
    free(got), free(ids);
    clattn_npy_array_destroy(&want);
    clattn__llm_model_free(&m);
}

/* ---- refusals ---- */

/* llama3.gguf's or linear.gguf's bytes with `len` bytes at `skip` past the first `after`
 * replaced by `to`, as dir/out. */
static void write_patched(const char *dir, const char *out, const char *from, const char *after,
                          size_t skip, const void *to, size_t len)
{
    char path[512];
    golden_path(path, sizeof(path), from);
    size_t size;
    unsigned char *bytes = test_read_file(path, &size);
    size_t alen = strlen(after), at = SIZE_MAX;
    for (size_t i = 0; i + alen <= size && at == SIZE_MAX; i++)
        if (memcmp(bytes + i, after, alen) == 0)
            at = i + alen + skip;
    assert_true(at != SIZE_MAX && at + len <= size);
    memcpy(bytes + at, to, len);
    snprintf(path, sizeof(path), "%s/%s", dir, out);
    test_write_file(path, bytes, size);
    free(bytes);
}

static void refused(clattn_context *ctx, const char *path, clattn_status status,
                    const char *needle)
{
    clattn_llm_model *m = NULL;
    assert_status_msg(NULL, clattn__llm_model_load(ctx, "test", path, &m), status, needle);
    assert_null(m);
}

static void refusals_name_what_is_refused(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    char dir[256], path[512];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-llm-rope-"), 0);
    /* rope.scaling.type's value, after its type (u32) and length (u64): "linear" -> "yarn". */
    write_patched(dir, "yarn.gguf", "linear.gguf", "llama.rope.scaling.type", 12, "yarn\0\0", 6);
    /* rope_freqs.weight's type, after its name, n_dims (u32) and ne (u64): F16 (1). */
    uint32_t f16 = 1;
    write_patched(dir, "f16.gguf", "llama3.gguf", "rope_freqs.weight", 12, &f16, 4);
    /* its length: 4 factors for 8 pairs. */
    uint64_t four = 4;
    write_patched(dir, "short.gguf", "llama3.gguf", "rope_freqs.weight", 4, &four, 8);
    snprintf(path, sizeof(path), "%s/yarn.gguf", dir);
    refused(ctx, path, CLATTN_ERROR_UNSUPPORTED,
            "'llama.rope.scaling.type' is 'yarn': this RoPE scaling is not supported");
    snprintf(path, sizeof(path), "%s/f16.gguf", dir);
    refused(ctx, path, CLATTN_ERROR_FORMAT, "tensor rope_freqs.weight must be float32 [8]");
    snprintf(path, sizeof(path), "%s/short.gguf", dir);
    refused(ctx, path, CLATTN_ERROR_FORMAT, "tensor rope_freqs.weight must be float32 [8]");
    test_temp_dir_remove(dir);

    /* A folder's config.json (read before any weight). */
#define CONFIG_HEAD                                                                        \
    "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 32, "          \
    "\"intermediate_size\": 32, \"num_attention_heads\": 2, \"vocab_size\": 64, "
    static const struct {
        const char *config, *needle;
        clattn_status status;
    } configs[] = {
        {CONFIG_HEAD "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}",
         "\"rope_scaling\" of type 'yarn' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {CONFIG_HEAD "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 4.0}}",
         "\"rope_scaling\" of type 'dynamic' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {CONFIG_HEAD "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}",
         "\"rope_scaling\" of type 'llama3' needs \"low_freq_factor\"", CLATTN_ERROR_FORMAT},
        {CONFIG_HEAD "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": -2}}",
         "needs \"factor\", a positive number", CLATTN_ERROR_FORMAT},
        {CONFIG_HEAD "\"rope_scaling\": \"llama3\"}",
         "\"rope_scaling\" must be an object or null", CLATTN_ERROR_FORMAT},
    };
#undef CONFIG_HEAD
    for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
        assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-llm-rope-hf-"), 0);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        test_write_file(path, configs[i].config, strlen(configs[i].config));
        refused(ctx, dir, configs[i].status, configs[i].needle);
        test_temp_dir_remove(dir);
    }
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hf_llama3_matches_transformers),
        cmocka_unit_test(gguf_rope_freqs_match_transformers),
        cmocka_unit_test(gguf_linear_matches_transformers),
        cmocka_unit_test(unscaled_rope_differs),
        cmocka_unit_test(refusals_name_what_is_refused),
    };
    const char *only = getenv("CLATTN_TEST_FILTER");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
