/* Rotary position embeddings' cosines and sines on the device (rotary_table.c): computed on the
 * host from float32 angles as PyTorch does, kept in the context and grown on demand. */
#ifndef CLATTN_ROTARY_TABLE_H
#define CLATTN_ROTARY_TABLE_H

#include "base/errors.h"

typedef struct clattn_rotary_table {
    cl_mem mem;             /* [positions, pairs] pairs (cos, sin) */
    size_t positions, pairs;
    double theta;
} clattn_rotary_table;

/* The device's table of (cos a, sin a), a = p · θ^(-2k / (2·pairs)), for positions p <
 * `positions` (at least) and k < pairs. */
clattn_status clattn__rotary_table(clattn_context *ctx, size_t positions, size_t pairs,
                                   double theta, cl_mem *table);
void clattn__rotary_table_release(clattn_rotary_table *table);

#endif /* CLATTN_ROTARY_TABLE_H */
