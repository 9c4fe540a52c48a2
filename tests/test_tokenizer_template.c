/* The post-processor's templates of any shape (a BOS-only, EOS-only or empty single template,
 * special tokens of several ids, type ids per piece, a repeated text; BertProcessing,
 * RobertaProcessing, ByteLevel, null, a Sequence) with and without the special tokens
 * (add_special_tokens), single texts and pairs, truncated, stripped or not, appended to a
 * growing clattn_tokens, against Hugging Face's ids and type ids
 * (tests/golden/tokenizer_template/cases.json.gz from tools/gen_template_tokenizer_golden.py,
 * tokenizers 0.22.1); the old calls on the same cases; clattn_tokenizer_post_process against
 * the encoding's own path; special counts; arguments and templates that cannot be used. */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "clattn/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

static char temp_dir[1024];
static json_t *golden; /* cases.json */

static int setup(void **state)
{
    (void)state;
    golden = hf_golden_load_json_gz(GOLDEN_DIR "/tokenizer_template/cases.json.gz");
    if (!golden)
        return -1;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_template_");
}

static int teardown(void **state)
{
    (void)state;
    test_temp_dir_remove(temp_dir);
    json_decref(golden);
    return 0;
}

/* The base tokenizer.json (a path from tests/) with `pp` as its post_processor and no default
 * truncation, written to temp_dir/name.json and loaded: its status, *tok on success. */
static clattn_status load_with(const char *base, const json_t *pp, const char *name,
                               clattn_tokenizer **tok)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/../%s", GOLDEN_DIR, base);
    json_t *j = hf_golden_load_json(path);
    assert_int_equal(json_object_set(j, "post_processor", pp ? (json_t *)pp : json_null()), 0);
    assert_int_equal(json_object_set_new(j, "truncation", json_null()), 0);
    snprintf(path, sizeof(path), "%s/%s.json", temp_dir, name);
    assert_int_equal(json_dump_file(j, path, JSON_COMPACT), 0);
    json_decref(j);
    return clattn_tokenizer_load(tok, path);
}

static clattn_tokenizer *load_variant(const json_t *variant)
{
    const char *base = json_string_value(json_object_get(variant, "base"));
    const json_t *bases = json_object_get(golden, "bases");
    clattn_tokenizer *tok = NULL;
    clattn_status s = load_with(json_string_value(json_object_get(bases, base)),
                                json_object_get(variant, "post_processor"), base, &tok);
    if (s != CLATTN_OK) {
        print_error("%s: %s\n", json_string_value(json_object_get(variant, "name")),
                    clattn_last_error(NULL));
        fail();
    }
    return tok;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    print_error("%s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 48; i++)
        print_error(" %d", (int)ids[i]);
    print_error("\n");
}

enum { CAP = 256 };

/* n ids equal (either pointer may be NULL when n is 0: an empty clattn_tokens). */
static bool same(const int32_t *a, const int32_t *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof(int32_t)) == 0;
}

/* The expected ids and type ids of a case. */
static size_t expected(const json_t *c, int32_t *ids, int32_t *types)
{
    const json_t *wi = json_object_get(c, "ids"), *wt = json_object_get(c, "type_ids");
    assert_true(json_is_array(wi) && json_is_array(wt) &&
                json_array_size(wi) == json_array_size(wt) && json_array_size(wi) <= CAP);
    for (size_t k = 0; k < json_array_size(wi); k++) {
        ids[k] = (int32_t)json_integer_value(json_array_get(wi, k));
        types[k] = (int32_t)json_integer_value(json_array_get(wt, k));
    }
    return json_array_size(wi);
}

/* Every case of every variant, appended one after another to one clattn_tokens: ids and type
 * ids as Hugging Face's; the old calls agree where they apply (special tokens on, no strip). */
