/* Byte-level BPE tokenizers (RoBERTa, GPT-2, ModernBERT style) from tokenizer.json, against
 * Hugging Face's tokenizers 0.19.1 id for id: small tokenizers trained offline and their golden
 * files (tools/gen_bpe_golden.py), hand-made tokenizer.json files for the merge order and the
 * errors. */
#include "common/test_util.h"
#include "clattn/tokenizer.h"
#include "text/tokenizer_bpe_internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include <utf8proc.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif
#ifndef TOK_FIXTURE_DIR
#error "TOK_FIXTURE_DIR must name tests/data/tokenizer (meson passes it with c_args)"
#endif

#define BPE_DIR TOK_FIXTURE_DIR "/bpe"

static clattn_tokenizer *load_ok(const char *path)
{
    clattn_tokenizer *tok = NULL;
    clattn_status s = clattn_tokenizer_load(&tok, path);
    if (s != CLATTN_OK) {
        print_error("loading %s: %s\n", path, clattn_last_error(NULL));
        fail();
    }
    return tok;
}

static json_t *load_json(const char *path)
{
    json_error_t error;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &error);
    if (!root) {
        print_error("%s: %s (line %d)\n", path, error.text, error.line);
        fail();
    }
    return root;
}

/* The tokenizer of a JSON object: written to a temporary file, loaded. */
static clattn_status load_from_json(const json_t *root, clattn_tokenizer **tok)
{
    char dir[4096], path[4200];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-bpe-"), 0);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    test_write_file(path, text, strlen(text));
    free(text);
    clattn_status s = clattn_tokenizer_load(tok, path);
    test_temp_dir_remove(dir);
    return s;
}

static size_t encode(const clattn_tokenizer *tok, const char *text, size_t length,
                     int32_t **ids)
{
    size_t count = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, text, length, SIZE_MAX, NULL, 0, &count),
                     CLATTN_OK);
    *ids = malloc(count * sizeof(**ids));
    assert_non_null(*ids);
    size_t again = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, text, length, SIZE_MAX, *ids, count, &again),
                     CLATTN_OK);
    assert_int_equal(again, count);
    return count;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    print_error("  %s (%zu):", label, n);
    for (size_t i = 0; i < n; i++)
        print_error(" %d", (int)ids[i]);
    print_error("\n");
}

/* ---- hand-made tokenizers: the merge order, the options, the errors ---- */

/* A tokenizer.json with the 256 byte characters (ids 0..255, in byte order), then `extra`
 * tokens, the given merges, a ByteLevel pre-tokeniser and <s> A </s>. */
static json_t *tiny_tokenizer(const char *const *extra, size_t extra_count,
                              const char *const *merges, size_t merge_count)
{
    uint32_t byte_cp[256];
    json_t *vocab = json_object();
    char buffer[64];
    /* bytes_to_unicode, written out independently of the library's table. */
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        size_t k = clattn__utf8_encode(byte_cp[b], buffer);
        buffer[k] = 0;
        json_object_set_new(vocab, buffer, json_integer(b));
    }
    for (size_t i = 0; i < extra_count; i++)
        json_object_set_new(vocab, extra[i], json_integer(256 + (json_int_t)i));
    json_object_set_new(vocab, "<s>", json_integer(256 + (json_int_t)extra_count));
    json_object_set_new(vocab, "</s>", json_integer(257 + (json_int_t)extra_count));
    json_t *m = json_array();
    for (size_t i = 0; i < merge_count; i++)
        json_array_append_new(m, json_string(merges[i]));
    json_t *root = json_pack(
        "{s:n, s:n, s:n, s:{s:s, s:b, s:b, s:b}, s:{s:s, s:[s,i], s:[s,i]}, "
        "s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}}",
        "added_tokens", "normalizer", "truncation",
        "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 1,
        "post_processor", "type", "RobertaProcessing", "sep", "</s>",
        (int)(257 + extra_count), "cls", "<s>", (int)(256 + extra_count),
        "model", "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix",
        "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0, "vocab",
        vocab, "merges", m);
    assert_non_null(root);
    return root;
}

static void expect_tiny_ids(json_t *root, const char *text, const int32_t *want, size_t n)
{
    clattn_tokenizer *tok = NULL;
    if (load_from_json(root, &tok) != CLATTN_OK) {
        print_error("%s\n", clattn_last_error(NULL));
        fail();
    }
    int32_t *ids = NULL;
    size_t count = encode(tok, text, strlen(text), &ids);
    bool same = count == n && memcmp(ids, want, n * sizeof(*ids)) == 0;
    if (!same) {
        print_error("'%s':\n", text);
        print_ids("got", ids, count);
        print_ids("want", want, n);
    }
    free(ids);
    clattn_tokenizer_destroy(&tok);
    assert_true(same);
}

