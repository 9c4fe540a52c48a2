/* The relative position bias of MPNet (T5's bidirectional log buckets) as an additive attention
 * mask (relative_bias.c). */
#ifndef CLATTN_RELATIVE_BIAS_H
#define CLATTN_RELATIVE_BIAS_H

#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

/* The bucket of key j seen from query i, relative = j - i, with num_buckets buckets in all
 * (half for each direction) and logarithmic buckets up to max_distance: transformers'
 * MPNetEncoder.relative_position_bucket, its float32 logarithm included. */
size_t clattn__relative_bucket(long long relative, size_t num_buckets, size_t max_distance);

/* bias[h, i, j] = table[bucket(j - i), h] for i, j < n.
 *   table: [num_buckets, heads] (relative_attention_bias.weight, host)
 *   bias:  [heads, n, n] (host) */
void clattn__relative_bias_fill(const float *table, size_t num_buckets, size_t heads,
                                size_t max_distance, size_t n, float *bias);

/* Fills *bias (a device buffer of at least heads·n·n floats) with the bias above: the buckets on
 * the host once per call, one upload. The encoder calls it once per forward pass and gives the
 * buffer to every layer as an additive [H, N, N] attention mask. */
clattn_status clattn__relative_bias_upload(clattn_context *ctx, const float *table,
                                           size_t num_buckets, size_t heads, size_t max_distance,
                                           size_t n, cl_mem bias);

#endif /* CLATTN_RELATIVE_BIAS_H */
