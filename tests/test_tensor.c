/* Tensors: round trips of odd sizes, views, wrapping, fill, and invalid arguments. */
#include "common/test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

static void round_trip(clattn_context *ctx, int ndim, const size_t *shape, uint64_t seed)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *src = malloc(n * sizeof(float));
    test_fill_uniform(src, n, seed, -3.0f, 3.0f);
    clattn_tensor *t = test_tensor_from(ctx, ndim, shape, src);
    assert_int_equal(clattn_tensor_ndim(t), ndim);
    assert_int_equal(clattn_tensor_numel(t), n);
    assert_true(clattn_tensor_is_contiguous(t));
    for (int d = 0; d < ndim; d++)
        assert_int_equal(clattn_tensor_dim(t, d), shape[d]);
    float *back = test_tensor_to_host(t);
    assert_memory_equal(src, back, n * sizeof(float));
    free(back);
    free(src);
    clattn_tensor_destroy(&t);
    assert_null(t);
}

static void round_trips_of_odd_sizes(void **state)
{
    test_fixture *f = *state;
    const size_t sizes[] = {1, 2, 7, 64, 129, 1000, 4097};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        round_trip(f->ctx, 1, &sizes[i], i);
    round_trip(f->ctx, 2, (size_t[]){7, 129}, 11);
    round_trip(f->ctx, 3, (size_t[]){3, 1, 5}, 12);
    round_trip(f->ctx, 4, (size_t[]){3, 5, 7, 11}, 13);
    round_trip(f->ctx, 4, (size_t[]){1, 1, 1, 1}, 14);
}

static void strides_are_row_major(void **state)
{
    test_fixture *f = *state;
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_create(f->ctx, &t, 4, (size_t[]){2, 3, 5, 7}), CLATTN_OK);
    assert_int_equal(clattn_tensor_stride(t, 0), 105);
    assert_int_equal(clattn_tensor_stride(t, 1), 35);
    assert_int_equal(clattn_tensor_stride(t, 2), 7);
    assert_int_equal(clattn_tensor_stride(t, 3), 1);
    assert_int_equal(clattn_tensor_offset(t), 0);
    assert_int_equal(clattn_tensor_dim(t, 4), 0);
    assert_int_equal(clattn_tensor_dim(t, -1), 0);
    assert_non_null(clattn_tensor_buffer(t));
    clattn_tensor_destroy(&t);
}

static void fill_sets_every_element(void **state)
{
    test_fixture *f = *state;
    size_t shape[3] = {3, 7, 5};
    clattn_tensor *t = test_tensor_from(f->ctx, 3, shape, NULL);
    assert_int_equal(clattn_tensor_fill(t, -1.25f), CLATTN_OK);
    float *host = test_tensor_to_host(t);
    for (size_t i = 0; i < 105; i++)
        assert_true(host[i] == -1.25f);
    free(host);
    clattn_tensor_destroy(&t);
}

static void fill_through_a_strided_view_touches_only_the_view(void **state)
{
    test_fixture *f = *state;
    /* base [4, 6]; the view is column 1..2 of rows 1..3: shape [3, 2], strides [6, 1]. */
    size_t shape[2] = {4, 6};
    float zeros[24] = {0};
    clattn_tensor *base = test_tensor_from(f->ctx, 2, shape, zeros);
    clattn_tensor *view = NULL;
    assert_int_equal(clattn_tensor_view(&view, base, 7, 2, (size_t[]){3, 2}, (size_t[]){6, 1}),
                     CLATTN_OK);
    assert_false(clattn_tensor_is_contiguous(view));
    assert_int_equal(clattn_tensor_offset(view), 7);
    assert_int_equal(clattn_tensor_fill(view, 9.0f), CLATTN_OK);
    /* The view keeps the buffer alive after its base is gone. */
    clattn_tensor *again = NULL;
    assert_int_equal(clattn_tensor_view(&again, base, 0, 2, shape, NULL), CLATTN_OK);
    clattn_tensor_destroy(&base);
    float *host = test_tensor_to_host(again);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++) {
            bool inside = r >= 1 && c >= 1 && c <= 2;
            assert_true(host[r * 6 + c] == (inside ? 9.0f : 0.0f));
        }
    free(host);
    float dst[6];
    assert_status_msg(f->ctx, clattn_tensor_read(view, dst, 6), CLATTN_ERROR_UNSUPPORTED,
                      "strided view");
    assert_status_msg(f->ctx, clattn_tensor_write(view, dst, 6), CLATTN_ERROR_UNSUPPORTED,
                      "strided view");
    clattn_tensor_destroy(&view);
    clattn_tensor_destroy(&again);
}

