/*
 * Hugging Face MPNet folders: small random MPNet models against transformers' MPNetModel in
 * float64 (tests/golden/mpnet, tools/gen_mpnet_golden.py) on the fused and unfused attention
 * paths, the relative position buckets against transformers' for every distance, the encoder's
 * attn_mask parameter, and bad folders. (The real all-mpnet-base-v2 runs through examples/embed
 * in tests/test_mpnet_real.sh, suite real-model.)
 */
#include "common/test_util.h"
#include "ops/relative_bias.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MPNET_DIR GOLDEN_DIR "/mpnet"

static json_t *load_json(const char *path)
{
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root)
        print_error("%s: %s\n", path, error.text);
    assert_non_null(root);
    return root;
}

static clattn_npy_array *load_npy(const char *dir, const char *name, bool ints)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    clattn_npy_array *a = NULL;
    clattn_status status = ints ? clattn_npy_read_i64(&a, path) : clattn_npy_read_f32(&a, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return a;
}

/* One case on one attention path: hidden states and mean poolings against transformers. */
static double run_case(clattn_context *ctx, const char *name, clattn_attention_path path)
{
    char dir[1024], meta_path[1100];
    snprintf(dir, sizeof(dir), "%s/%s", MPNET_DIR, name);
    snprintf(meta_path, sizeof(meta_path), "%s/meta.json", dir);
    json_t *meta = load_json(meta_path);
    double tol = json_real_value(json_object_get(meta, "tolerance"));
    assert_true(tol > 0.0 && tol <= 1e-5);
    clattn_encoder *enc = NULL;
    clattn_status status = clattn_encoder_load_hf(ctx, &enc, dir);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_encoder_config cfg;
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.d_model, json_integer_value(json_object_get(meta, "hidden_size")));
    assert_int_equal(cfg.positional, CLATTN_POSITIONAL_LEARNED_PADDED);
    assert_int_equal(cfg.padding_idx, 1);
    assert_int_equal(cfg.relative_attention_buckets, 32);
    assert_int_equal(cfg.relative_attention_max_distance, 128);
    assert_int_equal(cfg.type_vocab_size, 0);

    clattn_npy_array *ids = load_npy(dir, "input_ids.npy", true);
    clattn_npy_array *attention = load_npy(dir, "attention_mask.npy", true);
    clattn_npy_array *expect = load_npy(dir, "last_hidden_state.npy", false);
    size_t B = ids->shape[0], N = ids->shape[1], d = cfg.d_model;
    float *pad = malloc(B * N * sizeof(float));
    for (size_t i = 0; i < B * N; i++)
        pad[i] = attention->i64[i] ? 0.0f : 1.0f;
    clattn_tensor *mask = test_tensor_from(ctx, 2, (size_t[]){B, N}, pad);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = mask;
    params.path = path;
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, &params), CLATTN_OK);
    float *got = test_tensor_to_host(out);
    double worst = test_max_abs_diff(got, expect->f32, B * N * d);
    assert_close(got, expect->f32, B * N * d, tol);
    free(got);

    static const char *const files[2] = {"mean_pooled.npy", "mean_pooled_normalized.npy"};
    clattn_tensor *pooled = test_tensor_from(ctx, 2, (size_t[]){B, d}, NULL);
    for (int normalize = 0; normalize <= 1; normalize++) {
        clattn_npy_array *want = load_npy(dir, files[normalize], false);
        assert_int_equal(clattn_pool(ctx, out, mask, CLATTN_POOLING_MEAN, normalize, pooled),
                         CLATTN_OK);
        got = test_tensor_to_host(pooled);
        double err = test_max_abs_diff(got, want->f32, B * d);
        worst = err > worst ? err : worst;
        assert_close(got, want->f32, B * d, tol);
        free(got);
        clattn_npy_array_destroy(&want);
    }
    clattn_tensor_destroy(&pooled);
    clattn_tensor_destroy(&mask), clattn_tensor_destroy(&out);
    clattn_npy_array_destroy(&ids), clattn_npy_array_destroy(&attention);
    clattn_npy_array_destroy(&expect);
    free(pad);
    clattn_encoder_destroy(&enc);
    json_decref(meta);
    return worst;
}

static void small_mpnet_models_match_transformers(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"basic", "long", "masked_lm"};
    static const struct {
        clattn_attention_path path;
        const char *name;
    } paths[] = {{CLATTN_PATH_AUTO, "auto"},
                 {CLATTN_PATH_FUSED, "fused"},
                 {CLATTN_PATH_UNFUSED, "unfused"}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
            double err = run_case(f->ctx, cases[c], paths[p].path);
            print_message("    %-9s %-7s largest error against transformers %.2e\n", cases[c],
                          paths[p].name, err);
        }
}

