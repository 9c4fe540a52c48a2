/*
 * libclattn — tensor.h: float32 tensors on the device.
 *
 * A clattn_tensor is a float32 device buffer seen through a shape of 1 to 4 dimensions, row-major
 * strides (in elements) and an offset (in elements). Tensors made by clattn_tensor_create are
 * contiguous; clattn_tensor_view makes strided views of another tensor's buffer (e.g. one head of
 * a packed projection). Each tensor holds its own reference to its cl_mem, so a view stays valid
 * after its base tensor is destroyed.
 *
 * A tensor belongs to the context it was made with: use it only with that context and destroy
 * it before the context. Same thread-safety rule as the context.
 *
 * Reads and writes are blocking: when they return, the data has been copied. Device work the
 * library enqueues (attention, layers) runs in order on the context's queue, so reading a result
 * right after the call that produced it is correct.
 */
#ifndef CLATTN_TENSOR_H
#define CLATTN_TENSOR_H

#include "clattn/context.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLATTN_MAX_DIMS 4

typedef struct clattn_tensor clattn_tensor;

/*
 * Creates a contiguous tensor of shape shape[0..ndim-1] (1 <= ndim <= 4, every dimension >= 1).
 * The contents are uninitialised. Fails with CLATTN_ERROR_TOO_LARGE when the byte size overflows
 * or exceeds the device's maximum allocation (the message gives both sizes), with
 * CLATTN_ERROR_OUT_OF_DEVICE_MEMORY when the device cannot allocate it.
 */
CLATTN_API clattn_status clattn_tensor_create(clattn_context *ctx, clattn_tensor **tensor,
                                              int ndim, const size_t *shape);

/*
 * Makes a contiguous tensor over a caller's buffer, starting `offset` floats into it. The library
 * retains `buffer` and releases its reference on destroy; the caller keeps its own. Fails with
 * CLATTN_ERROR_INVALID_ARGUMENT when the buffer is smaller than offset + the tensor's size, or
 * belongs to another OpenCL context.
 */
CLATTN_API clattn_status clattn_tensor_wrap(clattn_context *ctx, clattn_tensor **tensor,
                                            cl_mem buffer, size_t offset, int ndim,
                                            const size_t *shape);

/*
 * Makes a view of base's buffer: element (i0, i1, ...) of the view is the float at
 * base_offset + offset + Σ i_d · strides[d] of the buffer, where base_offset is base's own offset.
 * strides NULL means contiguous. Every element the view can address must lie inside the buffer
 * (CLATTN_ERROR_INVALID_ARGUMENT otherwise). Stride 0 broadcasts a dimension.
 */
CLATTN_API clattn_status clattn_tensor_view(clattn_tensor **view, const clattn_tensor *base,
                                            size_t offset, int ndim, const size_t *shape,
                                            const size_t *strides);

/* Releases the tensor and sets *tensor to NULL. Accepts NULL and a pointer to NULL. */
CLATTN_API void clattn_tensor_destroy(clattn_tensor **tensor);

/*
 * Copies `count` floats from host memory into the tensor, in row-major order. count must equal
 * the number of elements. The tensor must be contiguous (CLATTN_ERROR_UNSUPPORTED for a strided
 * view).
 */
CLATTN_API clattn_status clattn_tensor_write(clattn_tensor *tensor, const float *src,
                                             size_t count);

/* Copies the tensor into `count` floats of host memory (same rules as clattn_tensor_write). */
CLATTN_API clattn_status clattn_tensor_read(const clattn_tensor *tensor, float *dst,
                                            size_t count);

/* Sets every element to `value`. Works on strided views too (enqueued, not blocking). */
CLATTN_API clattn_status clattn_tensor_fill(clattn_tensor *tensor, float value);

/* Shape queries. For an invalid tensor or axis they return 0. */
CLATTN_API int clattn_tensor_ndim(const clattn_tensor *tensor);
CLATTN_API size_t clattn_tensor_dim(const clattn_tensor *tensor, int axis);
CLATTN_API size_t clattn_tensor_stride(const clattn_tensor *tensor, int axis);
CLATTN_API size_t clattn_tensor_offset(const clattn_tensor *tensor);
CLATTN_API size_t clattn_tensor_numel(const clattn_tensor *tensor);
/* 1 when the elements are laid out row-major without gaps. */
CLATTN_API int clattn_tensor_is_contiguous(const clattn_tensor *tensor);
/* The underlying buffer (owned by the tensor: retain it to keep it longer). */
CLATTN_API cl_mem clattn_tensor_buffer(const clattn_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_TENSOR_H */
