/*
 * libclattn — encoder.h: the Transformer encoder (nn.TransformerEncoderLayer / nn.TransformerEncoder
 * semantics, batch_first, inference), positional encoding, token embedding, Table 3 presets, model
 * files and operation counts.
 *
 * One layer, with x [B, N, d_model]:
 *   post-LN (norm_first = 0, the paper):  x = LN1(x + SA(x));   x = LN2(x + FF(x))
 *   pre-LN  (norm_first = 1):             x = x + SA(LN1(x));   x = x + FF(LN2(x))
 * where SA is multi-head self-attention (see attention.h) and FF(x) = linear2(act(linear1(x))),
 * act = relu, gelu (exact, with erf), gelu_tanh or silu (x·sigmoid(x)). N layers, then an
 * optional final LayerNorm (nn.TransformerEncoder.norm). LayerNorm: (x - mean) / sqrt(var + eps)
 * · weight + bias with the biased variance, as PyTorch.
 *
 * Gated feed-forward (ffn_gated = 1; the GLU variants of Shazeer 2020):
 *     FF(x) = linear2(act(linear1_gate(x)) ⊙ linear1(x))
 * with linear1_gate and linear1 both [d_ff, d_model] (linear1 is the "up" projection, the
 * factor that is not activated) and ⊙ the element-wise product: SwiGLU with act = silu, GeGLU
 * with act = gelu (or gelu_tanh), ReGLU with relu.
 *
 * Without biases: linear_no_bias = 1 drops every bias of the layers' linears (the attention's
 * in_proj_bias and out_proj.bias, linear1.bias, linear1_gate.bias, linear2.bias);
 * norm_no_bias = 1 drops the bias of every LayerNorm (the layers' norm1, norm2, and norm and
 * embedding_norm), which then compute (x - mean) / sqrt(var + eps) · weight. The dropped biases
 * are absent from the weights (not looked up) and count as zero.
 *
 * Before the first layer:
 *   - token input: x = embedding.weight[ids] · embedding_scale (by default sqrt(d_model), the
 *     paper's section 3.4; BERT uses 1), plus token_type_embedding.weight[type ids] when the
 *     model has token types (BERT's segment embedding; type 0 when none are given);
 *   - positional = SINUSOIDAL: x += PE[offset + n] with the paper's table
 *     PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)),
 *     computed on the host in double precision once per maximum length and kept on the device;
 *   - positional = LEARNED: x += pos_embedding.weight[offset + n] (the paper's Table 3 row (E),
 *     and BERT's absolute position embeddings), positions below max_positions;
 *   - positional = LEARNED_PADDED (RoBERTa, MPNet: positions counted from the token ids, as
 *     transformers' create_position_ids_from_input_ids): a token whose id is padding_idx reads
 *     row padding_idx; any other token reads row padding_idx + offset + c, where c counts the
 *     tokens of its row up to and including it whose id is not padding_idx (so the first real
 *     token reads padding_idx + 1 + offset). Without ids (clattn_encoder_forward) every token
 *     counts: row padding_idx + 1 + offset + n;
 *   - embedding_norm: a LayerNorm of the sum (BERT's embeddings.LayerNorm).
 *
 * Relative position bias (MPNet; T5's bidirectional buckets), when relative_attention_buckets
 * is not 0: every layer's attention scores get
 *     bias[h, i, j] = relative_attention_bias.weight[bucket(j - i), h]
 * added (after the 1/sqrt(d_k) scaling, before the masks), computed once per forward pass and
 * shared by all layers. bucket(r), with B = relative_attention_buckets / 2, E = B / 2,
 * D = relative_attention_max_distance and n = |r|:
 *     (r > 0 ? B : 0) + (n < E ? n : min(B - 1, E + (int)(log(n / E) / log(D / E) · (B - E))))
 * with the logarithm in float32 as transformers computes it (MPNet's relative_position_bucket).
 *
 * ALiBi (alibi = 1; JinaBERT): every layer's attention scores get -m_h·|i - j| added (with
 * causal, -m_h·(i - j) over the keys j <= i), the slopes m_h those of clattn_alibi_slopes(nhead)
 * (attention.h). Rotary embeddings (rope_theta > 0; NomicBERT, RoFormer): every layer rotates
 * its projected q and k as clattn_rope_params describes (attention.h) with theta = rope_theta,
 * rotary_dim and the layout rope_interleaved selects, token n of every sequence at position
 * position_offset + n (right padding keeps the real tokens' positions). Neither adds anything
 * to the embeddings; both combine with the positional tables and the relative bias.
 *
 * Local and global layers (local_window > 0; ModernBERT): layer i (counting from 0) is global
 * when global_every > 0 and i % global_every == 0, local otherwise (global_every 0: every layer
 * is local). A global layer attends as above. A local layer's attention ignores the keys j with
 * |i - j| > local_window / 2 for query i (attention.h's sliding window: local_window = 128 lets
 * a query see 64 keys on either side, as ModernBERT's local_attention 128), combined with the
 * masks and the other modifiers; with rope_theta its rotary base is local_rope_theta (0: the
 * same rope_theta). Positions, rotary_dim and the layout are the same in both kinds.
 *
 * First layer without norm1 (first_norm1_identity = 1, pre-LN only; ModernBERT's layer 0, whose
 * attn_norm is nn.Identity): layer 0 computes x = x + SA(x); x = x + FF(LN2(x)). Its
 * "layers.0.norm1.*" are not looked up; the other layers keep their norm1.
 *
 * Weights use nn.TransformerEncoder's state_dict names (see clattn_encoder_load_weights).
 * Same thread-safety rule as the context.
 */
