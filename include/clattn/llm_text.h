/*
 * libclattn — llm_text.h: the text side of a decoder-only LLM (clattn/llm.h): the GGUF file's
 * tokenizer and chat template, sampling, and the generation loop.
 *
 * A clattn_llm_text is read from the same GGUF file as the model: from the model already
 * loaded (clattn_llm_text_from_model: the file is opened once), or from the file
 * (clattn_llm_text_load: no device needed). It holds the file's "tokenizer.ggml.*" metadata
 * (byte-level BPE "gpt2" with the pre-tokenizer of "tokenizer.ggml.pre", or SentencePiece-style
 * "llama"), its "tokenizer.chat_template", its special tokens and its end-of-generation set
 * (EOS, EOT, EOM and the control tokens whose text is an end marker such as "<|im_end|>" or
 * "<|eot_id|>", as llama.cpp finds them). It holds no reference to a model; one text object
 * may serve several models of the same vocabulary.
 *
 * Generation (clattn_llm_generate) runs a prompt's ids through the model in one prompt call,
 * then, token by token: sample the next token from the last logits (clattn_llm_sampling:
 * greedy, or penalties, temperature, top-k, top-p and min-p in transformers' order, from a
 * random stream of its own per seed), stop at an end-of-generation token, detokenise it
 * byte-safely (a UTF-8 character cut between tokens is held until complete), hold back text
 * that may be the start of a stop string and end before a stop string that matches, stop after
 * max_new_tokens, else run the token as a decode step. The same seed, options and prompt give
 * the same tokens run after run. A caller that batches several sequences in its own decode
 * steps (a server) runs the same steps with one clattn_llm_generator per sequence.
 *
 * Memory returned by this header's functions (ids, text, a generation's arrays) is the
 * caller's: free it with clattn_llm_free (or clattn_llm_generation_clear).
 *
 * Errors are recorded for the calling thread (clattn_last_error(NULL)): a text object has no
 * context.
 */
#ifndef CLATTN_LLM_TEXT_H
#define CLATTN_LLM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "clattn/common.h"
#include "clattn/llm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_llm_text clattn_llm_text;

/* Reads the tokenizer and chat template of the GGUF file at `path`. Errors: CLATTN_ERROR_IO
 * (the file), CLATTN_ERROR_FORMAT (a malformed file, a missing or mistyped tokenizer key, each
 * named), CLATTN_ERROR_UNSUPPORTED (a tokenizer model or pre-tokenizer not implemented, named),
 * out of memory. */
CLATTN_API clattn_status clattn_llm_text_load(const char *path, clattn_llm_text **text);
/* The same as clattn_llm_text_load on the file the model was loaded from, without opening or
 * reading the file again: from the metadata the model read at load. The text object is
 * independent of the model afterwards (either may be destroyed first). A model loaded from a
 * Hugging Face folder: CLATTN_ERROR_UNSUPPORTED (its tokenizer is the folder's tokenizer.json,
 * clattn/tokenizer.h). Errors otherwise as clattn_llm_text_load's. */
CLATTN_API clattn_status clattn_llm_text_from_model(const clattn_llm *llm,
                                                    clattn_llm_text **text);
/* Releases it; accepts NULL and clears the pointer. */
CLATTN_API void clattn_llm_text_destroy(clattn_llm_text **text);

/* Frees memory this header's functions returned; accepts NULL. */
CLATTN_API void clattn_llm_free(void *memory);

/* The tokenizer's vocabulary (at most the model's vocab_size). */
CLATTN_API size_t clattn_llm_text_vocab_size(const clattn_llm_text *text);
/* The BOS and EOS ids, -1 when the file has none. */
CLATTN_API int32_t clattn_llm_bos_id(const clattn_llm_text *text);
CLATTN_API int32_t clattn_llm_eos_id(const clattn_llm_text *text);
/* A token's text as the file stores it ("<|im_end|>"), NUL-terminated and valid while `text`
 * lives; NULL for an id outside the vocabulary (so for a missing BOS or EOS). */
CLATTN_API const char *clattn_llm_token_text(const clattn_llm_text *text, int32_t id);
/* 1 when id ends a generation (the end-of-generation set above), else 0. */
CLATTN_API int clattn_llm_is_end_of_generation(const clattn_llm_text *text, int32_t id);

