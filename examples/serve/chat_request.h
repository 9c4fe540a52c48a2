/*
 * A chat model's request and response bodies (docs/serving.md, "Chat models"): OpenAI's
 * POST /v1/chat/completions and POST /v1/completions, and llama-server's POST /tokenize and
 * POST /detokenize. Pure functions (the formatters call the library's detokeniser for the
 * tokens of logprobs), fuzzed by fuzz/fuzz_chat_request.c.
 *
 * Every refusal is a serve_error naming the field (OpenAI's 400 body, request.h). What the
 * server does not support yet is refused by name, never silently dropped: "n" above 1, "tools",
 * "tool_choice", "functions", "function_call", the "tool" and "function" roles and
 * "tool_calls" in a message, "response_format" other than {"type": "text"}, a non-empty
 * "logit_bias", non-text content parts (images, audio); /v1/completions' "echo", "suffix",
 * "best_of" above 1 and a list of several prompts. Other unknown fields are ignored.
 */
#ifndef CLATTN_SERVE_CHAT_REQUEST_H
#define CLATTN_SERVE_CHAT_REQUEST_H

#include <clattn/clattn.h>

#include "llm_scheduler.h"
#include "request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_STOP_STRINGS 16

typedef struct serve_chat_limits {
    const char *const *model_names; /* as serve_limits' (request.h) */
    size_t model_name_count;
    bool accept_any_model_name;
    size_t max_tokens;  /* --max-tokens: "max_tokens" above it is refused */
    size_t vocab_size;  /* a prompt of token ids: each below it */
} serve_chat_limits;

typedef struct serve_chat_request {
    bool chat;               /* /v1/chat/completions, else /v1/completions */
    char *messages_json;     /* chat: [{"role", "content"}...] as the template gets them
                              * ("developer" as "system", text parts joined) */
    char *kwargs_json;       /* chat: "chat_template_kwargs" (an object), or NULL */
    char *prompt;            /* completions: the prompt text (NUL-terminated; prompt_length
                              * bytes), or NULL when it is token ids */
    size_t prompt_length;
    int32_t *prompt_ids;     /* completions: the prompt as token ids */
    size_t prompt_id_count;
    clattn_llm_sampling sampling; /* OpenAI's defaults: temperature 1, top_p 1 */
    bool seed_given;         /* "seed" (else the caller draws one) */
    size_t max_tokens;       /* "max_completion_tokens" or "max_tokens"; 0: not given */
    char **stop;             /* "stop": non-empty strings */
    size_t stop_count;
    bool stream, include_usage;
    bool logprobs;           /* chat: "logprobs": true; completions: "logprobs" given */
    size_t top_logprobs;     /* chat: "top_logprobs"; completions: "logprobs"'s number */
    size_t model_name;       /* the index of the served name asked for */
} serve_chat_request;

void serve_chat_request_free(serve_chat_request *req);

/*
 * POST /v1/chat/completions: "messages" (a non-empty array of {"role": "system" | "developer"
 * | "user" | "assistant", "content": a string, an array of {"type": "text", "text": ...}
 * parts, or null for an assistant}), "model", "chat_template_kwargs" (an object),
 * "max_completion_tokens" / "max_tokens" (>= 1, at most limits->max_tokens), "temperature" (0
 * to 2), "top_p" (0 to 1), "top_k" (>= 0; -1: off), "min_p" (0 to 1), "presence_penalty" and
 * "frequency_penalty" (-2 to 2), "repeat_penalty" / "repetition_penalty" (> 0), "seed" (an
 * integer), "stop" (a string or an array of at most 16 non-empty strings), "n" (1),
 * "stream", "stream_options" ({"include_usage": bool}), "logprobs" (bool), "top_logprobs" (0
 * to 20, with logprobs), "user" (ignored). On failure *req is zeroed and *err says why.
 */
bool serve_parse_chat(const char *body, size_t size, const serve_chat_limits *limits,
                      serve_chat_request *req, serve_error *err);

/*
 * POST /v1/completions: "prompt" (a string, an array of one string, an array of token ids or
 * an array of one such array), the sampling fields above, "logprobs" (0 to 5: the most likely
 * tokens per position), "echo" (false), "suffix" (null), "best_of" (1).
 */
bool serve_parse_completion(const char *body, size_t size, const serve_chat_limits *limits,
                            serve_chat_request *req, serve_error *err);

/* POST /tokenize (llama-server's): "content" (a string), "add_special" (default false),
 * "parse_special" (default true), "with_pieces" (default false). */
typedef struct serve_llm_tokenize_request {
    char *content;
    size_t length;
    bool add_special, parse_special, with_pieces;
} serve_llm_tokenize_request;
bool serve_parse_llm_tokenize(const char *body, size_t size, serve_llm_tokenize_request *req,
                              serve_error *err);
/* POST /detokenize: "tokens" (an array of ids below vocab_size). */
bool serve_parse_llm_detokenize(const char *body, size_t size, size_t vocab_size,
                                int32_t **ids, size_t *count, serve_error *err);
/* {"tokens": [ids]} or, with pieces, {"tokens": [{"id", "piece"}]}; {"content": text}. */
char *serve_format_llm_tokens(const int32_t *ids, size_t count, const clattn_llm_text *text,
                              bool with_pieces, size_t *length);
char *serve_format_llm_content(const char *content, size_t content_length, size_t *length);

/* What every answer of one request repeats. */
typedef struct serve_completion_info {
    bool chat;
    const char *id;      /* "chatcmpl-..." or "cmpl-..." */
    const char *model;   /* the served name asked for */
    long long created;   /* Unix time */
} serve_completion_info;

typedef struct serve_usage {
    size_t prompt_tokens, completion_tokens, cached_tokens;
} serve_usage;

/* "stop" or "length" for SERVE_GEN_STOP / SERVE_GEN_LENGTH. */
const char *serve_finish_reason(serve_gen_end end);

/*
 * The whole answer (not streamed): chat.completion {"choices": [{"message": {"role":
 * "assistant", "content"}, "logprobs", "finish_reason"}], "usage"} or text_completion
 * {"choices": [{"text", "logprobs", "finish_reason"}]}. events: the generation's (their tokens'
 * logprobs when req->logprobs; text-only events are skipped). text: the tokens' text for
 * logprobs (clattn_llm_detokenize of each token alone, special tokens shown).
 */
char *serve_format_completion(const serve_completion_info *info, const serve_chat_request *req,
                              const clattn_llm_text *text, const char *answer,
                              size_t answer_length, const serve_gen_event *events,
                              size_t event_count, const char *finish_reason,
                              const serve_usage *usage, size_t *length);

/*
 * One server-sent event of a stream, "data: {...}\n\n": a chunk with the piece of text (chat:
 * "delta": {"content"}, with "role": "assistant" on the first chunk), the events' logprobs,
 * and finish_reason (NULL: null). With include_usage every such chunk has "usage": null, and
 * serve_format_usage_chunk gives the last chunk ("choices": [], "usage").
 */
char *serve_format_completion_chunk(const serve_completion_info *info,
                                    const serve_chat_request *req, const clattn_llm_text *text,
                                    const char *piece, size_t piece_length, bool first,
                                    const serve_gen_event *events, size_t event_count,
                                    const char *finish_reason, size_t *length);
char *serve_format_usage_chunk(const serve_completion_info *info, const serve_usage *usage,
                               size_t *length);
/* An error inside a stream: "data: {"error": {...}}\n\n" (OpenAI's error object). */
char *serve_format_stream_error(const serve_error *e, size_t *length);

#endif /* CLATTN_SERVE_CHAT_REQUEST_H */