/* Every relative position -600 .. 600 lands in transformers' bucket (float32 logarithm). */
static void buckets_match_transformers(void **state)
{
    (void)state;
    json_t *root = load_json(MPNET_DIR "/buckets.json");
    long long first = json_integer_value(json_object_get(root, "first_relative_position"));
    json_t *buckets = json_object_get(root, "buckets");
    assert_int_equal(json_array_size(buckets), 1201);
    for (size_t i = 0; i < json_array_size(buckets); i++) {
        long long relative = first + (long long)i;
        size_t want = (size_t)json_integer_value(json_array_get(buckets, i));
        size_t got = clattn__relative_bucket(relative, 32, 128);
        if (got != want)
            print_error("relative position %lld: bucket %zu, transformers %zu\n", relative, got,
                        want);
        assert_int_equal(got, want);
    }
    /* The [H, N, N] bias reads the table at bucket(j - i). */
    float table[32 * 2], bias[2 * 5 * 5];
    for (int i = 0; i < 64; i++)
        table[i] = (float)i;
    clattn__relative_bias_fill(table, 32, 2, 128, 5, bias);
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 5; j++)
                assert_true(bias[(h * 5 + i) * 5 + j] ==
                            table[clattn__relative_bucket((long long)j - (long long)i, 32, 128) *
                                      2 + h]);
    json_decref(root);
}

/* A copy of basic's folder with config.json's text `from` replaced by `to`. */
static void mpnet_folder(char *dir, size_t size, const char *from, const char *to)
{
    assert_int_equal(test_temp_dir_create(dir, size, "clattn_mpnet_"), 0);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cp %s/basic/model.safetensors %s/ && sed 's/%s/%s/' %s/basic/config.json "
             "> %s/config.json && grep -q '%s' %s/config.json",
             MPNET_DIR, dir, from, to, MPNET_DIR, dir, to, dir);
    assert_int_equal(system(cmd), 0);
}

static void bad_folders_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_encoder *enc = (clattn_encoder *)0x1;
    char dir[1024];
    mpnet_folder(dir, sizeof(dir), "\"model_type\": \"mpnet\"", "\"model_type\": \"roberta\"");
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_UNSUPPORTED,
                      "model_type \"roberta\" is not supported (supported: \"bert\", \"mpnet\"");
    assert_null(enc);
    test_temp_dir_remove(dir);
    mpnet_folder(dir, sizeof(dir), "\"relative_attention_num_buckets\": 32",
                 "\"relative_attention_num_buckets\": 64");
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_UNSUPPORTED,
                      "relative_attention_num_buckets must be 32");
    test_temp_dir_remove(dir);
    /* A missing MPNet tensor is named as the file names it. */
    mpnet_folder(dir, sizeof(dir), "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 2");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "sed -i 's/encoder.relative_attention_bias.weight/encoder.relative_attention_bias.wxight/' "
             "%s/model.safetensors",
             dir);
    assert_int_equal(system(cmd), 0);
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_FORMAT,
                      "encoder.relative_attention_bias.weight");
    test_temp_dir_remove(dir);
}

/* The forward parameters' attn_mask: refused next to a relative position bias; on an encoder
 * without one, an additive -inf column equals the key padding mask on that key. */
static void attn_mask_parameter(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_load_hf(ctx, &enc, MPNET_DIR "/basic"), CLATTN_OK);
    const int64_t ids[4] = {0, 7, 9, 2};
    float zeros[16] = {0};
    clattn_tensor *mask = test_tensor_from(ctx, 2, (size_t[]){4, 4}, zeros);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){1, 4, 32}, NULL);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    assert_int_equal(params.attn_mask_kind, CLATTN_MASK_BOOL);
    params.attn_mask = mask;
    assert_status_msg(ctx, clattn_encoder_forward_tokens(enc, ids, 1, 4, out, &params),
                      CLATTN_ERROR_UNSUPPORTED, "relative position bias");
    clattn_encoder_destroy(&enc);

    /* A plain encoder with random weights. */
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, 32, 4, 2, 48);
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 7), CLATTN_OK);
    float *x = malloc(4 * 32 * sizeof(float));
    test_fill_uniform(x, 4 * 32, 11, -1.0f, 1.0f);
    clattn_tensor *in = test_tensor_from(ctx, 3, (size_t[]){1, 4, 32}, x);
    float column[16], pad[4] = {0, 0, 1, 0};
    for (int i = 0; i < 16; i++)
        column[i] = i % 4 == 2 ? -INFINITY : 0.0f;
    clattn_tensor *additive = test_tensor_from(ctx, 2, (size_t[]){4, 4}, column);
    clattn_tensor *padding = test_tensor_from(ctx, 2, (size_t[]){1, 4}, pad);
    clattn_tensor *out2 = test_tensor_from(ctx, 3, (size_t[]){1, 4, 32}, NULL);
    clattn_encoder_forward_params_default(&params);
    params.attn_mask = additive;
    params.attn_mask_kind = CLATTN_MASK_ADDITIVE;
    assert_int_equal(clattn_encoder_forward(enc, in, out, &params), CLATTN_OK);
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = padding;
    assert_int_equal(clattn_encoder_forward(enc, in, out2, &params), CLATTN_OK);
    float *a = test_tensor_to_host(out), *b = test_tensor_to_host(out2);
    assert_close(a, b, 4 * 32, 1e-6);
    /* A wrong shape is named. */
    clattn_tensor *wrong = test_tensor_from(ctx, 2, (size_t[]){3, 4}, zeros);
    clattn_encoder_forward_params_default(&params);
    params.attn_mask = wrong;
    assert_status_msg(ctx, clattn_encoder_forward(enc, in, out, &params),
                      CLATTN_ERROR_SHAPE_MISMATCH, "attn_mask has shape [3, 4]");
    free(a), free(b), free(x);
    clattn_tensor_destroy(&wrong), clattn_tensor_destroy(&in);
    clattn_tensor_destroy(&additive), clattn_tensor_destroy(&padding);
    clattn_tensor_destroy(&mask), clattn_tensor_destroy(&out), clattn_tensor_destroy(&out2);
    clattn_encoder_destroy(&enc);
}

