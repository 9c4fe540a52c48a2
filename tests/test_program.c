/* Kernel compilation: embedded sources, -D specialisation, and the build-failure path. */
#include "common/test_util.h"
#include "runtime/context_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char broken_source[] =
    "__kernel void clattn_broken(__global float *x)\n"
    "{\n"
    "    x[get_global_id(0)] = this_identifier_does_not_exist;\n"
    "}\n";

static int setup(void **state)
{
    (void)state;
    test_require_device();
    return 0;
}

static void embedded_sources_are_present(void **state)
{
    (void)state;
    assert_true(clattn__cl_source_count >= 1);
    size_t with_kernels = 0;
    for (size_t i = 0; i < clattn__cl_source_count; i++) {
        const clattn_embedded_source *s = &clattn__cl_sources[i];
        /* Kernel sources, and src/base/constants.h which the host code shares. */
        assert_true(strstr(s->name, ".cl") != NULL || strcmp(s->name, "constants.h") == 0);
        assert_true(s->size > 0);
        assert_int_equal(s->data[s->size], '\0');
        assert_int_equal(strlen((const char *)s->data), s->size);
        bool kernels = strstr((const char *)s->data, "__kernel") != NULL;
        /* Only the definition files hold no kernel: constants.h, common.cl, act_quant.cl. */
        if (!kernels && strcmp(s->name, "constants.h") != 0 && strcmp(s->name, "common.cl") != 0 &&
            strcmp(s->name, "act_quant.cl") != 0)
            fail_msg("%s holds no kernel", s->name);
        with_kernels += kernels;
    }
    assert_true(with_kernels >= clattn__cl_source_count - 3);
}

static void kernels_are_built_with_device_options(void **state)
{
    (void)state;
    clattn_context *ctx = test_context_create(NULL);
    assert_non_null(ctx);
    assert_non_null(strstr(ctx->kernels.options, "-DCLATTN_LOCAL_IS_GLOBAL="));
    assert_non_null(strstr(ctx->kernels.options, "-cl-std=CL1.2"));
    assert_null(strstr(ctx->kernels.options, "fast-relaxed-math"));
    assert_null(strstr(ctx->kernels.options, "finite-math"));
    for (int i = 0; i < CLATTN_KERNEL_COUNT; i++)
        assert_non_null(ctx->kernels.kernel[i]);
    clattn_context_destroy(&ctx);
}

static void broken_source_returns_build_failed_with_log(void **state)
{
    (void)state;
    test_log log;
    clattn_context *ctx = test_context_create(&log);
    assert_non_null(ctx);
    const char *sources[1] = {broken_source};
    size_t lengths[1] = {strlen(broken_source)};
    cl_program program = NULL;
    clattn_status status =
        clattn__program_build(ctx, sources, lengths, 1, "-DSOME_OPTION=1", &program);
    assert_int_equal(status, CLATTN_ERROR_BUILD_FAILED);
    assert_null(program);
    const char *msg = clattn_last_error(ctx);
    assert_non_null(strstr(msg, "build log"));
    assert_non_null(strstr(msg, "-DSOME_OPTION=1"));
    assert_non_null(strstr(msg, "this_identifier_does_not_exist"));
    /* The complete log went to the log callback too. */
    assert_true(log.errors >= 1);
    assert_non_null(strstr(log.last, "this_identifier_does_not_exist"));
    clattn_context_destroy(&ctx);
}

static void broken_source_fails_context_creation_cleanly(void **state)
{
    (void)state;
    test_log log;
    memset(&log, 0, sizeof(log));
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.log_callback = test_log_callback;
    params.log_user_data = &log;
    clattn_context *ctx = (clattn_context *)0x1;
    clattn__test_extra_source = broken_source;
    clattn_status status = clattn_context_create(&ctx, &params);
    clattn__test_extra_source = NULL;
    assert_int_equal(status, CLATTN_ERROR_BUILD_FAILED);
    assert_null(ctx);
    assert_non_null(strstr(clattn_last_error(NULL), "this_identifier_does_not_exist"));
    assert_non_null(strstr(log.last, "this_identifier_does_not_exist"));
    /* And the next creation succeeds. */
    ctx = test_context_create(NULL);
    assert_non_null(ctx);
    clattn_context_destroy(&ctx);
}

static void valid_extra_source_builds(void **state)
{
    (void)state;
    clattn__test_extra_source = "__kernel void clattn_extra(__global float *x) { x[0] = 1.0f; }\n";
    clattn_context *ctx = test_context_create(NULL);
    clattn__test_extra_source = NULL;
    assert_non_null(ctx);
    cl_int err;
    cl_kernel k = clCreateKernel(ctx->kernels.program, "clattn_extra", &err);
    assert_int_equal(err, CL_SUCCESS);
    clReleaseKernel(k);
    clattn_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedded_sources_are_present),
        cmocka_unit_test(kernels_are_built_with_device_options),
        cmocka_unit_test(broken_source_returns_build_failed_with_log),
        cmocka_unit_test(broken_source_fails_context_creation_cleanly),
        cmocka_unit_test(valid_extra_source_builds),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
