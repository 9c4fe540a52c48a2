/*
 * Hugging Face ModernBERT folders (model_type "modernbert"): small random models against
 * transformers' ModernBertModel in float64 (tests/golden/modernbert, tools/gen_modernbert_golden.py)
 * on the fused and unfused attention paths — local and global layers, their two rotary bases,
 * the first layer without attn_norm, a ModernBertForMaskedLM file with every bias —, the
 * configuration they map to, and bad folders: every config value the encoder does not implement
 * is refused naming its key. (The sentence-transformers folder tests/golden/modernbert/basic
 * runs through examples/embed in tests/test_modernbert_embed.sh.)
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODERNBERT_DIR GOLDEN_DIR "/modernbert"

static size_t meta_size(json_t *meta, const char *key)
{
    return (size_t)json_integer_value(json_object_get(meta, key));
}

/* The configuration a case's config.json maps to, against its meta.json. */
static void check_config(const clattn_encoder_config *cfg, json_t *meta)
{
    assert_int_equal(cfg->d_model, meta_size(meta, "hidden_size"));
    assert_int_equal(cfg->nhead, meta_size(meta, "heads"));
    assert_int_equal(cfg->num_layers, meta_size(meta, "num_layers"));
    assert_int_equal(cfg->dim_feedforward, meta_size(meta, "intermediate_size"));
    assert_int_equal(cfg->vocab_size, meta_size(meta, "vocab_size"));
    assert_int_equal(cfg->max_positions, meta_size(meta, "max_position_embeddings"));
    assert_int_equal(cfg->ffn_gated, 1);
    const char *act = json_string_value(json_object_get(meta, "hidden_activation"));
    assert_int_equal(cfg->activation, strcmp(act, "gelu") == 0 ? CLATTN_ACTIVATION_GELU
                                                               : CLATTN_ACTIVATION_GELU_TANH);
    assert_int_equal(cfg->norm_first, 1);
    assert_int_equal(cfg->first_norm1_identity, 1);
    assert_int_equal(cfg->final_norm, 1);
    assert_int_equal(cfg->embedding_norm, 1);
    assert_true(cfg->embedding_scale == 1.0f);
    assert_int_equal(cfg->positional, CLATTN_POSITIONAL_NONE);
    assert_int_equal(cfg->type_vocab_size, 0);
    assert_true(cfg->layer_norm_eps == (float)json_real_value(json_object_get(meta, "norm_eps")));
    assert_int_equal(cfg->linear_no_bias,
                     !json_is_true(json_object_get(meta, "attention_bias")));
    assert_int_equal(cfg->norm_no_bias, !json_is_true(json_object_get(meta, "norm_bias")));
    double global = json_number_value(json_object_get(meta, "global_rope_theta"));
    json_t *local = json_object_get(meta, "local_rope_theta");
    assert_true(cfg->rope_theta == (float)global);
    assert_true(cfg->local_rope_theta ==
                (float)(json_is_null(local) ? global : json_number_value(local)));
    assert_int_equal(cfg->rotary_dim, 0);
    assert_int_equal(cfg->rope_interleaved, 0);
    assert_int_equal(cfg->local_window, meta_size(meta, "local_attention") / 2 * 2);
    assert_int_equal(cfg->global_every, meta_size(meta, "global_attn_every_n_layers"));
}

/* Hidden states and mean poolings against transformers on every attention path. */
static void small_modernbert_models_match_transformers(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"basic", "long"};
    hf_golden_run_cases_on_every_path(f->ctx, MODERNBERT_DIR, cases,
                                      sizeof(cases) / sizeof(cases[0]), check_config, 5,
                                      "transformers (float64)");
}

/* A copy of basic's config.json and model.safetensors with config.json's text `from` replaced
 * by `to` (sed's syntax). */
