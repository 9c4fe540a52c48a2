/* The Unigram tokenizer (SentencePiece's Precompiled normaliser, Metaspace, Viterbi, byte
 * fallback) against Hugging Face's fast tokenizer, id for id: a small XLM-RoBERTa-style
 * tokenizer trained offline and its golden ids (tools/gen_unigram_golden.py,
 * tests/golden/unigram/ *.json.gz) in four configurations, on 3000 random multilingual strings
 * and hand-picked ones, and on every code point (alone and after "a") through per-block hashes;
 * a hand-made vocabulary for ties, the unknown penalty and partial byte fallback. Then the
 * loader's errors for what is not supported. CLATTN_UNIGRAM_GOLDEN=DIR compares with the golden
 * files that tools/gen_unigram_golden.py --from-tokenizer FILE --out DIR wrote for another
 * tokenizer.json instead (a real model's). */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "clattn/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

static char temp_dir[1024];
static json_t *base;   /* the golden tokenizer.json */
static json_t *golden; /* golden.json */

static bool custom; /* CLATTN_UNIGRAM_GOLDEN names another golden folder */

/* A gzip'd JSON file of tests/golden/unigram (or of $CLATTN_UNIGRAM_GOLDEN: golden files that
 * tools/gen_unigram_golden.py --from-tokenizer wrote for another tokenizer.json, a real
 * model's), parsed (gzip -dc: no zlib in the tests). */
static json_t *load_gz(const char *name)
{
    char path[2048];
    const char *dir = getenv("CLATTN_UNIGRAM_GOLDEN");
    custom = dir && *dir;
    if (custom)
        snprintf(path, sizeof(path), "%s/%s", dir, name);
    else
        snprintf(path, sizeof(path), "%s/unigram/%s", GOLDEN_DIR, name);
    return hf_golden_load_json_gz(path);
}

static int setup(void **state)
{
    (void)state;
    base = load_gz("tokenizer.json.gz");
    golden = load_gz("golden.json.gz");
    if (!base || !golden)
        return -1;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_unigram_");
}

static int teardown(void **state)
{
    (void)state;
    test_temp_dir_remove(temp_dir);
    json_decref(base);
    json_decref(golden);
    return 0;
}

/* Gives every {"type": "Precompiled"} without a charsmap in j the base tokenizer's charsmap. */
static void fill_charsmap(json_t *j, json_t *charsmap)
{
    if (json_is_object(j)) {
        const char *type = json_string_value(json_object_get(j, "type"));
        if (type && strcmp(type, "Precompiled") == 0 &&
            !json_object_get(j, "precompiled_charsmap"))
            json_object_set(j, "precompiled_charsmap", charsmap);
        const char *key;
        json_t *value;
        json_object_foreach(j, key, value) fill_charsmap(value, charsmap);
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            fill_charsmap(json_array_get(j, i), charsmap);
    }
}

static json_t *base_charsmap(void)
{
    json_t *list = json_object_get(json_object_get(base, "normalizer"), "normalizers");
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *charsmap = json_object_get(json_array_get(list, i), "precompiled_charsmap");
        if (charsmap)
            return charsmap;
    }
    fail_msg("the base tokenizer.json has no Precompiled normaliser");
    return NULL;
}

/* Writes `j` as temp_dir/<name>.json and loads it (failing the test when it does not load). */
static const char *write_json(json_t *j, const char *name)
{
    static char path[2048];
    snprintf(path, sizeof(path), "%s/%s.json", temp_dir, name);
    assert_int_equal(json_dump_file(j, path, JSON_COMPACT), 0);
    return path;
}

/* The base tokenizer with a golden variant's overrides, loaded. */
static clattn_tokenizer *load_variant(const json_t *variant)
{
    json_t *j = json_deep_copy(base);
    static const char *const keys[] = {"normalizer", "pre_tokenizer", "post_processor"};
    for (size_t k = 0; k < 3; k++) {
        json_t *v = json_object_get(variant, keys[k]);
        if (v) {
            json_t *copy = json_deep_copy(v);
            fill_charsmap(copy, base_charsmap());
            json_object_set_new(j, keys[k], copy);
        }
    }
    json_t *bf = json_object_get(variant, "byte_fallback");
    if (bf)
        json_object_set(json_object_get(j, "model"), "byte_fallback", bf);
    const char *path = write_json(j, json_string_value(json_object_get(variant, "name")));
    json_decref(j);
    clattn_tokenizer *tok = NULL;
    clattn_status s = clattn_tokenizer_load(&tok, path);
    if (s)
        fail_msg("loading %s: %s", path, clattn_last_error(NULL));
    return tok;
}

