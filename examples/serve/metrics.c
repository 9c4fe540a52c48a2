/*
 * The server's counters and histograms (metrics.h), rendered in Prometheus' text exposition
 * format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/): each metric family
 * has a "# HELP" and a "# TYPE" line, then its samples; histograms have cumulative
 * _bucket{le="..."} samples ending with le="+Inf", then _sum and _count.
 *
 * What is counted:
 *   clattn_requests_total{route,status}     every finished request, and those libmicrohttpd
 *                                           refused before any route (route "malformed")
 *   clattn_request_duration_seconds         every finished request, from arrival to response
 *   clattn_request_queue_seconds,
 *   clattn_request_inference_seconds        requests answered 2xx that ran texts (texts > 0):
 *                                           a request refused before the scheduler has no such
 *                                           times and would only drag the histograms to zero
 *   clattn_texts_total, clattn_tokens_total texts and real tokens of those requests
 *   clattn_batch_texts, clattn_batch_tokens   each batch the scheduler ran
 *   clattn_queue_depth                      jobs waiting or running when rendered (a gauge)
 * and for a chat model (llm_scheduler.c):
 *   clattn_prompt_tokens_total,             prompt tokens of finished generations, of them
 *   clattn_prompt_tokens_cached_total       those a slot's cache held already (not run again)
 *   clattn_prompt_chunks_total              prompt chunks run (--prompt-chunk tokens at most)
 *   clattn_generation_tokens_total          tokens generated
 *   clattn_time_to_first_token_seconds      from a generation's submission to its first token
 *   clattn_inter_token_latency_seconds      between a generation's consecutive tokens
 *   clattn_slots_busy, clattn_slots,        slots generating now, slots, and tokens their
 *   clattn_kv_cache_tokens, ..._capacity    caches hold (gauges, when rendered)
 *
 * Memory is bounded whatever the clients send: at most MAX_ROUTES route labels are kept (later
 * ones count as "other"), a status outside 100..599 counts as 0, and route names are cut at
 * ROUTE_CHARS bytes and escaped as label values.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES 32
#define ROUTE_CHARS 64
#define MAX_STATUS 600

/* Seconds: Prometheus' default buckets, with 1 ms and 2.5 ms below them (a short text's batch
 * runs in a few ms) and 30 s above (the default request deadline). */
static const double time_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10,   30};
static const double text_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const double token_buckets[] = {64,   128,  256,   512,   1024, 2048,
                                       4096, 8192, 16384, 32768, 65536};
#define MAX_BUCKETS 14

typedef struct histogram {
    const double *bounds; /* upper bounds, increasing; +Inf is implicit */
    size_t n_bounds;
    uint64_t counts[MAX_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf's */
    double sum;
    uint64_t count;
} histogram;

typedef struct route_counts {
    char name[ROUTE_CHARS + 1];
    uint64_t by_status[MAX_STATUS]; /* index: the HTTP status, 0 for anything out of range */
} route_counts;

struct serve_metrics {
    pthread_mutex_t lock;
    route_counts *routes[MAX_ROUTES + 1]; /* the last slot is "other", for the overflow */
    size_t n_routes;
    histogram duration, queue, inference, batch_texts, batch_tokens;
    uint64_t texts, tokens;
    histogram first_token, inter_token;
    uint64_t generations, prompt_tokens, cached_tokens, generated_tokens, prompt_chunks;
};

static void histogram_init(histogram *h, const double *bounds, size_t n)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->n_bounds = n;
}

static void histogram_observe(histogram *h, double value)
{
    size_t b = 0;
    while (b < h->n_bounds && value > h->bounds[b])
        b++;
    h->counts[b]++;
    h->sum += value;
    h->count++;
}

serve_metrics *serve_metrics_create(void)
{
    serve_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return NULL;
    }
#define N(a) (sizeof(a) / sizeof((a)[0]))
    histogram_init(&m->duration, time_buckets, N(time_buckets));
    histogram_init(&m->queue, time_buckets, N(time_buckets));
    histogram_init(&m->inference, time_buckets, N(time_buckets));
    histogram_init(&m->batch_texts, text_buckets, N(text_buckets));
    histogram_init(&m->batch_tokens, token_buckets, N(token_buckets));
    histogram_init(&m->first_token, time_buckets, N(time_buckets));
    histogram_init(&m->inter_token, time_buckets, N(time_buckets));
#undef N
    return m;
}

