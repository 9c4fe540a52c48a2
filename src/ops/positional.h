/* Positional encoding and token embedding kernels (positional.c). */
#ifndef CLATTN_POSITIONAL_H
#define CLATTN_POSITIONAL_H

#include <stdbool.h>

#include "base/errors.h"

/* out[t] = in[t] + pe[offset + t % seq] for tokens = batch·seq rows of width d (out may be in);
 * pe: a positional table [positions, d] (the sinusoidal one or a learned one). */
clattn_status clattn__add_positional(clattn_context *ctx, cl_mem pe, cl_mem in, size_t in_offset,
                                     cl_mem out, size_t out_offset, size_t tokens, size_t seq,
                                     size_t d, size_t offset);

/* What the token embedding reads. */
typedef struct clattn_embed_args {
    cl_mem ids;             /* int32 [tokens], each below the table's rows */
    cl_mem table;           /* [vocab, d] */
    float scale;            /* the table's rows are multiplied by it */
    cl_mem positions;       /* a positional table [positions, d], or NULL */
    size_t position_offset; /* token t reads row position_offset + t % seq */
    cl_mem types;           /* int32 [tokens] token types, with type_table; else NULL */
    cl_mem type_table;      /* [type_vocab, d], or NULL */
    cl_mem position_rows;   /* int32 [tokens]: token t reads positions row position_rows[t]
                             * (RoBERTa-style positions); NULL: row position_offset + t % seq */
} clattn_embed_args;

/* x[t] = table[ids[t]]·scale + type_table[types[t]] + positions[row of t] (above). */
clattn_status clattn__embed(clattn_context *ctx, const clattn_embed_args *args, size_t tokens,
                            size_t seq, size_t d, cl_mem x);

/* clattn__embed, then x = LayerNorm(x) with weight and bias [d] (an embedding LayerNorm): one
 * launch on CPU devices when d is a multiple of 16 (the bytes of the two launches), else two. */
clattn_status clattn__embed_layernorm(clattn_context *ctx, const clattn_embed_args *args,
                                      size_t tokens, size_t seq, size_t d, cl_mem x,
                                      cl_mem weight, cl_mem bias, float eps);

#endif /* CLATTN_POSITIONAL_H */