static void byte_level_alphabet(void **state)
{
    (void)state;
    /* GPT-2's mapping: a space is U+0120 'Ġ', a newline U+010A 'Ċ', '!' itself, 0xAD U+0143. */
    json_t *root = tiny_tokenizer(NULL, 0, NULL, 0);
    clattn_tokenizer *tok = NULL;
    assert_int_equal(load_from_json(root, &tok), CLATTN_OK);
    assert_string_equal(clattn_tokenizer_token(tok, ' '), "\xC4\xA0");
    assert_string_equal(clattn_tokenizer_token(tok, '\n'), "\xC4\x8A");
    assert_int_equal(tok->bpe->byte_cp[' '], 0x120);
    assert_int_equal(tok->bpe->byte_cp['\n'], 0x10A);
    assert_int_equal(tok->bpe->byte_cp['!'], '!');
    assert_int_equal(tok->bpe->byte_cp[0xAD], 0x143);
    assert_int_equal(tok->bpe->byte_cp[0], 0x100);
    assert_int_equal(tok->bpe->byte_cp[0x7F], 0x121);
    /* Without merges, each byte is its own id; <s> and </s> around. */
    const char *text = "A \xC3\xA9!";
    int32_t *ids = NULL;
    size_t n = encode(tok, text, strlen(text), &ids);
    int32_t want[] = {256, 'A', ' ', 0xC3, 0xA9, '!', 257};
    assert_int_equal(n, 7);
    assert_memory_equal(ids, want, sizeof(want));
    free(ids);
    clattn_tokenizer_destroy(&tok);
    json_decref(root);
}

static void merges_by_rank(void **state)
{
    (void)state;
    /* "abc" with merges ["b c", "a b", "a bc"]: b c first (rank 0), then a bc: one token; with
     * ["a b", "b c", "ab c"]: a b first, then ab c. The lower rank wins, not the position. */
    const char *extra1[] = {"bc", "ab", "abc"};
    const char *merges1[] = {"b c", "a b", "a bc"};
    json_t *root = tiny_tokenizer(extra1, 3, merges1, 3);
    expect_tiny_ids(root, "abc", (int32_t[]){259, 258, 260}, 3);
    /* "abab": rank 1 "a b" twice, then nothing merges ab with ab. */
    expect_tiny_ids(root, "abab", (int32_t[]){259, 257, 257, 260}, 4);
    /* "bcb": b c at 0 (rank 0), the b at 2 stays. */
    expect_tiny_ids(root, "bcb", (int32_t[]){259, 256, 'b', 260}, 4);
    json_decref(root);
    /* Leftmost first among equal ranks: "aaa" gives aa a, "aaaa" aa aa. */
    const char *extra2[] = {"aa", "ab"};
    const char *merges2[] = {"a a"};
    root = tiny_tokenizer(extra2, 2, merges2, 1);
    expect_tiny_ids(root, "aaa", (int32_t[]){258, 256, 'a', 259}, 4);
    expect_tiny_ids(root, "aaaa", (int32_t[]){258, 256, 256, 259}, 4);
    expect_tiny_ids(root, "aab", (int32_t[]){258, 256, 'b', 259}, 4);
    json_decref(root);
    /* A pair listed twice keeps its later rank (the crate's HashMap): with "a a" at 0 and 2
     * and "a b" at 1, "aab" merges a b first. */
    const char *merges3[] = {"a a", "a b", "a a"};
    root = tiny_tokenizer(extra2, 2, merges3, 3);
    expect_tiny_ids(root, "aab", (int32_t[]){258, 'a', 257, 259}, 4);
    json_decref(root);
    /* The regex splits before merging: "a b" never merges across the space; with the space's
     * character "Ġb" as a token, " b" is one id. */
    const char *extra4[] = {"ab", "\xC4\xA0" "b"};
    const char *merges4[] = {"a b", "\xC4\xA0 b"};
    root = tiny_tokenizer(extra4, 2, merges4, 2);
    expect_tiny_ids(root, "ab b", (int32_t[]){258, 256, 257, 259}, 4);
    expect_tiny_ids(root, "a  b", (int32_t[]){258, 'a', ' ', 257, 259}, 5);
    json_decref(root);
    /* ignore_merges: a pre-token that is a vocabulary entry is that entry, whatever the merges
     * would make of it ("abc" is in the vocabulary, but no merge builds it). */
    const char *extra5[] = {"ab", "abc"};
    const char *merges5[] = {"a b"};
    root = tiny_tokenizer(extra5, 2, merges5, 1);
    expect_tiny_ids(root, "abc", (int32_t[]){258, 256, 'c', 259}, 4);
    json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_true());
    expect_tiny_ids(root, "abc", (int32_t[]){258, 257, 259}, 3);
    expect_tiny_ids(root, "abcab", (int32_t[]){258, 256, 'c', 256, 259}, 5);
    json_decref(root);
}

