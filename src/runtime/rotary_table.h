/* Rotary position embeddings' cosines and sines on the device (rotary_table.c): computed on the
 * host from float32 angles as PyTorch does, kept in the context and grown on demand. */
#ifndef CLATTN_ROTARY_TABLE_H
#define CLATTN_ROTARY_TABLE_H

#include "base/errors.h"

/* One base's table. */
typedef struct clattn_rotary_entry {
    cl_mem mem;             /* [positions, pairs] pairs (cos, sin), or NULL */
    size_t positions, pairs;
    double theta;
    uint64_t last_use;      /* the table's call count when it was last handed out */
} clattn_rotary_entry;

/* The context's tables: two bases live side by side, so that a model whose layers alternate
 * between two (ModernBERT's global and local layers) computes each once, not once per layer.
 * A third base replaces the table used least recently. */
#define CLATTN_ROTARY_TABLES 2
typedef struct clattn_rotary_table {
    clattn_rotary_entry entries[CLATTN_ROTARY_TABLES];
    uint64_t calls;
} clattn_rotary_table;

/* The device's table of (cos a, sin a), a = p · θ^(-2k / (2·pairs)), for positions p <
 * `positions` (at least) and k < pairs. It stays valid until a later call grows or replaces it
 * (kernels already enqueued keep theirs: OpenCL releases a buffer after its commands). */
clattn_status clattn__rotary_table(clattn_context *ctx, size_t positions, size_t pairs,
                                   double theta, cl_mem *table);
void clattn__rotary_table_release(clattn_rotary_table *table);

#endif /* CLATTN_ROTARY_TABLE_H */
