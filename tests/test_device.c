/* Listing devices and selecting one by every form of device spec. */
#include "common/test_util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clattn_device_info devices[16];
static size_t device_count;

static int setup(void **state)
{
    (void)state;
    test_require_device();
    unsetenv("CLATTN_DEVICE");
    if (clattn_list_devices(devices, 16, &device_count) != CLATTN_OK)
        return -1;
    return 0;
}

/* Creates a context from a spec; returns the status, and the device name on success. */
static clattn_status create_with(const char *spec, char *name_out)
{
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = spec;
    params.log_level = CLATTN_LOG_NONE;
    clattn_context *ctx = NULL;
    clattn_status status = clattn_context_create(&ctx, &params);
    if (status == CLATTN_OK) {
        clattn_device_info info;
        assert_int_equal(clattn_context_device_info(ctx, &info), CLATTN_OK);
        if (name_out)
            strcpy(name_out, info.name);
        clattn_context_destroy(&ctx);
    } else {
        assert_null(ctx);
    }
    return status;
}

static const clattn_device_info *first_of(clattn_device_type type)
{
    for (size_t i = 0; i < device_count && i < 16; i++)
        if (devices[i].type == type)
            return &devices[i];
    return NULL;
}

static void list_reports_plausible_facts(void **state)
{
    (void)state;
    assert_true(device_count >= 1);
    for (size_t i = 0; i < device_count && i < 16; i++) {
        const clattn_device_info *d = &devices[i];
        assert_true(strlen(d->name) > 0);
        assert_true(strlen(d->platform_name) > 0);
        assert_true(strlen(d->driver_version) > 0);
        assert_non_null(strstr(d->opencl_version, "OpenCL"));
        assert_true(d->compute_units >= 1);
        assert_true(d->global_mem_bytes >= d->max_alloc_bytes);
        assert_true(d->max_alloc_bytes >= 128u * 1024 * 1024); /* OpenCL's minimum */
        assert_true(d->local_mem_bytes >= 16 * 1024);           /* OpenCL 1.2's minimum */
        assert_true(d->max_work_group_size >= 1);
        assert_true(d->fp64 == 0 || d->fp64 == 1);
    }
}

static void list_counts_without_filling(void **state)
{
    (void)state;
    size_t count = 0;
    assert_int_equal(clattn_list_devices(NULL, 0, &count), CLATTN_OK);
    assert_int_equal(count, device_count);
    clattn_device_info one;
    memset(&one, 0xab, sizeof(one));
    assert_int_equal(clattn_list_devices(&one, 1, &count), CLATTN_OK);
    assert_string_equal(one.name, devices[0].name);
    assert_int_equal(one.platform_index, devices[0].platform_index);
}

static void default_prefers_gpu_then_cpu(void **state)
{
    (void)state;
    char name[CLATTN_DEVICE_STRING_SIZE];
    assert_int_equal(create_with(NULL, name), CLATTN_OK);
    const clattn_device_info *expect = first_of(CLATTN_DEVICE_TYPE_GPU);
    if (!expect)
        expect = first_of(CLATTN_DEVICE_TYPE_CPU);
    if (!expect)
        expect = &devices[0];
    assert_string_equal(name, expect->name);
    assert_int_equal(create_with("", name), CLATTN_OK);
    assert_string_equal(name, expect->name);
}