static void expect_load_error(json_t *root, clattn_status status, const char *needle)
{
    clattn_tokenizer *tok = NULL;
    clattn_status s = load_from_json(root, &tok);
    const char *message = clattn_last_error(NULL);
    if (s != status || !strstr(message, needle)) {
        print_error("status %d (want %d), message '%s' (want '%s' in it)\n", (int)s,
                    (int)status, message, needle);
        fail();
    }
    assert_null(tok);
}

static void unsupported_options(void **state)
{
    (void)state;
    const char *extra[] = {"ab"};
    const char *merges[] = {"a b"};
    json_t *base = tiny_tokenizer(extra, 1, merges, 1);
    json_t *root = json_deep_copy(base);
    json_object_set_new(json_object_get(root, "model"), "dropout", json_real(0.1));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "\"dropout\" 0.1 is not supported");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(json_object_get(root, "model"), "byte_fallback", json_true());
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "\"byte_fallback\" true is not supported");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s}", "type", "Metaspace"));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "pre_tokenizer type 'Metaspace'");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:[]}", "type", "Sequence",
                                                         "pretokenizers"));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "pre_tokenizer type 'Sequence'");
    json_decref(root);
    root = json_deep_copy(base);
    /* A Sequence of two processors that add tokens (ByteLevel alone, or beside one, adds
     * nothing: tests/test_tokenizer_template.c). */
    json_object_set_new(root, "post_processor",
                        json_pack("{s:s, s:[{s:s, s:[s,i], s:[s,i]}, {s:s, s:[s,i], s:[s,i]}]}",
                                  "type", "Sequence", "processors", "type", "BertProcessing",
                                  "cls", "<s>", 0, "sep", "</s>", 2, "type", "BertProcessing",
                                  "cls", "<s>", 0, "sep", "</s>", 2));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "a Sequence of more than one processor");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFKC"));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "normalizer type 'NFKC'");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(root, "pre_tokenizer", json_null());
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "pre_tokenizer type 'null'");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(json_object_get(root, "model"), "type", json_string("Foo"));
    expect_load_error(root, CLATTN_ERROR_UNSUPPORTED, "model type 'Foo' is not supported");
    json_decref(root);
    /* Malformed merges. */
    const char *bad[][2] = {{"a  b", "is not \"A B\""}, {"ab", "is not \"A B\""},
                            {"a z\xC3\xA9", "'z\xC3\xA9' is not in the vocabulary"},
                            {"b a", "the merged token 'ba' is not in the vocabulary"}};
    for (size_t i = 0; i < 4; i++) {
        root = json_deep_copy(base);
        json_array_set_new(json_object_get(json_object_get(root, "model"), "merges"), 0,
                           json_string(bad[i][0]));
        expect_load_error(root, CLATTN_ERROR_FORMAT, bad[i][1]);
        json_decref(root);
    }
    root = json_deep_copy(base);
    json_object_del(json_object_get(root, "model"), "merges");
    expect_load_error(root, CLATTN_ERROR_FORMAT, "\"merges\" is missing");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(json_object_get(root, "model"), "unk_token", json_string("<nope>"));
    expect_load_error(root, CLATTN_ERROR_FORMAT, "'<nope>' (\"model\".\"unk_token\") is not");
    json_decref(root);
    root = json_deep_copy(base);
    json_object_set_new(json_object_get(root, "pre_tokenizer"), "use_regex", json_string("x"));
    expect_load_error(root, CLATTN_ERROR_FORMAT, "must be booleans");
    json_decref(root);
    /* The newer merges form ["a", "b"] is read as well. */
    root = json_deep_copy(base);
    json_array_set_new(json_object_get(json_object_get(root, "model"), "merges"), 0,
                       json_pack("[s,s]", "a", "b"));
    expect_tiny_ids(root, "ab", (int32_t[]){257, 256, 258}, 3);
    json_decref(root);
    json_decref(base);
}

/* Byte mutations of suffix.json (prefix, suffix, unk, merges): each mutant loads or fails with
 * a message, and a loaded one encodes hostile texts (for the sanitizers). */
