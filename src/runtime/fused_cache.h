/*
 * The fused attention programs (fused_cache.c): one program per pair of head widths (d_k, d_v)
 * and key/value type (float, or half for a half-precision cache) and set of score modifiers,
 * specialised with -D options from the tuning, built on first use and kept in a small cache.
 * This module owns the cache's type, storage, build, eviction and release.
 */
#ifndef CLATTN_FUSED_CACHE_H
#define CLATTN_FUSED_CACHE_H

#include <stdbool.h>

#include "base/errors.h"

/* A fused attention program specialised for one pair of head widths and one key/value type. */
typedef struct clattn_fused_program {
    size_t dk, dv;
    bool kv_half;       /* keys and values are half floats (no staged variant then) */
    int mods;           /* the score modifiers compiled in (CLATTN_MOD_* flags; 0: none) */
    cl_program program;
    cl_kernel kernel;
    cl_kernel unstaged; /* clattn_fused_attention (its own object even when `kernel` is the same
                         * function): the first pass of split-key attention */
    cl_kernel combine;  /* clattn_split_combine: the second pass */
    cl_kernel tiled;    /* clattn_fused_attention_tiled (unstaged float programs), else NULL */
    cl_kernel tiled_rows; /* clattn_fused_attention_tiled_rows (with `tiled`), else NULL */
    cl_kernel query; /* clattn_fused_attention_query (with `tiled`, d_k and d_v multiples of 16,
                      * no modifiers), else NULL */
    bool local;         /* `kernel` stages keys and values through __local memory */
    size_t qpw, tk, wg; /* queries per work-item, keys per block, work-group size */
    size_t unstaged_tk; /* keys per block of `unstaged` (1, 2, 4, 8 or 16) */
} clattn_fused_program;

#define CLATTN_FUSED_CACHE_SIZE 8

typedef struct clattn_fused_cache {
    clattn_fused_program entries[CLATTN_FUSED_CACHE_SIZE];
    size_t count;
} clattn_fused_cache;

/* The program for (dk, dv, kv_half, score modifiers `mods`) under the context's tuning, built on first use (the oldest
 * entry is forgotten when the cache is full). With `few_queries` (fewer queries than the tuned
 * queries per work-item, e.g. a decoding step's one), one query per work-item: the unstaged
 * kernel would otherwise repeat the last query in every unused row. Valid until the next call
 * or a clear. */
clattn_status clattn__fused_program(clattn_context *ctx, size_t dk, size_t dv, bool kv_half,
                                    int mods, bool few_queries,
                                    const clattn_fused_program **program);
/* Forgets every program (context destruction, a tuning change). */
void clattn__fused_cache_clear(clattn_fused_cache *cache);

#endif /* CLATTN_FUSED_CACHE_H */
