/*
 * Hugging Face BERT folders, pooling and sentence embeddings: small random BERT models against
 * transformers' float64 outputs (tests/golden/bert, tools/gen_bert_golden.py), learned
 * positions, bad folders, and the real all-MiniLM-L6-v2 against sentence-transformers
 * (tests/golden/minilm, tools/gen_minilm_golden.py).
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BERT_DIR GOLDEN_DIR "/bert"

/* One golden case: the encoder's hidden states and every pooling, against transformers. */
static double run_case(clattn_context *ctx, const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", BERT_DIR, name);
    json_t *meta = hf_golden_load_meta(dir);
    double tol = json_real_value(json_object_get(meta, "tolerance"));
    assert_true(tol > 0.0);
    clattn_encoder *enc = hf_golden_load_encoder(ctx, dir);
    clattn_encoder_config cfg;
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.d_model, json_integer_value(json_object_get(meta, "hidden_size")));
    assert_int_equal(cfg.num_layers, json_integer_value(json_object_get(meta, "num_layers")));
    assert_int_equal(cfg.positional, CLATTN_POSITIONAL_LEARNED);

    clattn_npy_array *ids = hf_golden_load_npy(dir, "input_ids.npy", true);
    clattn_npy_array *types = hf_golden_load_npy(dir, "token_type_ids.npy", true);
    clattn_npy_array *attention = hf_golden_load_npy(dir, "attention_mask.npy", true);
    clattn_npy_array *expect = hf_golden_load_npy(dir, "last_hidden_state.npy", false);
    size_t B = ids->shape[0], N = ids->shape[1], d = cfg.d_model;
    clattn_tensor *mask = hf_golden_key_padding_mask(ctx, attention);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = mask;
    params.token_type_ids = types->i64;
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, &params), CLATTN_OK);
    double worst = hf_golden_compare_tensor(out, expect->f32, tol);

    static const struct {
        const char *file;
        clattn_pooling pooling;
        int normalize;
    } poolings[] = {{"mean_pooled.npy", CLATTN_POOLING_MEAN, 0},
                    {"mean_pooled_normalized.npy", CLATTN_POOLING_MEAN, 1},
                    {"cls_pooled.npy", CLATTN_POOLING_CLS, 0}};
    clattn_tensor *pooled = test_tensor_from(ctx, 2, (size_t[]){B, d}, NULL);
    for (size_t p = 0; p < 3; p++) {
        double err = hf_golden_compare_pooling(ctx, out, mask, poolings[p].pooling,
                                               poolings[p].normalize, pooled, dir,
                                               poolings[p].file, tol);
        worst = err > worst ? err : worst;
    }
    clattn_tensor_destroy(&pooled);
    clattn_tensor_destroy(&mask), clattn_tensor_destroy(&out);
    clattn_npy_array_destroy(&ids), clattn_npy_array_destroy(&types);
    clattn_npy_array_destroy(&attention), clattn_npy_array_destroy(&expect);
    clattn_encoder_destroy(&enc);
    json_decref(meta);
    return worst;
}

static void small_bert_models_match_transformers(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"gelu", "gelu_new", "relu", "prefixed", "single"};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double err = run_case(f->ctx, cases[i]);
        worst = err > worst ? err : worst;
    }
    print_message("    largest error against transformers over %zu cases: %.2e\n",
                  sizeof(cases) / sizeof(cases[0]), worst);
}

/* Without token types (type 0 everywhere) and without a mask the hidden states differ from the
 * golden run: the inputs really reach the kernels. */
static void token_types_and_mask_matter(void **state)
{
    test_fixture *f = *state;
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/gelu", BERT_DIR);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_OK);
    clattn_npy_array *ids = hf_golden_load_npy(dir, "input_ids.npy", true);
    clattn_npy_array *expect = hf_golden_load_npy(dir, "last_hidden_state.npy", false);
    size_t B = ids->shape[0], N = ids->shape[1], d = expect->shape[2];
    clattn_tensor *out = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, NULL);
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, NULL), CLATTN_OK);
    float *got = test_tensor_to_host(out);
    assert_true(test_max_abs_diff(got, expect->f32, B * N * d) > 1e-2);
    free(got);
    /* Bad token types are named. */
    int64_t *types = calloc(B * N, sizeof(int64_t));
    types[3] = 2; /* type_vocab_size is 2 */
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.token_type_ids = types;
    assert_status_msg(f->ctx, clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, &params),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "token type id 2 at [0, 3] is outside the vocabulary [0, 2)");
    /* Positions beyond max_position_embeddings (64) are refused before any work. */
    params.token_type_ids = NULL;
    params.position_offset = 60;
    assert_status_msg(f->ctx, clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, &params),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "positions 60 to 68 are beyond the learned position table's 64 rows");
    free(types);
    clattn_tensor_destroy(&out);
    clattn_npy_array_destroy(&ids), clattn_npy_array_destroy(&expect);
    clattn_encoder_destroy(&enc);
}