static void golden_cases(void **state)
{
    (void)state;
    const json_t *variants = json_object_get(golden, "variants");
    assert_int_equal(json_array_size(variants), 20);
    size_t total = 0, bad = 0;
    for (size_t v = 0; v < json_array_size(variants); v++) {
        const json_t *variant = json_array_get(variants, v);
        const char *name = json_string_value(json_object_get(variant, "name"));
        clattn_tokenizer *tok = load_variant(variant);
        assert_int_equal(clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE),
                         json_integer_value(json_object_get(variant, "added_single")));
        assert_int_equal(clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_PAIR),
                         json_integer_value(json_object_get(variant, "added_pair")));
        const json_t *cases = json_object_get(variant, "cases");
        clattn_tokens all = {0};
        for (size_t i = 0; i < json_array_size(cases); i++, total++) {
            const json_t *c = json_array_get(cases, i);
            const char *a = json_string_value(json_object_get(c, "a"));
            const json_t *bj = json_object_get(c, "b"), *max = json_object_get(c, "max_length");
            const char *b = json_string_value(bj);
            bool special = json_is_true(json_object_get(c, "add_special_tokens"));
            bool strip = json_is_true(json_object_get(c, "strip"));
            size_t max_length = json_is_null(max) ? SIZE_MAX : (size_t)json_integer_value(max);
            unsigned flags = (special ? 0u : (unsigned)CLATTN_ENCODE_NO_SPECIAL_TOKENS) |
                             (strip ? (unsigned)CLATTN_ENCODE_STRIP : 0u);
            int32_t want_ids[CAP], want_types[CAP];
            size_t want = expected(c, want_ids, want_types), start = all.count;
            clattn_status s =
                b ? clattn_tokenizer_encode_pair_tokens(tok, a, strlen(a), b, strlen(b),
                                                        max_length, flags, &all)
                  : clattn_tokenizer_encode_tokens(tok, a, strlen(a), max_length, flags, &all);
            size_t got = all.count - start;
            if (s != CLATTN_OK || got != want ||
                !same(all.ids + start, want_ids, want) ||
                !same(all.type_ids + start, want_types, want)) {
                if (bad++ < 5) {
                    print_error("%s case %zu (a '%s', b '%s', max %zu, special %d, strip %d): "
                                "%s %s\n", name, i, a, b ? b : "(none)", max_length, special,
                                strip, clattn_status_name(s), s ? clattn_last_error(NULL) : "");
                    print_ids("  want ids", want_ids, want);
                    print_ids("  got ids ", all.ids + start, got);
                    print_ids("  want types", want_types, want);
                    print_ids("  got types ", all.type_ids + start, got);
                }
                continue;
            }
            if (!special || strip)
                continue;
            /* The old calls: the same ids (and a pair's type ids). */
            int32_t ids[CAP], types[CAP];
            size_t count = 0;
            s = b ? clattn_tokenizer_encode_pair(tok, a, strlen(a), b, strlen(b), max_length,
                                                 ids, types, CAP, &count)
                  : clattn_tokenizer_encode(tok, a, strlen(a), max_length, ids, CAP, &count);
            if (s != CLATTN_OK || count != want ||
                !same(ids, want_ids, want) || (b && !same(types, want_types, want))) {
                if (bad++ < 5)
                    print_error("%s case %zu: the old call differs (%s)\n", name, i,
                                clattn_status_name(s));
            }
            if (b || strstr(name, "/repeat"))
                continue;
            /* post_process on the text's ids without special tokens nor truncation: the same
             * encoding (Hugging Face's encode is its tokenizing, then its post_process; not
             * where the template repeats the text, whose plain encoding holds it twice). */
            clattn_tokens plain = {0}, post = {0};
            assert_int_equal(clattn_tokenizer_encode_tokens(tok, a, strlen(a), SIZE_MAX,
                                                            CLATTN_ENCODE_NO_SPECIAL_TOKENS,
                                                            &plain), CLATTN_OK);
            s = clattn_tokenizer_post_process(tok, plain.ids, plain.count, max_length, 0, &post);
            if (s != CLATTN_OK || post.count != want || !same(post.ids, want_ids, want) ||
                !same(post.type_ids, want_types, want)) {
                if (bad++ < 5)
                    print_error("%s case %zu: post_process differs (%s)\n", name, i,
                                clattn_status_name(s));
            }
            clattn_tokens_free(&plain);
            clattn_tokens_free(&post);
        }
        clattn_tokens_free(&all);
        assert_null(all.ids);
        clattn_tokenizer_destroy(&tok);
    }
    print_message("    %zu cases, %zu differ\n", total, bad);
    assert_int_equal(bad, 0);
}

/* [CLS] and [SEP] of clattn_tokenizer_special_ids: the single template's first and last ids
 * when special, else -1; the leading special count. */
static void special_ids_and_counts(void **state)
{
    (void)state;
    static const struct {
        const char *variant;
        int32_t cls, sep;
        size_t leading;
    } cases[] = {
        {"wordpiece/bos_only", 2, -1, 1}, {"wordpiece/eos_only", -1, 3, 0},
        {"wordpiece/none", -1, -1, 0},    {"wordpiece/multi", 2, 3, 2},
        {"wordpiece/bert", 2, 3, 1},      {"wordpiece/null", -1, -1, 0},
        {"bpe/sequence", 0, -1, 1},       {"bpe/roberta", 0, 2, 1},
    };
    const json_t *variants = json_object_get(golden, "variants");
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const json_t *variant = NULL;
        for (size_t v = 0; v < json_array_size(variants); v++)
            if (strcmp(json_string_value(json_object_get(json_array_get(variants, v), "name")),
                       cases[k].variant) == 0)
                variant = json_array_get(variants, v);
        assert_non_null(variant);
        clattn_tokenizer *tok = load_variant(variant);
        clattn_tokenizer_special sp = clattn_tokenizer_special_ids(tok);
        if (sp.cls != cases[k].cls || sp.sep != cases[k].sep ||
            clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE_LEADING) !=
                cases[k].leading) {
            print_error("%s: cls %d sep %d leading %zu\n", cases[k].variant, (int)sp.cls,
                        (int)sp.sep,
                        clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE_LEADING));
            fail();
        }
        assert_int_equal(clattn_tokenizer_special_count(tok, (clattn_template_part)7), 0);
        clattn_tokenizer_destroy(&tok);
    }
    assert_int_equal(clattn_tokenizer_special_count(NULL, CLATTN_TEMPLATE_SINGLE), 0);
}

