/* A byte-level BPE tokenizer built from plain C arrays through the library's builders
 * (clattn__vocab_build, clattn__bpe_build: no JSON), as a source other than tokenizer.json (a
 * GGUF file's metadata) builds one: its ids equal those of the same tokenizer read from
 * tokenizer.json by the library and those of Hugging Face's tokenizers
 * (tests/golden/tokenizer_build from tools/gen_bpe_build_golden.py, whose MERGES this file
 * copies), with the merges given as tokens and as ids, with and without the regex; and the
 * builder's refusals. */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "clattn/tokenizer.h"
#include "text/tokenizer_bpe_internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

#define BUILD_DIR GOLDEN_DIR "/tokenizer_build"

static const char fn[] = "test_tokenizer_build";

/* tools/gen_bpe_build_golden.py's MERGES ("\xC4\xA0" is U+0120, GPT-2's space; "\xC4\x8A"
 * U+010A, its newline). */
static const char *const merges[][2] = {
    {"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}, {"\xC4\xA0", "a"}, {"i", "n"},
    {"e", "r"}, {"o", "n"}, {"\xC4\xA0" "a", "n"}, {"\xC4\xA0" "an", "d"}, {"in", "g"},
    {"r", "e"}, {"a", "t"}, {"\xC4\xA0", "s"}, {"e", "n"}, {"o", "r"}, {"\xC4\xA0", "c"},
    {"a", "b"}, {"ab", "c"}, {"b", "c"}, {"a", "bc"}, {"\xC4\xA0", "\xC4\xA0"},
    {"\xC4\xA0\xC4\xA0", "\xC4\xA0\xC4\xA0"}, {"\xC4\x8A", "\xC4\x8A"}, {"'", "s"},
    {"1", "2"}, {"12", "3"}, {"\xC3\x83", "\xC2\xA9"}, {"\xC3\xA4", "\xC2\xB8"},
    {"\xC3\xA4\xC2\xB8", "\xC5\x83"}, {"\xC4\xA0" "c", "at"}, {"\xC4\xA0s", "at"},
    {"\xC4\xA0the", "re"}, {"\xC4\xA0", "the"}, {"t", "he"}, {"h", "er"}, {"\xC4\xA0", "her"},
};
#define MERGE_COUNT (sizeof(merges) / sizeof(merges[0]))

/* The vocabulary as the generator makes it: GPT-2's character of each byte (ids 0..255), then
 * each merge's token in order, once. */
typedef struct vocabulary {
    char *tokens[256 + MERGE_COUNT];
    size_t count;
} vocabulary;

static void vocabulary_make(vocabulary *v)
{
    v->count = 0;
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        char buffer[8] = {0};
        clattn__utf8_encode(printable ? b : 256 + n++, buffer);
        v->tokens[v->count++] = strdup(buffer);
    }
    for (size_t m = 0; m < MERGE_COUNT; m++) {
        size_t a = strlen(merges[m][0]), b = strlen(merges[m][1]);
        char *joined = malloc(a + b + 1);
        assert_non_null(joined);
        memcpy(joined, merges[m][0], a);
        memcpy(joined + a, merges[m][1], b + 1);
        bool known = false;
        for (size_t k = 0; k < v->count && !known; k++)
            known = strcmp(v->tokens[k], joined) == 0;
        if (known)
            free(joined);
        else
            v->tokens[v->count++] = joined;
    }
}

static void vocabulary_free(vocabulary *v)
{
    for (size_t k = 0; k < v->count; k++)
        free(v->tokens[k]);
}

/* What a loader of another source does: the in-memory tokenizer filled from arrays (no
 * normaliser, no added tokens, no post-processor). The options are those of the generator's
 * tokenizer.json (variant false) or variant.json (true). */