static void fuzzed_bpe_json(void **state)
{
    (void)state;
    size_t size;
    unsigned char *orig = test_read_file(BPE_DIR "/suffix.json", &size);
    unsigned char *buf = malloc(size);
    assert_non_null(buf);
    char dir[4096], path[4200];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-bpe-fuzz-"), 0);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    test_rng rng = {0xb9e};
    static const char bytes[] = "{}[]\":,0123456789-tfn# \\\x80\xff\xc4\xa0";
    const char *texts[] = {"", " ", "Hello world, it's 東京!", "\xc4\xa0\xc4\xa0 <s></s>",
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                           "\t\n \xe2\x80\xa8 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb x"};
    size_t loaded = 0;
    for (int iter = 0; iter < 300; iter++) {
        memcpy(buf, orig, size);
        int edits = 1 + (int)(test_rng_next(&rng) % 4);
        for (int e = 0; e < edits; e++)
            buf[test_rng_next(&rng) % size] =
                (unsigned char)bytes[test_rng_next(&rng) % (sizeof(bytes) - 1)];
        test_write_file(path, buf, size);
        clattn_tokenizer *tok = NULL;
        clattn_status s = clattn_tokenizer_load(&tok, path);
        if (s) {
            assert_null(tok);
            assert_non_null(strstr(clattn_last_error(NULL), "clattn_tokenizer_load: "));
            continue;
        }
        loaded++;
        for (size_t t = 0; t < sizeof(texts) / sizeof(*texts); t++) {
            int32_t ids[256];
            size_t count;
            s = clattn_tokenizer_encode(tok, texts[t], strlen(texts[t]), 0, ids, 256, &count);
            assert_int_equal(s, CLATTN_OK);
            assert_true(count >= clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE));
        }
        clattn_tokenizer_destroy(&tok);
    }
    test_temp_dir_remove(dir);
    print_message("    fuzzed suffix.json: %zu of 300 byte mutants loaded\n", loaded);
    free(buf);
    free(orig);

    /* Structured mutants: the options and merges changed, merges dropped or made up. */
    json_t *base = load_json(BPE_DIR "/suffix.json");
    static const char *const strings[] = {"", "##", "</w>", "\xc4\xa0", "<unk>", "a", "##a",
                                          "a</w>", "<s>", "zz", "\xc3\xa9"};
    const size_t ns = sizeof(strings) / sizeof(*strings);
    size_t structured = 0;
    for (int iter = 0; iter < 300; iter++) {
        json_t *root = json_deep_copy(base);
        json_t *model = json_object_get(root, "model");
        json_t *merges = json_object_get(model, "merges");
        int edits = 1 + (int)(test_rng_next(&rng) % 4);
        for (int e = 0; e < edits; e++) {
            const char *str = strings[test_rng_next(&rng) % ns];
            const char *other = strings[test_rng_next(&rng) % ns];
            size_t m = json_array_size(merges);
            switch (test_rng_next(&rng) % 9) {
            case 0:
                json_object_set_new(model, "continuing_subword_prefix", json_string(str));
                break;
            case 1:
                json_object_set_new(model, "end_of_word_suffix", json_string(str));
                break;
            case 2:
                json_object_set_new(model, "unk_token",
                                    test_rng_next(&rng) % 2 ? json_null() : json_string(str));
                break;
            case 3:
                json_object_set_new(model, test_rng_next(&rng) % 2 ? "fuse_unk" : "ignore_merges",
                                    json_boolean(test_rng_next(&rng) % 2));
                break;
            case 4:
                json_object_set_new(json_object_get(root, "pre_tokenizer"),
                                    test_rng_next(&rng) % 2 ? "add_prefix_space" : "use_regex",
                                    json_boolean(test_rng_next(&rng) % 2));
                break;
            case 5:
                if (m)
                    json_array_remove(merges, test_rng_next(&rng) % m);
                break;
            case 6: {
                char merge[64];
                snprintf(merge, sizeof(merge), "%s %s", str, other);
                json_array_insert_new(merges, m ? test_rng_next(&rng) % m : 0,
                                      json_string(merge));
                break;
            }
            case 7:
                /* a merge of two existing merges' results, somewhere */
                if (m >= 2) {
                    json_t *pair = json_pack("[s,s]", json_string_value(json_array_get(merges,
                                             test_rng_next(&rng) % m)), other);
                    json_array_append_new(merges, pair);
                }
                break;
            default:
                json_object_set_new(root, "normalizer", test_rng_next(&rng) % 2
                                        ? json_null() : json_pack("{s:s}", "type", "NFC"));
                break;
            }
        }
        clattn_tokenizer *tok = NULL;
        clattn_status st = load_from_json(root, &tok);
        json_decref(root);
        if (st) {
            assert_null(tok);
            assert_non_null(strstr(clattn_last_error(NULL), "clattn_tokenizer_load: "));
            continue;
        }
        structured++;
        for (size_t t = 0; t < sizeof(texts) / sizeof(*texts); t++) {
            int32_t ids[256];
            size_t count;
            assert_int_equal(clattn_tokenizer_encode(tok, texts[t], strlen(texts[t]), 0, ids,
                                                     256, &count), CLATTN_OK);
            assert_true(count >= 2);
        }
        clattn_tokenizer_destroy(&tok);
    }
    json_decref(base);
    print_message("    structured mutants of suffix.json: %zu of 300 loaded\n", structured);
    assert_true(structured > 50);
}

