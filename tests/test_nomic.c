/*
 * Hugging Face NomicBERT folders (model_type "nomic_bert"): small random models against the
 * float64 reference transcribed from the published modelling code (tests/golden/nomic,
 * tools/gen_nomic_golden.py) on the fused and unfused attention paths, the configuration they
 * map to, and bad folders: every config value the encoder does not implement is refused naming
 * its key. (The sentence-transformers folder tests/golden/nomic/basic runs through examples/embed
 * in tests/test_nomic_embed.sh.)
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOMIC_DIR GOLDEN_DIR "/nomic"

/* The configuration a case's config.json maps to, against its meta.json. */
static void check_config(const clattn_encoder_config *cfg, json_t *meta)
{
    size_t d = (size_t)json_integer_value(json_object_get(meta, "hidden_size"));
    size_t heads = (size_t)json_integer_value(json_object_get(meta, "heads"));
    double fraction = json_real_value(json_object_get(meta, "rotary_emb_fraction"));
    assert_int_equal(cfg->d_model, d);
    assert_int_equal(cfg->nhead, heads);
    assert_int_equal(cfg->num_layers, json_integer_value(json_object_get(meta, "num_layers")));
    assert_int_equal(cfg->dim_feedforward, 256); /* n_inner rounded up as NomciBertGatedMLP */
    assert_int_equal(cfg->vocab_size, json_integer_value(json_object_get(meta, "vocab_size")));
    assert_int_equal(cfg->ffn_gated, 1);
    const char *act = json_string_value(json_object_get(meta, "activation_function"));
    assert_int_equal(cfg->activation, strcmp(act, "swiglu") == 0 ? CLATTN_ACTIVATION_SILU
                                                                 : CLATTN_ACTIVATION_GELU);
    assert_int_equal(cfg->norm_first, 0);
    assert_int_equal(cfg->embedding_norm, 1);
    assert_int_equal(cfg->type_vocab_size, 2);
    assert_true(cfg->layer_norm_eps ==
                (float)json_real_value(json_object_get(meta, "layer_norm_epsilon")));
    if (fraction > 0.0) {
        assert_int_equal(cfg->positional, CLATTN_POSITIONAL_NONE);
        assert_true(cfg->rope_theta ==
                    (float)json_number_value(json_object_get(meta, "rotary_emb_base")));
        assert_int_equal(cfg->rotary_dim, (uint32_t)(fraction * (double)(d / heads)));
        assert_int_equal(cfg->rope_interleaved,
                         json_is_true(json_object_get(meta, "rotary_emb_interleaved")));
    } else {
        assert_int_equal(cfg->positional, CLATTN_POSITIONAL_LEARNED);
        assert_true(cfg->rope_theta == 0.0f);
    }
}

/* Hidden states and mean poolings against the reference on every attention path ("long" runs
 * basic's model: its folder holds inputs and outputs only; no_interleaved_key's config.json
 * leaves rotary_emb_interleaved to NomicBertConfig's default, false). */
static void small_nomic_models_match_reference(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"basic", "long", "partial_interleaved", "pretraining",
                                        "no_interleaved_key"};
    hf_golden_run_cases_on_every_path(f->ctx, NOMIC_DIR, cases, sizeof(cases) / sizeof(cases[0]),
                                      check_config, 19, "the reference");
}

/* A copy of basic's config.json and model.safetensors with config.json's text `from` replaced
 * by `to` (sed's syntax). */
static void nomic_folder(char *dir, size_t size, const char *from, const char *to)
{
    hf_golden_basic_copy_with_config_edit(dir, size, NOMIC_DIR, "clattn_nomic_", from, to);
}

/* basic's config.json with `from` replaced by `to` must be refused with `status` and `message`. */
static void refused(clattn_context *ctx, const char *from, const char *to, clattn_status status,
                    const char *message)
{
    hf_golden_expect_config_refused(ctx, NOMIC_DIR, "basic", "clattn_nomic_", from, to, status,
                                    message);
}