/* Encodes `length` bytes of UTF-8 at s (s may be NULL when length is 0) into a new array *ids
 * of *count ids (free with clattn_llm_free; NULL when there are none). add_special: BOS (and
 * EOS) as the file's add_bos_token/add_eos_token say; parse_special: control tokens written in
 * the text ("<|im_start|>") become their ids — for a rendered chat template, never for user
 * content. Invalid UTF-8 is CLATTN_ERROR_INVALID_ARGUMENT naming the byte offset. */
CLATTN_API clattn_status clattn_llm_tokenize(const clattn_llm_text *text, const char *s,
                                             size_t length, int add_special, int parse_special,
                                             int32_t **ids, size_t *count);
/* Decodes ids into a new NUL-terminated string *out of *length bytes (free with
 * clattn_llm_free): the tokens' bytes concatenated (not necessarily valid UTF-8 when the ids
 * end inside a character). special: control tokens give their text, else nothing. An id
 * outside the vocabulary is CLATTN_ERROR_INVALID_ARGUMENT naming it. */
CLATTN_API clattn_status clattn_llm_detokenize(const clattn_llm_text *text, const int32_t *ids,
                                               size_t count, int special, char **out,
                                               size_t *length);

/* A streaming detokeniser: ids in, UTF-8 out in pieces that are each valid UTF-8 (a character
 * cut between tokens is held back until complete; bytes that cannot form a character become
 * U+FFFD). For ids whose decode is valid UTF-8, the pieces of every push and the final flush
 * concatenate to clattn_llm_detokenize's text. The text object must outlive it. */
typedef struct clattn_llm_detokenizer clattn_llm_detokenizer;

CLATTN_API clattn_status clattn_llm_detokenizer_create(const clattn_llm_text *text, int special,
                                                       clattn_llm_detokenizer **out);
CLATTN_API void clattn_llm_detokenizer_destroy(clattn_llm_detokenizer **detokenizer);
/* Decodes `count` more ids (flush: and gives what is held, ending the stream): *piece points
 * to the *length bytes that are complete now (NUL-terminated; valid until the next call). */
CLATTN_API clattn_status clattn_llm_detokenizer_push(clattn_llm_detokenizer *detokenizer,
                                                     const int32_t *ids, size_t count,
                                                     int flush, const char **piece,
                                                     size_t *length);

/* The file's "tokenizer.chat_template" (NUL-terminated, valid while `text` lives), or NULL. */
CLATTN_API const char *clattn_llm_chat_template(const clattn_llm_text *text);

/* Renders a conversation with the chat template, byte for byte as transformers'
 * apply_chat_template(messages, tokenize=False, add_generation_prompt=...) renders it.
 * messages_json: a JSON array of message objects ({"role": "user", "content": "..."}, and
 * whatever else a template reads); template_text: a template to use instead of the file's
 * (NULL: the file's). The template sees messages, add_generation_prompt and, as transformers
 * passes its special_tokens_map, the text of each special token the file names: bos_token and
 * eos_token (clattn_llm_bos_id, clattn_llm_eos_id), unk_token, pad_token, sep_token, cls_token,
 * mask_token (tokenizer.ggml.unknown_token_id, padding_token_id, seperator_token_id,
 * cls_token_id, mask_token_id; one the file does not name, or names outside the vocabulary,
 * is undefined). *out: a new NUL-terminated string of *length bytes (free with
 * clattn_llm_free); tokenize it with add_special 0 and parse_special 1. Errors:
 * CLATTN_ERROR_INVALID_ARGUMENT (messages that are not a JSON array, jansson's message with
 * line and column), CLATTN_ERROR_UNSUPPORTED (no template in the file and none given),
 * CLATTN_ERROR_FORMAT (the template fails: the construct and its line, or the template's
 * raise_exception message). */
CLATTN_API clattn_status clattn_llm_apply_chat_template(const clattn_llm_text *text,
                                                        const char *messages_json,
                                                        const char *template_text,
                                                        int add_generation_prompt, char **out,
                                                        size_t *length);

/* The same with further template variables: variables_json a JSON object (NULL: none) whose
 * keys the template sees beside the others, overriding them, as apply_chat_template's keyword
 * arguments do (Qwen3's {"enable_thinking": false}, OpenAI servers' chat_template_kwargs).
 * Errors as above; variables that are not a JSON object: CLATTN_ERROR_INVALID_ARGUMENT. */