/* ---- the trained tokenizers against tokenizers 0.19.1 ---- */

static void roberta_settings(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load_ok(BPE_DIR "/roberta.json");
    clattn_tokenizer_special sp = clattn_tokenizer_special_ids(tok);
    assert_int_equal(sp.cls, 0);   /* <s> */
    assert_int_equal(sp.sep, 2);   /* </s> */
    assert_int_equal(sp.pad, 1);   /* <pad> */
    assert_int_equal(sp.mask, 4);  /* <mask> */
    assert_int_equal(sp.unk, -1);  /* unk_token null */
    assert_int_equal(clattn_tokenizer_vocab_size(tok), 1501);
    assert_int_equal(clattn_tokenizer_max_length(tok), SIZE_MAX);
    /* Truncation keeps <s> and </s>. */
    const char *text = "Hello world, hello world";
    int32_t ids[4];
    size_t count = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, text, strlen(text), 4, ids, 4, &count),
                     CLATTN_OK);
    assert_int_equal(count, 4);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[3], 2);
    int32_t *all = NULL;
    size_t n = encode(tok, text, strlen(text), &all);
    assert_true(n > 4);
    assert_memory_equal(ids + 1, all + 1, 2 * sizeof(*ids));
    free(all);
    clattn_tokenizer_destroy(&tok);
}

/* A RoBERTa folder: tokenizer.json and config.json (max_position_embeddings 514, positions
 * from 2): 512 ids at most. */
static void roberta_folder(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-roberta-"), 0);
    size_t size;
    unsigned char *bytes = test_read_file(BPE_DIR "/roberta.json", &size);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    test_write_file(path, bytes, size);
    free(bytes);
    static const char *const types[][2] = {{"roberta", "512"}, {"xlm-roberta", "512"},
                                           {"modernbert", "514"}};
    for (size_t i = 0; i < 3; i++) {
        char config[256];
        int n = snprintf(config, sizeof(config),
                         "{\"model_type\": \"%s\", \"max_position_embeddings\": 514}",
                         types[i][0]);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        test_write_file(path, config, (size_t)n);
        clattn_tokenizer *tok = load_ok(dir);
        assert_int_equal(clattn_tokenizer_max_length(tok), strtoul(types[i][1], NULL, 10));
        clattn_tokenizer_destroy(&tok);
    }
    test_temp_dir_remove(dir);
}

/* Applies a golden set's "changes" ({"pre_tokenizer": {...}, "model": {...}} merged into
 * those objects, "normalizer": {...} in place of the file's) to the file. */
static clattn_tokenizer *golden_tokenizer(const json_t *set)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", BPE_DIR,
             json_string_value(json_object_get(set, "file")));
    const json_t *changes = json_object_get(set, "changes");
    if (!json_is_object(changes))
        return load_ok(path);
    json_t *root = load_json(path);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)changes, key, value) {
        if (strcmp(key, "normalizer") == 0)
            json_object_set(root, key, value);
        else
            assert_int_equal(json_object_update(json_object_get(root, key), value), 0);
    }
    clattn_tokenizer *tok = NULL;
    if (load_from_json(root, &tok) != CLATTN_OK) {
        print_error("%s\n", clattn_last_error(NULL));
        fail();
    }
    json_decref(root);
    return tok;
}

