/*
 * Cross-encoders (clattn/cross_encoder.h) against tests/golden/crossenc (tools/
 * gen_crossenc_golden.py: small random BertForSequenceClassification folders, their logits from
 * transformers in float64 and sentence-transformers' CrossEncoder.predict scores): the ids path
 * on Hugging Face's token ids, every activation, batch invariance (a pair's bytes alone and in
 * every batching), the folder's options (id2label, tokenizer_config.json's model_max_length,
 * sentence-transformers' default activation, ModernBERT's classifier_activation), texts
 * stripped of every whitespace character Python's str.strip() removes, and the refusals (a bare
 * BertModel, a missing or misshapen head tensor, too few positions, bad arguments).
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5
#define MAX_PAIRS 64

/* A golden folder's pairs.json, with the ids of one of its tokenizations. */
typedef struct golden {
    char dir[4096];
    json_t *root;
    size_t count, labels;
    int32_t *ids[MAX_PAIRS], *types[MAX_PAIRS];
    size_t lengths[MAX_PAIRS];
} golden;

static int32_t *json_ints(json_t *array, size_t *n)
{
    *n = json_array_size(array);
    int32_t *v = malloc((*n ? *n : 1) * sizeof(int32_t));
    assert_non_null(v);
    for (size_t i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(array, i));
    return v;
}

/* The ids and types of `section` (root, or root["short"]). */
static void golden_ids(golden *g, json_t *section)
{
    json_t *ids = json_object_get(section, "input_ids"), *types = json_object_get(section,
                                                                                 "token_type_ids");
    assert_true(json_array_size(ids) == g->count && json_array_size(types) == g->count);
    for (size_t i = 0; i < g->count; i++) {
        size_t n;
        free(g->ids[i]), free(g->types[i]);
        g->ids[i] = json_ints(json_array_get(ids, i), &g->lengths[i]);
        g->types[i] = json_ints(json_array_get(types, i), &n);
        assert_int_equal(n, g->lengths[i]);
    }
}

static void golden_load(golden *g, const char *name)
{
    memset(g, 0, sizeof(*g));
    snprintf(g->dir, sizeof(g->dir), "%s/crossenc/%s", GOLDEN_DIR, name);
    char path[4200];
    snprintf(path, sizeof(path), "%s/pairs.json", g->dir);
    g->root = hf_golden_load_json(path);
    g->count = json_array_size(json_object_get(g->root, "pairs"));
    assert_true(g->count > 0 && g->count <= MAX_PAIRS);
    g->labels = json_array_size(json_array_get(json_object_get(g->root, "logits"), 0));
    golden_ids(g, g->root);
}

static void golden_free(golden *g)
{
    for (size_t i = 0; i < g->count; i++)
        free(g->ids[i]), free(g->types[i]);
    json_decref(g->root);
}

/* section[key] as floats [count, labels] (a list of lists, or of numbers with one label). */
static float *golden_floats(const golden *g, json_t *section, const char *key)
{
    json_t *rows = json_object_get(section, key);
    assert_int_equal(json_array_size(rows), g->count);
    float *v = malloc(g->count * g->labels * sizeof(float));
    assert_non_null(v);
    for (size_t i = 0; i < g->count; i++) {
        json_t *row = json_array_get(rows, i);
        for (size_t k = 0; k < g->labels; k++)
            v[i * g->labels + k] = (float)json_number_value(
                json_is_array(row) ? json_array_get(row, k) : row);
    }
    return v;
}

