/*
 * clattn-serve's HTTP side (DESIGN §11) on libmicrohttpd: one thread per connection (a request
 * waits for its batches on its own thread, never holding up another client), the routes, the
 * request body under --payload-limit, the API key, per-request deadlines, one log line per
 * request on stderr and the request metrics.
 *
 * Routes (OpenAI's error bodies under /v1/, TEI's elsewhere; see request.h):
 *   POST /v1/embeddings   OpenAI embeddings          GET /health     200 ready, 503 otherwise
 *   POST /embed           TEI embeddings             GET /info       TEI-like model description
 *   POST /tokenize        TEI tokens                 GET /v1/models  OpenAI list of one model
 *   POST /rerank          TEI reranking (a cross-    GET /metrics    Prometheus text (metrics.h)
 *                         encoder with one label)
 *   POST /predict         TEI scores of every label (a cross-encoder)
 * An embedder answers the embedding routes, a cross-encoder /rerank and /predict; a route of
 * the other kind answers 424 (TEI) / 400 (OpenAI) naming the served model's kind; /tokenize
 * answers either.
 * HEAD is answered as GET. An unknown path is 404, a known one with another method 405 (with
 * "Allow"). Every route but /health asks for "Authorization: Bearer KEY" when a key is set (401
 * otherwise, checked before the route so that routes are not revealed). Until
 * serve_http_set_ready, and after serve_http_stop_accepting, the model's routes answer 503.
 *
 * Limits: a Content-Length over the payload limit is 413 before any of the body is read; a
 * chunked body that grows past it is dropped as it arrives (never stored) and answered 413 when
 * it ends. A request must be complete by its deadline (request_timeout_s after its headers
 * arrived): a client still sending then is disconnected (logged as 408), the idle timeout is
 * lowered to what remains so that a silent one is too, and a request still waiting for its
 * batches gets 504. The headers themselves must be complete within request_timeout_s of the
 * connection's opening or of its previous request's end, however slowly they trickle in (a
 * watchdog thread shuts such a connection down and logs it). More than max_concurrent_requests requests at once: 429.
 *
 * Log line, one per request: "clattn-serve: METHOD ROUTE STATUS texts=N tokens=N ms=X", with
 * " (client gone)" when the client closed the connection first. Without a response, STATUS is
 * 408 for a client cut off by its deadline or the idle timeout, 499 for one that left first
 * (also so in the metrics). Unknown routes are logged with their path, control
 * characters and non-ASCII bytes replaced by '?', at most 64 bytes; in the metrics they are
 * "other".
 */
#ifndef CLATTN_SERVE_HTTP_H
#define CLATTN_SERVE_HTTP_H

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
} serve_backend;

/* Binds host:port and starts answering (/health 503 until serve_http_set_ready). On failure
 * (the address cannot be resolved or bound: "port 8080 is in use"...) *out is NULL and error
 * holds the cause. The config's strings must outlive the server. */
int serve_http_start(serve_http **out, const serve_http_config *config, char *error,
                     size_t error_size);

/* "http://HOST:PORT" with the bound port ("[ADDR]" for IPv6). */
const char *serve_http_address(const serve_http *h);

/* The model's routes open: *backend is copied; its tokenizer and scheduler must stay valid
 * until serve_http_stop. */
void serve_http_set_ready(serve_http *h, const serve_backend *backend);

/* Stops accepting connections and answers 503 to new requests on open ones (and on /health). */
void serve_http_stop_accepting(serve_http *h);

/* Waits until no request is in progress or timeout_s has passed; true when none is left. */
bool serve_http_wait_idle(serve_http *h, double timeout_s);

/* Closes every connection, joins their threads and frees the server (stop the scheduler first:
 * a request waiting for its batches holds its thread). Sets *h to NULL; accepts NULL. */
void serve_http_stop(serve_http **h);

#endif /* CLATTN_SERVE_HTTP_H */
