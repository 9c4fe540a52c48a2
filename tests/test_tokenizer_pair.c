/* Pair encoding (clattn_tokenizer_encode_pair): random multilingual pairs on WordPiece, byte-level
 * BPE and Unigram tokenizers with their pair templates, truncated longest-first, against Hugging
 * Face's ids and type ids (tests/golden/tokenizer_pair/pairs.json.gz from
 * tools/gen_pair_golden.py, tokenizers 0.19.1); hand-checked truncation lengths and templates;
 * arguments, invalid UTF-8 and pair templates that cannot be applied. */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "clattn/tokenizer.h"
#include "text/tokenizer_internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TOK_FIXTURE_DIR
#error "TOK_FIXTURE_DIR must name tests/data/tokenizer (meson passes it with c_args)"
#endif
#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

static char temp_dir[1024];
static json_t *golden; /* pairs.json */

static int setup(void **state)
{
    (void)state;
    golden = hf_golden_load_json_gz(GOLDEN_DIR "/tokenizer_pair/pairs.json.gz");
    if (!golden)
        return -1;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_pair_");
}

static int teardown(void **state)
{
    (void)state;
    test_temp_dir_remove(temp_dir);
    json_decref(golden);
    return 0;
}

static clattn_tokenizer *load(const char *path)
{
    clattn_tokenizer *tok = NULL;
    if (clattn_tokenizer_load(&tok, path) != CLATTN_OK) {
        print_error("loading %s: %s\n", path, clattn_last_error(NULL));
        fail();
    }
    return tok;
}

/* Writes j as temp_dir/<name>.json and loads it. */
static clattn_tokenizer *load_json(const json_t *j, const char *name)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s.json", temp_dir, name);
    assert_int_equal(json_dump_file(j, path, JSON_COMPACT), 0);
    return load(path);
}

static json_t *read_json(const char *path)
{
    json_error_t error;
    json_t *j = json_load_file(path, 0, &error);
    if (!j) {
        print_error("%s: %s (line %d)\n", path, error.text, error.line);
        fail();
    }
    return j;
}

/* The tokenizer of a golden set: its file (a path from tests/; .gz decompressed), with the set's
 * overrides (members such as "post_processor") in place of the file's. */
