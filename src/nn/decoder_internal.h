/* The decoder's internal state, shared by decoder.c (forward, weights) and decoder_state.c. */
#ifndef CLATTN_DECODER_INTERNAL_H
#define CLATTN_DECODER_INTERNAL_H

#include "clattn/decoder.h"

#include "base/errors.h"
#include "block_stack.h"

struct clattn_decoder {
    clattn_context *ctx;
    clattn_decoder_config cfg; /* head widths resolved */
    clattn_block_stack stack;  /* the layers: self-attention, cross-attention, feed-forward */
};

/* An incremental decoding state (decoder_state.c): the stack's key/value state, with room for
 * the cross-attention memory. */
struct clattn_decoder_state {
    clattn_decoder *dec;
    clattn_kv_state *kv;
};

/* Beam search: sequence r of the cache becomes a copy of sequence parents[r] (r < batch), for
 * the tokens so far. */
clattn_status clattn__decoder_state_reorder(clattn_decoder_state *state, const size_t *parents);

/* Runs the layers and the final norm for x [B, n, d_model] into out: teacher-forced over the
 * memory tensor (state NULL), or one incremental step of the state (decoder.c). */
clattn_status clattn__decoder_run(clattn_decoder *dec, clattn_decoder_state *state,
                                  const clattn_tensor *tgt, const clattn_tensor *memory,
                                  clattn_tensor *out, const clattn_decoder_forward_params *params,
                                  const char *function);

#endif /* CLATTN_DECODER_INTERNAL_H */
