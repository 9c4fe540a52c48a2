/* float32 device tensors: creation, views, host transfers, fill. */
#include "tensor_internal.h"
#include "buffers.h"
#include "context_internal.h"
#include "launch.h"

#include <stdlib.h>
#include <string.h>

static void contiguous_strides(int ndim, const size_t *shape, size_t *strides)
{
    size_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= shape[d];
    }
}

/* Validates ndim and shape and computes the element count, with overflow checks. */
static clattn_status check_shape(clattn_context *ctx, const char *function, int ndim,
                                 const size_t *shape, size_t *numel)
{
    CLATTN_CHECK_ARG(ctx, function, ndim >= 1 && ndim <= CLATTN_MAX_DIMS,
                     "ndim is %d; it must be 1 to %d", ndim,
                     CLATTN_MAX_DIMS);
    CLATTN_CHECK_ARG(ctx, function, shape, "shape is NULL");
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        CLATTN_CHECK_ARG(ctx, function, shape[d] > 0, "shape[%d] is 0", d);
        if (!clattn__mul_size(n, shape[d], &n))
            return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                                "%s: the element count of the shape overflows size_t", function);
    }
    *numel = n;
    return CLATTN_OK;
}

static clattn_status tensor_new(clattn_context *ctx, clattn_tensor **out, cl_mem mem, size_t offset,
                                int ndim, const size_t *shape, const size_t *strides)
{
    clattn_tensor *t = calloc(1, sizeof(*t));
    if (!t)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a tensor");
    t->ctx = ctx;
    t->mem = mem;
    t->offset = offset;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof(size_t));
    if (strides)
        memcpy(t->strides, strides, (size_t)ndim * sizeof(size_t));
    else
        contiguous_strides(ndim, shape, t->strides);
    *out = t;
    return CLATTN_OK;
}

clattn_status clattn_tensor_create(clattn_context *ctx, clattn_tensor **out, int ndim,
                                   const size_t *shape)
{
    CLATTN_CHECK_ARG(NULL, "clattn_tensor_create", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_create", out, "tensor is NULL");
    *out = NULL;
    size_t numel, bytes;
    clattn_status status = check_shape(ctx, "clattn_tensor_create", ndim, shape, &numel);
    if (status != CLATTN_OK)
        return status;
    if (!clattn__mul_size(numel, sizeof(float), &bytes) || bytes > ctx->info.max_alloc_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "clattn_tensor_create: %zu floats exceed the device's maximum "
                            "allocation of %llu bytes",
                            numel, (unsigned long long)ctx->info.max_alloc_bytes);
    cl_mem mem;
    status = clattn__buffer_create(ctx, bytes, &mem, "a tensor");
    if (status != CLATTN_OK)
        return status;
    status = tensor_new(ctx, out, mem, 0, ndim, shape, NULL);
    if (status != CLATTN_OK)
        clReleaseMemObject(mem);
    return status;
}

clattn_status clattn_tensor_wrap(clattn_context *ctx, clattn_tensor **out, cl_mem buffer,
                                 size_t offset, int ndim, const size_t *shape)
{
    CLATTN_CHECK_ARG(NULL, "clattn_tensor_wrap", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_wrap", out, "tensor is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_wrap", buffer, "buffer is NULL");
    size_t numel, end, bytes;
    clattn_status status = check_shape(ctx, "clattn_tensor_wrap", ndim, shape, &numel);
    if (status != CLATTN_OK)
        return status;

    size_t size = 0;
    cl_context owner = NULL;
    cl_int err = clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof(size), &size, NULL);
    if (err == CL_SUCCESS)
        err = clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof(owner), &owner, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clattn_tensor_wrap: invalid argument: querying buffer");
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_wrap", owner == ctx->cl_ctx,
                     "the buffer belongs to another "
                     "cl_context");
    if (offset > SIZE_MAX - numel || !clattn__mul_size(offset + numel, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "clattn_tensor_wrap: offset + size overflows size_t");
    end = bytes;
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_wrap", end <= size,
                     "the buffer holds %zu bytes but offset "
                     "%zu + %zu floats need %zu",
                     size, offset, numel, end);
    err = clRetainMemObject(buffer);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clattn_tensor_wrap: clRetainMemObject failed");
    status = tensor_new(ctx, out, buffer, offset, ndim, shape, NULL);
    if (status != CLATTN_OK)
        clReleaseMemObject(buffer);
    return status;
}

