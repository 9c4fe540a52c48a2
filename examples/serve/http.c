/*
 * clattn-serve's libmicrohttpd glue (http.h): the listening socket and the connection limit, the
 * request life cycle (headers, body, answer, completion), the routes, the answer threads, the
 * header watchdog and the log line.
 */
#include "http.h"

#include "chat_routes.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum server_state { STATE_LOADING, STATE_READY, STATE_STOPPING };

/* Open files kept for the process itself, besides connections: the model's files, the OpenCL
 * driver's, the daemon's epoll and inter-thread descriptors, stdio. */
#define RESERVED_FILES 256
#define MAX_CONNECTIONS 65536
/* A refused request's body, or one over the payload limit, is read and dropped up to this many
 * times the payload limit before the answer (see http.h, "Limits"). */
#define DISCARD_FACTOR 4
/* serve_http_stop: how long the answers already decided (a 503 past the drain, a 200 just
 * finished) get to be written before the connections are closed. */
#define STOP_GRACE_S 2.0
/* An answer thread's stack (parse with jansson, tokenize, format), instead of glibc's default,
 * the stack limit (often 8 MiB). The deepest path, measured, is jansson parsing a body nested
 * as deep as it allows (2048 levels): about 175 KiB, the same under AddressSanitizer (jansson
 * is not instrumented); a byte-level BPE tokenizer on long texts takes 45 KiB, the other paths
 * about 12. The rest is margin. */
#define ANSWER_STACK_BYTES (1u << 20)

/* A connection, as the header watchdog sees it (see watchdog_main). */
typedef struct watched_connection {
    struct watched_connection *prev, *next;
    int fd;
    double waiting_since_s; /* when it began waiting for a request's headers: its opening, or
                             * the end of its previous request */
    bool in_request;        /* between a request's headers and its completion */
    bool cut;               /* shut down by the watchdog */
} watched_connection;

struct serve_http {
    serve_http_config config;
    struct MHD_Daemon *daemon;
    int listen_fd; /* ours after MHD_quiesce_daemon, else the daemon's */
    bool quiesced;
    char address[128];
    unsigned connection_limit, threads;
    serve_backend backend;  /* valid once state is READY */
    atomic_int state;
    pthread_mutex_t lock;   /* guards the counts, answering_closed, watched and the watchdog's
                             * flags */
    pthread_cond_t idle;    /* signalled when active or discarding changes */
    size_t active;          /* requests between their headers and their completion */
    size_t admitted;        /* POSTs past every check at their headers, until their completion:
                             * at most max_concurrent_requests (more: 429) */
    size_t discarding;      /* requests refused at their headers whose bodies are being read and
                             * dropped: not waited for by serve_http_wait_idle */
    size_t answering;       /* answer threads running (see start_answer_thread) */
    bool answering_closed;  /* serve_http_stop has begun: no new answer thread */
    pthread_cond_t answered; /* signalled when answering drops to 0 */
    watched_connection *watched; /* every open connection (under lock) */
    pthread_t watchdog;
    bool watchdog_running, watchdog_stop; /* (watchdog_stop under lock) */
    pthread_cond_t watchdog_wake;         /* signalled to stop the watchdog */
};

/* ---- routes ---- */

typedef enum route_id {
    ROUTE_OPENAI_EMBEDDINGS,
    ROUTE_EMBED,
    ROUTE_TOKENIZE,
    ROUTE_RERANK,
    ROUTE_PREDICT,
    ROUTE_HEALTH,
    ROUTE_INFO,
    ROUTE_MODELS,
    ROUTE_METRICS,
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_DETOKENIZE,
    ROUTE_UNKNOWN,
} route_id;

typedef struct route {
    const char *path;
    bool post;       /* POST, else GET (and HEAD) */
    serve_api api;   /* whose error bodies */
} route;

static const route routes[] = {
    [ROUTE_OPENAI_EMBEDDINGS] = {"/v1/embeddings", true, SERVE_API_OPENAI},
    [ROUTE_EMBED] = {"/embed", true, SERVE_API_TEI},
    [ROUTE_TOKENIZE] = {"/tokenize", true, SERVE_API_TEI},
    [ROUTE_RERANK] = {"/rerank", true, SERVE_API_TEI},
    [ROUTE_PREDICT] = {"/predict", true, SERVE_API_TEI},
    [ROUTE_HEALTH] = {"/health", false, SERVE_API_TEI},
    [ROUTE_INFO] = {"/info", false, SERVE_API_TEI},
    [ROUTE_MODELS] = {"/v1/models", false, SERVE_API_OPENAI},
    [ROUTE_METRICS] = {"/metrics", false, SERVE_API_TEI},
    [ROUTE_CHAT] = {"/v1/chat/completions", true, SERVE_API_OPENAI},
    [ROUTE_COMPLETIONS] = {"/v1/completions", true, SERVE_API_OPENAI},
    [ROUTE_DETOKENIZE] = {"/detokenize", true, SERVE_API_TEI},
};

static route_id find_route(const char *url)
{
    for (int i = 0; i < ROUTE_UNKNOWN; i++)
        if (strcmp(url, routes[i].path) == 0)
            return (route_id)i;
    return ROUTE_UNKNOWN;
}

/* ---- one request ---- */

/* A request's answer, once known: queued by the handler (queue_answer). */
typedef struct answer {
    bool ready;
    int status;
    char *body; /* malloc'd; NULL: out of memory (answered 500) */
    size_t length;
    const char *content_type;
    serve_chat_stream *stream; /* a streamed answer (chat_routes.h): body unused */
} answer;