static void a_contiguous_view_reads_its_slice(void **state)
{
    test_fixture *f = *state;
    float data[12];
    for (int i = 0; i < 12; i++)
        data[i] = (float)i;
    clattn_tensor *base = test_tensor_from(f->ctx, 1, (size_t[]){12}, data);
    clattn_tensor *view = NULL;
    assert_int_equal(clattn_tensor_view(&view, base, 4, 2, (size_t[]){2, 3}, NULL), CLATTN_OK);
    assert_true(clattn_tensor_is_contiguous(view));
    float host[6];
    assert_int_equal(clattn_tensor_read(view, host, 6), CLATTN_OK);
    for (int i = 0; i < 6; i++)
        assert_true(host[i] == (float)(4 + i));
    /* A broadcast view (stride 0) is valid but not contiguous. */
    clattn_tensor *bcast = NULL;
    assert_int_equal(clattn_tensor_view(&bcast, base, 0, 2, (size_t[]){5, 12}, (size_t[]){0, 1}),
                     CLATTN_OK);
    assert_false(clattn_tensor_is_contiguous(bcast));
    clattn_tensor_destroy(&bcast);
    clattn_tensor_destroy(&view);
    clattn_tensor_destroy(&base);
}

static void wrap_uses_the_callers_buffer(void **state)
{
    test_fixture *f = *state;
    cl_int err;
    float data[10];
    for (int i = 0; i < 10; i++)
        data[i] = (float)(i * i);
    cl_mem buffer = clCreateBuffer(clattn_context_cl_context(f->ctx),
                                   CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(data), data,
                                   &err);
    assert_int_equal(err, CL_SUCCESS);
    clattn_tensor *t = NULL;
    assert_int_equal(clattn_tensor_wrap(f->ctx, &t, buffer, 3, 2, (size_t[]){2, 3}), CLATTN_OK);
    assert_ptr_equal(clattn_tensor_buffer(t), buffer);
    float host[6];
    assert_int_equal(clattn_tensor_read(t, host, 6), CLATTN_OK);
    for (int i = 0; i < 6; i++)
        assert_true(host[i] == (float)((i + 3) * (i + 3)));
    /* Releasing our reference first: the tensor keeps the buffer alive. */
    assert_int_equal(clReleaseMemObject(buffer), CL_SUCCESS);
    assert_int_equal(clattn_tensor_fill(t, 1.0f), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(t, host, 6), CLATTN_OK);
    assert_true(host[5] == 1.0f);
    clattn_tensor_destroy(&t);
}

static void create_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *t = (clattn_tensor *)0x1;
    size_t shape[4] = {2, 3, 4, 5};
    assert_status_msg(NULL, clattn_tensor_create(NULL, &t, 1, shape),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(ctx, clattn_tensor_create(ctx, NULL, 1, shape),
                      CLATTN_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 0, shape), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ndim is 0");
    assert_null(t);
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 5, shape), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ndim is 5");
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 2, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "shape is NULL");
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 3, (size_t[]){4, 0, 2}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "shape[1] is 0");
    assert_null(t);
}

static void create_rejects_sizes_too_large(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *t = NULL;
    /* The element count overflows size_t. */
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 2, (size_t[]){SIZE_MAX / 2, 3}),
                      CLATTN_ERROR_TOO_LARGE, "overflows");
    /* The element count fits but the bytes overflow. */
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 1, (size_t[]){SIZE_MAX / 2}),
                      CLATTN_ERROR_TOO_LARGE, "maximum allocation");
    /* Fits in size_t but exceeds the device's maximum allocation. */
    clattn_device_info info;
    assert_int_equal(clattn_context_device_info(ctx, &info), CLATTN_OK);
    size_t too_many = (size_t)(info.max_alloc_bytes / sizeof(float)) + 1;
    assert_status_msg(ctx, clattn_tensor_create(ctx, &t, 1, &too_many), CLATTN_ERROR_TOO_LARGE,
                      "maximum allocation");
    assert_null(t);
}

static void wrap_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    cl_int err;
    cl_mem small = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE,
                                  10 * sizeof(float), NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    clattn_tensor *t = NULL;
    assert_status_msg(NULL, clattn_tensor_wrap(NULL, &t, small, 0, 1, (size_t[]){10}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, NULL, small, 0, 1, (size_t[]){10}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, NULL, 0, 1, (size_t[]){10}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "buffer is NULL");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, small, 0, 1, (size_t[]){11}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "holds 40 bytes");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, small, 1, 1, (size_t[]){10}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "holds 40 bytes");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, small, SIZE_MAX, 1, (size_t[]){10}),
                      CLATTN_ERROR_TOO_LARGE, "overflows");
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, small, 0, 0, (size_t[]){10}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ndim");
    assert_null(t);
    /* A buffer of another OpenCL context. */
    cl_device_id device = clattn_context_device(ctx);
    cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_status_msg(ctx, clattn_tensor_wrap(ctx, &t, foreign, 0, 1, (size_t[]){4}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "another cl_context");
    clReleaseMemObject(foreign);
    clReleaseContext(other);
    clReleaseMemObject(small);
}

