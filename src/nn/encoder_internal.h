/* The encoder's internal state, shared by encoder.c (forward) and encoder_weights.c (weights). */
#ifndef CLATTN_ENCODER_INTERNAL_H
#define CLATTN_ENCODER_INTERNAL_H

#include "clattn/encoder.h"
#include "base/errors.h"
#include "block_stack.h"

/* The weights before the first layer (the layers' are the stack's). */
typedef struct clattn_encoder_weights {
    cl_mem embedding;              /* [vocab_size, d_model], or NULL */
    cl_mem pos_embedding;          /* [max_positions, d_model] (LEARNED), or NULL */
    cl_mem type_embedding;         /* [type_vocab_size, d_model], or NULL */
    clattn_norm embedding_norm;    /* [d_model] (embedding_norm), or NULLs */
} clattn_encoder_weights;

struct clattn_encoder {
    clattn_context *ctx;
    clattn_encoder_config cfg; /* head widths resolved */
    clattn_block_stack stack;  /* the layers: self-attention only */
    clattn_encoder_weights weights;
};

void clattn__encoder_weights_release(clattn_encoder_weights *w);

/* Checks a layer stack's configuration and fills in its defaults (head widths, the embedding
 * scale); errors name `function`. The decoder checks its own through it too. */
clattn_status clattn__resolve_layer_config(clattn_context *ctx, const char *function,
                                           const clattn_encoder_config *in,
                                           clattn_encoder_config *out);

/* clattn_encoder_forward_tokens for the library's own int32 ids [batch, seq] (and token types,
 * or NULL; params->token_type_ids must be NULL): each id checked once against the vocabulary
 * as it is uploaded, no int64 copy. Errors name `function`. */
clattn_status clattn__encoder_forward_ids32(clattn_encoder *encoder, const char *function,
                                            const int32_t *ids, const int32_t *type_ids,
                                            size_t batch, size_t seq, clattn_tensor *out,
                                            const clattn_encoder_forward_params *params);

/* The layer stack a resolved configuration describes (self-attention, no cross-attention);
 * the decoder's stack starts from it too. */
void clattn__block_spec_of_layers(const clattn_encoder_config *config, clattn_block_spec *spec);

#endif