/* LEARNED_PADDED's configuration checks, and the position table's limit (padding_idx + 1 +
 * tokens rows). */
static void padded_positions_are_checked(void **state)
{
    test_fixture *f = *state;
    clattn_encoder_config cfg;
    clattn_encoder *enc = NULL;
    clattn_encoder_config_default(&cfg, 32, 4, 1, 48);
    cfg.vocab_size = 10;
    cfg.positional = CLATTN_POSITIONAL_LEARNED_PADDED;
    cfg.max_positions = 6;
    cfg.padding_idx = 5;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &cfg),
                      CLATTN_ERROR_INVALID_ARGUMENT, "padding_idx 5");
    cfg.padding_idx = 1;
    cfg.relative_attention_buckets = 7;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &cfg),
                      CLATTN_ERROR_INVALID_ARGUMENT, "relative_attention_buckets 7");
    cfg.relative_attention_buckets = 8;
    assert_int_equal(clattn_encoder_create(f->ctx, &enc, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_init_random(enc, 3), CLATTN_OK);
    clattn_encoder_config got;
    assert_int_equal(clattn_encoder_get_config(enc, &got), CLATTN_OK);
    assert_int_equal(got.relative_attention_max_distance, 128);
    const int64_t ids[5] = {0, 4, 4, 4, 2};
    clattn_tensor *out = test_tensor_from(f->ctx, 3, (size_t[]){1, 5, 32}, NULL);
    assert_status_msg(f->ctx, clattn_encoder_forward_tokens(enc, ids, 1, 5, out, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "positions 2 to 6");
    clattn_tensor *four = test_tensor_from(f->ctx, 3, (size_t[]){1, 4, 32}, NULL);
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids, 1, 4, four, NULL), CLATTN_OK);
    clattn_tensor_destroy(&out), clattn_tensor_destroy(&four);
    clattn_encoder_destroy(&enc);
}

/* MPNet's tokenizer.json: <s> and </s> from RobertaProcessing, <pad> from padding.pad_id. */
static void roberta_processing_template(void **state)
{
    (void)state;
    char dir[1024], path[1100];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn_mpnet_tok_"), 0);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    static const char json[] =
        "{\"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, "
        "\"handle_chinese_chars\": true, \"strip_accents\": null, \"lowercase\": true},"
        "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
        "\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 2], "
        "\"cls\": [\"<s>\", 0], \"trim_offsets\": true, \"add_prefix_space\": false},"
        "\"padding\": {\"pad_id\": 1, \"pad_token\": \"<pad>\"},"
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
        "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100, "
        "\"vocab\": {\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"[UNK]\": 3, \"[PAD]\": 4, "
        "\"hello\": 5, \"world\": 6}}}";
    test_write_file(path, json, strlen(json));
    clattn_tokenizer *tok = NULL;
    assert_int_equal(clattn_tokenizer_load(&tok, path), CLATTN_OK);
    clattn_tokenizer_special special = clattn_tokenizer_special_ids(tok);
    assert_int_equal(special.cls, 0);
    assert_int_equal(special.sep, 2);
    assert_int_equal(special.pad, 1); /* padding.pad_id, not the vocabulary's [PAD] (4) */
    int32_t ids[8];
    size_t count = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, "Hello WORLD!", 12, 0, ids, 8, &count),
                     CLATTN_OK);
    assert_int_equal(count, 5);
    const int32_t want[5] = {0, 5, 6, 3, 2};
    assert_memory_equal(ids, want, sizeof(want));
    clattn_tokenizer_destroy(&tok);
    /* A folder's default length: MPNet's positions start at 2, so 40 rows hold 38 tokens. */
    snprintf(path, sizeof(path), "%s/config.json", dir);
    static const char config[] = "{\"model_type\": \"mpnet\", \"max_position_embeddings\": 40}";
    test_write_file(path, config, strlen(config));
    assert_int_equal(clattn_tokenizer_load(&tok, dir), CLATTN_OK);
    assert_int_equal(clattn_tokenizer_max_length(tok), 38);
    clattn_tokenizer_destroy(&tok);
    test_temp_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_mpnet_models_match_transformers),
        cmocka_unit_test(buckets_match_transformers),
        cmocka_unit_test(bad_folders_are_named),
        cmocka_unit_test(attn_mask_parameter),
        cmocka_unit_test(padded_positions_are_checked),
        cmocka_unit_test(roberta_processing_template),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