static void bad_folders_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_encoder *enc = (clattn_encoder *)0x1;
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, BERT_DIR "/bad_model_type"),
                      CLATTN_ERROR_UNSUPPORTED, "model_type \"gpt2\" is not supported");
    assert_null(enc);
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, BERT_DIR "/truncated"),
                      CLATTN_ERROR_FORMAT, "truncated");
    assert_null(enc);
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, BERT_DIR "/no_such_model"),
                      CLATTN_ERROR_IO, "no_such_model/config.json");
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, NULL, BERT_DIR "/gelu"),
                      CLATTN_ERROR_INVALID_ARGUMENT, "encoder is NULL");
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "dir is NULL");
    /* A folder whose weights do not fit its config: copy gelu's config with another width. */
    char dir[1024];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn_bert_"), 0);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cp %s/gelu/model.safetensors %s/ && sed 's/\"intermediate_size\": 96/"
             "\"intermediate_size\": 97/' %s/gelu/config.json > %s/config.json",
             BERT_DIR, dir, BERT_DIR, dir);
    assert_int_equal(system(cmd), 0);
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir),
                      CLATTN_ERROR_SHAPE_MISMATCH,
                      "tensor layers.0.linear1.weight has shape [96, 48] but the configuration "
                      "needs [97, 48]");
    snprintf(cmd, sizeof(cmd),
             "sed 's/\"hidden_act\": \"gelu\"/\"hidden_act\": \"swish\"/' %s/gelu/config.json "
             "> %s/config.json",
             BERT_DIR, dir);
    assert_int_equal(system(cmd), 0);
    assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir),
                      CLATTN_ERROR_UNSUPPORTED, "hidden_act \"swish\" is not supported");
    test_temp_dir_remove(dir);
}

/* ---- folders that do not fit together ---- */

/* A new temporary folder with gelu's config.json (the text `from` replaced by `to` when given)
 * and model.safetensors (the bytes `bytes_from` replaced by `bytes_to`, of the same length, when
 * given: the header is JSON, so a dtype or a name changes in place). */
static void bert_folder(char *dir, size_t size, const char *from, const char *to,
                        const char *bytes_from, const char *bytes_to)
{
    assert_int_equal(test_temp_dir_create(dir, size, "clattn_bert_"), 0);
    char src[1100], dst[1100];
    snprintf(src, sizeof(src), "%s/gelu/config.json", BERT_DIR);
    snprintf(dst, sizeof(dst), "%s/config.json", dir);
    size_t n;
    char *config = (char *)test_read_file(src, &n);
    char *text = malloc(n + 256);
    memcpy(text, config, n);
    text[n] = '\0';
    if (from) {
        char *at = strstr(text, from);
        assert_non_null(at);
        size_t a = strlen(from), b = strlen(to);
        memmove(at + b, at + a, strlen(at + a) + 1);
        memcpy(at, to, b);
    }
    test_write_file(dst, text, strlen(text));
    free(config), free(text);
    snprintf(src, sizeof(src), "%s/gelu/model.safetensors", BERT_DIR);
    snprintf(dst, sizeof(dst), "%s/model.safetensors", dir);
    unsigned char *model = test_read_file(src, &n);
    if (bytes_from) {
        size_t a = strlen(bytes_from);
        assert_int_equal(a, strlen(bytes_to));
        unsigned char *at = memmem(model, n, bytes_from, a);
        assert_non_null(at);
        memcpy(at, bytes_to, a);
    }
    test_write_file(dst, model, n);
    free(model);
}

/* config.json's num_hidden_layers against the encoder.layer.<n> tensors: fewer layers than the
 * file holds would be another model (it loaded before), more would miss tensors. */
