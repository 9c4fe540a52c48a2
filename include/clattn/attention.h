/*
 * libclattn — attention.h: scaled dot-product attention and multi-head attention.
 *
 * Semantics follow PyTorch (torch.nn.MultiheadAttention with batch_first=True, and
 * scaled_dot_product_attention):
 *
 *   scores[b,h,i,j] = Σ_c (q[b,h,i,c] · scale) · k[b,h,j,c]  + masks          scale = 1/sqrt(d_k)
 *   P[b,h,i,:]      = softmax(scores[b,h,i,:])
 *   out[b,h,i,:]    = Σ_j P[b,h,i,j] · v[b,h,j,:]
 *
 * Masks (all optional, combinable). Polarity is PyTorch's: TRUE MEANS IGNORE.
 *   - causal:            key j is ignored for query i when j > i (top-left aligned, PyTorch's
 *                        is_causal), also when Nq != Nk.
 *   - attn_mask:         CLATTN_MASK_BOOL: a nonzero element means "ignore this key" (the score
 *                        becomes -inf); CLATTN_MASK_ADDITIVE: the element is added to the score
 *                        (use -INFINITY to ignore).
 *   - key_padding_mask:  [B, Nk], same two kinds; nonzero (bool) marks padding keys.
 * Masks are float32 tensors: a bool mask holds 0 and 1 (any nonzero counts as true).
 *
 * Score modifiers (clattn_sdpa_params; all optional, combinable with each other and the masks).
 * With s the scaled score Σ_c (q·scale)·k of query i against key j, they apply in this order,
 * before the masks (PyTorch's FlexAttention score_mod, then its mask):
 *   1. soft-capping:  s = c · tanh(s / c)                    (Gemma 2: on the scaled score, before
 *                                                              any bias or mask)
 *   2. ALiBi:         s -= m_h · |i - j|                     (JinaBERT; with causal the keys
 *                                                              j <= i remain, where it is
 *                                                              -m_h·(i - j): BLOOM, MPT)
 *   3. relative position bias (T5, MPNet):
 *                     s += table[bucket(j - i), h]           bidirectional log buckets, as
 *                     transformers' T5Attention._relative_position_bucket(bidirectional=True)
 *                     and MPNetAttention's relative_position_bucket: with n = i - j, half =
 *                     num_buckets / 2 and max_exact = half / 2, bucket = (n < 0 ? half : 0) +
 *                     (|n| < max_exact ? |n| : min(half - 1, max_exact + (int)(log(|n| /
 *                     max_exact) / log(max_distance / max_exact) · (half - max_exact))))
 *                     (the logarithm in float32, as PyTorch computes it)
 *   4. sliding window: keys with |i - j| > w/2 are ignored (ModernBERT's local attention); with
 *                     causal, query i sees keys i - w/2 … i. The fused path skips the blocks of
 *                     keys outside every window of a work-item, so its cost grows as N·w.
 * then the masks, then the softmax. Query and key indices are the positions in q and k (query i
 * and key j at the same position when i == j, as the causal mask's top-left alignment).
 *
 * Rotary position embeddings (RoPE; clattn_sdpa_params.rope) rotate q and k before the scores
 * (into workspace copies; the inputs are not changed). With r = rotary_dim, a_k(p) = p ·
 * θ^(-2k/r) for k < r/2, query row i at position query_offset + i and key row j at key_offset + j:
 *   CLATTN_ROPE_HALF (GPT-NeoX, Llama, transformers' rotate_half): channel c < r/2 pairs with
 *     c + r/2:  x'[c] = x[c]·cos a_c - x[c + r/2]·sin a_c,  x'[c + r/2] = x[c + r/2]·cos a_c +
 *     x[c]·sin a_c
 *   CLATTN_ROPE_INTERLEAVED (GPT-J, RoFormer): channels 2k and 2k + 1:  x'[2k] = x[2k]·cos a_k -
 *     x[2k + 1]·sin a_k,  x'[2k + 1] = x[2k + 1]·cos a_k + x[2k]·sin a_k
 * channels c >= r are unchanged. The angles are computed as PyTorch's rotary code computes them
 * (transformers, GPT-NeoX, NomicBERT): θ^(-2k/r) and p·θ^(-2k/r) in float32, then their cosines
 * and sines (in double precision, rounded to float). The offsets move RoPE's positions only (the
 * other modifiers and the causal mask use the row indices i and j). A position is rounded to
 * float32 first, as PyTorch's float position ids are: past 2^24 neighbouring positions share an
 * angle (at 1e8, multiples of 8). The cosines and sines are computed for the positions a call
 * rotates, not from position 0: the context keeps them for a window of positions (rounded out
 * to multiples of 256, extended while it stays within 4 times the window asked for; two
 * windows side by side, e.g. two bases, or queries and keys far apart), so their memory and
 * time follow the number of rows, not the offsets: offsets of 1e8, or past 2^32, cost what
 * offsets of 0 do (4·r bytes on the device per position of the window: n rows rounded out to
 * multiples of 256, up to 4 times that when windows move). A last position past SIZE_MAX is
 * CLATTN_ERROR_TOO_LARGE.
 *
 * A query row whose keys are all ignored gets all-zero attention weights and a zero output (not
 * NaN, unlike PyTorch 1.13's slow path; this is PyTorch's later "safe softmax" behaviour).
 *
 * Two implementations compute this and agree to float32 rounding. The fused one (the default
 * when no attention weights are requested) computes scores, the masked softmax and weights·V in
 * one kernel with an online softmax over blocks of keys, storing no score matrix: O(N) memory at
 * any sequence length. It is specialised per pair of head widths (compiled on first use) and per
 * device (see clattn_tuning in context.h). The unfused one materialises the scores (kernels:
 * scores, row-softmax, weights·V), which is required when the attention weights are requested.
 * When the score matrix of all (batch, head) pairs exceeds the workspace limit (see
 * clattn_context_params.workspace_limit_bytes) it is processed in chunks of (batch, head) pairs;
 * only a single pair whose [Nq, Nk] scores cannot fit fails, with CLATTN_ERROR_TOO_LARGE.
 *
 * Every tensor here must belong to the same context. Inputs may be strided views (see
 * clattn_tensor_view) as long as their last dimension is contiguous (stride 1); outputs must not
 * overlap inputs. All calls enqueue work on the context's queue and return without waiting.
 */
