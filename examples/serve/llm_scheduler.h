/*
 * The server's generation engine for a decoder-only LLM (docs/serving.md: "Chat models"):
 * continuous batching over the slots of one key/value cache. One thread owns the model and its
 * cache; HTTP threads hand it generations (serve_gen: a prompt's ids and the sampling options)
 * and read what each produces as it comes, token by token.
 *
 * Each step of the thread: requests that wait take free slots (arrival order); one chunk of at
 * most prompt_chunk prompt tokens of the oldest generation still in its prompt is run; then every
 * generation past its prompt runs its next token in one batched decode step
 * (clattn_llm_decode). So a long prompt that arrives does not stop running streams: they get a
 * step between each of its chunks. A generation that ends, is cancelled or passes its deadline
 * frees its slot at the next step.
 *
 * Prefix reuse (prefix_reuse): a slot keeps the tokens its sequence holds after its generation
 * ends; a new prompt takes the free slot whose tokens share the longest prefix with it, and
 * only the rest is run (the sequence is cut back to the common prefix, at most the prompt less
 * its last token, whose logits are needed).
 *
 * The same bytes whatever the load: a token's logits are the same bytes in a prompt chunk of any
 * size or in a decode step beside any other sequences (clattn/llm.h), and each generation has its
 * own sampler (clattn_llm_generator, stream key 0, seeded by the request), so its tokens and
 * logprobs do not depend on the other generations, on the chunk size, or on prefix reuse.
 */
#ifndef CLATTN_SERVE_LLM_SCHEDULER_H
#define CLATTN_SERVE_LLM_SCHEDULER_H

#include <clattn/clattn.h>

#include "metrics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_TOP_LOGPROBS 20

typedef struct serve_llm serve_llm;

typedef struct serve_llm_config {
    size_t slots;          /* sequences generated at once (--parallel) */
    size_t ctx_size;       /* tokens per slot: prompt and generated tokens (--ctx-size) */
    size_t prompt_chunk;   /* prompt tokens run per step at most (--prompt-chunk) */
    bool prefix_reuse;     /* reuse a slot's cached prefix (default on; --no-prefix-reuse) */
    size_t max_waiting;    /* generations waiting for a slot at most: more are refused */
    serve_metrics *metrics; /* may be NULL */
} serve_llm_config;

/* Why a generation ended. */
typedef enum serve_gen_end {
    SERVE_GEN_RUNNING = 0,
    SERVE_GEN_STOP,       /* an end-of-generation token or a stop string: "stop" */
    SERVE_GEN_LENGTH,     /* max_new_tokens: "length" */
    SERVE_GEN_CANCELLED,  /* the client went away */
    SERVE_GEN_TIMED_OUT,  /* the deadline passed */
    SERVE_GEN_FAILED,     /* the library failed (error) */
    SERVE_GEN_STOPPED,    /* the server stopped before it ended */
} serve_gen_end;

/* One generated token: its id, the text it lets show (pieces concatenate to the answer), and,
 * when asked, its log-probability and the most likely alternatives (log-softmax of the
 * model's logits, in double precision). The last event of a generation may be a text-only one
 * (token -1): the held text flushed at its end. */
typedef struct serve_gen_event {
    int32_t token;
    size_t text_start, text_length; /* in serve_gen_text's buffer */
    double logprob;
    size_t top_count;
    int32_t top_ids[SERVE_MAX_TOP_LOGPROBS];
    double top_logprobs[SERVE_MAX_TOP_LOGPROBS];
} serve_gen_event;

typedef struct serve_gen serve_gen;

/* A generation of the prompt's n ids (copied; 1 <= n < ctx_size) with `options` (copied, stop
 * strings included; max_new_tokens >= 1 and n + max_new_tokens - 1 <= ctx_size), seed and all.
 * logprobs: compute each token's log-probability, and the top_logprobs (<= 20) most likely.
 * deadline_ms: CLOCK_MONOTONIC ms, 0: none. The caller holds one reference. NULL when out of
 * memory. */
serve_gen *serve_gen_create(const int32_t *prompt, size_t n,
                            const clattn_llm_generate_options *options, bool logprobs,
                            size_t top_logprobs, double deadline_ms);
/* Drops the caller's reference (the scheduler holds its own while it runs it). Accepts NULL. */
void serve_gen_release(serve_gen *g);
/* Called by the scheduler's thread (not under any lock the caller holds) each time events are
 * added or the generation ends; set before submitting. free_arg (may be NULL) is called on arg
 * when the generation is freed (its last reference dropped): arg lives as long as it. */
void serve_gen_set_notify(serve_gen *g, void (*notify)(void *arg), void *arg,
                          void (*free_arg)(void *arg));
/* Asks the generation to end (a client gone): it ends CANCELLED at the next step. */
void serve_gen_cancel(serve_gen *g);

/* Queues the generation. Returns 0; 1 when max_waiting generations already wait (nothing is
 * queued: HTTP 429); 2 when the scheduler is stopping (503). */
int serve_llm_submit(serve_llm *s, serve_gen *g);

/* What a generation has given so far: copies events[from ..] up to max into out (returns how
 * many); *end its end once every event is read (SERVE_GEN_RUNNING while it runs). Does not wait
 * (serve_gen_wait does). */
size_t serve_gen_read(serve_gen *g, size_t from, serve_gen_event *out, size_t max,
                      serve_gen_end *end);
/* Waits until there is an event past `from`, the generation has ended, or timeout_ms has
 * passed; true in the first two cases. */
bool serve_gen_wait(serve_gen *g, size_t from, double timeout_ms);
/* The text so far: a copy of [start, start + length) of the text buffer into out (NUL-added);
 * out must hold length + 1 bytes. */
void serve_gen_text(serve_gen *g, size_t start, size_t length, char *out);

/* The counts and times once it has ended. */
typedef struct serve_gen_summary {
    size_t prompt_tokens;     /* the prompt's ids */
    size_t cached_tokens;     /* of them, those a slot held already (not run) */
    size_t completion_tokens; /* tokens generated (an end-of-generation token excluded) */
    double queue_ms;          /* waiting for a slot */
    double first_token_ms;    /* from submission to the first token */
    char error[512];          /* SERVE_GEN_FAILED's message */
} serve_gen_summary;
void serve_gen_summary_of(serve_gen *g, serve_gen_summary *out);

/* Starts the thread on the model (which it uses alone from now on, and `text`, which stays the
 * caller's) with a cache of config->slots sequences of config->ctx_size tokens. On failure *out
 * is NULL and error says why. */
int serve_llm_start(serve_llm **out, clattn_llm *llm, const clattn_llm_text *text,
                    const serve_llm_config *config, char *error, size_t error_size);

/* Generations waiting or running, slots busy, and the tokens the slots hold (for /metrics). */
void serve_llm_load(serve_llm *s, size_t *waiting, size_t *running, size_t *cached_tokens);

/* Refuses new generations (2), lets those queued or running go on until drain_ms has passed,
 * then ends the rest STOPPED, and joins the thread. Keeps the scheduler for late calls. */
void serve_llm_drain(serve_llm *s, double drain_ms);
/* serve_llm_drain when not done, then frees it. Sets *s to NULL; accepts NULL. */
void serve_llm_stop(serve_llm **s);

#endif /* CLATTN_SERVE_LLM_SCHEDULER_H */