/* The ids of text[0..n-1] (malloc'd; *count set). */
static int32_t *encode(const clattn_tokenizer *tok, const char *text, size_t n, size_t *count)
{
    clattn_status s = clattn_tokenizer_encode(tok, text, n, 0, NULL, 0, count);
    if (s)
        fail_msg("encode: %s", clattn_last_error(NULL));
    int32_t *ids = malloc(*count * sizeof(*ids));
    assert_non_null(ids);
    s = clattn_tokenizer_encode(tok, text, n, 0, ids, *count, count);
    if (s)
        fail_msg("encode: %s", clattn_last_error(NULL));
    return ids;
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    fprintf(stderr, "      %s:", label);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fputc('\n', stderr);
}

/* Every golden text through every variant, id for id. */
static void test_golden_texts(void **state)
{
    (void)state;
    json_t *texts = json_object_get(golden, "texts");
    json_t *variants = json_object_get(golden, "variants");
    assert_true(json_array_size(texts) >= 3000);
    assert_int_equal(json_array_size(variants), custom ? 1 : 4);
    size_t total_bad = 0;
    for (size_t v = 0; v < json_array_size(variants); v++) {
        json_t *variant = json_array_get(variants, v);
        const char *name = json_string_value(json_object_get(variant, "name"));
        json_t *want_all = json_object_get(json_object_get(golden, "ids"), name);
        assert_int_equal(json_array_size(want_all), json_array_size(texts));
        clattn_tokenizer *tok = load_variant(variant);
        size_t bad = 0, ids_total = 0;
        for (size_t t = 0; t < json_array_size(texts); t++) {
            json_t *text = json_array_get(texts, t), *want = json_array_get(want_all, t);
            size_t count = 0;
            int32_t *ids = encode(tok, json_string_value(text), json_string_length(text),
                                  &count);
            bool same = count == json_array_size(want);
            for (size_t i = 0; same && i < count; i++)
                same = ids[i] == json_integer_value(json_array_get(want, i));
            ids_total += count;
            if (!same && ++bad <= 8) {
                fprintf(stderr, "    %s text %zu \"", name, t);
                print_escaped(json_string_value(text), json_string_length(text));
                fprintf(stderr, "\"\n");
                print_ids("ours", ids, count);
                int32_t *w = malloc((json_array_size(want) + 1) * sizeof(*w));
                for (size_t i = 0; i < json_array_size(want); i++)
                    w[i] = (int32_t)json_integer_value(json_array_get(want, i));
                print_ids("Hugging Face", w, json_array_size(want));
                free(w);
            }
            free(ids);
        }
        printf("    %-14s %zu texts, %zu ids, %zu differ\n", name, json_array_size(texts),
               ids_total, bad);
        total_bad += bad;
        clattn_tokenizer_destroy(&tok);
    }
    assert_int_equal(total_bad, 0);
}

/* The golden texts encoded by four threads at once on one tokenizer (the model, the charsmap
 * and the vocabulary are shared and never written): each thread's ids are the golden ones. */
typedef struct thread_job {
    const clattn_tokenizer *tok;
    const json_t *texts, *want;
    size_t mismatches;
} thread_job;

