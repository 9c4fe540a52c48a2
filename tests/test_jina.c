/*
 * JinaBERT (jina-embeddings-v2) Hugging Face folders: small random models against the float64
 * PyTorch transcription of jinaai/jina-bert-implementation's modeling_bert.py (tests/golden/jina,
 * tools/gen_jina_golden.py) on every attention path, ALiBi's slopes against that code's
 * _get_alibi_head_slopes, and folders the loader refuses, each with a message naming the key or
 * the tensor. (examples/embed on such a folder: tests/test_jina_embed.sh.)
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JINA_DIR GOLDEN_DIR "/jina"

/* The configuration a case's config.json maps to, against its meta.json. */
static void check_config(const clattn_encoder_config *cfg, json_t *meta)
{
    assert_int_equal(cfg->d_model, json_integer_value(json_object_get(meta, "hidden_size")));
    assert_int_equal(cfg->nhead, json_integer_value(json_object_get(meta, "heads")));
    assert_int_equal(cfg->dim_feedforward,
                     json_integer_value(json_object_get(meta, "intermediate")));
    bool geglu = strcmp(json_string_value(json_object_get(meta, "feed_forward_type")), "geglu")
                 == 0;
    assert_int_equal(cfg->activation, geglu ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU);
    assert_int_equal(cfg->positional, CLATTN_POSITIONAL_NONE);
    assert_int_equal(cfg->alibi, 1);
    assert_int_equal(cfg->ffn_gated, 1);
    assert_int_equal(cfg->linear_no_bias, 0);
    assert_int_equal(cfg->norm_first, 0);
    assert_int_equal(cfg->type_vocab_size, 2);
    assert_int_equal(cfg->embedding_norm, 1);
    assert_true(cfg->rope_theta == 0.0f);
    assert_int_equal(cfg->max_positions, 8192); /* only a length limit: no table */
}

/* Hidden states and mean poolings against the reference on every attention path. */
static void small_jina_models_match_reference(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"basic", "long", "heads6", "reglu"};
    hf_golden_run_cases_on_every_path(f->ctx, JINA_DIR, cases, sizeof(cases) / sizeof(cases[0]),
                                      check_config, 7, "the reference");
}

/* clattn_alibi_slopes (BLOOM's) are, bit for bit, the float32 slopes of Jina's
 * _get_alibi_head_slopes for 1 to 16 heads (4, 6 and 12 among them), and of every case. */
static void alibi_slopes_are_jinas(void **state)
{
    (void)state;
    json_t *root = hf_golden_load_json(JINA_DIR "/slopes.json");
    json_t *all = json_object_get(root, "slopes");
    assert_int_equal(json_object_size(all), 16);
    for (size_t n = 1; n <= 16; n++) {
        char key[8];
        snprintf(key, sizeof(key), "%zu", n);
        json_t *want = json_object_get(all, key);
        assert_int_equal(json_array_size(want), n);
        float got[16];
        assert_int_equal(clattn_alibi_slopes(n, got), CLATTN_OK);
        for (size_t h = 0; h < n; h++) {
            float w = (float)json_real_value(json_array_get(want, h));
            if (got[h] != w)
                print_error("%zu heads, head %zu: %.9g, Jina's %.9g\n", n, h, got[h], w);
            assert_true(got[h] == w);
        }
    }
    json_decref(root);
    static const char *const cases[] = {"basic", "heads6", "reglu"};
    for (size_t c = 0; c < 3; c++) {
        char path[1100];
        snprintf(path, sizeof(path), "%s/%s/meta.json", JINA_DIR, cases[c]);
        json_t *meta = hf_golden_load_json(path);
        json_t *want = json_object_get(meta, "alibi_slopes");
        size_t n = json_array_size(want);
        assert_int_equal(n, json_integer_value(json_object_get(meta, "heads")));
        float got[16];
        assert_int_equal(clattn_alibi_slopes(n, got), CLATTN_OK);
        for (size_t h = 0; h < n; h++)
            assert_true(got[h] == (float)json_real_value(json_array_get(want, h)));
        json_decref(meta);
    }
}

/* A copy of basic's folder with config.json's text `from` replaced by `to` (sed syntax). */
static void jina_folder(char *dir, size_t size, const char *from, const char *to)
{
    hf_golden_basic_copy_with_config_edit(dir, size, JINA_DIR, "clattn_jina_", from, to);
}

/* basic's folder with one of config.json's lines replaced, and the error it gives. */
static void expect_config_error(clattn_context *ctx, const char *from, const char *to,
                                clattn_status status, const char *needle)
{
    hf_golden_expect_config_refused(ctx, JINA_DIR, "basic", "clattn_jina_", from, to, status,
                                    needle);
}

/* basic's folder with a tensor name in model.safetensors changed (same length), and the error. */
static void expect_tensor_error(clattn_context *ctx, const char *from, const char *to,
                                clattn_status status, const char *needle)
{
    hf_golden_expect_tensor_refused(ctx, JINA_DIR, "basic", "clattn_jina_", from, to, status,
                                    needle);
}

