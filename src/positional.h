/* Positional encoding and token embedding kernels (positional.c). */
#ifndef CLATTN_POSITIONAL_H
#define CLATTN_POSITIONAL_H

#include <stdbool.h>

#include "errors.h"

/* out[t] = in[t] + PE[offset + t % seq] for tokens = batch·seq rows of width d (out may be in). */
clattn_status clattn__add_positional(clattn_context *ctx, cl_mem in, size_t in_offset, cl_mem out,
                                     size_t out_offset, size_t tokens, size_t seq, size_t d,
                                     size_t offset);
/* x[t] = emb[ids[t]] · scale (+ PE[offset + t % seq] when with_positions); ids: int32 [tokens]. */
clattn_status clattn__embed(clattn_context *ctx, cl_mem ids, cl_mem emb, float scale,
                            bool with_positions, size_t offset, size_t tokens, size_t seq, size_t d,
                            cl_mem x);

#endif /* CLATTN_POSITIONAL_H */
