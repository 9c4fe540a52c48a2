/*
 * The generation engine of llm_scheduler.h.
 *
 * Ownership. A generation (serve_gen) is shared by the HTTP side and the scheduler, counted by
 * references: the caller's, and the scheduler's from submission until it ends. Its output (the
 * events, the text, the end) lives under its own mutex; the scheduler's fields (the sampler,
 * the slot, the prompt position) are the thread's alone. The queue, the slots' assignment and
 * the counts live under the scheduler's mutex; the model and its cache are the thread's alone.
 */
#include "llm_scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum gen_phase { PHASE_WAITING, PHASE_PROMPT, PHASE_DECODE, PHASE_DONE };

struct serve_gen {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int refs;
    /* What to run (set at creation, read-only after). */
    int32_t *prompt;
    size_t n;
    clattn_llm_generate_options options;
    char **stop;
    bool logprobs;
    size_t top;
    double deadline_ms;
    void (*notify)(void *arg);
    void *notify_arg;
    void (*free_arg)(void *arg);
    atomic_bool cancel;
    /* The output (under lock). */
    serve_gen_event *events;
    size_t count, capacity;
    char *text;
    size_t text_length, text_capacity;
    serve_gen_end end;
    serve_gen_summary summary;
    /* The scheduler's (its thread, and the queue under the scheduler's lock). */
    struct serve_gen *next;
    enum gen_phase phase;
    clattn_llm_generator *sampler;
    size_t slot;
    size_t ran;        /* prompt ids the sequence holds */
    bool cut;          /* the sequence cut back to the common prefix */
    int32_t next_id;   /* the token the next decode step runs */
    double submitted_ms, last_event_ms;
    unsigned long long admitted; /* admission order */
};

typedef struct slot {
    size_t seq;
    int32_t *held;     /* the ids its sequence holds [held_count] */
    size_t held_count;
    serve_gen *gen;    /* NULL: free */
    unsigned long long used; /* when it was last taken */
} slot;

struct serve_llm {
    clattn_llm *llm;
    const clattn_llm_text *text;
    clattn_llm_cache *cache;
    size_t vocab;
    serve_llm_config config;

    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_t thread;
    bool thread_running;
    serve_gen *head, *tail; /* waiting for a slot, oldest first */
    size_t waiting, busy, cached_tokens;
    bool stopping, drained;
    double drain_until_ms;
    unsigned long long clock, admissions;

    slot *slots;
    float *logits;     /* [slots, vocab] */
    size_t *seqs;
    int32_t *ids;
    serve_gen **batch;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- generations ---- */

serve_gen *serve_gen_create(const int32_t *prompt, size_t n,
                            const clattn_llm_generate_options *options, bool logprobs,
                            size_t top_logprobs, double deadline_ms)
{
    serve_gen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->changed, NULL);
    g->refs = 1;
    g->n = n;
    g->options = *options;
    g->logprobs = logprobs;
    g->top = top_logprobs > SERVE_MAX_TOP_LOGPROBS ? SERVE_MAX_TOP_LOGPROBS : top_logprobs;
    g->deadline_ms = deadline_ms;
    atomic_init(&g->cancel, false);
    g->prompt = malloc((n ? n : 1) * sizeof(int32_t));
    g->stop = calloc(options->stop_count ? options->stop_count : 1, sizeof(char *));
    bool ok = g->prompt && g->stop;
    for (size_t i = 0; ok && i < options->stop_count; i++)
        ok = (g->stop[i] = strdup(options->stop[i])) != NULL;
    if (!ok) {
        g->options.stop_count = options->stop_count;
        serve_gen_release(g);
        return NULL;
    }
    if (n)
        memcpy(g->prompt, prompt, n * sizeof(int32_t));
    g->options.stop = (const char *const *)g->stop;
    g->summary.prompt_tokens = n;
    return g;
}