static void view_rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *base = test_tensor_from(ctx, 1, (size_t[]){12}, NULL);
    clattn_tensor *v = NULL;
    assert_status_msg(NULL, clattn_tensor_view(NULL, base, 0, 1, (size_t[]){4}, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "view is NULL");
    assert_status_msg(NULL, clattn_tensor_view(&v, NULL, 0, 1, (size_t[]){4}, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "base is NULL");
    assert_status_msg(ctx, clattn_tensor_view(&v, base, 9, 1, (size_t[]){4}, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the end");
    assert_status_msg(ctx, clattn_tensor_view(&v, base, 0, 2, (size_t[]){3, 4}, (size_t[]){5, 1}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the end");
    assert_status_msg(ctx, clattn_tensor_view(&v, base, 0, 2, (size_t[]){2, 2},
                                              (size_t[]){SIZE_MAX / 2, 1}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the end");
    assert_status_msg(ctx, clattn_tensor_view(&v, base, SIZE_MAX, 1, (size_t[]){1}, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the end");
    assert_status_msg(ctx, clattn_tensor_view(&v, base, 0, 1, (size_t[]){0}, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "shape[0] is 0");
    assert_null(v);
    clattn_tensor_destroy(&base);
}

static void transfers_reject_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_tensor *t = test_tensor_from(ctx, 2, (size_t[]){2, 3}, NULL);
    float host[6] = {0};
    assert_status_msg(NULL, clattn_tensor_write(NULL, host, 6), CLATTN_ERROR_INVALID_ARGUMENT,
                      "tensor is NULL");
    assert_status_msg(ctx, clattn_tensor_write(t, NULL, 6), CLATTN_ERROR_INVALID_ARGUMENT,
                      "host pointer is NULL");
    assert_status_msg(ctx, clattn_tensor_write(t, host, 5), CLATTN_ERROR_INVALID_ARGUMENT,
                      "count is 5 but the tensor has 6");
    assert_status_msg(NULL, clattn_tensor_read(NULL, host, 6), CLATTN_ERROR_INVALID_ARGUMENT,
                      "tensor is NULL");
    assert_status_msg(ctx, clattn_tensor_read(t, NULL, 6), CLATTN_ERROR_INVALID_ARGUMENT,
                      "host pointer is NULL");
    assert_status_msg(ctx, clattn_tensor_read(t, host, 7), CLATTN_ERROR_INVALID_ARGUMENT,
                      "count is 7");
    assert_status_msg(NULL, clattn_tensor_fill(NULL, 0.0f), CLATTN_ERROR_INVALID_ARGUMENT,
                      "tensor is NULL");
    clattn_tensor_destroy(&t);
}

static void queries_and_destroy_accept_null(void **state)
{
    (void)state;
    assert_int_equal(clattn_tensor_ndim(NULL), 0);
    assert_int_equal(clattn_tensor_dim(NULL, 0), 0);
    assert_int_equal(clattn_tensor_stride(NULL, 0), 0);
    assert_int_equal(clattn_tensor_offset(NULL), 0);
    assert_int_equal(clattn_tensor_numel(NULL), 0);
    assert_int_equal(clattn_tensor_is_contiguous(NULL), 0);
    assert_null(clattn_tensor_buffer(NULL));
    clattn_tensor_destroy(NULL);
    clattn_tensor *t = NULL;
    clattn_tensor_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trips_of_odd_sizes),
        cmocka_unit_test(strides_are_row_major),
        cmocka_unit_test(fill_sets_every_element),
        cmocka_unit_test(fill_through_a_strided_view_touches_only_the_view),
        cmocka_unit_test(a_contiguous_view_reads_its_slice),
        cmocka_unit_test(wrap_uses_the_callers_buffer),
        cmocka_unit_test(create_rejects_bad_arguments),
        cmocka_unit_test(create_rejects_sizes_too_large),
        cmocka_unit_test(wrap_rejects_bad_arguments),
        cmocka_unit_test(view_rejects_bad_arguments),
        cmocka_unit_test(transfers_reject_bad_arguments),
        cmocka_unit_test(queries_and_destroy_accept_null),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
