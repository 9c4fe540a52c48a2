/*
 * Hugging Face RoBERTa and XLM-RoBERTa folders (model_type "roberta", "xlm-roberta"): small
 * random models against transformers' RobertaModel / XLMRobertaModel in float64
 * (tests/golden/roberta, tools/gen_roberta_golden.py) on the fused and unfused attention paths
 * — right padding, left padding (positions count non-padding ids, not columns), the padding id
 * inside a text, a task model's "roberta." prefix, a pad_token_id other than 1 —, the
 * configuration they map to, the sentence model's truncation length, and bad folders. (The
 * sentence-transformers folders run through examples/embed in tests/test_roberta_embed.sh.)
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROBERTA_DIR GOLDEN_DIR "/roberta"

/* The configuration a case's config.json maps to, against its meta.json. */
static void check_config(const clattn_encoder_config *cfg, json_t *meta)
{
    assert_int_equal(cfg->d_model, json_integer_value(json_object_get(meta, "hidden_size")));
    assert_int_equal(cfg->nhead, json_integer_value(json_object_get(meta, "heads")));
    assert_int_equal(cfg->num_layers, json_integer_value(json_object_get(meta, "num_layers")));
    assert_int_equal(cfg->dim_feedforward,
                     json_integer_value(json_object_get(meta, "intermediate")));
    assert_int_equal(cfg->vocab_size, json_integer_value(json_object_get(meta, "vocab_size")));
    assert_int_equal(cfg->positional, CLATTN_POSITIONAL_LEARNED_PADDED);
    assert_int_equal(cfg->padding_idx, json_integer_value(json_object_get(meta, "pad_token_id")));
    assert_int_equal(cfg->max_positions,
                     json_integer_value(json_object_get(meta, "max_position_embeddings")));
    assert_int_equal(cfg->type_vocab_size,
                     json_integer_value(json_object_get(meta, "type_vocab_size")));
    assert_true(cfg->layer_norm_eps ==
                (float)json_real_value(json_object_get(meta, "layer_norm_eps")));
    const char *act = json_string_value(json_object_get(meta, "hidden_act"));
    assert_int_equal(cfg->activation, strcmp(act, "gelu") == 0 ? CLATTN_ACTIVATION_GELU
                                                               : CLATTN_ACTIVATION_GELU_TANH);
    assert_int_equal(cfg->norm_first, 0);
    assert_int_equal(cfg->embedding_norm, 1);
    assert_true(cfg->embedding_scale == 1.0f);
    assert_int_equal(cfg->relative_attention_buckets, 0);
}

/* Hidden states and mean poolings against transformers on every attention path:
 * roberta_padded (right padding, <pad> typed in a text), xlmr_left_padded (XLM-R, left
 * padding), masked_lm (RobertaForMaskedLM's "roberta." prefix, pad_token_id 3, a row up to the
 * table's last position, the padding id twice inside a row). */
static void small_models_match_transformers(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"roberta_padded", "xlmr_left_padded", "masked_lm"};
    hf_golden_run_cases_on_every_path(f->ctx, ROBERTA_DIR, cases,
                                      sizeof(cases) / sizeof(cases[0]), check_config, 16,
                                      "transformers");
}

/* A temporary folder holding the files `files` (space-separated) of ROBERTA_DIR/<from> and its
 * config.json with the text `edit_from` replaced by `edit_to` (sed's syntax); fails the test
 * when `edit_to` is then not in the file. Remove it with test_temp_dir_remove. */
static void folder_copy(char *dir, size_t size, const char *from, const char *files,
                        const char *edit_from, const char *edit_to)
{
    hf_golden_copy_with_config_edit(dir, size, ROBERTA_DIR, from, files, "clattn_roberta_",
                                    edit_from, edit_to);
}

/* masked_lm's config.json with `from` replaced by `to` must be refused with `status` and
 * `message`. */
static void refused(clattn_context *ctx, const char *from, const char *to, clattn_status status,
                    const char *message)
{
    hf_golden_expect_config_refused(ctx, ROBERTA_DIR, "masked_lm", "clattn_roberta_", from, to,
                                    status, message);
}

