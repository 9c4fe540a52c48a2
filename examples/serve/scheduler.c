/*
 * The batching engine of scheduler.h.
 *
 * Ownership. Each submitted job gets a ticket (heap) that the caller and the scheduler share,
 * every field under the scheduler's one mutex. The scheduler reads the caller's memory (ids,
 * lengths) and writes it (out, error) only under that mutex and only while the ticket is still
 * attached (ticket->job != NULL): the caller detaches it, under the mutex, before it returns
 * early (deadline), so nothing of a caller that has gone is ever touched. A batch's ids are
 * copied into the scheduler's own buffer when the batch is formed, so the library never reads
 * caller memory outside the mutex, and its rows land in the scheduler's buffer before they are
 * copied out. The ticket itself is freed by whichever side is last: the caller when the
 * scheduler is done with it (neither queued nor running), else the scheduler when its batch
 * ends.
 *
 * Batching. The thread sleeps on a condition variable while the queue is empty (no polling). It
 * forms a batch from the queue in arrival order: the oldest job's normalisation decides the
 * batch's (jobs that normalise otherwise wait for a later batch, still in their place, so the
 * oldest job always runs next); texts are taken in order until the next one would bring the
 * batch's tokens past max_batch_tokens or the batch would hold more than max_batch_requests
 * jobs; a job whose texts do not all fit stays at the head with the rest. The batch is one
 * clattn_sentence_model_embed_ids call, which sorts its texts by length and cuts them into
 * library batches where the modelled cost is least (at most 32 texts and max_batch_tokens padded
 * tokens each), as `embed` does: short and long texts from many requests are not padded
 * together. Batch invariance makes every
 * row the bytes clattn_sentence_model_embed gives the text alone.
 */
#include "scheduler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ticket {
    serve_job *job;              /* the caller's job; NULL once the caller has gone */
    struct ticket *prev, *next;  /* in the queue while `queued` */
    bool queued;                 /* some texts not yet taken into a batch */
    bool running;                /* some texts in the batch that is running */
    bool counted;                /* counted in pending (from enqueueing until neither of the
                                  * two above) */
    bool finished;               /* `result` is final: the caller may return */
    serve_result result;
    int normalize;               /* 0 or 1: the job's, the model's resolved */
    size_t taken;                /* texts taken into batches so far */
    size_t done;                 /* texts whose rows are in job->out */
    double deadline_ms;          /* 0: none */
    double enqueued_ms, first_batch_ms; /* first_batch_ms < 0 until a batch takes a text */
    double inference_ms;
    pthread_cond_t wake;         /* signalled when finished */
} ticket;

/* Where a batch's texts come from: `count` texts of `t` from its text `first`, at the batch's
 * text `row`. */
typedef struct segment {
    ticket *t;
    size_t first, count, row;
} segment;

struct serve_scheduler {
    serve_engine engine;
    serve_scheduler_config config;

    pthread_mutex_t lock;
    pthread_condattr_t monotonic; /* for the tickets' conditions: deadlines are CLOCK_MONOTONIC */
    pthread_cond_t work;          /* the thread's: a job arrived, or stop */
    pthread_cond_t idle;          /* stop's: the last caller left submit */
    pthread_t thread;
    bool thread_running;
    ticket *head, *tail;          /* the queue, oldest first */
    size_t pending;               /* tickets counted */
    size_t callers;               /* threads inside serve_scheduler_submit */
    bool stopping;
    double drain_until_ms;