static void spec_cpu_and_gpu_any_case(void **state)
{
    (void)state;
    char name[CLATTN_DEVICE_STRING_SIZE];
    const clattn_device_info *cpu = first_of(CLATTN_DEVICE_TYPE_CPU);
    const clattn_device_info *gpu = first_of(CLATTN_DEVICE_TYPE_GPU);
    if (cpu) {
        assert_int_equal(create_with("cpu", name), CLATTN_OK);
        assert_string_equal(name, cpu->name);
        assert_int_equal(create_with("CPU", name), CLATTN_OK);
        assert_string_equal(name, cpu->name);
    }
    if (gpu) {
        assert_int_equal(create_with("Gpu", name), CLATTN_OK);
        assert_string_equal(name, gpu->name);
    } else {
        /* No GPU here: the spec must fail and the message must list what was found. */
        assert_int_equal(create_with("gpu", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
        assert_non_null(strstr(clattn_last_error(NULL), "'gpu'"));
        assert_non_null(strstr(clattn_last_error(NULL), devices[0].name));
    }
}

static void spec_platform_colon_device(void **state)
{
    (void)state;
    char name[CLATTN_DEVICE_STRING_SIZE], spec[32];
    for (size_t i = 0; i < device_count && i < 16; i++) {
        snprintf(spec, sizeof(spec), "%u:%u", devices[i].platform_index, devices[i].device_index);
        assert_int_equal(create_with(spec, name), CLATTN_OK);
        assert_string_equal(name, devices[i].name);
    }
    assert_int_equal(create_with("99:0", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    assert_int_equal(create_with("0:99", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    assert_non_null(strstr(clattn_last_error(NULL), "[0:0]"));
}

static void spec_name_substring_ignores_case(void **state)
{
    (void)state;
    char name[CLATTN_DEVICE_STRING_SIZE], spec[CLATTN_DEVICE_STRING_SIZE];
    const char *full = devices[0].name;
    size_t len = strlen(full);
    /* The middle of the name, with its case swapped. */
    size_t start = len / 4, n = len / 2 > 0 ? len / 2 : len;
    for (size_t i = 0; i < n; i++) {
        char c = full[start + i];
        spec[i] = (char)(isupper((unsigned char)c) ? tolower((unsigned char)c)
                                                   : toupper((unsigned char)c));
    }
    spec[n] = '\0';
    assert_int_equal(create_with(spec, name), CLATTN_OK);
    /* The first device whose name contains the spec, which may precede devices[0] only if equal. */
    assert_non_null(strcasestr(name, spec));
}

static void spec_that_matches_nothing_lists_devices(void **state)
{
    (void)state;
    assert_int_equal(create_with("no-such-device-anywhere", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    const char *msg = clattn_last_error(NULL);
    assert_non_null(strstr(msg, "no-such-device-anywhere"));
    assert_non_null(strstr(msg, "devices found"));
    for (size_t i = 0; i < device_count && i < 16; i++)
        assert_non_null(strstr(msg, devices[i].name));
}

static void environment_variable_selects_and_params_override_it(void **state)
{
    (void)state;
    char name[CLATTN_DEVICE_STRING_SIZE];
    setenv("CLATTN_DEVICE", "no-such-device-anywhere", 1);
    assert_int_equal(create_with(NULL, NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    assert_non_null(strstr(clattn_last_error(NULL), "CLATTN_DEVICE"));
    /* An explicit spec wins over the environment. */
    assert_int_equal(create_with("0:0", name), CLATTN_OK);
    setenv("CLATTN_DEVICE", "0:0", 1);
    assert_int_equal(create_with(NULL, name), CLATTN_OK);
    assert_string_equal(name, devices[0].name);
    setenv("CLATTN_DEVICE", "", 1); /* empty means unset */
    assert_int_equal(create_with(NULL, name), CLATTN_OK);
    unsetenv("CLATTN_DEVICE");
}

static void malformed_index_specs_are_names(void **state)
{
    (void)state;
    /* "0:" and ":0" are not P:D; as names they match nothing. */
    assert_int_equal(create_with("0:", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    assert_int_equal(create_with(":0", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
    assert_int_equal(create_with("0:0:0", NULL), CLATTN_ERROR_DEVICE_NOT_FOUND);
}

static void context_device_info_rejects_null(void **state)
{
    (void)state;
    clattn_device_info info;
    assert_status_msg(NULL, clattn_context_device_info(NULL, &info), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    clattn_context *ctx = test_context_create(NULL);
    assert_non_null(ctx);
    assert_status_msg(ctx, clattn_context_device_info(ctx, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "info is NULL");
    clattn_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_reports_plausible_facts),
        cmocka_unit_test(list_counts_without_filling),
        cmocka_unit_test(default_prefers_gpu_then_cpu),
        cmocka_unit_test(spec_cpu_and_gpu_any_case),
        cmocka_unit_test(spec_platform_colon_device),
        cmocka_unit_test(spec_name_substring_ignores_case),
        cmocka_unit_test(spec_that_matches_nothing_lists_devices),
        cmocka_unit_test(environment_variable_selects_and_params_override_it),
        cmocka_unit_test(malformed_index_specs_are_names),
        cmocka_unit_test(context_device_info_rejects_null),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