static void modernbert_folder(char *dir, size_t size, const char *from, const char *to)
{
    hf_golden_basic_copy_with_config_edit(dir, size, MODERNBERT_DIR, "clattn_modernbert_", from,
                                          to);
}

/* basic's config.json with `from` replaced by `to` must be refused with `status` and `message`. */
static void refused(clattn_context *ctx, const char *from, const char *to, clattn_status status,
                    const char *message)
{
    hf_golden_expect_config_refused(ctx, MODERNBERT_DIR, "basic", "clattn_modernbert_", from,
                                    to, status, message);
}

/* basic's config.json with `from` replaced by `to` loads into this configuration. */
static clattn_encoder_config loaded_config(clattn_context *ctx, const char *from, const char *to)
{
    char dir[1024];
    clattn_encoder *enc = NULL;
    clattn_encoder_config cfg;
    modernbert_folder(dir, sizeof(dir), from, to);
    clattn_status status = clattn_encoder_load_hf(ctx, &enc, dir);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
    return cfg;
}

static void config_keys_are_read_or_refused(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const clattn_status unsupported = CLATTN_ERROR_UNSUPPORTED, format = CLATTN_ERROR_FORMAT;
    refused(ctx, "\"model_type\": \"modernbert\"", "\"model_type\": \"modern_bert\"", unsupported,
            "model_type \"modern_bert\" is not supported (supported: \"bert\", \"mpnet\", "
            "\"nomic_bert\", \"roberta\", \"xlm-roberta\", \"modernbert\")");
    refused(ctx, "\"hidden_activation\": \"gelu\"", "\"hidden_activation\": \"quick_gelu\"",
            unsupported, "hidden_activation \"quick_gelu\" is not supported (modernbert: gelu,");
    refused(ctx, "\"mlp_bias\": false", "\"mlp_bias\": true", unsupported,
            "attention_bias (false) and mlp_bias (true) must be both true or both false");
    refused(ctx, "\"vocab_size\": 405", "\"vocab_size\": 405, \"rope_scaling\": {\"type\": "
            "\"linear\", \"factor\": 2.0}", unsupported, "rope_scaling is not supported");
    refused(ctx, "\"vocab_size\": 405", "\"vocab_size\": 405, \"partial_rotary_factor\": 0.5",
            unsupported, "partial_rotary_factor 0.5 is not supported (only 1)");
    refused(ctx, "\"vocab_size\": 405", "\"vocab_size\": 405, \"head_dim\": 16", unsupported,
            "head_dim 16 is not supported (only hidden_size / num_attention_heads = 8)");
    /* each rotary base named with the range it must lie in */
    refused(ctx, "\"global_rope_theta\": 160000.0", "\"global_rope_theta\": 0.5", unsupported,
            "global_rope_theta 0.5 is out of range: a rotary base must be at least 1 and below "
            "1e30");
    refused(ctx, "\"global_rope_theta\": 160000.0", "\"global_rope_theta\": 1e308",
            unsupported,
            "global_rope_theta 1e+308 is out of range: a rotary base must be at least 1 and "
            "below 1e30");
    refused(ctx, "\"local_rope_theta\": 10000.0", "\"local_rope_theta\": 1e30", unsupported,
            "local_rope_theta 1e+30 is out of range: a rotary base must be at least 1 and below "
            "1e30");
    /* fewer positions than a [CLS] and a [SEP]: refused at load, not at every text */
    refused(ctx, "\"max_position_embeddings\": 8192", "\"max_position_embeddings\": 1", format,
            "max_position_embeddings is 1: it must be a whole number from 2 to 2^30 (the "
            "longest input, [CLS] and [SEP] included)");
    refused(ctx, "\"max_position_embeddings\": 8192", "\"max_position_embeddings\": 0", format,
            "max_position_embeddings is 0: it must be a whole number from 2 to 2^30");
    refused(ctx, "\"local_attention\": 16", "\"local_attention\": 1", unsupported,
            "local_attention must be a whole number of at least 2 (it is 1)");
    refused(ctx, "\"global_attn_every_n_layers\": 3", "\"global_attn_every_n_layers\": 0",
            format, "global_attn_every_n_layers must be a whole number of at least 1 (it is 0)");
    refused(ctx, "\"norm_bias\": false", "\"norm_bias\": 0", format,
            "the field \"norm_bias\" must be true or false");
    refused(ctx, "\"hidden_size\": 32", "\"hidden_sizes\": 32", format,
            "the field \"hidden_size\" is missing");
    refused(ctx, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 5", format,
            "config.json's num_hidden_layers is 5 but the file holds layers 0-3 (layers.<n>.*)");
    /* What changes nothing the encoder cannot compute loads: local_rope_theta null (the global
     * base) or absent (ModernBertConfig's 10000), an odd local_attention (17 // 2 = 8 keys on
     * either side: the window of 16), global_attn_every_n_layers beyond the layers (only layer
     * 0 is global: as every 4 layers), hidden_activation "silu". */
    clattn_encoder_config cfg = loaded_config(ctx, "\"local_rope_theta\": 10000.0",
                                              "\"local_rope_theta\": null");
    assert_true(cfg.local_rope_theta == 160000.0f);
    cfg = loaded_config(ctx, "\"local_rope_theta\": 10000.0,", "");
    assert_true(cfg.local_rope_theta == 10000.0f);
    cfg = loaded_config(ctx, "\"local_attention\": 16", "\"local_attention\": 17");
    assert_int_equal(cfg.local_window, 16);
    cfg = loaded_config(ctx, "\"global_attn_every_n_layers\": 3",
                        "\"global_attn_every_n_layers\": 100");
    assert_int_equal(cfg.global_every, 4);
    cfg = loaded_config(ctx, "\"hidden_activation\": \"gelu\"", "\"hidden_activation\": \"silu\"");
    assert_int_equal(cfg.activation, CLATTN_ACTIVATION_SILU);
    cfg = loaded_config(ctx, "\"max_position_embeddings\": 8192", "\"max_position_embeddings\": 2");
    assert_int_equal(cfg.max_positions, 2);
}

