/*
 * A chat model's routes (chat_routes.h).
 *
 * A stream's life: the answer thread creates it with the generation (two references: the
 * stream's and the scheduler's) and hands it to http.c, which makes it the response. The
 * generation owns the stream's memory (freed with the generation's last reference), so the
 * scheduler's notification never meets a freed stream; when libmicrohttpd releases the
 * response (sent whole, or the client gone) the stream is marked gone, the generation
 * cancelled and the stream's reference dropped.
 */
#include "chat_routes.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_chat_stream {
    pthread_mutex_t lock;
    serve_gen *gen;
    struct MHD_Connection *connection;
    int fd;          /* the connection's socket, -1 when unknown */
    struct serve_chat_stream *prev_waiting, *next_waiting; /* in `waiting` while suspended */
    bool listed;
    bool suspended;  /* the reader suspended the connection: the next notification resumes it */
    bool gone;       /* the response was released: nothing is resumed any more */
    bool first, done;
    size_t read;     /* events formatted */
    serve_chat_request req;
    serve_completion_info info;
    char id[48];
    const clattn_llm_text *text;
    char *out;       /* formatted bytes not yet given to libmicrohttpd */
    size_t out_length, out_pos;
};

#define EVENTS_PER_CHUNK 64

/* The streams whose connections are suspended, waiting for a token (serve_chat_streams_check).
 * A stream is listed under its own lock and this one (in that order) when it suspends, and
 * unlisted likewise before its connection is resumed or its response released, so the check
 * only ever peeks at the socket of a suspended connection, which libmicrohttpd neither reads
 * nor closes. */
static pthread_mutex_t waiting_lock = PTHREAD_MUTEX_INITIALIZER;
static serve_chat_stream *waiting;

static void list_waiting(serve_chat_stream *s)
{
    if (s->fd < 0 || s->listed)
        return;
    pthread_mutex_lock(&waiting_lock);
    s->prev_waiting = NULL;
    s->next_waiting = waiting;
    if (waiting)
        waiting->prev_waiting = s;
    waiting = s;
    s->listed = true;
    pthread_mutex_unlock(&waiting_lock);
}

static void unlist_waiting(serve_chat_stream *s)
{
    if (!s->listed)
        return;
    pthread_mutex_lock(&waiting_lock);
    if (s->prev_waiting)
        s->prev_waiting->next_waiting = s->next_waiting;
    else
        waiting = s->next_waiting;
    if (s->next_waiting)
        s->next_waiting->prev_waiting = s->prev_waiting;
    s->listed = false;
    pthread_mutex_unlock(&waiting_lock);
}

