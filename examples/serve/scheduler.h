/*
 * The server's batching engine (docs/serving.md: batching): one thread owns the device context and
 * the model (an embedder or a cross-encoder, behind serve_engine); HTTP threads hand it jobs of
 * already-tokenized texts and wait. The thread
 * takes pending texts in arrival order into batches of at most max_batch_tokens tokens and at
 * most max_batch_requests requests (run as clattn_sentence_model_embed runs texts: sorted by
 * length and cut where padding and per-batch costs are least, src/models/embed_batches.h, into
 * library batches of at most 32 texts and max_batch_tokens padded tokens), runs
 * them, and hands each job its rows in its own order. A job larger than one batch is split
 * across batches; small jobs of many clients share one. While
 * jobs wait the device is never idle. Thanks to batch invariance (clattn/context.h) a text's
 * row is the same bytes whatever it was batched with.
 */
#ifndef CLATTN_SERVE_SCHEDULER_H
#define CLATTN_SERVE_SCHEDULER_H

#include <clattn/clattn.h>

#include "metrics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct serve_scheduler serve_scheduler;

/* What the scheduler runs, whatever the model: `run` computes `count` texts' rows [count, width]
 * (texts[i] = ids[i][0 .. lengths[i]), its token types type_ids[i] likewise, or type_ids NULL:
 * all 0), sorting and cutting them into library batches of at most max_batch_tokens padded
 * tokens itself, each row the same bytes whatever it ran with (batch invariance). `normalize` is
 * the job's (0 or 1; an engine without normalisation ignores it). On failure the library's
 * message is in clattn_last_error(NULL). serve.c makes one for a sentence model
 * (clattn_sentence_model_embed_ids: embeddings) and one for a cross-encoder
 * (clattn_cross_encoder_score_ids: raw logits). */
typedef struct serve_engine {
    void *model;
    clattn_status (*run)(void *model, const int32_t *const *ids, const int32_t *const *type_ids,
                         const size_t *lengths, size_t count, int normalize,
                         size_t max_batch_tokens, float *rows);
    size_t width;      /* floats per row: hidden_size, or the number of labels */
    size_t max_length; /* ids per text at most */
    size_t vocab_size; /* every id is below it */
    int normalize;     /* a job's normalize -1 means this (0 or 1) */
} serve_engine;

typedef struct serve_scheduler_config {
    size_t max_batch_tokens;   /* tokens per batch, and padded tokens per library batch, at
                                * most (--max-batch-tokens, 16384) */
    size_t max_batch_requests; /* jobs per batch at most (--max-batch-requests, 64) */
    size_t max_queued_jobs;    /* jobs waiting or running at most (--max-concurrent-requests,
                                * 512): serve_scheduler_submit answers SERVE_OVERLOADED past it */
    serve_metrics *metrics;    /* each batch is counted there (serve_metrics_batch); may be NULL */
} serve_scheduler_config;

/* One request's texts, tokenized by the caller (clattn_tokenizer_encode_tokens: the single
 * template's ids, [CLS] ... [SEP] for BERT; or clattn_tokenizer_encode_pair_tokens for a
 * cross-encoder's pairs; truncated as the request asked), and
 * what to compute. The caller owns every array and keeps it alive until serve_scheduler_submit
 * returns. */
typedef struct serve_job {
    size_t count;               /* texts, at least 1 */
    const int32_t *const *ids;  /* ids[i][0 .. lengths[i]) */
    const int32_t *const *type_ids; /* the same shape (a pair's 0s and 1s); NULL: all 0 */
    const size_t *lengths;
    int normalize;              /* -1: the engine's; 0 or 1 (TEI's "normalize") */
    float *out;                 /* [count, engine width]: row i for text i, written on success */
    /* Filled in by serve_scheduler_submit: */
    double queue_ms, inference_ms; /* waiting for a batch, and in the batches that ran it */
    char error[512];            /* the library's message when the result is SERVE_FAILED */
} serve_job;

typedef enum serve_result {
    SERVE_DONE = 0,        /* job->out holds the rows */
    SERVE_OVERLOADED = 1,  /* the queue is full: nothing was run (HTTP 429) */
    SERVE_FAILED = 2,      /* the library failed (job->error): HTTP 500 / TEI 424 */
    SERVE_STOPPED = 3,     /* the scheduler is shutting down: nothing was run (HTTP 503) */
    SERVE_TIMED_OUT = 4,   /* the deadline passed before the job's batches ran (HTTP 503/504);
                            * the job is withdrawn and its rows are never written. A job split
                            * across batches whose deadline passes after some ran is abandoned
                            * (out then holds only some rows); either way nothing of the job
                            * is read or written once serve_scheduler_submit has returned */
} serve_result;

/* Starts the scheduler thread on the engine's model (which it uses alone from now on: no other
 * thread may call the model or its context until serve_scheduler_stop returns; the engine is
 * copied). On failure *out is NULL and a message is written into error. */
int serve_scheduler_start(serve_scheduler **out, const serve_engine *engine,
                          const serve_scheduler_config *config, char *error, size_t error_size);

/* Queues the job and blocks until its rows are written, it fails, or `deadline_ms` (a
 * CLOCK_MONOTONIC time in ms; 0: none) passes. Thread-safe; any number of callers at once. */
serve_result serve_scheduler_submit(serve_scheduler *s, serve_job *job, double deadline_ms);

/* Jobs waiting or running now (for /metrics and /health). */
size_t serve_scheduler_pending(serve_scheduler *s);

/* Refuses new jobs (SERVE_STOPPED), finishes the queued ones until `drain_ms` have passed
 * (the rest get SERVE_STOPPED; a batch already running finishes, so the bound is drain_ms plus
 * one batch) and joins the thread, but keeps the scheduler: submit calls made afterwards (an
 * HTTP thread still finishing a request) answer SERVE_STOPPED instead of touching freed memory.
 * Call serve_scheduler_stop once no thread can call submit any more. */
void serve_scheduler_drain(serve_scheduler *s, double drain_ms);

/* serve_scheduler_drain (when not done yet), then waits for the callers still inside submit to
 * return and frees the scheduler. Sets *s to NULL. No call on s may start once this has begun. */
void serve_scheduler_stop(serve_scheduler **s, double drain_ms);

#endif /* CLATTN_SERVE_SCHEDULER_H */
