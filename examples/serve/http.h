/*
 * The server's HTTP side (docs/serving.md) on libmicrohttpd: a pool of threads (one per core, 2 to
 * 8) each serving many connections over epoll, the routes, the request body under
 * --payload-limit, the API key, per-request deadlines, one log line per request on stderr and
 * the request metrics. A request that needs the model is suspended and answered on a thread of
 * its own (parse, tokenize, wait for its batches), so that no client waits for another's.
 *
 * Routes (OpenAI's error bodies under /v1/, TEI's elsewhere; see request.h):
 *   POST /v1/embeddings   OpenAI embeddings          GET /health     200 ready, 503 otherwise
 *   POST /embed           TEI embeddings             GET /info       TEI-like model description
 *   POST /tokenize        TEI tokens                 GET /v1/models  OpenAI list of the served
 *   POST /rerank          TEI reranking (a cross-                    names
 *                         encoder with one label)    GET /metrics    Prometheus text (metrics.h)
 *   POST /predict         TEI scores of every label (a cross-encoder)
 *   POST /v1/chat/completions, POST /v1/completions, POST /detokenize   a chat model's
 *                         (chat_routes.h; /tokenize is then llama-server's)
 * An embedder answers the embedding routes, a cross-encoder /rerank and /predict, a chat model
 * the generation routes; a route of another kind answers 424 (TEI) / 400 (OpenAI) naming the
 * served model's kind; /tokenize answers any.
 * HEAD is answered as GET. An unknown path is 404, a known one with another method 405 (with
 * "Allow"). Every route but /health asks for "Authorization: Bearer KEY" when a key is set (401
 * otherwise, checked before the route so that routes are not revealed). Until
 * serve_http_set_ready, and after serve_http_stop_accepting, the model's routes answer 503.
 *
 * Connections: at most the open-file limit (RLIMIT_NOFILE's soft limit, which serve.c raises to
 * the hard one) less 256 kept for the process, and at most 65536 (serve_http_connection_limit).
 * An idle connection costs a few KiB and no thread, so connections that send nothing cannot
 * lock clients out; libmicrohttpd closes a connection beyond the limit at once.
 *
 * Limits: a POST that passes every check at its headers (key, route, method, Content-Length) is
 * admitted, and counts from then until its answer is sent; past max_concurrent_requests
 * admitted at once, more are refused 429. Refused requests (while their bodies are read and
 * dropped too), GETs and idle connections do not count, so that clients without the key, or
 * with a wrong route, cannot lock out those with it. The answer threads have a stack of 1 MiB
 * (see http.c); one that cannot be started (out of threads or memory) is answered 503 with
 * "Retry-After". A request refused at its headers (401,
 * 404, 405, 413 for a Content-Length over the payload limit, 429, 503) with a body is answered
 * once that body has been read and dropped, up to 4 times the payload limit (beyond: closed, no
 * answer), so that clients that send their whole body before they read (Python's urllib,
 * requests, httpx, hence the openai client) get the status and its JSON instead of a broken
 * pipe; a client that sent "Expect: 100-continue" (curl, for large bodies) gets the answer at
 * once, without "100 Continue", and a Content-Length over the cap too. A chunked body that grows
 * past the payload limit is dropped as it arrives (never stored) and answered 413 when it ends.
 * A request's body must be complete within header_timeout_s after its headers arrived (a
 * client still sending then is disconnected, logged as 408, and the idle timeout is lowered to
 * what remains so that a silent one is too), and its answer by its deadline (request_timeout_s
 * after the headers): a request still waiting for its batches then gets 504, a chat model's
 * generation ends. libmicrohttpd's own timeout (idle_timeout_s) is an idle timeout, reset by
 * every byte, so the headers have a deadline of their own: they must be complete within
 * header_timeout_s of
 * the connection's opening or of its previous request's end, however slowly they trickle in (a
 * watchdog thread shuts such a connection down and logs it). An answer being sent has only the
 * idle timeout, which suffices: libmicrohttpd can write again only once the client has drained
 * a good part of the kernel's send buffer, which a client reading a byte at a time does not.
 *
 * Log line, one per request: "clattn-serve: METHOD ROUTE STATUS texts=N tokens=N ms=X", with
 * " (client gone)" when the client closed the connection first, " (closed by the server's
 * stop ...)" when serve_http_stop closed it. Without a response, STATUS is 408 for a client cut
 * off by its deadline or the idle timeout, 413 for a body past the discard cap, 503 for one
 * closed by the stop, 499 for one that left first (also so in the metrics). Unknown routes are logged with
 * their path, control characters and non-ASCII bytes replaced by '?', at most 64 bytes; in the
 * metrics they are "other". A request that libmicrohttpd refuses itself before any route (a
 * malformed request line or header, such as a Content-Length that is not a plain decimal
 * number: libmicrohttpd 0.9.75 answers it 400 with an HTML body, and repeats its status line in
 * that body) is logged as "? (malformed) STATUS ... (refused by libmicrohttpd ...)" and counted
 * in the metrics under the route "malformed".
 */
