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
 * Positions inside the self-attention (clattn_decoder_config; none by default, as
 * nn.TransformerDecoder): target token t of a sequence is at position t, counted from the first
 * token (padding included: pad on the right). clattn_decoder_forward places tgt's rows at
 * 0 .. T - 1; clattn_decoder_step places its n new tokens at past .. past + n - 1 (past =
 * clattn_decoder_state_length before the step) and the cached keys at 0 .. past + n - 1, so a
 * step gives what the teacher-forced forward gives at those positions.
 *   - ALiBi (alibi = 1; BLOOM, MPT): with s the scaled score of the query at position i
 *     against the key at position j, s -= m_h·|i - j|, which over the keys j <= i that the
 *     causal mask leaves is -m_h·(i - j); m_h = clattn_alibi_slopes(nhead)[h] for query head h
 *     (grouped-query attention included). Applied before the masks (attention.h's order).
 *   - RoPE (rope_theta > 0; GPT-NeoX, Llama, GPT-J): q and k of every head are rotated at their
 *     positions as clattn_rope_params describes (attention.h: r = rotary_dim, 0 for d_k;
 *     angle p·θ^(-2k/r); rope_interleaved selects GPT-J's pairs (2k, 2k + 1) over GPT-NeoX's
 *     halves (k, k + r/2)). A decoding state caches the keys rotated (as transformers' models
 *     do), in float or half (clattn_decoder_state_params.half_cache: then the rotated key is
 *     what is rounded), with grouped-query attention the num_kv_heads keys.
 * Both may be set together; neither adds anything to the input. Encoder–decoder model files
 * select them with the metadata "positional" (transformer.h).
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
    /* Key/value heads of both attentions (grouped-query attention; 1 = multi-query); 0 selects
     * nhead. It must divide nhead: query head h reads key/value head h / (nhead / num_kv_heads),
     * the K and V projections are num_kv_heads·d_k and num_kv_heads·d_v wide (as
     * clattn_mha_config.num_kv_heads), and the decoding state caches only the kv heads. */
    size_t num_kv_heads;
    /* ---- positions in the self-attention (the top of this file); cross-attention has none ----
     * The same fields and meanings as clattn_encoder_config's. */
    /* 1: ALiBi, s -= m_h·(i - j) on the keys j <= i, slopes clattn_alibi_slopes(nhead). */
    uint8_t alibi;
    /* > 0: rotary embeddings on the self-attention's q and k with this base θ; 0: none. */
    float rope_theta;
    uint32_t rotary_dim;      /* with rope_theta: channels rotated per head, even, <= d_k; 0: all */
    uint8_t rope_interleaved; /* with rope_theta: 1 GPT-J's pairs (2k, 2k + 1); 0 halves */
    uint8_t reserved[43];     /* must be zero */
} clattn_decoder_config;

/* nn.TransformerDecoderLayer's defaults: relu, post-LN, eps 1e-5, no final norm. */
CLATTN_API void clattn_decoder_config_default(clattn_decoder_config *config, size_t d_model,
                                              size_t nhead, size_t num_layers,
                                              size_t dim_feedforward);

/* Creates a decoder without weights. Errors (CLATTN_ERROR_INVALID_ARGUMENT): invalid sizes,
 * num_kv_heads not dividing nhead, alibi or rope_interleaved other than 0 or 1, a rope_theta
 * that is not 0 nor a finite number >= 1, an odd rotary_dim or one above d_k (with rotary_dim 0 and
 * rope_theta > 0: an odd d_k), non-zero reserved bytes. */
CLATTN_API clattn_status clattn_decoder_create(clattn_context *ctx, clattn_decoder **decoder,
                                               const clattn_decoder_config *config);

/* Releases the decoder and its device buffers; sets *decoder to NULL. Accepts NULL. */
CLATTN_API void clattn_decoder_destroy(clattn_decoder **decoder);

CLATTN_API clattn_status clattn_decoder_get_config(const clattn_decoder *decoder,
                                                   clattn_decoder_config *config);

/*
 * Loads every weight by asking `lookup` for its nn.TransformerDecoder name:
 *   layers.{i}.self_attn.in_proj_weight [3·d_model, d_model] (or q/k/v_proj_weight; with
 *     num_kv_heads h_kv < nhead: [h·d_k + h_kv·d_k + h_kv·d_v, d_model], in_proj_bias alike),
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

/* ---- incremental decoding ---- */