static clattn_tokenizer *set_tokenizer(const json_t *set)
{
    const char *file = json_string_value(json_object_get(set, "tokenizer"));
    json_t *overrides = json_object_get(set, "overrides");
    assert_non_null(file);
    char path[4096];
    if (strcmp(file, "minilm") == 0)
        snprintf(path, sizeof(path), "%s/tokenizer.json", test_real_model_or_skip());
    else
        snprintf(path, sizeof(path), "%s/../%s", GOLDEN_DIR, file);
    size_t n = strlen(path);
    bool gz = n > 3 && strcmp(path + n - 3, ".gz") == 0;
    if (!gz && !overrides)
        return load(path);
    json_t *j = gz ? hf_golden_load_json_gz(path) : read_json(path);
    assert_non_null(j);
    if (overrides)
        assert_int_equal(json_object_update(j, overrides), 0);
    clattn_tokenizer *tok = load_json(j, json_string_value(json_object_get(set, "name")));
    json_decref(j);
    return tok;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    print_error("%s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 48; i++)
        print_error(" %d", (int)ids[i]);
    print_error("%s\n", n > 48 ? " ..." : "");
}

/* Encodes every pair of the golden set and compares ids and type ids; returns the cases. */
static size_t compare_set(const json_t *set)
{
    const char *name = json_string_value(json_object_get(set, "name"));
    const json_t *cases = json_object_get(set, "cases");
    assert_true(json_array_size(cases) > 0);
    clattn_tokenizer *tok = set_tokenizer(set);
    size_t bad = 0;
    enum { CAP = 512 };
    int32_t ids[CAP], types[CAP], want_ids[CAP], want_types[CAP];
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const json_t *a = json_object_get(c, "a"), *b = json_object_get(c, "b");
        const json_t *max = json_object_get(c, "max_length");
        const json_t *wi = json_object_get(c, "ids"), *wt = json_object_get(c, "type_ids");
        assert_true(json_is_string(a) && json_is_string(b) && json_is_array(wi) &&
                    json_is_array(wt) && json_array_size(wi) == json_array_size(wt) &&
                    json_array_size(wi) <= CAP);
        size_t want = json_array_size(wi);
        for (size_t k = 0; k < want; k++) {
            want_ids[k] = (int32_t)json_integer_value(json_array_get(wi, k));
            want_types[k] = (int32_t)json_integer_value(json_array_get(wt, k));
        }
        size_t max_length = json_is_null(max) ? SIZE_MAX : (size_t)json_integer_value(max);
        size_t queried = 0, count = 0;
        clattn_status s1 = clattn_tokenizer_encode_pair(
            tok, json_string_value(a), json_string_length(a), json_string_value(b),
            json_string_length(b), max_length, NULL, NULL, 0, &queried);
        clattn_status s2 = clattn_tokenizer_encode_pair(
            tok, json_string_value(a), json_string_length(a), json_string_value(b),
            json_string_length(b), max_length, ids, types, CAP, &count);
        if (s1 || s2) {
            print_error("%s case %zu: %s\n", name, i, clattn_last_error(NULL));
            fail();
        }
        bool same = queried == count && count == want &&
                    memcmp(ids, want_ids, want * sizeof(*ids)) == 0 &&
                    memcmp(types, want_types, want * sizeof(*types)) == 0;
        if (!same) {
            if (bad < 5) {
                print_error("%s case %zu (max_length %s%zu) differs:\n", name, i,
                            json_is_null(max) ? "none " : "", json_is_null(max) ? 0 : max_length);
                print_ids("  ids", ids, count);
                print_ids("  want", want_ids, want);
                print_ids("  types", types, count);
                print_ids("  want", want_types, want);
            }
            bad++;
        }
    }
    print_message("%s: %zu pairs (%lld special tokens), %zu differ from Hugging Face's\n", name,
                  json_array_size(cases), json_integer_value(json_object_get(set, "added")), bad);
    clattn_tokenizer_destroy(&tok);
    assert_int_equal(bad, 0);
    return json_array_size(cases);
}

/* ---- against Hugging Face ---- */

static void golden_sets(void **state)
{
    (void)state;
    const json_t *sets = json_object_get(golden, "sets");
    size_t total = 0, compared = 0;
    for (size_t i = 0; i < json_array_size(sets); i++) {
        const json_t *set = json_array_get(sets, i);
        if (strcmp(json_string_value(json_object_get(set, "tokenizer")), "minilm") == 0)
            continue; /* real_model_pairs */
        total += compare_set(set);
        compared++;
    }
    assert_int_equal(compared, 9);
    assert_true(total >= 1000);
}

/* The real all-MiniLM-L6-v2 (skipped when tools/fetch-model.sh has not fetched it). */
static void real_model_pairs(void **state)
{
    (void)state;
    const json_t *sets = json_object_get(golden, "sets");
    for (size_t i = 0; i < json_array_size(sets); i++) {
        const json_t *set = json_array_get(sets, i);
        if (strcmp(json_string_value(json_object_get(set, "tokenizer")), "minilm") == 0) {
            compare_set(set);
            return;
        }
    }
    fail_msg("pairs.json.gz has no minilm set: run tools/gen_pair_golden.py with the model");
}

/* ---- by hand ---- */