static void unsupported_keys_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const clattn_status unsupported = CLATTN_ERROR_UNSUPPORTED;
    refused(ctx, "\"model_type\": \"nomic_bert\"", "\"model_type\": \"nomic\"", unsupported,
            "model_type \"nomic\" is not supported (supported: \"bert\", \"mpnet\", "
            "\"nomic_bert\"");
    refused(ctx, "\"rotary_scaling_factor\": null", "\"rotary_scaling_factor\": 2", unsupported,
            "rotary_scaling_factor 2 is not supported (dynamic NTK scaling");
    refused(ctx, "\"prenorm\": false", "\"prenorm\": true", unsupported,
            "prenorm true is not supported");
    refused(ctx, "\"activation_function\": \"swiglu\"", "\"activation_function\": \"glu\"",
            unsupported,
            "activation_function \"glu\" is not supported (nomic_bert: swiglu, geglu)");
    refused(ctx, "\"activation_function\": \"swiglu\"", "\"activation_function\": \"gelu\"",
            unsupported, "activation_function \"gelu\" is not supported");
    refused(ctx, "\"rotary_emb_scale_base\": null", "\"rotary_emb_scale_base\": 512", unsupported,
            "rotary_emb_scale_base is not supported (only null)");
    refused(ctx, "\"causal\": false", "\"causal\": true", unsupported,
            "causal true is not supported");
    refused(ctx, "\"use_rms_norm\": false", "\"use_rms_norm\": true", unsupported,
            "use_rms_norm true is not supported");
    refused(ctx, "\"parallel_block\": false", "\"parallel_block\": true", unsupported,
            "parallel_block true is not supported");
    refused(ctx, "\"mlp_fc2_bias\": false", "\"mlp_fc2_bias\": true", unsupported,
            "qkv_proj_bias (false), mlp_fc1_bias (false) and mlp_fc2_bias (true) must be all "
            "true or all false");
    refused(ctx, "\"rotary_emb_fraction\": 1.0", "\"rotary_emb_fraction\": 0.3", unsupported,
            "rotary_emb_fraction 0.3 rotates 2.4 of the 8 channels of a head");
    refused(ctx, "\"rotary_emb_fraction\": 1.0", "\"rotary_emb_fraction\": 1.5", unsupported,
            "rotary_emb_fraction 1.5 rotates 12 of the 8 channels of a head");
    refused(ctx, "\"use_cache\": true", "\"use_cache\": true, \"moe_every_n_layers\": 2",
            unsupported, "moe_every_n_layers 2 is not supported");
    refused(ctx, "\"use_cache\": true", "\"use_cache\": true, \"num_heads_kv\": 2", unsupported,
            "num_heads_kv 2 is not supported (only n_head, 4)");
    refused(ctx, "\"prenorm\": false", "\"prenorm\": 0", CLATTN_ERROR_FORMAT,
            "the field \"prenorm\" must be true or false");
    refused(ctx, "\"n_embd\": 32", "\"n_embdx\": 32", CLATTN_ERROR_FORMAT,
            "the field \"n_embd\" is missing");
    refused(ctx, "\"n_layer\": 2", "\"n_layer\": 3", CLATTN_ERROR_FORMAT,
            "config.json's n_layer is 3 but the file holds layers 0-1 (encoder.layers.<n>.*)");
    /* Fewer positions than a [CLS] and a [SEP]: refused at load (not at every text), naming the
     * key; with learned positions (pretraining) 0 and -1 too. Each other number named alone. */
    const clattn_status format = CLATTN_ERROR_FORMAT;
    refused(ctx, "\"n_positions\": 8192", "\"n_positions\": 1", format,
            "n_positions is 1: it must be a whole number from 2 to 2^30 (the longest input, [CLS] "
            "and [SEP] included; 0 or less: 2048)");
    refused(ctx, "\"n_positions\": 8192", "\"n_positions\": 2.5", format,
            "n_positions is 2.5: it must be a whole number from 2 to 2^30");
    const char *learned[] = {"\"n_positions\": 1", "\"n_positions\": 0", "\"n_positions\": -1"};
    const char *learned_messages[] = {"n_positions is 1: it", "n_positions is 0: it",
                                      "n_positions is -1: it"};
    for (int i = 0; i < 3; i++)
        hf_golden_expect_config_refused(ctx, NOMIC_DIR, "pretraining", "clattn_nomic_",
                                        "\"n_positions\": 24", learned[i], format,
                                        learned_messages[i]);
    hf_golden_expect_config_refused(ctx, NOMIC_DIR, "pretraining", "clattn_nomic_",
                                    "\"n_positions\": 24", "\"n_positions\": 0", format,
                                    "must be a whole number from 2 to 2^30 (the position table's "
                                    "rows: the longest input, [CLS] and [SEP] included)");
    refused(ctx, "\"n_inner\": 256", "\"n_inner\": -3", format,
            "n_inner is -3: it must be a whole number from 0 to 2^30 (0 or null: 8 n_embd / 3)");
    refused(ctx, "\"type_vocab_size\": 2", "\"type_vocab_size\": 1.5", format,
            "type_vocab_size is 1.5: it must be a whole number from 0 to 2^30");
    refused(ctx, "\"pad_vocab_size_multiple\": 8", "\"pad_vocab_size_multiple\": 0", format,
            "pad_vocab_size_multiple is 0: it must be a whole number from 1 to 2^30");
    refused(ctx, "\"layer_norm_epsilon\": 1e-12", "\"layer_norm_epsilon\": 0", format,
            "layer_norm_epsilon must be a positive number (it is 0)");
    refused(ctx, "\"rotary_emb_base\": 1000", "\"rotary_emb_base\": 1e308", format,
            "rotary_emb_base 1e+308 is out of range: a rotary base must be above 0 and below "
            "1e30");
    /* The values that change nothing the encoder computes load: rotary_scaling_factor 0 (the
     * published code tests its truth), a null n_inner of a model 96 wide (256 after rounding);
     * with rotary embeddings an n_positions of 0 or less, which NomicBertPreTrainedModel's
     * from_pretrained makes 2048. */
    char dir[1024];
    clattn_encoder *enc = NULL;
    clattn_encoder_config cfg;
    const char *up_to_zero[] = {"\"n_positions\": 0", "\"n_positions\": -1"};
    for (int i = 0; i < 2; i++) {
        nomic_folder(dir, sizeof(dir), "\"n_positions\": 8192", up_to_zero[i]);
        assert_int_equal(clattn_encoder_load_hf(ctx, &enc, dir), CLATTN_OK);
        assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
        assert_int_equal(cfg.max_positions, 2048);
        clattn_encoder_destroy(&enc);
        test_temp_dir_remove(dir);
    }
    nomic_folder(dir, sizeof(dir), "\"rotary_scaling_factor\": null",
                 "\"rotary_scaling_factor\": 0");
    assert_int_equal(clattn_encoder_load_hf(ctx, &enc, dir), CLATTN_OK);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
    nomic_folder(dir, sizeof(dir), "\"n_inner\": 256", "\"n_inner\": null");
    assert_int_equal(clattn_encoder_load_hf(ctx, &enc, dir), CLATTN_OK);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
}

