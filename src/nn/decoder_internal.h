/* The decoder's internal state, shared by decoder.c (forward) and decoder_weights.c. */
#ifndef CLATTN_DECODER_INTERNAL_H
#define CLATTN_DECODER_INTERNAL_H

#include "clattn/decoder.h"

#include "base/errors.h"
#include "layer_weights.h"
#include "mha_internal.h"

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
    cl_mem alibi_slopes;       /* [nhead] clattn_alibi_slopes (cfg.alibi), or NULL */
    bool loaded;
};

void clattn__decoder_weights_release(clattn_decoder_weights *w, size_t num_layers);

/* An incremental decoding state (decoder_state.c). */
struct clattn_decoder_state {
    clattn_decoder *dec;
    size_t batch, capacity, length;
    bool half_cache;          /* the self-attention caches hold half floats */
    clattn_kv_cache *self;    /* [num_layers] self-attention caches */
    cl_mem *memory_k, *memory_v; /* [num_layers] memory projected: [B·S, h_kv·d_k], [B·S, h_kv·d_v] */
    size_t memory_len;        /* S; 0 until set_memory */
    cl_mem memory_mask;       /* [B, S] key padding, or NULL */
    clattn_mask_kind memory_mask_kind;
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