void serve_metrics_destroy(serve_metrics **pm)
{
    if (!pm || !*pm)
        return;
    serve_metrics *m = *pm;
    for (size_t i = 0; i <= MAX_ROUTES; i++)
        free(m->routes[i]);
    pthread_mutex_destroy(&m->lock);
    free(m);
    *pm = NULL;
}

/* The counters of `route` (under the lock), created on first use; "other" once MAX_ROUTES names
 * are taken. NULL only when out of memory. */
static route_counts *route_slot(serve_metrics *m, const char *route)
{
    char name[ROUTE_CHARS + 1];
    snprintf(name, sizeof(name), "%s", route && *route ? route : "other");
    for (size_t i = 0; i < m->n_routes; i++)
        if (strcmp(m->routes[i]->name, name) == 0)
            return m->routes[i];
    size_t slot = m->n_routes;
    if (slot == MAX_ROUTES) { /* full: "other", one of the names already or the spare slot */
        for (size_t i = 0; i < m->n_routes; i++)
            if (strcmp(m->routes[i]->name, "other") == 0)
                return m->routes[i];
        snprintf(name, sizeof(name), "other");
    }
    if (!m->routes[slot]) {
        m->routes[slot] = calloc(1, sizeof(route_counts));
        if (!m->routes[slot])
            return NULL;
        snprintf(m->routes[slot]->name, sizeof(m->routes[slot]->name), "%s", name);
        if (slot < MAX_ROUTES)
            m->n_routes++;
    }
    return m->routes[slot];
}