CLATTN_API clattn_status clattn_llm_apply_chat_template_vars(const clattn_llm_text *text,
                                                             const char *messages_json,
                                                             const char *variables_json,
                                                             const char *template_text,
                                                             int add_generation_prompt,
                                                             char **out, size_t *length);

/* How the next token is chosen (transformers' generate() order: repetition penalty over the
 * context, presence and frequency penalties over the generated tokens (OpenAI's), temperature,
 * top-k, top-p, min-p). The defaults (clattn_llm_generate_options_default) are greedy. */
typedef struct clattn_llm_sampling {
    double temperature;        /* >= 0; 0: greedy (the lowest id among equal maxima) */
    int32_t top_k;             /* >= 0; 0: off */
    double top_p;              /* in [0, 1]; 1: off */
    double min_p;              /* in [0, 1]; 0: off */
    double repetition_penalty; /* > 0; 1: off */
    double presence_penalty;   /* 0: off */
    double frequency_penalty;  /* 0: off */
    uint64_t seed;             /* the random stream's seed (unused when greedy) */
} clattn_llm_sampling;

typedef struct clattn_llm_generate_options {
    clattn_llm_sampling sampling;
    size_t max_new_tokens;     /* at most this many tokens are generated; 0: up to the room */
    const char *const *stop;   /* stop strings (non-empty UTF-8): the text ends before the first
                                * that occurs, which is not shown */
    size_t stop_count;
    int special;               /* 1: control tokens' text is part of the text (default 0) */
} clattn_llm_generate_options;

/* Greedy, 256 new tokens, no stop strings, special 0. */
CLATTN_API void clattn_llm_generate_options_default(clattn_llm_generate_options *options);

/* Why a generation ended. */
typedef enum clattn_llm_finish {
    CLATTN_LLM_FINISH_EOG = 1,         /* an end-of-generation token (not in tokens) */
    CLATTN_LLM_FINISH_LENGTH = 2,      /* max_new_tokens, or the sequence's room, reached */
    CLATTN_LLM_FINISH_STOP_STRING = 3, /* a stop string matched */
    CLATTN_LLM_FINISH_CALLBACK = 4,    /* the callback asked to stop */
} clattn_llm_finish;

/* What a generation gave. Clear with clattn_llm_generation_clear. */
typedef struct clattn_llm_generation {
    int32_t *tokens;        /* the generated ids (an end-of-generation token excluded; with a
                             * stop string, up to the token that completed it) */
    size_t token_count;
    char *text;             /* the text shown (NUL-terminated, ending before a stop string) */
    size_t text_length;
    int finish;             /* a clattn_llm_finish */
    size_t prompt_tokens;   /* ids run as the prompt */
    double prompt_seconds;  /* the prompt call */
    size_t decode_tokens;   /* decode steps run */
    double decode_seconds;  /* the decode steps, sampling and detokenising included */
} clattn_llm_generation;

CLATTN_API void clattn_llm_generation_clear(clattn_llm_generation *generation);

/* Called for each generated token (an end-of-generation token excluded) with the text that may
 * be shown now (possibly empty: held back for a stop string or an incomplete character; valid
 * only during the call), its id, and the logits it was sampled from [vocab_size]; at the end
 * once more with the held text and token -1, logits NULL. A non-zero return stops the
 * generation (finish CLATTN_LLM_FINISH_CALLBACK). */
typedef int (*clattn_llm_token_callback)(const char *piece, size_t length, int32_t token,
                                         const float *logits, void *user_data);

/*
 * Generates a continuation of the prompt's n ids (n >= 1, each in the model's vocabulary).
 * cache NULL: a cache of its own (float, one sequence of n + max_new_tokens - 1 tokens: the
 * last token generated is never run) is used and released. Otherwise the prompt is run after the tokens sequence `seq` of `cache` holds, and
 * the sequence keeps the prompt and the generated tokens that were run (every generated token
 * but the last); penalties then see only this call's prompt and tokens.
 * Refused before any work, CLATTN_ERROR_OUT_OF_RANGE naming the numbers: tokens held + n +
 * max_new_tokens beyond the model's context_length (max_new_tokens 0: n beyond it; it then
 * generates up to the context's end); and, with a cache, tokens held + n + max_new_tokens - 1
 * (the last token generated is never run) beyond the cache's capacity per sequence
 * (clattn_llm_cache_get_capacity; max_new_tokens 0: then up to the cache's end). callback
 * may be NULL; result receives what was generated (also when the callback stopped it); on an
 * error it is cleared.
 */