static void bad_folders_are_named(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    expect_config_error(ctx, "\"feed_forward_type\": \"geglu\"",
                        "\"feed_forward_type\": \"original\"", CLATTN_ERROR_UNSUPPORTED,
                        "feed_forward_type \"original\" is not supported for JinaBERT "
                        "(\"geglu\", \"reglu\")");
    expect_config_error(ctx, "\"feed_forward_type\": \"geglu\",", "", CLATTN_ERROR_UNSUPPORTED,
                        "feed_forward_type \"(missing)\"");
    expect_config_error(ctx, "\"emb_pooler\": \"mean\"", "\"emb_pooler\": \"cls\"",
                        CLATTN_ERROR_UNSUPPORTED, "emb_pooler must be null or \"mean\"");
    expect_config_error(ctx, "\"position_embedding_type\": \"alibi\"",
                        "\"position_embedding_type\": \"relative_key\"",
                        CLATTN_ERROR_UNSUPPORTED,
                        "position_embedding_type \"relative_key\" is not supported "
                        "(\"absolute\", or \"alibi\" for JinaBERT)");
    /* A BERT config (absolute positions) with a gated feed-forward: JinaBERT's code would build
     * a position table, which jina-embeddings-v2 never has. */
    expect_config_error(ctx, "\"position_embedding_type\": \"alibi\"",
                        "\"position_embedding_type\": \"absolute\"", CLATTN_ERROR_UNSUPPORTED,
                        "feed_forward_type \"geglu\" is supported only with "
                        "position_embedding_type \"alibi\" (JinaBERT)");
    expect_config_error(ctx, "bert-implementation--modeling_bert.JinaBertModel\"",
                        "bert-v2-qk-post-norm--modeling_bert.JinaBertModel\"",
                        CLATTN_ERROR_UNSUPPORTED,
                        "jina-bert-v2-qk-post-norm--modeling_bert.JinaBertModel\": JinaBERT "
                        "with LayerNorms on queries and keys");
    expect_config_error(ctx, "\"type_vocab_size\": 2,", "", CLATTN_ERROR_FORMAT,
                        "the field \"type_vocab_size\" is missing");
    /* The family's name is not a model_type a config may give. */
    expect_config_error(ctx, "\"model_type\": \"bert\"", "\"model_type\": \"bert (JinaBERT)\"",
                        CLATTN_ERROR_UNSUPPORTED,
                        "model_type \"bert (JinaBERT)\" is not supported");
    /* intermediate_size that does not match gated_layers' rows: named with the file's tensor. */
    expect_config_error(ctx, "\"intermediate_size\": 48", "\"intermediate_size\": 47",
                        CLATTN_ERROR_SHAPE_MISMATCH,
                        "linear1_gate.weight has shape [96, 32] but the configuration needs "
                        "[47, 32] (in this file: rows 0 to 46 of "
                        "encoder.layer.0.mlp.gated_layers.weight)");
    /* Missing tensors are named as the file names them. */
    expect_tensor_error(ctx, "encoder.layer.1.mlp.gated_layers.weight",
                        "encoder.layer.1.mlp.gated_layers.wxight", CLATTN_ERROR_FORMAT,
                        "missing tensor layers.1.linear1_gate.weight (in this file: rows 0 to 47 "
                        "of encoder.layer.1.mlp.gated_layers.weight)");
    expect_tensor_error(ctx, "encoder.layer.0.mlp.wo.bias", "encoder.layer.0.mlp.wo.bixs",
                        CLATTN_ERROR_FORMAT,
                        "missing tensor layers.0.linear2.bias (in this file: "
                        "encoder.layer.0.mlp.wo.bias)");
    expect_tensor_error(ctx, "encoder.layer.0.mlp.layernorm.weight",
                        "encoder.layer.0.mlp.layernxrm.weight", CLATTN_ERROR_FORMAT,
                        "(in this file: encoder.layer.0.mlp.layernorm.weight)");
    expect_tensor_error(ctx, "embeddings.token_type_embeddings.weight",
                        "embeddings.token_type_embeddings.wxight", CLATTN_ERROR_FORMAT,
                        "(in this file: embeddings.token_type_embeddings.weight)");
}

/* No position table: config.json's max_position_embeddings (16 here) sizes nothing, and the
 * encoder runs 600 tokens (as Jina's code, which rebuilds its ALiBi tensor for a longer input). */
static void no_position_table(void **state)
{
    test_fixture *f = *state;
    clattn_encoder *enc = NULL;
    char dir[1024];
    jina_folder(dir, sizeof(dir), "\"max_position_embeddings\": 8192",
                "\"max_position_embeddings\": 16");
    assert_int_equal(clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_OK);
    size_t n = 600;
    int64_t *ids = malloc(n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++)
        ids[i] = (int64_t)(5 + i % 90);
    clattn_tensor *out = test_tensor_from(f->ctx, 3, (size_t[]){1, n, 32}, NULL);
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids, 1, n, out, NULL), CLATTN_OK);
    float *got = test_tensor_to_host(out);
    for (size_t i = 0; i < n * 32; i++)
        assert_true(isfinite(got[i]));
    free(got), free(ids);
    clattn_tensor_destroy(&out);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_jina_models_match_reference),
        cmocka_unit_test(alibi_slopes_are_jinas),
        cmocka_unit_test(bad_folders_are_named),
        cmocka_unit_test(no_position_table),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
