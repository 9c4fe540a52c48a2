/* Context life cycle, wrapping a caller's OpenCL objects, statistics, invalid arguments. */
#include "common/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int setup(void **state)
{
    (void)state;
    test_require_device();
    unsetenv("CLATTN_DEVICE");
    return 0;
}

static void create_and_destroy_repeatedly(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        clattn_context *ctx = NULL;
        clattn_context_params params;
        clattn_context_params_default(&params);
        params.log_level = CLATTN_LOG_NONE;
        assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
        assert_non_null(ctx);
        assert_non_null(clattn_context_queue(ctx));
        assert_non_null(clattn_context_cl_context(ctx));
        assert_non_null(clattn_context_device(ctx));
        assert_string_equal(clattn_last_error(ctx), "");
        clattn_context_destroy(&ctx);
        assert_null(ctx);
    }
}

static void create_with_null_params_uses_defaults(void **state)
{
    (void)state;
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, NULL), CLATTN_OK);
    assert_int_equal(clattn_context_finish(ctx), CLATTN_OK);
    clattn_context_destroy(&ctx);
}

static void destroy_accepts_null(void **state)
{
    (void)state;
    clattn_context_destroy(NULL);
    clattn_context *ctx = NULL;
    clattn_context_destroy(&ctx);
    assert_null(ctx);
}

