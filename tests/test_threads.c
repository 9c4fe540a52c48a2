/*
 * Concurrency as context.h promises it: separate contexts may be used from separate threads at
 * the same time. Two threads, each with its own context, run an encoder or a multi-head attention
 * forward pass on the same input (fused and unfused paths, several times, with averaged
 * attention weights on the unfused MHA pass, which go through the context's score workspace);
 * every output must equal bit for bit that of a single-threaded run.
 *
 * Threads never call cmocka (its failures longjmp): they record a status and a message, and the
 * main thread asserts. Run under ThreadSanitizer as docs/testing.md describes.
 */
#include "common/test_util.h"
#include "common/weight_bank.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, N = 33, D = 32, H = 4, FF = 64, LAYERS = 2, REPS = 3, OUT = B * N * D };

typedef enum job_kind { JOB_ENCODER, JOB_MHA } job_kind;

/* Inputs shared (read-only) by every job. */
typedef struct shared_inputs {
    weight_bank bank; /* encoder weights */
    float w_in[3 * D * D], b_in[3 * D], w_out[D * D], b_out[D]; /* MHA weights */
    float x[OUT];
    float kpm[B * N];
} shared_inputs;

typedef struct job {
    job_kind kind;
    const shared_inputs *in;
    /* results: [rep][path] outputs, and the averaged weights of the unfused MHA pass */
    float out[REPS][2][OUT];
    float weights[REPS][B * N * N];
    clattn_status status;
    char message[1024];
} job;

static void init_inputs(shared_inputs *in)
{
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, D, H, LAYERS, FF);
    cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
    bank_init(&in->bank, &cfg, true, 7);
    test_fill_uniform(in->w_in, 3 * D * D, 8, -0.2f, 0.2f);
    test_fill_uniform(in->b_in, 3 * D, 9, -0.5f, 0.5f);
    test_fill_uniform(in->w_out, D * D, 10, -0.2f, 0.2f);
    test_fill_uniform(in->b_out, D, 11, -0.5f, 0.5f);
    test_fill_uniform(in->x, OUT, 12, -1.0f, 1.0f);
    for (int i = 0; i < B * N; i++)
        in->kpm[i] = i % N >= N - 3 * (i / N) - 1 ? 1.0f : 0.0f; /* batch 1 padded more */
}