#ifndef CLATTN_ATTENTION_H
#define CLATTN_ATTENTION_H

#include "clattn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clattn_mask_kind {
    CLATTN_MASK_BOOL = 0,     /* nonzero = ignore (PyTorch bool masks) */
    CLATTN_MASK_ADDITIVE = 1, /* added to the scores (PyTorch float masks) */
} clattn_mask_kind;

typedef enum clattn_attention_path {
    CLATTN_PATH_AUTO = 0,    /* fused unless attention weights are requested */
    CLATTN_PATH_UNFUSED = 1, /* scores, softmax, weights·V as separate kernels */
    CLATTN_PATH_FUSED = 2,   /* one kernel, O(N) memory; cannot return attention weights */
} clattn_attention_path;

/* ------------------------------------------------------------------------------------------ */
/* Scaled dot-product attention                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef enum clattn_rope_layout {
    CLATTN_ROPE_HALF = 0,        /* GPT-NeoX / Llama: channel c pairs with c + rotary_dim / 2 */
    CLATTN_ROPE_INTERLEAVED = 1, /* GPT-J / RoFormer: channels 2k and 2k + 1 */
} clattn_rope_layout;

/* Rotary position embeddings on q and k (the top of this file). */
typedef struct clattn_rope_params {
    clattn_rope_layout layout;
    float theta;           /* the base θ; 0 selects 10000 */
    size_t rotary_dim;     /* channels rotated, the first of each head: even, <= d_k; 0: all d_k */
    size_t query_offset;   /* position of query row 0 (e.g. a key/value cache's past length) */
    size_t key_offset;     /* position of key row 0 */
    uint8_t reserved[32];  /* must be zero */
} clattn_rope_params;

CLATTN_API void clattn_rope_params_default(clattn_rope_params *params);

