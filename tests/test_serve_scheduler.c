/*
 * clattn-serve's batching scheduler (examples/serve/scheduler.c) and metrics (metrics.c) on the
 * tiny random BERT (tests/common/tiny_sentence_model.h):
 *   - 8 threads submit jobs of 1 to 20 texts at once, with every normalisation; every row is the
 *     bytes clattn_sentence_model_embed gives the text alone (memcmp), and no batch went past
 *     max_batch_tokens (the metrics' histogram);
 *   - a full queue answers SERVE_OVERLOADED; a deadline already past, or passing while the job
 *     waits behind a long one, answers SERVE_TIMED_OUT without writing out (out is freed at
 *     once: under AddressSanitizer a late write would be a use after free); a job abandoned
 *     while split across batches is not written after submit returns either;
 *   - stop drains the queued jobs (every row right), and with no drain time the queued ones get
 *     SERVE_STOPPED, as do jobs submitted after serve_scheduler_drain;
 *   - the metrics' Prometheus text: HELP and TYPE lines, cumulative buckets, label escaping,
 *     bounded route labels.
 */
#include "common/test_util.h"
#include "common/tiny_sentence_model.h"

#include "../examples/serve/engine.h"
#include "../examples/serve/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_TEXTS 32
#define MAX_WORDS 24 /* many texts reach the model's 64 tokens */
#define MAX_JOB 20

typedef struct fixture {
    clattn_context *ctx;
    clattn_sentence_model *model;
    size_t d, max_length;
    int normalize; /* the model's */
    char dir[4096];
    int32_t *ids[N_TEXTS];
    size_t lengths[N_TEXTS];
    float *alone[2]; /* [normalize]: each text embedded alone by clattn_sentence_model_embed */
} fixture;

static fixture *F;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms * 1e6) % 1000000000L};
    nanosleep(&ts, NULL);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->ctx = test_context_create(NULL);
    assert_non_null(f->ctx);
    tiny_sentence_model_create(f->dir, sizeof(f->dir));
    assert_int_equal(clattn_sentence_model_load(f->ctx, &f->model, f->dir), CLATTN_OK);
    clattn_sentence_model_info info;
    assert_int_equal(clattn_sentence_model_get_info(f->model, &info), CLATTN_OK);
    f->d = info.hidden_size, f->max_length = info.max_length, f->normalize = info.normalize;
    const clattn_tokenizer *tok = clattn_sentence_model_tokenizer(f->model);
    for (int n = 0; n < 2; n++) {
        f->alone[n] = malloc(N_TEXTS * f->d * sizeof(float));
        assert_non_null(f->alone[n]);
    }
    for (size_t i = 0; i < N_TEXTS; i++) {
        char *text = tiny_sentence_text(i, MAX_WORDS);
        size_t got;
        assert_int_equal(clattn_tokenizer_encode(tok, text, strlen(text), 0, NULL, 0,
                                                 &f->lengths[i]),
                         CLATTN_OK);
        f->ids[i] = malloc(f->lengths[i] * sizeof(int32_t));
        assert_non_null(f->ids[i]);
        assert_int_equal(clattn_tokenizer_encode(tok, text, strlen(text), 0, f->ids[i],
                                                 f->lengths[i], &got),
                         CLATTN_OK);
        for (int n = 0; n < 2; n++) {
            clattn_embed_params p;
            clattn_embed_params_default(&p);
            p.normalize = n;
            assert_int_equal(clattn_sentence_model_embed(f->model, (const char *const *)&text,
                                                         NULL, 1, f->alone[n] + i * f->d, &p,
                                                         NULL),
                             CLATTN_OK);
        }
        free(text);
    }
    F = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < N_TEXTS; i++)
        free(f->ids[i]);
    for (int n = 0; n < 2; n++)
        free(f->alone[n]);
    clattn_sentence_model_destroy(&f->model);
    clattn_context_destroy(&f->ctx);
    test_temp_dir_remove(f->dir);
    free(f);
    return 0;
}