static void golden_random(void **state)
{
    (void)state;
    json_t *root = load_json(GOLDEN_DIR "/tokenizer_bpe/random.json");
    const json_t *sets = json_object_get(root, "sets");
    assert_true(json_array_size(sets) > 0);
    size_t total = 0, differ = 0, known = 0;
    for (size_t s = 0; s < json_array_size(sets); s++) {
        const json_t *set = json_array_get(sets, s);
        const char *name = json_string_value(json_object_get(set, "name"));
        clattn_tokenizer *tok = golden_tokenizer(set);
        const json_t *cases = json_object_get(set, "cases");
        size_t set_differ = 0, set_known = 0;
        for (size_t c = 0; c < json_array_size(cases); c++) {
            const json_t *one = json_array_get(cases, c);
            const json_t *text = json_object_get(one, "text");
            const json_t *want = json_object_get(one, "ids");
            int32_t *ids = NULL;
            size_t n = encode(tok, json_string_value(text), json_string_length(text), &ids);
            bool same = n == json_array_size(want);
            for (size_t i = 0; same && i < n; i++)
                same = ids[i] == json_integer_value(json_array_get(want, i));
            /* A text with a code point where the Unicode versions of NFC differ (nfc.json)
             * may differ. */
            if (!same && json_is_true(json_object_get(one, "known_diff"))) {
                set_known++;
                same = true;
            }
            if (!same && ++set_differ <= 5) {
                print_error("%s case %zu differs: \"%s\"\n", name, c, json_string_value(text));
                print_ids("ours", ids, n);
                int32_t *w = malloc((json_array_size(want) + 1) * sizeof(*w));
                for (size_t i = 0; i < json_array_size(want); i++)
                    w[i] = (int32_t)json_integer_value(json_array_get(want, i));
                print_ids("Hugging Face", w, json_array_size(want));
                free(w);
            }
            free(ids);
        }
        print_message("    %-14s %4zu texts, %zu differ (and %zu with a code point of a documented "
                      "NFC difference)\n", name, json_array_size(cases), set_differ, set_known);
        total += json_array_size(cases);
        differ += set_differ;
        known += set_known;
        clattn_tokenizer_destroy(&tok);
    }
    print_message("    %zu texts in all, %zu differ from tokenizers %s (%zu more by documented "
                  "NFC differences)\n", total, differ,
                  json_string_value(json_object_get(root, "tokenizers")), known);
    json_decref(root);
    assert_int_equal(differ, 0);
}

typedef struct split_lengths {
    const char *text;
    size_t lengths[64];
    size_t count;
} split_lengths;

static bool on_split(void *user, size_t start, size_t end)
{
    split_lengths *sl = user;
    size_t chars = 0;
    for (size_t i = start; i < end; i++)
        chars += ((unsigned char)sl->text[i] & 0xC0) != 0x80;
    if (sl->count < 64)
        sl->lengths[sl->count] = chars;
    sl->count++;
    return true;
}

static uint32_t fnv1a(const int32_t *ids, size_t n)
{
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            h = (h ^ (((uint32_t)ids[i] >> (8 * k)) & 0xFF)) * 0x01000193u;
    return h;
}

/* Every code point through the ByteLevel regex (PCRE2) against the crate's (Oniguruma) splits
 * of a probe text, and every code point end to end, by blocks of 256, against a hash of the
 * crate's ids. */
static void golden_every_code_point(void **state)
{
    (void)state;
    json_t *root = load_json(GOLDEN_DIR "/tokenizer_bpe/unicode.json");
    clattn_tokenizer *tok = load_ok(BPE_DIR "/roberta.json");
    const char *probe = json_string_value(json_object_get(root, "probe"));
    const json_t *kinds = json_object_get(root, "kinds");
    const json_t *runs = json_object_get(root, "runs");
    assert_non_null(probe);
    size_t checked = 0, differ = 0;
    char text[256];
    for (size_t r = 0; r < json_array_size(runs); r++) {
        const json_t *run = json_array_get(runs, r);
        uint32_t lo = (uint32_t)json_integer_value(json_array_get(run, 0));
        uint32_t hi = (uint32_t)json_integer_value(json_array_get(run, 1));
        const json_t *want = json_array_get(kinds, json_integer_value(json_array_get(run, 2)));
        for (uint32_t cp = lo; cp <= hi; cp++) {
            /* The probe with {c} replaced by the code point. */
            char c[5];
            size_t cl = clattn__utf8_encode(cp, c);
            size_t length = 0;
            for (const char *p = probe; *p;) {
                if (strncmp(p, "{c}", 3) == 0) {
                    memcpy(text + length, c, cl);
                    length += cl;
                    p += 3;
                } else {
                    text[length++] = *p++;
                }
            }
            split_lengths sl = {.text = text};
            assert_true(clattn__bpe_split(tok->bpe, text, length, on_split, &sl));
            bool same = sl.count == json_array_size(want);
            for (size_t i = 0; same && i < sl.count; i++)
                same = sl.lengths[i] == (size_t)json_integer_value(json_array_get(want, i));
            if (!same && ++differ <= 20) {
                print_error("U+%04X: %zu pre-tokens of lengths", (unsigned)cp, sl.count);
                for (size_t i = 0; i < sl.count && i < 64; i++)
                    print_error(" %zu", sl.lengths[i]);
                print_error(", Hugging Face %zu\n", json_array_size(want));
            }
            checked++;
        }
    }
    print_message("    %zu code points through the regex, %zu differ\n", checked, differ);
    assert_int_equal(checked, 0x110000 - 0x800);
    assert_int_equal(differ, 0);

    /* End to end: the text of each block of 256 code points. */
    size_t chunk = (size_t)json_integer_value(json_object_get(root, "chunk"));
    const json_t *hashes = json_object_get(root, "chunk_fnv1a");
    assert_int_equal(json_array_size(hashes) * chunk, 0x110000);
    char *block = malloc(chunk * 6);
    assert_non_null(block);
    size_t chunks_differ = 0;
    for (size_t k = 0; k < json_array_size(hashes); k++) {
        size_t length = 0;
        for (uint32_t cp = (uint32_t)(k * chunk); cp < (k + 1) * chunk; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF)
                continue;
            if (length)
                block[length++] = ' ';
            length += clattn__utf8_encode(cp, block + length);
            block[length++] = 'a';
        }
        int32_t *ids = NULL;
        size_t n = encode(tok, block, length, &ids);
        uint32_t h = fnv1a(ids, n);
        if (h != (uint32_t)json_integer_value(json_array_get(hashes, k)) &&
            ++chunks_differ <= 10)
            print_error("the block U+%04zX..U+%04zX gives other ids than Hugging Face's\n",
                        k * chunk, (k + 1) * chunk - 1);
        free(ids);
    }
    free(block);
    print_message("    %zu blocks of %zu code points end to end, %zu differ\n",
                  json_array_size(hashes), chunk, chunks_differ);
    assert_int_equal(chunks_differ, 0);
    clattn_tokenizer_destroy(&tok);
    json_decref(root);
}