static clattn_status build(bool variant, bool merges_as_ids, clattn_tokenizer **out)
{
    vocabulary v;
    vocabulary_make(&v);
    clattn_tokenizer *tok = calloc(1, sizeof(*tok));
    assert_non_null(tok);
    tok->special = (clattn_tokenizer_special){-1, -1, -1, -1, -1};
    tok->kind = CLATTN__MODEL_BPE;
    tok->max_length = SIZE_MAX;
    clattn_status s = clattn__vocab_build(&tok->vocab, (const char *const *)v.tokens, NULL, NULL,
                                          v.count, fn, "the test's arrays");
    vocabulary_free(&v);
    clattn__bpe_merge by_tokens[MERGE_COUNT];
    int32_t by_ids[MERGE_COUNT][2];
    for (size_t m = 0; m < MERGE_COUNT; m++) {
        by_tokens[m] = (clattn__bpe_merge){merges[m][0], strlen(merges[m][0]), merges[m][1],
                                           strlen(merges[m][1])};
        for (int k = 0; k < 2 && !s; k++) {
            by_ids[m][k] = clattn__vocab_find(&tok->vocab, merges[m][k], strlen(merges[m][k]));
            assert_true(by_ids[m][k] >= 0);
        }
    }
    clattn__bpe_spec spec = {
        .merges = merges_as_ids ? NULL : by_tokens,
        .merge_ids = merges_as_ids ? (const int32_t (*)[2])by_ids : NULL,
        .merge_count = MERGE_COUNT,
        .merges_name = "merges",
        .unk = -1,
        .ignore_merges = variant,
        .byte_level = true,
        .add_prefix_space = variant,
        .pre_tokenizer = variant ? NULL : "gpt2",
    };
    if (!s)
        s = clattn__bpe_build(&tok->bpe, &tok->vocab, &spec, fn, "the test's arrays");
    tok->vocab_size = tok->vocab.count;
    if (!s)
        s = clattn__post_processor_none(&tok->post, fn, "the test's arrays");
    if (s)
        clattn_tokenizer_destroy(&tok);
    *out = tok;
    return s;
}

static void expect_ids(const clattn_tokenizer *tok, const char *what, const char *text,
                       const json_t *want)
{
    clattn_tokens got = {0};
    clattn_status s = clattn_tokenizer_encode_tokens(tok, text, strlen(text), SIZE_MAX, 0, &got);
    if (s)
        print_error("%s: '%s': %s\n", what, text, clattn_last_error(NULL));
    assert_int_equal(s, CLATTN_OK);
    bool same = got.count == json_array_size(want);
    for (size_t i = 0; same && i < got.count; i++)
        same = got.ids[i] == json_integer_value(json_array_get(want, i));
    if (!same) {
        print_error("%s: '%s': %zu ids, Hugging Face's %zu:", what, text, got.count,
                    json_array_size(want));
        for (size_t i = 0; i < got.count; i++)
            print_error(" %d", (int)got.ids[i]);
        print_error(" /");
        for (size_t i = 0; i < json_array_size(want); i++)
            print_error(" %d", (int)json_integer_value(json_array_get(want, i)));
        print_error("\n");
        fail();
    }
    clattn_tokens_free(&got);
}

/* Both files: the built tokenizer (merges as tokens, then as ids) and the loaded one give
 * Hugging Face's ids of every text. */
static void built_equals_loaded_equals_hugging_face(void **state)
{
    (void)state;
    json_t *golden = hf_golden_load_json(BUILD_DIR "/ids.json");
    assert_non_null(golden);
    const json_t *texts = json_object_get(golden, "texts");
    assert_true(json_array_size(texts) > 100);
    static const char *const files[] = {"tokenizer.json", "variant.json"};
    for (int f = 0; f < 2; f++) {
        const json_t *ids = json_object_get(json_object_get(golden, "ids"), files[f]);
        assert_int_equal(json_array_size(ids), json_array_size(texts));
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", BUILD_DIR, files[f]);
        clattn_tokenizer *loaded = NULL, *by_tokens = NULL, *by_ids = NULL;
        assert_int_equal(clattn_tokenizer_load(&loaded, path), CLATTN_OK);
        assert_int_equal(build(f == 1, false, &by_tokens), CLATTN_OK);
        assert_int_equal(build(f == 1, true, &by_ids), CLATTN_OK);
        for (size_t t = 0; t < json_array_size(texts); t++) {
            const char *text = json_string_value(json_array_get(texts, t));
            const json_t *want = json_array_get(ids, t);
            expect_ids(loaded, files[f], text, want);
            expect_ids(by_tokens, "built, merges as tokens", text, want);
            expect_ids(by_ids, "built, merges as ids", text, want);
        }
        clattn_tokenizer_destroy(&loaded);
        clattn_tokenizer_destroy(&by_tokens);
        clattn_tokenizer_destroy(&by_ids);
    }
    json_decref(golden);
}