static void bad_folders_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    refused(ctx, "\"pad_token_id\": 3", "\"pad_token_id\": 39", CLATTN_ERROR_FORMAT,
            "the field \"pad_token_id\" must be an integer from 0 to max_position_embeddings - 2 "
            "(38): positions start at pad_token_id + 1");
    refused(ctx, "\"pad_token_id\": 3", "\"pad_token_id\": -1", CLATTN_ERROR_FORMAT,
            "the field \"pad_token_id\" must be an integer from 0");
    refused(ctx, "\"pad_token_id\": 3", "\"pad_token_id\": \"3\"", CLATTN_ERROR_FORMAT,
            "the field \"pad_token_id\" must be an integer from 0");
    refused(ctx, "\"pad_token_id\": 3", "\"pad_token_id\": null", CLATTN_ERROR_FORMAT,
            "the field \"pad_token_id\" must be an integer from 0");
    refused(ctx, "\"position_embedding_type\": \"absolute\"",
            "\"position_embedding_type\": \"relative_key\"", CLATTN_ERROR_UNSUPPORTED,
            "position_embedding_type \"relative_key\" is not supported");
    refused(ctx, "\"type_vocab_size\": 1", "\"type_vocab_sizes\": 1", CLATTN_ERROR_FORMAT,
            "the field \"type_vocab_size\" is missing");
    refused(ctx, "\"type_vocab_size\": 1", "\"type_vocab_size\": 2", CLATTN_ERROR_SHAPE_MISMATCH,
            "token_type_embedding.weight has shape [1, 32] but the configuration needs [2, 32]");
    refused(ctx, "\"max_position_embeddings\": 40", "\"max_position_embeddings\": 41",
            CLATTN_ERROR_SHAPE_MISMATCH, "pos_embedding.weight has shape [40, 32]");
    refused(ctx, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", CLATTN_ERROR_FORMAT,
            "config.json's num_hidden_layers is 3 but the file holds layers 0-1 "
            "(roberta.encoder.layer.<n>.*)");
    refused(ctx, "\"model_type\": \"roberta\"", "\"model_type\": \"xlm_roberta\"",
            CLATTN_ERROR_UNSUPPORTED,
            "model_type \"xlm_roberta\" is not supported (supported: \"bert\", \"mpnet\", "
            "\"nomic_bert\", \"roberta\", \"xlm-roberta\"");

    /* A tensor missing under the task model's prefix is named as the file names it. */
    hf_golden_expect_tensor_refused(
        ctx, ROBERTA_DIR, "masked_lm", "clattn_roberta_",
        "roberta.encoder.layer.1.attention.self.key.weight",
        "roberta.encoder.layer.1.attention.self.kxy.weight", CLATTN_ERROR_FORMAT,
        "missing tensor layers.1.self_attn.in_proj_weight (or q_proj_weight, k_proj_weight and "
        "v_proj_weight) (in this file: "
        "roberta.encoder.layer.1.attention.self.{query,key,value}.weight)");

    /* Without pad_token_id, RobertaConfig's default 1; "xlm-roberta" reads the same file. */
    char dir[1024];
    clattn_encoder *enc = NULL;
    clattn_encoder_config cfg;
    folder_copy(dir, sizeof(dir), "masked_lm", "model.safetensors", "\"pad_token_id\": 3,",
                "\"pad_tokn_id\": 3,");
    assert_int_equal(clattn_encoder_load_hf(ctx, &enc, dir), CLATTN_OK);
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.padding_idx, 1);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
    folder_copy(dir, sizeof(dir), "masked_lm", "model.safetensors", "\"model_type\": \"roberta\"",
                "\"model_type\": \"xlm-roberta\"");
    assert_int_equal(clattn_encoder_load_hf(ctx, &enc, dir), CLATTN_OK);
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.padding_idx, 3);
    assert_int_equal(cfg.positional, CLATTN_POSITIONAL_LEARNED_PADDED);
    clattn_encoder_destroy(&enc);
    test_temp_dir_remove(dir);
}

/* The sentence model's length: sentence_bert_config.json's max_seq_length (48), else the
 * position table's rows after padding_idx (130 - 1 - 1 = 128; pad_token_id 5: 124). */
static void sentence_model_max_length(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_sentence_model *model = NULL;
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_load(ctx, &model, ROBERTA_DIR "/roberta"), CLATTN_OK);
    assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);
    assert_int_equal(info.max_length, 48);
    assert_int_equal(info.hidden_size, 32);
    assert_int_equal(info.vocab_size, 1501);
    assert_int_equal(info.pooling, CLATTN_POOLING_MEAN);
    assert_int_equal(info.normalize, 0);
    clattn_sentence_model_destroy(&model);

    static const struct {
        const char *pad;
        size_t max_length;
    } cases[] = {{"\"pad_token_id\": 1", 128}, {"\"pad_token_id\": 5", 124}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char dir[1024];
        folder_copy(dir, sizeof(dir), "roberta", "model.safetensors tokenizer.json",
                    "\"pad_token_id\": 1", cases[i].pad);
        assert_int_equal(clattn_sentence_model_load(ctx, &model, dir), CLATTN_OK);
        assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);
        assert_int_equal(info.max_length, cases[i].max_length);
        clattn_sentence_model_destroy(&model);
        test_temp_dir_remove(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_models_match_transformers),
        cmocka_unit_test(bad_folders_are_named),
        cmocka_unit_test(sentence_model_max_length),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