typedef struct request {
    route_id route;
    serve_api api;
    double start_s, deadline_s;
    double body_deadline_s; /* the body's: start_s + header_timeout_s (at most deadline_s) */
    char method[16];
    char log_path[72];  /* the route, or the unknown path made printable */
    char *body;
    size_t length, capacity;
    bool too_large;     /* the body went past the payload limit: dropped */
    size_t discarded;   /* body bytes dropped (over the limit, or refused at the headers) */
    bool discard_cut;   /* the dropped body went past the discard cap: closed */
    answer answer;
    /* The answer thread (start_answer_thread) and what it needs to resume the connection. */
    serve_http *http;
    struct MHD_Connection *connection;
    pthread_t thread;
    bool thread_started;
    bool admitted;      /* counted in serve_http.admitted */
    bool discarding;    /* counted in serve_http.discarding */
    int status;         /* the status queued; 0: none yet */
    bool deadline_closed;
    size_t texts, tokens;
    size_t generated; /* a chat model's tokens generated (not streamed) */
    double queue_ms, inference_ms;
} request;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void printable(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < size; n++)
        dst[n] = src[n] > 0x20 && src[n] < 0x7f ? src[n] : '?';
    dst[n] = '\0';
}

static size_t discard_cap(const serve_http *h)
{
    return DISCARD_FACTOR * h->config.payload_limit;
}

/* ---- answers ---- */

/* The answer is `body` (malloc'd, taken over; NULL: out of memory, answered 500). */
static void set_answer(request *r, int status, char *body, size_t length,
                       const char *content_type)
{
    free(r->answer.body);
    serve_chat_stream_discard(r->answer.stream);
    r->answer = (answer){.ready = true, .status = status, .body = body, .length = length,
                         .content_type = content_type};
}

static void answer_error(request *r, const serve_error *e)
{
    size_t length = 0;
    char *body = serve_format_error(r->api, e, &length);
    set_answer(r, e->status, body, length, "application/json");
}

static void fail(request *r, serve_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(request *r, serve_error_kind kind, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    serve_error e;
    serve_error_set(&e, r->api, kind, NULL, "%s", message);
    answer_error(r, &e);
}

static void unavailable(serve_http *h, request *r)
{
    fail(r, SERVE_ERROR_UNAVAILABLE,
         atomic_load(&h->state) == STATE_LOADING
             ? "the model is loading (its warm-up pass has not finished): retry later"
             : "the server is shutting down");
}

/* Queues the request's answer (the handler's thread only). */
static enum MHD_Result queue_answer(serve_http *h, struct MHD_Connection *c, request *r)
{
    answer *a = &r->answer;
    int status = a->status;
    const char *content_type = a->content_type;
    struct MHD_Response *resp;
    if (a->stream) {
        resp = serve_chat_stream_response(a->stream, c);
        a->stream = NULL; /* the response's now (or released) */
        a->ready = false;
        if (!resp)
            return MHD_NO;
        content_type = NULL; /* set by the stream */
    } else if (!a->body) {
        static const char oom[] = "{\"error\":\"out of memory\",\"error_type\":\"Backend\"}";
        status = 500;
        content_type = "application/json";
        resp = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom,
                                               MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_buffer(a->length, a->body, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            free(a->body);
    }
    a->body = NULL; /* the response's now (or freed) */
    a->ready = false;
    if (!resp)
        return MHD_NO;
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                routes[r->route].post ? "POST" : "GET, HEAD");
    if (status == 429 || status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    /* While draining, clients should not reuse the connection. */
    if (atomic_load(&h->state) == STATE_STOPPING)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ret == MHD_YES)
        r->status = status;
    return ret;
}

/* "Authorization: Bearer KEY", compared in time independent of where the keys differ. */
static bool authorized(const serve_http *h, struct MHD_Connection *c)
{
    const char *key = h->config.api_key;
    if (!key)
        return true;
    const char *header = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_AUTHORIZATION);
    if (!header || strncmp(header, "Bearer ", 7) != 0)
        return false;
    const char *given = header + 7;
    size_t n = strlen(key), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(key[i] ^ given[i < m ? i : 0]);
    return diff == 0;
}

/* ---- the routes' answers ---- */

static void answer_get(serve_http *h, request *r)
{
    int state = atomic_load_explicit(&h->state, memory_order_acquire);
    size_t length = 0;
    char *body = NULL;
    switch (r->route) {
    case ROUTE_HEALTH:
        if (state != STATE_READY) {
            unavailable(h, r);
            return;
        }
        body = strdup("{\"status\":\"ok\"}");
        set_answer(r, 200, body, body ? strlen(body) : 0, "application/json");
        return;
    case ROUTE_METRICS: {
        size_t pending = 0, waiting = 0, busy = 0, cached = 0;
        serve_slot_load slots = {0};
        bool llm = state == STATE_READY && h->backend.chat.scheduler;
        if (llm) {
            serve_llm_load(h->backend.chat.scheduler, &waiting, &busy, &cached);
            pending = waiting + busy;
            size_t n = h->backend.description.slots;
            slots = (serve_slot_load){.slots = n, .busy = busy, .cached_tokens = cached,
                                      .capacity_tokens = n * h->backend.chat.ctx_size};
        } else if (state == STATE_READY && h->backend.scheduler) {
            pending = serve_scheduler_pending(h->backend.scheduler);
        }
        body = h->config.metrics
                   ? serve_metrics_render(h->config.metrics, pending, llm ? &slots : NULL)
                   : strdup("");
        set_answer(r, 200, body, body ? strlen(body) : 0,
                   "text/plain; version=0.0.4; charset=utf-8");
        return;
    }
    case ROUTE_INFO:
    case ROUTE_MODELS:
        if (state == STATE_LOADING) {
            unavailable(h, r);
            return;
        }
        body = r->route == ROUTE_INFO ? serve_format_info(&h->backend.description, &length)
                                      : serve_format_models(&h->backend.description, &length);
        set_answer(r, 200, body, length, "application/json");
        return;
    default: /* not a GET route: find_route and the method check exclude it */
        fail(r, SERVE_ERROR_BACKEND, "no GET answer for %s", r->log_path);
        return;
    }
}