void serve_metrics_request(serve_metrics *m, const char *route, int status, size_t texts,
                           size_t tokens, double queue_ms, double inference_ms, double total_ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    route_counts *r = route_slot(m, route);
    if (r)
        r->by_status[status >= 100 && status < MAX_STATUS ? status : 0]++;
    histogram_observe(&m->duration, total_ms / 1000.0);
    if (status >= 200 && status < 300 && texts > 0) {
        histogram_observe(&m->queue, queue_ms / 1000.0);
        histogram_observe(&m->inference, inference_ms / 1000.0);
        m->texts += texts;
        m->tokens += tokens;
    }
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_malformed(serve_metrics *m, int status)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    route_counts *r = route_slot(m, "malformed");
    if (r)
        r->by_status[status >= 100 && status < MAX_STATUS ? status : 0]++;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_batch(serve_metrics *m, size_t texts, size_t padded_tokens)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    histogram_observe(&m->batch_texts, (double)texts);
    histogram_observe(&m->batch_tokens, (double)padded_tokens);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_generation(serve_metrics *m, size_t prompt_tokens, size_t cached_tokens,
                              size_t generated_tokens)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->generations++;
    m->prompt_tokens += prompt_tokens;
    m->cached_tokens += cached_tokens;
    m->generated_tokens += generated_tokens;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_prompt_chunk(serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->prompt_chunks++;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_first_token(serve_metrics *m, double ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    histogram_observe(&m->first_token, ms / 1000.0);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_inter_token(serve_metrics *m, double ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    histogram_observe(&m->inter_token, ms / 1000.0);
    pthread_mutex_unlock(&m->lock);
}

/* ---- rendering ---- */

/* A growing NUL-terminated string; `failed` once an allocation failed (then it stays put). */
typedef struct text {
    char *data;
    size_t length, capacity;
    int failed;
} text;

static void append(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void append(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(t->data + t->length, t->capacity - t->length, fmt, args);
        va_end(args);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->capacity - t->length) {
            t->length += (size_t)n;
            return;
        }
        size_t capacity = 2 * t->capacity + (size_t)n + 1;
        char *data = realloc(t->data, capacity);
        if (!data) {
            t->failed = 1;
            return;
        }
        t->data = data, t->capacity = capacity;
    }
}

/* A label value as the format wants it: backslash, double quote and newline escaped. */
static void append_label_value(text *t, const char *value)
{
    for (const char *c = value; *c; c++) {
        if (*c == '\\')
            append(t, "\\\\");
        else if (*c == '"')
            append(t, "\\\"");
        else if (*c == '\n')
            append(t, "\\n");
        else
            append(t, "%c", *c);
    }
}

static void append_family(text *t, const char *name, const char *type, const char *help)
{
    append(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void append_histogram(text *t, const char *name, const char *help, const histogram *h)
{
    append_family(t, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t b = 0; b < h->n_bounds; b++) {
        cumulative += h->counts[b];
        append(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[b],
               (unsigned long long)cumulative);
    }
    cumulative += h->counts[h->n_bounds];
    append(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cumulative);
    append(t, "%s_sum %.17g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

char *serve_metrics_render(serve_metrics *m, size_t pending, const serve_slot_load *slots)
{
    if (!m)
        return NULL;
    text t = {.data = malloc(8192), .capacity = 8192};
    if (!t.data)
        return NULL;
    t.data[0] = '\0';
    pthread_mutex_lock(&m->lock);
    append_family(&t, "clattn_requests_total", "counter",
                  "Requests answered, by route and HTTP status.");
    for (size_t i = 0; i <= MAX_ROUTES; i++) {
        const route_counts *r = m->routes[i];
        for (size_t s = 0; r && s < MAX_STATUS; s++) {
            if (!r->by_status[s])
                continue;
            append(&t, "clattn_requests_total{route=\"");
            append_label_value(&t, r->name);
            append(&t, "\",status=\"%zu\"} %llu\n", s, (unsigned long long)r->by_status[s]);
        }
    }
    append_histogram(&t, "clattn_request_duration_seconds",
                     "Time from a request's arrival to its response.", &m->duration);
    append_histogram(&t, "clattn_request_queue_seconds",
                     "Time a successful request's texts waited for their first batch.", &m->queue);
    append_histogram(&t, "clattn_request_inference_seconds",
                     "Time a successful request spent in the batches that ran its texts.",
                     &m->inference);
    append_family(&t, "clattn_texts_total", "counter", "Texts embedded for successful requests.");
    append(&t, "clattn_texts_total %llu\n", (unsigned long long)m->texts);
    append_family(&t, "clattn_tokens_total", "counter",
                  "Real tokens (the template's special tokens included) of the texts embedded.");
    append(&t, "clattn_tokens_total %llu\n", (unsigned long long)m->tokens);
    append_histogram(&t, "clattn_batch_texts", "Texts per batch run on the device.",
                     &m->batch_texts);
    append_histogram(&t, "clattn_batch_tokens",
                     "Tokens per batch run on the device.",
                     &m->batch_tokens);
    if (slots) {
        append_family(&t, "clattn_generations_total", "counter", "Generations ended.");
        append(&t, "clattn_generations_total %llu\n", (unsigned long long)m->generations);
        append_family(&t, "clattn_prompt_tokens_total", "counter",
                      "Prompt tokens of the generations ended.");
        append(&t, "clattn_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
        append_family(&t, "clattn_prompt_tokens_cached_total", "counter",
                      "Of those prompt tokens, the ones a slot's cache held already.");
        append(&t, "clattn_prompt_tokens_cached_total %llu\n",
               (unsigned long long)m->cached_tokens);
        append_family(&t, "clattn_prompt_chunks_total", "counter",
                      "Prompt chunks run (at most --prompt-chunk tokens each).");
        append(&t, "clattn_prompt_chunks_total %llu\n", (unsigned long long)m->prompt_chunks);
        append_family(&t, "clattn_generation_tokens_total", "counter", "Tokens generated.");
        append(&t, "clattn_generation_tokens_total %llu\n",
               (unsigned long long)m->generated_tokens);
        append_histogram(&t, "clattn_time_to_first_token_seconds",
                         "Time from a generation's submission to its first token.",
                         &m->first_token);
        append_histogram(&t, "clattn_inter_token_latency_seconds",
                         "Time between a generation's consecutive tokens.", &m->inter_token);
    }
    pthread_mutex_unlock(&m->lock);
    if (slots) {
        append_family(&t, "clattn_slots", "gauge", "Slots (--parallel).");
        append(&t, "clattn_slots %zu\n", slots->slots);
        append_family(&t, "clattn_slots_busy", "gauge", "Slots generating now.");
        append(&t, "clattn_slots_busy %zu\n", slots->busy);
        append_family(&t, "clattn_kv_cache_tokens", "gauge",
                      "Tokens the slots' key/value caches hold now (kept for prefix reuse).");
        append(&t, "clattn_kv_cache_tokens %zu\n", slots->cached_tokens);
        append_family(&t, "clattn_kv_cache_capacity_tokens", "gauge",
                      "Tokens the key/value cache can hold (slots times --ctx-size).");
        append(&t, "clattn_kv_cache_capacity_tokens %zu\n", slots->capacity_tokens);
    }
    append_family(&t, "clattn_queue_depth", "gauge", "Jobs waiting for or running in a batch now.");
    append(&t, "clattn_queue_depth %zu\n", pending);
    if (t.failed) {
        free(t.data);
        return NULL;
    }
    return t.data;
}