#ifndef CLATTN_ENCODER_H
#define CLATTN_ENCODER_H

#include "clattn/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_encoder clattn_encoder;

typedef enum clattn_activation {
    CLATTN_ACTIVATION_RELU = 0,
    CLATTN_ACTIVATION_GELU = 1,      /* exact: 0.5·x·(1 + erf(x/√2)), PyTorch's default gelu */
    CLATTN_ACTIVATION_GELU_TANH = 2, /* 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): Hugging
                                      * Face's gelu_new / gelu_pytorch_tanh */
    CLATTN_ACTIVATION_SILU = 3,      /* x·sigmoid(x) (swish): SwiGLU's gate with ffn_gated */
} clattn_activation;

typedef enum clattn_positional {
    CLATTN_POSITIONAL_NONE = 0,
    CLATTN_POSITIONAL_SINUSOIDAL = 1,
    CLATTN_POSITIONAL_LEARNED = 2, /* a trained table pos_embedding.weight [max_positions, d] */
    CLATTN_POSITIONAL_LEARNED_PADDED = 3, /* the same table, rows counted from padding_idx + 1
                                           * over the non-padding ids (RoBERTa, MPNet; above) */
} clattn_positional;

typedef struct clattn_encoder_config {
    size_t d_model;
    size_t nhead;
    size_t num_layers;
    size_t dim_feedforward;
    size_t head_dim_qk; /* d_k; 0 selects d_model / nhead */
    size_t head_dim_v;  /* d_v; 0 selects d_model / nhead */
    clattn_activation activation;
    int norm_first;       /* 0: post-LN (the paper); 1: pre-LN */
    float layer_norm_eps; /* default 1e-5 */
    int final_norm;       /* 1: a final LayerNorm after the last layer ("norm.weight") */
    clattn_positional positional;
    size_t vocab_size;    /* > 0: a token embedding "embedding.weight" [vocab_size, d_model] */
    size_t max_positions; /* LEARNED: rows of "pos_embedding.weight" [max_positions, d_model] */
    size_t type_vocab_size; /* > 0: "token_type_embedding.weight" [type_vocab_size, d_model] */
    int embedding_norm;   /* 1: LayerNorm after the embeddings ("embedding_norm.weight", .bias) */
    float embedding_scale; /* token embeddings are multiplied by it; 0 selects sqrt(d_model) */
    int32_t padding_idx;   /* LEARNED_PADDED: the padding token's id (MPNet: 1) */
    /* > 0: a relative position bias "relative_attention_bias.weight" [buckets, nhead] in every
     * layer's attention (above); an even number of at least 4. */
    uint32_t relative_attention_buckets;
    uint32_t relative_attention_max_distance; /* with buckets: 0 selects 128 (MPNet's, T5's) */
    /* 1: gated feed-forward act(linear1_gate(x)) ⊙ linear1(x) (above; "layers.{i}.linear1_gate.*"
     * [d_ff, d_model]); 0: linear1's output activated alone. */
    uint8_t ffn_gated;
    uint8_t linear_no_bias; /* 1: the layers' linears have no biases (above) */
    uint8_t norm_no_bias;   /* 1: the LayerNorms have no biases (above) */
    /* 1: ALiBi in every layer's attention (above), slopes clattn_alibi_slopes(nhead). */
    uint8_t alibi;
    /* > 0: rotary embeddings on every layer's q and k with this base θ (above); 0: none. */
    float rope_theta;
    uint32_t rotary_dim;      /* with rope_theta: channels rotated per head, even, <= d_k; 0: all */
    uint8_t rope_interleaved; /* with rope_theta: 1 GPT-J's pairs (2k, 2k + 1); 0 halves */
    /* 1: layer 0 has no norm1 (pre-LN only; above); 0: every layer has its norm1. */
    uint8_t first_norm1_identity;
    /* With local_window: layer i is global when i % global_every == 0 (ModernBERT's
     * global_attn_every_n_layers), local otherwise; 0: every layer is local (above). Must be 0
     * without local_window. */
    uint16_t global_every;
    /* > 0: the local layers' sliding window w, even (query i sees the keys |i - j| <= w / 2;
     * above); 0: every layer is global. */
    uint32_t local_window;
    /* With local_window and rope_theta: the local layers' rotary base θ (a finite number >= 1);
     * 0: rope_theta. Must be 0 without rope_theta or local_window. */
    float local_rope_theta;
    uint8_t reserved[4];      /* must be zero */
} clattn_encoder_config;