bool serve_socket_closed(int fd)
{
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void serve_chat_streams_check(void)
{
    pthread_mutex_lock(&waiting_lock);
    for (serve_chat_stream *s = waiting; s; s = s->next_waiting)
        if (serve_socket_closed(s->fd))
            serve_gen_cancel(s->gen);
    pthread_mutex_unlock(&waiting_lock);
}

static void fill_id(char *id, size_t size, bool chat)
{
    static atomic_ullong counter;
    unsigned long long n = atomic_fetch_add(&counter, 1) + 1;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long x = ((unsigned long long)t.tv_sec << 20) ^ (unsigned long long)t.tv_nsec;
    x = (x ^ (n * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    snprintf(id, size, "%s-%016llx%04llx", chat ? "chatcmpl" : "cmpl", x, n & 0xffff);
}

/* A seed for a request that gave none: its own stream, never repeated within the process. */
static uint64_t fresh_seed(void)
{
    static atomic_ullong counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t z = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^
                 (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void set_error(serve_chat_answer *out, serve_error_kind kind, const char *param,
                      const char *message)
{
    out->failed = true;
    serve_error_set(&out->error, SERVE_API_OPENAI, kind, param, "%s", message);
}

static void set_body(serve_chat_answer *out, char *body, size_t length)
{
    if (!body) {
        set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory for the answer");
        return;
    }
    out->status = 200;
    out->body = body;
    out->length = length;
    out->content_type = "application/json";
}

/* ---- tokenize, detokenize ---- */

static void answer_tokenize(const serve_chat_backend *b, const char *body, size_t length,
                            serve_chat_answer *out)
{
    serve_llm_tokenize_request req;
    if (!serve_parse_llm_tokenize(body, length, &req, &out->error)) {
        out->failed = true;
        return;
    }
    int32_t *ids = NULL;
    size_t count = 0;
    if (clattn_llm_tokenize(b->text, req.content, req.length, req.add_special,
                            req.parse_special, &ids, &count) != CLATTN_OK)
        set_error(out, SERVE_ERROR_INVALID, "content", clattn_last_error(NULL));
    else {
        size_t n = 0;
        char *answer = serve_format_llm_tokens(ids, count, b->text, req.with_pieces, &n);
        set_body(out, answer, n);
        out->prompt_tokens = count;
    }
    clattn_llm_free(ids);
    free(req.content);
}

static void answer_detokenize(const serve_chat_backend *b, const char *body, size_t length,
                              serve_chat_answer *out)
{
    int32_t *ids = NULL;
    size_t count = 0;
    if (!serve_parse_llm_detokenize(body, length, b->limits.vocab_size, &ids, &count,
                                    &out->error)) {
        out->failed = true;
        return;
    }
    char *text = NULL;
    size_t n = 0;
    if (clattn_llm_detokenize(b->text, ids, count, 1, &text, &n) != CLATTN_OK)
        set_error(out, SERVE_ERROR_INVALID, "tokens", clattn_last_error(NULL));
    else {
        size_t total = 0;
        char *answer = serve_format_llm_content(text, n, &total);
        set_body(out, answer, total);
        out->prompt_tokens = count;
    }
    clattn_llm_free(text);
    free(ids);
}

/* ---- the prompt ---- */

/* The request's prompt as ids: the chat template rendered and tokenized (control tokens
 * parsed, no BOS added: the template writes what it needs, as transformers'
 * apply_chat_template), or the completion's prompt tokenized as the file says (BOS). */
static bool prompt_of(const serve_chat_backend *b, const serve_chat_request *req, int32_t **ids,
                      size_t *count, serve_chat_answer *out)
{
    *ids = NULL;
    *count = 0;
    if (!req->chat && req->prompt_ids) {
        *ids = malloc(req->prompt_id_count * sizeof(int32_t));
        if (!*ids) {
            set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory");
            return false;
        }
        memcpy(*ids, req->prompt_ids, req->prompt_id_count * sizeof(int32_t));
        *count = req->prompt_id_count;
        return true;
    }
    char *rendered = NULL;
    size_t rendered_length = 0;
    const char *text = req->prompt;
    size_t text_length = req->prompt_length;
    if (req->chat) {
        if (clattn_llm_apply_chat_template_vars(b->text, req->messages_json, req->kwargs_json,
                                                NULL, 1, &rendered, &rendered_length) !=
            CLATTN_OK) {
            set_error(out, SERVE_ERROR_INVALID, "messages", clattn_last_error(NULL));
            return false;
        }
        text = rendered;
        text_length = rendered_length;
    }
    int32_t *tokens = NULL;
    clattn_status st = clattn_llm_tokenize(b->text, text, text_length, req->chat ? 0 : 1, 1,
                                           &tokens, count);
    clattn_llm_free(rendered);
    if (st != CLATTN_OK) {
        set_error(out, SERVE_ERROR_INVALID, req->chat ? "messages" : "prompt",
                  clattn_last_error(NULL));
        return false;
    }
    /* The library's memory, handed on as the caller's. */
    *ids = malloc((*count ? *count : 1) * sizeof(int32_t));
    if (*ids && *count)
        memcpy(*ids, tokens, *count * sizeof(int32_t));
    clattn_llm_free(tokens);
    if (!*ids) {
        set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory");
        return false;
    }
    return true;
}

/* The tokens a request may generate, or 0 (and the error) when its prompt and max_tokens do
 * not fit a slot. A request without max_tokens gets the room its slot has (at most
 * --max-tokens): the last token generated is never run, so n + max_new - 1 <= ctx_size. */
static size_t room_for(const serve_chat_backend *b, const serve_chat_request *req, size_t n,
                       serve_chat_answer *out)
{
    const char *field = req->chat ? "messages" : "prompt";
    char message[256];
    if (n == 0) {
        snprintf(message, sizeof(message), "'%s' gives no tokens", field);
        set_error(out, SERVE_ERROR_INVALID, field, message);
        return 0;
    }
    if (n >= b->ctx_size) {
        snprintf(message, sizeof(message),
                 "This model's context is %zu tokens per request (--ctx-size): the prompt is "
                 "%zu tokens, leaving no room for an answer",
                 b->ctx_size, n);
        set_error(out, SERVE_ERROR_INVALID, field, message);
        return 0;
    }
    size_t room = b->ctx_size - n + 1;
    if (req->max_tokens && req->max_tokens > room) {
        snprintf(message, sizeof(message),
                 "This model's context is %zu tokens per request (--ctx-size): the prompt is "
                 "%zu tokens and max_tokens asks for %zu more",
                 b->ctx_size, n, req->max_tokens);
        set_error(out, SERVE_ERROR_INVALID, "max_tokens", message);
        return 0;
    }
    size_t max = req->max_tokens ? req->max_tokens : room;
    return max < b->limits.max_tokens || req->max_tokens ? max : b->limits.max_tokens;
}

/* ---- streams ---- */

static void stream_free(void *arg)
{
    serve_chat_stream *s = arg;
    free(s->out);
    serve_chat_request_free(&s->req);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void stream_notify(void *arg)
{
    serve_chat_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    if (s->suspended && !s->gone) {
        s->suspended = false;
        unlist_waiting(s);
        MHD_resume_connection(s->connection);
    }
    pthread_mutex_unlock(&s->lock);
}

static void append_owned(char **buffer, size_t *length, char *more, size_t more_length,
                         bool *ok)
{
    if (!more) {
        *ok = false;
        return;
    }
    char *p = realloc(*buffer, *length + more_length + 1);
    if (!p) {
        free(more);
        *ok = false;
        return;
    }
    memcpy(p + *length, more, more_length);
    *length += more_length;
    p[*length] = '\0';
    *buffer = p;
    free(more);
}

/* The stream's next bytes into s->out (under its lock): a chunk of the events ready, or the
 * end (the last chunk, usage, [DONE]). False when nothing is ready yet. */
static bool next_output(serve_chat_stream *s)
{
    serve_gen_event events[EVENTS_PER_CHUNK];
    serve_gen_end end;
    size_t n = serve_gen_read(s->gen, s->read, events, EVENTS_PER_CHUNK, &end);
    bool ok = true;
    if (n > 0) {
        size_t start = events[0].text_start;
        size_t length = events[n - 1].text_start + events[n - 1].text_length - start;
        char *piece = malloc(length + 1);
        if (piece) {
            serve_gen_text(s->gen, start, length, piece);
            s->out = serve_format_completion_chunk(&s->info, &s->req, s->text, piece, length,
                                                   !s->first, events, n, NULL, &s->out_length);
        }
        free(piece);
        s->first = true;
        s->read += n;
        return true;
    }
    if (end == SERVE_GEN_RUNNING)
        return false;
    s->done = true;
    size_t total = 0, part = 0;
    char *buffer = NULL, *piece = NULL;
    if (end == SERVE_GEN_STOP || end == SERVE_GEN_LENGTH) {
        piece = serve_format_completion_chunk(&s->info, &s->req, s->text, "", 0, !s->first, NULL,
                                              0, serve_finish_reason(end), &part);
        append_owned(&buffer, &total, piece, part, &ok);
        if (s->req.include_usage) {
            serve_gen_summary sum;
            serve_gen_summary_of(s->gen, &sum);
            serve_usage usage = {sum.prompt_tokens, sum.completion_tokens, sum.cached_tokens};
            piece = serve_format_usage_chunk(&s->info, &usage, &part);
            append_owned(&buffer, &total, piece, part, &ok);
        }
    } else {
        serve_gen_summary sum;
        serve_gen_summary_of(s->gen, &sum);
        serve_error e;
        serve_error_set(&e, SERVE_API_OPENAI,
                        end == SERVE_GEN_TIMED_OUT ? SERVE_ERROR_TIMEOUT
                        : end == SERVE_GEN_FAILED  ? SERVE_ERROR_BACKEND
                                                   : SERVE_ERROR_UNAVAILABLE,
                        NULL, "%s",
                        end == SERVE_GEN_TIMED_OUT   ? "the request's deadline (--request-timeout) "
                                                       "passed during its generation"
                        : end == SERVE_GEN_FAILED    ? sum.error
                        : end == SERVE_GEN_CANCELLED ? "the generation was cancelled"
                                                     : "the server is shutting down");
        piece = serve_format_stream_error(&e, &part);
        append_owned(&buffer, &total, piece, part, &ok);
    }
    char *done = strdup("data: [DONE]\n\n");
    append_owned(&buffer, &total, done, done ? strlen(done) : 0, &ok);
    if (!ok) {
        free(buffer);
        buffer = NULL;
        total = 0;
    }
    s->out = buffer;
    s->out_length = total;
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    serve_chat_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->out && s->out_pos < s->out_length) {
            size_t n = s->out_length - s->out_pos < max ? s->out_length - s->out_pos : max;
            memcpy(buf, s->out + s->out_pos, n);
            s->out_pos += n;
            pthread_mutex_unlock(&s->lock);
            return (ssize_t)n;
        }
        free(s->out);
        s->out = NULL;
        s->out_length = s->out_pos = 0;
        if (s->done) {
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!next_output(s)) {
            /* Nothing yet: out of the event loop until the scheduler's next notification. */
            s->suspended = true;
            list_waiting(s);
            MHD_suspend_connection(s->connection);
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        if (!s->out) { /* out of memory: the stream is cut */
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

/* The response is released (sent whole, or the client gone). */
static void stream_release(void *cls)
{
    serve_chat_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->gone = true;
    unlist_waiting(s);
    serve_gen *g = s->gen;
    pthread_mutex_unlock(&s->lock);
    serve_gen_cancel(g); /* no-op once it has ended */
    serve_gen_release(g); /* may free s */
}

struct MHD_Response *serve_chat_stream_response(serve_chat_stream *s,
                                                struct MHD_Connection *connection)
{
    s->connection = connection;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = info ? info->connect_fd : -1;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s,
                                          stream_release);
    if (!r) {
        stream_release(s);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return r;
}

void serve_chat_stream_discard(serve_chat_stream *s)
{
    if (s)
        stream_release(s);
}

/* ---- completions ---- */

static void answer_generation(const serve_chat_backend *b, serve_chat_route route,
                              const char *body, size_t length, double deadline_s,
                              bool (*client_gone)(void *arg), void *arg,
                              serve_chat_answer *out)
{
    serve_chat_request req;
    bool chat = route == SERVE_CHAT_COMPLETIONS;
    bool parsed = chat ? serve_parse_chat(body, length, &b->limits, &req, &out->error)
                       : serve_parse_completion(body, length, &b->limits, &req, &out->error);
    if (!parsed) {
        out->failed = true;
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (!prompt_of(b, &req, &ids, &n, out)) {
        serve_chat_request_free(&req);
        return;
    }
    out->prompt_tokens = n;
    size_t max_new = room_for(b, &req, n, out);
    if (!max_new) {
        free(ids);
        serve_chat_request_free(&req);
        return;
    }
    clattn_llm_generate_options options;
    clattn_llm_generate_options_default(&options);
    options.sampling = req.sampling;
    if (!req.seed_given)
        options.sampling.seed = fresh_seed();
    options.max_new_tokens = max_new;
    options.stop = (const char *const *)req.stop;
    options.stop_count = req.stop_count;
    serve_gen *g = serve_gen_create(ids, n, &options, req.logprobs, req.top_logprobs,
                                    deadline_s * 1000.0);
    free(ids);
    serve_chat_stream *s = NULL;
    if (g && req.stream) {
        s = calloc(1, sizeof(*s));
        if (s) {
            pthread_mutex_init(&s->lock, NULL);
            s->fd = -1;
            s->gen = g;
            s->text = b->text;
            s->req = req; /* the stream's now */
            memset(&req, 0, sizeof(req));
            serve_gen_set_notify(g, stream_notify, s, stream_free);
        }
    }
    if (!g || (req.stream && !s)) {
        serve_gen_release(g);
        serve_chat_request_free(&req);
        set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory for the generation");
        return;
    }
    serve_chat_request *r = s ? &s->req : &req;
    serve_completion_info info = {.chat = chat,
                                  .model = b->limits.model_names[r->model_name],
                                  .created = (long long)time(NULL)};
    char id[48];
    fill_id(s ? s->id : id, sizeof(id), chat);
    info.id = s ? s->id : id;
    int rc = serve_llm_submit(b->scheduler, g);
    if (rc != 0) {
        serve_gen_release(g); /* frees s too */
        serve_chat_request_free(&req);
        if (rc == 1)
            set_error(out, SERVE_ERROR_OVERLOADED, NULL,
                      "Model is overloaded: every slot is busy and the queue is full "
                      "(--parallel, --max-concurrent-requests)");
        else
            set_error(out, SERVE_ERROR_UNAVAILABLE, NULL, "the server is shutting down");
        return;
    }
    if (s) {
        s->info = info;
        out->stream = s;
        out->status = 200;
        return;
    }
    /* Not streamed: every event, then the answer. */
    serve_gen_event *events = NULL;
    size_t count = 0, capacity = 0;
    serve_gen_end end = SERVE_GEN_RUNNING;
    bool ok = true;
    double next_look = 0;
    while (end == SERVE_GEN_RUNNING) {
        if (count == capacity) {
            size_t want = capacity ? 2 * capacity : 256;
            serve_gen_event *p = realloc(events, want * sizeof(*p));
            if (!p) {
                ok = false;
                serve_gen_cancel(g);
                break;
            }
            events = p;
            capacity = want;
        }
        /* Twice a second, whether the client is still there (its connection is suspended:
         * libmicrohttpd would not notice it leave). */
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double now = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
        if (now >= next_look) {
            next_look = now + 0.5;
            if (client_gone && client_gone(arg))
                serve_gen_cancel(g);
        }
        if (serve_gen_wait(g, count, 500.0))
            count += serve_gen_read(g, count, events + count, capacity - count, &end);
    }
    serve_gen_summary sum;
    serve_gen_summary_of(g, &sum);
    out->completion_tokens = sum.completion_tokens;
    out->queue_ms = sum.queue_ms;
    if (!ok) {
        set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory for the answer");
    } else if (end == SERVE_GEN_STOP || end == SERVE_GEN_LENGTH) {
        size_t text_length = count ? events[count - 1].text_start + events[count - 1].text_length
                                   : 0;
        char *answer = malloc(text_length + 1);
        if (answer) {
            serve_gen_text(g, 0, text_length, answer);
            serve_usage usage = {sum.prompt_tokens, sum.completion_tokens, sum.cached_tokens};
            size_t total = 0;
            char *formatted = serve_format_completion(&info, &req, b->text, answer, text_length,
                                                      events, count, serve_finish_reason(end),
                                                      &usage, &total);
            set_body(out, formatted, total);
        } else {
            set_error(out, SERVE_ERROR_BACKEND, NULL, "out of memory for the answer");
        }
        free(answer);
    } else if (end == SERVE_GEN_TIMED_OUT) {
        set_error(out, SERVE_ERROR_TIMEOUT, NULL,
                  "the request's deadline (--request-timeout) passed before its generation "
                  "ended");
    } else if (end == SERVE_GEN_FAILED) {
        set_error(out, SERVE_ERROR_BACKEND, NULL, sum.error);
    } else if (end == SERVE_GEN_CANCELLED) {
        set_error(out, SERVE_ERROR_BACKEND, NULL, "the client closed its connection: cancelled");
    } else {
        set_error(out, SERVE_ERROR_UNAVAILABLE, NULL, "the server is shutting down");
    }
    free(events);
    serve_gen_release(g);
    serve_chat_request_free(&req);
}

void serve_chat_answer_route(const serve_chat_backend *b, serve_chat_route route,
                             const char *body, size_t length, double deadline_s,
                             bool (*client_gone)(void *arg), void *arg,
                             serve_chat_answer *out)
{
    memset(out, 0, sizeof(*out));
    switch (route) {
    case SERVE_LLM_TOKENIZE: answer_tokenize(b, body, length, out); return;
    case SERVE_LLM_DETOKENIZE: answer_detokenize(b, body, length, out); return;
    default:
        answer_generation(b, route, body, length, deadline_s, client_gone, arg, out);
        return;
    }
}
