/* Device buffers on PoCL's CPU device give their memory back to the system when released
 * (runtime/buffers.c: large buffers on pages of their own), even after the C library's heap has
 * learnt to keep large free chunks; and such a buffer holds what is written to it. */
#include "common/test_util.h"
#include "runtime/buffers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUFFERS = 16, BUFFER_BYTES = 1 << 20 };

/* VmRSS of this process in KiB (Linux's /proc/self/status). */
static long resident_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    fclose(f);
    assert_true(kib > 0);
    return kib;
}

/* PoCL's CPU device: where buffers are this process's memory from malloc (other
 * implementations keep copies of their own, a GPU's buffers are not the process's). */
static bool pocl_cpu_device(const test_fixture *f)
{
    clattn_device_info info;
    assert_int_equal(clattn_context_device_info(f->ctx, &info), CLATTN_OK);
    return info.type == CLATTN_DEVICE_TYPE_CPU &&
           strstr(info.platform_name, "Portable Computing Language") != NULL;
}

static void released_buffers_return_their_memory(void **state)
{
    test_fixture *f = *state;
    if (!pocl_cpu_device(f)) {
        print_message("not PoCL's CPU device: buffers are not given pages of their own\n");
        return;
    }
    /* glibc raises its thresholds to the size of a large block freed: from here on, blocks up to
     * 24 MiB come from the heap, and up to 48 MiB of free heap stays resident. */
    char *large = malloc((size_t)24 << 20);
    assert_non_null(large);
    memset(large, 1, (size_t)24 << 20);
    free(large);
    long before = resident_kib();
    cl_mem mem[BUFFERS];
    const unsigned char pattern = 0x5a;
    for (int i = 0; i < BUFFERS; i++) {
        assert_int_equal(clattn__buffer_create(f->ctx, BUFFER_BYTES, &mem[i], "a test buffer"),
                         CLATTN_OK);
        assert_int_equal(clattn__fill_bytes(f->ctx, mem[i], &pattern, 1, 0, BUFFER_BYTES,
                                            "filling"),
                         CLATTN_OK);
    }
    assert_int_equal(clattn__wait(f->ctx, CLATTN_OK, "waiting"), CLATTN_OK);
    long filled = resident_kib();
    for (int i = 0; i < BUFFERS; i++)
        clattn__release_mem(&mem[i]);
    assert_int_equal(clattn__wait(f->ctx, CLATTN_OK, "waiting"), CLATTN_OK);
    long released = resident_kib();
    print_message("resident: %ld KiB, %ld filled, %ld released\n", before, filled, released);
    long total_kib = (long)BUFFERS * BUFFER_BYTES / 1024;
    assert_true(filled - before >= total_kib * 3 / 4);   /* the pages were really used */
    assert_true(filled - released >= total_kib * 3 / 4); /* and given back */
}

static void a_large_buffer_holds_what_is_written(void **state)
{
    test_fixture *f = *state;
    enum { COUNT = BUFFER_BYTES / sizeof(float) };
    float *host = malloc(COUNT * sizeof(float)), *back = malloc(COUNT * sizeof(float));
    assert_non_null(host);
    assert_non_null(back);
    for (size_t i = 0; i < COUNT; i++)
        host[i] = (float)i * 0.5f - 7.0f;
    cl_mem a = NULL, b = NULL;
    assert_int_equal(clattn__upload(f->ctx, host, COUNT, "a test buffer", &a), CLATTN_OK);
    assert_int_equal(clattn__buffer_create(f->ctx, COUNT * sizeof(float), &b, "another"),
                     CLATTN_OK);
    assert_int_equal(clattn__copy_bytes(f->ctx, a, 0, b, 0, COUNT * sizeof(float), "copying"),
                     CLATTN_OK);
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_wrap(f->ctx, &t, b, 0, 1, (size_t[]){COUNT}), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(t, back, COUNT), CLATTN_OK);
    clattn_tensor_destroy(&t);
    assert_memory_equal(back, host, COUNT * sizeof(float));
    clattn__release_mem(&a);
    clattn__release_mem(&b);
    free(host);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(released_buffers_return_their_memory),
        cmocka_unit_test(a_large_buffer_holds_what_is_written),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