/* nn.TransformerEncoderLayer's defaults: relu, post-LN, eps 1e-5, no final norm, no positional
 * encoding, no embedding, an ungated feed-forward, every bias present. */
CLATTN_API void clattn_encoder_config_default(clattn_encoder_config *config, size_t d_model,
                                              size_t nhead, size_t num_layers,
                                              size_t dim_feedforward);

/* ---- Table 3 presets ---- */

/*
 * The paper's Table 3 configurations: "base", "big", and the named variants of rows (A), (B),
 * (C), each equal to base except where named:
 *   A-h1 (h 1, d_k = d_v = 512), A-h4 (4, 128), A-h16 (16, 32), A-h32 (32, 16);
 *   B-dk16, B-dk32 (d_k 16 or 32, d_v 64, h 8);
 *   C-N2, C-N4, C-N8 (layers); C-d256 (d_model 256, d_k = d_v = 32), C-d1024 (1024, 128);
 *   C-ff1024, C-ff4096 (d_ff).
 * All use post-LN, relu, eps 1e-6 (the paper's), sinusoidal positions and no final norm.
 * Returns CLATTN_ERROR_INVALID_ARGUMENT for an unknown name (the message lists the names).
 */
CLATTN_API clattn_status clattn_encoder_preset(const char *name, clattn_encoder_config *config);
/* The preset names, NULL-terminated, in the order above. */
CLATTN_API const char *const *clattn_encoder_preset_names(void);

/* ---- life cycle and weights ---- */

/* Creates an encoder without weights. Errors (CLATTN_ERROR_INVALID_ARGUMENT): invalid sizes (zero,
 * d_model not divisible by nhead when a head width is derived), an unknown activation, ffn_gated,
 * linear_no_bias, norm_no_bias, alibi, rope_interleaved or first_norm1_identity other than 0 or
 * 1, a rope_theta that is not 0 nor a finite number >= 1, an odd rotary_dim or one above d_k,
 * first_norm1_identity without norm_first, an odd local_window, global_every or
 * local_rope_theta without local_window, a local_rope_theta without rope_theta or that is not a
 * finite number >= 1, non-zero reserved bytes. */
CLATTN_API clattn_status clattn_encoder_create(clattn_context *ctx, clattn_encoder **encoder,
                                               const clattn_encoder_config *config);

/* Releases the encoder and its device buffers; sets *encoder to NULL. Accepts NULL. */
CLATTN_API void clattn_encoder_destroy(clattn_encoder **encoder);

CLATTN_API clattn_status clattn_encoder_get_config(const clattn_encoder *encoder,
                                                   clattn_encoder_config *config);

/* Changes the positional encoding added before the first layer (e.g. to add the sinusoidal
 * table to a model exported from PyTorch, whose encoder has none). */
