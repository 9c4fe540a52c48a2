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
/* A whole vocabulary from plain arrays, whatever its source (tokenizer.json, vocab.txt, a GGUF
 * file's metadata): clattn__vocab_init for `count` ids, then token k (its lengths[k] bytes;
 * lengths NULL: NUL-terminated) gets the id ids[k] (ids NULL: k), as clattn__vocab_set checks
 * it, in order; then every id must have a token. On failure *v is freed (empty). */
clattn_status clattn__vocab_build(clattn__vocab *v, const char *const *tokens,
                                  const size_t *lengths, const int32_t *ids, size_t count,
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

/* Sets WordPiece's options whatever their source: a copy of `prefix` (the continuing subword
 * prefix, "##" in BERT) and the longest word in characters that is not unknown (BERT: 100).
 * wp->unk is left for the caller (once the added tokens are known). */
clattn_status clattn__wordpiece_init(clattn__wordpiece *wp, const char *prefix,
                                     size_t max_input_chars_per_word, const char *function,
                                     const char *where);

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

/* ---- byte-level BPE (tokenizer_bpe.c; built from arrays by tokenizer_bpe_build.c, whose
 * clattn__bpe_build and clattn__bpe_spec are in tokenizer_bpe_internal.h; read from
 * tokenizer.json by tokenizer_bpe_load.c) ---- */

/* The BPE model (vocabulary ids of the 256 bytes, merges by rank) and its ByteLevel
 * pre-tokeniser (the GPT-2 regex through PCRE2). Immutable once loaded. */
typedef struct clattn__bpe clattn__bpe;

/* Reads "model" (type "BPE": its options and "merges"; tok->vocab already holds "vocab") and
 * "pre_tokenizer" (ByteLevel) of a tokenizer.json into a new tok->bpe (clattn__bpe_build), and sets
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

/* ---- the post-processor's templates (tokenizer_template.c; read from tokenizer.json by
 * tokenizer_post_load.c) ---- */

/* What a piece of a template stands for: the first text's ids, the second's, or the ids of a
 * special token. */
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

/* A template (tokenizers' TemplateProcessing "single" or "pair"; BertProcessing's,
 * RobertaProcessing's and the absent post-processor's fixed ones): the pieces in order. A pair
 * template that this library cannot apply (or Hugging Face could not: a special token missing
 * from "special_tokens") does not stop the tokenizer from loading: `error` (not CLATTN_OK) with
 * `message` say why encoding a pair fails. */
typedef struct clattn__template {
    clattn__template_piece *pieces; /* [piece_count] */
    size_t piece_count;
    int32_t *special_ids;           /* [special_count]: the special pieces' ids, in order */
    size_t special_count;           /* = the added tokens, reserved by truncation */
    clattn_status error;
    char *message;                  /* NUL-terminated; NULL when error is CLATTN_OK */
} clattn__template;

/* How a tokenizer joins its texts and special tokens, whatever its source: the templates with
 * the special tokens (add_special_tokens) and without them (what Hugging Face's post-processor
 * keeps then: TemplateProcessing's pieces of text with their type ids; BertProcessing's, the
 * ByteLevel processor's and an absent one's A type 0, B type 1; RobertaProcessing's all 0). */
typedef struct clattn__post_processor {
    clattn__template single, pair;             /* with the special tokens */
    clattn__template single_plain, pair_plain; /* without them */
} clattn__post_processor;

/* An empty template of room for `pieces` pieces. False when out of memory. */
bool clattn__template_init(clattn__template *t, size_t pieces);
/* Appends a piece (room for it was allocated by clattn__template_init); a special piece's
 * `id_count` ids are appended to special_ids. False when out of memory. */
bool clattn__template_add(clattn__template *t, clattn__piece_kind kind, int32_t type_id,
                          const int32_t *ids, size_t id_count);
/* Records why the template cannot be used (encoding with it reports it). Fails only when out
 * of memory (naming `function` and `where`). */
clattn_status clattn__template_unusable(clattn__template *t, const char *function,
                                        const char *where, clattn_status status,
                                        const char *fmt, ...) CLATTN_PRINTF(5, 6);
void clattn__template_free(clattn__template *t);

/* The fixed post-processors: BertProcessing's ([CLS] A [SEP] B [SEP], type ids 0 up to the
 * first [SEP], 1 after; what a vocab.txt gets), RobertaProcessing's (<s> A </s> </s> B </s>,
 * every type id 0), and none (tokenizer.json's null post-processor or the ByteLevel one: A,
 * then B, type ids 0 and 1). Each replaces what *pp held. */
clattn_status clattn__post_processor_bert(clattn__post_processor *pp, int32_t cls, int32_t sep,
                                          const char *function, const char *where);
clattn_status clattn__post_processor_roberta(clattn__post_processor *pp, int32_t cls,
                                             int32_t sep, const char *function,
                                             const char *where);
clattn_status clattn__post_processor_none(clattn__post_processor *pp, const char *function,
                                          const char *where);
/* Sets pp->single_plain and pp->pair_plain to pp->single and pp->pair without their special
 * pieces (TemplateProcessing without add_special_tokens); an unusable pair stays unusable. */
clattn_status clattn__post_processor_derive_plain(clattn__post_processor *pp,
                                                  const char *function, const char *where);
void clattn__post_processor_free(clattn__post_processor *pp);

/* The lengths Hugging Face's longest-first truncation (tokenizers 0.19.1, utils/truncation.rs)
 * keeps of two sequences of n_a and n_b ids so that at most `budget` remain: unchanged when
 * they fit; else the shorter is kept whole when the longer still gets as many ids, the longer
 * getting the rest; else each gets half, the odd id to the longer (to B when they are equal). */
void clattn__truncate_longest_first(size_t n_a, size_t n_b, size_t budget, size_t *keep_a,
                                    size_t *keep_b);

/* Reads tokenizer.json's "post_processor" (may be NULL or null) into tok->post
 * (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, a Sequence of them with at
 * most one that adds tokens; null: none) and sets tok->special.cls and .sep from the single
 * template (tokenizer_post_load.c). Fails (naming `path`) where the single template cannot be
 * used; a pair template that cannot be used is recorded in tok->post.pair. Special ids that
 * are not below tok->vocab_size make a template unusable. */
clattn_status clattn__post_processor_load(clattn_tokenizer *tok, const struct json_t *pp,
                                          const char *path, const char *function);

/* ---- the tokenizer (tokenizer.c, tokenizer_load.c, tokenizer_encode.c) ---- */

struct clattn__unigram;

/* Which model turns a pre-token into ids; one dispatch (tokenizer.c's encode_piece) reads it. */
typedef enum clattn__model_kind {
    CLATTN__MODEL_WORDPIECE, /* tok->wp, BertNormalizer/NFC and BertPreTokenizer */
    CLATTN__MODEL_BPE,       /* tok->bpe: byte-level BPE with its ByteLevel pre-tokeniser */
    CLATTN__MODEL_UNIGRAM,   /* tok->unigram: with its own normaliser chain and pre-tokenisers */
} clattn__model_kind;

/* A tokenizer in memory. A loader (tokenizer_load.c: tokenizer.json or vocab.txt) fills it; it
 * holds nothing of the file it came from, so that another source (a GGUF file's metadata) can
 * fill the same fields. */
struct clattn_tokenizer {
    clattn__model_kind kind;
    clattn__vocab vocab;
    struct clattn__unigram *unigram; /* kind CLATTN__MODEL_UNIGRAM, else NULL */
    clattn__normalizer norm;
    clattn__wordpiece wp;            /* kind CLATTN__MODEL_WORDPIECE */
    clattn__bpe *bpe;                /* kind CLATTN__MODEL_BPE, else NULL */
    clattn__added_token *added;
    size_t added_count;
    bool has_normalized_added;
    clattn_tokenizer_special special;
    size_t vocab_size;   /* with the added tokens */
    size_t max_length;   /* SIZE_MAX: unlimited */
    clattn__post_processor post; /* how texts and special tokens are joined */
};

/* Encodes the `length` bytes of text (not NUL-terminated) without the post-processor's special
 * tokens: its first `limit` ids (SIZE_MAX: all) into *out, a new array the caller frees. With
 * `strip`, the whitespace that Python's str.strip() removes is left out of both ends (after
 * the whole text is checked: an error's byte offset counts from text). Errors name `function`
 * and, for invalid UTF-8 or a character without a piece, the text as `name` ("the text",
 * "text_a"). Each call counts one text run through the pipeline (for tests). */
clattn_status clattn__encode_text(const clattn_tokenizer *tok, const char *function,
                                  const char *name, const char *text, size_t length, size_t limit,
                                  bool strip, clattn__ids *out);

/* The number of texts clattn__encode_text has run through normalisation, pre-tokenisation and
 * the model since the process started (all tokenizers, all threads): what a test reads to
 * check that a caller tokenizes each text once. */
size_t clattn__tokenizer_texts_encoded(void);

/* Encodes one text (text_b NULL) or a pair with the post-processor's template (or, with
 * CLATTN_ENCODE_NO_SPECIAL_TOKENS in flags, the template without its special tokens),
 * truncated so that at most max_length ids remain (0: the tokenizer's default; SIZE_MAX: none;
 * a single text right, a pair longest first), and appends the ids and type ids to *out
 * (tokenizer_encode.c). Errors name `function`. On failure out->count is unchanged. */
clattn_status clattn__encode_with_template(const clattn_tokenizer *tok, const char *function,
                                           const char *text_a, size_t length_a,
                                           const char *text_b, size_t length_b,
                                           size_t max_length, unsigned flags, clattn_tokens *out);

/* Room for n more ids and type ids in *out (grown with realloc). False when out of memory
 * (then *out is unchanged). */
bool clattn__tokens_reserve(clattn_tokens *out, size_t n);

/* The tokenizer's normaliser on in[0..n-1] (BertNormalizer, or a Unigram model's chain),
 * appended to *out. False when out of memory. */
bool clattn__tokenizer_normalize(const clattn_tokenizer *tok, const uint32_t *in, size_t n,
                                 clattn__cps *out);

/* Frees tok->added and everything its entries own. */
void clattn__tokenizer_free_added(clattn_tokenizer *tok);

#endif /* CLATTN_TOKENIZER_INTERNAL_H */