#ifndef CLATTN_SERVE_HTTP_H
#define CLATTN_SERVE_HTTP_H

#include "chat_routes.h"
#include "metrics.h"
#include "request.h"
#include "scheduler.h"

#include <clattn/clattn.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct serve_http serve_http;

typedef struct serve_http_config {
    const char *host;              /* a numeric address or a name (getaddrinfo) */
    unsigned port;                 /* 0: a free port (serve_http_address tells which) */
    size_t payload_limit;          /* body bytes at most */
    const char *api_key;           /* NULL: no key needed */
    double request_timeout_s;      /* the per-request deadline */
    double header_timeout_s;       /* a request's headers, and its body, must arrive within
                                    * this (at most request_timeout_s; serve.c: the same, or
                                    * 30 s for a chat model, whose deadline is 600 s) */
    unsigned idle_timeout_s;       /* a connection silent this long is closed */
    size_t max_concurrent_requests;
    serve_metrics *metrics;        /* may be NULL */
} serve_http_config;

/* What the model's routes need, handed over once the model is warm. */
typedef struct serve_backend {
    const clattn_tokenizer *tokenizer;
    serve_scheduler *scheduler;
    serve_limits limits;
    serve_model_description description;
    bool model_normalizes; /* the model's output is L2-normalised (modules.json) */
    /* A cross-encoder (clattn/cross_encoder.h) answers POST /rerank (one label) and POST
     * /predict, with `labels` scores per sequence named label_names[k]; an embedder the
     * embedding routes. Each kind's routes answer the other kind SERVE_ERROR_MODEL_KIND. */
    bool cross_encoder;
    const clattn_cross_encoder *scorer; /* the cross-encoder: its scores' activation */
    size_t labels;
    const char *const *label_names;
    /* A chat model (chat.scheduler set): POST /v1/chat/completions, /v1/completions,
     * llama-server's /tokenize and /detokenize; the embedding and scoring routes answer
     * SERVE_ERROR_MODEL_KIND, and those routes on another model likewise. */
    serve_chat_backend chat; /* its slots (--parallel): description.slots */
} serve_backend;

/* Binds host:port and starts answering (/health 503 until serve_http_set_ready). On failure
 * (the address cannot be resolved or bound: "port 8080 is in use"...) *out is NULL and error
 * holds the cause. The config's strings must outlive the server. */
int serve_http_start(serve_http **out, const serve_http_config *config, char *error,
                     size_t error_size);

/* "http://HOST:PORT" with the bound port ("[ADDR]" for IPv6). */
const char *serve_http_address(const serve_http *h);

/* The connections kept at once at most, and libmicrohttpd's threads (see the top). */
unsigned serve_http_connection_limit(const serve_http *h);
unsigned serve_http_threads(const serve_http *h);

/* The model's routes open: *backend is copied; its tokenizer and scheduler must stay valid
 * until serve_http_stop. */
void serve_http_set_ready(serve_http *h, const serve_backend *backend);

/* Stops accepting connections and answers 503 to new requests on open ones (and on /health);
 * every answer from then on says "Connection: close". */
void serve_http_stop_accepting(serve_http *h);

/* Waits until no request is in progress or timeout_s has passed; true when none is left.
 * Requests refused at their headers whose bodies are still being read and dropped are not
 * waited for (a slow client would hold the stop for nothing): they get serve_http_stop's short
 * grace to finish sending and be answered. */
bool serve_http_wait_idle(serve_http *h, double timeout_s);

/* Waits for the answer threads, then at most 2 s for every answer decided to be written (a 503
 * for a request past the drain, a 200 just finished), closes every connection (a request still
 * in progress is logged as closed by the server's stop), joins libmicrohttpd's threads and
 * frees the server (stop the scheduler first: an answer thread waits for its batches). Sets *h
 * to NULL; accepts NULL. */
void serve_http_stop(serve_http **h);

#endif /* CLATTN_SERVE_HTTP_H */
