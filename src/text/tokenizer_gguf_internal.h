/* What the GGUF tokenizer's files share (tokenizer_gguf.c, tokenizer_gguf_pre.c,
 * tokenizer_spm.c, tokenizer_gguf_read.c): the tokenizer struct, the pre-tokenizer and
 * SentencePiece's BPE. */
#ifndef CLATTN_TOKENIZER_GGUF_INTERNAL_H
#define CLATTN_TOKENIZER_GGUF_INTERNAL_H

#include "tokenizer_gguf.h"
#include "tokenizer_internal.h"

/* A token's attributes (llama.cpp's llama_token_attr, the ones used here). */
enum {
    GGUF_ATTR_UNDEFINED = 0,
    GGUF_ATTR_UNKNOWN = 1 << 0,
    GGUF_ATTR_UNUSED = 1 << 1,
    GGUF_ATTR_NORMAL = 1 << 2,
    GGUF_ATTR_CONTROL = 1 << 3,
    GGUF_ATTR_USER_DEFINED = 1 << 4,
    GGUF_ATTR_BYTE = 1 << 5,
};

/* ---- the pre-tokenizer of "gpt2" models (tokenizer_gguf_pre.c) ---- */

typedef struct clattn__gguf_pre clattn__gguf_pre;

/* The pre-tokenizer that tokenizer.ggml.pre names (NULL: llama.cpp's "default"): its regexes
 * compiled; *ignore_merges and *add_bos get llama.cpp's settings for it. An unknown name is
 * CLATTN_ERROR_UNSUPPORTED naming it. */
clattn_status clattn__gguf_pre_create(clattn__gguf_pre **out, const char *name,
                                      bool *ignore_merges, bool *add_bos, const char *function,
                                      const char *where);
void clattn__gguf_pre_free(clattn__gguf_pre *pre);

/* Splits the `length` bytes of valid UTF-8 at text: calls piece(user, start, end) with byte
 * offsets for each pre-token in order. False when out of memory or `piece` returned false. */
bool clattn__gguf_pre_split(const clattn__gguf_pre *pre, const char *text, size_t length,
                            bool (*piece)(void *user, size_t start, size_t end), void *user);

/* ---- SentencePiece's BPE (tokenizer_spm.c) ---- */

/* Appends the ids of `length` bytes of text (spaces already U+2581) to *out, as llama.cpp's
 * llm_tokenizer_spm_session: merges by score, then byte fallback through byte_token. False
 * when out of memory. */
bool clattn__spm_encode(const clattn__vocab *vocab, const float *scores,
                        const int32_t byte_token[256], const char *text, size_t length,
                        clattn__ids *out);

/* ---- the tokenizer ---- */

typedef enum clattn__gguf_model {
    CLATTN__GGUF_BPE, /* "gpt2" */
    CLATTN__GGUF_SPM, /* "llama" */
} clattn__gguf_model;

struct clattn__gguf_tokenizer {
    clattn__gguf_model model;
    clattn__vocab vocab;          /* the token texts as the file has them */
    float *scores;                /* [vocab.count] */
    uint8_t *attr;                /* [vocab.count]: GGUF_ATTR_* */
    clattn__bpe *bpe;             /* model BPE: the merges (no regex of its own) */
    clattn__gguf_pre *pre;        /* model BPE */
    int32_t byte_token[256];      /* model SPM: the token of each byte (<0xXX>), or -1 */
    char *piece_data;             /* each token's decoded bytes (token_to_piece with special =
                                   * true), token i's at piece_offsets[i] .. [i + 1] */
    size_t *piece_offsets;        /* [vocab.count + 1] */
    int32_t bos, eos, unk, pad, eot, eom; /* -1: none */
    bool add_bos, add_eos, add_space_prefix;
    int32_t *special;             /* the tokens matched in text: control, user-defined,
                                   * unknown; the longest text first */
    size_t special_count;
    int32_t *eog;                 /* sorted */
    size_t eog_count;
};

#endif /* CLATTN_TOKENIZER_GGUF_INTERNAL_H */
