/* Status names, OpenCL error names, last-error bookkeeping, logging and version. */
#include "common/test_util.h"
#include "base/errors.h"

#include <stdio.h>
#include <string.h>

static const clattn_status all_statuses[] = {
    CLATTN_OK,
    CLATTN_ERROR_INVALID_ARGUMENT,
    CLATTN_ERROR_OUT_OF_HOST_MEMORY,
    CLATTN_ERROR_OUT_OF_DEVICE_MEMORY,
    CLATTN_ERROR_TOO_LARGE,
    CLATTN_ERROR_DEVICE_NOT_FOUND,
    CLATTN_ERROR_OPENCL,
    CLATTN_ERROR_BUILD_FAILED,
    CLATTN_ERROR_CLBLAST,
    CLATTN_ERROR_SHAPE_MISMATCH,
    CLATTN_ERROR_UNSUPPORTED,
    CLATTN_ERROR_IO,
    CLATTN_ERROR_FORMAT,
    CLATTN_ERROR_OUT_OF_RANGE,
};
#define STATUS_COUNT (sizeof(all_statuses) / sizeof(all_statuses[0]))

static void every_status_has_a_distinct_description(void **state)
{
    (void)state;
    for (size_t i = 0; i < STATUS_COUNT; i++) {
        const char *a = clattn_strerror(all_statuses[i]);
        assert_non_null(a);
        assert_string_not_equal(a, "unknown status");
        for (size_t j = i + 1; j < STATUS_COUNT; j++)
            assert_string_not_equal(a, clattn_strerror(all_statuses[j]));
    }
    assert_string_equal(clattn_strerror((clattn_status)-999), "unknown status");
    assert_true(CLATTN_OK == 0);
    for (size_t i = 1; i < STATUS_COUNT; i++)
        assert_true(all_statuses[i] < 0);
}

static void status_names_are_the_enum_names(void **state)
{
    (void)state;
    assert_string_equal(clattn_status_name(CLATTN_OK), "CLATTN_OK");
    assert_string_equal(clattn_status_name(CLATTN_ERROR_BUILD_FAILED), "CLATTN_ERROR_BUILD_FAILED");
    assert_string_equal(clattn_status_name(CLATTN_ERROR_OUT_OF_RANGE), "CLATTN_ERROR_OUT_OF_RANGE");
    for (size_t i = 0; i < STATUS_COUNT; i++)
        assert_non_null(strstr(clattn_status_name(all_statuses[i]), "CLATTN_"));
    assert_string_equal(clattn_status_name((clattn_status)7), "CLATTN_ERROR_UNKNOWN");
}

static void every_opencl_1_2_error_code_has_a_name(void **state)
{
    (void)state;
    for (int code = 0; code >= -19; code--)
        assert_string_not_equal(clattn__cl_error_name(code), "unknown OpenCL error");
    for (int code = -30; code >= -68; code--)
        assert_string_not_equal(clattn__cl_error_name(code), "unknown OpenCL error");
    assert_string_equal(clattn__cl_error_name(CL_INVALID_VALUE), "CL_INVALID_VALUE");
    assert_string_equal(clattn__cl_error_name(CL_BUILD_PROGRAM_FAILURE), "CL_BUILD_PROGRAM_FAILURE");
    assert_string_equal(clattn__cl_error_name(CL_INVALID_DEVICE_PARTITION_COUNT),
                        "CL_INVALID_DEVICE_PARTITION_COUNT");
    assert_string_equal(clattn__cl_error_name(-25), "unknown OpenCL error");
}

static void opencl_errors_map_to_named_statuses(void **state)
{
    (void)state;
    assert_int_equal(clattn__status_from_cl(CL_OUT_OF_HOST_MEMORY), CLATTN_ERROR_OUT_OF_HOST_MEMORY);
    assert_int_equal(clattn__status_from_cl(CL_MEM_OBJECT_ALLOCATION_FAILURE),
                     CLATTN_ERROR_OUT_OF_DEVICE_MEMORY);
    assert_int_equal(clattn__status_from_cl(CL_BUILD_PROGRAM_FAILURE), CLATTN_ERROR_BUILD_FAILED);
    assert_int_equal(clattn__status_from_cl(CL_INVALID_KERNEL_ARGS), CLATTN_ERROR_OPENCL);
    clattn_status s = clattn__fail_cl(NULL, CL_INVALID_WORK_GROUP_SIZE, "launching %s", "k");
    assert_int_equal(s, CLATTN_ERROR_OPENCL);
    assert_string_equal(clattn_last_error(NULL), "launching k: CL_INVALID_WORK_GROUP_SIZE (-54)");
}

static void last_error_without_context_is_per_thread(void **state)
{
    (void)state;
    clattn_status s = clattn_list_devices(NULL, 3, NULL);
    assert_int_equal(s, CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "count is NULL"));
    s = clattn_list_devices(NULL, 3, (size_t[1]){0});
    assert_int_equal(s, CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "infos is NULL but capacity is 3"));
}

static void long_messages_are_kept_whole(void **state)
{
    (void)state;
    char big[20000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    clattn__fail(NULL, CLATTN_ERROR_FORMAT, "%s|end", big);
    assert_int_equal(strlen(clattn_last_error(NULL)), sizeof(big) - 1 + 4);
}

static void version_macro_and_function_agree(void **state)
{
    (void)state;
    assert_int_equal(clattn_version(), CLATTN_VERSION);
    assert_string_equal(clattn_version_string(), CLATTN_VERSION_STRING);
    char expect[32];
    snprintf(expect, sizeof(expect), "%d.%d.%d", CLATTN_VERSION_MAJOR, CLATTN_VERSION_MINOR,
             CLATTN_VERSION_PATCH);
    assert_string_equal(clattn_version_string(), expect);
}

static void log_threshold_filters_levels(void **state)
{
    (void)state;
    test_log log;
    memset(&log, 0, sizeof(log));
    clattn__log_message(test_log_callback, &log, CLATTN_LOG_WARNING, CLATTN_LOG_INFO, "info");
    assert_int_equal(log.count, 0);
    clattn__log_message(test_log_callback, &log, CLATTN_LOG_WARNING, CLATTN_LOG_ERROR, "bad");
    assert_int_equal(log.count, 1);
    assert_int_equal(log.errors, 1);
    assert_string_equal(log.last, "bad");
    clattn__log_message(test_log_callback, &log, CLATTN_LOG_NONE, CLATTN_LOG_ERROR, "muted");
    assert_int_equal(log.count, 1);
}

static void op_and_device_type_names(void **state)
{
    (void)state;
    assert_string_equal(clattn_op_name(CLATTN_OP_SCORES), "scores");
    assert_string_equal(clattn_op_name(CLATTN_OP_FEED_FORWARD), "feed_forward");
    assert_string_equal(clattn_op_name(CLATTN_OP_COUNT), "unknown");
    assert_string_equal(clattn_device_type_name(CLATTN_DEVICE_TYPE_GPU), "gpu");
    assert_string_equal(clattn_device_type_name(CLATTN_DEVICE_TYPE_CPU), "cpu");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_status_has_a_distinct_description),
        cmocka_unit_test(status_names_are_the_enum_names),
        cmocka_unit_test(every_opencl_1_2_error_code_has_a_name),
        cmocka_unit_test(opencl_errors_map_to_named_statuses),
        cmocka_unit_test(last_error_without_context_is_per_thread),
        cmocka_unit_test(long_messages_are_kept_whole),
        cmocka_unit_test(version_macro_and_function_agree),
        cmocka_unit_test(log_threshold_filters_levels),
        cmocka_unit_test(op_and_device_type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