/* Answers a job the scheduler did not finish (result is not SERVE_DONE). */
static void answer_failed_job(serve_http *h, request *r, serve_job *job, serve_result result)
{
    switch (result) {
    case SERVE_OVERLOADED:
        fail(r, SERVE_ERROR_OVERLOADED,
             "Model is overloaded: %zu requests are queued (--max-concurrent-requests)",
             h->config.max_concurrent_requests);
        return;
    case SERVE_STOPPED: unavailable(h, r); return;
    case SERVE_TIMED_OUT:
        fail(r, SERVE_ERROR_TIMEOUT,
             "the request's deadline (--request-timeout %g s) passed before its texts could be "
             "run",
             h->config.request_timeout_s);
        return;
    default:
        job->error[sizeof(job->error) - 1] = '\0';
        fail(r, SERVE_ERROR_BACKEND, "%s", job->error[0] ? job->error : "the model failed");
        return;
    }
}

/* The body has been parsed (ok: into texts): it is freed, and a request that parsed counts its
 * texts and tokens (the access log and the metrics). Returns ok. */
static bool body_parsed(request *r, bool ok, const serve_texts *texts)
{
    free(r->body);
    r->body = NULL;
    if (ok) {
        r->texts = texts->count;
        r->tokens = texts->tokens;
    }
    return ok;
}

/* Runs the job through the scheduler within the request's deadline; the request keeps the
 * job's queue and inference times. */
static serve_result run_job(serve_http *h, request *r, serve_job *job)
{
    serve_result result =
        serve_scheduler_submit(h->backend.scheduler, job, r->deadline_s * 1000.0);
    r->queue_ms = job->queue_ms;
    r->inference_ms = job->inference_ms;
    return result;
}

static void answer_embeddings(serve_http *h, request *r)
{
    const serve_backend *b = &h->backend;
    serve_embed_request req;
    serve_error err;
    bool ok = r->route == ROUTE_OPENAI_EMBEDDINGS
                  ? serve_parse_openai_embeddings(r->body, r->length, b->tokenizer, &b->limits,
                                                  &req, &err)
                  : serve_parse_tei_embed(r->body, r->length, b->tokenizer, &b->limits, &req,
                                          &err);
    if (!body_parsed(r, ok, &req.texts)) {
        answer_error(r, &err);
        return;
    }
    size_t hidden = b->limits.hidden_size;
    float *rows = malloc(req.texts.count * hidden * sizeof(float));
    if (!rows) {
        serve_texts_free(&req.texts);
        fail(r, SERVE_ERROR_BACKEND, "out of memory for %zu embeddings", req.texts.count);
        return;
    }
    /* OpenAI's route gives the model's own output; TEI's normalize is asked of the device, so
     * that a normalising model's rows are the bytes `embed` writes. */
    serve_job job = {
        .count = req.texts.count,
        .ids = (const int32_t *const *)req.texts.ids,
        .lengths = req.texts.lengths,
        .normalize = req.normalize,
        .out = rows,
    };
    serve_result result = run_job(h, r, &job);
    serve_texts_free(&req.texts);
    if (result != SERVE_DONE) {
        free(rows);
        answer_failed_job(h, r, &job, result);
        return;
    }
    bool normalized = req.normalize < 0 ? b->model_normalizes : req.normalize == 1;
    size_t dims = req.dimensions ? req.dimensions : hidden;
    serve_finish_rows(rows, job.count, hidden, dims, normalized && dims < hidden);
    size_t bad = serve_first_non_finite_row(rows, job.count, dims);
    if (bad < job.count) {
        free(rows);
        fail(r, SERVE_ERROR_BACKEND,
             "the embedding of input %zu holds NaN or infinity (the model's weights hold such "
             "values or its computation overflowed)",
             bad);
        return;
    }
    /* The name asked for (one of the served names), else the first. */
    const serve_model_description *d = &b->description;
    const char *model = d->served_names[req.model_name < d->served_name_count ? req.model_name
                                                                              : 0];
    size_t length = 0;
    char *body = r->route == ROUTE_OPENAI_EMBEDDINGS
                     ? serve_format_openai_embeddings(rows, job.count, dims, req.base64, model,
                                                      r->tokens, &length)
                     : serve_format_tei_embeddings(rows, job.count, dims, &length);
    free(rows);
    set_answer(r, 200, body, length, "application/json");
}

static void answer_tokenize(serve_http *h, request *r)
{
    const serve_backend *b = &h->backend;
    serve_tokenize_request req;
    serve_error err;
    bool ok = serve_parse_tei_tokenize(r->body, r->length, b->tokenizer, &b->limits, &req, &err);
    if (!body_parsed(r, ok, &req.texts)) {
        answer_error(r, &err);
        return;
    }
    size_t length = 0;
    char *body = serve_format_tei_tokens(&req, b->tokenizer, &length);
    serve_texts_free(&req.texts);
    set_answer(r, 200, body, length, "application/json");
}