/* The builder's refusals, each with its status and a message that says why. */
static void expect_build_error(const clattn__vocab *vocab, const clattn__bpe_spec *spec,
                               clattn_status status, const char *needle)
{
    clattn__bpe *bpe = (clattn__bpe *)1;
    clattn_status s = clattn__bpe_build(&bpe, vocab, spec, fn, "the test's arrays");
    const char *message = clattn_last_error(NULL);
    if (s != status || !strstr(message, needle)) {
        print_error("status %d (want %d), message '%s' (want '%s' in it)\n", (int)s,
                    (int)status, message, needle);
        fail();
    }
    assert_null(bpe);
}

static void builder_refusals(void **state)
{
    (void)state;
    vocabulary v;
    vocabulary_make(&v);
    clattn__vocab vocab;
    assert_int_equal(clattn__vocab_build(&vocab, (const char *const *)v.tokens, NULL, NULL,
                                         v.count, fn, "here"), CLATTN_OK);
    clattn__bpe_merge bad_token[] = {{"a", 1, "z\xC3\xA9", 3}};
    clattn__bpe_merge bad_merged[] = {{"b", 1, "a", 1}};
    int32_t bad_id[][2] = {{0, (int32_t)v.count}};
    clattn__bpe_spec spec = {.merges = bad_token, .merge_count = 1, .merges_name = "merges",
                             .unk = -1, .byte_level = true};
    expect_build_error(&vocab, &spec, CLATTN_ERROR_FORMAT,
                       "merges[0]: 'z\xC3\xA9' is not in the vocabulary");
    spec.merges = bad_merged;
    expect_build_error(&vocab, &spec, CLATTN_ERROR_FORMAT,
                       "merges[0]: the merged token 'ba' is not in the vocabulary");
    spec.merges = NULL;
    spec.merge_ids = (const int32_t (*)[2])bad_id;
    expect_build_error(&vocab, &spec, CLATTN_ERROR_FORMAT, "merges[0]: id ");
    spec.merges = bad_merged;
    expect_build_error(&vocab, &spec, CLATTN_ERROR_INVALID_ARGUMENT, "either as tokens or");
    spec = (clattn__bpe_spec){.unk = -1, .byte_level = false};
    expect_build_error(&vocab, &spec, CLATTN_ERROR_UNSUPPORTED, "not byte-level");
    spec = (clattn__bpe_spec){.unk = (int32_t)v.count, .byte_level = true};
    expect_build_error(&vocab, &spec, CLATTN_ERROR_FORMAT, "unknown token's id");
    spec = (clattn__bpe_spec){.unk = -1, .byte_level = true, .pre_tokenizer = "llama3"};
    expect_build_error(&vocab, &spec, CLATTN_ERROR_UNSUPPORTED, "pre-tokenizer 'llama3'");
    /* A vocabulary whose ids repeat is refused by its builder. */
    const char *tokens[] = {"a", "b"};
    const int32_t ids[] = {0, 0};
    clattn__vocab bad;
    assert_int_equal(clattn__vocab_build(&bad, tokens, NULL, ids, 2, fn, "here"),
                     CLATTN_ERROR_FORMAT);
    assert_non_null(strstr(clattn_last_error(NULL), "id 0 is given to both"));
    assert_null(bad.tokens);
    clattn__vocab_free(&vocab);
    vocabulary_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(built_equals_loaded_equals_hugging_face),
        cmocka_unit_test(builder_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
