/* Building a byte-level BPE model in memory from plain arrays (clattn__bpe_build): each byte's
 * vocabulary id, the merge table by rank, the pre-tokeniser's regex compiled with PCRE2. Knows
 * no file format: tokenizer_bpe_load.c reads tokenizer.json into a clattn__bpe_spec, and
 * another source (a GGUF file's metadata) can fill one the same way. */
#include "tokenizer_bpe_internal.h"

#include <stdlib.h>
#include <string.h>

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

/* The pre-tokenisers known by name: the name a source gives, what messages call it, its
 * regex. */
static const struct {
    const char *name, *shown, *pattern;
} pre_tokenizers[] = {
    {"gpt2", "GPT-2", gpt2_pattern},
};

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

/* The merge `index` of spec: its two tokens' bytes and ids; fails (naming the merges as the
 * spec does) when a token is not in the vocabulary. */
static clattn_status merge_tokens(const clattn__bpe_spec *spec, const clattn__vocab *vocab,
                                  size_t index, const char *function, const char *where,
                                  const char **a, size_t *a_length, int32_t *a_id,
                                  const char **b, size_t *b_length, int32_t *b_id)
{
    const char *name = spec->merges_name ? spec->merges_name : "merges";
    if (spec->merge_ids) {
        for (int k = 0; k < 2; k++) {
            int32_t id = spec->merge_ids[index][k];
            if (id < 0 || (size_t)id >= vocab->count)
                return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                       "%s[%zu]: id %d is not in the vocabulary (0..%zu)", name,
                                       index, (int)id, vocab->count - 1);
        }
        *a_id = spec->merge_ids[index][0];
        *b_id = spec->merge_ids[index][1];
        *a = vocab->tokens[*a_id];
        *a_length = vocab->lengths[*a_id];
        *b = vocab->tokens[*b_id];
        *b_length = vocab->lengths[*b_id];
        return CLATTN_OK;
    }
    const clattn__bpe_merge *m = &spec->merges[index];
    *a = m->left;
    *a_length = m->left_length;
    *b = m->right;
    *b_length = m->right_length;
    *a_id = clattn__vocab_find(vocab, *a, *a_length);
    *b_id = clattn__vocab_find(vocab, *b, *b_length);
    if (*a_id < 0 || *b_id < 0)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "%s[%zu]: '%.*s' is not in the vocabulary", name, index,
                               (int)(*a_id < 0 ? *a_length : *b_length), *a_id < 0 ? *a : *b);
    return CLATTN_OK;
}

static clattn_status build_merges(clattn__bpe *bpe, const clattn__vocab *vocab,
                                  const clattn__bpe_spec *spec, const char *function,
                                  const char *where)
{
    const char *name = spec->merges_name ? spec->merges_name : "merges";
    size_t count = spec->merge_count;
    if (count && !spec->merges == !spec->merge_ids)
        return clattn__fail_in(function, where, CLATTN_ERROR_INVALID_ARGUMENT,
                               "%s: give the merges either as tokens or as ids", name);
    if (count > (size_t)UINT32_MAX + 1)
        return clattn__fail_in(function, where, CLATTN_ERROR_TOO_LARGE,
                               "more than 2^32 merges");
    size_t slots = 16;
    while (slots < 2 * count)
        slots *= 2;
    bpe->merge_keys = malloc(slots * sizeof(*bpe->merge_keys));
    bpe->merge_ranks = malloc(slots * sizeof(*bpe->merge_ranks));
    bpe->merge_ids = malloc(slots * sizeof(*bpe->merge_ids));
    if (!bpe->merge_keys || !bpe->merge_ranks || !bpe->merge_ids)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate %zu merges", count);
    memset(bpe->merge_keys, 0xFF, slots * sizeof(*bpe->merge_keys));
    bpe->merge_mask = slots - 1;
    const char *prefix = spec->continuing_subword_prefix;
    size_t prefix_length = prefix ? strlen(prefix) : 0;
    char *joined = NULL;
    size_t joined_size = 0;
    clattn_status s = CLATTN_OK;
    for (size_t i = 0; i < count && !s; i++) {
        const char *a = NULL, *b = NULL;
        size_t a_length = 0, b_length = 0;
        int32_t a_id = -1, b_id = -1;
        if ((s = merge_tokens(spec, vocab, i, function, where, &a, &a_length, &a_id, &b,
                              &b_length, &b_id)))
            break;
        /* The merged token: a, then b without the continuing_subword_prefix's bytes. */
        if (b_length < prefix_length || (b_length > prefix_length &&
                                         ((unsigned char)b[prefix_length] & 0xC0) == 0x80)) {
            s = clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                "%s[%zu]: '%.*s' is shorter than the continuing_subword_prefix "
                                "or splits a character there", name, i, (int)b_length, b);
            break;
        }
        size_t need = a_length + b_length - prefix_length;
        if (need + 1 > joined_size) {
            char *grown = realloc(joined, 2 * need + 1);
            if (!grown) {
                s = clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                    "cannot allocate a merge");
                break;
            }
            joined = grown;
            joined_size = 2 * need + 1;
        }
        memcpy(joined, a, a_length);
        memcpy(joined + a_length, b + prefix_length, b_length - prefix_length);
        int32_t merged = clattn__vocab_find(vocab, joined, need);
        if (merged < 0) {
            s = clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                "%s[%zu]: the merged token '%.*s' is not in the vocabulary",
                                name, i, (int)need, joined);
            break;
        }
        merge_insert(bpe, a_id, b_id, (uint32_t)i, merged);
    }
    free(joined);
    return s;
}

