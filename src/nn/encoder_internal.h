/* The encoder's internal state, shared by encoder.c (forward) and encoder_weights.c (weights). */
#ifndef CLATTN_ENCODER_INTERNAL_H
#define CLATTN_ENCODER_INTERNAL_H

#include "clattn/encoder.h"
#include "base/errors.h"
#include "layer_weights.h"

/* One layer's device weights (PyTorch layouts). */
typedef struct clattn_encoder_layer {
    clattn_mha *attn;
    clattn_ffn ffn;            /* linear1 [d_ff, d_model], linear2 [d_model, d_ff] */
    clattn_norm norm1, norm2;  /* [d_model] */
} clattn_encoder_layer;

/* Everything load_weights replaces at once. */
typedef struct clattn_encoder_weights {
    clattn_encoder_layer *layers;  /* [num_layers] */
    clattn_norm norm;              /* final norm, or NULLs */
    cl_mem embedding;              /* [vocab_size, d_model], or NULL */
    cl_mem pos_embedding;          /* [max_positions, d_model] (LEARNED), or NULL */
    cl_mem type_embedding;         /* [type_vocab_size, d_model], or NULL */
    clattn_norm embedding_norm;    /* [d_model] (embedding_norm), or NULLs */
    float *relative_bias;          /* host [buckets, nhead] (relative_attention_buckets), or NULL */
} clattn_encoder_weights;

struct clattn_encoder {
    clattn_context *ctx;
    clattn_encoder_config cfg; /* head widths resolved */
    clattn_encoder_weights weights;
    cl_mem alibi_slopes;       /* [nhead] clattn_alibi_slopes (cfg.alibi), or NULL */
    bool loaded;
};

void clattn__encoder_weights_release(clattn_encoder_weights *w, size_t num_layers);

/* Checks a layer stack's configuration and fills in its defaults (head widths, the embedding
 * scale); errors name `function`. The decoder checks its own through it too. */
clattn_status clattn__resolve_layer_config(clattn_context *ctx, const char *function,
                                           const clattn_encoder_config *in,
                                           clattn_encoder_config *out);

#endif
