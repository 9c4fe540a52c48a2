/* Internal declarations of the tokenizers (tokenizer*.c): WordPiece and byte-level BPE. */
#ifndef CLATTN_TOKENIZER_INTERNAL_H
#define CLATTN_TOKENIZER_INTERNAL_H

#include "base/errors.h"
#include "formats/file_io.h"
#include "clattn/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- vocabulary: token string <-> id (tokenizer_vocab.c) ---- */

/* An open-addressing hash table from token bytes to ids, and the id -> token array. */
typedef struct clattn__vocab {
    char **tokens;    /* [count]: NUL-terminated, malloc'd; the token of id i */
    size_t *lengths;  /* [count]: strlen(tokens[i]) */
    size_t count;
    size_t longest;   /* the longest token's length in bytes */
    int32_t *slots;   /* [mask + 1]: an id, or -1 for an empty slot */
    size_t mask;
} clattn__vocab;

/* Prepares an empty vocabulary for `count` ids (0..count-1), all unset. */
clattn_status clattn__vocab_init(clattn__vocab *v, size_t count, const char *function,
                                 const char *where);
/* Sets id's token (a copy of the `length` bytes at token). Fails with CLATTN_ERROR_FORMAT
 * for an id out of range or already set, an empty token, a token that is not UTF-8 or holds a
 * NUL, or a token already in the vocabulary. */
clattn_status clattn__vocab_set(clattn__vocab *v, int32_t id, const char *token, size_t length,
                                const char *function, const char *where);
/* Fails with CLATTN_ERROR_FORMAT when an id has no token. */
clattn_status clattn__vocab_check_complete(const clattn__vocab *v, const char *function,
                                           const char *where);
/* The id of the `length` bytes at token, or -1. */
int32_t clattn__vocab_find(const clattn__vocab *v, const char *token, size_t length);
/* The vocabulary's hash (FNV-1a 64) of n more bytes at s, continued from h (the hash of the
 * empty string is CLATTN__VOCAB_HASH_EMPTY), so that the prefixes of a string hash in one pass;
 * and clattn__vocab_find with the token's hash given. */
#define CLATTN__VOCAB_HASH_EMPTY 1469598103934665603ull
uint64_t clattn__vocab_hash(uint64_t h, const char *s, size_t n);
int32_t clattn__vocab_find_hashed(const clattn__vocab *v, const char *token, size_t length,
                                  uint64_t hash);
void clattn__vocab_free(clattn__vocab *v);

/* True when the `length` bytes at s are UTF-8 without NUL; *bad_at gets the offset of the first
 * bad byte otherwise (may be NULL). */
bool clattn__utf8_valid(const char *s, size_t length, size_t *bad_at);
/* Decodes one UTF-8 character at s (at most `length` bytes); returns its byte length, or 0 when
 * the bytes there are not UTF-8. */
size_t clattn__utf8_decode(const unsigned char *s, size_t length, uint32_t *cp);
/* Encodes cp as UTF-8 into out (4 bytes of room); returns the byte count. */
size_t clattn__utf8_encode(uint32_t cp, char *out);

/* ---- normalisation and pre-tokenisation (tokenizer_normalize.c) ---- */

typedef struct clattn__normalizer {
    bool enabled;        /* false: the text is used as it is (tokenizer.json's null) */
    bool clean_text;
    bool handle_chinese_chars;
    bool strip_accents;  /* already resolved: strip_accents, else lowercase */
    bool lowercase;
    bool nfc;            /* the normalizer "NFC" instead of BertNormalizer's steps */
} clattn__normalizer;

/* A growable array of code points. */
typedef struct clattn__cps {
    uint32_t *data;
    size_t count, capacity;
} clattn__cps;

bool clattn__cps_push(clattn__cps *a, uint32_t cp);
void clattn__cps_free(clattn__cps *a);

/* Appends the normalised form of in[0..n-1] to *out (BertNormalizer: clean, CJK, accents,
 * lower case, each as configured; or NFC). False when out of memory. */
bool clattn__normalize(const clattn__normalizer *norm, const uint32_t *in, size_t n,
                       clattn__cps *out);

/* Unicode White_Space (Rust's char::is_whitespace; the regex \s). */
bool clattn__is_whitespace(uint32_t cp);
/* BERT punctuation: ASCII punctuation or a P* category. */
bool clattn__is_punctuation(uint32_t cp);
/* A word character for single_word (the regex \w: letters, marks, Nd, Nl, Pc, ZWNJ/ZWJ). */
bool clattn__is_word_char(uint32_t cp);
/* BertNormalizer's CJK ideograph ranges. */
bool clattn__is_chinese_char(uint32_t cp);