/* A missing or misshapen NomicBERT tensor is named as the file names it. */
static void bad_tensors_are_named(void **state)
{
    test_fixture *f = *state;
    hf_golden_expect_tensor_refused(f->ctx, NOMIC_DIR, "basic", "clattn_nomic_",
                                    "encoder.layers.1.mlp.fc12.weight",
                                    "encoder.layers.1.mlp.fc12.wxight", CLATTN_ERROR_FORMAT,
                                    "missing tensor layers.1.linear1_gate.weight (in this file: "
                                    "encoder.layers.1.mlp.fc12.weight)");
    /* n_inner 300 (512 after rounding) asks for a wider MLP than the file's 256 */
    refused(f->ctx, "\"n_inner\": 256", "\"n_inner\": 300", CLATTN_ERROR_SHAPE_MISMATCH,
            "layers.0.linear1_gate.weight has shape [256, 32] but the configuration needs "
            "[512, 32]");
    /* basic: no linear biases, LayerNorms with theirs, n_positions the longest input */
    clattn_encoder *enc = NULL;
    clattn_encoder_config cfg;
    assert_int_equal(clattn_encoder_load_hf(f->ctx, &enc, NOMIC_DIR "/basic"), CLATTN_OK);
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.linear_no_bias, 1);
    assert_int_equal(cfg.norm_no_bias, 0);
    assert_int_equal(cfg.max_positions, 8192);
    clattn_encoder_destroy(&enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_nomic_models_match_reference),
        cmocka_unit_test(unsupported_keys_are_named),
        cmocka_unit_test(bad_tensors_are_named),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
