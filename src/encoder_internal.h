/* The encoder's internal state, shared by encoder.c (forward) and encoder_weights.c (weights). */
#ifndef CLATTN_ENCODER_INTERNAL_H
#define CLATTN_ENCODER_INTERNAL_H

#include "errors.h"
#include "gemm.h"

/* One layer's device weights (PyTorch layouts). */
typedef struct clattn_encoder_layer {
    clattn_mha *attn;
    cl_mem w1, b1;             /* linear1: [d_ff, d_model], [d_ff] */
    cl_mem w2, b2;             /* linear2: [d_model, d_ff], [d_model] */
    cl_mem norm1_w, norm1_b;   /* [d_model] */
    cl_mem norm2_w, norm2_b;   /* [d_model] */
    clattn_gemm_weight lin1, lin2; /* w1 and w2 as the GEMMs read them */
} clattn_encoder_layer;

/* Everything load_weights replaces at once. */
typedef struct clattn_encoder_weights {
    clattn_encoder_layer *layers; /* [num_layers] */
    cl_mem norm_w, norm_b;        /* final norm, or NULL */
    cl_mem embedding;             /* [vocab_size, d_model], or NULL */
    cl_mem pos_embedding;         /* [max_positions, d_model] (LEARNED), or NULL */
    cl_mem type_embedding;        /* [type_vocab_size, d_model], or NULL */
    cl_mem emb_norm_w, emb_norm_b; /* [d_model] (embedding_norm), or NULL */
} clattn_encoder_weights;

struct clattn_encoder {
    clattn_context *ctx;
    clattn_encoder_config cfg; /* head widths resolved */
    clattn_encoder_weights weights;
    bool loaded;
};

void clattn__encoder_weights_release(clattn_encoder_weights *w, size_t num_layers);

#endif
