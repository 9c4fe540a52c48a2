/* Each text is tokenized once: clattn_sentence_model_embed runs N texts through the tokenizer's
 * pipeline N times (it used to count, then write: 2N), clattn_sentence_model_encode and the
 * tokenizer's calls once per text, a failing stripped text once too (its message was taken from
 * a second encoding of the unstripped text). Counted by clattn__tokenizer_texts_encoded, the
 * library's count of texts run through normalisation, pre-tokenisation and the model. The
 * embed program's --tokenize (examples/embed/token_ids.c) once per text too, its lines the
 * tokenizer's ids. On the tiny random BERT (tests/common/tiny_sentence_model.h). */
#include "common/test_util.h"
#include "common/tiny_sentence_model.h"
#include "text/tokenizer_internal.h"

#include "../examples/embed/token_ids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TEXTS 12

/* How many texts the library tokenized since `before`. */
static size_t since(size_t before)
{
    return clattn__tokenizer_texts_encoded() - before;
}

static void single_text_path_tokenizes_once(void **state)
{
    (void)state;
    char dir[4096];
    tiny_sentence_model_create(dir, sizeof(dir));
    clattn_context *ctx = test_context_create(NULL);
    assert_non_null(ctx);
    clattn_sentence_model *model = NULL;
    assert_int_equal(clattn_sentence_model_load(ctx, &model, dir), CLATTN_OK);
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_get_info(model, &info), CLATTN_OK);

    char *texts[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++)
        texts[i] = tiny_sentence_text(i, 90); /* some past the 64 positions: truncated */
    float *out = malloc(N_TEXTS * info.hidden_size * sizeof(float));
    assert_non_null(out);
    clattn_embed_params params;
    clattn_embed_params_default(&params);

    size_t before = clattn__tokenizer_texts_encoded();
    assert_int_equal(clattn_sentence_model_embed(model, (const char *const *)texts, NULL, N_TEXTS,
                                                 out, &params, NULL),
                     CLATTN_OK);
    if (since(before) != N_TEXTS) {
        print_error("embedding %d texts tokenized %zu\n", N_TEXTS, since(before));
        fail();
    }

    /* One text, with room or without. */
    int32_t ids[128];
    size_t count = 0;
    before = clattn__tokenizer_texts_encoded();
    assert_int_equal(clattn_sentence_model_encode(model, texts[9], strlen(texts[9]), 0, ids, 128,
                                                  &count), CLATTN_OK);
    assert_int_equal(since(before), 1);
    before = clattn__tokenizer_texts_encoded();
    assert_int_equal(clattn_sentence_model_encode(model, texts[9], strlen(texts[9]), 0, ids, 1,
                                                  &count), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(since(before), 1);
    /* A stripped text that fails: once, its offset from the text as given. */
    before = clattn__tokenizer_texts_encoded();
    assert_int_equal(clattn_sentence_model_encode(model, "  a\xff ", 5, 0, ids, 128, &count),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(since(before), 1);
    assert_non_null(strstr(clattn_last_error(NULL), "clattn_tokenizer_encode: invalid argument: "
                                                    "the text is not valid UTF-8 at byte 3"));

    /* The tokenizer's calls: a text once, a pair's two texts once each. */
    const clattn_tokenizer *tok = clattn_sentence_model_tokenizer(model);
    clattn_tokens tokens = {0};
    before = clattn__tokenizer_texts_encoded();
    assert_int_equal(clattn_tokenizer_encode_tokens(tok, texts[11], strlen(texts[11]), 0, 0,
                                                    &tokens), CLATTN_OK);
    assert_int_equal(clattn_tokenizer_encode_pair_tokens(tok, texts[10], strlen(texts[10]),
                                                         texts[11], strlen(texts[11]), 0, 0,
                                                         &tokens), CLATTN_OK);
    assert_int_equal(since(before), 3);
    clattn_tokens_free(&tokens);

    for (size_t i = 0; i < N_TEXTS; i++)
        free(texts[i]);
    free(out);
    clattn_sentence_model_destroy(&model);
    clattn_context_destroy(&ctx);
    test_temp_dir_remove(dir);
}

/* The line embed --tokenize writes for ids[0 .. n), in line[size]. */
static void expected_line(const int32_t *ids, size_t n, char *line, size_t size)
{
    size_t at = (size_t)snprintf(line, size, "[");
    for (size_t k = 0; k < n && at < size; k++)
        at += (size_t)snprintf(line + at, size - at, "%s%d", k ? ", " : "", ids[k]);
    if (at < size)
        snprintf(line + at, size - at, "]\n");
}

static void embed_tokenize_tokenizes_once(void **state)
{
    (void)state;
    char dir[4096];
    tiny_sentence_model_create(dir, sizeof(dir));
    clattn_tokenizer *tok = NULL;
    assert_int_equal(clattn_tokenizer_load(&tok, dir), CLATTN_OK);
    char *texts[N_TEXTS];
    size_t lengths[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++) {
        texts[i] = tiny_sentence_text(i, 90); /* some past the 64 positions: truncated */
        lengths[i] = strlen(texts[i]);
    }

    FILE *out = tmpfile();
    assert_non_null(out);
    size_t failed = 0, before = clattn__tokenizer_texts_encoded();
    assert_int_equal(embed_write_token_ids(out, tok, (const char *const *)texts, lengths,
                                           N_TEXTS, 0, &failed),
                     CLATTN_OK);
    if (since(before) != N_TEXTS) {
        print_error("embed --tokenize of %d texts tokenized %zu\n", N_TEXTS, since(before));
        fail();
    }
    assert_int_equal(failed, N_TEXTS);
    /* Its lines: clattn_tokenizer_encode's ids. */
    rewind(out);
    static char line[8192], want[8192];
    int32_t ids[128];
    for (size_t i = 0; i < N_TEXTS; i++) {
        size_t n = 0;
        assert_int_equal(clattn_tokenizer_encode(tok, texts[i], lengths[i], 0, ids, 128, &n),
                         CLATTN_OK);
        expected_line(ids, n, want, sizeof(want));
        assert_non_null(fgets(line, sizeof(line), out));
        assert_string_equal(line, want);
    }
    assert_null(fgets(line, sizeof(line), out));
    fclose(out);

    /* A text that cannot be tokenized: the lines before it, its index, each text once. */
    const char *some[] = {texts[0], texts[1], "bad \xff", texts[2]};
    size_t some_lengths[] = {lengths[0], lengths[1], 5, lengths[2]};
    out = tmpfile();
    assert_non_null(out);
    before = clattn__tokenizer_texts_encoded();
    assert_int_equal(embed_write_token_ids(out, tok, some, some_lengths, 4, 0, &failed),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(since(before), 3);
    assert_int_equal(failed, 2);
    assert_non_null(strstr(clattn_last_error(NULL), "not valid UTF-8 at byte 4"));
    rewind(out);
    size_t lines = 0;
    while (fgets(line, sizeof(line), out))
        lines++;
    assert_int_equal(lines, 2);
    fclose(out);

    for (size_t i = 0; i < N_TEXTS; i++)
        free(texts[i]);
    clattn_tokenizer_destroy(&tok);
    test_temp_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_text_path_tokenizes_once),
        cmocka_unit_test(embed_tokenize_tokenizes_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
