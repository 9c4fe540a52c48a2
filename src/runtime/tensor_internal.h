/* The tensor's fields, for the operations that read tensors given to public functions. */
#ifndef CLATTN_TENSOR_INTERNAL_H
#define CLATTN_TENSOR_INTERNAL_H

#include "clattn/tensor.h"

/* A float32 tensor: element (i0..i3) is at mem[offset + Σ i_d · strides[d]] (in floats). */
struct clattn_tensor {
    clattn_context *ctx;
    cl_mem mem; /* one reference held by this tensor */
    size_t offset;
    int ndim;
    size_t shape[CLATTN_MAX_DIMS];
    size_t strides[CLATTN_MAX_DIMS];
};

#endif /* CLATTN_TENSOR_INTERNAL_H */
