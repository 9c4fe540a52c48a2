/*
 * libclattn — decoder.h: the Transformer decoder (nn.TransformerDecoderLayer /
 * nn.TransformerDecoder semantics, batch_first, inference, no dropout).
 *
 * One layer, with x [B, T, d_model] (the target) and memory [B, S, d_model] (the encoder's
 * output):
 *   post-LN (norm_first = 0, the paper):
 *     x = LN1(x + SA(x));  x = LN2(x + CA(x, memory));  x = LN3(x + FF(x))
 *   pre-LN (norm_first = 1):
 *     x = x + SA(LN1(x));  x = x + CA(LN2(x), memory);  x = x + FF(LN3(x))
 * where SA is masked multi-head self-attention (tgt_mask / causal, tgt_key_padding_mask), CA is
 * multi-head attention with queries from x and keys and values from memory (memory_mask,
 * memory_key_padding_mask), FF(x) = linear2(act(linear1(x))). N layers, then an optional final
 * LayerNorm (nn.TransformerDecoder.norm). Masks follow PyTorch: boolean true / nonzero = ignore,
 * float masks are added (see attention.h).
 *
 * Weights use nn.TransformerDecoder's state_dict names (see clattn_decoder_load_weights). Same
 * thread-safety rule as the context.
 */
#ifndef CLATTN_DECODER_H
#define CLATTN_DECODER_H

#include "clattn/encoder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_decoder clattn_decoder;

typedef struct clattn_decoder_config {
    size_t d_model;
    size_t nhead;
    size_t num_layers;
    size_t dim_feedforward;
    size_t head_dim_qk;   /* d_k; 0 selects d_model / nhead */
    size_t head_dim_v;    /* d_v; 0 selects d_model / nhead */
    clattn_activation activation;
    int norm_first;       /* 0: post-LN (the paper); 1: pre-LN */
    float layer_norm_eps; /* default 1e-5 */
    int final_norm;       /* 1: a final LayerNorm after the last layer ("norm.weight") */
    uint8_t reserved[64]; /* must be zero */
} clattn_decoder_config;

/* nn.TransformerDecoderLayer's defaults: relu, post-LN, eps 1e-5, no final norm. */
CLATTN_API void clattn_decoder_config_default(clattn_decoder_config *config, size_t d_model,
                                              size_t nhead, size_t num_layers,
                                              size_t dim_feedforward);

/* Creates a decoder without weights. Errors: invalid sizes, non-zero reserved bytes. */
CLATTN_API clattn_status clattn_decoder_create(clattn_context *ctx, clattn_decoder **decoder,
                                               const clattn_decoder_config *config);

/* Releases the decoder and its device buffers; sets *decoder to NULL. Accepts NULL. */
CLATTN_API void clattn_decoder_destroy(clattn_decoder **decoder);

CLATTN_API clattn_status clattn_decoder_get_config(const clattn_decoder *decoder,
                                                   clattn_decoder_config *config);

/*
 * Loads every weight by asking `lookup` for its nn.TransformerDecoder name:
 *   layers.{i}.self_attn.in_proj_weight [3·d_model, d_model] (or q/k/v_proj_weight),
 *   layers.{i}.self_attn.in_proj_bias, .out_proj.weight, .out_proj.bias
 *   layers.{i}.multihead_attn.* (the same names: the cross-attention)
 *   layers.{i}.linear1.weight [d_ff, d_model], .bias; layers.{i}.linear2.weight, .bias
 *   layers.{i}.norm1.weight, .bias; norm2.*; norm3.* [d_model]
 *   norm.weight, norm.bias [d_model]   when final_norm
 * Errors as clattn_encoder_load_weights; on error the decoder keeps its previous weights.
 */
CLATTN_API clattn_status clattn_decoder_load_weights(clattn_decoder *decoder,
                                                     clattn_weight_lookup lookup,
                                                     void *user_data);

/* Seeded random weights in PyTorch's initialisation ranges (as clattn_encoder_init_random). */
CLATTN_API clattn_status clattn_decoder_init_random(clattn_decoder *decoder, uint64_t seed);

typedef struct clattn_decoder_forward_params {
    /* Self-attention over the target: */
    const clattn_tensor *tgt_mask;             /* [T, T], [B·h, T, T] or [B, h, T, T] */
    clattn_mask_kind tgt_mask_kind;
    int tgt_is_causal;                         /* position t sees targets 0..t only */
    const clattn_tensor *tgt_key_padding_mask; /* [B, T], nonzero = padding */
    clattn_mask_kind tgt_key_padding_mask_kind;
    /* Cross-attention over the memory: */
    const clattn_tensor *memory_mask;          /* [T, S], [B·h, T, S] or [B, h, T, S] */
    clattn_mask_kind memory_mask_kind;
    const clattn_tensor *memory_key_padding_mask; /* [B, S], nonzero = padding */
    clattn_mask_kind memory_key_padding_mask_kind;
    clattn_attention_path path;
    uint8_t reserved[64];                      /* must be zero */
} clattn_decoder_forward_params;

/* Boolean masks, no causal mask, the automatic attention path. */
CLATTN_API void clattn_decoder_forward_params_default(clattn_decoder_forward_params *params);

/*
 * out = decoder(tgt, memory), teacher-forced (every target position at once).
 *   tgt:    [B, T, d_model] contiguous
 *   memory: [B, S, d_model] contiguous
 *   out:    [B, T, d_model] contiguous
 * params may be NULL for the defaults. Errors: CLATTN_ERROR_INVALID_ARGUMENT (NULLs, no weights,
 * tensors of another context, non-contiguous tensors, reserved bytes), CLATTN_ERROR_SHAPE_MISMATCH
 * (a wrong width, a batch that differs, masks that do not broadcast; the message names both
 * shapes), CLATTN_ERROR_TOO_LARGE, and the device's errors.
 */
CLATTN_API clattn_status clattn_decoder_forward(clattn_decoder *decoder, const clattn_tensor *tgt,
                                                const clattn_tensor *memory, clattn_tensor *out,
                                                const clattn_decoder_forward_params *params);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_DECODER_H */