/* Calls `word(user, start, end)` for each word of cps[0..n-1]: split at whitespace (removed),
 * each punctuation character a word of its own. Stops at the first false return. */
bool clattn__pre_tokenize(const uint32_t *cps, size_t n,
                          bool (*word)(void *user, size_t start, size_t end), void *user);

/* ---- WordPiece (tokenizer_wordpiece.c) ---- */

typedef struct clattn__wordpiece {
    char *prefix;        /* continuing_subword_prefix ("##") */
    size_t prefix_length;
    size_t max_input_chars_per_word;
    int32_t unk;
} clattn__wordpiece;

/* A growable array of ids. */
typedef struct clattn__ids {
    int32_t *data;
    size_t count, capacity;
} clattn__ids;

bool clattn__ids_push(clattn__ids *a, int32_t id);

/* Appends the ids of one word (code points) to *out; `scratch` is at least
 * prefix_length + 8 * n bytes. False when out of memory. */
bool clattn__wordpiece_word(const clattn__wordpiece *wp, const clattn__vocab *vocab,
                            const uint32_t *word, size_t n, char *scratch, clattn__ids *out);

/* ---- added tokens (tokenizer_added.c) ---- */

typedef struct clattn__added_token {
    char *text;          /* the content as UTF-8, NUL-terminated */
    uint32_t *content;   /* code points */
    size_t length;       /* in code points */
    uint32_t *normalized_content; /* for normalized tokens: the content normalised */
    size_t normalized_length;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} clattn__added_token;

/* One match: code points [start, end) of the piece are the added token `id`. */
typedef struct clattn__added_match {
    size_t start, end;
    int32_t id;
} clattn__added_match;

/* Finds the added tokens (those with normalized == `normalized`) in cps[0..n-1] as the
 * tokenizers crate does (leftmost-longest, then single_word, lstrip, rstrip); appends the
 * matches in order, non-overlapping, to *matches (grown with realloc; *count and *capacity
 * updated). False when out of memory. */
bool clattn__added_find(const clattn__added_token *tokens, size_t token_count, bool normalized,
                        const uint32_t *cps, size_t n, clattn__added_match **matches,
                        size_t *count, size_t *capacity);

/* ---- byte-level BPE (tokenizer_bpe.c, tokenizer_bpe_load.c) ---- */

/* The BPE model (vocabulary ids of the 256 bytes, merges by rank) and its ByteLevel
 * pre-tokeniser (the GPT-2 regex through PCRE2). Immutable once loaded. */
typedef struct clattn__bpe clattn__bpe;

/* Reads "model" (type "BPE": its options and "merges"; tok->vocab already holds "vocab") and
 * "pre_tokenizer" (ByteLevel) of a tokenizer.json into a new tok->bpe, and sets
 * tok->special.unk. Errors name `path` and the offending option. */
clattn_status clattn__bpe_load(clattn_tokenizer *tok, const char *path,
                               const struct json_t *model, const struct json_t *pre_tokenizer);
void clattn__bpe_free(clattn__bpe *bpe);

/* Appends the ids of one piece of normalised text without added tokens (code points): the
 * ByteLevel pre-tokeniser (prefix space, regex split, bytes to characters), then BPE on each
 * pre-token. Stops after the pre-token that brings out->count to `limit` or past it. False
 * when out of memory. */
bool clattn__bpe_piece(const clattn__bpe *bpe, const clattn__vocab *vocab, const uint32_t *cps,
                       size_t n, size_t limit, clattn__ids *out);

/* The ByteLevel pre-tokeniser's split of the `length` bytes of valid UTF-8 at text (before its
 * prefix space: only the regex, or the whole text when use_regex is false): calls
 * piece(user, start, end) with byte offsets for each pre-token in order. False when out of
 * memory or when `piece` returned false. For tests. */
bool clattn__bpe_split(const clattn__bpe *bpe, const char *text, size_t length,
                       bool (*piece)(void *user, size_t start, size_t end), void *user);

/* ---- the post-processor's templates (tokenizer_template.c) ---- */

/* What a piece of a pair template stands for: the first text's ids, the second's, or the ids of
 * a special token. */
