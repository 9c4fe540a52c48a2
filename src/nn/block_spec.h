/*
 * A layer stack described by what its layers do: the internal specification that
 * block_stack.c loads and runs. The encoder is such a stack without cross-attention, the
 * encoder–decoder's decoder the same stack with cross-attention (its self-attention causal per
 * call). A new layer feature is a field here, read by block_stack.c; the public configurations
 * (clattn_encoder_config, clattn_decoder_config) are translated into it and do not grow.
 *
 * One layer, with its sub-layers in this order (each a residual block):
 *   self-attention   (norm "layers.{i}.norm1", attention "layers.{i}.self_attn")
 *   cross-attention  (only with cross_attention: "layers.{i}.norm2", "layers.{i}.multihead_attn")
 *   feed-forward     ("layers.{i}.norm2", or norm3 with cross-attention; "layers.{i}.linear1" …)
 * Post-norm: x = norm(x + sub(x)). Pre-norm: x = x + sub(norm(x)), the first norm of layer 0
 * optionally the identity. Then an optional final norm ("norm").
 */
#ifndef CLATTN_BLOCK_SPEC_H
#define CLATTN_BLOCK_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clattn/encoder.h"

/* The most rotary pairs a scaled RoPE holds (rotary_dim 512). */
#define CLATTN_ROPE_MAX_PAIRS 256

/* What a norm computes. */
typedef enum clattn_norm_kind {
    CLATTN_NORM_LAYER = 0, /* LayerNorm: (x - mean) / sqrt(var + eps) · weight + bias */
    CLATTN_NORM_RMS = 1,   /* RMSNorm: x / sqrt(mean(x²) + eps) · weight (no bias) */
} clattn_norm_kind;

typedef struct clattn_block_spec {
    size_t num_layers, d_model;

    /* Norms: every norm of the stack (the layers' and the final one). */
    clattn_norm_kind norm;
    bool norm_bias;           /* LayerNorm: false: weight only, the bias counts as zero */
    bool norm_first;          /* pre-norm; false: post-norm */
    bool first_norm_identity; /* pre-norm only: layer 0's self-attention reads x itself */
    bool final_norm;          /* a norm after the last layer */
    float norm_eps;

    /* Self-attention: nhead query heads, kv_heads key/value heads (kv_heads < nhead:
     * grouped-query attention, 1: multi-query), head widths d_k and d_v. */
    size_t nhead, kv_heads, head_dim_qk, head_dim_v;
    bool causal; /* always causal; false: as each run asks (an encoder's params->causal) */
    bool alibi;  /* ALiBi slopes clattn_alibi_slopes(nhead) */
    float rope_theta;        /* > 0: RoPE on q and k with this base */
    uint32_t rotary_dim;     /* channels rotated per head; 0: all of d_k */
    bool rope_interleaved;   /* GPT-J's pairs; false: halves */
    /* Scaled RoPE (Llama 3.1's frequency factors, linear scaling; nn/rope_scaling.h): pair k of
     * every layer not rotating with local_rope_theta turns at rope_inv_freq[k] (k < rotary
     * pairs) instead of rope_theta^(-2k / rotary_dim). */
    bool rope_scaled;
    float rope_inv_freq[CLATTN_ROPE_MAX_PAIRS];
    /* Sliding-window layers: layer i is local when local_window > 0 and not (global_every > 0
     * and i % global_every == 0); a local layer sees keys within local_window / 2 and rotates
     * with local_rope_theta (0: rope_theta). */
    uint32_t local_window, global_every;
    float local_rope_theta;
    /* > 0: a relative position bias "relative_attention_bias.weight" [buckets, nhead] shared by
     * every layer (MPNet's buckets), max_distance its D. Whole sequences only (no KV state). */
    uint32_t relative_buckets, relative_max_distance;
    /* Per-head RMSNorm (eps norm_eps) of the projected queries and keys, before RoPE, as
     * Qwen3's attention does: weights "layers.{i}.self_attn.q_norm.weight" and
     * ".k_norm.weight" [head_dim_qk]. */
    bool qk_norm;
    /* > 0: soft-capping c of the self-attention's scaled scores, s = c·tanh(s / c), before
     * the masks and the softmax (Gemma 2's attn_logit_softcapping); 0: none. */
    float attn_softcap;

    /* A token's outputs are the same bytes however many tokens run with it: in one call or in
     * chunks, prompt or decode step (a decoder-only LLM's rule): the self-attention never
     * splits its keys (clattn_attention_problem.no_key_split). */
    bool query_count_invariant;

    /* Cross-attention over a memory, after the self-attention. */
    bool cross_attention;

    /* Feed-forward: act(linear1(x)), or gated act(linear1_gate(x)) ⊙ linear1(x), then linear2. */
    size_t d_ff;
    bool ffn_gated;
    int activation;   /* CLATTN_ACT_* */
    bool linear_bias; /* every linear of the layers (attention projections, feed-forward) */
    /* Biases on the self-attention's query, key and value projections only (Qwen2's
     * attention), whatever linear_bias says of the others: "layers.{i}.self_attn.in_proj_bias". */
    bool qkv_bias;

    /* The layers only ever run whole-sequence self-attention (no cross-attention, no KV
     * state): on the CPU GEMM their linear weights are held once, packed. */
    bool packed_only;
} clattn_block_spec;

/* The kernels' activation (CLATTN_ACT_*) of a public clattn_activation. */
int clattn__activation_kind(clattn_activation activation);

/* Whether layer i is a sliding-window (local) layer. */
bool clattn__block_layer_is_local(const clattn_block_spec *spec, size_t i);

#endif /* CLATTN_BLOCK_SPEC_H */