/* A job of `count` of the fixture's texts (text[k] = which), its own out. */
typedef struct test_job {
    serve_job job;
    size_t text[4096];
    const int32_t *ids[4096];
    size_t lengths[4096];
} test_job;

static test_job *job_create(size_t count, const size_t *which, int normalize)
{
    test_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    for (size_t k = 0; k < count; k++) {
        j->text[k] = which[k];
        j->ids[k] = F->ids[which[k]];
        j->lengths[k] = F->lengths[which[k]];
    }
    j->job = (serve_job){.count = count, .ids = j->ids, .lengths = j->lengths,
                         .normalize = normalize};
    j->job.out = malloc(count * F->d * sizeof(float));
    assert_non_null(j->job.out);
    memset(j->job.out, 0x5a, count * F->d * sizeof(float));
    return j;
}

static void job_free(test_job *j)
{
    free(j->job.out);
    free(j);
}

/* The first row of j that is not its text's single-text bytes, or -1. */
static long job_wrong_row(const test_job *j)
{
    const float *alone = F->alone[j->job.normalize >= 0 ? j->job.normalize : F->normalize];
    for (size_t k = 0; k < j->job.count; k++)
        if (memcmp(j->job.out + k * F->d, alone + j->text[k] * F->d, F->d * sizeof(float)) != 0)
            return (long)k;
    return -1;
}

static bool untouched(const float *out, size_t floats)
{
    const unsigned char *bytes = (const unsigned char *)out;
    for (size_t i = 0; i < floats * sizeof(float); i++)
        if (bytes[i] != 0x5a)
            return false;
    return true;
}

/* ---- many threads at once ---- */

typedef struct worker {
    serve_scheduler *s;
    uint64_t seed;
    size_t jobs, done, wrong; /* submitted, SERVE_DONE, rows not the single-text bytes */
    serve_result first_failure;
    char error[512];
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    test_rng rng = {w->seed};
    for (size_t n = 0; n < w->jobs; n++) {
        size_t count = 1 + (size_t)(test_rng_next(&rng) % MAX_JOB), which[MAX_JOB];
        for (size_t k = 0; k < count; k++)
            which[k] = (size_t)(test_rng_next(&rng) % N_TEXTS);
        int normalize = (int)(test_rng_next(&rng) % 3) - 1;
        test_job *j = calloc(1, sizeof(*j)); /* no cmocka asserts off the main thread */
        if (!j)
            break;
        for (size_t k = 0; k < count; k++) {
            j->text[k] = which[k];
            j->ids[k] = F->ids[which[k]];
            j->lengths[k] = F->lengths[which[k]];
        }
        j->job = (serve_job){.count = count, .ids = j->ids, .lengths = j->lengths,
                             .normalize = normalize,
                             .out = malloc(count * F->d * sizeof(float))};
        serve_result r = j->job.out ? serve_scheduler_submit(w->s, &j->job, 0) : SERVE_FAILED;
        if (r == SERVE_DONE) {
            w->done++;
            w->wrong += job_wrong_row(j) >= 0;
        } else if (w->first_failure == SERVE_DONE) {
            w->first_failure = r;
            snprintf(w->error, sizeof(w->error), "%s", j->job.error);
        }
        job_free(j);
    }
    return NULL;
}

/* The value of the sample line that starts with `name` (the whole name, labels included). */
static double sample(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, name, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    print_error("no sample %s in:\n%s\n", name, text);
    fail();
    return 0;
}