static void create_rejects_bad_arguments(void **state)
{
    (void)state;
    assert_status_msg(NULL, clattn_context_create(NULL, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    clattn_context *ctx = (clattn_context *)0x1;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.reserved[3] = 1;
    assert_status_msg(NULL, clattn_context_create(&ctx, &params), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    assert_null(ctx);
    clattn_context_params_default(&params);
    params.log_level = (clattn_log_level)42;
    assert_status_msg(NULL, clattn_context_create(&ctx, &params), CLATTN_ERROR_INVALID_ARGUMENT,
                      "log_level");
}

static void params_default_tolerates_null(void **state)
{
    (void)state;
    clattn_context_params_default(NULL);
    clattn_context_params params;
    memset(&params, 0x5a, sizeof(params));
    clattn_context_params_default(&params);
    assert_null(params.device);
    assert_null(params.log_callback);
    assert_int_equal(params.log_level, CLATTN_LOG_WARNING);
    assert_int_equal(params.profiling, 0);
    assert_int_equal(params.workspace_limit_bytes, 0);
}

static cl_uint ref_count_context(cl_context c)
{
    cl_uint n = 0;
    clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof(n), &n, NULL);
    return n;
}

static cl_uint ref_count_queue(cl_command_queue q)
{
    cl_uint n = 0;
    clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(n), &n, NULL);
    return n;
}

/* PoCL's worker threads drop their references to finished commands (and through them to the
 * queue and the context) a moment after the commands complete: wait up to a second for a count
 * to settle at its expected value. */
static int settle_pause(int attempt)
{
    if (attempt >= 100)
        return 0;
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return 1;
}

static cl_uint settled_ref_count_context(cl_context c, cl_uint expected)
{
    cl_uint n = ref_count_context(c);
    for (int i = 0; n != expected && settle_pause(i); i++)
        n = ref_count_context(c);
    return n;
}

static cl_uint settled_ref_count_queue(cl_command_queue q, cl_uint expected)
{
    cl_uint n = ref_count_queue(q);
    for (int i = 0; n != expected && settle_pause(i); i++)
        n = ref_count_queue(q);
    return n;
}

/* A caller's own context and queue on the default device. */
static void make_caller_objects(cl_context *c, cl_command_queue *q,
                                cl_command_queue_properties props)
{
    clattn_context *probe = test_context_create(NULL);
    assert_non_null(probe);
    cl_device_id device = clattn_context_device(probe);
    cl_int err;
    *c = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    *q = clCreateCommandQueue(*c, device, props, &err);
    clattn_context_destroy(&probe);
    if (err != CL_SUCCESS)
        *q = NULL;
}

static void wrap_keeps_the_callers_ownership(void **state)
{
    (void)state;
    cl_context c;
    cl_command_queue q;
    make_caller_objects(&c, &q, 0);
    assert_non_null(q);
    cl_uint c_before = ref_count_context(c), q_before = ref_count_queue(q);

    /* Ten wrap/use/destroy cycles: each must give back every reference it took. */
    for (int cycle = 0; cycle < 10; cycle++) {
        clattn_context *ctx = NULL;
        assert_int_equal(clattn_context_wrap(&ctx, c, q, NULL), CLATTN_OK);
        assert_ptr_equal(clattn_context_queue(ctx), q);
        assert_ptr_equal(clattn_context_cl_context(ctx), c);
        size_t shape[1] = {5};
        clattn_tensor *t = NULL;
        assert_int_equal(clattn_tensor_create(ctx, &t, 1, shape), CLATTN_OK);
        assert_int_equal(clattn_tensor_fill(t, 2.5f), CLATTN_OK);
        float host[5];
        assert_int_equal(clattn_tensor_read(t, host, 5), CLATTN_OK);
        for (int i = 0; i < 5; i++)
            assert_true(host[i] == 2.5f);
        clattn_tensor_destroy(&t);
        clattn_context_destroy(&ctx);
    }

    /* The reference counts are "immediately stale" by the OpenCL spec: PoCL can still hold one
     * reference to a finished command (the queue's last event, which references the queue and,
     * through the last buffer used, the context) for a while, more so under load. A leak of ours would add one per
     * cycle; at most one transient reference is tolerated. */
    assert_int_equal(clEnqueueMarkerWithWaitList(q, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clFinish(q), CL_SUCCESS);
    cl_uint c_after = settled_ref_count_context(c, c_before);
    assert_true(c_after == c_before || c_after == c_before + 1);
    cl_uint q_after = settled_ref_count_queue(q, q_before);
    assert_true(q_after == q_before || q_after == q_before + 1);
    assert_int_equal(clReleaseCommandQueue(q), CL_SUCCESS);
    assert_int_equal(clReleaseContext(c), CL_SUCCESS);
}

static void wrap_rejects_bad_arguments(void **state)
{
    (void)state;
    cl_context c, other;
    cl_command_queue q, other_q;
    make_caller_objects(&c, &q, 0);
    make_caller_objects(&other, &other_q, 0);
    clattn_context *ctx = NULL;
    assert_status_msg(NULL, clattn_context_wrap(NULL, c, q, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(NULL, clattn_context_wrap(&ctx, NULL, q, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "cl_ctx is NULL");
    assert_status_msg(NULL, clattn_context_wrap(&ctx, c, NULL, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "queue is NULL");
    assert_status_msg(NULL, clattn_context_wrap(&ctx, c, other_q, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "another cl_context");
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.profiling = 1;
    assert_status_msg(NULL, clattn_context_wrap(&ctx, c, q, &params),
                      CLATTN_ERROR_INVALID_ARGUMENT, "CL_QUEUE_PROFILING_ENABLE");
    assert_null(ctx);

    cl_int err;
    cl_device_id device;
    clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(device), &device, NULL);
    cl_command_queue ooo =
        clCreateCommandQueue(c, device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err == CL_SUCCESS) {
        assert_status_msg(NULL, clattn_context_wrap(&ctx, c, ooo, NULL),
                          CLATTN_ERROR_INVALID_ARGUMENT, "out-of-order");
        clReleaseCommandQueue(ooo);
    }
    clReleaseCommandQueue(q);
    clReleaseContext(c);
    clReleaseCommandQueue(other_q);
    clReleaseContext(other);
}

static void accessors_and_finish_reject_null(void **state)
{
    (void)state;
    assert_null(clattn_context_queue(NULL));
    assert_null(clattn_context_cl_context(NULL));
    assert_null(clattn_context_device(NULL));
    assert_status_msg(NULL, clattn_context_finish(NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_string_equal(clattn_last_error(NULL), "clattn_context_finish: invalid argument: ctx is NULL");
}

static void errors_are_recorded_on_the_context_and_logged(void **state)
{
    (void)state;
    test_log log;
    clattn_context *ctx = test_context_create(&log);
    assert_non_null(ctx);
    assert_int_equal(log.errors, 0);
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_create(ctx, &t, 0, (size_t[1]){1}), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(ctx), "ndim is 0"));
    assert_int_equal(log.errors, 1);
    assert_string_equal(log.last, clattn_last_error(ctx));
    clattn_context_destroy(&ctx);
}

/* Runs a failing call with and without a context, with stderr captured; returns what was printed
 * (malloc'd). */
static char *stderr_of_failing_calls(clattn_context *ctx)
{
    char path[] = "/tmp/clattn_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 2) >= 0);
    clattn_tensor *t = NULL;
    clattn_status with_ctx = clattn_tensor_create(ctx, &t, 0, (size_t[1]){1});
    clattn_npy_array *a = NULL;
    clattn_status without_ctx = clattn_npy_read_f32(&a, "/nonexistent/clattn.npy");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(with_ctx, CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(without_ctx, CLATTN_ERROR_IO);
    char *text = calloc(4096, 1);
    assert_non_null(text);
    assert_true(lseek(fd, 0, SEEK_SET) == 0);
    ssize_t n = read(fd, text, 4095);
    assert_true(n >= 0);
    close(fd);
    unlink(path);
    return text;
}

/* A library does not print unless asked: returned errors are in the status and
 * clattn_last_error; CLATTN_LOG (or a log callback) turns printing on. */
static void errors_are_not_printed_unless_asked(void **state)
{
    (void)state;
    unsetenv("CLATTN_LOG");
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, NULL), CLATTN_OK); /* default params */
    char *quiet = stderr_of_failing_calls(ctx);
    assert_string_equal(quiet, "");
    free(quiet);
    assert_non_null(strstr(clattn_last_error(ctx), "ndim is 0"));
    clattn_context_destroy(&ctx);

    setenv("CLATTN_LOG", "error", 1);
    assert_int_equal(clattn_context_create(&ctx, NULL), CLATTN_OK);
    char *loud = stderr_of_failing_calls(ctx);
    unsetenv("CLATTN_LOG");
    assert_non_null(strstr(loud, "clattn error: clattn_tensor_create: invalid argument: ndim is 0"));
    assert_non_null(strstr(loud, "clattn error: clattn_npy_read_f32: /nonexistent/clattn.npy"));
    free(loud);
    clattn_context_destroy(&ctx);
}

static void stats_count_launches_and_profile_them(void **state)
{
    (void)state;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.profiling = 1;
    params.log_level = CLATTN_LOG_NONE;
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
    size_t shape[2] = {3, 4};
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_create(ctx, &t, 2, shape), CLATTN_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(clattn_tensor_fill(t, (float)i), CLATTN_OK);
    clattn_stats stats;
    assert_int_equal(clattn_stats_get(ctx, &stats), CLATTN_OK);
    assert_int_equal(stats.kernel_launches, 3);
    assert_int_equal(stats.total_macs, 0);
    assert_int_equal(stats.kernel_count, 1);
    assert_string_equal(stats.kernels[0].name, "fill");
    assert_int_equal(stats.kernels[0].launches, 3);
    assert_true(stats.kernels[0].total_ms >= 0.0);
    assert_true(stats.total_kernel_ms >= stats.kernels[0].total_ms);
    assert_int_equal(clattn_stats_reset(ctx), CLATTN_OK);
    assert_int_equal(clattn_stats_get(ctx, &stats), CLATTN_OK);
    assert_int_equal(stats.kernel_launches, 0);
    assert_int_equal(stats.kernel_count, 0);
    clattn_tensor_destroy(&t);
    clattn_context_destroy(&ctx);
}

static void stats_reject_null(void **state)
{
    (void)state;
    clattn_stats stats;
    assert_status_msg(NULL, clattn_stats_get(NULL, &stats), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(NULL, clattn_stats_reset(NULL), CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    clattn_context *ctx = test_context_create(NULL);
    assert_status_msg(ctx, clattn_stats_get(ctx, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "stats is NULL");
    clattn_context_destroy(&ctx);
}

static void workspace_limit_is_clamped_to_the_device(void **state)
{
    (void)state;
    /* A huge limit is accepted (clamped); the context still works. */
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.workspace_limit_bytes = UINT64_MAX;
    params.log_level = CLATTN_LOG_NONE;
    clattn_context *ctx = NULL;
    assert_int_equal(clattn_context_create(&ctx, &params), CLATTN_OK);
    clattn_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_and_destroy_repeatedly),
        cmocka_unit_test(create_with_null_params_uses_defaults),
        cmocka_unit_test(destroy_accepts_null),
        cmocka_unit_test(create_rejects_bad_arguments),
        cmocka_unit_test(params_default_tolerates_null),
        cmocka_unit_test(wrap_keeps_the_callers_ownership),
        cmocka_unit_test(wrap_rejects_bad_arguments),
        cmocka_unit_test(accessors_and_finish_reject_null),
        cmocka_unit_test(errors_are_recorded_on_the_context_and_logged),
        cmocka_unit_test(errors_are_not_printed_unless_asked),
        cmocka_unit_test(stats_count_launches_and_profile_them),
        cmocka_unit_test(stats_reject_null),
        cmocka_unit_test(workspace_limit_is_clamped_to_the_device),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