CLATTN_API clattn_status clattn_encoder_set_positional(clattn_encoder *encoder,
                                                       clattn_positional positional);

/*
 * Returns the host tensor named `name`, or NULL if there is none. The returned tensor (and its
 * data) must stay valid until clattn_encoder_load_weights returns.
 */
typedef const clattn_host_tensor *(*clattn_weight_lookup)(void *user_data, const char *name);

/*
 * Loads every weight the configuration needs by asking `lookup` for it by its PyTorch name:
 *   layers.{i}.self_attn.in_proj_weight [3·d_model, d_model]  (or, when d_k or d_v differ from
 *       d_model/nhead: layers.{i}.self_attn.q_proj_weight [h·d_k, d_model], k_proj_weight
 *       [h·d_k, d_model], v_proj_weight [h·d_v, d_model]; q/k/v_proj_weight are also accepted
 *       in place of in_proj_weight)
 *   layers.{i}.self_attn.in_proj_bias [h·(2·d_k + d_v)]
 *   layers.{i}.self_attn.out_proj.weight [d_model, h·d_v], layers.{i}.self_attn.out_proj.bias
 *   layers.{i}.linear1.weight [d_ff, d_model], layers.{i}.linear1.bias [d_ff]
 *   layers.{i}.linear1_gate.weight [d_ff, d_model], .bias [d_ff]   when ffn_gated
 *   layers.{i}.linear2.weight [d_model, d_ff], layers.{i}.linear2.bias [d_model]
 *   layers.{i}.norm1.weight, .bias, layers.{i}.norm2.weight, .bias [d_model]   (no
 *       layers.0.norm1.* with first_norm1_identity)
 *   norm.weight, norm.bias [d_model]           when final_norm
 *   embedding.weight [vocab_size, d_model]     when vocab_size > 0
 *   pos_embedding.weight [max_positions, d_model]            when positional is LEARNED or
 *                                                            LEARNED_PADDED
 *   token_type_embedding.weight [type_vocab_size, d_model]   when type_vocab_size > 0
 *   embedding_norm.weight, embedding_norm.bias [d_model]     when embedding_norm
 *   relative_attention_bias.weight [buckets, nhead]         when relative_attention_buckets
 * With linear_no_bias the layers' in_proj_bias, out_proj.bias, linear1.bias, linear1_gate.bias
 * and linear2.bias are not looked up; with norm_no_bias no LayerNorm's .bias is.
 * A missing tensor is CLATTN_ERROR_FORMAT ("missing tensor <name>"), a wrong shape
 * CLATTN_ERROR_SHAPE_MISMATCH naming the tensor and both shapes. On error the encoder keeps no
 * partial state: it stays without weights (or with its previous ones).
 */
CLATTN_API clattn_status clattn_encoder_load_weights(clattn_encoder *encoder,
                                                     clattn_weight_lookup lookup,
                                                     void *user_data);

/*
 * Fills every weight with seeded pseudo-random values in PyTorch's initialisation ranges
 * (uniform ±1/sqrt(fan_in) for linear weights, ±1/sqrt(width) for their biases, xavier-uniform
 * for the attention projections,
 * LayerNorm weight 1 and bias 0, attention biases 0, N(0, 1) embeddings). Same seed, same weights,
 * on every platform.
 */
CLATTN_API clattn_status clattn_encoder_init_random(clattn_encoder *encoder, uint64_t seed);

/* ---- forward ---- */

typedef struct clattn_encoder_forward_params {
    /* [B, N] PyTorch's src_key_padding_mask: nonzero (bool) marks padding. */
    const clattn_tensor *key_padding_mask;
    clattn_mask_kind key_padding_mask_kind;
    int causal;             /* each position attends only to itself and earlier ones */
    size_t position_offset; /* the first token's position in the positional table */
    clattn_attention_path path;
    /* clattn_encoder_forward_tokens only: token type ids [B, N] on the host (BERT's segment
     * ids), each below type_vocab_size; NULL: every token has type 0. */
    const int64_t *token_type_ids;
    /* An attention mask given to every layer's attention, as clattn_mha_forward_params's
     * attn_mask: [N, N], [B·h, N, N] or [B, h, N, N] (size-1 dimensions broadcast), bool or
     * additive (attn_mask_kind; default CLATTN_MASK_BOOL), combined with key_padding_mask and
     * causal. NULL: none. An encoder with a relative position bias builds that bias as its
     * layers' attention mask, so it takes no attn_mask (CLATTN_ERROR_UNSUPPORTED). */
    const clattn_tensor *attn_mask;
    clattn_mask_kind attn_mask_kind;
    uint8_t reserved[44];   /* must be zero */
} clattn_encoder_forward_params;