/* A missing or misshapen ModernBERT tensor is named as the file names it. */
static void bad_tensors_are_named(void **state)
{
    test_fixture *f = *state;
    hf_golden_expect_tensor_refused(f->ctx, MODERNBERT_DIR, "basic", "clattn_modernbert_",
                                    "layers.1.mlp.Wi.weight", "layers.1.mlp.Wx.weight",
                                    CLATTN_ERROR_FORMAT,
                                    "missing tensor layers.1.linear1_gate.weight (in this file: "
                                    "rows 0 to 47 of layers.1.mlp.Wi.weight)");
    hf_golden_expect_tensor_refused(f->ctx, MODERNBERT_DIR, "basic", "clattn_modernbert_",
                                    "layers.2.attn_norm.weight", "layers.2.attn_norx.weight",
                                    CLATTN_ERROR_FORMAT,
                                    "missing tensor layers.2.norm1.weight (in this file: "
                                    "layers.2.attn_norm.weight)");
    /* intermediate_size 50 asks for 100 rows of Wi where the file has 96 */
    refused(f->ctx, "\"intermediate_size\": 48", "\"intermediate_size\": 50",
            CLATTN_ERROR_SHAPE_MISMATCH,
            "layers.0.linear1_gate.weight has shape [96, 32] but the configuration needs [50, 32]");
    /* norm_bias true asks for LayerNorm biases the file does not have */
    refused(f->ctx, "\"norm_bias\": false", "\"norm_bias\": true", CLATTN_ERROR_FORMAT,
            "(in this file: layers.0.mlp_norm.bias)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_modernbert_models_match_transformers),
        cmocka_unit_test(config_keys_are_read_or_refused),
        cmocka_unit_test(bad_tensors_are_named),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
