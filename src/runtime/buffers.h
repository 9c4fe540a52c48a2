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
 * in the error message. */
clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what);
/* A new buffer holding `count` floats copied from the host (blocking). */
clattn_status clattn__upload(clattn_context *ctx, const float *data, size_t count,
                             const char *what, cl_mem *mem);
/* Copies `count` floats from the host to mem at `offset` floats (blocking). */
clattn_status clattn__write_floats_at(clattn_context *ctx, cl_mem mem, size_t offset,
                                      const float *data, size_t count, const char *what);

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
/* Total bytes the workspace holds now. */
size_t clattn__workspace_bytes(const clattn_workspace *ws);
/* Releases every slot. */
void clattn__workspace_release(clattn_workspace *ws);

#endif /* CLATTN_BUFFERS_H */
