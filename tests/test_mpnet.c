/*
 * Hugging Face MPNet folders: small random MPNet models against transformers' MPNetModel in
 * float64 (tests/golden/mpnet, tools/gen_mpnet_golden.py) on the fused and unfused attention
 * paths, the relative position buckets against transformers' for every distance, the encoder's
 * attn_mask parameter, and bad folders. (The real all-mpnet-base-v2 runs through examples/embed
 * in tests/test_mpnet_real.sh, suite real-model.)
 */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "ops/relative_bias.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MPNET_DIR GOLDEN_DIR "/mpnet"

/* The configuration a case's config.json maps to, against its meta.json. */
static void check_config(const clattn_encoder_config *cfg, json_t *meta)
{
    assert_int_equal(cfg->d_model, json_integer_value(json_object_get(meta, "hidden_size")));
    assert_int_equal(cfg->positional, CLATTN_POSITIONAL_LEARNED_PADDED);
    assert_int_equal(cfg->padding_idx, 1);
    assert_int_equal(cfg->relative_attention_buckets, 32);
    assert_int_equal(cfg->relative_attention_max_distance, 128);
    assert_int_equal(cfg->type_vocab_size, 0);
}

/* Hidden states and mean poolings against transformers on every attention path. */
static void small_mpnet_models_match_transformers(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"basic", "long", "masked_lm"};
    hf_golden_run_cases_on_every_path(f->ctx, MPNET_DIR, cases, sizeof(cases) / sizeof(cases[0]),
                                      check_config, 9, "transformers");
}

/* Every relative position -600 .. 600 lands in transformers' bucket (float32 logarithm). */
static void buckets_match_transformers(void **state)
{
    (void)state;
    json_t *root = hf_golden_load_json(MPNET_DIR "/buckets.json");
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
    hf_golden_basic_copy_with_config_edit(dir, size, MPNET_DIR, "clattn_mpnet_", from, to);
}

static void bad_folders_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_encoder *enc = (clattn_encoder *)0x1;
    char dir[1024];
    mpnet_folder(dir, sizeof(dir), "\"model_type\": \"mpnet\"", "\"model_type\": \"deberta\"");
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_UNSUPPORTED,
                      "model_type \"deberta\" is not supported (supported: \"bert\", \"mpnet\"");
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
