/*
 * A chat model's routes (docs/serving.md, "Chat models"), answered on a request's answer
 * thread (http.c): POST /v1/chat/completions and /v1/completions (parse, render the chat
 * template, tokenize, check against the context, generate on the scheduler, format), and
 * llama-server's POST /tokenize and /detokenize. A streamed answer is a libmicrohttpd response
 * whose reader formats each server-sent event as the scheduler's tokens come: the reader
 * suspends the connection while no token is ready and the scheduler's notification resumes it,
 * so no thread waits for a stream. When the client goes away the response is released, which
 * cancels the generation: the scheduler frees its slot at its next step.
 */
#ifndef CLATTN_SERVE_CHAT_ROUTES_H
#define CLATTN_SERVE_CHAT_ROUTES_H

#include "chat_request.h"
#include "llm_scheduler.h"
#include "request.h"

#include <microhttpd.h>

#include <stdbool.h>
#include <stddef.h>

/* What the chat routes need (set once the model is warm). */
typedef struct serve_chat_backend {
    serve_llm *scheduler;
    const clattn_llm_text *text;
    serve_chat_limits limits;
    size_t ctx_size;  /* tokens per slot: prompt and answer */
} serve_chat_backend;

typedef enum serve_chat_route {
    SERVE_CHAT_COMPLETIONS,
    SERVE_COMPLETIONS,
    SERVE_LLM_TOKENIZE,
    SERVE_LLM_DETOKENIZE,
} serve_chat_route;

typedef struct serve_chat_stream serve_chat_stream;

/* A route's answer: a body (status, body, length, content type; status 0 with error set: the
 * error's body), or a stream. */
typedef struct serve_chat_answer {
    int status;
    char *body;          /* malloc'd */
    size_t length;
    const char *content_type;
    bool failed;
    serve_error error;
    serve_chat_stream *stream; /* a streamed answer: serve_chat_stream_response */
    size_t prompt_tokens, completion_tokens; /* for the log */
    double queue_ms;     /* waiting for a slot (not streamed) */
} serve_chat_answer;

/* Answers the route's body; deadline_s: the request's deadline (CLOCK_MONOTONIC s).
 * client_gone(arg) (may be NULL) is asked twice a second while a generation that is not
 * streamed runs: true (the client closed its connection) cancels it. */
void serve_chat_answer_route(const serve_chat_backend *b, serve_chat_route route,
                             const char *body, size_t length, double deadline_s,
                             bool (*client_gone)(void *arg), void *arg,
                             serve_chat_answer *out);

/* Whether the peer of a connection's socket has closed it (a read that would not block finds
 * its end, or a reset), without consuming anything. */
bool serve_socket_closed(int fd);

/* Cancels the generations of the streams whose client has gone while they wait for a token
 * (their connections suspended, where libmicrohttpd does not look at the socket): called by the
 * HTTP side's watchdog a few times a second, so that a client that leaves before its first
 * token (its prompt queued or running) frees its slot too. */
void serve_chat_streams_check(void);

/* The stream's response for the connection (it takes the stream over; NULL when out of
 * memory, the stream then released). */
struct MHD_Response *serve_chat_stream_response(serve_chat_stream *stream,
                                                struct MHD_Connection *connection);
/* Releases a stream that never became a response (cancels its generation). */
void serve_chat_stream_discard(serve_chat_stream *stream);

#endif /* CLATTN_SERVE_CHAT_ROUTES_H */
