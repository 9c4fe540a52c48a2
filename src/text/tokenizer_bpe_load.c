/* Loading a byte-level BPE model from tokenizer.json: "model" (type "BPE") and its ByteLevel
 * "pre_tokenizer", as the tokenizers crate (0.19.1) deserialises them
 * (models/bpe/serialization.rs, BpeBuilder::build, pre_tokenizers/byte_level.rs). */
#include "tokenizer_bpe_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char load_fn[] = "clattn_tokenizer_load";

/*
 * The GPT-2 pre-tokenisation regex of the crate's ByteLevel,
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * which the crate runs with Oniguruma (the onig crate, Oniguruma 6.9.8, Unicode 14.0), for
 * PCRE2 compiled with PCRE2_UTF | PCRE2_UCP (Debian 12's 10.42, also Unicode 14.0).
 * Oniguruma's \s is Unicode's White_Space (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000); PCRE2's \s with PCRE2_UCP is
 * \p{Z} with \h and \v, which adds U+180E (MONGOLIAN VOWEL SEPARATOR, a format character since
 * Unicode 6.3). So \s is spelled out as that class (WS below), which is the same in every
 * Unicode version since 6.3. \p{L} and \p{N} are the two libraries' own tables: both of
 * Unicode 14.0 here, and equal for every code point (tests/test_tokenizer_bpe.c checks them
 * all against the crate's splits). A PCRE2 of another Unicode version (10.43 and later:
 * Unicode 15.0 and up) classes the letters and digits assigned after 14.0 (such as U+11F04
 * KAWI LETTER A) as \p{L} and \p{N}, where the crate sees unassigned code points, which fall
 * in the class [^\s\p{L}\p{N}] of symbols and punctuation: the splits around them differ.
 */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+";

/* GPT-2's bytes_to_unicode: the printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF)
 * stand for themselves, the others in order for U+0100, U+0101, ... */
static void bytes_to_unicode(uint32_t table[256])
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        table[b] = printable ? b : 256 + n++;
    }
}

static void merge_insert(clattn__bpe *bpe, int32_t a, int32_t b, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = clattn__bpe_pair_hash(key) & bpe->merge_mask;; i = (i + 1) & bpe->merge_mask) {
        if (bpe->merge_keys[i] == UINT64_MAX || bpe->merge_keys[i] == key) {
            if (bpe->merge_keys[i] == UINT64_MAX)
                bpe->merge_count++;
            bpe->merge_keys[i] = key;
            bpe->merge_ranks[i] = rank; /* a pair listed again: its last rank, as HashMap */
            bpe->merge_ids[i] = merged;
            return;
        }
    }
}

/* An optional string member: absent or null gives NULL; false on another type. */
static bool get_string(const json_t *obj, const char *key, const char **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return false;
    *out = json_string_value(v);
    return true;
}

static bool get_bool(const json_t *obj, const char *key, bool fallback, bool *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = fallback;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v))
        return false;
    *out = json_is_true(v);
    return true;
}

#define FAIL(status, ...) clattn__fail_in(load_fn, path, status, __VA_ARGS__)

/* The vocabulary id of prefix + the byte's character + suffix, or -1. */
static int32_t byte_token_id(const clattn__vocab *vocab, uint32_t cp, const char *prefix,
                             const char *suffix, char *buffer)
{
    size_t n = 0, p = prefix ? strlen(prefix) : 0, s = suffix ? strlen(suffix) : 0;
    memcpy(buffer, prefix ? prefix : "", p);
    n = p + clattn__utf8_encode(cp, buffer + p);
    memcpy(buffer + n, suffix ? suffix : "", s);
    return clattn__vocab_find(vocab, buffer, n + s);
}

static clattn_status load_merges(clattn__bpe *bpe, const clattn__vocab *vocab, const char *path,
                                 const json_t *merges, const char *prefix)
{
    size_t count = json_array_size(merges);
    size_t slots = 16;
    while (slots < 2 * count)
        slots *= 2;
    bpe->merge_keys = malloc(slots * sizeof(*bpe->merge_keys));
    bpe->merge_ranks = malloc(slots * sizeof(*bpe->merge_ranks));
    bpe->merge_ids = malloc(slots * sizeof(*bpe->merge_ids));
    if (!bpe->merge_keys || !bpe->merge_ranks || !bpe->merge_ids)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate %zu merges", count);
    memset(bpe->merge_keys, 0xFF, slots * sizeof(*bpe->merge_keys));
    bpe->merge_mask = slots - 1;
    size_t prefix_length = prefix ? strlen(prefix) : 0;
    char *joined = NULL;
    size_t joined_size = 0;
    clattn_status s = CLATTN_OK;
    for (size_t i = 0; i < count && !s; i++) {
        /* "a b" (split at the one space), or ["a", "b"] (newer files). */
        const json_t *m = json_array_get(merges, i);
        const char *a = NULL, *b = NULL;
        size_t a_length = 0, b_length = 0;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *space = strchr(a, ' ');
            if (space && !strchr(space + 1, ' ')) {
                a_length = (size_t)(space - a);
                b = space + 1;
                b_length = strlen(b);
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            a_length = strlen(a);
            b_length = strlen(b);
        }
        if (!b) {
            s = FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\"[%zu] is not \"A B\" (two tokens "
                     "and one space) nor [\"A\", \"B\"]", i);
            break;
        }
        int32_t a_id = clattn__vocab_find(vocab, a, a_length);
        int32_t b_id = clattn__vocab_find(vocab, b, b_length);
        if (a_id < 0 || b_id < 0) {
            s = FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\"[%zu]: '%.*s' is not in the "
                     "vocabulary", i, (int)(a_id < 0 ? a_length : b_length),
                     a_id < 0 ? a : b);
            break;
        }
        /* The merged token: a, then b without the continuing_subword_prefix's bytes. */
        if (b_length < prefix_length || (b_length > prefix_length &&
                                         ((unsigned char)b[prefix_length] & 0xC0) == 0x80)) {
            s = FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\"[%zu]: '%s' is shorter than the "
                     "continuing_subword_prefix or splits a character there", i, b);
            break;
        }
        size_t need = a_length + b_length - prefix_length;
        if (need + 1 > joined_size) {
            char *grown = realloc(joined, 2 * need + 1);
            if (!grown) {
                s = FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate a merge");
                break;
            }
            joined = grown;
            joined_size = 2 * need + 1;
        }
        memcpy(joined, a, a_length);
        memcpy(joined + a_length, b + prefix_length, b_length - prefix_length);
        int32_t merged = clattn__vocab_find(vocab, joined, need);
        if (merged < 0) {
            s = FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\"[%zu]: the merged token '%.*s' is "
                     "not in the vocabulary", i, (int)need, joined);
            break;
        }
        if (i > UINT32_MAX) {
            s = FAIL(CLATTN_ERROR_TOO_LARGE, "more than 2^32 merges");
            break;
        }
        merge_insert(bpe, a_id, b_id, (uint32_t)i, merged);
    }
    free(joined);
    return s;
}