/* POST /rerank and POST /predict: a cross-encoder's scores of pairs (or single texts). */
static void answer_scores(serve_http *h, request *r)
{
    const serve_backend *b = &h->backend;
    serve_score_request req;
    serve_error err;
    bool ok = r->route == ROUTE_RERANK
                  ? serve_parse_tei_rerank(r->body, r->length, b->tokenizer, &b->limits, &req,
                                           &err)
                  : serve_parse_tei_predict(r->body, r->length, b->tokenizer, &b->limits, &req,
                                            &err);
    if (!body_parsed(r, ok, &req.texts)) {
        answer_error(r, &err);
        return;
    }
    float *scores = malloc(req.texts.count * b->labels * sizeof(float));
    if (!scores) {
        serve_score_request_free(&req);
        fail(r, SERVE_ERROR_BACKEND, "out of memory for %zu scores", req.texts.count);
        return;
    }
    serve_job job = {
        .count = req.texts.count,
        .ids = (const int32_t *const *)req.texts.ids,
        .type_ids = (const int32_t *const *)req.texts.type_ids,
        .lengths = req.texts.lengths,
        .normalize = 0,
        .out = scores, /* the raw logits [count, labels] */
    };
    serve_result result = run_job(h, r, &job);
    if (result != SERVE_DONE) {
        free(scores);
        serve_score_request_free(&req);
        answer_failed_job(h, r, &job, result);
        return;
    }
    /* TEI's scores: the sigmoid of one label's logit, the softmax of several. */
    clattn_score_activation activation =
        req.raw_scores ? CLATTN_SCORES_RAW
                       : b->labels == 1 ? CLATTN_SCORES_SIGMOID : CLATTN_SCORES_SOFTMAX;
    if (clattn_cross_encoder_activate(b->scorer, activation, scores, job.count, scores) !=
        CLATTN_OK) {
        free(scores);
        serve_score_request_free(&req);
        fail(r, SERVE_ERROR_BACKEND, "%s", clattn_last_error(NULL));
        return;
    }
    size_t bad = serve_first_non_finite_row(scores, job.count, b->labels);
    if (bad < job.count) {
        free(scores);
        serve_score_request_free(&req);
        fail(r, SERVE_ERROR_BACKEND,
             "the score of input %zu is NaN or infinite (the model's weights hold such values "
             "or its computation overflowed)",
             bad);
        return;
    }
    size_t length = 0;
    char *body = r->route == ROUTE_RERANK
                     ? serve_format_tei_rerank(&req, scores, &length)
                     : serve_format_tei_predict(&req, scores, b->labels, b->label_names, &length);
    free(scores);
    serve_score_request_free(&req);
    set_answer(r, 200, body, length, "application/json");
}

/* The body is complete: what can be refused without the model is (the answer set, true). */
static bool refuse_post(serve_http *h, request *r)
{
    if (r->too_large) {
        fail(r, SERVE_ERROR_TOO_LARGE,
             "the body is larger than this server's limit of %zu bytes (--payload-limit)",
             h->config.payload_limit);
        return true;
    }
    /* first_call admitted it while the server was ready: a drain that began since serves it
     * (serve.c waits for such requests before it stops the scheduler). */
    const serve_backend *b = &h->backend;
    bool generating = r->route == ROUTE_CHAT || r->route == ROUTE_COMPLETIONS ||
                      r->route == ROUTE_DETOKENIZE;
    if (b->chat.scheduler) {
        if (generating || r->route == ROUTE_TOKENIZE)
            return false;
        fail(r, SERVE_ERROR_MODEL_KIND,
             "model is a chat model (a decoder-only LLM), served on POST /v1/chat/completions "
             "and POST /v1/completions: it gives no embeddings or scores");
        return true;
    }
    if (generating) {
        fail(r, SERVE_ERROR_MODEL_KIND,
             b->cross_encoder
                 ? "model is not a chat model: it is a cross-encoder (a reranker or "
                   "classifier), served on POST /rerank and POST /predict"
                 : "model is not a chat model: it is an embedding model, served on POST "
                   "/v1/embeddings and POST /embed");
        return true;
    }
    bool scoring = r->route == ROUTE_RERANK || r->route == ROUTE_PREDICT;
    if (r->route != ROUTE_TOKENIZE && scoring != b->cross_encoder) {
        fail(r, SERVE_ERROR_MODEL_KIND,
             b->cross_encoder
                 ? "model is not an embedding model: it is a cross-encoder (a reranker or "
                   "classifier), served on POST /rerank and POST /predict"
                 : "model is not a re-ranker model: it is an embedding model, served on POST "
                   "/v1/embeddings and POST /embed");
        return true;
    }
    if (r->route == ROUTE_RERANK && b->labels != 1) {
        fail(r, SERVE_ERROR_MODEL_KIND,
             "model is not a re-ranker model: it is a classifier with %zu labels (a re-ranker "
             "has one); use POST /predict",
             b->labels);
        return true;
    }
    return false;
}

/* Whether the client of a suspended request has closed its connection. */
static bool client_gone(void *arg)
{
    const request *r = arg;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info && serve_socket_closed(info->connect_fd);
}

/* A chat model's routes (chat_routes.h). */
static void answer_chat(serve_http *h, request *r)
{
    serve_chat_route which = r->route == ROUTE_CHAT          ? SERVE_CHAT_COMPLETIONS
                             : r->route == ROUTE_COMPLETIONS ? SERVE_COMPLETIONS
                             : r->route == ROUTE_TOKENIZE    ? SERVE_LLM_TOKENIZE
                                                             : SERVE_LLM_DETOKENIZE;
    serve_chat_answer a;
    serve_chat_answer_route(&h->backend.chat, which, r->body, r->length, r->deadline_s,
                            client_gone, r, &a);
    free(r->body);
    r->body = NULL;
    r->api = SERVE_API_OPENAI; /* every answer's body is OpenAI's (llama-server's too) */
    r->queue_ms = a.queue_ms;
    if (a.status == 200 && !a.stream)
        r->inference_ms = (now_s() - r->start_s) * 1000.0 - a.queue_ms;
    r->texts = a.prompt_tokens ? 1 : 0;
    r->tokens = a.prompt_tokens;
    r->generated = a.completion_tokens;
    if (a.failed) {
        answer_error(r, &a.error);
    } else if (a.stream) {
        set_answer(r, 200, NULL, 0, "text/event-stream");
        r->answer.stream = a.stream;
    } else {
        set_answer(r, a.status, a.body, a.length, a.content_type);
    }
}

/* The body is complete and admitted: parse, tokenize, run, format (an answer thread). */
static void answer_model_route(serve_http *h, request *r)
{
    if (h->backend.chat.scheduler)
        answer_chat(h, r);
    else if (r->route == ROUTE_TOKENIZE)
        answer_tokenize(h, r);
    else if (r->route == ROUTE_RERANK || r->route == ROUTE_PREDICT)
        answer_scores(h, r);
    else
        answer_embeddings(h, r);
}