void serve_gen_release(serve_gen *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    int left = --g->refs;
    pthread_mutex_unlock(&g->lock);
    if (left > 0)
        return;
    for (size_t i = 0; g->stop && i < g->options.stop_count; i++)
        free(g->stop[i]);
    free(g->stop);
    free(g->prompt);
    free(g->events);
    free(g->text);
    clattn_llm_generator_destroy(&g->sampler);
    if (g->free_arg)
        g->free_arg(g->notify_arg);
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void serve_gen_set_notify(serve_gen *g, void (*notify)(void *arg), void *arg,
                          void (*free_arg)(void *arg))
{
    g->notify = notify;
    g->notify_arg = arg;
    g->free_arg = free_arg;
}

void serve_gen_cancel(serve_gen *g)
{
    atomic_store(&g->cancel, true);
}

size_t serve_gen_read(serve_gen *g, size_t from, serve_gen_event *out, size_t max,
                      serve_gen_end *end)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->count > from ? g->count - from : 0;
    if (n > max)
        n = max;
    if (n)
        memcpy(out, g->events + from, n * sizeof(*out));
    /* The end only once every event is read, so that a reader never misses the last ones. */
    *end = from + n == g->count ? g->end : SERVE_GEN_RUNNING;
    pthread_mutex_unlock(&g->lock);
    return n;
}

bool serve_gen_wait(serve_gen *g, size_t from, double timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout_ms * 1e6);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    while (g->count <= from && g->end == SERVE_GEN_RUNNING && rc == 0)
        rc = pthread_cond_timedwait(&g->changed, &g->lock, &until);
    bool ready = g->count > from || g->end != SERVE_GEN_RUNNING;
    pthread_mutex_unlock(&g->lock);
    return ready;
}

void serve_gen_text(serve_gen *g, size_t start, size_t length, char *out)
{
    pthread_mutex_lock(&g->lock);
    if (length)
        memcpy(out, g->text + start, length);
    out[length] = '\0';
    pthread_mutex_unlock(&g->lock);
}

void serve_gen_summary_of(serve_gen *g, serve_gen_summary *out)
{
    pthread_mutex_lock(&g->lock);
    *out = g->summary;
    pthread_mutex_unlock(&g->lock);
}

/* Appends an event (token, or -1 for text alone) and its text; returns false when out of
 * memory. */