typedef struct clattn_sdpa_params {
    /* Multiplies the scores; 0 selects 1/sqrt(d_k). */
    float scale;
    int causal;
    /* Broadcast as PyTorch does, right-aligned against [B, H, Nq, Nk]: [Nq, Nk], [H, Nq, Nk] or
     * [B, H, Nq, Nk]; any dimension may be 1 to broadcast. (A per-batch mask is [B, 1, Nq, Nk]:
     * a 3-D mask's first dimension is the heads, as in torch's scaled_dot_product_attention.) */
    const clattn_tensor *attn_mask;
    clattn_mask_kind attn_mask_kind;
    /* [B, Nk] (or [1, Nk] to broadcast). */
    const clattn_tensor *key_padding_mask;
    clattn_mask_kind key_padding_mask_kind;
    /* Optional output: the attention probabilities, a contiguous [B, H, Nq, Nk] tensor. */
    clattn_tensor *attn_weights;
    clattn_attention_path path;
    /* Grouped-query (and multi-query) attention, PyTorch's enable_gqa: k and v have H_kv heads,
     * H_kv dividing H, and query head h reads key/value head h / (H / H_kv). */
    int enable_gqa;
    /* ---- score modifiers (see the top of this file); zero / NULL: none ---- */
    /* ALiBi: the slope m_h of every query head, a [H] tensor (clattn_alibi_slopes gives the
     * paper's). */
    const clattn_tensor *alibi_slopes;
    /* Relative position bias: a [num_buckets, H] table (num_buckets >= 4), T5's and MPNet's
     * layout (relative_attention_bias.weight). */
    const clattn_tensor *relative_bias;
    /* The relative buckets' max_distance (> num_buckets / 4); 0 selects 128 (T5, MPNet). */
    size_t relative_max_distance;
    /* Sliding window w: even, >= 2; query i sees the keys with |i - j| <= w / 2. 0: none. */
    size_t window;
    /* Soft-capping c > 0 (e.g. 50 for Gemma 2's attention); 0: none. */
    float softcap;
    /* Rotary embeddings on q and k; NULL: none. Needs only live for the call. */
    const clattn_rope_params *rope;
    uint8_t reserved[16]; /* must be zero */
} clattn_sdpa_params;

CLATTN_API void clattn_sdpa_params_default(clattn_sdpa_params *params);

/*
 * The ALiBi paper's slopes for num_heads heads, as BLOOM's build_alibi_tensor computes them:
 * with p the largest power of two <= num_heads, slopes[k] = 2^(-8(k + 1)/p) for k < p, then for
 * the num_heads - p remaining heads every other slope of 2p heads, 2^(-4(2k + 1)/p), k = 0, 1, ….
 *   slopes: [num_heads] host array, written.
 * Errors: CLATTN_ERROR_INVALID_ARGUMENT (slopes NULL, num_heads 0).
 */
CLATTN_API clattn_status clattn_alibi_slopes(size_t num_heads, float *slopes);

/*
 * out = softmax(scale · q·kᵀ + masks) · v, for every batch and head.
 *
 *   q:   [B, H, Nq, d_k]
 *   k:   [B, H, Nk, d_k]      ([B, H_kv, Nk, d_k] with enable_gqa)
 *   v:   [B, H, Nk, d_v]      ([B, H_kv, Nk, d_v] with enable_gqa)
 *   out: [B, H, Nq, d_v]   (may be a strided view, e.g. into a [B, Nq, H·d_v] buffer)
 *
 * params may be NULL for the defaults. Errors: CLATTN_ERROR_INVALID_ARGUMENT (NULLs, a last
 * dimension that is not contiguous, tensors of another context, an odd window, a negative or
 * non-finite softcap, num_buckets < 4 or max_distance <= num_buckets / 4, a modifier tensor that
 * is not contiguous, an odd rotary_dim or one above d_k, a rope layout that is not one, a theta
 * that is not a finite number >= 1 (0 selects 10000), rope->reserved not zero),
 * CLATTN_ERROR_SHAPE_MISMATCH (shapes that do not agree, alibi_slopes not [H], relative_bias not
 * [num_buckets, H]; the message gives both shapes), CLATTN_ERROR_UNSUPPORTED (attention weights
 * with the fused path requested), CLATTN_ERROR_TOO_LARGE (see above).
 */
CLATTN_API clattn_status clattn_sdpa(clattn_context *ctx, const clattn_tensor *q,
                                     const clattn_tensor *k, const clattn_tensor *v,
                                     clattn_tensor *out, const clattn_sdpa_params *params);