typedef struct clattn_decoder_state clattn_decoder_state;

/* How a decoding state is made. */
typedef struct clattn_decoder_state_params {
    size_t batch;    /* sequences decoded together (sentences, or sentences x beams) */
    size_t capacity; /* target tokens per sequence the cache can hold */
    /* 1: the self-attention keys and values are stored as IEEE half floats (vstore_half_rte /
     * vload_half: core OpenCL, every device, no cl_khr_fp16 needed), halving the cache's
     * memory and the bytes each step reads; arithmetic stays float. A key or value is then
     * rounded to 11 significant bits (relative error at most 2^-11 ≈ 4.9e-4): on unit-scale
     * data the outputs differ from the float cache's by a few 1e-4 (tested to 2e-3 after two
     * layers). The projected memory stays float. 0 (the default): float. */
    int half_cache;
    uint8_t reserved[60]; /* must be zero */
} clattn_decoder_state_params;

/* batch and capacity as given; a float cache. */
CLATTN_API void clattn_decoder_state_params_default(clattn_decoder_state_params *params,
                                                    size_t batch, size_t capacity);

/* A decoding state as params describe it (see clattn_decoder_state_create). Errors as
 * clattn_decoder_state_create, and non-zero reserved bytes or a half_cache other than 0 or 1. */
CLATTN_API clattn_status clattn_decoder_state_create_with(
    clattn_decoder *decoder, clattn_decoder_state **state,
    const clattn_decoder_state_params *params);

/*
 * A decoding state for `batch` sequences of up to `capacity` target tokens: per layer, a cache
 * of the self-attention keys and values of the tokens so far, and the cross-attention keys and
 * values of the memory, projected once by clattn_decoder_state_set_memory. Each
 * clattn_decoder_step then costs O(tokens so far) instead of re-running the whole target.
 * Device memory: the self-attention cache takes 4·B·capacity·h_kv·(d_k + d_v) bytes per layer
 * (allocated here, at creation; h_kv = num_kv_heads, nhead without grouped-query attention),
 * the projected memory 4·B·S·h_kv·(d_k + d_v) bytes per layer (allocated by set_memory). For
 * the paper's base decoder (6 layers, 8 heads of 64) that is 24 KiB per cached token and
 * sequence; with 2 kv heads, 6 KiB; with a half cache (clattn_decoder_state_create_with),
 * half. A cache (all layers together) larger than the device's global memory is
 * CLATTN_ERROR_TOO_LARGE before anything is allocated, its message giving the size needed and
 * the device's; one layer's K or V buffer above the device's maximum allocation too. The state
 * belongs to the decoder's context (same thread rule) and must be destroyed before the decoder.
 */
CLATTN_API clattn_status clattn_decoder_state_create(clattn_decoder *decoder,
                                                     clattn_decoder_state **state, size_t batch,
                                                     size_t capacity);

/* Releases the state; sets *state to NULL. Accepts NULL. */
CLATTN_API void clattn_decoder_state_destroy(clattn_decoder_state **state);

/*
 * Sets the memory [B, S, d_model] (contiguous; B the state's batch) that every later step
 * attends to, with its key-padding mask [B, S] (nonzero = padding; contiguous; NULL: none). Both
 * are copied or projected: the tensors may be released afterwards. Empties the cache.
 */
CLATTN_API clattn_status clattn_decoder_state_set_memory(clattn_decoder_state *state,
                                                         const clattn_tensor *memory,
                                                         const clattn_tensor *memory_key_padding_mask);

/*
 * Appends the n new target tokens x [B, n, d_model] and writes their decoder outputs to
 * out [B, n, d_model] (after the final norm): for every position the same result as
 * clattn_decoder_forward on all tokens so far with tgt_is_causal. n may be more than 1 (a
 * prompt). More tokens than the capacity left is CLATTN_ERROR_OUT_OF_RANGE, and nothing changes;
 * without memory it is CLATTN_ERROR_INVALID_ARGUMENT.
 */
CLATTN_API clattn_status clattn_decoder_step(clattn_decoder_state *state, const clattn_tensor *x,
                                             clattn_tensor *out);

/* Tokens in the cache (0 for NULL). */
CLATTN_API size_t clattn_decoder_state_length(const clattn_decoder_state *state);

/* Empties the cache (the memory stays). */
CLATTN_API void clattn_decoder_state_reset(clattn_decoder_state *state);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_DECODER_H */