static clattn_status compile_pre_tokenizer(clattn__bpe *bpe, const char *name,
                                           const char *function, const char *where)
{
    size_t k = 0, known = sizeof(pre_tokenizers) / sizeof(pre_tokenizers[0]);
    while (k < known && strcmp(pre_tokenizers[k].name, name) != 0)
        k++;
    if (k == known)
        return clattn__fail_in(function, where, CLATTN_ERROR_UNSUPPORTED,
                               "the pre-tokenizer '%s' is not supported (only gpt2)", name);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    bpe->re = pcre2_compile((PCRE2_SPTR)pre_tokenizers[k].pattern, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP, &error, &error_offset, NULL);
    if (!bpe->re) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof(message));
        return clattn__fail_in(function, where,
                               error == PCRE2_ERROR_HEAPLIMIT || error == PCRE2_ERROR_NOMEMORY
                                   ? CLATTN_ERROR_OUT_OF_HOST_MEMORY : CLATTN_ERROR_UNSUPPORTED,
                               "PCRE2 cannot compile the %s regex: %s (at %zu)",
                               pre_tokenizers[k].shown, (const char *)message,
                               (size_t)error_offset);
    }
    /* The JIT is a speed-up only: where it is not available the interpreter runs. */
    (void)pcre2_jit_compile(bpe->re, PCRE2_JIT_COMPLETE);
    return CLATTN_OK;
}

static clattn_status build(clattn__bpe *bpe, const clattn__vocab *vocab,
                           const clattn__bpe_spec *spec, const char *function, const char *where)
{
    if (!spec->byte_level)
        return clattn__fail_in(function, where, CLATTN_ERROR_UNSUPPORTED,
                               "a BPE model that is not byte-level (SentencePiece's BPE) is "
                               "not supported");
    if (spec->unk < -1 || (spec->unk >= 0 && (size_t)spec->unk >= vocab->count))
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "the unknown token's id %d is not in the vocabulary (0..%zu)",
                               (int)spec->unk, vocab->count - 1);
    bpe->unk = spec->unk;
    bpe->fuse_unk = spec->fuse_unk;
    bpe->ignore_merges = spec->ignore_merges;
    bpe->add_prefix_space = spec->add_prefix_space;
    bytes_to_unicode(bpe->byte_cp);

    /* Each byte's id, in the four combinations of prefix and suffix. */
    const char *prefix = spec->continuing_subword_prefix, *suffix = spec->end_of_word_suffix;
    size_t extra = (prefix ? strlen(prefix) : 0) + (suffix ? strlen(suffix) : 0);
    char *buffer = malloc(extra + 8);
    if (!buffer)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a token");
    for (int b = 0; b < 256; b++)
        for (int v = 0; v < 4; v++)
            bpe->byte_id[v][b] = byte_token_id(vocab, bpe->byte_cp[b],
                                               v & BPE_CONTINUING ? prefix : NULL,
                                               v & BPE_LAST ? suffix : NULL, buffer);
    free(buffer);

    clattn_status s = build_merges(bpe, vocab, spec, function, where);
    if (s || !spec->pre_tokenizer)
        return s;
    return compile_pre_tokenizer(bpe, spec->pre_tokenizer, function, where);
}

clattn_status clattn__bpe_build(clattn__bpe **out, const clattn__vocab *vocab,
                                const clattn__bpe_spec *spec, const char *function,
                                const char *where)
{
    *out = NULL;
    clattn__bpe *bpe = calloc(1, sizeof(*bpe));
    if (!bpe)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the BPE model");
    clattn_status s = build(bpe, vocab, spec, function, where);
    if (s) {
        clattn__bpe_free(bpe);
        return s;
    }
    *out = bpe;
    return CLATTN_OK;
}
