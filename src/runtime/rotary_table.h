/* Rotary position embeddings' cosines and sines on the device (rotary_table.c): computed on the
 * host from float32 angles as PyTorch does, for a window of positions (the ones in use, never
 * all from position 0), kept in the context and grown on demand. */
#ifndef CLATTN_ROTARY_TABLE_H
#define CLATTN_ROTARY_TABLE_H

#include "base/errors.h"

/* One base's table: the rows of positions first .. first + positions - 1. */
typedef struct clattn_rotary_entry {
    cl_mem mem;             /* [positions, pairs] pairs (cos, sin), or NULL */
    size_t first;           /* the position of row 0 */
    size_t positions, pairs;
    double theta;
    float *inv_freq;        /* [pairs] the inverse frequencies it was built from, or NULL */
    uint64_t last_use;      /* the table's call count when it was last handed out */
} clattn_rotary_entry;

/* The context's tables: two live side by side, so that a model whose layers alternate between
 * two bases (ModernBERT's global and local layers) computes each once, not once per layer, and
 * so that queries and keys far apart (clattn_sdpa's offsets) keep a window each. A request
 * inside a table's window reuses it; one that overlaps it or lies near it (a gap no wider than
 * the larger of the two windows: a decoding step's next position) extends it; any other takes
 * the table used least recently. Memory and time follow the positions a call rotates, not
 * their offset: each table holds at most about three times the widest window asked of it. */
#define CLATTN_ROTARY_TABLES 2
typedef struct clattn_rotary_table {
    clattn_rotary_entry entries[CLATTN_ROTARY_TABLES];
    uint64_t calls;
} clattn_rotary_table;

/* Pair k's inverse frequency θ^(-2k / (2·pairs)) in float32, as transformers computes it
 * (1 / θ^(float(2k) / float(2·pairs))): the unscaled RoPE's, and what scaled RoPE starts from. */
float clattn__rope_inv_freq(size_t k, size_t pairs, double theta);

/* The device's table of (cos a, sin a), a = p · f_k in float32, k < pairs, for (at least) the
 * positions p = first .. first + count - 1, where f_k is inv_freq[k] (scaled RoPE: pairs floats,
 * copied) or, with inv_freq NULL, clattn__rope_inv_freq(k, pairs, θ). *table_first receives
 * the position of the table's row 0 (<= first), so that position p is row p - *table_first. It
 * stays valid until a later call extends or replaces it (kernels already enqueued keep theirs:
 * OpenCL releases a buffer after its commands). Positions past SIZE_MAX, or a window of 2^32
 * rows or more, are CLATTN_ERROR_TOO_LARGE. */
clattn_status clattn__rotary_table(clattn_context *ctx, size_t first, size_t count, size_t pairs,
                                   double theta, const float *inv_freq, cl_mem *table,
                                   size_t *table_first);
void clattn__rotary_table_release(clattn_rotary_table *table);

#endif /* CLATTN_ROTARY_TABLE_H */