/* nfc.json's probe of cp as code points: {c} is cp, {d} its canonical decomposition. */
static void nfc_probe(const char *probe, uint32_t cp, clattn__cps *out)
{
    out->count = 0;
    uint32_t d[32];
    size_t dn = 1;
    d[0] = cp;
    if (cp != 0) {
        char c[5] = {0};
        clattn__utf8_encode(cp, c);
        utf8proc_uint8_t *nfd = utf8proc_NFD((const utf8proc_uint8_t *)c);
        assert_non_null(nfd);
        size_t length = strlen((const char *)nfd);
        dn = 0;
        for (size_t i = 0; i < length && dn < 32;) {
            size_t k = clattn__utf8_decode(nfd + i, length - i, &d[dn++]);
            assert_true(k > 0);
            i += k;
        }
        free(nfd);
    }
    size_t length = strlen(probe);
    for (size_t i = 0; i < length;) {
        if (strncmp(probe + i, "{c}", 3) == 0) {
            assert_true(clattn__cps_push(out, cp));
            i += 3;
        } else if (strncmp(probe + i, "{d}", 3) == 0) {
            for (size_t k = 0; k < dn; k++)
                assert_true(clattn__cps_push(out, d[k]));
            i += 3;
        } else {
            uint32_t x;
            size_t k = clattn__utf8_decode((const unsigned char *)probe + i, length - i, &x);
            assert_true(k > 0);
            assert_true(clattn__cps_push(out, x));
            i += k;
        }
    }
}

static uint32_t fnv1a_cps(const uint32_t *cps, size_t n)
{
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            h = (h ^ ((cps[i] >> (8 * k)) & 0xFF)) * 0x01000193u;
    return h;
}

/* The normalizer NFC on every code point against Hugging Face's, but for the documented code
 * points where the Unicode versions differ (where ours must then differ, or the list is
 * stale). */
