/*
 * clattn_sentence_model_embed_ids: texts given as the tokenizer's ids get the same bytes as
 * clattn_sentence_model_embed of the texts (memcmp), in batches of every size, under a tight
 * token budget, with and without normalisation, and with CLS pooling; bad arguments give the
 * documented statuses and messages and leave out untouched. On the tiny random BERT
 * (tests/common/tiny_sentence_model.h).
 */
#include "common/test_util.h"
#include "common/tiny_sentence_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TEXTS 24
#define MAX_WORDS 24 /* some texts are truncated to the model's 64 tokens */

typedef struct fixture {
    clattn_context *ctx;
    clattn_sentence_model *model;
    clattn_sentence_model_info info;
    char dir[4096];
    char *texts[N_TEXTS];
    int32_t *ids[N_TEXTS]; /* the tokenizer's ids of texts[i] */
    size_t lengths[N_TEXTS];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->ctx = test_context_create(NULL);
    assert_non_null(f->ctx);
    tiny_sentence_model_create(f->dir, sizeof(f->dir));
    clattn_status status = clattn_sentence_model_load(f->ctx, &f->model, f->dir);
    if (status != CLATTN_OK)
        print_error("load: %s\n", clattn_last_error(f->ctx));
    assert_int_equal(status, CLATTN_OK);
    assert_int_equal(clattn_sentence_model_get_info(f->model, &f->info), CLATTN_OK);
    const clattn_tokenizer *tok = clattn_sentence_model_tokenizer(f->model);
    for (size_t i = 0; i < N_TEXTS; i++) {
        f->texts[i] = tiny_sentence_text(i, MAX_WORDS);
        size_t len = strlen(f->texts[i]);
        assert_int_equal(clattn_tokenizer_encode(tok, f->texts[i], len, f->info.max_length, NULL,
                                                 0, &f->lengths[i]),
                         CLATTN_OK);
        f->ids[i] = malloc(f->lengths[i] * sizeof(int32_t));
        assert_non_null(f->ids[i]);
        size_t got;
        assert_int_equal(clattn_tokenizer_encode(tok, f->texts[i], len, f->info.max_length,
                                                 f->ids[i], f->lengths[i], &got),
                         CLATTN_OK);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < N_TEXTS; i++)
        free(f->texts[i]), free(f->ids[i]);
    clattn_sentence_model_destroy(&f->model);
    clattn_context_destroy(&f->ctx);
    test_temp_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Fails naming the first text whose row differs. */
static void assert_same_rows(const float *expected, const float *got, size_t count, size_t d,
                             const char *how)
{
    for (size_t i = 0; i < count; i++)
        if (memcmp(expected + i * d, got + i * d, d * sizeof(float)) != 0) {
            print_error("%s: text %zu's row differs from clattn_sentence_model_embed's\n", how,
                        i + 1);
            fail();
        }
}

/* The longest text is truncated (the test covers what the tokenizer truncated), the shortest is
 * [CLS] [SEP]: the set spans the whole range of lengths. */
static void texts_span_the_lengths(void **state)
{
    fixture *f = *state;
    size_t shortest = SIZE_MAX, longest = 0;
    for (size_t i = 0; i < N_TEXTS; i++) {
        shortest = f->lengths[i] < shortest ? f->lengths[i] : shortest;
        longest = f->lengths[i] > longest ? f->lengths[i] : longest;
    }
    assert_int_equal(shortest, 2);
    assert_int_equal(longest, f->info.max_length);
}

/* For each batching (batch size, token budget), normalisation and pooling: embed of the texts,
 * then embed_ids of their ids, the same bytes; *tokens the sum of the lengths. */
static void ids_give_the_bytes_of_embed(void **state)
{
    fixture *f = *state;
    size_t d = f->info.hidden_size, total = 0;
    for (size_t i = 0; i < N_TEXTS; i++)
        total += f->lengths[i];
    float *expected = malloc(N_TEXTS * d * sizeof(float));
    float *got = malloc(N_TEXTS * d * sizeof(float));
    assert_non_null(expected);
    assert_non_null(got);
    static const struct {
        size_t batch_size, max_batch_tokens;
        int normalize, pooling;
    } cases[] = {{1, 0, -1, -1}, {3, 0, -1, -1}, {7, 0, 1, -1}, {64, 0, 0, -1},
                 {0, 0, -1, -1}, {64, 200, -1, -1}, {5, 0, -1, CLATTN_POOLING_CLS}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        clattn_embed_params p;
        clattn_embed_params_default(&p);
        p.batch_size = cases[c].batch_size;
        p.max_batch_tokens = cases[c].max_batch_tokens;
        p.normalize = cases[c].normalize;
        p.pooling = cases[c].pooling;
        size_t tokens = 0;
        assert_int_equal(clattn_sentence_model_embed(f->model, (const char *const *)f->texts,
                                                     NULL, N_TEXTS, expected, &p, &tokens),
                         CLATTN_OK);
        assert_int_equal(tokens, total);
        memset(got, 0xff, N_TEXTS * d * sizeof(float));
        tokens = 0;
        clattn_status status = clattn_sentence_model_embed_ids(
            f->model, (const int32_t *const *)f->ids, f->lengths, N_TEXTS, got, &p, &tokens);
        if (status != CLATTN_OK)
            print_error("embed_ids: %s\n", clattn_last_error(f->ctx));
        assert_int_equal(status, CLATTN_OK);
        assert_int_equal(tokens, total);
        char how[128];
        snprintf(how, sizeof(how), "batch_size %zu, max_batch_tokens %zu, normalize %d, pooling %d",
                 cases[c].batch_size, cases[c].max_batch_tokens, cases[c].normalize,
                 cases[c].pooling);
        assert_same_rows(expected, got, N_TEXTS, d, how);
    }
    free(expected), free(got);
}

/* Each text alone through embed, then the ids in shuffled groups of 1 to 9 through embed_ids with
 * NULL params (other neighbours, other padding): row i is still text i's bytes. */
static void ids_in_any_grouping_give_the_single_text_bytes(void **state)
{
    fixture *f = *state;
    size_t d = f->info.hidden_size;
    float *alone = malloc(N_TEXTS * d * sizeof(float)), *got = malloc(9 * d * sizeof(float));
    assert_non_null(alone);
    assert_non_null(got);
    for (size_t i = 0; i < N_TEXTS; i++)
        assert_int_equal(clattn_sentence_model_embed(f->model, (const char *const *)&f->texts[i],
                                                     NULL, 1, alone + i * d, NULL, NULL),
                         CLATTN_OK);
    size_t order[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++)
        order[i] = i;
    test_rng rng = {77};
    for (size_t i = N_TEXTS - 1; i > 0; i--) {
        size_t j = (size_t)(test_rng_next(&rng) % (i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t first = 0; first < N_TEXTS;) {
        size_t n = 1 + (size_t)(test_rng_next(&rng) % 9);
        n = first + n <= N_TEXTS ? n : N_TEXTS - first;
        const int32_t *ids[9];
        size_t lengths[9];
        for (size_t k = 0; k < n; k++)
            ids[k] = f->ids[order[first + k]], lengths[k] = f->lengths[order[first + k]];
        assert_int_equal(clattn_sentence_model_embed_ids(f->model, ids, lengths, n, got, NULL,
                                                         NULL),
                         CLATTN_OK);
        for (size_t k = 0; k < n; k++)
            if (memcmp(alone + order[first + k] * d, got + k * d, d * sizeof(float)) != 0) {
                print_error("text %zu in a group of %zu: not its single-text bytes\n",
                            order[first + k] + 1, n);
                fail();
            }
        first += n;
    }
    free(alone), free(got);
}

/* Each bad argument: its status, a message naming it, and out untouched. */
static void bad_arguments_are_refused(void **state)
{
    fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_sentence_model *m = f->model;
    size_t d = f->info.hidden_size, V = f->info.vocab_size, L = f->info.max_length;
    float *out = malloc(3 * d * sizeof(float)), *sentinel = malloc(3 * d * sizeof(float));
    assert_non_null(out);
    assert_non_null(sentinel);
    memset(sentinel, 0x5a, 3 * d * sizeof(float));
    memcpy(out, sentinel, 3 * d * sizeof(float));
    int32_t good[] = {2, 10, 3}, negative[] = {2, -1, 3}, too_big[] = {2, 10, 3};
    too_big[1] = (int32_t)V;
    int32_t last_id[] = {2, (int32_t)V - 1, 3};
    int32_t *long_text = calloc(L + 1, sizeof(int32_t));
    assert_non_null(long_text);
    const int32_t *ids[3] = {good, good, good};
    size_t lengths[3] = {3, 3, 3};

    assert_int_equal(clattn_sentence_model_embed_ids(NULL, ids, lengths, 3, out, NULL, NULL),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "model is NULL"));
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, NULL, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ids is NULL");
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, NULL, 3, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "lengths is NULL");
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, NULL, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    ids[1] = NULL;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text 2 (ids[1]) is NULL");
    ids[1] = good;
    lengths[2] = 0;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text 3 (lengths[2]) has no ids");
    lengths[2] = 3;
    ids[1] = long_text, lengths[1] = L + 1;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "text 2 has 65 ids, more than the model's "
                                                 "max_length 64");
    ids[1] = good, lengths[1] = 3;
    ids[2] = negative;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "text 3: id -1 (ids[2][1]) is outside the "
                                                 "vocabulary (0 to 99)");
    ids[2] = too_big;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, NULL),
                      CLATTN_ERROR_OUT_OF_RANGE, "text 3: id 100 (ids[2][1])");
    ids[2] = good;
    clattn_embed_params p;
    clattn_embed_params_default(&p);
    p.max_length = 16;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, &p, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->max_length is 16 (must be 0");
    clattn_embed_params_default(&p);
    p.normalize = 2;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, &p, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->normalize is 2");
    clattn_embed_params_default(&p);
    p.reserved[3] = 1;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, &p, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params->reserved is not zero");
    assert_memory_equal(out, sentinel, 3 * d * sizeof(float)); /* nothing written */

    /* The edges that are valid: no texts at all, a single id, the last id of the vocabulary, a
     * text of exactly max_length ids. */
    assert_int_equal(clattn_sentence_model_embed_ids(m, NULL, NULL, 0, NULL, NULL, NULL),
                     CLATTN_OK);
    ids[0] = good, lengths[0] = 1;
    ids[1] = last_id;
    ids[2] = long_text, lengths[2] = L;
    size_t tokens = 0;
    assert_status_msg(ctx, clattn_sentence_model_embed_ids(m, ids, lengths, 3, out, NULL, &tokens),
                      CLATTN_OK, NULL);
    assert_int_equal(tokens, 1 + 3 + L);
    free(out), free(sentinel), free(long_text);
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(texts_span_the_lengths),
        cmocka_unit_test(ids_give_the_bytes_of_embed),
        cmocka_unit_test(ids_in_any_grouping_give_the_single_text_bytes),
        cmocka_unit_test(bad_arguments_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