static void a_layer_count_unlike_the_file_is_named(void **state)
{
    test_fixture *f = *state;
    static const struct {
        const char *layers, *needle;
    } cases[] = {
        {"\"num_hidden_layers\": 1",
         "config.json's num_hidden_layers is 1 but the file holds layers 0-1 (encoder.layer.<n>.*)"},
        {"\"num_hidden_layers\": 3", "config.json's num_hidden_layers is 3 but the file holds "
                                     "layers 0-1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char dir[1024];
        bert_folder(dir, sizeof(dir), "\"num_hidden_layers\": 2", cases[i].layers, NULL, NULL);
        clattn_encoder *enc = (clattn_encoder *)0x1;
        assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_FORMAT,
                          cases[i].needle);
        assert_null(enc);
        assert_non_null(strstr(clattn_last_error(f->ctx), "/model.safetensors"));
        test_temp_dir_remove(dir);
    }
}

/* A weight stored as I32 is named with its dtype, not as missing; a missing tensor is named as
 * the file names it. */
static void wrongly_typed_and_missing_tensors_are_named(void **state)
{
    test_fixture *f = *state;
    static const struct {
        const char *from, *to, *needle;
    } cases[] = {
        {"\"embeddings.LayerNorm.weight\":{\"dtype\":\"F32\"",
         "\"embeddings.LayerNorm.weight\":{\"dtype\":\"I32\"",
         "tensor embeddings.LayerNorm.weight is I32, expected F32"},
        {"\"encoder.layer.1.attention.self.key.weight\":{\"dtype\":\"F32\"",
         "\"encoder.layer.1.attention.self.key.weight\":{\"dtype\":\"U32\"",
         "tensor encoder.layer.1.attention.self.key.weight is U32, expected F32"},
        {"\"encoder.layer.0.output.LayerNorm.bias\"", "\"encoder.layer.0.output.LayerNorm.bia_\"",
         "missing tensor layers.0.norm2.bias (in this file: "
         "encoder.layer.0.output.LayerNorm.bias)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char dir[1024];
        bert_folder(dir, sizeof(dir), NULL, NULL, cases[i].from, cases[i].to);
        clattn_encoder *enc = (clattn_encoder *)0x1;
        assert_status_msg(f->ctx, clattn_encoder_load_hf(f->ctx, &enc, dir), CLATTN_ERROR_FORMAT,
                          cases[i].needle);
        assert_null(enc);
        test_temp_dir_remove(dir);
    }
}

/* A sentence-transformers folder around gelu's model with a small vocab.txt: its files must be
 * regular files (a FIFO is refused at once, never waited on: alarm() ends a test that would
 * block), a pooling config must choose a mode, and embedding errors count texts from 1. */
static void sentence_folder_files_are_checked(void **state)
{
    test_fixture *f = *state;
    alarm(120);
    char dir[1024], path[1200], pooling[1100];
    bert_folder(dir, sizeof(dir), NULL, NULL, NULL, NULL);
    clattn_sentence_model *model = (clattn_sentence_model *)0x1;
    clattn_tokenizer *tok = NULL;
    static const char *const fifos[] = {"tokenizer.json", "vocab.txt", "modules.json",
                                        "sentence_bert_config.json"};
    for (size_t i = 0; i < sizeof(fifos) / sizeof(fifos[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, fifos[i]);
        if (i >= 2) { /* the tokenizer is found first */
            char vocab[1100];
            snprintf(vocab, sizeof(vocab), "%s/vocab.txt", dir);
            const char *words = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nfine\nbad\n";
            test_write_file(vocab, words, strlen(words));
        }
        assert_int_equal(mkfifo(path, 0600), 0);
        char needle[1300];
        snprintf(needle, sizeof(needle), "%s: not a regular file (a FIFO)", path);
        if (i < 2)
            assert_status_msg(NULL, clattn_tokenizer_load(&tok, dir), CLATTN_ERROR_IO, needle);
        assert_status_msg(f->ctx, clattn_sentence_model_load(f->ctx, &model, dir),
                          CLATTN_ERROR_IO, needle);
        assert_null(model);
        unlink(path);
    }

    /* Loaded (mean pooling without a pooling config), the texts are counted from 1. */
    assert_int_equal(clattn_sentence_model_load(f->ctx, &model, dir), CLATTN_OK);
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);
    assert_int_equal(info.pooling, CLATTN_POOLING_MEAN);
    float out[2 * 48];
    const char *bad[2] = {"fine", "bad \xff"};
    assert_status_msg(f->ctx, clattn_sentence_model_embed(model, bad, NULL, 2, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text 2: clattn_tokenizer_encode");
    const char *missing[2] = {"fine", NULL};
    assert_status_msg(f->ctx,
                      clattn_sentence_model_embed(model, missing, NULL, 2, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text 2 (texts[1]) is NULL");
    clattn_sentence_model_destroy(&model);

    /* A pooling config with no mode true is refused, naming it; another mode is unsupported. */
    snprintf(pooling, sizeof(pooling), "%s/1_Pooling", dir);
    assert_int_equal(mkdir(pooling, 0700), 0);
    snprintf(path, sizeof(path), "%s/config.json", pooling);
    static const struct {
        const char *json, *needle;
        clattn_status status;
    } configs[] = {
        {"{\"pooling_mode_cls_token\": false, \"pooling_mode_mean_tokens\": false, "
         "\"pooling_mode_max_tokens\": false, \"pooling_mode_mean_sqrt_len_tokens\": false}",
         "no pooling mode is true", CLATTN_ERROR_FORMAT},
        {"{}", "no pooling mode is true", CLATTN_ERROR_FORMAT},
        {"{\"pooling_mode_lasttoken\": true}", "lasttoken", CLATTN_ERROR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
        test_write_file(path, configs[i].json, strlen(configs[i].json));
        model = (clattn_sentence_model *)0x1;
        assert_status_msg(f->ctx, clattn_sentence_model_load(f->ctx, &model, dir),
                          configs[i].status, configs[i].needle);
        assert_non_null(strstr(clattn_last_error(f->ctx), path));
        assert_null(model);
    }
    const char *cls = "{\"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": false}";
    test_write_file(path, cls, strlen(cls));
    assert_int_equal(clattn_sentence_model_load(f->ctx, &model, dir), CLATTN_OK);
    assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);
    assert_int_equal(info.pooling, CLATTN_POOLING_CLS);
    clattn_sentence_model_destroy(&model);
    unlink(path);
    rmdir(pooling);
    test_temp_dir_remove(dir);
    alarm(0);
}

/* Learned positions (Table 3 row E) in the PyTorch format: the same as adding the table's rows
 * offset + n to the input of an encoder without positions. */
typedef struct host_weights {
    const char *names[64];
    clattn_host_tensor tensors[64];
    size_t count;
} host_weights;

static const clattn_host_tensor *weights_lookup(void *user, const char *name)
{
    host_weights *w = user;
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->names[i], name) == 0)
            return &w->tensors[i];
    return NULL;
}

static void add_weight(host_weights *w, const char *name, int ndim, size_t d0, size_t d1,
                       uint64_t seed, float lo, float hi)
{
    size_t n = ndim == 1 ? d0 : d0 * d1;
    float *data = malloc(n * sizeof(float));
    test_fill_uniform(data, n, seed, lo, hi);
    w->names[w->count] = name;
    w->tensors[w->count] = (clattn_host_tensor){data, ndim, {d0, ndim == 2 ? d1 : 0, 0, 0}};
    w->count++;
}

static void learned_positions_add_the_table(void **state)
{
    test_fixture *f = *state;
    size_t d = 8, heads = 2, ff = 16, positions = 12, B = 2, N = 5, offset = 3;
    host_weights w = {{0}, {{0}}, 0};
    add_weight(&w, "layers.0.self_attn.in_proj_weight", 2, 3 * d, d, 1, -0.5f, 0.5f);
    add_weight(&w, "layers.0.self_attn.in_proj_bias", 1, 3 * d, 0, 2, -0.1f, 0.1f);
    add_weight(&w, "layers.0.self_attn.out_proj.weight", 2, d, d, 3, -0.5f, 0.5f);
    add_weight(&w, "layers.0.self_attn.out_proj.bias", 1, d, 0, 4, -0.1f, 0.1f);
    add_weight(&w, "layers.0.linear1.weight", 2, ff, d, 5, -0.5f, 0.5f);
    add_weight(&w, "layers.0.linear1.bias", 1, ff, 0, 6, -0.1f, 0.1f);
    add_weight(&w, "layers.0.linear2.weight", 2, d, ff, 7, -0.5f, 0.5f);
    add_weight(&w, "layers.0.linear2.bias", 1, d, 0, 8, -0.1f, 0.1f);
    add_weight(&w, "layers.0.norm1.weight", 1, d, 0, 9, 0.5f, 1.5f);
    add_weight(&w, "layers.0.norm1.bias", 1, d, 0, 10, -0.1f, 0.1f);
    add_weight(&w, "layers.0.norm2.weight", 1, d, 0, 11, 0.5f, 1.5f);
    add_weight(&w, "layers.0.norm2.bias", 1, d, 0, 12, -0.1f, 0.1f);
    add_weight(&w, "pos_embedding.weight", 2, positions, d, 13, -1.0f, 1.0f);
    const float *table = w.tensors[w.count - 1].data;

    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, d, heads, 1, ff);
    cfg.positional = CLATTN_POSITIONAL_LEARNED;
    cfg.max_positions = positions;
    clattn_encoder *learned = NULL, *plain = NULL;
    assert_int_equal(clattn_encoder_create(f->ctx, &learned, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(learned, weights_lookup, &w), CLATTN_OK);
    cfg.positional = CLATTN_POSITIONAL_NONE;
    assert_int_equal(clattn_encoder_create(f->ctx, &plain, &cfg), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(plain, weights_lookup, &w), CLATTN_OK);

    float x[2 * 5 * 8], shifted[2 * 5 * 8];
    test_fill_uniform(x, B * N * d, 14, -1.0f, 1.0f);
    for (size_t t = 0; t < B * N; t++)
        for (size_t c = 0; c < d; c++)
            shifted[t * d + c] = x[t * d + c] + table[(offset + t % N) * d + c];
    clattn_tensor *tx = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, x);
    clattn_tensor *ts = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, shifted);
    clattn_tensor *y1 = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_tensor *y2 = test_tensor_from(f->ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.position_offset = offset;
    assert_int_equal(clattn_encoder_forward(learned, tx, y1, &params), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward(plain, ts, y2, &params), CLATTN_OK);
    float *a = test_tensor_to_host(y1), *b = test_tensor_to_host(y2);
    assert_close(a, b, B * N * d, 1e-6);
    /* set_positional: NONE on the learned encoder gives the plain result without the table. */
    assert_int_equal(clattn_encoder_set_positional(learned, CLATTN_POSITIONAL_NONE), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward(learned, tx, y1, &params), CLATTN_OK);
    free(a);
    a = test_tensor_to_host(y1);
    assert_true(test_max_abs_diff(a, b, B * N * d) > 1e-3);
    assert_status_msg(f->ctx, clattn_encoder_set_positional(plain, CLATTN_POSITIONAL_LEARNED),
                      CLATTN_ERROR_INVALID_ARGUMENT, "has no learned position table");
    free(a), free(b);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ts);
    clattn_tensor_destroy(&y1), clattn_tensor_destroy(&y2);
    clattn_encoder_destroy(&learned), clattn_encoder_destroy(&plain);
    for (size_t i = 0; i < w.count; i++)
        free((void *)w.tensors[i].data);
}

