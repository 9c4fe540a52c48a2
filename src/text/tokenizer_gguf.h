/*
 * The tokenizer of a GGUF file's metadata (tokenizer_gguf.c), as llama.cpp's llama_vocab runs it
 * (src/llama-vocab.cpp of llama.cpp 11434): "tokenizer.ggml.model" "gpt2" (byte-level BPE with the
 * pre-tokenizer that "tokenizer.ggml.pre" names: tokenizer_gguf_pre.c) or "llama" (SentencePiece's
 * BPE by scores with byte fallback: tokenizer_spm.c).
 *
 * It is built from plain arrays (clattn__gguf_vocab_spec: what the file holds, nothing of how it
 * is read) by clattn__gguf_tokenizer_build, or from an open GGUF file by
 * clattn__gguf_tokenizer_from_file (tokenizer_gguf_read.c), for the LLM layer above.
 *
 * Encoding (clattn__gguf_tokenizer_encode), as llama_vocab::tokenize:
 *   1. Special tokens are split out of the text, longest text first, by exact byte match: the
 *      user-defined tokens (token type 4) always, as llama.cpp does (Hugging Face matches its added
 *      tokens too); the control and unknown tokens (types 3 and 2, and the end markers and FIM
 *      tokens that llama.cpp marks control by their text) only with parse_special (a rendered chat
 *      template), never in user content by default.
 *   2. Each piece of text between them: "gpt2": the pre-tokenizer's regexes one after the other
 *      (each splits every piece of the one before; text between matches is a piece too), then
 *      byte-level BPE by merge rank on each piece ("ignore_merges" pre-tokenizers: a piece that is
 *      a token is that token). "llama": a space is put before the piece when add_space_prefix and
 *      the piece is the text's first or follows a special token, spaces become U+2581 "▁", then
 *      the two adjacent symbols whose concatenation is the token of highest score are merged
 *      (ties: the leftmost) until none is; a symbol that is no token is given as its bytes'
 *      tokens <0xXX>.
 *   3. With add_special: BOS first when add_bos, EOS last when add_eos.
 * No normaliser runs, as in llama.cpp (Qwen2's own tokenizer.json puts NFC first, which
 * transformers' tokenizer from a GGUF file keeps: texts that are not NFC can differ).
 *
 * Decoding (token_to_piece): a control or unknown token gives nothing unless `special`; a
 * user-defined one its text; a byte token <0xXX> its byte; a normal token its text with U+2581
 * as a space ("llama") or its byte-level characters as their bytes ("gpt2"). "llama" with
 * add_space_prefix drops one leading space of the first piece (not after a BOS), as llama.cpp's
 * detokenize. No clean-up of spaces before punctuation (llama.cpp's clean_spaces) is done, so that
 * the pieces of a stream concatenate to the whole.
 */
#ifndef CLATTN_TOKENIZER_GGUF_H
#define CLATTN_TOKENIZER_GGUF_H

#include "base/errors.h"
#include "formats/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGUF's token types (tokenizer.ggml.token_type). */
enum {
    CLATTN__GGUF_TOKEN_NORMAL = 1,
    CLATTN__GGUF_TOKEN_UNKNOWN = 2,
    CLATTN__GGUF_TOKEN_CONTROL = 3,
    CLATTN__GGUF_TOKEN_USER_DEFINED = 4,
    CLATTN__GGUF_TOKEN_UNUSED = 5,
    CLATTN__GGUF_TOKEN_BYTE = 6,
};

/* What a GGUF file's tokenizer is built from: its "tokenizer.ggml.*" arrays and values. */
typedef struct clattn__gguf_vocab_spec {
    const char *model;            /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;              /* tokenizer.ggml.pre; NULL when absent ("default") */
    const char *const *tokens;    /* [token_count], each token_lengths[i] bytes */
    const size_t *token_lengths;  /* NULL: NUL-terminated */
    size_t token_count;
    const float *scores;          /* [token_count] or NULL (all 0) */
    const int32_t *token_types;   /* [token_count] or NULL (all normal) */
    const char *const *merges;    /* "left right", [merge_count] ("gpt2" only) */
    const size_t *merge_lengths;  /* NULL: NUL-terminated */
    size_t merge_count;
    /* Special ids; -1 when the file has no such key. */
    int64_t bos, eos, unk, pad, eot, eom;
    /* tokenizer.ggml.add_bos_token, add_eos_token, add_space_prefix: 0 or 1; -1 when absent
     * (llama.cpp's default for the model and pre-tokenizer: "llama" adds BOS and the space
     * prefix; "gpt2" adds BOS only for the llama3 pre-tokenizers). */
    int add_bos, add_eos, add_space_prefix;
} clattn__gguf_vocab_spec;

typedef struct clattn__gguf_tokenizer clattn__gguf_tokenizer;