/* The truncated lengths, worked out from utils/truncation.rs by hand. */
static void longest_first_lengths(void **state)
{
    (void)state;
    static const struct {
        size_t a, b, budget, keep_a, keep_b;
    } cases[] = {
        {3, 4, 7, 3, 4},              /* they fit exactly */
        {3, 4, SIZE_MAX, 3, 4},       /* no truncation */
        {2, 10, 7, 2, 5},             /* the shorter fits in its half: the longer is cut */
        {10, 2, 7, 5, 2},
        {3, 10, 7, 3, 4},             /* 3 = 7 / 2: still kept whole */
        {4, 10, 7, 3, 4},             /* 4 > 7 / 2: halves, the odd one to the longer */
        {10, 4, 7, 4, 3},
        {5, 5, 7, 3, 4},              /* equal: B counts as the longer */
        {6, 5, 7, 4, 3},
        {5, 6, 7, 3, 4},
        {5, 5, 8, 4, 4},
        {100, 100, 1, 0, 1},
        {100, 0, 1, 1, 0},
        {0, 9, 0, 0, 0},              /* a budget of 0 keeps nothing */
        {9, 9, 0, 0, 0},
        {0, 0, 0, 0, 0},
        /* No overflow where n_a + n_b would wrap around. */
        {SIZE_MAX / 2, SIZE_MAX / 2 + 2, SIZE_MAX - 1, SIZE_MAX / 2, SIZE_MAX / 2},
        {SIZE_MAX, SIZE_MAX, SIZE_MAX - 2, SIZE_MAX / 2 - 1, SIZE_MAX / 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t ka = 99, kb = 99;
        clattn__truncate_longest_first(cases[i].a, cases[i].b, cases[i].budget, &ka, &kb);
        if (ka != cases[i].keep_a || kb != cases[i].keep_b) {
            print_error("case %zu: (%zu, %zu, budget %zu) kept (%zu, %zu), want (%zu, %zu)\n", i,
                        cases[i].a, cases[i].b, cases[i].budget, ka, kb, cases[i].keep_a,
                        cases[i].keep_b);
            fail();
        }
    }
}

/* The ids of tests/data/tokenizer/vocab.txt (line k is id k). */
enum { CLS = 2, SEP = 3, HELLO = 5, WORLD = 6, COMMA = 10, BANG = 11, A = 16, THE = 18 };

static void expect_pair(const clattn_tokenizer *tok, const char *a, const char *b,
                        size_t max_length, const int32_t *want_ids, const int32_t *want_types,
                        size_t want, int line)
{
    int32_t ids[64], types[64];
    size_t count = 0;
    clattn_status s = clattn_tokenizer_encode_pair(tok, a, strlen(a), b, strlen(b), max_length,
                                                   ids, types, 64, &count);
    if (s) {
        print_error("line %d: %s\n", line, clattn_last_error(NULL));
        fail();
    }
    if (count != want || memcmp(ids, want_ids, want * sizeof(*ids)) != 0 ||
        memcmp(types, want_types, want * sizeof(*types)) != 0) {
        print_error("line %d:\n", line);
        print_ids("  ids", ids, count);
        print_ids("  want", want_ids, want);
        print_ids("  types", types, count);
        print_ids("  want", want_types, want);
        fail();
    }
}

#define EXPECT_PAIR(tok, a, b, max, ids_, types_)                                              \
    do {                                                                                       \
        const int32_t wi_[] = ids_, wt_[] = types_;                                            \
        assert_int_equal(sizeof(wi_), sizeof(wt_));                                            \
        expect_pair((tok), (a), (b), (max), wi_, wt_, sizeof(wi_) / sizeof(*wi_), __LINE__);   \
    } while (0)
#define L(...) {__VA_ARGS__}

/* A vocab.txt: BERT's template, type ids 0 then 1, truncation on the tiny vocabulary. */
static void vocab_txt_template(void **state)
{
    (void)state;
    char path[2048];
    snprintf(path, sizeof(path), "%s/vocab.txt", TOK_FIXTURE_DIR);
    clattn_tokenizer *tok = load(path);
    EXPECT_PAIR(tok, "Hello", "world", 0, L(CLS, HELLO, SEP, WORLD, SEP), L(0, 0, 0, 1, 1));
    EXPECT_PAIR(tok, "", "", SIZE_MAX, L(CLS, SEP, SEP), L(0, 0, 1));
    EXPECT_PAIR(tok, "hello, world!", "", SIZE_MAX,
                L(CLS, HELLO, COMMA, WORLD, BANG, SEP, SEP), L(0, 0, 0, 0, 0, 0, 1));
    /* 4 and 1 ids, budget 3 (max_length 6): 1 <= 3 / 2, so A keeps 3 - 1 = 2. */
    EXPECT_PAIR(tok, "hello, world!", "the", 6, L(CLS, HELLO, COMMA, SEP, THE, SEP),
                L(0, 0, 0, 0, 1, 1));
    /* 2 and 2 ids, budget 3: halves, the odd id to B (equal lengths). */
    EXPECT_PAIR(tok, "hello world", "a the", 6, L(CLS, HELLO, SEP, A, THE, SEP),
                L(0, 0, 0, 1, 1, 1));
    /* 3 and 2, budget 3: A is the longer and gets 2. */
    EXPECT_PAIR(tok, "hello world!", "a the", 6, L(CLS, HELLO, WORLD, SEP, A, SEP),
                L(0, 0, 0, 0, 1, 1));
    /* max_length 3: the special tokens alone. */
    EXPECT_PAIR(tok, "hello world!", "a the", 3, L(CLS, SEP, SEP), L(0, 0, 1));
    /* A special token in a text is a token of that text ("[SEP]" in text_b has type 1). */
    EXPECT_PAIR(tok, "hello", "[SEP] world", 0, L(CLS, HELLO, SEP, SEP, WORLD, SEP),
                L(0, 0, 0, 1, 1, 1));
    clattn_tokenizer_destroy(&tok);
}

static json_t *wordpiece_json(void)
{
    return read_json(GOLDEN_DIR "/tokenizer_pair/wordpiece.json");
}

/* Arguments, capacity, counting, type_ids NULL, the default max_length, invalid UTF-8. */
static void arguments_and_errors(void **state)
{
    (void)state;
    char path[2048];
    snprintf(path, sizeof(path), "%s/vocab.txt", TOK_FIXTURE_DIR);
    clattn_tokenizer *tok = load(path);
    int32_t ids[16], types[16];
    size_t count = 777;
    const char *fn = "clattn_tokenizer_encode_pair: invalid argument: ";
#define BAD(call, needle)                                                                     \
    do {                                                                                      \
        assert_int_equal((call), CLATTN_ERROR_INVALID_ARGUMENT);                              \
        const char *msg_ = clattn_last_error(NULL);                                           \
        if (strncmp(msg_, fn, strlen(fn)) != 0 || !strstr(msg_, (needle))) {                  \
            print_error("message '%s' lacks '%s'\n", msg_, (needle));                        \
            fail();                                                                           \
        }                                                                                     \
    } while (0)
    BAD(clattn_tokenizer_encode_pair(NULL, "a", 1, "b", 1, 0, ids, types, 16, &count),
        "tok is NULL");
    BAD(clattn_tokenizer_encode_pair(tok, NULL, 1, "b", 1, 0, ids, types, 16, &count),
        "text_a is NULL but length_a is 1");
    BAD(clattn_tokenizer_encode_pair(tok, "a", 1, NULL, 2, 0, ids, types, 16, &count),
        "text_b is NULL but length_b is 2");
    BAD(clattn_tokenizer_encode_pair(tok, "a", 1, "b", 1, 0, ids, types, 16, NULL),
        "count is NULL");
    BAD(clattn_tokenizer_encode_pair(tok, "a", 1, "b", 1, 0, NULL, types, 16, &count),
        "ids is NULL but capacity is 16");
    BAD(clattn_tokenizer_encode_pair(tok, "a", 1, "b", 1, 2, ids, types, 16, &count),
        "max_length is 2, but the pair template's special tokens need 3");
    BAD(clattn_tokenizer_encode_pair(tok, "a\xc3", 2, "b", 1, 0, ids, types, 16, &count),
        "text_a is not valid UTF-8 at byte 1 (bytes C3)");
    BAD(clattn_tokenizer_encode_pair(tok, "a", 1, "hello \xed\xa0\x80", 9, 0, ids, types, 16,
                                     &count),
        "text_b is not valid UTF-8 at byte 6 (bytes ED A0 80)");
    assert_int_equal(count, 777); /* untouched by failures */
    /* NULL texts of length 0 are empty texts. */
    assert_int_equal(clattn_tokenizer_encode_pair(tok, NULL, 0, NULL, 0, 0, ids, types, 16,
                                                  &count), CLATTN_OK);
    assert_int_equal(count, 3);
    /* Count only, then too small a capacity: the count, nothing written. */
    count = 0;
    assert_int_equal(clattn_tokenizer_encode_pair(tok, "hello", 5, "world", 5, 0, NULL, NULL, 0,
                                                  &count), CLATTN_OK);
    assert_int_equal(count, 5);
    for (size_t i = 0; i < 16; i++)
        ids[i] = types[i] = -7;
    count = 0;
    BAD(clattn_tokenizer_encode_pair(tok, "hello", 5, "world", 5, 0, ids, types, 4, &count),
        "ids has room for 4 ids but the encoding has 5");
    assert_int_equal(count, 5);
    for (size_t i = 0; i < 16; i++)
        assert_true(ids[i] == -7 && types[i] == -7);
    /* type_ids NULL; exactly the capacity; nothing written past the count. */
    assert_int_equal(clattn_tokenizer_encode_pair(tok, "hello", 5, "world", 5, 0, ids, NULL, 5,
                                                  &count), CLATTN_OK);
    const int32_t want[] = {CLS, HELLO, SEP, WORLD, SEP};
    assert_memory_equal(ids, want, sizeof(want));
    assert_int_equal(ids[5], -7);
    assert_int_equal(types[0], -7);
    clattn_tokenizer_destroy(&tok);

    /* max_length 0 is the tokenizer's default: truncation.max_length 9 here. */
    json_t *j = wordpiece_json();
    json_t *trunc = json_pack("{s:s, s:i, s:s, s:i}", "direction", "Right", "max_length", 9,
                              "strategy", "LongestFirst", "stride", 0);
    assert_int_equal(json_object_set_new(j, "truncation", trunc), 0);
    tok = load_json(j, "default_length");
    json_decref(j);
    const char *a = "the quick brown fox jumps over the lazy dog";
    const char *b = "Hello, world! We're sure they'll say";
    int32_t by_default[16], explicit9[16];
    size_t n0 = 0, n9 = 0, unlimited = 0;
    assert_int_equal(clattn_tokenizer_encode_pair(tok, a, strlen(a), b, strlen(b), 0, by_default,
                                                  NULL, 16, &n0), CLATTN_OK);
    assert_int_equal(clattn_tokenizer_encode_pair(tok, a, strlen(a), b, strlen(b), 9, explicit9,
                                                  NULL, 16, &n9), CLATTN_OK);
    assert_int_equal(clattn_tokenizer_encode_pair(tok, a, strlen(a), b, strlen(b), SIZE_MAX,
                                                  NULL, NULL, 0, &unlimited), CLATTN_OK);
    assert_int_equal(n0, 9);
    assert_int_equal(n9, 9);
    assert_memory_equal(by_default, explicit9, sizeof(*explicit9) * 9);
    assert_true(unlimited > 9);
    clattn_tokenizer_destroy(&tok);
#undef BAD
}

/* A post_processor's pair template that cannot be applied: the tokenizer loads and encodes
 * single texts; encode_pair names the cause. */
static void unusable_pair_templates(void **state)
{
    (void)state;
    static const struct {
        const char *pair;      /* the "pair" member's JSON; NULL: none */
        const char *specials;  /* extra special_tokens members */
        clattn_status status;
        const char *needle;
    } cases[] = {
        {NULL, "", CLATTN_ERROR_FORMAT, "TemplateProcessing has no \"pair\" template"},
        {"{}", "", CLATTN_ERROR_FORMAT, "TemplateProcessing has no \"pair\" template"},
        {"[{\"Sequence\": {\"id\": \"C\", \"type_id\": 0}}]", "", CLATTN_ERROR_FORMAT,
         "pair[0] is neither"},
        {"[{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\"}}]", "",
         CLATTN_ERROR_FORMAT, "pair[1] is neither"},
        {"[{\"Sequence\": {\"id\": \"A\", \"type_id\": -1}}]", "", CLATTN_ERROR_FORMAT,
         "pair[0] is neither"},
        {"[{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}, \"SpecialToken\": {\"id\": \"[CLS]\", "
         "\"type_id\": 0}}]", "", CLATTN_ERROR_FORMAT, "pair[0] is neither"},
        {"[{\"SpecialToken\": {\"id\": \"[X]\", \"type_id\": 0}}]", "", CLATTN_ERROR_FORMAT,
         "the pair template's special token '[X]' has no \"ids\" in \"special_tokens\""},
        {"[{\"SpecialToken\": {\"id\": \"[X]\", \"type_id\": 0}}]",
         ", \"[X]\": {\"id\": \"[X]\", \"ids\": [2, 99999], \"tokens\": [\"a\", \"b\"]}",
         CLATTN_ERROR_FORMAT, "special_tokens '[X]': ids[1] is not a token's id"},
        {"[{\"Sequence\": {\"id\": \"B\", \"type_id\": 2147483648}}]", "",
         CLATTN_ERROR_UNSUPPORTED, "pair[0]'s type_id 2147483648 is over 2^31 - 1"},
    };
    json_t *base = wordpiece_json();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[2048];
        snprintf(text, sizeof(text),
                 "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
                 "\"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
                 "{\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}]%s%s, "
                 "\"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [2], \"tokens\": "
                 "[\"[CLS]\"]}, \"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [3], \"tokens\": "
                 "[\"[SEP]\"]}%s}}",
                 cases[i].pair ? ", \"pair\": " : "", cases[i].pair ? cases[i].pair : "",
                 cases[i].specials);
        json_error_t error;
        json_t *pp = json_loads(text, 0, &error);
        if (!pp) {
            print_error("case %zu: %s\n", i, error.text);
            fail();
        }
        json_t *j = json_deep_copy(base);
        assert_int_equal(json_object_set_new(j, "post_processor", pp), 0);
        clattn_tokenizer *tok = load_json(j, "unusable");
        json_decref(j);
        size_t count = 0;
        assert_int_equal(clattn_tokenizer_encode(tok, "hello", 5, 0, NULL, 0, &count), CLATTN_OK);
        assert_true(count >= 3);
        count = 777;
        int32_t ids[8];
        clattn_status s = clattn_tokenizer_encode_pair(tok, "a", 1, "b", 1, 0, ids, NULL, 8,
                                                       &count);
        const char *msg = clattn_last_error(NULL);
        const char *prefix = "clattn_tokenizer_encode_pair: the tokenizer's pair template "
                             "cannot be used: post_processor: ";
        if (s != cases[i].status || strncmp(msg, prefix, strlen(prefix)) != 0 ||
            !strstr(msg, cases[i].needle)) {
            print_error("case %zu: got %s '%s', want %s with '%s'\n", i, clattn_status_name(s),
                        msg, clattn_status_name(cases[i].status), cases[i].needle);
            fail();
        }
        assert_int_equal(count, 777);
        clattn_tokenizer_destroy(&tok);
    }
    json_decref(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(longest_first_lengths),
        cmocka_unit_test(vocab_txt_template),
        cmocka_unit_test(arguments_and_errors),
        cmocka_unit_test(unusable_pair_templates),
        cmocka_unit_test(golden_sets),
        cmocka_unit_test(real_model_pairs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
