/* Pooling token states and L2 normalisation on the device (pooling.c, cl/pooling.cl). */
#ifndef CLATTN_POOLING_H
#define CLATTN_POOLING_H

#include "clattn/pretrained.h"

#include "base/errors.h"

/* out [B, d] = pooled x [B, N, d] (pad [B, N], nonzero = padding, or NULL), then L2-normalised
 * when `normalize`; offsets in floats, every block contiguous. */
clattn_status clattn__pool(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem pad,
                           size_t pad_offset, size_t batch, size_t seq, size_t d,
                           clattn_pooling pooling, int normalize, cl_mem out, size_t out_offset);

/* pad [B, N] from pad_offset (floats) = the padding of right-padded sequences of these lengths
 * (lengths: uint32 [B] on the device): 1 at j >= lengths[b], else 0. */
clattn_status clattn__padding_from_lengths(clattn_context *ctx, cl_mem lengths, size_t batch,
                                           size_t seq, cl_mem pad, size_t pad_offset);

#endif /* CLATTN_POOLING_H */