/* ------------------------------------------------------------------------------------------ */
/* Multi-head attention layer                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct clattn_mha clattn_mha;

typedef struct clattn_mha_config {
    size_t embed_dim;   /* E: width of the query input and of the output */
    size_t num_heads;   /* h */
    size_t head_dim_qk; /* d_k per head; 0 selects E / h (which must then divide) */
    size_t head_dim_v;  /* d_v per head; 0 selects E / h */
    size_t kdim;        /* width of the key input; 0 selects E */
    size_t vdim;        /* width of the value input; 0 selects E */
    int in_proj_bias;   /* add biases to the Q, K, V projections (default 1) */
    int out_proj;       /* apply the output projection (default 1); 0 = identity, which needs
                           h · d_v == E (the "projection replaced by identity" experiment,
                           docs/library.md) */
    int out_proj_bias;  /* add the output projection's bias (default 1) */
    /* Key/value heads (grouped-query attention; 1 = multi-query); 0 selects num_heads. It must
     * divide num_heads; query head h uses key/value head h / (num_heads / num_kv_heads), and the
     * K and V projections are num_kv_heads·d_k and num_kv_heads·d_v wide (in_proj_weight
     * [h·d_k + h_kv·d_k + h_kv·d_v, E], k_proj_weight [h_kv·d_k, kdim], in_proj_bias likewise). */
    size_t num_kv_heads;
    uint8_t reserved[56]; /* must be zero */
} clattn_mha_config;

/* nn.MultiheadAttention(embed_dim, num_heads): d_k = d_v = E/h, kdim = vdim = E, all biases. */
CLATTN_API void clattn_mha_config_default(clattn_mha_config *config, size_t embed_dim,
                                          size_t num_heads);

/*
 * timm's Attention(dim, num_heads, qkv_bias): one qkv linear layer [3·dim, dim] (bias when
 * qkv_bias), softmax(q·kᵀ·scale)·v, then `proj` [dim, dim] with bias. Weights map as
 * qkv.weight → in_proj_weight, qkv.bias → in_proj_bias, proj.weight → out_proj_weight,
 * proj.bias → out_proj_bias: timm's qkv layout is PyTorch's packed in_proj layout.
 */
CLATTN_API void clattn_mha_config_timm(clattn_mha_config *config, size_t dim, size_t num_heads,
                                       int qkv_bias);

/* A host array handed to the library: `ndim` dimensions of `shape`, row-major float32. */
typedef struct clattn_host_tensor {
    const float *data;
    int ndim;
    size_t shape[CLATTN_MAX_DIMS];
} clattn_host_tensor;

/*
 * The layer's weights in PyTorch's layouts (nn.MultiheadAttention's state_dict). Entries with
 * data NULL are absent. With P = h·(2·d_k + d_v):
 *   in_proj_weight   [P, E]      packed Q, K, V rows (only when kdim == vdim == E)
 *   q_proj_weight    [h·d_k, E]  separate projections (instead of in_proj_weight)
 *   k_proj_weight    [h·d_k, kdim]
 *   v_proj_weight    [h·d_v, vdim]
 *   in_proj_bias     [P]         required when config.in_proj_bias
 *   out_proj_weight  [E, h·d_v]  required when config.out_proj
 *   out_proj_bias    [E]         required when config.out_proj && config.out_proj_bias
 */
typedef struct clattn_mha_weights {
    clattn_host_tensor in_proj_weight;
    clattn_host_tensor q_proj_weight;
    clattn_host_tensor k_proj_weight;
    clattn_host_tensor v_proj_weight;
    clattn_host_tensor in_proj_bias;
    clattn_host_tensor out_proj_weight;
    clattn_host_tensor out_proj_bias;
} clattn_mha_weights;

/*
 * Creates a layer (no weights yet: load them before forward). Errors:
 * CLATTN_ERROR_INVALID_ARGUMENT for zero sizes, E not divisible by h when a head width is
 * derived, out_proj = 0 with h·d_v != E, non-zero reserved bytes.
 */
CLATTN_API clattn_status clattn_mha_create(clattn_context *ctx, clattn_mha **mha,
                                           const clattn_mha_config *config);

/* Releases the layer and its device buffers; sets *mha to NULL. Accepts NULL. */
CLATTN_API void clattn_mha_destroy(clattn_mha **mha);

/*
 * Copies the weights to the device (the host arrays need only live for the call). Every shape is
 * checked against the configuration: a wrong shape is CLATTN_ERROR_SHAPE_MISMATCH naming the
 * weight, its shape and the expected one; a missing required weight or both in_proj_weight and
 * q/k/v_proj_weight is CLATTN_ERROR_INVALID_ARGUMENT. On error the previous weights stay.
 */
CLATTN_API clattn_status clattn_mha_load_weights(clattn_mha *mha, const clattn_mha_weights *weights);