    /* The batch being formed or run (the thread's alone; filled under the mutex). */
    segment *segments;            /* [max_batch_requests] */
    size_t n_segments;
    int32_t *ids;                 /* all texts' ids, one after another */
    int32_t *type_ids;            /* their token types, the same layout */
    size_t ids_capacity;
    size_t *offsets, *lengths;    /* text i: ids[offsets[i] .. + lengths[i]) */
    const int32_t **rows_ids;     /* text i's ids, for the library */
    const int32_t **rows_types;   /* text i's token types */
    size_t texts_capacity;
    float *rows;                  /* the library's output, [texts, hidden] */
    size_t rows_capacity;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static struct timespec timespec_of_ms(double ms)
{
    time_t seconds = (time_t)(ms / 1000.0); /* ms > 0: truncation is the floor */
    struct timespec ts = {.tv_sec = seconds,
                          .tv_nsec = (long)((ms - (double)seconds * 1000.0) * 1e6)};
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    if (ts.tv_nsec < 0)
        ts.tv_nsec = 0;
    return ts;
}

/* ---- the queue (all under the mutex) ---- */

static void enqueue(serve_scheduler *s, ticket *t)
{
    t->prev = s->tail, t->next = NULL;
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    t->queued = true;
}

static void unlink_ticket(serve_scheduler *s, ticket *t)
{
    if (!t->queued)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        s->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        s->tail = t->prev;
    t->prev = t->next = NULL;
    t->queued = false;
}

static void free_ticket(ticket *t)
{
    pthread_cond_destroy(&t->wake);
    free(t);
}

/* Once the scheduler is done with t (neither queued nor running): it leaves `pending`, and is
 * freed here when its caller has gone (else the caller frees it). */
static void release_if_done(serve_scheduler *s, ticket *t)
{
    if (t->queued || t->running)
        return;
    if (t->counted) {
        t->counted = false;
        s->pending--;
    }
    if (!t->job)
        free_ticket(t);
}

/* Gives t its result and wakes its caller; it leaves the queue. */
static void finish(serve_scheduler *s, ticket *t, serve_result result)
{
    unlink_ticket(s, t);
    t->result = result;
    t->finished = true;
    pthread_cond_signal(&t->wake);
}

/* ---- forming a batch (the thread, under the mutex) ---- */

/* Room for `texts` texts and `tokens` ids in the batch buffers; false when out of memory. */
static bool reserve(serve_scheduler *s, size_t texts, size_t tokens)
{
    if (tokens > s->ids_capacity) {
        size_t capacity = s->ids_capacity * 2 > tokens ? s->ids_capacity * 2 : tokens;
        int32_t *ids = realloc(s->ids, capacity * sizeof(int32_t));
        if (ids)
            s->ids = ids;
        int32_t *type_ids = realloc(s->type_ids, capacity * sizeof(int32_t));
        if (type_ids)
            s->type_ids = type_ids;
        if (!ids || !type_ids)
            return false;
        s->ids_capacity = capacity;
    }
    if (texts > s->texts_capacity) {
        size_t capacity = s->texts_capacity * 2 > texts ? s->texts_capacity * 2 : texts;
        size_t *offsets = realloc(s->offsets, capacity * sizeof(size_t));
        if (offsets)
            s->offsets = offsets;
        size_t *lengths = realloc(s->lengths, capacity * sizeof(size_t));
        if (lengths)
            s->lengths = lengths;
        const int32_t **rows_ids = realloc((void *)s->rows_ids, capacity * sizeof(*rows_ids));
        if (rows_ids)
            s->rows_ids = rows_ids;
        const int32_t **rows_types =
            realloc((void *)s->rows_types, capacity * sizeof(*rows_types));
        if (rows_types)
            s->rows_types = rows_types;
        if (!offsets || !lengths || !rows_ids || !rows_types)
            return false;
        s->texts_capacity = capacity;
    }
    return true;
}

typedef struct batch_shape {
    size_t texts, tokens;
    int normalize;
} batch_shape;

/* Takes texts of t into the batch while they fit; true when the batch is full (stop forming). */
static bool take_texts(serve_scheduler *s, ticket *t, batch_shape *b, double now)
{
    const serve_job *job = t->job;
    size_t first = t->taken;
    bool full = false;
    while (t->taken < job->count) {
        size_t length = job->lengths[t->taken];
        if (b->texts > 0 && b->tokens + length > s->config.max_batch_tokens) {
            full = true;
            break;
        }
        if (!reserve(s, b->texts + 1, b->tokens + length)) {
            full = true; /* run what is there; the rest waits (or fails below when nothing) */
            break;
        }
        memcpy(s->ids + b->tokens, job->ids[t->taken], length * sizeof(int32_t));
        if (job->type_ids)
            memcpy(s->type_ids + b->tokens, job->type_ids[t->taken], length * sizeof(int32_t));
        else
            memset(s->type_ids + b->tokens, 0, length * sizeof(int32_t));
        s->offsets[b->texts] = b->tokens;
        s->lengths[b->texts] = length;
        b->tokens += length;
        b->texts++;
        t->taken++;
    }
    if (t->taken > first) {
        s->segments[s->n_segments++] =
            (segment){.t = t, .first = first, .count = t->taken - first,
                      .row = b->texts - (t->taken - first)};
        t->running = true;
        if (t->first_batch_ms < 0)
            t->first_batch_ms = now;
        b->normalize = t->normalize;
        if (t->taken == job->count)
            unlink_ticket(s, t);
    }
    return full;
}

/* Forms the next batch from the queue (see the top of this file); withdraws the queued jobs whose
 * deadline has passed before any of their texts ran. */
static batch_shape form_batch(serve_scheduler *s)
{
    batch_shape b = {.normalize = -1};
    s->n_segments = 0;
    double now = now_ms();
    for (ticket *t = s->head, *next; t; t = next) {
        next = t->next;
        if (t->taken == 0 && t->deadline_ms > 0 && now >= t->deadline_ms) {
            finish(s, t, SERVE_TIMED_OUT);
            release_if_done(s, t);
            continue;
        }
        if (b.normalize >= 0 && t->normalize != b.normalize)
            continue;
        if (s->n_segments == s->config.max_batch_requests)
            break;
        if (take_texts(s, t, &b, now))
            break;
    }
    if (b.texts == 0 && s->head) {
        /* The queue's oldest job (every expired one before it is gone) could not get even one
         * text into the batch's buffers: out of memory. It fails rather than retry forever. */
        snprintf(s->head->job->error, sizeof(s->head->job->error),
                 "out of host memory forming a batch");
        ticket *t = s->head;
        finish(s, t, SERVE_FAILED);
        release_if_done(s, t);
    }
    return b;
}

/* ---- running it ---- */

/* Hands each job of the batch its rows (or the failure) under the mutex. */
static void deliver(serve_scheduler *s, clattn_status status, const char *message, double ms)
{
    size_t d = s->engine.width;
    for (size_t i = 0; i < s->n_segments; i++) {
        const segment *g = &s->segments[i];
        ticket *t = g->t;
        t->running = false;
        if (t->job && status == CLATTN_OK) {
            memcpy(t->job->out + g->first * d, s->rows + g->row * d, g->count * d * sizeof(float));
            t->done += g->count;
            t->inference_ms += ms;
            if (t->done == t->job->count)
                finish(s, t, SERVE_DONE);
        } else if (t->job) {
            snprintf(t->job->error, sizeof(t->job->error), "%s", message);
            finish(s, t, SERVE_FAILED);
        }
        release_if_done(s, t);
    }
    s->n_segments = 0;
}

static void run_batch(serve_scheduler *s, const batch_shape *b)
{
    size_t d = s->engine.width;
    clattn_status status = CLATTN_OK;
    char message[512] = "";
    if (b->texts * d > s->rows_capacity) {
        float *rows = realloc(s->rows, b->texts * d * sizeof(float));
        if (rows)
            s->rows = rows, s->rows_capacity = b->texts * d;
        else
            status = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < b->texts; i++) {
        s->rows_ids[i] = s->ids + s->offsets[i];
        s->rows_types[i] = s->type_ids + s->offsets[i];
    }
    double start = now_ms();
    if (status == CLATTN_OK) {
        status = s->engine.run(s->engine.model, s->rows_ids, s->rows_types, s->lengths,
                               b->texts, b->normalize, s->config.max_batch_tokens, s->rows);
        if (status != CLATTN_OK)
            snprintf(message, sizeof(message), "%s", clattn_last_error(NULL));
    } else {
        snprintf(message, sizeof(message), "out of host memory for a batch's rows");
    }
    double ms = now_ms() - start;
    serve_metrics_batch(s->config.metrics, b->texts, b->tokens);
    pthread_mutex_lock(&s->lock);
    deliver(s, status, message, ms);
}

/* The thread: sleeps until there is work, runs batches while there is, drains on stop. */
static void *scheduler_main(void *arg)
{
    serve_scheduler *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->work, &s->lock);
        if (!s->head)
            break; /* stopping, nothing left */
        if (s->stopping && now_ms() >= s->drain_until_ms) {
            while (s->head) {
                ticket *t = s->head;
                finish(s, t, SERVE_STOPPED);
                release_if_done(s, t);
            }
            break;
        }
        batch_shape b = form_batch(s);
        if (b.texts == 0)
            continue;
        pthread_mutex_unlock(&s->lock);
        run_batch(s, &b); /* returns with the mutex held */
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- the interface ---- */

int serve_scheduler_start(serve_scheduler **out, const serve_engine *engine,
                          const serve_scheduler_config *config, char *error, size_t error_size)
{
    char dummy[1];
    if (!error || error_size == 0)
        error = dummy, error_size = sizeof(dummy);
    if (!out) {
        snprintf(error, error_size, "serve_scheduler_start: out is NULL");
        return -1;
    }
    *out = NULL;
    if (!engine || !engine->run || engine->width == 0 || engine->max_length == 0 ||
        (engine->normalize != 0 && engine->normalize != 1) || !config ||
        config->max_batch_tokens == 0 || config->max_batch_requests == 0 ||
        config->max_queued_jobs == 0) {
        snprintf(error, error_size, "serve_scheduler_start: %s",
                 !engine || !engine->run ? "the engine or its run function is NULL"
                 : !config               ? "config is NULL"
                 : engine->width == 0 || engine->max_length == 0
                     ? "the engine's width and max_length must be at least 1"
                 : engine->normalize != 0 && engine->normalize != 1
                     ? "the engine's normalize must be 0 or 1"
                     : "max_batch_tokens, max_batch_requests and max_queued_jobs must be at "
                       "least 1");
        return -1;
    }
    serve_scheduler *s = calloc(1, sizeof(*s));
    if (!s || !(s->segments = calloc(config->max_batch_requests, sizeof(segment)))) {
        free(s);
        snprintf(error, error_size, "serve_scheduler_start: out of memory");
        return -1;
    }
    s->engine = *engine;
    s->config = *config;
    int rc = pthread_mutex_init(&s->lock, NULL);
    bool lock = rc == 0, attr = false, work = false, idle = false;
    if (rc == 0 && (rc = pthread_condattr_init(&s->monotonic)) == 0)
        attr = true;
    if (rc == 0)
        rc = pthread_condattr_setclock(&s->monotonic, CLOCK_MONOTONIC);
    if (rc == 0 && (rc = pthread_cond_init(&s->work, NULL)) == 0)
        work = true;
    if (rc == 0 && (rc = pthread_cond_init(&s->idle, NULL)) == 0)
        idle = true;
    if (rc == 0 && (rc = pthread_create(&s->thread, NULL, scheduler_main, s)) == 0)
        s->thread_running = true;
    if (rc != 0) {
        snprintf(error, error_size, "serve_scheduler_start: %s", strerror(rc));
        if (idle)
            pthread_cond_destroy(&s->idle);
        if (work)
            pthread_cond_destroy(&s->work);
        if (attr)
            pthread_condattr_destroy(&s->monotonic);
        if (lock)
            pthread_mutex_destroy(&s->lock);
        free(s->segments), free(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* A job the scheduler cannot run (the caller's bug or a client's ids the server did not check):
 * false with the reason in job->error. Checked before queueing, so that one job's bad ids never
 * fail the batch it would share with others. */
static bool job_is_valid(const serve_scheduler *s, serve_job *job)
{
    const char *why = NULL;
    if (job->count == 0 || !job->ids || !job->lengths || !job->out)
        why = "the job has no texts, or ids, lengths or out is NULL";
    else if (job->normalize < -1 || job->normalize > 1)
        why = "normalize must be -1, 0 or 1";
    for (size_t i = 0; !why && i < job->count; i++) {
        if (!job->ids[i] || job->lengths[i] == 0 || job->lengths[i] > s->engine.max_length ||
            (job->type_ids && !job->type_ids[i])) {
            snprintf(job->error, sizeof(job->error),
                     "text %zu has %zu ids (1 to %zu are accepted)%s", i + 1,
                     job->ids[i] ? job->lengths[i] : 0, s->engine.max_length,
                     job->type_ids && !job->type_ids[i] ? ", or no token types" : "");
            return false;
        }
        for (size_t j = 0; j < job->lengths[i]; j++)
            if (job->ids[i][j] < 0 || (size_t)job->ids[i][j] >= s->engine.vocab_size) {
                snprintf(job->error, sizeof(job->error),
                         "text %zu: id %ld is outside the vocabulary (0 to %zu)", i + 1,
                         (long)job->ids[i][j], s->engine.vocab_size - 1);
                return false;
            }
    }
    if (why)
        snprintf(job->error, sizeof(job->error), "%s", why);
    return !why;
}

serve_result serve_scheduler_submit(serve_scheduler *s, serve_job *job, double deadline_ms)
{
    if (!s || !job)
        return SERVE_FAILED;
    job->queue_ms = job->inference_ms = 0;
    job->error[0] = '\0';
    if (!job_is_valid(s, job))
        return SERVE_FAILED;
    double now = now_ms();
    if (!(deadline_ms > 0) || deadline_ms - now > 1e12)
        deadline_ms = 0; /* none (NaN, negative, or decades away: no timespec overflow) */
    if (deadline_ms > 0 && now >= deadline_ms)
        return SERVE_TIMED_OUT;
    ticket *t = calloc(1, sizeof(*t));
    if (!t || pthread_cond_init(&t->wake, &s->monotonic) != 0) {
        free(t);
        snprintf(job->error, sizeof(job->error), "out of memory queueing the job");
        return SERVE_FAILED;
    }
    t->job = job;
    t->normalize = job->normalize >= 0 ? job->normalize : s->engine.normalize;
    t->deadline_ms = deadline_ms;
    t->first_batch_ms = -1;

    pthread_mutex_lock(&s->lock);
    serve_result result;
    if (s->stopping || s->pending >= s->config.max_queued_jobs) {
        result = s->stopping ? SERVE_STOPPED : SERVE_OVERLOADED;
        pthread_mutex_unlock(&s->lock);
        free_ticket(t);
        return result;
    }
    s->callers++;
    t->enqueued_ms = now_ms();
    t->counted = true;
    s->pending++;
    enqueue(s, t);
    pthread_cond_signal(&s->work);
    struct timespec until = timespec_of_ms(deadline_ms);
    while (!t->finished) {
        int rc = deadline_ms > 0 ? pthread_cond_timedwait(&t->wake, &s->lock, &until)
                                 : pthread_cond_wait(&t->wake, &s->lock);
        if (rc == ETIMEDOUT && !t->finished) {
            /* Withdrawn, or abandoned while a batch runs some of its texts: from now on the
             * scheduler neither reads nor writes this job. */
            t->job = NULL;
            unlink_ticket(s, t);
            t->result = SERVE_TIMED_OUT;
            break;
        }
    }
    result = t->result;
    double end = now_ms();
    job->queue_ms = (t->first_batch_ms >= 0 ? t->first_batch_ms : end) - t->enqueued_ms;
    job->inference_ms = t->inference_ms;
    if (t->job) {
        free_ticket(t); /* finished: the scheduler is done with it */
    } else {
        t->finished = true;
        release_if_done(s, t); /* frees it unless a batch still runs it (then the batch does) */
    }
    if (--s->callers == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return result;
}

size_t serve_scheduler_pending(serve_scheduler *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    size_t pending = s->pending;
    pthread_mutex_unlock(&s->lock);
    return pending;
}

void serve_scheduler_drain(serve_scheduler *s, double drain_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    bool join = s->thread_running;
    if (!s->stopping) {
        s->stopping = true;
        s->drain_until_ms = now_ms() + (drain_ms > 0 ? drain_ms : 0);
        pthread_cond_signal(&s->work);
    }
    s->thread_running = false;
    pthread_mutex_unlock(&s->lock);
    if (join)
        pthread_join(s->thread, NULL);
}

void serve_scheduler_stop(serve_scheduler **ps, double drain_ms)
{
    if (!ps || !*ps)
        return;
    serve_scheduler *s = *ps;
    serve_scheduler_drain(s, drain_ms);
    /* Every job has its result now; wait for their callers to leave submit (they need the
     * mutex to return) before it goes. */
    pthread_mutex_lock(&s->lock);
    while (s->callers > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->work);
    pthread_condattr_destroy(&s->monotonic);
    pthread_mutex_destroy(&s->lock);
    free(s->segments), free(s->ids), free(s->type_ids), free(s->offsets), free(s->lengths);
    free((void *)s->rows_ids), free((void *)s->rows_types), free(s->rows);
    free(s);
    *ps = NULL;
}