typedef enum clattn__piece_kind {
    CLATTN__PIECE_A,
    CLATTN__PIECE_B,
    CLATTN__PIECE_SPECIAL,
} clattn__piece_kind;

/* One piece of a template: every id it puts in the encoding gets type_id. */
typedef struct clattn__template_piece {
    clattn__piece_kind kind;
    int32_t type_id;
    size_t first, count; /* a special token's ids: special_ids[first .. first + count - 1] */
} clattn__template_piece;

/* The pair template ("pair" of TemplateProcessing; BertProcessing's and RobertaProcessing's
 * fixed ones): the pieces in order. When the tokenizer's post-processor has a pair template this
 * library cannot apply (or Hugging Face could not: a special token missing from
 * "special_tokens"), the tokenizer still loads, as it did before pairs were encoded, and
 * `error` (not CLATTN_OK) with `message` say why clattn_tokenizer_encode_pair fails. */
typedef struct clattn__pair_template {
    clattn__template_piece *pieces; /* [piece_count] */
    size_t piece_count;
    int32_t *special_ids;           /* [special_count]: the special pieces' ids, in order */
    size_t special_count;           /* = the pair's added tokens, reserved by truncation */
    clattn_status error;
    char *message;                  /* NUL-terminated; NULL when error is CLATTN_OK */
} clattn__pair_template;

/* Reads tokenizer.json's "post_processor" (may be NULL or null): sets tok->special.cls and .sep
 * from its single template and tok->pair from its pair template; *found is false when there is
 * no post-processor (then neither is set). Fails (naming `path`) only where the single template
 * cannot be used; a pair template that cannot be used is recorded in tok->pair. Special ids of
 * the pair that are not below tok->vocab_size are such a pair template. */
clattn_status clattn__post_processor_load(clattn_tokenizer *tok, const struct json_t *pp,
                                          const char *path, const char *function, bool *found);
/* Sets *t to BERT's pair template, "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1" with these ids. */
clattn_status clattn__pair_template_bert(clattn__pair_template *t, int32_t cls, int32_t sep,
                                         const char *function, const char *where);
void clattn__pair_template_free(clattn__pair_template *t);

/* The lengths Hugging Face's longest-first truncation (tokenizers 0.19.1, utils/truncation.rs)
 * keeps of two sequences of n_a and n_b ids so that at most `budget` remain: unchanged when
 * they fit; else the shorter is kept whole when the longer still gets as many ids, the longer
 * getting the rest; else each gets half, the odd id to the longer (to B when they are equal). */
void clattn__truncate_longest_first(size_t n_a, size_t n_b, size_t budget, size_t *keep_a,
                                    size_t *keep_b);

/* ---- the tokenizer (tokenizer.c, tokenizer_load.c, tokenizer_pair.c) ---- */

struct clattn__unigram;

struct clattn_tokenizer {
    clattn__vocab vocab;
    struct clattn__unigram *unigram; /* a Unigram model (tokenizer_unigram.c), else NULL */
    clattn__normalizer norm;
    clattn__wordpiece wp;
    clattn__bpe *bpe;    /* non-NULL for a BPE model (then wp is unused) */
    clattn__added_token *added;
    size_t added_count;
    bool has_normalized_added;
    clattn_tokenizer_special special;
    size_t vocab_size;   /* with the added tokens */
    size_t max_length;   /* SIZE_MAX: unlimited */
    clattn__pair_template pair; /* how clattn_tokenizer_encode_pair joins two texts */
};

/* Encodes the `length` bytes of text (not NUL-terminated) without the post-processor's special
 * tokens: its first `limit` ids (SIZE_MAX: all) into *out, a new array the caller frees. Errors
 * name `function` and, for invalid UTF-8 or a character without a piece, the text as `name`
 * ("the text", "text_a"). */
clattn_status clattn__encode_text(const clattn_tokenizer *tok, const char *function,
                                  const char *name, const char *text, size_t length, size_t limit,
                                  clattn__ids *out);

/* The tokenizer's normaliser on in[0..n-1] (BertNormalizer, or a Unigram model's chain),
 * appended to *out. False when out of memory. */
bool clattn__tokenizer_normalize(const clattn_tokenizer *tok, const uint32_t *in, size_t n,
                                 clattn__cps *out);

/* Frees tok->added and everything its entries own. */
void clattn__tokenizer_free_added(clattn_tokenizer *tok);

#endif /* CLATTN_TOKENIZER_INTERNAL_H */
