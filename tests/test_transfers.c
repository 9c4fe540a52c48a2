/* The device transfer helpers of runtime/buffers.h: byte ranges written, filled and copied where
 * asked (and nowhere else), rectangular copies, and a failure's message (the caller's, formatted)
 * and status, the first error standing across a wait. */
#include "common/test_util.h"
#include "runtime/buffers.h"

#include <string.h>

enum { COUNT = 64 };

/* A buffer of COUNT floats holding 0, 1, ..., COUNT - 1. */
static cl_mem counting_buffer(clattn_context *ctx)
{
    float host[COUNT];
    for (int i = 0; i < COUNT; i++)
        host[i] = (float)i;
    cl_mem mem = NULL;
    assert_int_equal(clattn__upload(ctx, host, COUNT, "a test buffer", &mem), CLATTN_OK);
    return mem;
}

static void read_back(clattn_context *ctx, cl_mem mem, float *host)
{
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_wrap(ctx, &t, mem, 0, 1, (size_t[]){COUNT}), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(t, host, COUNT), CLATTN_OK);
    clattn_tensor_destroy(&t);
}

static void write_fill_and_copy_touch_only_their_ranges(void **state)
{
    test_fixture *f = *state;
    cl_mem a = counting_buffer(f->ctx), b = counting_buffer(f->ctx);
    const float written[3] = {-1.0f, -2.0f, -3.0f}, seven = 7.0f;
    assert_int_equal(clattn__write_bytes(f->ctx, a, 5 * sizeof(float), written, sizeof(written),
                                         "writing"),
                     CLATTN_OK);
    assert_int_equal(clattn__fill_bytes(f->ctx, a, &seven, sizeof(seven), 20 * sizeof(float),
                                        4 * sizeof(float), "filling"),
                     CLATTN_OK);
    /* a[4 .. 10) into b at 40: -1, -2, -3 land at b[41 .. 44) */
    assert_int_equal(clattn__copy_bytes(f->ctx, a, 4 * sizeof(float), b, 40 * sizeof(float),
                                        6 * sizeof(float), "copying"),
                     CLATTN_OK);
    float ha[COUNT], hb[COUNT], want_a[COUNT], want_b[COUNT];
    for (int i = 0; i < COUNT; i++)
        want_a[i] = want_b[i] = (float)i;
    memcpy(want_a + 5, written, sizeof(written));
    for (int i = 20; i < 24; i++)
        want_a[i] = seven;
    memcpy(want_b + 40, want_a + 4, 6 * sizeof(float));
    read_back(f->ctx, a, ha);
    read_back(f->ctx, b, hb);
    assert_memory_equal(ha, want_a, sizeof(ha));
    assert_memory_equal(hb, want_b, sizeof(hb));
    clReleaseMemObject(a);
    clReleaseMemObject(b);
}

static void a_rectangular_copy_moves_rows_between_pitches(void **state)
{
    test_fixture *f = *state;
    cl_mem src = counting_buffer(f->ctx), dst = NULL;
    float zeros[COUNT] = {0};
    assert_int_equal(clattn__upload(f->ctx, zeros, COUNT, "a test buffer", &dst), CLATTN_OK);
    const size_t fs = sizeof(float);
    /* rows of 8 floats in src, 3 of them from column 2 of row 1, into rows of 4 in dst from
     * row 2 */
    clattn_rect_copy rect = {.src_origin = {2 * fs, 1, 0},
                             .dst_origin = {0, 2, 0},
                             .region = {3 * fs, 3, 1},
                             .src_row_pitch = 8 * fs,
                             .dst_row_pitch = 4 * fs};
    assert_int_equal(clattn__copy_rect(f->ctx, src, dst, &rect, "copying rows"), CLATTN_OK);
    float got[COUNT], want[COUNT] = {0};
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            want[(2 + r) * 4 + c] = (float)((1 + r) * 8 + 2 + c);
    read_back(f->ctx, dst, got);
    assert_memory_equal(got, want, sizeof(got));
    clReleaseMemObject(src);
    clReleaseMemObject(dst);
}

static void a_failure_reports_the_callers_message(void **state)
{
    test_fixture *f = *state;
    cl_mem a = counting_buffer(f->ctx);
    float host[4] = {0};
    /* past the buffer's end: CL_INVALID_VALUE */
    clattn_status status = clattn__copy_bytes(f->ctx, a, COUNT * sizeof(float), a, 0, 16,
                                              "%s: copying sequence %zu", "clattn_test", (size_t)7);
    assert_int_equal(status, CLATTN_ERROR_OPENCL);
    assert_non_null(strstr(clattn_last_error(f->ctx), "clattn_test: copying sequence 7: "));
    assert_non_null(strstr(clattn_last_error(f->ctx), "CL_INVALID_VALUE"));
    assert_int_not_equal(clattn__write_bytes(f->ctx, a, COUNT * sizeof(float), host, sizeof(host),
                                             "writing %d floats", 4),
                         CLATTN_OK);
    assert_non_null(strstr(clattn_last_error(f->ctx), "writing 4 floats: "));
    assert_int_not_equal(clattn__fill_bytes(f->ctx, a, host, sizeof(float), 0,
                                            (COUNT + 1) * sizeof(float), "filling %s", "it"),
                         CLATTN_OK);
    assert_non_null(strstr(clattn_last_error(f->ctx), "filling it: "));
    /* a wait after a failure keeps the first error and its message */
    assert_int_equal(clattn__wait(f->ctx, CLATTN_ERROR_TOO_LARGE, "waiting"),
                     CLATTN_ERROR_TOO_LARGE);
    assert_non_null(strstr(clattn_last_error(f->ctx), "filling it: "));
    assert_int_equal(clattn__wait(f->ctx, CLATTN_OK, "waiting"), CLATTN_OK);
    clReleaseMemObject(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(write_fill_and_copy_touch_only_their_ranges),
        cmocka_unit_test(a_rectangular_copy_moves_rows_between_pitches),
        cmocka_unit_test(a_failure_reports_the_callers_message),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