/* Builds the tokenizer of `spec` into a new *out (errors name `function` and `where`, e.g. the
 * file's path: an unknown model or pre-tokenizer by its name, a merge whose tokens are not in
 * the vocabulary, a special id out of range). Free with clattn__gguf_tokenizer_free. */
clattn_status clattn__gguf_tokenizer_build(clattn__gguf_tokenizer **out,
                                           const clattn__gguf_vocab_spec *spec,
                                           const char *function, const char *where);

/* The same from an open GGUF file's metadata (tokenizer_gguf_read.c). */
clattn_status clattn__gguf_tokenizer_from_file(clattn__gguf_tokenizer **out, const clattn_gguf *g,
                                               const char *function);

void clattn__gguf_tokenizer_free(clattn__gguf_tokenizer *tok);

/* Encodes the `length` bytes of UTF-8 at text: a new array of *count ids in *ids (the caller
 * frees it; NULL for none). add_special: BOS/EOS as the file says; parse_special: control
 * tokens written in the text are matched (see above). Invalid UTF-8 is
 * CLATTN_ERROR_INVALID_ARGUMENT naming the byte offset. */
clattn_status clattn__gguf_tokenizer_encode(const clattn__gguf_tokenizer *tok,
                                            const char *function, const char *text,
                                            size_t length, bool add_special, bool parse_special,
                                            int32_t **ids, size_t *count);

/* The bytes of one token (llama.cpp's token_to_piece with lstrip 0): a pointer into the
 * tokenizer's storage and its length; `special`: control and unknown tokens give their text
 * (else nothing). An id out of range gives nothing. */
void clattn__gguf_tokenizer_piece(const clattn__gguf_tokenizer *tok, int32_t id, bool special,
                                  const char **bytes, size_t *length);

/* Decodes ids into a new NUL-terminated buffer *text of *length bytes (the bytes as the tokens
 * give them: not necessarily UTF-8 when the ids end inside a character). `special` as above.
 * An id out of range is CLATTN_ERROR_INVALID_ARGUMENT naming it. */
clattn_status clattn__gguf_tokenizer_decode(const clattn__gguf_tokenizer *tok,
                                            const char *function, const int32_t *ids,
                                            size_t count, bool special, char **text,
                                            size_t *length);

/* A streaming decoder: ids in, UTF-8 out in pieces that are each valid UTF-8 (a character cut
 * between two calls is held back until it is complete; bytes that cannot begin or continue a
 * character become U+FFFD, as Python's errors="replace"). For a sequence of ids whose decode is
 * valid UTF-8, the concatenated output of every push and the final flush equals
 * clattn__gguf_tokenizer_decode's. */
typedef struct clattn__gguf_stream {
    const clattn__gguf_tokenizer *tok;
    bool special;
    bool started;       /* a piece was decoded (the leading-space rule is spent) */
    unsigned char held[4];
    size_t held_count;
} clattn__gguf_stream;

void clattn__gguf_stream_init(clattn__gguf_stream *st, const clattn__gguf_tokenizer *tok,
                              bool special);
/* Decodes `count` more ids and appends the UTF-8 that is complete to *out (a malloc'd buffer of
 * *out_length bytes, grown with realloc, NUL-terminated). Fails only for an id out of range or
 * out of memory. With `flush`, an incomplete character held back is given as U+FFFD and the
 * stream is at its end. */
clattn_status clattn__gguf_stream_push(clattn__gguf_stream *st, const char *function,
                                       const int32_t *ids, size_t count, bool flush, char **out,
                                       size_t *out_length);

/* Facts. */
size_t clattn__gguf_tokenizer_vocab_size(const clattn__gguf_tokenizer *tok);
int32_t clattn__gguf_tokenizer_bos(const clattn__gguf_tokenizer *tok); /* -1: none */
int32_t clattn__gguf_tokenizer_eos(const clattn__gguf_tokenizer *tok);
bool clattn__gguf_tokenizer_adds_bos(const clattn__gguf_tokenizer *tok);
bool clattn__gguf_tokenizer_adds_eos(const clattn__gguf_tokenizer *tok);
/* The text of token id (its bytes as the file stores them), NULL when out of range. */
const char *clattn__gguf_tokenizer_token_text(const clattn__gguf_tokenizer *tok, int32_t id,
                                              size_t *length);
/* The end-of-generation ids, sorted ascending (*count of them; storage of the tokenizer): EOS,
 * EOT, EOM, the FIM pad/repo/file-separator tokens that llama.cpp finds by their text, and every
 * token whose text is an end marker in llama.cpp's list ("<|eot_id|>", "<|im_end|>", "<|end|>",
 * "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "</s>", ...). */
const int32_t *clattn__gguf_tokenizer_eog(const clattn__gguf_tokenizer *tok, size_t *count);
bool clattn__gguf_tokenizer_is_eog(const clattn__gguf_tokenizer *tok, int32_t id);

#endif /* CLATTN_TOKENIZER_GGUF_H */