static clattn_status load_pre_tokenizer(clattn__bpe *bpe, const char *path, const json_t *pre)
{
    const char *type = json_string_value(json_object_get(pre, "type"));
    if (!json_is_object(pre) || !type || strcmp(type, "ByteLevel") != 0)
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "pre_tokenizer type '%s' is not supported with a "
                    "BPE model (only ByteLevel)", json_is_null(pre) || !pre ? "null" :
                    type ? type : "(none)");
    bool trim_offsets;
    if (!get_bool(pre, "add_prefix_space", true, &bpe->add_prefix_space) ||
        !get_bool(pre, "use_regex", true, &bpe->use_regex) ||
        !get_bool(pre, "trim_offsets", true, &trim_offsets))
        return FAIL(CLATTN_ERROR_FORMAT, "\"pre_tokenizer\": add_prefix_space, trim_offsets and "
                    "use_regex must be booleans");
    /* trim_offsets changes offsets only, never ids. */
    if (!bpe->use_regex)
        return CLATTN_OK;
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    bpe->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP, &error, &error_offset, NULL);
    if (!bpe->re) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof(message));
        return FAIL(error == PCRE2_ERROR_HEAPLIMIT || error == PCRE2_ERROR_NOMEMORY
                        ? CLATTN_ERROR_OUT_OF_HOST_MEMORY : CLATTN_ERROR_UNSUPPORTED,
                    "PCRE2 cannot compile the GPT-2 regex: %s (at %zu)", (const char *)message,
                    (size_t)error_offset);
    }
    /* The JIT is a speed-up only: where it is not available the interpreter runs. */
    (void)pcre2_jit_compile(bpe->re, PCRE2_JIT_COMPLETE);
    return CLATTN_OK;
}

clattn_status clattn__bpe_load(clattn_tokenizer *tok, const char *path, const json_t *model,
                               const json_t *pre_tokenizer)
{
    clattn__bpe *bpe = calloc(1, sizeof(*bpe));
    if (!bpe)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the BPE model");
    tok->bpe = bpe; /* freed with the tokenizer on any error */
    bpe->unk = -1;
    bytes_to_unicode(bpe->byte_cp);

    /* The model's options. */
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout))
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "\"model\".\"dropout\" %g is not supported (only "
                    "null: BPE dropout is random, for training)", json_number_value(dropout));
    const char *unk = NULL, *prefix = NULL, *suffix = NULL;
    bool byte_fallback;
    if (!get_string(model, "unk_token", &unk) ||
        !get_string(model, "continuing_subword_prefix", &prefix) ||
        !get_string(model, "end_of_word_suffix", &suffix))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\": unk_token, continuing_subword_prefix and "
                    "end_of_word_suffix must be strings or null");
    if (!get_bool(model, "fuse_unk", false, &bpe->fuse_unk) ||
        !get_bool(model, "byte_fallback", false, &byte_fallback) ||
        !get_bool(model, "ignore_merges", false, &bpe->ignore_merges))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\": fuse_unk, byte_fallback and ignore_merges "
                    "must be booleans");
    if (byte_fallback)
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "\"model\".\"byte_fallback\" true is not "
                    "supported for BPE (a byte-level vocabulary has every byte)");
    if (unk) {
        bpe->unk = clattn__vocab_find(&tok->vocab, unk, strlen(unk));
        if (bpe->unk < 0)
            return FAIL(CLATTN_ERROR_FORMAT, "the unknown token '%s' (\"model\".\"unk_token\") "
                        "is not in the vocabulary", unk);
    }
    tok->special.unk = bpe->unk;
    const json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\" is missing or not an array");

    /* Each byte's id, in the four combinations of prefix and suffix. */
    size_t extra = (prefix ? strlen(prefix) : 0) + (suffix ? strlen(suffix) : 0);
    char *buffer = malloc(extra + 8);
    if (!buffer)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate a token");
    for (int b = 0; b < 256; b++)
        for (int v = 0; v < 4; v++)
            bpe->byte_id[v][b] = byte_token_id(&tok->vocab, bpe->byte_cp[b],
                                               v & BPE_CONTINUING ? prefix : NULL,
                                               v & BPE_LAST ? suffix : NULL, buffer);
    free(buffer);

    clattn_status s = load_merges(bpe, &tok->vocab, path, merges, prefix);
    if (s)
        return s;
    return load_pre_tokenizer(bpe, path, pre_tokenizer);
}
