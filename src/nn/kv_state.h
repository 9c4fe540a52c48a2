/*
 * The key/value state of a layer stack decoded incrementally (kv_state.c): per layer, a cache of
 * the self-attention's keys and values of the tokens so far, and, for a stack with
 * cross-attention, the memory's keys and values projected once (block_stack.c projects them).
 * A stack without cross-attention uses the self-attention caches alone.
 *
 * Its `batch` sequences are slots: each has its own length (the tokens it has cached), and a
 * run may step any set of slots in use (block_stack.h's clattn_block_run.slots). A slot is
 * acquired and released, truncated to a prefix, or made a copy of another (a shared prompt);
 * the encoder–decoder's state steps all of them together at one length.
 */
#ifndef CLATTN_KV_STATE_H
#define CLATTN_KV_STATE_H

#include <stdbool.h>

#include "base/errors.h"
#include "clattn/attention.h"
#include "mha_internal.h"

typedef struct clattn_kv_state {
    clattn_context *ctx;
    size_t layers, batch, capacity;
    size_t *lengths;          /* [batch] tokens cached per sequence */
    bool *in_use;             /* [batch] slots acquired (clattn__kv_state_acquire) */
    size_t k_width, v_width;  /* h_kv·d_k, h_kv·d_v */
    bool half;                /* the self-attention caches hold half floats */
    clattn_kv_cache *self;    /* [layers] */
    /* Cross-attention memory, for a stack with cross-attention (else memory_k, memory_v NULL):
     * [layers] buffers [B·S, h_kv·d_k], [B·S, h_kv·d_v]. */
    cl_mem *memory_k, *memory_v;
    size_t memory_len;        /* S; 0 while there is none */
    cl_mem memory_mask;       /* [B, S] key padding, or NULL */
    clattn_mask_kind memory_mask_kind;
} clattn_kv_state;

/* A state of `layers` caches [batch, capacity, k_width] and [batch, capacity, v_width] (half
 * floats with `half`), with room for cross memory when `cross`. Refuses, naming `function`, a
 * cache larger than the device's global memory before allocating any. */
clattn_status clattn__kv_state_create(clattn_context *ctx, const char *function, size_t layers,
                                      size_t batch, size_t capacity, size_t k_width,
                                      size_t v_width, bool half, bool cross,
                                      clattn_kv_state **out);

/* Releases the state; sets *state to NULL. Accepts NULL. */
void clattn__kv_state_destroy(clattn_kv_state **state);

/* Releases the cross memory (memory_len 0). */
void clattn__kv_state_release_memory(clattn_kv_state *state);

/* Allocates the cross memory's buffers for S keys per sequence (after releasing any), and the
 * [B, S] key padding mask copied from mask (offset in floats) when mask is not NULL. */
clattn_status clattn__kv_state_alloc_memory(clattn_kv_state *state, const char *function,
                                            size_t S, cl_mem mask, size_t mask_offset);

/* Beam search: sequence r of every cache becomes a copy of sequence parents[r] (r < batch), for
 * the tokens so far (lengths[r] becomes lengths[parents[r]]). */
clattn_status clattn__kv_state_reorder(clattn_kv_state *state, const size_t *parents);

/* The length every sequence has, when they all have the same: true and *length; else false. */
bool clattn__kv_state_common_length(const clattn_kv_state *state, size_t *length);
/* Every sequence empty (the slots stay as they are). */
void clattn__kv_state_clear(clattn_kv_state *state);

/* Slots. Acquire: the first slot not in use, now in use and empty (*slot); none free is
 * CLATTN_ERROR_OUT_OF_RANGE. Release: the slot free again (empty). Truncate: the slot keeps
 * its first `length` tokens (at most its length). Copy: slot `to` (in use) holds the tokens of
 * slot `from` (in use): every layer's keys and values, and its length. Errors name `function`. */
clattn_status clattn__kv_state_acquire(clattn_kv_state *state, const char *function,
                                       size_t *slot);
clattn_status clattn__kv_state_release_slot(clattn_kv_state *state, const char *function,
                                            size_t slot);
clattn_status clattn__kv_state_truncate(clattn_kv_state *state, const char *function,
                                        size_t slot, size_t length);
clattn_status clattn__kv_state_copy(clattn_kv_state *state, const char *function, size_t from,
                                    size_t to);

#endif /* CLATTN_KV_STATE_H */