static void expect_status(clattn_status got, clattn_status want, const char *needle)
{
    if (got != want || !strstr(clattn_last_error(NULL), needle)) {
        print_error("got %s '%s', want %s with '%s'\n", clattn_status_name(got),
                    clattn_last_error(NULL), clattn_status_name(want), needle);
        fail();
    }
}

/* Single templates that cannot be used fail the load; bad arguments of the new calls. */
static void refusals(void **state)
{
    (void)state;
    static const struct {
        const char *pp;
        clattn_status status;
        const char *needle;
    } loads[] = {
        {"{\"type\": \"TemplateProcessing\", \"pair\": [], \"special_tokens\": {}}",
         CLATTN_ERROR_FORMAT, "TemplateProcessing has no \"single\" template"},
        {"{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"B\", "
         "\"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}}",
         CLATTN_ERROR_FORMAT, "single[0] is neither"},
        {"{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
         "\"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}}",
         CLATTN_ERROR_FORMAT, "the single template's special token '<s>' has no \"ids\""},
        {"{\"type\": \"Sequence\"}", CLATTN_ERROR_FORMAT, "Sequence has no \"processors\""},
        {"{\"type\": \"Sequence\", \"processors\": [{\"type\": \"Split\"}]}",
         CLATTN_ERROR_UNSUPPORTED, "post_processor type 'Split' is not supported"},
    };
    for (size_t i = 0; i < sizeof(loads) / sizeof(loads[0]); i++) {
        json_error_t error;
        json_t *pp = json_loads(loads[i].pp, 0, &error);
        assert_non_null(pp);
        clattn_tokenizer *tok = (clattn_tokenizer *)1;
        clattn_status s = load_with("data/tokenizer/bpe/roberta.json", pp, "refused", &tok);
        json_decref(pp);
        expect_status(s, loads[i].status, loads[i].needle);
        assert_null(tok);
    }

    const json_t *variant = json_array_get(json_object_get(golden, "variants"), 0);
    clattn_tokenizer *tok = load_variant(variant); /* wordpiece/bos_only: 1 and 2 specials */
    clattn_tokens out = {0};
    expect_status(clattn_tokenizer_encode_tokens(tok, "a", 1, 0, 4, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "flags 0x4 are unknown");
    expect_status(clattn_tokenizer_encode_tokens(NULL, "a", 1, 0, 0, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "tok is NULL");
    expect_status(clattn_tokenizer_encode_tokens(tok, "a", 1, 0, 0, NULL),
                  CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    expect_status(clattn_tokenizer_encode_pair_tokens(tok, "a", 1, "b", 1, 1, 0, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT,
                  "max_length is 1, but the pair template's special tokens need 2");
    expect_status(clattn_tokenizer_encode_tokens(tok, "\xff", 1, 0, CLATTN_ENCODE_STRIP, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "the text is not valid UTF-8 at byte 0");
    /* Stripped, the offset still counts from the text as given. */
    expect_status(clattn_tokenizer_encode_tokens(tok, "  a\xff ", 5, 0, CLATTN_ENCODE_STRIP,
                                                 &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "not valid UTF-8 at byte 3 (bytes FF 20)");
    int32_t ids[3] = {2, 99999, 3};
    expect_status(clattn_tokenizer_post_process(tok, ids, 3, 0, 0, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "ids[1] is 99999, not a token id");
    expect_status(clattn_tokenizer_post_process(tok, ids, 1, 0, CLATTN_ENCODE_STRIP, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "flags 0x2 are unknown here");
    assert_int_equal(out.count, 0);
    /* Only special tokens fit: nothing of the text; no special tokens: max_length 1 is one id. */
    assert_int_equal(clattn_tokenizer_encode_tokens(tok, "a b c", 5, 1, 0, &out), CLATTN_OK);
    assert_int_equal(out.count, 1);
    assert_int_equal(clattn_tokenizer_encode_tokens(tok, "a b c", 5, 1,
                                                    CLATTN_ENCODE_NO_SPECIAL_TOKENS, &out),
                     CLATTN_OK);
    assert_int_equal(out.count, 2);
    assert_int_not_equal(out.ids[1], 2);
    out.count = out.capacity + 1;
    expect_status(clattn_tokenizer_encode_tokens(tok, "a", 1, 0, 0, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "is over out->capacity");
    clattn_tokens_free(&out);
    out.ids = malloc(4 * sizeof(int32_t));
    out.capacity = 4;
    expect_status(clattn_tokenizer_encode_pair_tokens(tok, "a", 1, "b", 1, 0, 0, &out),
                  CLATTN_ERROR_INVALID_ARGUMENT, "out->ids or out->type_ids is NULL");
    clattn_tokens_free(&out);
    clattn_tokens_free(NULL);
    clattn_tokenizer_destroy(&tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_cases),
        cmocka_unit_test(special_ids_and_counts),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