static void concurrent_jobs_get_the_single_text_bytes(void **state)
{
    (void)state;
    serve_metrics *metrics = serve_metrics_create();
    assert_non_null(metrics);
    /* Small batches (at most 8 texts of 64 tokens, 3 jobs): jobs of up to 20 texts are split,
     * and batches mix jobs whenever several wait. */
    serve_scheduler_config config = {.max_batch_tokens = 512, .max_batch_requests = 3,
                                     .max_queued_jobs = 64, .metrics = metrics};
    serve_scheduler *s = NULL;
    char error[256];
    serve_engine engine;
    assert_int_equal(serve_engine_of_sentence_model(&engine, F->model), CLATTN_OK);
    assert_int_equal(serve_scheduler_start(&s, &engine, &config, error, sizeof(error)), 0);
    enum { THREADS = 8 };
    worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){.s = s, .seed = 900 + (uint64_t)i, .jobs = 4};
        assert_int_equal(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        if (workers[i].done != workers[i].jobs)
            print_error("thread %d: result %d: %s\n", i, (int)workers[i].first_failure,
                        workers[i].error);
        assert_int_equal(workers[i].done, workers[i].jobs);
        assert_int_equal(workers[i].wrong, 0);
    }
    assert_int_equal(serve_scheduler_pending(s), 0);
    serve_scheduler_stop(&s, 1000);
    assert_null(s);
    char *text = serve_metrics_render(metrics, 0, NULL);
    assert_non_null(text);
    double batches = sample(text, "clattn_batch_tokens_count");
    assert_true(batches > 0);
    /* Every batch within the token budget: all of them in the le="256" bucket. */
    assert_true(sample(text, "clattn_batch_tokens_bucket{le=\"512\"}") == batches);
    assert_true(sample(text, "clattn_batch_texts_bucket{le=\"256\"}") == batches);
    free(text);
    serve_metrics_destroy(&metrics);
}

/* ---- overload, deadlines, stop ---- */

/* A job that keeps the scheduler busy: `count` texts of 64 tokens, one per batch
 * (max_batch_tokens 64), submitted by its own thread; with a deadline it is abandoned then (and
 * the scheduler drops its rest), so that the test does not wait for all of it. */
typedef struct busy {
    serve_scheduler *s;
    test_job *j;
    double deadline_ms;
    serve_result result;
    pthread_t thread;
} busy;

static void *busy_main(void *arg)
{
    busy *b = arg;
    b->result = serve_scheduler_submit(b->s, &b->j->job, b->deadline_ms);
    return NULL;
}

static size_t longest_text(void)
{
    size_t best = 0;
    for (size_t i = 0; i < N_TEXTS; i++)
        best = F->lengths[i] > F->lengths[best] ? i : best;
    assert_int_equal(F->lengths[best], F->max_length);
    return best;
}

static void busy_start(busy *b, serve_scheduler *s, size_t count, double deadline_ms)
{
    size_t *which = malloc(count * sizeof(size_t)), text = longest_text();
    assert_non_null(which);
    for (size_t k = 0; k < count; k++)
        which[k] = text;
    b->s = s;
    b->deadline_ms = deadline_ms;
    b->j = job_create(count, which, -1);
    free(which);
    assert_int_equal(pthread_create(&b->thread, NULL, busy_main, b), 0);
    while (serve_scheduler_pending(s) == 0) /* until it is queued */
        sleep_ms(1);
}

/* Waits for the busy job: done with every row right, or abandoned at its deadline. */
static void busy_join(busy *b)
{
    pthread_join(b->thread, NULL);
    if (b->result == SERVE_DONE)
        assert_int_equal(job_wrong_row(b->j), -1);
    else
        assert_int_equal(b->result, SERVE_TIMED_OUT);
    job_free(b->j);
}

static serve_scheduler *start_small(size_t max_queued)
{
    serve_scheduler_config config = {.max_batch_tokens = 64, .max_batch_requests = 64,
                                     .max_queued_jobs = max_queued};
    serve_scheduler *s = NULL;
    char error[256];
    serve_engine engine;
    assert_int_equal(serve_engine_of_sentence_model(&engine, F->model), CLATTN_OK);
    assert_int_equal(serve_scheduler_start(&s, &engine, &config, error, sizeof(error)), 0);
    return s;
}