/* ---- answer threads ----
 *
 * libmicrohttpd's threads each serve many connections (a pool over epoll), so none of them may
 * wait for the model: a request that needs it is suspended (MHD_suspend_connection, which takes
 * it out of its thread's event loop), answered on a thread of its own (parse, tokenize, wait
 * for the scheduler, format), then resumed; libmicrohttpd calls the handler again, which queues
 * the answer and joins the thread. At most max_concurrent_requests run at once: first_call
 * refuses more requests (429). While suspended, the request is the answer thread's alone. */

static void *answer_thread_main(void *arg)
{
    request *r = arg;
    serve_http *h = r->http;
    struct MHD_Connection *c = r->connection;
    answer_model_route(h, r);
    if (!r->answer.ready) /* every route sets one: this would be a bug, not a loop */
        fail(r, SERVE_ERROR_BACKEND, "the route gave no answer");
    /* From here on r is the handler's again (it may be freed at once): only h and c. */
    MHD_resume_connection(c);
    pthread_mutex_lock(&h->lock);
    if (--h->answering == 0)
        pthread_cond_broadcast(&h->answered);
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void join_answer_thread(request *r)
{
    if (r->thread_started) {
        pthread_join(r->thread, NULL);
        r->thread_started = false;
    }
}

/* Suspends the connection and answers r on a thread of its own. */
static enum MHD_Result start_answer_thread(serve_http *h, struct MHD_Connection *c, request *r)
{
    pthread_mutex_lock(&h->lock);
    bool closed = h->answering_closed;
    if (!closed)
        h->answering++;
    pthread_mutex_unlock(&h->lock);
    if (closed) {
        unavailable(h, r);
        return queue_answer(h, c, r);
    }
    r->http = h;
    r->connection = c;
    /* Suspended first, so that the thread's resume always follows it. */
    MHD_suspend_connection(c);
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        rc = pthread_attr_setstacksize(&attr, ANSWER_STACK_BYTES);
        if (rc == 0)
            rc = pthread_create(&r->thread, &attr, answer_thread_main, r);
        pthread_attr_destroy(&attr);
    }
    if (rc == 0) {
        r->thread_started = true;
        return MHD_YES;
    }
    /* Out of threads or memory for now: the client may retry (Retry-After). */
    fail(r, SERVE_ERROR_UNAVAILABLE, "the server cannot start a thread for the request now "
                                     "(%s): retry later",
         strerror(rc));
    pthread_mutex_lock(&h->lock);
    if (--h->answering == 0)
        pthread_cond_broadcast(&h->answered);
    pthread_mutex_unlock(&h->lock);
    MHD_resume_connection(c); /* the handler is called again and queues the answer */
    return MHD_YES;
}

/* ---- the request's life cycle ---- */

/* Whether the request's body is read (and dropped) before its answer, already known at the
 * headers: yes unless the client asked "Expect: 100-continue" (it waits for our word before it
 * sends the body: the answer goes at once, without "100 Continue") or declared more than the
 * discard cap. A client that sends its body whatever we answer (Python's urllib, requests,
 * httpx) would otherwise meet a closed connection instead of the answer. */
static bool read_body_first(serve_http *h, struct MHD_Connection *c)
{
    const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    if (expect && strcasecmp(expect, "100-continue") == 0)
        return false;
    if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
        return true; /* chunked: read until the cap */
    const char *declared = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!declared)
        return false;
    /* libmicrohttpd has checked it: digits only. */
    errno = 0;
    unsigned long long n = strtoull(declared, NULL, 10);
    return errno == 0 && n > 0 && n <= discard_cap(h);
}

/* The headers are in: refuse what can be refused before the body is read (the answer set). */
static void first_call(serve_http *h, struct MHD_Connection *c, request *r, const char *method)
{
    if (r->route != ROUTE_HEALTH && !authorized(h, c)) {
        fail(r, SERVE_ERROR_UNAUTHORIZED,
             h->config.api_key && MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                              "Authorization")
                 ? "Incorrect API key provided (Authorization: Bearer KEY)"
                 : "You didn't provide an API key: this server needs the header "
                   "'Authorization: Bearer KEY'");
        return;
    }
    if (r->route == ROUTE_UNKNOWN) {
        fail(r, SERVE_ERROR_NOT_FOUND,
             "Invalid URL (%s %s): the routes are POST /v1/embeddings, POST /embed, POST "
             "/rerank, POST /predict (an embedder or cross-encoder), POST "
             "/v1/chat/completions, POST /v1/completions, POST /detokenize (a chat model), "
             "POST /tokenize, GET /health, GET /info, GET /v1/models, GET /metrics",
             r->method, r->log_path);
        return;
    }
    const route *rt = &routes[r->route];
    bool method_ok = rt->post ? strcmp(method, MHD_HTTP_METHOD_POST) == 0
                              : strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                                    strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (!method_ok) {
        fail(r, SERVE_ERROR_METHOD, "Method %s is not allowed on %s: use %s", r->method,
             rt->path, rt->post ? "POST" : "GET");
        return;
    }
    if (!rt->post)
        return; /* answered on the next call: a response queued now closes the connection
                 * (libmicrohttpd takes the request as not fully read) */
    if (atomic_load(&h->state) != STATE_READY) {
        unavailable(h, r);
        return;
    }
    const char *declared = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (declared) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(declared, &end, 10);
        if (errno == 0 && end != declared && n > h->config.payload_limit) {
            fail(r, SERVE_ERROR_TOO_LARGE,
                 "the body (%llu bytes) is larger than this server's limit of %zu bytes "
                 "(--payload-limit)",
                 n, h->config.payload_limit);
            return;
        }
    }
    /* Only requests that passed every check count toward the limit: refused ones, whose
     * bodies may still be read and dropped, and GETs do not, so that clients without the key
     * (or with a wrong route) cannot lock out those with it. */
    pthread_mutex_lock(&h->lock);
    bool room = h->admitted < h->config.max_concurrent_requests;
    if (room) {
        h->admitted++;
        r->admitted = true;
    }
    pthread_mutex_unlock(&h->lock);
    if (!room)
        fail(r, SERVE_ERROR_OVERLOADED,
             "Model is overloaded: %zu requests are in progress (--max-concurrent-requests)",
             h->config.max_concurrent_requests);
}