static int encode_thread(void *arg)
{
    thread_job *job = arg;
    int32_t ids[4096];
    for (size_t t = 0; t < json_array_size(job->texts); t++) {
        const json_t *text = json_array_get(job->texts, t), *want = json_array_get(job->want, t);
        size_t count = 0;
        if (clattn_tokenizer_encode(job->tok, json_string_value(text), json_string_length(text),
                                    SIZE_MAX, ids, 4096, &count) != CLATTN_OK ||
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

static void test_concurrent_encoding(void **state)
{
    (void)state;
    json_t *variant = json_array_get(json_object_get(golden, "variants"), 0);
    const char *name = json_string_value(json_object_get(variant, "name"));
    clattn_tokenizer *tok = load_variant(variant);
    thrd_t threads[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tok, json_object_get(golden, "texts"),
                               json_object_get(json_object_get(golden, "ids"), name), 0};
        assert_int_equal(thrd_create(&threads[i], encode_thread, &jobs[i]), thrd_success);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(thrd_join(threads[i], NULL), thrd_success);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    clattn_tokenizer_destroy(&tok);
}

static uint64_t fnv(uint64_t h, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* Every code point (surrogates aside), alone and after "a", hashed per block of 256 as the
 * generator hashes Hugging Face's ids. The suite uses no OpenCL device: on a leg that names one
 * (CLATTN_DEVICE, e.g. tools/run-tests.sh's llvmpipe pass) it has already run on the default leg
 * and is skipped; under AddressSanitizer (ten times slower) every 8th block is checked. */
static void test_every_code_point(void **state)
{
    (void)state;
    const char *device = getenv("CLATTN_DEVICE");
    if (device && *device) {
        printf("    skipped on the CLATTN_DEVICE=%s leg (no device used)\n", device);
        skip();
    }
    const uint32_t stride = SANITIZED ? 8 : 1;
    json_t *variants = json_object_get(golden, "variants");
    json_t *cps = json_object_get(golden, "codepoints");
    size_t bad_blocks = 0, checked = 0;
    for (size_t v = 0; v < json_array_size(variants); v++) {
        json_t *variant = json_array_get(variants, v);
        const char *name = json_string_value(json_object_get(variant, "name"));
        json_t *mine = json_object_get(cps, name);
        if (!mine)
            continue;
        clattn_tokenizer *tok = load_variant(variant);
        static const char *const kinds[] = {"alone", "after_a"};
        for (int k = 0; k < 2; k++) {
            json_t *blocks = json_object_get(mine, kinds[k]);
            assert_int_equal(json_array_size(blocks), 0x1100);
            for (uint32_t block = 0; block < 0x1100; block += stride) {
                const char *want = json_string_value(json_array_get(blocks, block));
                if (!want)
                    continue; /* surrogates */
                uint64_t h = 0xCBF29CE484222325ull;
                for (uint32_t cp = block << 8; cp < (block + 1) << 8; cp++) {
                    char text[8] = "a";
                    size_t n = (size_t)k;
                    unsigned char *u = (unsigned char *)text;
                    if (cp < 0x80) {
                        u[n++] = (unsigned char)cp;
                    } else if (cp < 0x800) {
                        u[n++] = (unsigned char)(0xC0 | cp >> 6);
                        u[n++] = (unsigned char)(0x80 | (cp & 0x3F));
                    } else if (cp < 0x10000) {
                        u[n++] = (unsigned char)(0xE0 | cp >> 12);
                        u[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
                        u[n++] = (unsigned char)(0x80 | (cp & 0x3F));
                    } else {
                        u[n++] = (unsigned char)(0xF0 | cp >> 18);
                        u[n++] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
                        u[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
                        u[n++] = (unsigned char)(0x80 | (cp & 0x3F));
                    }
                    if (cp >= 0xD800 && cp <= 0xDFFF)
                        continue;
                    size_t count = 0;
                    int32_t *ids = encode(tok, text, n, &count);
                    for (size_t i = 0; i < count; i++) {
                        unsigned char le[4] = {(unsigned char)ids[i],
                                               (unsigned char)(ids[i] >> 8),
                                               (unsigned char)(ids[i] >> 16),
                                               (unsigned char)(ids[i] >> 24)};
                        h = fnv(h, le, 4);
                    }
                    free(ids);
                    static const unsigned char sep[4] = {0xFF, 0xFF, 0xFF, 0xFF};
                    h = fnv(h, sep, 4);
                }
                char got[17];
                snprintf(got, sizeof(got), "%016llx", (unsigned long long)h);
                checked++;
                if (strcmp(got, want) != 0 && ++bad_blocks <= 20)
                    fprintf(stderr, "    %s %s: block U+%04X..U+%04X differs\n", name,
                            kinds[k], block << 8, ((block + 1) << 8) - 1);
            }
        }
        clattn_tokenizer_destroy(&tok);
    }
    printf("    %zu blocks of 256 code points checked, %zu differ\n", checked, bad_blocks);
    assert_int_equal(bad_blocks, 0);
}

/* A few rules by hand on the base tokenizer: the pieces are looked up by name. */
static void test_hand(void **state)
{
    (void)state;
    if (custom)
        skip(); /* the trained tokenizer's layout and byte fallback */
    json_t *variant = json_pack("{s:s}", "name", "hand");
    clattn_tokenizer *tok = load_variant(variant);
    json_decref(variant);
    clattn_tokenizer_special sp = clattn_tokenizer_special_ids(tok);
    assert_int_equal(sp.cls, 0);
    assert_int_equal(sp.sep, 2);
    assert_int_equal(sp.pad, 1);
    assert_int_equal(sp.unk, 3);
    assert_int_equal(sp.mask, clattn_tokenizer_token_id(tok, "<mask>"));
    assert_int_equal(clattn_tokenizer_vocab_size(tok),
                     json_array_size(json_object_get(json_object_get(base, "model"), "vocab")));
    /* An empty text, and one that normalises to nothing: <s> </s>. */
    size_t count;
    int32_t *ids = encode(tok, "   ", 3, &count);
    assert_int_equal(count, 2);
    free(ids);
    /* A character outside the vocabulary takes the byte fallback: U+10348 is 4 bytes. */
    ids = encode(tok, "\xF0\x90\x8D\x88", 4, &count);
    int32_t sp_id = clattn_tokenizer_token_id(tok, "\xE2\x96\x81"); /* "▁" */
    size_t at = 1;
    if (sp_id >= 0 && ids[1] == sp_id)
        at = 2;
    assert_int_equal(count, at + 5);
    assert_int_equal(ids[at], clattn_tokenizer_token_id(tok, "<0xF0>"));
    assert_int_equal(ids[at + 3], clattn_tokenizer_token_id(tok, "<0x88>"));
    free(ids);
    clattn_tokenizer_destroy(&tok);

    /* A model folder: tokenizer.json and an XLM-R config.json (positions from 2: 514 rows give
     * 512 tokens); a long text is cut to 511 ids and </s>. */
    char path[2048];
    snprintf(path, sizeof(path), "%s/tokenizer.json", temp_dir);
    assert_int_equal(json_dump_file(base, path, JSON_COMPACT), 0);
    snprintf(path, sizeof(path), "%s/config.json", temp_dir);
    static const char config[] = "{\"model_type\": \"xlm-roberta\", "
                                 "\"max_position_embeddings\": 514}";
    test_write_file(path, config, strlen(config));
    if (clattn_tokenizer_load(&tok, temp_dir))
        fail_msg("loading %s: %s", temp_dir, clattn_last_error(NULL));
    assert_int_equal(clattn_tokenizer_max_length(tok), 512);
    char text[3000];
    for (size_t i = 0; i < 1000; i++)
        memcpy(text + 3 * i, i % 2 ? "ab " : "й ", 3);
    size_t full;
    int32_t *all = malloc(4096 * sizeof(*all));
    assert_non_null(all);
    assert_int_equal(clattn_tokenizer_encode(tok, text, 3000, SIZE_MAX, all, 4096, &full),
                     CLATTN_OK);
    assert_true(full > 512);
    ids = encode(tok, text, 3000, &count);
    assert_int_equal(count, 512);
    assert_memory_equal(ids, all, 511 * sizeof(*ids));
    assert_int_equal(ids[511], 2);
    free(ids);
    free(all);
    clattn_tokenizer_destroy(&tok);
}

/* The hand-made vocabulary (golden "small"): ties, the unknown penalty, partial byte
 * fallback, a null unk_id (Hugging Face fails: so must we), id for id. */
static void test_small_vocabulary(void **state)
{
    (void)state;
    json_t *small = json_object_get(golden, "small");
    if (custom && !small)
        skip();
    json_t *texts = json_object_get(small, "texts"), *variants = json_object_get(small, "variants");
    assert_true(json_array_size(texts) > 500);
    size_t bad = 0, failures = 0;
    for (size_t v = 0; v < json_array_size(variants); v++) {
        json_t *variant = json_array_get(variants, v);
        const char *name = json_string_value(json_object_get(variant, "name"));
        json_t *j = json_deep_copy(json_object_get(small, "tokenizer"));
        json_t *model = json_object_get(j, "model");
        json_object_set(model, "unk_id", json_object_get(variant, "unk_id"));
        json_object_set(model, "byte_fallback", json_object_get(variant, "byte_fallback"));
        const char *path = write_json(j, name);
        json_decref(j);
        clattn_tokenizer *tok = NULL;
        if (clattn_tokenizer_load(&tok, path))
            fail_msg("loading %s: %s", path, clattn_last_error(NULL));
        json_t *want_all = json_object_get(json_object_get(small, "ids"), name);
        for (size_t t = 0; t < json_array_size(texts); t++) {
            const char *text = json_string_value(json_array_get(texts, t));
            json_t *want = json_array_get(want_all, t);
            size_t count = 0;
            int32_t ids[64];
            clattn_status s = clattn_tokenizer_encode(tok, text, strlen(text), 0, ids, 64, &count);
            bool same;
            if (json_is_null(want)) {
                same = s == CLATTN_ERROR_FORMAT && strstr(clattn_last_error(NULL), "unk_id");
                failures++;
            } else {
                same = s == CLATTN_OK && count == json_array_size(want);
                for (size_t i = 0; same && i < count; i++)
                    same = ids[i] == json_integer_value(json_array_get(want, i));
            }
            if (!same && ++bad <= 8) {
                fprintf(stderr, "    small %s text \"%s\": status %d\n", name, text, (int)s);
                if (s == CLATTN_OK)
                    print_ids("ours", ids, count);
            }
        }
        clattn_tokenizer_destroy(&tok);
    }
    printf("    small vocabulary: %zu variants x %zu texts (%zu expected failures), %zu differ\n",
           json_array_size(variants), json_array_size(texts), failures, bad);
    assert_int_equal(bad, 0);
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static unsigned char *b64_decode(const char *text, size_t *size)
{
    size_t n = strlen(text);
    unsigned char *out = malloc(n / 4 * 3 + 3);
    assert_non_null(out);
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && text[i] != '='; i++) {
        const char *c = strchr(b64_alphabet, text[i]);
        assert_non_null(c);
        acc = acc << 6 | (uint32_t)(c - b64_alphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    *size = k;
    return out;
}

static char *b64_encode(const unsigned char *bytes, size_t n)
{
    char *out = malloc((n + 2) / 3 * 4 + 1);
    assert_non_null(out);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)bytes[i] << 16;
        if (i + 1 < n)
            w |= (uint32_t)bytes[i + 1] << 8;
        if (i + 2 < n)
            w |= bytes[i + 2];
        out[k++] = b64_alphabet[w >> 18 & 63];
        out[k++] = b64_alphabet[w >> 12 & 63];
        out[k++] = i + 1 < n ? b64_alphabet[w >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? b64_alphabet[w & 63] : '=';
    }
    out[k] = '\0';
    return out;
}

/* Corrupt charsmaps (bytes changed anywhere, the trie size changed, the map cut short) either
 * fail to load with CLATTN_ERROR_FORMAT or encode without reading outside their arrays (the
 * sanitizer builds watch that); the untouched map round-trips through this test's base64. */
static void test_corrupt_charsmap(void **state)
{
    (void)state;
    size_t size;
    unsigned char *map = b64_decode(json_string_value(base_charsmap()), &size);
    assert_true(size > 1000);
    json_t *texts = json_object_get(golden, "texts");
    test_rng rng = {20261202};
    size_t loaded = 0, refused = 0;
    int trials = custom ? 12 : 120; /* a real model's vocabulary loads in a second or so */
    for (int trial = 0; trial < trials; trial++) {
        unsigned char *copy = malloc(size);
        assert_non_null(copy);
        memcpy(copy, map, size);
        size_t n = size;
        int kind = trial % 4;
        if (trial == 0) {
            /* unchanged */
        } else if (kind == 0) {
            n = (size_t)(test_rng_next(&rng) % size);
        } else if (kind == 1) {
            uint32_t v = (uint32_t)test_rng_next(&rng) % (uint32_t)(2 * size);
            memcpy(copy, &v, 4); /* little-endian hosts: the trie size */
        } else {
            for (int k = 0; k < 1 + trial % 16; k++)
                copy[test_rng_next(&rng) % size] = (unsigned char)test_rng_next(&rng);
        }
        char *text = b64_encode(copy, n);
        free(copy);
        json_t *j = json_deep_copy(base);
        json_t *norm = json_pack("{s:s, s:s}", "type", "Precompiled", "precompiled_charsmap",
                                 text);
        free(text);
        json_object_set_new(j, "normalizer", norm);
        const char *path = write_json(j, "corrupt");
        json_decref(j);
        clattn_tokenizer *tok = NULL;
        clattn_status s = clattn_tokenizer_load(&tok, path);
        if (s) {
            if (s != CLATTN_ERROR_FORMAT)
                fail_msg("trial %d: status %d: %s", trial, (int)s, clattn_last_error(NULL));
            assert_true(trial != 0);
            refused++;
            continue;
        }
        loaded++;
        for (size_t t = 0; t < 60; t++) {
            json_t *str = json_array_get(texts, (size_t)trial * 7 + t);
            size_t count = 0;
            int32_t ids[4096];
            assert_int_equal(clattn_tokenizer_encode(tok, json_string_value(str),
                                                     json_string_length(str), SIZE_MAX, ids,
                                                     4096, &count), CLATTN_OK);
        }
        clattn_tokenizer_destroy(&tok);
    }
    free(map);
    printf("    corrupt charsmaps: %zu loaded and encoded 60 texts each, %zu refused\n", loaded,
           refused);
    assert_true(loaded > (custom ? 0u : 10u));
}

/* Loads the base tokenizer with `key` replaced by the JSON text `value`; expects `status` and
 * `needle` in the message. */
static void expect_load_error(const char *key, const char *value, clattn_status status,
                              const char *needle)
{
    json_t *j = json_deep_copy(base);
    json_error_t error;
    json_t *v = json_loads(value, JSON_DECODE_ANY, &error);
    assert_non_null(v);
    if (strcmp(key, "model.unk_id") == 0)
        json_object_set_new(json_object_get(j, "model"), "unk_id", v);
    else
        json_object_set_new(j, key, v);
    const char *path = write_json(j, "error");
    json_decref(j);
    clattn_tokenizer *tok = NULL;
    clattn_status s = clattn_tokenizer_load(&tok, path);
    assert_null(tok);
    if (s != status || !strstr(clattn_last_error(NULL), needle))
        fail_msg("%s = %s: status %d, message \"%s\"; expected %d and \"%s\"", key, value,
                 (int)s, clattn_last_error(NULL), (int)status, needle);
}

static void test_load_errors(void **state)
{
    (void)state;
    expect_load_error("normalizer", "{\"type\": \"NFKC\"}", CLATTN_ERROR_UNSUPPORTED,
                      "normalizer type 'NFKC' is not supported");
    expect_load_error("normalizer",
                      "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Lowercase\"}]}",
                      CLATTN_ERROR_UNSUPPORTED, "normalizer type 'Lowercase'");
    expect_load_error("normalizer",
                      "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, "
                      "\"content\": \" \"}",
                      CLATTN_ERROR_UNSUPPORTED, "regular expression '\\s+' is not supported");
    expect_load_error("normalizer", "{\"type\": \"Precompiled\", \"precompiled_charsmap\": "
                      "\"AAA\"}", CLATTN_ERROR_FORMAT, "not base64");
    expect_load_error("normalizer", "{\"type\": \"Precompiled\", \"precompiled_charsmap\": "
                      "\"/////w==\"}", CLATTN_ERROR_FORMAT, "does not fit");
    expect_load_error("pre_tokenizer", "{\"type\": \"ByteLevel\"}", CLATTN_ERROR_UNSUPPORTED,
                      "pre_tokenizer type 'ByteLevel' is not supported");
    expect_load_error("pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"ab\"}",
                      CLATTN_ERROR_FORMAT, "not one character");
    expect_load_error("pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"_\", "
                      "\"add_prefix_space\": false}", CLATTN_ERROR_FORMAT, "add_prefix_space");
    expect_load_error("model.unk_id", "2000000000", CLATTN_ERROR_FORMAT, "unk_id");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_golden_texts),
        cmocka_unit_test(test_small_vocabulary),
        cmocka_unit_test(test_concurrent_encoding),
        cmocka_unit_test(test_every_code_point),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_corrupt_charsmap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