static clattn_cross_encoder *load(clattn_context *ctx, const char *dir)
{
    clattn_cross_encoder *m = NULL;
    clattn_status status = clattn_cross_encoder_load(ctx, &m, dir);
    if (status != CLATTN_OK)
        print_error("clattn_cross_encoder_load %s: %s\n", dir, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    return m;
}

/* Scores of the golden's current ids. */
static float *score_ids(clattn_cross_encoder *m, const golden *g,
                        const clattn_cross_encoder_params *params)
{
    float *out = malloc(g->count * g->labels * sizeof(float));
    assert_non_null(out);
    size_t tokens = 0, total = 0;
    clattn_status status =
        clattn_cross_encoder_score_ids(m, (const int32_t *const *)g->ids,
                                       (const int32_t *const *)g->types, g->lengths, g->count,
                                       out, params, &tokens);
    if (status != CLATTN_OK)
        print_error("clattn_cross_encoder_score_ids: %s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    for (size_t i = 0; i < g->count; i++)
        total += g->lengths[i];
    assert_int_equal(tokens, total);
    return out;
}

static clattn_cross_encoder_params with_activation(clattn_score_activation activation)
{
    clattn_cross_encoder_params p;
    clattn_cross_encoder_params_default(&p);
    p.activation = activation;
    return p;
}

/* Scores with `activation` against section[key] within TOL; prints the largest error. */
static void check_scores(clattn_cross_encoder *m, const golden *g, json_t *section,
                         clattn_score_activation activation, const char *key, const char *name)
{
    clattn_cross_encoder_params p = with_activation(activation);
    float *got = score_ids(m, g, &p), *want = golden_floats(g, section, key);
    double err = test_max_abs_diff(got, want, g->count * g->labels);
    printf("    %-15s %-16s largest error %.3g\n", name, key, err);
    assert_close(got, want, g->count * g->labels, TOL);
    free(got), free(want);
}

/* ---- the goldens through the ids path ---- */

static void test_info(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "one_label");
    clattn_cross_encoder *m = load(ctx, g.dir);
    clattn_cross_encoder_info info;
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_int_equal(info.num_labels, 1);
    assert_string_equal(info.labels[0], "LABEL_0");
    /* tokenizer_config.json's model_max_length 48, below the 64 positions */
    assert_int_equal(info.max_length, 48);
    assert_int_equal(info.max_length, json_integer_value(json_object_get(g.root, "max_length")));
    assert_int_equal(info.hidden_size, 32);
    assert_int_equal(info.num_layers, 2);
    assert_int_equal(info.type_vocab_size, 2);
    assert_string_equal(info.model_type, "bert");
    assert_string_equal(info.architecture, "BertForSequenceClassification");
    assert_int_equal(info.default_activation, CLATTN_SCORES_SIGMOID);
    assert_non_null(clattn_cross_encoder_tokenizer(m));
    clattn_cross_encoder_destroy(&m);
    assert_null(m);
    clattn_cross_encoder_destroy(&m); /* NULL is accepted */
    golden_free(&g);

    golden_load(&g, "three_labels");
    m = load(ctx, g.dir);
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_int_equal(info.num_labels, 3);
    assert_string_equal(info.labels[0], "contradiction");
    assert_string_equal(info.labels[1], "entailment");
    assert_string_equal(info.labels[2], "neutral");
    assert_int_equal(info.max_length, 64);
    assert_int_equal(info.default_activation, CLATTN_SCORES_RAW);
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

/* The golden `name`'s scores of its pairs as ids, raw, by default, as softmax (several labels)
 * and sigmoid; then of its pairs truncated at 16 tokens, raw and by default. */
static void check_golden_scores(clattn_context *ctx, const char *name)
{
    golden g;
    golden_load(&g, name);
    clattn_cross_encoder *m = load(ctx, g.dir);
    clattn_cross_encoder_info info;
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    json_t *shortened = json_object_get(g.root, "short");
    char short_name[64];
    snprintf(short_name, sizeof(short_name), "%s/16", name);
    check_scores(m, &g, g.root, CLATTN_SCORES_RAW, "logits", name);
    check_scores(m, &g, g.root, CLATTN_SCORES_DEFAULT, "predict", name);
    if (info.num_labels > 1)
        check_scores(m, &g, g.root, CLATTN_SCORES_SOFTMAX, "softmax", name);
    check_scores(m, &g, g.root, CLATTN_SCORES_SIGMOID, "sigmoid", name);
    golden_ids(&g, shortened);
    check_scores(m, &g, shortened, CLATTN_SCORES_RAW, "logits", short_name);
    check_scores(m, &g, shortened, CLATTN_SCORES_DEFAULT, "predict", short_name);
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

static void test_one_label(void **state)
{
    check_golden_scores(((test_fixture *)*state)->ctx, "one_label");
}

static void test_three_labels(void **state)
{
    check_golden_scores(((test_fixture *)*state)->ctx, "three_labels");
}

/* ---- pairs of texts ---- */

/* The golden's pairs as texts, tokenized by the library (each text stripped, then
 * clattn_tokenizer_encode_pair): the very bytes of the ids path on Hugging Face's ids (so the
 * same ids), and transformers' and CrossEncoder.predict's scores; at the model's max_length
 * (params 0) and at 16. The texts are given NUL-terminated, then by length with bytes after
 * them that must not be read. */
static void check_text_path(clattn_context *ctx, const char *name)
{
    golden g;
    golden_load(&g, name);
    clattn_cross_encoder *m = load(ctx, g.dir);
    json_t *pairs = json_object_get(g.root, "pairs");
    const char *queries[MAX_PAIRS], *documents[MAX_PAIRS];
    char *padded_q[MAX_PAIRS], *padded_d[MAX_PAIRS];
    size_t query_lengths[MAX_PAIRS], document_lengths[MAX_PAIRS];
    for (size_t i = 0; i < g.count; i++) {
        queries[i] = json_string_value(json_array_get(json_array_get(pairs, i), 0));
        documents[i] = json_string_value(json_array_get(json_array_get(pairs, i), 1));
        query_lengths[i] = strlen(queries[i]), document_lengths[i] = strlen(documents[i]);
        padded_q[i] = malloc(query_lengths[i] + 8), padded_d[i] = malloc(document_lengths[i] + 8);
        assert_true(padded_q[i] && padded_d[i]);
        sprintf(padded_q[i], "%s zebra", queries[i]);
        sprintf(padded_d[i], "%s zebra", documents[i]);
    }
    json_t *sections[2] = {g.root, json_object_get(g.root, "short")};
    for (int k = 0; k < 2; k++) {
        golden_ids(&g, sections[k]);
        /* clattn_cross_encoder_encode_pair: Hugging Face's ids and types (types only where the
         * model reads them: BERT's) */
        clattn_cross_encoder_info info;
        assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
        for (size_t i = 0; i < g.count; i++) {
            int32_t ids[128], types[128];
            size_t n = 0;
            assert_int_equal(clattn_cross_encoder_encode_pair(m, queries[i], query_lengths[i],
                                                              documents[i], document_lengths[i],
                                                              k ? 16 : 0, ids, types, 128, &n),
                             CLATTN_OK);
            assert_int_equal(n, g.lengths[i]);
            assert_memory_equal(ids, g.ids[i], n * sizeof(int32_t));
            if (info.type_vocab_size > 1)
                assert_memory_equal(types, g.types[i], n * sizeof(int32_t));
        }
        clattn_cross_encoder_params p = with_activation(CLATTN_SCORES_RAW);
        float *from_ids = score_ids(m, &g, &p);
        float *want = golden_floats(&g, sections[k], "logits");
        float *got = malloc(g.count * g.labels * sizeof(float));
        assert_non_null(got);
        p.max_length = k ? 16 : 0;
        size_t tokens = 0, total = 0;
        for (size_t i = 0; i < g.count; i++)
            total += g.lengths[i];
        for (int by_length = 0; by_length < 2; by_length++) {
            memset(got, 0, g.count * g.labels * sizeof(float));
            clattn_status status = clattn_cross_encoder_score(
                m, by_length ? (const char *const *)padded_q : queries,
                by_length ? query_lengths : NULL,
                by_length ? (const char *const *)padded_d : documents,
                by_length ? document_lengths : NULL, g.count, got, &p, &tokens);
            if (status != CLATTN_OK)
                print_error("clattn_cross_encoder_score: %s\n", clattn_last_error(ctx));
            assert_int_equal(status, CLATTN_OK);
            assert_int_equal(tokens, total);
            for (size_t i = 0; i < g.count; i++)
                if (memcmp(got + i * g.labels, from_ids + i * g.labels,
                           g.labels * sizeof(float)) != 0) {
                    print_error("%s pair %zu (max_length %zu): the text path's scores are not "
                                "the ids path's on Hugging Face's ids\n", name, i + 1,
                                p.max_length);
                    fail();
                }
        }
        printf("    %-15s %-16s largest error %.3g (texts)\n", name, k ? "logits/16" : "logits",
               test_max_abs_diff(got, want, g.count * g.labels));
        assert_close(got, want, g.count * g.labels, TOL);
        free(want);
        p.activation = CLATTN_SCORES_DEFAULT;
        want = golden_floats(&g, sections[k], "predict");
        assert_int_equal(clattn_cross_encoder_score(m, queries, NULL, documents, NULL, g.count,
                                                    got, &p, NULL),
                         CLATTN_OK);
        assert_close(got, want, g.count * g.labels, TOL);
        free(want), free(got), free(from_ids);
    }
    for (size_t i = 0; i < g.count; i++)
        free(padded_q[i]), free(padded_d[i]);
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

static void test_texts(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    check_text_path(ctx, "one_label");
    check_text_path(ctx, "three_labels");
    check_text_path(ctx, "roberta");
    check_text_path(ctx, "modernbert");
}

/* params->truncate 0, invalid UTF-8, NULL texts: named errors, nothing written. */
static void test_text_errors(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "one_label");
    clattn_cross_encoder *m = load(ctx, g.dir);
    const char *long_doc = "an extraordinarily long document about nothing in particular that "
                           "goes on and on";
    const char *queries[3] = {"short", "short", "short"};
    const char *documents[3] = {"fine", long_doc, "  \xff"}; /* offsets count the spaces */
    float out[3] = {-7, -7, -7};
    clattn_cross_encoder_params p;
    clattn_cross_encoder_params_default(&p);
    p.truncate = 0;
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 2, out,
                                                      &p, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "pair 2 has ");
    assert_non_null(strstr(clattn_last_error(ctx), "tokens, more than max_length 48 (and "
                                                   "params->truncate is 0)"));
    p.max_length = 200; /* above the model's 48: still 48 */
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 2, out,
                                                      &p, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "more than max_length 48");
    p.truncate = 2;
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 2, out,
                                                      &p, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->truncate is 2 (0 or 1)");
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 3, out,
                                                      NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "pair 3: clattn_tokenizer_encode_pair: invalid argument: text_b is not "
                      "valid UTF-8 at byte 2");
    /* clattn_cross_encoder_encode_pair: the same message; SIZE_MAX counts the whole pair */
    size_t n = 0, truncated = 0;
    assert_status_msg(NULL, clattn_cross_encoder_encode_pair(m, "q", 1, documents[2], 3, 0, NULL,
                                                             NULL, 0, &n),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text_b is not valid UTF-8 at byte 2");
    assert_int_equal(clattn_cross_encoder_encode_pair(m, "short", 5, long_doc, strlen(long_doc),
                                                      SIZE_MAX, NULL, NULL, 0, &n),
                     CLATTN_OK);
    assert_int_equal(clattn_cross_encoder_encode_pair(m, "short", 5, long_doc, strlen(long_doc),
                                                      1000, NULL, NULL, 0, &truncated),
                     CLATTN_OK);
    assert_true(n > 48 && truncated == 48); /* above the model's max_length: the model's */
    assert_status_msg(NULL, clattn_cross_encoder_encode_pair(NULL, "q", 1, "d", 1, 0, NULL, NULL,
                                                             0, &n),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
    clattn_cross_encoder_params_default(&p);
    p.max_length = 2; /* below [CLS] [SEP] [SEP] */
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 1, out,
                                                      &p, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "pair 1: clattn_tokenizer_encode_pair");
    documents[1] = NULL;
    assert_status_msg(ctx, clattn_cross_encoder_score(m, queries, NULL, documents, NULL, 2, out,
                                                      NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "pair 2: the document (documents[1]) is NULL");
    assert_true(out[0] == -7 && out[1] == -7 && out[2] == -7); /* nothing written on error */
    size_t zero[2] = {0, 0}; /* a NULL text of length 0 is the empty text */
    const char *nulls[2] = {NULL, NULL};
    assert_int_equal(clattn_cross_encoder_score(m, nulls, zero, nulls, zero, 2, out, NULL, NULL),
                     CLATTN_OK);
    assert_memory_equal(&out[0], &out[1], sizeof(float));
    assert_status_msg(ctx, clattn_cross_encoder_score(m, NULL, NULL, documents, NULL, 1, out,
                                                      NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "queries is NULL");
    assert_status_msg(NULL, clattn_cross_encoder_score(NULL, queries, NULL, documents, NULL, 1,
                                                       out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

/* ---- batch invariance and activations ---- */

/* Each pair alone, then all of them under several batchings: the same bytes. */
static void test_batch_invariance(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "three_labels");
    clattn_cross_encoder *m = load(ctx, g.dir);
    clattn_cross_encoder_params p = with_activation(CLATTN_SCORES_RAW);
    size_t L = g.labels;
    float *alone = malloc(g.count * L * sizeof(float));
    assert_non_null(alone);
    for (size_t i = 0; i < g.count; i++)
        assert_int_equal(clattn_cross_encoder_score_ids(
                             m, (const int32_t *const *)&g.ids[i],
                             (const int32_t *const *)&g.types[i], &g.lengths[i], 1,
                             alone + i * L, &p, NULL),
                         CLATTN_OK);
    const size_t batch_sizes[] = {0, 1, 3, 7, 64}, budgets[] = {0, 64, 100, 16384};
    for (size_t b = 0; b < 5; b++)
        for (size_t t = 0; t < 4; t++) {
            p.batch_size = batch_sizes[b];
            p.max_batch_tokens = budgets[t];
            float *all = score_ids(m, &g, &p);
            for (size_t i = 0; i < g.count; i++)
                if (memcmp(all + i * L, alone + i * L, L * sizeof(float)) != 0) {
                    print_error("pair %zu: batch_size %zu, max_batch_tokens %zu: not the bytes "
                                "it has alone\n", i + 1, batch_sizes[b], budgets[t]);
                    fail();
                }
            free(all);
        }
    free(alone);
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

/* clattn_cross_encoder_activate on raw scores: the bytes the scoring call gives. */
static void test_activate(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    const char *names[] = {"one_label", "three_labels"};
    for (int n = 0; n < 2; n++) {
        golden g;
        golden_load(&g, names[n]);
        clattn_cross_encoder *m = load(ctx, g.dir);
        clattn_cross_encoder_params p = with_activation(CLATTN_SCORES_RAW);
        float *raw = score_ids(m, &g, &p);
        size_t cells = g.count * g.labels;
        float *mine = malloc(cells * sizeof(float));
        assert_non_null(mine);
        for (int a = CLATTN_SCORES_DEFAULT; a <= CLATTN_SCORES_SOFTMAX; a++) {
            p = with_activation((clattn_score_activation)a);
            float *direct = score_ids(m, &g, &p);
            assert_int_equal(
                clattn_cross_encoder_activate(m, (clattn_score_activation)a, raw, g.count, mine),
                CLATTN_OK);
            assert_memory_equal(mine, direct, cells * sizeof(float));
            free(direct);
        }
        /* in place */
        memcpy(mine, raw, cells * sizeof(float));
        assert_int_equal(clattn_cross_encoder_activate(m, CLATTN_SCORES_SOFTMAX, mine, g.count,
                                                       mine),
                         CLATTN_OK);
        for (size_t i = 0; i < g.count; i++) {
            double sum = 0;
            for (size_t k = 0; k < g.labels; k++)
                sum += mine[i * g.labels + k];
            assert_true(sum > 1 - 1e-6 && sum < 1 + 1e-6);
        }
        assert_status_msg(NULL, clattn_cross_encoder_activate(m, (clattn_score_activation)4,
                                                              raw, g.count, mine),
                          CLATTN_ERROR_INVALID_ARGUMENT, "activation is 4");
        assert_status_msg(NULL, clattn_cross_encoder_activate(m, CLATTN_SCORES_RAW, NULL, 1,
                                                              mine),
                          CLATTN_ERROR_INVALID_ARGUMENT, "logits is NULL");
        free(raw), free(mine);
        clattn_cross_encoder_destroy(&m);
        golden_free(&g);
    }
}

/* ---- folders made from the goldens ---- */

/* A temporary copy of golden folder `name` (its path in dir); config.json with `from` replaced
 * by `to` when from is not NULL; model.safetensors without the tensor `drop` when not NULL
 * ("old>new": the tensor renamed instead). */
static void copy_folder(char *dir, size_t size, const char *name, const char *from,
                        const char *to, const char *drop)
{
    assert_int_equal(test_temp_dir_create(dir, size, "clattn-crossenc-"), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json"}; /* what the library reads */
    for (int i = 0; i < 4; i++) {
        char path[4200];
        size_t n;
        snprintf(path, sizeof(path), "%s/crossenc/%s/%s", GOLDEN_DIR, name, files[i]);
        unsigned char *bytes = test_read_file(path, &n);
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (i == 0 && from) {
            char *text = calloc(n + strlen(to) + 1, 1), *at;
            assert_non_null(text);
            memcpy(text, bytes, n);
            assert_non_null(at = strstr(text, from));
            char *rest = strdup(at + strlen(from));
            assert_non_null(rest);
            sprintf(at, "%s%s", to, rest);
            test_write_file(path, text, strlen(text));
            free(text), free(rest);
        } else if (i == 1 && drop) {
            clattn_safetensors *st = NULL;
            assert_int_equal(clattn_safetensors_parse(&st, bytes, n), CLATTN_OK);
            const char *arrow = strchr(drop, '>');
            size_t kept = 0, n_old = arrow ? (size_t)(arrow - drop) : strlen(drop);
            for (size_t t = 0; t < st->tensor_count; t++) {
                clattn_safetensors_tensor *x = &st->tensors[t];
                bool match = strlen(x->name) == n_old && strncmp(x->name, drop, n_old) == 0;
                if (match && arrow) {
                    free(x->name);
                    assert_non_null(x->name = strdup(arrow + 1));
                }
                if (!match || arrow)
                    st->tensors[kept++] = *x;
                else
                    free(x->name), free(x->data);
            }
            assert_int_equal(kept, st->tensor_count - (arrow ? 0 : 1));
            st->tensor_count = kept;
            assert_int_equal(clattn_safetensors_write(path, st->tensors, kept, NULL, 0),
                             CLATTN_OK);
            clattn_safetensors_destroy(&st);
        } else {
            test_write_file(path, bytes, n);
        }
        free(bytes);
    }
}

/* The golden's "spaced" pairs, every character of Python's str.isspace() at the ends of both
 * texts: clattn_cross_encoder_encode_pair strips them as str.strip() does, so that the byte-level
 * BPE gives Hugging Face's ids of the stripped texts (it would make tokens of them). */
static void check_spaced_pairs(clattn_cross_encoder *m, json_t *spaced)
{
    json_t *pairs = json_object_get(spaced, "pairs"), *ids = json_object_get(spaced, "input_ids");
    assert_true(json_array_size(pairs) >= 29 && json_array_size(ids) == json_array_size(pairs));
    for (size_t i = 0; i < json_array_size(pairs); i++) {
        const char *q = json_string_value(json_array_get(json_array_get(pairs, i), 0));
        const char *d = json_string_value(json_array_get(json_array_get(pairs, i), 1));
        size_t want_n, n = 0;
        int32_t *want = json_ints(json_array_get(ids, i), &want_n);
        int32_t got[128], types[128];
        assert_int_equal(clattn_cross_encoder_encode_pair(m, q, strlen(q), d, strlen(d), 0, got,
                                                          types, 128, &n),
                         CLATTN_OK);
        if (n != want_n || memcmp(got, want, n * sizeof(int32_t)) != 0) {
            print_error("spaced pair %zu (%s): not the ids of the texts stripped\n", i + 1,
                        i < 29 ? "one character at each end" : "several");
            fail();
        }
        free(want);
    }
}

/* RobertaForSequenceClassification (byte-level BPE, one token type, positions from
 * padding_idx + 1), and the same folder read as XLMRobertaForSequenceClassification; pairs with
 * whitespace at their ends (check_spaced_pairs). */
static void test_roberta(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "roberta");
    clattn_cross_encoder *m = load(ctx, g.dir);
    clattn_cross_encoder_info info;
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_string_equal(info.architecture, "RobertaForSequenceClassification");
    assert_string_equal(info.model_type, "roberta");
    assert_int_equal(info.max_length, 40); /* model_max_length, below 66 - 2 positions */
    assert_int_equal(info.type_vocab_size, 1);
    assert_int_equal(info.hidden_size, 16);
    check_scores(m, &g, g.root, CLATTN_SCORES_RAW, "logits", "roberta");
    check_scores(m, &g, g.root, CLATTN_SCORES_DEFAULT, "predict", "roberta");
    json_t *shortened = json_object_get(g.root, "short");
    golden_ids(&g, shortened);
    check_scores(m, &g, shortened, CLATTN_SCORES_RAW, "logits", "roberta/16");
    /* one token type: type ids are not read (transformers' RoBERTa tokenizer gives none) */
    float with_types[2], without[2];
    g.types[0][1] = 1, g.types[1][2] = 7;
    assert_int_equal(clattn_cross_encoder_score_ids(m, (const int32_t *const *)g.ids,
                                                    (const int32_t *const *)g.types, g.lengths,
                                                    2, with_types, NULL, NULL),
                     CLATTN_OK);
    assert_int_equal(clattn_cross_encoder_score_ids(m, (const int32_t *const *)g.ids, NULL,
                                                    g.lengths, 2, without, NULL, NULL),
                     CLATTN_OK);
    assert_memory_equal(with_types, without, sizeof(without));
    check_spaced_pairs(m, json_object_get(g.root, "spaced"));
    clattn_cross_encoder_destroy(&m);
    golden_ids(&g, g.root);

    char dir[4096];
    copy_folder(dir, sizeof(dir), "roberta", "\"RobertaForSequenceClassification\"",
                "\"XLMRobertaForSequenceClassification\"", NULL);
    /* and model_type "xlm-roberta": a second edit of the copy's config.json */
    char path[4200];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    size_t n;
    unsigned char *bytes = test_read_file(path, &n);
    char *text = calloc(n + 1, 1); /* the file's bytes as a C string */
    assert_non_null(text);
    memcpy(text, bytes, n);
    free(bytes);
    char *edited = calloc(n + 16, 1), *at = strstr(text, "\"model_type\": \"roberta\"");
    assert_non_null(edited);
    assert_non_null(at);
    sprintf(edited, "%.*s\"model_type\": \"xlm-roberta\"%s", (int)(at - text), text,
            at + strlen("\"model_type\": \"roberta\""));
    test_write_file(path, edited, strlen(edited));
    free(text), free(edited);
    m = load(ctx, dir);
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_string_equal(info.architecture, "XLMRobertaForSequenceClassification");
    assert_string_equal(info.model_type, "xlm-roberta");
    check_scores(m, &g, g.root, CLATTN_SCORES_RAW, "xlmr_logits", "xlm-roberta");
    clattn_cross_encoder_destroy(&m);
    test_temp_dir_remove(dir);
    golden_free(&g);
}

/* ModernBertForSequenceClassification: the head on the mean of the real tokens (and, with
 * classifier_pooling "cls", on [CLS]), dense with a bias, gelu (and each other
 * classifier_activation), LayerNorm without bias; two labels; and its options refused by name. */
static void test_modernbert(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "modernbert");
    clattn_cross_encoder *m = load(ctx, g.dir);
    clattn_cross_encoder_info info;
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_string_equal(info.architecture, "ModernBertForSequenceClassification");
    assert_string_equal(info.model_type, "modernbert");
    assert_int_equal(info.num_labels, 2);
    assert_string_equal(info.labels[1], "relevant");
    assert_int_equal(info.max_length, 48);
    assert_int_equal(info.default_activation, CLATTN_SCORES_RAW);
    check_scores(m, &g, g.root, CLATTN_SCORES_RAW, "logits", "modernbert");
    check_scores(m, &g, g.root, CLATTN_SCORES_DEFAULT, "predict", "modernbert");
    check_scores(m, &g, g.root, CLATTN_SCORES_SOFTMAX, "softmax", "modernbert");
    json_t *shortened = json_object_get(g.root, "short");
    golden_ids(&g, shortened);
    check_scores(m, &g, shortened, CLATTN_SCORES_RAW, "logits", "modernbert/16");
    golden_ids(&g, g.root);
    clattn_cross_encoder_destroy(&m);

    char dir[4096];
    copy_folder(dir, sizeof(dir), "modernbert", "\"classifier_pooling\": \"mean\"",
                "\"classifier_pooling\": \"cls\"", NULL);
    m = load(ctx, dir);
    check_scores(m, &g, g.root, CLATTN_SCORES_RAW, "cls_logits", "modernbert");
    clattn_cross_encoder_destroy(&m);
    test_temp_dir_remove(dir);
    /* each classifier_activation transformers' ACT2FN gives the head */
    json_t *activations = json_object_get(g.root, "activation_logits");
    const char *act;
    json_t *rows;
    assert_int_equal(json_object_size(activations), 6);
    json_object_foreach(activations, act, rows) {
        char to[64];
        snprintf(to, sizeof(to), "\"classifier_activation\": \"%s\"", act);
        copy_folder(dir, sizeof(dir), "modernbert", "\"classifier_activation\": \"gelu\"", to,
                    NULL);
        m = load(ctx, dir);
        check_scores(m, &g, activations, CLATTN_SCORES_RAW, act, "modernbert");
        clattn_cross_encoder_destroy(&m);
        test_temp_dir_remove(dir);
    }
    copy_folder(dir, sizeof(dir), "modernbert", "\"classifier_pooling\": \"mean\"",
                "\"classifier_pooling\": \"max\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "classifier_pooling \"max\" is not supported");
    test_temp_dir_remove(dir);
    copy_folder(dir, sizeof(dir), "modernbert", "\"classifier_activation\": \"gelu\"",
                "\"classifier_activation\": \"mish\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "classifier_activation \"mish\" is not supported");
    test_temp_dir_remove(dir);
    copy_folder(dir, sizeof(dir), "modernbert", NULL, NULL, "head.dense.bias");
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "missing tensor head.dense.bias (ModernBertForSequenceClassification's "
                      "ModernBertPredictionHead)");
    test_temp_dir_remove(dir);
    golden_free(&g);
}

/* config.json naming Identity as sentence-transformers' default: the default is the logits,
 * as CrossEncoder.predict gives them for such a folder; the v4 key too, and Tanh is refused. */
static void test_default_activation_from_config(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "one_label");
    char dir[4096];
    copy_folder(dir, sizeof(dir), "one_label", "\"architectures\"",
                "\"sbert_ce_default_activation_function\": \"torch.nn.modules.linear.Identity\", "
                "\"architectures\"",
                NULL);
    clattn_cross_encoder *m = load(ctx, dir);
    clattn_cross_encoder_info info;
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_int_equal(info.default_activation, CLATTN_SCORES_RAW);
    check_scores(m, &g, g.root, CLATTN_SCORES_DEFAULT, "identity_config", "one_label");
    clattn_cross_encoder_destroy(&m);
    test_temp_dir_remove(dir);

    copy_folder(dir, sizeof(dir), "three_labels", "\"architectures\"",
                "\"sentence_transformers\": {\"activation_fn\": "
                "\"torch.nn.modules.activation.Sigmoid\", \"version\": \"4.0.1\"}, "
                "\"architectures\"",
                NULL);
    m = load(ctx, dir);
    assert_int_equal(clattn_cross_encoder_get_info(m, &info), CLATTN_OK);
    assert_int_equal(info.default_activation, CLATTN_SCORES_SIGMOID);
    clattn_cross_encoder_destroy(&m);
    test_temp_dir_remove(dir);

    copy_folder(dir, sizeof(dir), "one_label", "\"architectures\"",
                "\"sbert_ce_default_activation_function\": \"torch.nn.modules.activation.Tanh\", "
                "\"architectures\"",
                NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "\"torch.nn.modules.activation.Tanh\" is not supported");
    assert_null(m);
    test_temp_dir_remove(dir);
    golden_free(&g);
}

static void test_refusals(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_cross_encoder *m = NULL;
    char dir[4096];
    /* a bare BertModel (an encoder without a head) */
    snprintf(dir, sizeof(dir), "%s/bert/gelu", GOLDEN_DIR);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "architectures [\"BertModel\"] is not a sequence classification model");
    assert_null(m);
    assert_non_null(strstr(clattn_last_error(ctx), "bert/gelu/config.json"));
    /* another family's classifier */
    copy_folder(dir, sizeof(dir), "one_label", "\"BertForSequenceClassification\"",
                "\"DistilBertForSequenceClassification\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "[\"DistilBertForSequenceClassification\"] is a sequence classification "
                      "model this library does not implement");
    test_temp_dir_remove(dir);
    /* the architecture with another model_type */
    copy_folder(dir, sizeof(dir), "one_label", "\"model_type\": \"bert\"",
                "\"model_type\": \"mpnet\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "BertForSequenceClassification needs model_type \"bert\", not \"mpnet\"");
    test_temp_dir_remove(dir);
    /* no architectures */
    copy_folder(dir, sizeof(dir), "one_label", "\"architectures\"", "\"not_architectures\"",
                NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_UNSUPPORTED,
                      "no \"architectures\"");
    test_temp_dir_remove(dir);
    /* a missing head tensor, named */
    copy_folder(dir, sizeof(dir), "one_label", NULL, NULL, "classifier.weight");
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "model.safetensors: missing tensor classifier.weight");
    test_temp_dir_remove(dir);
    copy_folder(dir, sizeof(dir), "one_label", NULL, NULL, "bert.pooler.dense.bias");
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "missing tensor bert.pooler.dense.bias");
    test_temp_dir_remove(dir);
    /* id2label with two labels against a one-row classifier */
    copy_folder(dir, sizeof(dir), "one_label", "\"0\": \"LABEL_0\"",
                "\"0\": \"LABEL_0\", \"1\": \"LABEL_1\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_SHAPE_MISMATCH,
                      "tensor classifier.weight has shape [1, 32] but must be [2, 32]");
    test_temp_dir_remove(dir);
    /* fewer positions than a [CLS] and a [SEP]: refused at load, not at every pair */
    copy_folder(dir, sizeof(dir), "one_label", "\"max_position_embeddings\": 64",
                "\"max_position_embeddings\": 1", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "max_position_embeddings is 1: it must be at least 2 (the longest input, "
                      "[CLS] and [SEP] included)");
    test_temp_dir_remove(dir);
    copy_folder(dir, sizeof(dir), "roberta", "\"max_position_embeddings\": 66",
                "\"max_position_embeddings\": 3", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "max_position_embeddings is 3: it must be at least 4 (the longest input, "
                      "[CLS] and [SEP] included, after the padding_idx + 1 rows before the first "
                      "position)");
    test_temp_dir_remove(dir);
    copy_folder(dir, sizeof(dir), "modernbert", "\"max_position_embeddings\": 512",
                "\"max_position_embeddings\": 1", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "max_position_embeddings is 1: it must be a whole number from 2");
    test_temp_dir_remove(dir);
    /* id2label's ids not 0 .. n-1 */
    copy_folder(dir, sizeof(dir), "one_label", "\"0\": \"LABEL_0\"", "\"1\": \"LABEL_0\"", NULL);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, dir), CLATTN_ERROR_FORMAT,
                      "\"id2label\" has 1 entries but no id \"0\"");
    test_temp_dir_remove(dir);
    /* the pooler without the "bert." prefix is found too */
    copy_folder(dir, sizeof(dir), "one_label", NULL, NULL,
                "bert.pooler.dense.weight>pooler.dense.weight");
    m = load(ctx, dir);
    clattn_cross_encoder_destroy(&m);
    test_temp_dir_remove(dir);
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, &m, "/nonexistent-folder"),
                      CLATTN_ERROR_IO, "/nonexistent-folder/config.json");
    assert_status_msg(NULL, clattn_cross_encoder_load(NULL, &m, dir),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(ctx, clattn_cross_encoder_load(ctx, NULL, dir),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
}

static void test_bad_arguments(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    golden g;
    golden_load(&g, "one_label");
    clattn_cross_encoder *m = load(ctx, g.dir);
    const int32_t *const *ids = (const int32_t *const *)g.ids;
    const int32_t *const *types = (const int32_t *const *)g.types;
    float out[MAX_PAIRS], untouched[MAX_PAIRS];
    for (size_t i = 0; i < MAX_PAIRS; i++)
        out[i] = untouched[i] = -7.0f;
    clattn_cross_encoder_params p;
    clattn_cross_encoder_params_default(&p);
    assert_int_equal(p.truncate, 1);
    p.reserved[3] = 1;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 2, out, &p,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->reserved is not zero");
    clattn_cross_encoder_params_default(&p);
    p.activation = (clattn_score_activation)9;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 2, out, &p,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->activation is 9");
    clattn_cross_encoder_params_default(&p);
    p.max_length = 16;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 2, out, &p,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->max_length is 16 (must be 0");
    assert_status_msg(NULL, clattn_cross_encoder_score_ids(NULL, ids, types, g.lengths, 2, out,
                                                           NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, NULL, types, g.lengths, 2, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ids is NULL");
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 2, NULL, NULL,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    /* pair 2's problems, named from 1 */
    int32_t *saved_ids = g.ids[1];
    g.ids[1] = NULL;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 3, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "pair 2 (ids[1]) is NULL");
    g.ids[1] = saved_ids;
    size_t saved_length = g.lengths[1];
    g.lengths[1] = 0;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 3, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "pair 2 (lengths[1]) has no ids");
    g.lengths[1] = 49;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 3, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "pair 2 has 49 ids, more than the model's max_length 48");
    g.lengths[1] = saved_length;
    int32_t saved = g.ids[1][2];
    g.ids[1][2] = 117;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 3, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "pair 2: id 117 (ids[1][2]) is outside the vocabulary (0 to 116)");
    g.ids[1][2] = saved;
    saved = g.types[1][3];
    g.types[1][3] = 2;
    assert_status_msg(ctx, clattn_cross_encoder_score_ids(m, ids, types, g.lengths, 3, out, NULL,
                                                          NULL),
                      CLATTN_ERROR_OUT_OF_RANGE,
                      "pair 2: token type 2 (type_ids[1][3]) is outside the model's token types "
                      "(0 to 1)");
    g.types[1][3] = saved;
    assert_memory_equal(out, untouched, sizeof(out)); /* nothing written on error */
    /* count 0 is fine with NULL arrays; type_ids NULL means type 0 everywhere */
    assert_int_equal(clattn_cross_encoder_score_ids(m, NULL, NULL, NULL, 0, NULL, NULL, NULL),
                     CLATTN_OK);
    assert_int_equal(clattn_cross_encoder_score_ids(m, ids, NULL, g.lengths, 1, out, NULL, NULL),
                     CLATTN_OK);
    clattn_cross_encoder_info info;
    assert_status_msg(NULL, clattn_cross_encoder_get_info(NULL, &info),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
    assert_status_msg(ctx, clattn_cross_encoder_get_info(m, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "info is NULL");
    assert_null(clattn_cross_encoder_tokenizer(NULL));
    clattn_cross_encoder_destroy(&m);
    golden_free(&g);
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_one_label),
        cmocka_unit_test(test_three_labels),
        cmocka_unit_test(test_roberta),
        cmocka_unit_test(test_modernbert),
        cmocka_unit_test(test_texts),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_activate),
        cmocka_unit_test(test_default_activation_from_config),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