#define CHECK(call)                                                                        \
    do {                                                                                   \
        clattn_status s_ = (call);                                                         \
        if (s_ != CLATTN_OK) {                                                             \
            j->status = s_;                                                                \
            snprintf(j->message, sizeof(j->message), "%s: %s: %s", #call,                  \
                     clattn_status_name(s_), clattn_last_error(ctx));                     \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

/* One job on a context of its own: everything from context creation to destruction. */
static void *run_job(void *arg)
{
    job *j = arg;
    const shared_inputs *in = j->in;
    clattn_context *ctx = test_context_create(NULL);
    clattn_encoder *enc = NULL;
    clattn_mha *mha = NULL;
    clattn_tensor *tx = NULL, *ty = NULL, *tkpm = NULL, *tw = NULL;
    j->status = CLATTN_OK;
    if (!ctx) {
        j->status = CLATTN_ERROR_DEVICE_NOT_FOUND;
        snprintf(j->message, sizeof(j->message), "context: %s", clattn_last_error(NULL));
        return NULL;
    }
    size_t shape[3] = {B, N, D};
    CHECK(clattn_tensor_create(ctx, &tx, 3, shape));
    CHECK(clattn_tensor_create(ctx, &ty, 3, shape));
    CHECK(clattn_tensor_create(ctx, &tkpm, 2, (size_t[]){B, N}));
    CHECK(clattn_tensor_create(ctx, &tw, 3, (size_t[]){B, N, N}));
    CHECK(clattn_tensor_write(tx, in->x, OUT));
    CHECK(clattn_tensor_write(tkpm, in->kpm, B * N));
    if (j->kind == JOB_ENCODER) {
        clattn_encoder_config cfg;
        clattn_encoder_config_default(&cfg, D, H, LAYERS, FF);
        cfg.positional = CLATTN_POSITIONAL_SINUSOIDAL;
        CHECK(clattn_encoder_create(ctx, &enc, &cfg));
        CHECK(clattn_encoder_load_weights(enc, bank_lookup, (void *)&in->bank));
    } else {
        clattn_mha_config cfg;
        clattn_mha_config_default(&cfg, D, H);
        CHECK(clattn_mha_create(ctx, &mha, &cfg));
        clattn_mha_weights w = {
            .in_proj_weight = {in->w_in, 2, {3 * D, D, 0, 0}},
            .in_proj_bias = {in->b_in, 1, {3 * D, 0, 0, 0}},
            .out_proj_weight = {in->w_out, 2, {D, D, 0, 0}},
            .out_proj_bias = {in->b_out, 1, {D, 0, 0, 0}},
        };
        CHECK(clattn_mha_load_weights(mha, &w));
    }
    for (int rep = 0; rep < REPS; rep++)
        for (int path = 0; path < 2; path++) {
            clattn_attention_path which = path ? CLATTN_PATH_UNFUSED : CLATTN_PATH_FUSED;
            CHECK(clattn_tensor_fill(ty, 0.0f));
            if (enc) {
                clattn_encoder_forward_params p;
                clattn_encoder_forward_params_default(&p);
                p.key_padding_mask = tkpm;
                p.path = which;
                CHECK(clattn_encoder_forward(enc, tx, ty, &p));
            } else {
                clattn_mha_forward_params p;
                clattn_mha_forward_params_default(&p);
                p.key_padding_mask = tkpm;
                p.path = which;
                if (path) {
                    p.attn_weights = tw;
                    p.average_attn_weights = 1;
                }
                CHECK(clattn_mha_forward(mha, tx, NULL, NULL, ty, &p));
                if (path)
                    CHECK(clattn_tensor_read(tw, j->weights[rep], B * N * N));
            }
            CHECK(clattn_tensor_read(ty, j->out[rep][path], OUT));
        }
done:
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty), clattn_tensor_destroy(&tkpm);
    clattn_tensor_destroy(&tw);
    clattn_encoder_destroy(&enc);
    clattn_mha_destroy(&mha);
    clattn_context_destroy(&ctx);
    return NULL;
}

static shared_inputs *inputs;
static job *reference[2]; /* single-threaded results per kind */

static int setup(void **state)
{
    (void)state;
    test_require_device();
    inputs = malloc(sizeof(*inputs));
    if (!inputs)
        return -1;
    init_inputs(inputs);
    for (int kind = 0; kind < 2; kind++) {
        reference[kind] = calloc(1, sizeof(job));
        if (!reference[kind])
            return -1;
        reference[kind]->kind = (job_kind)kind;
        reference[kind]->in = inputs;
        run_job(reference[kind]);
        if (reference[kind]->status != CLATTN_OK) {
            fprintf(stderr, "single-threaded run failed: %s\n", reference[kind]->message);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(reference[0]), free(reference[1]);
    if (inputs)
        bank_free(&inputs->bank);
    free(inputs);
    return 0;
}

static void expect_reference(const job *j)
{
    if (j->status != CLATTN_OK)
        print_error("thread job failed: %s\n", j->message);
    assert_int_equal(j->status, CLATTN_OK);
    const job *ref = reference[j->kind];
    for (int rep = 0; rep < REPS; rep++) {
        for (int path = 0; path < 2; path++) {
            if (memcmp(j->out[rep][path], ref->out[rep][path], sizeof(ref->out[rep][path])) != 0)
                print_error("%s, repetition %d, %s path: max abs diff %.3g from the "
                            "single-threaded run\n",
                            j->kind == JOB_ENCODER ? "encoder" : "MHA", rep,
                            path ? "unfused" : "fused",
                            test_max_abs_diff(j->out[rep][path], ref->out[rep][path], OUT));
            assert_memory_equal(j->out[rep][path], ref->out[rep][path],
                                sizeof(ref->out[rep][path]));
        }
        assert_memory_equal(j->weights[rep], ref->weights[rep], sizeof(ref->weights[rep]));
    }
}

static void run_two_threads(job_kind a, job_kind b)
{
    job *jobs = calloc(2, sizeof(job));
    assert_non_null(jobs);
    jobs[0].kind = a, jobs[1].kind = b;
    jobs[0].in = jobs[1].in = inputs;
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, run_job, &jobs[t]), 0);
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    expect_reference(&jobs[0]);
    expect_reference(&jobs[1]);
    free(jobs);
}

/* The single-threaded runs are deterministic to begin with (so that bit-for-bit is fair). */
static void a_second_single_threaded_run_is_identical(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        job *j = calloc(1, sizeof(job));
        assert_non_null(j);
        j->kind = (job_kind)kind;
        j->in = inputs;
        run_job(j);
        expect_reference(j);
        free(j);
    }
}

static void two_encoders_in_two_threads(void **state)
{
    (void)state;
    run_two_threads(JOB_ENCODER, JOB_ENCODER);
}

static void two_mha_layers_in_two_threads(void **state)
{
    (void)state;
    run_two_threads(JOB_MHA, JOB_MHA);
}

static void an_encoder_and_an_mha_layer_in_two_threads(void **state)
{
    (void)state;
    run_two_threads(JOB_ENCODER, JOB_MHA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_second_single_threaded_run_is_identical),
        cmocka_unit_test(two_encoders_in_two_threads),
        cmocka_unit_test(two_mha_layers_in_two_threads),
        cmocka_unit_test(an_encoder_and_an_mha_layer_in_two_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