static bool add_event(serve_gen *g, const serve_gen_event *e, const char *piece, size_t length)
{
    bool ok = true;
    pthread_mutex_lock(&g->lock);
    if (g->count == g->capacity) {
        size_t want = g->capacity ? 2 * g->capacity : 64;
        serve_gen_event *p = realloc(g->events, want * sizeof(*p));
        ok = p != NULL;
        if (ok) {
            g->events = p;
            g->capacity = want;
        }
    }
    if (ok && g->text_length + length + 1 > g->text_capacity) {
        size_t want = g->text_capacity ? g->text_capacity : 1024;
        while (want < g->text_length + length + 1)
            want *= 2;
        char *p = realloc(g->text, want);
        ok = p != NULL;
        if (ok) {
            g->text = p;
            g->text_capacity = want;
        }
    }
    if (ok) {
        serve_gen_event *added = &g->events[g->count++];
        *added = *e;
        added->text_start = g->text_length;
        added->text_length = length;
        if (length)
            memcpy(g->text + g->text_length, piece, length);
        g->text_length += length;
        g->text[g->text_length] = '\0';
        pthread_cond_broadcast(&g->changed);
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

static void notify(serve_gen *g)
{
    if (g->notify)
        g->notify(g->notify_arg);
}

/* ---- the scheduler's steps (its thread) ---- */

/* The log-softmax of the logits at `token`, and the `top` most likely ids (ties: the lower id
 * first), in double precision. */
static void logprobs_of(const float *logits, size_t vocab, int32_t token, size_t top,
                        serve_gen_event *e)
{
    double m = -INFINITY;
    for (size_t i = 0; i < vocab; i++)
        if (logits[i] > m)
            m = logits[i];
    double sum = 0;
    for (size_t i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - m);
    double lse = m + log(sum);
    e->logprob = token >= 0 ? (double)logits[token] - lse : 0;
    size_t k = 0;
    for (size_t i = 0; i < vocab && top; i++) {
        double v = logits[i];
        if (k == top && !(v > e->top_logprobs[k - 1]))
            continue;
        size_t at = k < top ? k++ : top - 1;
        while (at > 0 && v > e->top_logprobs[at - 1]) {
            e->top_logprobs[at] = e->top_logprobs[at - 1];
            e->top_ids[at] = e->top_ids[at - 1];
            at--;
        }
        e->top_logprobs[at] = v;
        e->top_ids[at] = (int32_t)i;
    }
    for (size_t i = 0; i < k; i++)
        e->top_logprobs[i] -= lse;
    e->top_count = k;
}

/* Ends a running or waiting generation: its summary, its slot freed (keeping what the slot
 * holds), the scheduler's reference dropped. */
static void finish(serve_llm *s, serve_gen *g, serve_gen_end end, const char *error)
{
    size_t completion = 0;
    if (g->sampler)
        clattn_llm_generator_tokens(g->sampler, &completion);
    pthread_mutex_lock(&g->lock);
    g->end = end;
    g->summary.completion_tokens = completion;
    if (error)
        snprintf(g->summary.error, sizeof(g->summary.error), "%s", error);
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
    bool admitted = g->phase == PHASE_PROMPT || g->phase == PHASE_DECODE;
    if (s->config.metrics && admitted) /* those that never had a slot ran nothing */
        serve_metrics_generation(s->config.metrics, g->summary.prompt_tokens,
                                 g->summary.cached_tokens, completion);
    if (admitted) {
        pthread_mutex_lock(&s->lock);
        s->slots[g->slot].gen = NULL;
        s->busy--;
        pthread_mutex_unlock(&s->lock);
    }
    g->phase = PHASE_DONE;
    notify(g);
    serve_gen_release(g);
}

/* The text held at the end, as a text-only event. */
static bool flush_text(serve_gen *g)
{
    const char *piece = NULL;
    size_t length = 0;
    if (clattn_llm_generator_flush(g->sampler, &piece, &length) != CLATTN_OK)
        return false;
    serve_gen_event e = {.token = -1};
    return length == 0 || add_event(g, &e, piece, length);
}

/* One token of g from its logits: sampled, its event added, the end decided. */
static void step(serve_llm *s, serve_gen *g, const float *logits)
{
    int32_t token = -1;
    const char *piece = NULL;
    size_t length = 0;
    int end = 0;
    if (clattn_llm_generator_next(g->sampler, logits, &token, &piece, &length, &end) !=
        CLATTN_OK) {
        finish(s, g, SERVE_GEN_FAILED, clattn_last_error(NULL));
        return;
    }
    double t = now_ms();
    if (end != CLATTN_LLM_FINISH_EOG) {
        serve_gen_event e = {.token = token};
        if (g->logprobs)
            logprobs_of(logits, s->vocab, token, g->top, &e);
        if (!add_event(g, &e, piece, length)) {
            finish(s, g, SERVE_GEN_FAILED, "out of memory for the generated text");
            return;
        }
        if (s->config.metrics) {
            if (g->last_event_ms > 0)
                serve_metrics_inter_token(s->config.metrics, t - g->last_event_ms);
            else
                serve_metrics_first_token(s->config.metrics, t - g->submitted_ms);
        }
        if (g->last_event_ms == 0) {
            pthread_mutex_lock(&g->lock);
            g->summary.first_token_ms = t - g->submitted_ms;
            pthread_mutex_unlock(&g->lock);
        }
        g->last_event_ms = t;
    }
    if (end) {
        if (!flush_text(g)) {
            finish(s, g, SERVE_GEN_FAILED, "out of memory for the generated text");
            return;
        }
        finish(s, g, end == CLATTN_LLM_FINISH_LENGTH ? SERVE_GEN_LENGTH : SERVE_GEN_STOP, NULL);
        return;
    }
    notify(g);
    g->next_id = token;
    g->phase = PHASE_DECODE;
}

/* The longest common prefix of a slot's ids and the prompt, at most the prompt less one. */
static size_t common_prefix(const slot *sl, const serve_gen *g)
{
    size_t n = sl->held_count < g->n - 1 ? sl->held_count : g->n - 1, i = 0;
    while (i < n && sl->held[i] == g->prompt[i])
        i++;
    return i;
}

/* Takes waiting generations into free slots (under the lock): the slot whose ids share the
 * longest prefix with the prompt (with reuse), the least recently used among equals. */
static void admit(serve_llm *s)
{
    while (s->head && s->busy < s->config.slots) {
        serve_gen *g = s->head;
        s->head = g->next;
        if (!s->head)
            s->tail = NULL;
        s->waiting--;
        size_t best = s->config.slots, best_common = 0;
        for (size_t i = 0; i < s->config.slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->gen)
                continue;
            size_t common = s->config.prefix_reuse ? common_prefix(sl, g) : 0;
            if (best == s->config.slots || common > best_common ||
                (common == best_common && sl->used < s->slots[best].used)) {
                best = i;
                best_common = common;
            }
        }
        slot *sl = &s->slots[best];
        sl->gen = g;
        sl->used = ++s->clock;
        s->cached_tokens -= sl->held_count - best_common;
        sl->held_count = best_common;
        s->busy++;
        g->slot = best;
        g->ran = best_common;
        g->phase = PHASE_PROMPT;
        g->admitted = ++s->admissions;
        pthread_mutex_lock(&g->lock);
        g->summary.cached_tokens = best_common;
        g->summary.queue_ms = now_ms() - g->submitted_ms;
        pthread_mutex_unlock(&g->lock);
    }
}

/* Ends the generations whose client went away or whose deadline passed. */
static void retire_cancelled(serve_llm *s)
{
    double t = now_ms();
    for (size_t i = 0; i < s->config.slots; i++) {
        serve_gen *g = s->slots[i].gen;
        if (!g)
            continue;
        if (atomic_load(&g->cancel))
            finish(s, g, SERVE_GEN_CANCELLED, NULL);
        else if (g->deadline_ms > 0 && t >= g->deadline_ms)
            finish(s, g, SERVE_GEN_TIMED_OUT, NULL);
    }
}

/* The oldest generation still in its prompt runs one chunk of it. */
static void prompt_chunk(serve_llm *s)
{
    serve_gen *g = NULL;
    for (size_t i = 0; i < s->config.slots; i++) {
        serve_gen *c = s->slots[i].gen;
        if (c && c->phase == PHASE_PROMPT && (!g || c->admitted < g->admitted))
            g = c;
    }
    if (!g)
        return;
    slot *sl = &s->slots[g->slot];
    if (!g->sampler &&
        clattn_llm_generator_create(s->text, s->vocab, &g->options, g->prompt, g->n, 0,
                                    &g->sampler) != CLATTN_OK) {
        finish(s, g, SERVE_GEN_FAILED, clattn_last_error(NULL));
        return;
    }
    clattn_status st = CLATTN_OK;
    if (!g->cut) { /* cut back to the common prefix (admit), once */
        st = clattn_llm_sequence_truncate(s->cache, sl->seq, g->ran);
        g->cut = true;
    }
    size_t k = g->n - g->ran;
    if (k > s->config.prompt_chunk)
        k = s->config.prompt_chunk;
    bool last = g->ran + k == g->n;
    if (st == CLATTN_OK)
        st = clattn_llm_prompt(s->cache, sl->seq, g->prompt + g->ran, k,
                               last ? s->logits : NULL);
    if (st != CLATTN_OK) {
        /* What the sequence holds is no longer known: the slot keeps nothing. */
        pthread_mutex_lock(&s->lock);
        s->cached_tokens -= sl->held_count;
        sl->held_count = 0;
        pthread_mutex_unlock(&s->lock);
        clattn_llm_sequence_truncate(s->cache, sl->seq, 0);
        finish(s, g, SERVE_GEN_FAILED, clattn_last_error(NULL));
        return;
    }
    serve_metrics_prompt_chunk(s->config.metrics);
    pthread_mutex_lock(&s->lock);
    memcpy(sl->held + sl->held_count, g->prompt + g->ran, k * sizeof(int32_t));
    sl->held_count += k;
    s->cached_tokens += k;
    pthread_mutex_unlock(&s->lock);
    g->ran += k;
    if (last)
        step(s, g, s->logits);
}

/* Every generation past its prompt runs its next token, all in one decode step. */
static void decode_step(serve_llm *s)
{
    size_t count = 0;
    for (size_t i = 0; i < s->config.slots; i++) {
        serve_gen *g = s->slots[i].gen;
        if (!g || g->phase != PHASE_DECODE)
            continue;
        slot *sl = &s->slots[i];
        if (sl->held_count >= s->config.ctx_size) { /* checked at submission: a guard */
            if (flush_text(g))
                finish(s, g, SERVE_GEN_LENGTH, NULL);
            else
                finish(s, g, SERVE_GEN_FAILED, "out of memory for the generated text");
            continue;
        }
        s->batch[count] = g;
        s->seqs[count] = sl->seq;
        s->ids[count] = g->next_id;
        count++;
    }
    if (!count)
        return;
    if (clattn_llm_decode(s->cache, s->seqs, s->ids, count, s->logits) != CLATTN_OK) {
        char error[512];
        snprintf(error, sizeof(error), "%s", clattn_last_error(NULL));
        for (size_t b = 0; b < count; b++) {
            slot *sl = &s->slots[s->batch[b]->slot];
            pthread_mutex_lock(&s->lock);
            s->cached_tokens -= sl->held_count;
            sl->held_count = 0;
            pthread_mutex_unlock(&s->lock);
            clattn_llm_sequence_truncate(s->cache, sl->seq, 0);
            finish(s, s->batch[b], SERVE_GEN_FAILED, error);
        }
        return;
    }
    pthread_mutex_lock(&s->lock);
    for (size_t b = 0; b < count; b++) {
        slot *sl = &s->slots[s->batch[b]->slot];
        sl->held[sl->held_count++] = s->ids[b];
        s->cached_tokens++;
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t b = 0; b < count; b++)
        step(s, s->batch[b], s->logits + b * s->vocab);
}

/* Ends every generation, waiting or running, STOPPED (the drain's time is up). */
static void stop_all(serve_llm *s)
{
    pthread_mutex_lock(&s->lock);
    serve_gen *g = s->head;
    s->head = s->tail = NULL;
    s->waiting = 0;
    pthread_mutex_unlock(&s->lock);
    while (g) {
        serve_gen *next = g->next;
        finish(s, g, SERVE_GEN_STOPPED, NULL);
        g = next;
    }
    for (size_t i = 0; i < s->config.slots; i++)
        if (s->slots[i].gen)
            finish(s, s->slots[i].gen, SERVE_GEN_STOPPED, NULL);
}

/* Waiting generations already cancelled or past their deadline end without a slot. */
static void drop_cancelled_waiting(serve_llm *s)
{
    double t = now_ms();
    serve_gen *dropped = NULL, **at = &s->head;
    s->tail = NULL;
    while (*at) {
        serve_gen *g = *at;
        if (atomic_load(&g->cancel) || (g->deadline_ms > 0 && t >= g->deadline_ms)) {
            *at = g->next;
            s->waiting--;
            g->next = dropped;
            dropped = g;
        } else {
            s->tail = g;
            at = &g->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
    while (dropped) {
        serve_gen *next = dropped->next;
        finish(s, dropped,
               atomic_load(&dropped->cancel) ? SERVE_GEN_CANCELLED : SERVE_GEN_TIMED_OUT, NULL);
        dropped = next;
    }
    pthread_mutex_lock(&s->lock);
}

static void *thread_main(void *arg)
{
    serve_llm *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stopping && !s->head && s->busy == 0)
            pthread_cond_wait(&s->work, &s->lock);
        if (s->stopping && (now_ms() >= s->drain_until_ms || (!s->head && s->busy == 0)))
            break;
        drop_cancelled_waiting(s);
        admit(s);
        pthread_mutex_unlock(&s->lock);
        retire_cancelled(s);
        prompt_chunk(s);
        decode_step(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    stop_all(s);
    return NULL;
}

/* ---- the scheduler ---- */

int serve_llm_submit(serve_llm *s, serve_gen *g)
{
    pthread_mutex_lock(&s->lock);
    int rc = s->stopping ? 2 : s->waiting >= s->config.max_waiting ? 1 : 0;
    if (rc == 0) {
        pthread_mutex_lock(&g->lock);
        g->refs++;
        pthread_mutex_unlock(&g->lock);
        g->submitted_ms = now_ms();
        g->phase = PHASE_WAITING;
        g->next = NULL;
        if (s->tail)
            s->tail->next = g;
        else
            s->head = g;
        s->tail = g;
        s->waiting++;
        pthread_cond_signal(&s->work);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void serve_llm_load(serve_llm *s, size_t *waiting, size_t *running, size_t *cached_tokens)
{
    pthread_mutex_lock(&s->lock);
    *waiting = s->waiting;
    *running = s->busy;
    *cached_tokens = s->cached_tokens;
    pthread_mutex_unlock(&s->lock);
}

static void destroy(serve_llm *s)
{
    for (size_t i = 0; s->slots && i < s->config.slots; i++)
        free(s->slots[i].held);
    free(s->slots);
    free(s->logits);
    free(s->seqs);
    free(s->ids);
    free(s->batch);
    clattn_llm_cache_destroy(&s->cache);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int serve_llm_start(serve_llm **out, clattn_llm *llm, const clattn_llm_text *text,
                    const serve_llm_config *config, char *error, size_t error_size)
{
    *out = NULL;
    clattn_llm_info info;
    if (clattn_llm_get_info(llm, &info) != CLATTN_OK) {
        snprintf(error, error_size, "%s", clattn_last_error(NULL));
        return -1;
    }
    serve_llm *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    s->llm = llm;
    s->text = text;
    s->vocab = info.vocab_size;
    s->config = *config;
    size_t n = config->slots;
    s->slots = calloc(n, sizeof(slot));
    s->logits = malloc(n * s->vocab * sizeof(float));
    s->seqs = malloc(n * sizeof(size_t));
    s->ids = malloc(n * sizeof(int32_t));
    s->batch = malloc(n * sizeof(serve_gen *));
    bool ok = s->slots && s->logits && s->seqs && s->ids && s->batch;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s->slots[i].held = malloc(config->ctx_size * sizeof(int32_t))) != NULL;
    if (!ok) {
        snprintf(error, error_size, "out of memory for %zu slots", n);
        destroy(s);
        return -1;
    }
    if (clattn_llm_cache_create(llm, n, config->ctx_size, CLATTN_LLM_CACHE_FLOAT, &s->cache) !=
        CLATTN_OK) {
        snprintf(error, error_size, "the key/value cache of %zu slots of %zu tokens: %s", n,
                 config->ctx_size, clattn_last_error(NULL));
        destroy(s);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (clattn_llm_sequence_add(s->cache, &s->slots[i].seq) != CLATTN_OK) {
            snprintf(error, error_size, "%s", clattn_last_error(NULL));
            destroy(s);
            return -1;
        }
    }
    int rc = pthread_create(&s->thread, NULL, thread_main, s);
    if (rc != 0) {
        snprintf(error, error_size, "cannot start the thread: %s", strerror(rc));
        destroy(s);
        return -1;
    }
    s->thread_running = true;
    *out = s;
    return 0;
}

void serve_llm_drain(serve_llm *s, double drain_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    bool join = s->thread_running && !s->drained;
    s->stopping = true;
    s->drained = true;
    s->drain_until_ms = now_ms() + drain_ms;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    if (join)
        pthread_join(s->thread, NULL);
}

void serve_llm_stop(serve_llm **sp)
{
    serve_llm *s = *sp;
    if (!s)
        return;
    serve_llm_drain(s, 0);
    destroy(s);
    *sp = NULL;
}