static void pool_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){2, 3, 4}, NULL);
    clattn_tensor *out = test_tensor_from(ctx, 2, (size_t[]){2, 4}, NULL);
    clattn_tensor *bad_out = test_tensor_from(ctx, 2, (size_t[]){2, 5}, NULL);
    clattn_tensor *bad_mask = test_tensor_from(ctx, 2, (size_t[]){2, 4}, NULL);
    assert_status_msg(NULL, clattn_pool(NULL, x, NULL, CLATTN_POOLING_MEAN, 0, out),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(ctx, clattn_pool(ctx, NULL, NULL, CLATTN_POOLING_MEAN, 0, out),
                      CLATTN_ERROR_INVALID_ARGUMENT, "x is NULL");
    assert_status_msg(ctx, clattn_pool(ctx, x, NULL, (clattn_pooling)5, 0, out),
                      CLATTN_ERROR_INVALID_ARGUMENT, "pooling is 5");
    assert_status_msg(ctx, clattn_pool(ctx, x, NULL, CLATTN_POOLING_MEAN, 0, bad_out),
                      CLATTN_ERROR_SHAPE_MISMATCH, "out has shape [2, 5] but must be [B, d]");
    assert_status_msg(ctx, clattn_pool(ctx, x, bad_mask, CLATTN_POOLING_MEAN, 0, out),
                      CLATTN_ERROR_SHAPE_MISMATCH, "padding_mask has shape [2, 4]");
    assert_status_msg(ctx, clattn_pool(ctx, out, NULL, CLATTN_POOLING_MEAN, 0, out),
                      CLATTN_ERROR_SHAPE_MISMATCH, "x has shape [2, 4] but must be [B, N, d]");
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&out);
    clattn_tensor_destroy(&bad_out), clattn_tensor_destroy(&bad_mask);
}