typedef struct clattn_mha_forward_params {
    /* [B, Nk]; PyTorch's key_padding_mask. */
    const clattn_tensor *key_padding_mask;
    clattn_mask_kind key_padding_mask_kind;
    /* [Nq, Nk], [B·h, Nq, Nk] (PyTorch's 3-D form) or [B, h, Nq, Nk]; size-1 dims broadcast. */
    const clattn_tensor *attn_mask;
    clattn_mask_kind attn_mask_kind;
    int causal;
    /* Optional output of the attention probabilities: [B, Nq, Nk] averaged over the heads when
     * average_attn_weights (PyTorch's default), else [B, h, Nq, Nk]. Contiguous. */
    clattn_tensor *attn_weights;
    int average_attn_weights; /* default 1 */
    clattn_attention_path path;
    /* Score modifiers, as clattn_sdpa_params' (the top of this file): ALiBi slopes [h], a
     * relative-position table [num_buckets, h] and its max_distance (0: 128), a sliding window
     * (even; 0: none), soft-capping (0: none). */
    const clattn_tensor *alibi_slopes;
    const clattn_tensor *relative_bias;
    size_t relative_max_distance;
    size_t window;
    float softcap;
    /* Rotary embeddings on the projected q and k (the top of this file; query_offset and
     * key_offset are the positions of the first query and key rows); NULL: none. Needs only live
     * for the call. */
    const clattn_rope_params *rope;
    uint8_t reserved[16]; /* must be zero */
} clattn_mha_forward_params;

CLATTN_API void clattn_mha_forward_params_default(clattn_mha_forward_params *params);

/*
 * out = MultiheadAttention(query, key, value).
 *
 *   query: [B, Nq, E]      contiguous
 *   key:   [B, Nk, kdim]   contiguous; NULL (with value NULL) or == query for self-attention
 *   value: [B, Nk, vdim]   contiguous
 *   out:   [B, Nq, E]      contiguous, must not overlap the inputs
 *
 * Self-attention (key and value NULL or the query tensor itself) projects Q, K and V with one
 * GEMM on the packed weights; cross-attention uses three. Scratch memory (the projections, the
 * head outputs, attention's own) is borrowed from the context's workspace for the call: layers
 * hold only their weights, so N layers on one context share one set of scratch buffers.
 *
 * params may be NULL for the defaults. Errors: CLATTN_ERROR_INVALID_ARGUMENT (NULLs, no weights
 * loaded yet, non-contiguous tensors, tensors of another context, key without value, out
 * overlapping an input, self-attention with kdim or vdim != E, params->reserved not zero, an
 * unknown path or mask kind, a score modifier's or rope's invalid value as for clattn_sdpa),
 * CLATTN_ERROR_SHAPE_MISMATCH (shapes that do not agree, masks that do not broadcast, modifier
 * tensors of the wrong shape; the message gives both shapes), CLATTN_ERROR_UNSUPPORTED
 * (attention weights with the fused path requested, a non-contiguous attn_weights), CLATTN_ERROR_TOO_LARGE (more
 * tokens than the kernels' 32-bit indices or the device's maximum allocation allow; a single
 * (batch, head) score matrix above the workspace limit on the unfused path), and the OpenCL and
 * CLBlast errors of the device (CLATTN_ERROR_OUT_OF_DEVICE_MEMORY, CLATTN_ERROR_OPENCL,
 * CLATTN_ERROR_CLBLAST, CLATTN_ERROR_BUILD_FAILED for the fused program's first build).
 */
CLATTN_API clattn_status clattn_mha_forward(clattn_mha *mha, const clattn_tensor *query,
                                            const clattn_tensor *key, const clattn_tensor *value,
                                            clattn_tensor *out,
                                            const clattn_mha_forward_params *params);

/*
 * The multiply-adds one forward pass performs, per operation (macs receives CLATTN_OP_COUNT
 * values indexed by clattn_op), with the convention of the context's counters: fvcore's, one
 * multiply-add = one FLOP; projections by M·N·K; attention by its full Nq·Nk score and weights·V
 * products (also when masked or causal).
 */
CLATTN_API clattn_status clattn_mha_count_macs(const clattn_mha_config *config, size_t batch,
                                               size_t seq_q, size_t seq_k, uint64_t *macs);

/* The layer's configuration with every default resolved (d_k, d_v, kdim, vdim filled in). */
CLATTN_API clattn_status clattn_mha_get_config(const clattn_mha *mha, clattn_mha_config *config);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_ATTENTION_H */
