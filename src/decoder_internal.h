/* The decoder's internal state, shared by decoder.c (forward) and decoder_weights.c. */
#ifndef CLATTN_DECODER_INTERNAL_H
#define CLATTN_DECODER_INTERNAL_H

#include "clattn/decoder.h"

#include "errors.h"
#include "layer_weights.h"

/* One layer's device weights (PyTorch layouts). */
typedef struct clattn_decoder_layer {
    clattn_mha *self_attn;           /* over the target */
    clattn_mha *cross_attn;          /* queries from the target, keys and values from memory */
    clattn_ffn ffn;                  /* linear1 [d_ff, d_model], linear2 [d_model, d_ff] */
    clattn_norm norm1, norm2, norm3; /* [d_model] */
} clattn_decoder_layer;

typedef struct clattn_decoder_weights {
    clattn_decoder_layer *layers; /* [num_layers] */
    clattn_norm norm;             /* final norm, or NULLs */
} clattn_decoder_weights;

struct clattn_decoder {
    clattn_context *ctx;
    clattn_decoder_config cfg; /* head widths resolved */
    clattn_decoder_weights weights;
    bool loaded;
};

void clattn__decoder_weights_release(clattn_decoder_weights *w, size_t num_layers);

#endif /* CLATTN_DECODER_INTERNAL_H */