/* A part of the body: kept while within the payload limit, dropped after (and all of it when
 * the request was refused at its headers), up to the discard cap. */
static enum MHD_Result take_body(serve_http *h, struct MHD_Connection *c, request *r,
                                 const char *data, size_t size)
{
    double left = r->body_deadline_s - now_s();
    if (left <= 0) {
        /* A response cannot be queued while the body comes in: the client is cut off. */
        r->deadline_closed = true;
        return MHD_NO;
    }
    /* A client that goes silent now is cut off at the deadline, not an idle timeout later. */
    unsigned timeout = (unsigned)ceil(left);
    if (timeout < h->config.idle_timeout_s)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, timeout);
    if (!r->answer.ready && !r->too_large && size > h->config.payload_limit - r->length) {
        r->too_large = true;
        r->discarded = r->length;
        free(r->body);
        r->body = NULL;
        r->length = r->capacity = 0;
    }
    if (r->answer.ready || r->too_large) {
        r->discarded += size;
        if (r->discarded > discard_cap(h)) {
            r->discard_cut = true;
            return MHD_NO; /* a response cannot be queued now: closed */
        }
        return MHD_YES;
    }
    if (r->length + size > r->capacity) {
        size_t want = r->capacity ? r->capacity : 4096;
        while (want < r->length + size)
            want *= 2;
        if (want > h->config.payload_limit)
            want = h->config.payload_limit;
        char *p = realloc(r->body, want);
        if (!p)
            return MHD_NO;
        r->body = p;
        r->capacity = want;
    }
    memcpy(r->body + r->length, data, size);
    r->length += size;
    return MHD_YES;
}

/* Counts the request among those refused at their headers whose bodies are being read and
 * dropped (on), or no more (off): its body is complete, or its connection closed. */