/* ---- the real model against sentence-transformers ---- */

static void real_model_embeddings_match_sentence_transformers(void **state)
{
    test_fixture *f = *state;
    const char *dir = test_real_model_or_skip();
    clattn_sentence_model *model = NULL;
    clattn_status status = clattn_sentence_model_load(f->ctx, &model, dir);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(f->ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);
    assert_int_equal(info.hidden_size, 384);
    assert_int_equal(info.max_length, 256); /* sentence_bert_config.json, not 512 */
    assert_int_equal(info.pooling, CLATTN_POOLING_MEAN);
    assert_int_equal(info.normalize, 1);

    json_error_t error;
    json_t *golden = json_load_file(GOLDEN_DIR "/minilm/sentences.json", JSON_ALLOW_NUL, &error);
    assert_non_null(golden);
    json_t *cases = json_object_get(golden, "cases");
    size_t count = json_array_size(cases), d = info.hidden_size;
    const char **texts = calloc(count, sizeof(*texts));
    size_t *lengths = calloc(count, sizeof(*lengths));
    for (size_t i = 0; i < count; i++) {
        json_t *text = json_object_get(json_array_get(cases, i), "text");
        texts[i] = json_string_value(text);
        lengths[i] = json_string_length(text);
    }
    clattn_npy_array *expect = hf_golden_load_npy(GOLDEN_DIR "/minilm", "embeddings.npy", false);
    assert_int_equal(expect->shape[0], count);
    float *got = malloc(count * d * sizeof(float));
    size_t tokens = 0;
    assert_int_equal(clattn_sentence_model_embed(model, texts, lengths, count, got, NULL, &tokens),
                     CLATTN_OK);
    double err = test_max_abs_diff(got, expect->f32, count * d);
    print_message("    %zu texts, %zu tokens: largest error against sentence-transformers %.2e\n",
                  count, tokens, err);
    assert_close(got, expect->f32, count * d, 1e-5);
    /* Other batchings give the same rows in the same order. */
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    params.batch_size = 7;
    params.max_batch_tokens = 300;
    float *again = malloc(count * d * sizeof(float));
    assert_int_equal(clattn_sentence_model_embed(model, texts, lengths, count, again, &params,
                                                 NULL),
                     CLATTN_OK);
    assert_close(again, expect->f32, count * d, 1e-5);
    /* Invalid UTF-8 names the text and changes nothing. */
    const char *bad[2] = {"fine", "bad \xff byte"};
    memcpy(again, got, d * sizeof(float));
    assert_status_msg(f->ctx, clattn_sentence_model_embed(model, bad, NULL, 2, again, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text 2: clattn_tokenizer_encode");
    assert_memory_equal(again, got, d * sizeof(float));
    free(got), free(again), free(texts), free(lengths);
    clattn_npy_array_destroy(&expect);
    json_decref(golden);
    clattn_sentence_model_destroy(&model);
    assert_null(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_bert_models_match_transformers),
        cmocka_unit_test(token_types_and_mask_matter),
        cmocka_unit_test(bad_folders_are_named),
        cmocka_unit_test(a_layer_count_unlike_the_file_is_named),
        cmocka_unit_test(wrongly_typed_and_missing_tensors_are_named),
        cmocka_unit_test(sentence_folder_files_are_checked),
        cmocka_unit_test(learned_positions_add_the_table),
        cmocka_unit_test(pool_rejects_bad_arguments),
        cmocka_unit_test(real_model_embeddings_match_sentence_transformers),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
