/*
 * Device buffers (buffers.c): creation with named errors, growth, uploads of host data, and the
 * context's workspace: one set of named scratch slots that operations borrow for the duration of
 * one call. A slot is grown on demand and kept for the next call; nothing else owns scratch.
 */
#ifndef CLATTN_BUFFERS_H
#define CLATTN_BUFFERS_H

#include "base/errors.h"

/* Releases *mem when set and clears it. */
static inline void clattn__release_mem(cl_mem *mem)
{
    if (*mem)
        clReleaseMemObject(*mem);
    *mem = NULL;
}

/* Allocates a device buffer of `bytes` (at most the device's maximum allocation); `what` names it
 * in the error message. On PoCL's CPU device a buffer of 256 KiB or more has pages of its own,
 * given back to the system when it is released (buffers.c). */
clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what);
/* A new buffer holding `count` floats copied from the host (blocking). */
clattn_status clattn__upload(clattn_context *ctx, const float *data, size_t count,
                             const char *what, cl_mem *mem);
/* Copies `count` floats from the host to mem at `offset` floats (blocking). */
clattn_status clattn__write_floats_at(clattn_context *ctx, cl_mem mem, size_t offset,
                                      const float *data, size_t count, const char *what);

/* Transfers between the host and device buffers, and within the device. Offsets and sizes are in
 * bytes. A write waits until the host data has been copied (the host buffer may be freed on
 * return); a copy or fill is only enqueued (the queue is in order, so later work sees it). On
 * failure the error message is `fmt` formatted, followed by the OpenCL error: callers name the
 * public function and what was transferred in it. */
clattn_status clattn__write_bytes(clattn_context *ctx, cl_mem mem, size_t offset, const void *host,
                                  size_t bytes, const char *fmt, ...) CLATTN_PRINTF(6, 7);
clattn_status clattn__copy_bytes(clattn_context *ctx, cl_mem src, size_t src_offset, cl_mem dst,
                                 size_t dst_offset, size_t bytes, const char *fmt, ...)
    CLATTN_PRINTF(7, 8);
/* Fills `bytes` bytes of mem from `offset` with copies of the `pattern_size` bytes at pattern. */
clattn_status clattn__fill_bytes(clattn_context *ctx, cl_mem mem, const void *pattern,
                                 size_t pattern_size, size_t offset, size_t bytes,
                                 const char *fmt, ...) CLATTN_PRINTF(7, 8);
/* Waits until the queue has done all the work enqueued so far (clFinish), also after a failure:
 * when `status` is already an error it is returned as it is (the first error stands), else the
 * wait's. */
clattn_status clattn__wait(clattn_context *ctx, clattn_status status, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* A rectangular copy (clEnqueueCopyBufferRect): origins and region as {bytes, rows, slices};
 * a pitch of 0 means the tight one. */
typedef struct clattn_rect_copy {
    size_t src_origin[3], dst_origin[3], region[3];
    size_t src_row_pitch, src_slice_pitch, dst_row_pitch, dst_slice_pitch;
} clattn_rect_copy;
clattn_status clattn__copy_rect(clattn_context *ctx, cl_mem src, cl_mem dst,
                                const clattn_rect_copy *rect, const char *fmt, ...)
    CLATTN_PRINTF(5, 6);

/* The workspace's slots. Each belongs to one user, so that a call chain (encoder → attention
 * layer → attention) never hands out the same slot twice. */
typedef enum clattn_slot {
    CLATTN_SLOT_SCORES = 0,    /* unfused attention: scores of a chunk of pairs [pairs, Nq, Nk] */
    CLATTN_SLOT_PACKED_KV,     /* fused attention: keys and values packed per head */
    CLATTN_SLOT_SPLIT_PARTIALS, /* split-key attention: partial states [pairs, Nq, splits, 2 + d_v] */
    CLATTN_SLOT_PROJECTIONS,   /* attention layer: Q | K | V projections [T, 2·h·d_k + h·d_v] */
    CLATTN_SLOT_HEADS,         /* attention layer: concatenated head outputs [T, h·d_v] */
    CLATTN_SLOT_LAYER_X,       /* encoder: activations [T, d_model] */
    CLATTN_SLOT_LAYER_OUT,     /* encoder: a sub-layer's output [T, d_model] */
    CLATTN_SLOT_LAYER_NORMED,  /* encoder (pre-LN): normalised activations [T, d_model] */
    CLATTN_SLOT_FFN_HIDDEN,    /* encoder: feed-forward hidden layer [T, d_ff] */
    CLATTN_SLOT_TOKEN_IDS,     /* encoder: int32 token ids [T] */
    CLATTN_SLOT_TOKEN_TYPES,   /* encoder: int32 token type ids [T] */
    CLATTN_SLOT_POOLED,        /* sentence embeddings: pooled rows [B, d_model] */
    CLATTN_SLOT_POOL_MASK,     /* sentence embeddings: padding of the batch [B, N], 1 = padding */
    CLATTN_SLOT_POOL_LENGTHS,  /* sentence embeddings: the batch's lengths [B] (uint32) */
    CLATTN_SLOT_POOL_STATES,   /* sentence embeddings: the encoder's output [B, N, d_model] */
    CLATTN_SLOT_ROTARY,        /* SDPA with RoPE: rotated q and k [B·H·Nq + B·H_kv·Nk, d_k] */
    CLATTN_SLOT_POSITION_ROWS, /* encoder: int32 rows of the position table per token [T] */
    CLATTN_SLOT_ATTN_BIAS,     /* encoder: relative position bias [H, N, N] */
    CLATTN_SLOT_UNPACKED_WEIGHT, /* GEMM: a weight kept only packed, unpacked for CLBlast [n, k] */
    CLATTN_SLOT_COUNT
} clattn_slot;

typedef struct clattn_workspace {
    cl_mem mem[CLATTN_SLOT_COUNT];
    size_t bytes[CLATTN_SLOT_COUNT];
} clattn_workspace;

/* The slot's buffer, grown to at least `bytes` bytes (the new buffer is allocated before the old
 * one is released, so that on failure the old one stays). Valid until the end of the public call
 * that borrowed it (the next call may grow, and so replace, it). */
clattn_status clattn__workspace_slot(clattn_context *ctx, clattn_slot slot, size_t bytes,
                                     cl_mem *buffer);
/* The most bytes a chunked operation may borrow for one chunk of its scratch
 * (clattn_context_params.workspace_limit_bytes, clamped to the device's maximum allocation). */
uint64_t clattn__workspace_limit(const clattn_context *ctx);
/* Total bytes the workspace holds now. */
size_t clattn__workspace_bytes(const clattn_workspace *ws);
/* Releases every slot. */
void clattn__workspace_release(clattn_workspace *ws);

#endif /* CLATTN_BUFFERS_H */
