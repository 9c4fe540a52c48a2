/* Internal declarations of the SentencePiece-style tokenizer read from tokenizer.json: the
 * Precompiled normaliser (tokenizer_precompiled.c), the Replace and Strip normalisers, the
 * Metaspace and WhitespaceSplit pre-tokenisers and the Unigram model (tokenizer_unigram.c).
 * Each follows the tokenizers crate 0.19.1 (and spm_precompiled 0.1.4) rule for rule. */
#ifndef CLATTN_TOKENIZER_UNIGRAM_H
#define CLATTN_TOKENIZER_UNIGRAM_H

#include "tokenizer_internal.h"

#include <jansson.h>

/* ---- Precompiled: SentencePiece's charsmap (tokenizer_precompiled.c) ---- */

/* The decoded precompiled_charsmap: [u32 trie size in bytes][the Darts double array][the
 * normalised strings, each ended by NUL]. */
typedef struct clattn__precompiled {
    uint32_t *array;     /* the double array's units */
    size_t array_count;
    char *normalized;    /* the strings' blob (valid UTF-8) */
    size_t normalized_length;
} clattn__precompiled;

/* Decodes the standard base64 text `b64` (padding "=" required as Rust's base64 STANDARD
 * engine requires it) and parses the charsmap. Fails with CLATTN_ERROR_FORMAT, naming `where`. */
clattn_status clattn__precompiled_init(clattn__precompiled *p, const char *b64,
                                       const char *function, const char *where);
void clattn__precompiled_free(clattn__precompiled *p);

/* Appends the normalised form of in[0..n-1] to *out as the crate's Precompiled normaliser
 * does (extended grapheme clusters; a cluster under 6 bytes looked up whole first, else each
 * character; the shortest match of the trie wins). With zout, appends for each output
 * character whether the crate aligns it with the start of the text (1) or not (0), given the
 * same of each input character in zin. False when out of memory. */
bool clattn__precompiled_normalize(const clattn__precompiled *p, const uint32_t *in, size_t n,
                                   const uint32_t *zin, clattn__cps *out, clattn__cps *zout);

/* ---- the normaliser chain, the pre-tokeniser and Unigram (tokenizer_unigram.c) ---- */

/* The model in memory (tokenizer_unigram.c runs it). A loader fills it: tokenizer_unigram_load.c
 * from tokenizer.json; another source (a GGUF file's metadata) can fill the same fields. */
typedef enum clattn__norm_kind { NORM_PRECOMPILED, NORM_STRIP, NORM_REPLACE } clattn__norm_kind;

typedef struct clattn__norm_step {
    clattn__norm_kind kind;
    clattn__precompiled pre;     /* NORM_PRECOMPILED */
    bool left, right;            /* NORM_STRIP */
    uint32_t *pattern;           /* NORM_REPLACE: a literal, or one character repeated */
    size_t pattern_length;
    size_t min_repeat;           /* 0: the pattern is a literal; else pattern[0] >= this often */
    uint32_t *content;
    size_t content_length;
} clattn__norm_step;

typedef enum clattn__prepend_scheme {
    PREPEND_ALWAYS,
    PREPEND_FIRST,
    PREPEND_NEVER,
} clattn__prepend_scheme;

typedef struct clattn__pre_step {
    bool metaspace;              /* else WhitespaceSplit */
    uint32_t replacement;
    clattn__prepend_scheme prepend;
    bool split;
} clattn__pre_step;

typedef struct clattn__unigram {
    clattn__norm_step *norms;
    size_t norm_count;
    clattn__pre_step *pres;
    size_t pre_count;
    double *scores;              /* [vocab count] */
    double unk_score;            /* the lowest score less 10 */
    int32_t unk;                 /* -1: none */
    bool byte_fallback;
    int32_t bytes[256];          /* the ids of "<0xXX>", or -1 */
} clattn__unigram;


/* Reads "model" (type "Unigram": "vocab" [[piece, score], ...], "unk_id", "byte_fallback"),
 * "normalizer" and "pre_tokenizer" of a parsed tokenizer.json into a new *out, and fills
 * `vocab` (the pieces as ids) and *unk (unk_id, or -1). Unsupported normaliser or
 * pre-tokeniser types are CLATTN_ERROR_UNSUPPORTED errors naming the type. */
clattn_status clattn__unigram_load(clattn__unigram **out, clattn__vocab *vocab,
                                   const json_t *root, int32_t *unk, const char *function,
                                   const char *where);
void clattn__unigram_free(clattn__unigram *u);

/* Appends the normalised form of in[0..n-1] to *out (the "normalizer" chain). With zero,
 * appends for each output character 1 when the crate's alignments put it at the start of the
 * input (offsets_original().0 == 0 for a piece starting there: what Metaspace's prepend_scheme
 * "first" reads), else 0. False when out of memory. */
bool clattn__unigram_normalize(const clattn__unigram *u, const uint32_t *in, size_t n,
                               clattn__cps *out, clattn__cps *zero);

/* The result of clattn__unigram_encode. */
typedef enum clattn__unigram_result {
    CLATTN__UNIGRAM_OK,
    CLATTN__UNIGRAM_OUT_OF_MEMORY,
    CLATTN__UNIGRAM_NO_UNK, /* a character has no piece, no byte fallback and unk_id is null */
} clattn__unigram_result;

/* Pre-tokenises the normalised piece cps[0..n-1] and appends the Unigram ids of its words to
 * *ids. zero[i] (from clattn__unigram_normalize; NULL: all 0) tells whether character i is
 * aligned with the start of the text, for Metaspace's prepend_scheme "first". */
clattn__unigram_result clattn__unigram_encode(const clattn__unigram *u, const clattn__vocab *vocab,
                                              const uint32_t *cps, size_t n,
                                              const uint32_t *zero, clattn__ids *ids);

#endif /* CLATTN_TOKENIZER_UNIGRAM_H */