static void set_discarding(serve_http *h, request *r, bool on)
{
    if (r->discarding == on)
        return;
    pthread_mutex_lock(&h->lock);
    r->discarding = on;
    if (on)
        h->discarding++;
    else
        h->discarding--;
    pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

static request *new_request(serve_http *h, struct MHD_Connection *c, const char *url,
                            const char *method)
{
    request *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->start_s = now_s();
    r->deadline_s = r->start_s + h->config.request_timeout_s;
    r->body_deadline_s = r->start_s + h->config.header_timeout_s;
    r->route = find_route(url);
    r->api = r->route != ROUTE_UNKNOWN       ? routes[r->route].api
             : strncmp(url, "/v1/", 4) == 0 ? SERVE_API_OPENAI
                                             : SERVE_API_TEI;
    printable(r->method, sizeof(r->method), method);
    printable(r->log_path, sizeof(r->log_path),
              r->route != ROUTE_UNKNOWN ? routes[r->route].path : url);
    if (r->route == ROUTE_UNKNOWN && strlen(url) >= 64)
        strcpy(r->log_path + 60, "...");
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock(&h->lock);
    h->active++;
    if (info && info->socket_context)
        ((watched_connection *)info->socket_context)->in_request = true;
    pthread_mutex_unlock(&h->lock);
    return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    serve_http *h = cls;
    request *r = *con_cls;
    if (!r) { /* the headers */
        if (!(r = new_request(h, c, url, method)))
            return MHD_NO;
        *con_cls = r;
        first_call(h, c, r, method);
        if (r->answer.ready) {
            if (!read_body_first(h, c))
                return queue_answer(h, c, r);
            set_discarding(h, r, true);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        enum MHD_Result ret = take_body(h, c, r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return ret;
    }
    /* The request is complete, or its answer thread has resumed it. */
    set_discarding(h, r, false);
    join_answer_thread(r);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, h->config.idle_timeout_s);
    if (!r->answer.ready) {
        if (!routes[r->route].post)
            answer_get(h, r);
        else if (!refuse_post(h, r))
            return start_answer_thread(h, c, r);
    }
    return queue_answer(h, c, r);
}

static const char *metrics_route(const request *r)
{
    return r->route == ROUTE_UNKNOWN ? "other" : routes[r->route].path;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    serve_http *h = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (info && info->socket_context) { /* the connection waits for its next request's headers */
        pthread_mutex_lock(&h->lock);
        watched_connection *w = info->socket_context;
        w->in_request = false;
        w->waiting_since_s = now_s();
        pthread_mutex_unlock(&h->lock);
    }
    request *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    join_answer_thread(r); /* the connection closed before its answer was queued */
    double ms = (now_s() - r->start_s) * 1000.0;
    /* No response: cut off for slowness (408), for a body past the discard cap (413), by the
     * server's own stop (503), or the client left first (499, nginx's "client closed
     * request"). */
    bool too_slow = r->deadline_closed ||
                    (!r->status && toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED);
    bool stopped = toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN;
    int status = too_slow        ? 408
                 : r->discard_cut ? 413
                 : r->status      ? r->status
                 : stopped        ? 503
                                  : 499;
    char cut[128];
    snprintf(cut, sizeof(cut), " (closed: the body went past %zu bytes, %d times --payload-limit)",
             discard_cap(h), DISCARD_FACTOR);
    const char *note =
        too_slow         ? " (closed: the client was too slow for the request's deadline)"
        : r->discard_cut ? cut
        : stopped        ? (r->status ? " (closed by the server's stop before the answer was "
                                        "sent whole)"
                                      : " (closed by the server's stop before an answer)")
        : toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? " (client gone)"
                                                      : "";
    if (r->generated)
        fprintf(stderr, "clattn-serve: %s %s %d texts=%zu tokens=%zu generated=%zu ms=%.1f%s\n",
                r->method, r->log_path, status, r->texts, r->tokens, r->generated, ms, note);
    else
        fprintf(stderr, "clattn-serve: %s %s %d texts=%zu tokens=%zu ms=%.1f%s\n", r->method,
                r->log_path, status, r->texts, r->tokens, ms, note);
    if (h->config.metrics)
        serve_metrics_request(h->config.metrics, metrics_route(r), status, r->texts, r->tokens,
                              r->queue_ms, r->inference_ms, ms);
    pthread_mutex_lock(&h->lock);
    if (r->admitted)
        h->admitted--;
    if (r->discarding)
        h->discarding--;
    h->active--;
    pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
    free(r->answer.body);
    serve_chat_stream_discard(r->answer.stream);
    free(r->body);
    free(r);
}

/* libmicrohttpd's messages, on stderr. A request it refuses itself, before the handler (a
 * malformed request line or header: a Content-Length that is not a decimal number, headers
 * past its memory...), reaches neither the handler nor the completion callback: its message
 * "Error processing request (HTTP response code is N ..." is the only sign of it, so that one
 * is logged as a request line and counted in the metrics (route "malformed"), with the message
 * before it (the cause). */
static _Thread_local char last_mhd_message[160];

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    serve_http *h = cls;
    char message[512];
    vsnprintf(message, sizeof(message), fmt, ap);
    size_t n = strlen(message);
    while (n && (message[n - 1] == '\n' || message[n - 1] == '\r'))
        message[--n] = '\0';
    fprintf(stderr, "clattn-serve: libmicrohttpd: %s\n", message);
    static const char refused[] = "Error processing request (HTTP response code is ";
    if (strncmp(message, refused, sizeof(refused) - 1) != 0) {
        size_t kept = n < sizeof(last_mhd_message) - 1 ? n : sizeof(last_mhd_message) - 1;
        memcpy(last_mhd_message, message, kept); /* its beginning says the cause */
        last_mhd_message[kept] = '\0';
        return;
    }
    int status = atoi(message + sizeof(refused) - 1);
    fprintf(stderr, "clattn-serve: ? (malformed) %d texts=0 tokens=0 ms=0.0 (refused by "
                    "libmicrohttpd before the routes: %s)\n",
            status, last_mhd_message[0] ? last_mhd_message : "a malformed request");
    last_mhd_message[0] = '\0';
    if (h && h->config.metrics)
        serve_metrics_malformed(h->config.metrics, status);
}

/* ---- the server ---- */

/* A listening socket on host:port; -1 with the cause in error. */
static int open_listener(const serve_http_config *config, char *address, size_t address_size,
                         char *error, size_t error_size)
{
    char port[16];
    snprintf(port, sizeof(port), "%u", config->port);
    struct addrinfo hints = {0}, *found = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(config->host, port, &hints, &found);
    if (rc != 0) {
        snprintf(error, error_size, "--host %s: %s", config->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (a->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0) {
        if (saved == EADDRINUSE)
            snprintf(error, error_size, "cannot listen on %s port %u: the port is in use (%s)",
                     config->host, config->port, strerror(saved));
        else
            snprintf(error, error_size, "cannot listen on %s port %u: %s", config->host,
                     config->port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned bound_port = config->port;
    if (getsockname(fd, (struct sockaddr *)&bound, &len) == 0) {
        if (bound.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&bound;
            inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host));
            bound_port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&bound;
            inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host));
            bound_port = ntohs(a4->sin_port);
        }
    }
    snprintf(address, address_size, bound.ss_family == AF_INET6 ? "http://[%s]:%u" : "http://%s:%u",
             host, bound_port);
    return fd;
}

/* The connections kept at once: the open-file limit less RESERVED_FILES (a quarter of a small
 * limit), at most MAX_CONNECTIONS. */
static unsigned connection_limit_of_files(void)
{
    struct rlimit files;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &files) == 0 ? files.rlim_cur : 1024;
    if (n == RLIM_INFINITY || n > (rlim_t)MAX_CONNECTIONS + RESERVED_FILES)
        n = (rlim_t)MAX_CONNECTIONS + RESERVED_FILES;
    rlim_t reserved = n / 4 < RESERVED_FILES ? n / 4 : RESERVED_FILES;
    return n - reserved < 8 ? 8 : (unsigned)(n - reserved);
}

/* libmicrohttpd's threads: one per core, 2 to 8 (they only move bytes and parse headers). */
static unsigned pool_threads(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 2 ? 2 : cores > 8 ? 8 : (unsigned)cores;
}

/* ---- the header watchdog ----
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte resets it, so a client that
 * sends its request line and headers a byte at a time could hold its connection for ever, and
 * enough of them every connection the server allows. The request deadline starts with a
 * request's headers; before them this watchdog keeps the same bound: a connection that has not
 * sent complete headers within request_timeout_s of its opening or of its previous request's
 * end is shut down (shutdown(2): libmicrohttpd then sees the end of the stream and closes it as
 * it would any other). (An answer being sent needs no such bound: libmicrohttpd can write only
 * when the client has drained a good part of the kernel's send buffer, which a client that
 * reads a byte at a time does not within the idle timeout.) The list entry of a connection
 * goes, under the lock, in libmicrohttpd's "closed" notification,
 * which comes before it closes the socket, so the watchdog never touches a descriptor that has
 * been reused. */

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    serve_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        watched_connection *w = info ? calloc(1, sizeof(*w)) : NULL;
        *socket_context = w; /* NULL (out of memory): not watched, the idle timeout still is */
        if (!w)
            return;
        w->fd = info->connect_fd;
        w->waiting_since_s = now_s();
        pthread_mutex_lock(&h->lock);
        w->next = h->watched;
        if (h->watched)
            h->watched->prev = w;
        h->watched = w;
        pthread_mutex_unlock(&h->lock);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        watched_connection *w = *socket_context;
        pthread_mutex_lock(&h->lock);
        if (w->prev)
            w->prev->next = w->next;
        else
            h->watched = w->next;
        if (w->next)
            w->next->prev = w->prev;
        pthread_mutex_unlock(&h->lock);
        free(w);
        *socket_context = NULL;
    }
}