static void a_full_queue_answers_overloaded(void **state)
{
    (void)state;
    serve_scheduler *s = start_small(1);
    busy b;
    busy_start(&b, s, 3000, now_ms() + 1000);
    size_t one = 0;
    test_job *j = job_create(1, &one, -1);
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_OVERLOADED);
    assert_true(untouched(j->job.out, F->d));
    busy_join(&b);
    /* The queue has room again (once the abandoned job's last batch is over). */
    while (serve_scheduler_pending(s) > 0)
        sleep_ms(1);
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_DONE);
    assert_int_equal(job_wrong_row(j), -1);
    job_free(j);
    serve_scheduler_stop(&s, 0);
}

static void deadlines_give_timed_out_without_writing(void **state)
{
    (void)state;
    serve_scheduler *s = start_small(8);
    size_t which[3] = {0, 5, 9};
    /* Already past: refused at once. */
    test_job *j = job_create(3, which, -1);
    assert_int_equal(serve_scheduler_submit(s, &j->job, now_ms() - 1), SERVE_TIMED_OUT);
    assert_true(untouched(j->job.out, 3 * F->d));
    job_free(j);

    /* Passing while queued behind a long job: withdrawn when the deadline passes, not when the
     * long job ends; out freed at once (a late write would be a use after free under ASan). */
    busy b;
    busy_start(&b, s, 3000, now_ms() + 1000);
    j = job_create(3, which, -1);
    double start = now_ms();
    assert_int_equal(serve_scheduler_submit(s, &j->job, start + 30), SERVE_TIMED_OUT);
    double waited = now_ms() - start;
    assert_true(waited >= 29 && waited < 900); /* not held until the long job's end */
    assert_true(untouched(j->job.out, 3 * F->d));
    job_free(j);
    assert_true(serve_scheduler_pending(s) >= 1); /* the long job still runs */

    /* Split across batches and abandoned part-way: submit returns at the deadline; whatever the
     * scheduler still runs of it is not written into the freed job. */
    size_t *many = malloc(2000 * sizeof(size_t));
    assert_non_null(many);
    for (size_t k = 0; k < 2000; k++)
        many[k] = k % N_TEXTS;
    busy_join(&b);
    j = job_create(2000, many, -1);
    free(many);
    assert_int_equal(serve_scheduler_submit(s, &j->job, now_ms() + 40), SERVE_TIMED_OUT);
    job_free(j);
    /* The scheduler drops the rest: it is idle again soon, and serves the next job right. */
    while (serve_scheduler_pending(s) > 0)
        sleep_ms(1);
    j = job_create(3, which, 1);
    assert_int_equal(serve_scheduler_submit(s, &j->job, now_ms() + 60000), SERVE_DONE);
    assert_int_equal(job_wrong_row(j), -1);
    job_free(j);
    serve_scheduler_stop(&s, 0);
}

typedef struct waiter {
    serve_scheduler *s;
    test_job *j;
    serve_result result;
    pthread_t thread;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->result = serve_scheduler_submit(w->s, &w->j->job, 0);
    return NULL;
}

/* Jobs queued behind a long one, then stop: with time to drain every one is done (right rows);
 * with none they are stopped; after serve_scheduler_drain a submit answers SERVE_STOPPED. */