CLATTN_API void clattn_encoder_forward_params_default(clattn_encoder_forward_params *params);

/*
 *   input: [B, N, d_model] contiguous (not modified)
 *   out:   [B, N, d_model] contiguous, may be the input tensor itself
 * params may be NULL. The encoder keeps device scratch buffers sized for the largest call.
 */
CLATTN_API clattn_status clattn_encoder_forward(clattn_encoder *encoder,
                                                const clattn_tensor *input, clattn_tensor *out,
                                                const clattn_encoder_forward_params *params);

/*
 * Token input: ids [batch, seq] on the host (row-major), looked up in embedding.weight and scaled
 * by embedding_scale (by default sqrt(d_model)); LEARNED_PADDED positions are counted from them.
 * Needs vocab_size > 0. An id outside [0, vocab_size) is
 * CLATTN_ERROR_OUT_OF_RANGE naming its position and value; nothing is computed then.
 *   out: [batch, seq, d_model]
 */
CLATTN_API clattn_status clattn_encoder_forward_tokens(clattn_encoder *encoder, const int64_t *ids,
                                                       size_t batch, size_t seq,
                                                       clattn_tensor *out,
                                                       const clattn_encoder_forward_params *params);

/* ---- positional encoding on its own ---- */

/* Fills table[positions, d_model] with the paper's sinusoidal encoding, in double precision
 * rounded to float (row p is position p). */
CLATTN_API clattn_status clattn_sinusoidal_table(float *table, size_t positions, size_t d_model);

/* x[b, n, :] += PE[offset + n, :] on a contiguous [B, N, d] tensor, in place. */
CLATTN_API clattn_status clattn_add_sinusoidal(clattn_context *ctx, clattn_tensor *x,
                                               size_t offset);

/* ---- model files ---- */

/*
 * Loads an encoder from a safetensors file (the format is described here): the configuration from the
 * header's __metadata__ (string values: d_model, nhead, num_layers, dim_feedforward, activation
 * "relu"|"gelu"|"gelu_tanh"|"silu", norm_first "true"|"false", layer_norm_eps, positional
 * "none"|"sinusoidal", and optionally head_dim_qk, head_dim_v, and ffn_gated, linear_no_bias,
 * norm_no_bias "true"|"false" (absent: false)), the weights by their PyTorch names, F32, F16 or
 * BF16.
 * final_norm and vocab_size follow from the presence of norm.weight and embedding.weight.
 * Errors name the file and what is wrong: CLATTN_ERROR_IO (missing file), CLATTN_ERROR_FORMAT
 * (truncated data, absurd header length, invalid JSON, unknown dtype, missing metadata key or
 * tensor, inconsistent configuration, a num_layers other than the number of layers the tensors
 * hold: "metadata num_layers is 2 but the file holds layers 0-5"),
 * CLATTN_ERROR_SHAPE_MISMATCH (a tensor of the wrong shape:
 * both shapes), CLATTN_ERROR_UNSUPPORTED (a dtype we do not convert).
 */
CLATTN_API clattn_status clattn_encoder_load_file(clattn_context *ctx, clattn_encoder **encoder,
                                                 const char *path);

/* ---- operation counts ---- */

/*
 * The multiply-adds one forward pass performs, per operation (indexed by clattn_op), with the
 * same convention as the context's counters (fvcore's: one multiply-add = one FLOP; attention
 * counts full Nq·Nk products, also when causal). `macs` receives CLATTN_OP_COUNT values.
 */
CLATTN_API clattn_status clattn_encoder_count_macs(const clattn_encoder_config *config,
                                                   size_t batch, size_t seq, uint64_t *macs);

/* The number of parameters (weights and biases, embedding included). */
CLATTN_API clattn_status clattn_encoder_count_params(const clattn_encoder_config *config,
                                                     uint64_t *params);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_ENCODER_H */