static void golden_nfc_every_code_point(void **state)
{
    (void)state;
    json_t *root = load_json(GOLDEN_DIR "/tokenizer_bpe/nfc.json");
    const char *probe = json_string_value(json_object_get(root, "probe"));
    const json_t *listed = json_object_get(root, "differ");
    assert_non_null(probe);
    const clattn__normalizer norm = {.enabled = true, .nfc = true};
    unsigned char *skip = calloc(0x110000, 1);
    assert_non_null(skip);
    clattn__cps text = {0}, ours = {0}, all = {0};
    size_t stale = 0;
    for (size_t i = 0; i < json_array_size(listed); i++) {
        const json_t *entry = json_array_get(listed, i);
        uint32_t cp = (uint32_t)json_integer_value(json_array_get(entry, 0));
        const json_t *theirs = json_array_get(entry, 1);
        assert_true(cp < 0x110000);
        skip[cp] = 1;
        nfc_probe(probe, cp, &text);
        ours.count = 0;
        assert_true(clattn__normalize(&norm, text.data, text.count, &ours));
        /* Theirs as code points. */
        const char *t = json_string_value(theirs);
        size_t tl = json_string_length(theirs), n = 0;
        bool same = true;
        for (size_t j = 0; j < tl; n++) {
            uint32_t x;
            size_t k = clattn__utf8_decode((const unsigned char *)t + j, tl - j, &x);
            assert_true(k > 0);
            same = same && n < ours.count && ours.data[n] == x;
            j += k;
        }
        if (same && n == ours.count && ++stale <= 10)
            print_error("U+%04X is listed as an NFC difference but agrees\n", (unsigned)cp);
    }
    size_t chunk = (size_t)json_integer_value(json_object_get(root, "chunk"));
    const json_t *hashes = json_object_get(root, "chunk_fnv1a");
    assert_int_equal(json_array_size(hashes) * chunk, 0x110000);
    size_t differ = 0;
    for (size_t k = 0; k < json_array_size(hashes); k++) {
        all.count = 0;
        for (uint32_t cp = (uint32_t)(k * chunk); cp < (k + 1) * chunk; cp++) {
            if ((cp >= 0xD800 && cp <= 0xDFFF) || skip[cp])
                continue;
            nfc_probe(probe, cp, &text);
            for (size_t i = 0; i < text.count; i++)
                assert_true(clattn__cps_push(&all, text.data[i]));
        }
        ours.count = 0;
        assert_true(clattn__normalize(&norm, all.data, all.count, &ours));
        if (fnv1a_cps(ours.data, ours.count) !=
                (uint32_t)json_integer_value(json_array_get(hashes, k)) && ++differ <= 10)
            print_error("NFC of the block U+%04zX..U+%04zX differs from Hugging Face's\n",
                        k * chunk, (k + 1) * chunk - 1);
    }
    print_message("    NFC: %zu blocks of %zu code points, %zu differ; %zu code points documented "
                  "as differing (Unicode 8.0 against 15.0), %zu of them agree\n",
                  json_array_size(hashes), chunk, differ, json_array_size(listed), stale);
    clattn__cps_free(&text);
    clattn__cps_free(&ours);
    clattn__cps_free(&all);
    free(skip);
    json_decref(root);
    assert_int_equal(differ, 0);
    assert_int_equal(stale, 0);
}

/* The golden texts encoded by four threads at once on one tokenizer (the PCRE2 code and the
 * merges are shared, match data per call): each thread's ids are the single-threaded ones. */
typedef struct thread_job {
    const clattn_tokenizer *tok;
    const json_t *cases;
    size_t mismatches;
} thread_job;

static int encode_thread(void *arg)
{
    thread_job *job = arg;
    int32_t ids[4096];
    for (int round = 0; round < 2; round++)
        for (size_t c = 0; c < json_array_size(job->cases); c++) {
            const json_t *one = json_array_get(job->cases, c);
            const json_t *text = json_object_get(one, "text");
            const json_t *want = json_object_get(one, "ids");
            size_t count = 0;
            if (clattn_tokenizer_encode(job->tok, json_string_value(text),
                                        json_string_length(text), SIZE_MAX, ids, 4096,
                                        &count) != CLATTN_OK ||
                count != json_array_size(want)) {
                job->mismatches++;
                continue;
            }
            for (size_t i = 0; i < count; i++)
                if (ids[i] != json_integer_value(json_array_get(want, i))) {
                    job->mismatches++;
                    break;
                }
        }
    return 0;
}

static void concurrent_encoding(void **state)
{
    (void)state;
    json_t *root = load_json(GOLDEN_DIR "/tokenizer_bpe/random.json");
    const json_t *set = json_array_get(json_object_get(root, "sets"), 0);
    assert_string_equal(json_string_value(json_object_get(set, "file")), "roberta.json");
    clattn_tokenizer *tok = golden_tokenizer(set);
    thrd_t threads[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tok, json_object_get(set, "cases"), 0};
        assert_int_equal(thrd_create(&threads[i], encode_thread, &jobs[i]), thrd_success);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(thrd_join(threads[i], NULL), thrd_success);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    clattn_tokenizer_destroy(&tok);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(byte_level_alphabet),
        cmocka_unit_test(merges_by_rank),
        cmocka_unit_test(unsupported_options),
        cmocka_unit_test(fuzzed_bpe_json),
        cmocka_unit_test(roberta_settings),
        cmocka_unit_test(roberta_folder),
        cmocka_unit_test(golden_random),
        cmocka_unit_test(golden_every_code_point),
        cmocka_unit_test(golden_nfc_every_code_point),
        cmocka_unit_test(concurrent_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