static void stop_drains(void **state)
{
    (void)state;
    for (int drain = 1; drain >= 0; drain--) {
        serve_scheduler *s = start_small(16);
        busy b;
        /* With a drain: the long job is abandoned at its deadline (or, on a fast machine, done
         * before it: CI saw that once), then the drain runs the waiters; without: the drain
         * stops everything after the batch that runs. */
        busy_start(&b, s, 3000, drain ? now_ms() + 1000 : 0);
        enum { WAITERS = 4 };
        waiter w[WAITERS];
        for (size_t i = 0; i < WAITERS; i++) {
            size_t which[2] = {i, 20 + i};
            w[i] = (waiter){.s = s, .j = job_create(2, which, (int)(i % 3) - 1)};
            assert_int_equal(pthread_create(&w[i].thread, NULL, waiter_main, &w[i]), 0);
        }
        /* Until the waiters are queued behind the long job (bounded, should a slow machine
         * have run some of them already: the results below hold either way). */
        for (double until = now_ms() + 5000;
             serve_scheduler_pending(s) < 1 + WAITERS && now_ms() < until;)
            sleep_ms(1);
        serve_scheduler_drain(s, drain ? 60000 : 0);
        size_t zero = 0;
        test_job *late = job_create(1, &zero, -1);
        assert_int_equal(serve_scheduler_submit(s, &late->job, 0), SERVE_STOPPED);
        assert_true(untouched(late->job.out, F->d));
        job_free(late);
        serve_scheduler_stop(&s, 0);
        assert_null(s);
        pthread_join(b.thread, NULL);
        if (drain && b.result == SERVE_DONE) /* it ran whole within its second (busy_join) */
            assert_int_equal(job_wrong_row(b.j), -1);
        else
            assert_int_equal(b.result, drain ? SERVE_TIMED_OUT : SERVE_STOPPED);
        for (size_t i = 0; i < WAITERS; i++) {
            pthread_join(w[i].thread, NULL);
            assert_int_equal(w[i].result, drain ? SERVE_DONE : SERVE_STOPPED);
            if (drain)
                assert_int_equal(job_wrong_row(w[i].j), -1);
            else
                assert_true(untouched(w[i].j->job.out, 2 * F->d));
            job_free(w[i].j);
        }
        job_free(b.j);
    }
}

/* Jobs the scheduler refuses to run (their ids are not the model's): SERVE_FAILED naming the
 * text, nothing written, the scheduler unharmed. */
static void invalid_jobs_fail_alone(void **state)
{
    (void)state;
    serve_scheduler *s = start_small(4);
    size_t which[2] = {1, 2};
    test_job *j = job_create(2, which, -1);
    int32_t bad[3] = {2, 100, 3};
    j->ids[1] = bad, j->lengths[1] = 3;
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_FAILED);
    assert_non_null(strstr(j->job.error, "text 2: id 100 is outside the vocabulary"));
    assert_true(untouched(j->job.out, 2 * F->d));
    j->ids[1] = F->ids[2], j->lengths[1] = F->max_length + 1;
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_FAILED);
    assert_non_null(strstr(j->job.error, "text 2 has 65 ids"));
    j->lengths[1] = F->lengths[2];
    j->job.normalize = 3;
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_FAILED);
    j->job.normalize = 0;
    assert_int_equal(serve_scheduler_submit(s, &j->job, 0), SERVE_DONE);
    assert_int_equal(job_wrong_row(j), -1);
    job_free(j);
    serve_scheduler_stop(&s, 0);
}

/* ---- metrics ---- */

static void metrics_render_prometheus_text(void **state)
{
    (void)state;
    serve_metrics *m = serve_metrics_create();
    assert_non_null(m);
    serve_metrics_request(m, "/v1/embeddings", 200, 3, 30, 2.0, 4.0, 7.0);
    serve_metrics_request(m, "/v1/embeddings", 200, 1, 10, 0.5, 30.0, 31.0);
    serve_metrics_request(m, "/v1/embeddings", 429, 5, 50, 0, 0, 0.2);
    serve_metrics_request(m, "/we\"ird\\route\n", 404, 0, 0, 0, 0, 0.1);
    for (int i = 0; i < 40; i++) { /* more names than kept: the rest count as "other" */
        char route[32];
        snprintf(route, sizeof(route), "/r%d", i);
        serve_metrics_request(m, route, 404, 0, 0, 0, 0, 0.1);
    }
    serve_metrics_batch(m, 4, 100);
    serve_metrics_batch(m, 64, 16384);
    char *text = serve_metrics_render(m, 5, NULL);
    assert_non_null(text);
    static const char *const families[][2] = {
        {"clattn_requests_total", "counter"},
        {"clattn_request_duration_seconds", "histogram"},
        {"clattn_request_queue_seconds", "histogram"},
        {"clattn_request_inference_seconds", "histogram"},
        {"clattn_texts_total", "counter"},
        {"clattn_tokens_total", "counter"},
        {"clattn_batch_texts", "histogram"},
        {"clattn_batch_tokens", "histogram"},
        {"clattn_queue_depth", "gauge"}};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        char line[128];
        snprintf(line, sizeof(line), "# TYPE %s %s\n", families[i][0], families[i][1]);
        assert_non_null(strstr(text, line));
        snprintf(line, sizeof(line), "# HELP %s ", families[i][0]);
        assert_non_null(strstr(text, line));
    }
