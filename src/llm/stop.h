/*
 * When generation ends, and what of the streamed text the caller may show: the end-of-generation
 * token ids, a maximum number of tokens, and stop strings matched in the detokenised text as it
 * streams (OpenAI's `stop`: the text ends before the first stop string, which is not shown).
 *
 * Text that could still be the start of a stop string is held back until the next piece decides
 * it, so a stream never shows part of a stop string that later matches; held text is released
 * when a piece shows it does not match, or at the end. A character's bytes are never split
 * across two emitted chunks: an incomplete UTF-8 sequence at the end of the text is held back
 * too (bytes that are not UTF-8 pass through as they are).
 *
 * Use from a generation loop:
 *
 *   reason = clattn__stop_token(stop, id);        // EOG: stop, the token is not output
 *   if (reason == CLATTN_STOP_EOG) break;
 *   reason2 = clattn__stop_text(stop, piece, n, &text, &len);   // show text[0..len)
 *   if (reason2 != CLATTN_STOP_NONE) break;       // a stop string (or no memory)
 *   if (reason == CLATTN_STOP_MAX_TOKENS) { clattn__stop_flush(stop, &text, &len); break; }
 *   ...and when the loop ends otherwise, clattn__stop_flush shows what is held.
 */
#ifndef CLATTN_LLM_STOP_H
#define CLATTN_LLM_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

typedef enum clattn_stop_reason {
    CLATTN_STOP_NONE = 0,    /* go on */
    CLATTN_STOP_EOG,         /* an end-of-generation token (not part of the output) */
    CLATTN_STOP_MAX_TOKENS,  /* this token was the last one allowed (it is part of the output) */
    CLATTN_STOP_STRING,      /* a stop string matched: the output ends before it */
    CLATTN_STOP_ERROR,       /* no memory to hold the text (recorded as the last error) */
} clattn_stop_reason;

/* What ends a generation. The arrays are copied by clattn__stop_create. */
typedef struct clattn_stop_rules {
    const int32_t *eog_ids;            /* the end-of-generation set */
    size_t eog_count;
    size_t max_tokens;                 /* 0: no limit */
    const char *const *stop_strings;   /* NUL-terminated, non-empty, valid UTF-8 */
    size_t stop_count;
} clattn_stop_rules;

/* One sequence's stopping state. */
typedef struct clattn_stop clattn_stop;

/* CLATTN_ERROR_INVALID_ARGUMENT naming the rule (an empty or non-UTF-8 stop string, a negative
 * id); CLATTN_ERROR_OUT_OF_HOST_MEMORY. */
clattn_status clattn__stop_create(const clattn_stop_rules *rules, clattn_stop **out);
void clattn__stop_destroy(clattn_stop *stop);

/* Counts a generated token: CLATTN_STOP_EOG when it is in the end-of-generation set (which wins
 * over the count), CLATTN_STOP_MAX_TOKENS when it is the max_tokens-th, else CLATTN_STOP_NONE. */
clattn_stop_reason clattn__stop_token(clattn_stop *stop, int32_t id);

/* Feeds the `length` bytes of the next detokenised piece. *text and *text_length receive what
 * may be shown now (valid until the next call on `stop`). CLATTN_STOP_STRING when a stop string
 * has matched: *text is then the output up to it, and every later call emits nothing.
 * CLATTN_STOP_ERROR (nothing shown) when there is no memory for the text. */
clattn_stop_reason clattn__stop_text(clattn_stop *stop, const char *piece, size_t length,
                                     const char **text, size_t *text_length);

/* The end: *text receives the text still held back (none after a stop string). */
void clattn__stop_flush(clattn_stop *stop, const char **text, size_t *text_length);

/* The number of tokens counted by clattn__stop_token. */
size_t clattn__stop_token_count(const clattn_stop *stop);

#endif /* CLATTN_LLM_STOP_H */