static void *watchdog_main(void *arg)
{
    serve_http *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->watchdog_stop) {
        struct timespec tick;
        clock_gettime(CLOCK_REALTIME, &tick);
        tick.tv_nsec += 250 * 1000 * 1000; /* four looks a second: the bound is +0.25 s */
        if (tick.tv_nsec >= 1000000000L)
            tick.tv_sec++, tick.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&h->watchdog_wake, &h->lock, &tick);
        double now = now_s();
        for (watched_connection *w = h->watched; w && !h->watchdog_stop; w = w->next) {
            if (w->in_request || w->cut || now - w->waiting_since_s < h->config.header_timeout_s)
                continue;
            w->cut = true;
            shutdown(w->fd, SHUT_RDWR);
            fprintf(stderr, "clattn-serve: closed a connection that sent no complete request "
                            "headers within %g s\n", h->config.header_timeout_s);
        }
        /* A chat model's streams whose client left while they wait for a token. */
        pthread_mutex_unlock(&h->lock);
        serve_chat_streams_check();
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void destroy_sync(serve_http *h)
{
    pthread_cond_destroy(&h->watchdog_wake);
    pthread_cond_destroy(&h->answered);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->lock);
}

int serve_http_start(serve_http **out, const serve_http_config *config, char *error,
                     size_t error_size)
{
    *out = NULL;
    serve_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    h->config = *config;
    atomic_init(&h->state, STATE_LOADING);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    pthread_cond_init(&h->answered, NULL);
    pthread_cond_init(&h->watchdog_wake, NULL);
    h->listen_fd = open_listener(config, h->address, sizeof(h->address), error, error_size);
    if (h->listen_fd < 0) {
        destroy_sync(h);
        free(h);
        return -1;
    }
    /* Idle connections cost a few KiB each and no thread, so the limit is what the open-file
     * limit allows, far above the requests allowed at once: connections that send nothing
     * cannot lock real clients out, and the request limit (429) counts requests. */
    h->connection_limit = connection_limit_of_files();
    h->threads = pool_threads();
    unsigned poll = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL
                                                                          : MHD_USE_POLL;
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | poll | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, handle, h,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first: it applies to the options after */
        MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, h->threads,
        MHD_OPTION_CONNECTION_TIMEOUT, config->idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, h->connection_limit,
        MHD_OPTION_NOTIFY_COMPLETED, completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, h,
        MHD_OPTION_END);
    int rc = h->daemon ? pthread_create(&h->watchdog, NULL, watchdog_main, h) : 0;
    if (rc != 0) {
        MHD_stop_daemon(h->daemon); /* closes the listening socket too */
        h->daemon = NULL;
        h->listen_fd = -1;
    }
    h->watchdog_running = h->daemon != NULL;
    if (!h->daemon) {
        snprintf(error, error_size, "cannot start the HTTP server on %s (libmicrohttpd failed)",
                 h->address);
        if (h->listen_fd >= 0)
            close(h->listen_fd);
        destroy_sync(h);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

const char *serve_http_address(const serve_http *h)
{
    return h->address;
}

unsigned serve_http_connection_limit(const serve_http *h)
{
    return h->connection_limit;
}

unsigned serve_http_threads(const serve_http *h)
{
    return h->threads;
}

void serve_http_set_ready(serve_http *h, const serve_backend *backend)
{
    h->backend = *backend;
    atomic_store_explicit(&h->state, STATE_READY, memory_order_release);
}

void serve_http_stop_accepting(serve_http *h)
{
    atomic_store(&h->state, STATE_STOPPING);
    if (!h->quiesced) {
        MHD_socket fd = MHD_quiesce_daemon(h->daemon);
        h->quiesced = true;
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
}

/* Waits until no request is in progress (all), or none but those refused at their headers
 * whose bodies are being read and dropped (!all), or timeout_s has passed; true when so. */
static bool wait_requests(serve_http *h, double timeout_s, bool all)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double end = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + timeout_s;
    until.tv_sec = (time_t)end;
    until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&h->lock);
    while (h->active > (all ? 0 : h->discarding))
        if (pthread_cond_timedwait(&h->idle, &h->lock, &until) == ETIMEDOUT)
            break;
    bool idle = h->active == (all ? 0 : h->discarding);
    pthread_mutex_unlock(&h->lock);
    return idle;
}

bool serve_http_wait_idle(serve_http *h, double timeout_s)
{
    return wait_requests(h, timeout_s, false);
}

void serve_http_stop(serve_http **hp)
{
    serve_http *h = hp ? *hp : NULL;
    if (!h)
        return;
    if (h->watchdog_running) {
        pthread_mutex_lock(&h->lock);
        h->watchdog_stop = true;
        pthread_cond_signal(&h->watchdog_wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->watchdog, NULL);
    }
    /* libmicrohttpd must not stop while a connection is suspended: no new answer thread, and
     * those running resume theirs (the scheduler is stopped: they end at once). */
    pthread_mutex_lock(&h->lock);
    h->answering_closed = true;
    while (h->answering > 0)
        pthread_cond_wait(&h->answered, &h->lock);
    pthread_mutex_unlock(&h->lock);
    /* The answer threads have resumed their connections, but libmicrohttpd's threads have yet
     * to queue and write those answers (a 503 past the drain, a 200 just finished): they get a
     * short while (each with "Connection: close"), as do refused requests still sending the
     * body they are answered after. */
    wait_requests(h, STOP_GRACE_S, true);
    /* Every connection's "closed" notification frees its entry, every request's completion
     * joins its answer thread. */
    MHD_stop_daemon(h->daemon);
    destroy_sync(h);
    free(h);
    *hp = NULL;
}