#define REQUESTS(route, status) "clattn_requests_total{route=\"" route "\",status=\"" status "\"}"
    assert_true(sample(text, REQUESTS("/v1/embeddings", "200")) == 2);
    assert_true(sample(text, REQUESTS("/v1/embeddings", "429")) == 1);
    assert_true(sample(text, REQUESTS("/we\\\"ird\\\\route\\n", "404")) == 1); /* escaped */
    /* 32 route names kept (two, then /r0 to /r29); /r30 to /r39 count as "other". */
    assert_true(sample(text, REQUESTS("/r29", "404")) == 1);
    assert_true(strstr(text, "route=\"/r30\"") == NULL);
    assert_true(sample(text, REQUESTS("other", "404")) == 10);
#undef REQUESTS
    /* Only the successful requests' times and tokens. */
    assert_true(sample(text, "clattn_request_queue_seconds_count") == 2);
    assert_true(sample(text, "clattn_request_queue_seconds_bucket{le=\"0.001\"}") == 1);
    assert_true(sample(text, "clattn_request_queue_seconds_bucket{le=\"0.0025\"}") == 2);
    assert_true(sample(text, "clattn_request_inference_seconds_bucket{le=\"0.005\"}") == 1);
    assert_true(sample(text, "clattn_request_inference_seconds_bucket{le=\"0.025\"}") == 1);
    assert_true(sample(text, "clattn_request_inference_seconds_bucket{le=\"0.05\"}") == 2);
    assert_true(sample(text, "clattn_request_inference_seconds_bucket{le=\"+Inf\"}") == 2);
    assert_true(fabs(sample(text, "clattn_request_inference_seconds_sum") - 0.034) < 1e-12);
    assert_true(sample(text, "clattn_request_duration_seconds_count") == 44);
    assert_true(sample(text, "clattn_texts_total") == 4);
    assert_true(sample(text, "clattn_tokens_total") == 40);
    assert_true(sample(text, "clattn_batch_texts_bucket{le=\"4\"}") == 1);
    assert_true(sample(text, "clattn_batch_texts_bucket{le=\"64\"}") == 2);
    assert_true(sample(text, "clattn_batch_tokens_bucket{le=\"8192\"}") == 1);
    assert_true(sample(text, "clattn_batch_tokens_bucket{le=\"16384\"}") == 2);
    assert_true(sample(text, "clattn_batch_tokens_sum") == 16484);
    assert_true(sample(text, "clattn_queue_depth") == 5);
    /* Every line a comment or "name[{labels}] value", ending the text with a newline. */
    assert_true(text[strlen(text) - 1] == '\n');
    free(text);
    serve_metrics_destroy(&m);
    assert_null(m);
}

int main(void)
{
    test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_jobs_get_the_single_text_bytes),
        cmocka_unit_test(a_full_queue_answers_overloaded),
        cmocka_unit_test(deadlines_give_timed_out_without_writing),
        cmocka_unit_test(stop_drains),
        cmocka_unit_test(invalid_jobs_fail_alone),
        cmocka_unit_test(metrics_render_prometheus_text),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