clattn_status clattn_tensor_view(clattn_tensor **out, const clattn_tensor *base, size_t offset,
                                 int ndim, const size_t *shape, const size_t *strides)
{
    CLATTN_CHECK_ARG(NULL, "clattn_tensor_view", out, "view is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, "clattn_tensor_view", base, "base is NULL");
    clattn_context *ctx = base->ctx;
    size_t numel;
    clattn_status status = check_shape(ctx, "clattn_tensor_view", ndim, shape, &numel);
    if (status != CLATTN_OK)
        return status;

    size_t contiguous[CLATTN_MAX_DIMS];
    if (!strides) {
        contiguous_strides(ndim, shape, contiguous);
        strides = contiguous;
    }
    /* The last element the view can address, in floats from the buffer's start. */
    size_t last = base->offset;
    bool ok = offset <= SIZE_MAX - last;
    last += offset;
    for (int d = 0; d < ndim && ok; d++) {
        size_t reach;
        ok = clattn__mul_size(shape[d] - 1, strides[d], &reach) && reach <= SIZE_MAX - last;
        if (ok)
            last += reach;
    }
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(base->mem, CL_MEM_SIZE, sizeof(size), &size, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clattn_tensor_view: querying the buffer size");
    CLATTN_CHECK_ARG(ctx, "clattn_tensor_view", ok && last < size / sizeof(float),
                     "the view reaches past the end of the "
                     "buffer (%zu floats)",
                     size / sizeof(float));
    err = clRetainMemObject(base->mem);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clattn_tensor_view: clRetainMemObject failed");
    status = tensor_new(ctx, out, base->mem, base->offset + offset, ndim, shape, strides);
    if (status != CLATTN_OK)
        clReleaseMemObject(base->mem);
    return status;
}

void clattn_tensor_destroy(clattn_tensor **tensor)
{
    if (!tensor || !*tensor)
        return;
    clReleaseMemObject((*tensor)->mem);
    free(*tensor);
    *tensor = NULL;
}

int clattn_tensor_is_contiguous(const clattn_tensor *t)
{
    if (!t)
        return 0;
    size_t expected[CLATTN_MAX_DIMS];
    contiguous_strides(t->ndim, t->shape, expected);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != expected[d])
            return 0;
    return 1;
}

size_t clattn_tensor_numel(const clattn_tensor *t)
{
    if (!t)
        return 0;
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static clattn_status check_transfer(const clattn_tensor *t, const void *host, size_t count,
                                    const char *function)
{
    CLATTN_CHECK_ARG(NULL, function, t, "tensor is NULL");
    CLATTN_CHECK_ARG(t->ctx, function, host, "host pointer is NULL");
    CLATTN_CHECK_ARG(t->ctx, function, count == clattn_tensor_numel(t),
                     "count is %zu but the tensor has %zu elements",
                     count, clattn_tensor_numel(t));
    if (!clattn_tensor_is_contiguous(t))
        return clattn__fail(t->ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: the tensor is a strided view; only contiguous tensors can be "
                            "copied to or from the host",
                            function);
    return CLATTN_OK;
}

clattn_status clattn_tensor_write(clattn_tensor *t, const float *src, size_t count)
{
    clattn_status status = check_transfer(t, src, count, "clattn_tensor_write");
    if (status != CLATTN_OK)
        return status;
    cl_int err = clEnqueueWriteBuffer(t->ctx->queue, t->mem, CL_TRUE, t->offset * sizeof(float),
                                      count * sizeof(float), src, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(t->ctx, err, "clattn_tensor_write: clEnqueueWriteBuffer failed");
    return CLATTN_OK;
}

clattn_status clattn_tensor_read(const clattn_tensor *t, float *dst, size_t count)
{
    clattn_status status = check_transfer(t, dst, count, "clattn_tensor_read");
    if (status != CLATTN_OK)
        return status;
    cl_int err = clEnqueueReadBuffer(t->ctx->queue, t->mem, CL_TRUE, t->offset * sizeof(float),
                                     count * sizeof(float), dst, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(t->ctx, err, "clattn_tensor_read: clEnqueueReadBuffer failed");
    return CLATTN_OK;
}

clattn_status clattn_tensor_fill(clattn_tensor *t, float value)
{
    CLATTN_CHECK_ARG(NULL, "clattn_tensor_fill", t, "tensor is NULL");
    /* The kernel sees every tensor as 4-D: leading dimensions of size 1. */
    cl_ulong shape[CLATTN_MAX_DIMS] = {1, 1, 1, 1}, strides[CLATTN_MAX_DIMS] = {0, 0, 0, 0};
    int pad = CLATTN_MAX_DIMS - t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        shape[pad + d] = t->shape[d];
        strides[pad + d] = t->strides[d];
    }
    cl_ulong offset = t->offset;
    clattn_kernel_args args = {t->ctx->kernels.kernel[CLATTN_KERNEL_FILL], 0, CL_SUCCESS};
    CLATTN_ARG(&args, t->mem);
    CLATTN_ARG(&args, offset);
    for (int d = 0; d < CLATTN_MAX_DIMS; d++)
        CLATTN_ARG(&args, shape[d]);
    for (int d = 0; d < CLATTN_MAX_DIMS; d++)
        CLATTN_ARG(&args, strides[d]);
    CLATTN_ARG(&args, value);
    size_t global = clattn_tensor_numel(t);
    return clattn__launch(t->ctx, &args, "fill", 1, &global, NULL, CLATTN_OP_OTHER, 0);
}

int clattn_tensor_ndim(const clattn_tensor *t)
{
    return t ? t->ndim : 0;
}

size_t clattn_tensor_dim(const clattn_tensor *t, int axis)
{
    return t && axis >= 0 && axis < t->ndim ? t->shape[axis] : 0;
}

size_t clattn_tensor_stride(const clattn_tensor *t, int axis)
{
    return t && axis >= 0 && axis < t->ndim ? t->strides[axis] : 0;
}

size_t clattn_tensor_offset(const clattn_tensor *t)
{
    return t ? t->offset : 0;
}

cl_mem clattn_tensor_buffer(const clattn_tensor *t)
{
    return t ? t->mem : NULL;
}