CLATTN_API clattn_status clattn_llm_generate(clattn_llm *llm, const clattn_llm_text *text,
                                             clattn_llm_cache *cache, size_t seq,
                                             const int32_t *prompt, size_t n,
                                             const clattn_llm_generate_options *options,
                                             clattn_llm_token_callback callback,
                                             void *user_data, clattn_llm_generation *result);

/* clattn_llm_generate_batch's callback: as clattn_llm_token_callback, for sequence `sequence`
 * (its index among the prompts); a non-zero return stops that sequence only. */
typedef int (*clattn_llm_batch_callback)(size_t sequence, const char *piece, size_t length,
                                         int32_t token, const float *logits, void *user_data);

/*
 * Generates continuations of `count` prompts at once (prompts[b]: lengths[b] >= 1 ids): each
 * prompt is run as a sequence of its own, then every sequence still going runs in one decode
 * batch per step. Sequence b's tokens and text are those clattn_llm_generate gives for
 * prompts[b] with the same options (the same random stream; a token's logits do not depend on
 * the batch). Each prompt is checked against the context before any work, as there. results:
 * count of them (each prompt_seconds its own prompt's; decode_seconds the whole batch's);
 * cleared on an error. callback may be NULL.
 */
CLATTN_API clattn_status clattn_llm_generate_batch(clattn_llm *llm, const clattn_llm_text *text,
                                                   size_t count,
                                                   const int32_t *const *prompts,
                                                   const size_t *lengths,
                                                   const clattn_llm_generate_options *options,
                                                   clattn_llm_batch_callback callback,
                                                   void *user_data,
                                                   clattn_llm_generation *results);

/*
 * The loop's steps for a caller that runs the model itself (several sequences in one decode
 * batch, a server): a generator is one sequence's sampler, end-of-generation set, streaming
 * detokeniser and stop-string matcher. After the prompt's logits, call
 * clattn_llm_generator_next with each step's logits of the sequence; while *finish is 0, run
 * *token as the sequence's next decode step. clattn_llm_generate is this loop over one
 * sequence, so the same options, prompt and stream key give the same tokens either way.
 */
typedef struct clattn_llm_generator clattn_llm_generator;

/* A generator for a sequence whose prompt is the n ids (the repetition penalty's context; n
 * may be 0), logits of vocab_size, options as clattn_llm_generate's (max_new_tokens 0: no
 * limit; NULL: the defaults; copied). stream_key: which random stream of the seed the sequence
 * draws from (0 is clattn_llm_generate's; give sequences that must differ under one seed
 * different keys). Errors: CLATTN_ERROR_INVALID_ARGUMENT naming a sampling value out of its
 * range or an empty stop string. The text object must outlive it. */
CLATTN_API clattn_status clattn_llm_generator_create(const clattn_llm_text *text,
                                                     size_t vocab_size,
                                                     const clattn_llm_generate_options *options,
                                                     const int32_t *prompt, size_t n,
                                                     uint64_t stream_key,
                                                     clattn_llm_generator **generator);
CLATTN_API void clattn_llm_generator_destroy(clattn_llm_generator **generator);

/* One step from the logits of the sequence's last position [vocab_size]: *token is the token
 * chosen; *piece (*length bytes, NUL-terminated, valid until the next call) the text that may
 * be shown now; *finish 0 to go on, else why it ended (a clattn_llm_finish): EOG (*token is
 * the end-of-generation token, not part of the output, *piece empty), LENGTH (*token was the
 * last allowed), STOP_STRING (*piece ends before the stop string). After the end, call
 * clattn_llm_generator_flush for the text still held. A call after the end is
 * CLATTN_ERROR_INVALID_ARGUMENT. */
CLATTN_API clattn_status clattn_llm_generator_next(clattn_llm_generator *generator,
                                                   const float *logits, int32_t *token,
                                                   const char **piece, size_t *length,
                                                   int *finish);
/* The text held back (an unfinished character, the possible start of a stop string), given at
 * the end (also when the caller stops early): *piece as above; the generator emits nothing
 * after it. */
CLATTN_API clattn_status clattn_llm_generator_flush(clattn_llm_generator *generator,
                                                    const char **piece, size_t *length);
/* The tokens generated so far (an end-of-generation token excluded), valid until the next
 * call. */
CLATTN_API const int32_t *clattn_llm_generator_tokens(const clattn_llm_generator *generator,
                                                      size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_LLM_TEXT_H */
