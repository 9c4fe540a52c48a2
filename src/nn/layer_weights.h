/*
 * Loading a layer's weights by PyTorch name (layer_weights.c), shared by the encoder and the
 * decoder: the attention blocks, the feed-forward block, LayerNorms; seeded random weights; and
 * the feed-forward block's forward pass.
 */
#ifndef CLATTN_LAYER_WEIGHTS_H
#define CLATTN_LAYER_WEIGHTS_H

#include <stdbool.h>

#include "clattn/encoder.h"
#include "clattn/attention.h"
#include "base/errors.h"
#include "runtime/gemm.h"

/* Where weights come from: the tensor `name` (its expected shape given), or NULL. */
typedef const clattn_host_tensor *(*clattn_weight_provider)(void *user, const char *name,
                                                            int ndim, const size_t *shape);

struct clattn_gemm_quant;

/* Where weights kept quantised come from (a GGUF file's): the tensors names[0 .. count), rows[i]
 * rows of k values each, stacked in that order into one weight [Σ rows, k] on the device
 * (ops/linear.h's clattn_gemm_quant). *out NULL with CLATTN_OK: no such weight here, and the
 * float tensors are loaded as usual. The provider owns *out, which outlives the layers. */
typedef clattn_status (*clattn_quant_provider)(void *user, const char *const *names,
                                               const size_t *rows, size_t count, size_t k,
                                               const struct clattn_gemm_quant **out);

typedef struct clattn_weight_loader {
    clattn_context *ctx;
    const char *function; /* the public function, for messages */
    clattn_weight_provider provide;
    void *user;
    /* NULL: every weight float. Else the linear weights of the attention blocks (q|k|v
     * stacked, the output projection) and of the feed-forward blocks (gate|up stacked, linear2)
     * come from it where it has them; norms and biases still from `provide`. */
    clattn_quant_provider quant;
    void *quant_user;
} clattn_weight_loader;

/* A feed-forward block: linear1 [d_ff, d] + b1, linear2 [d, d_ff] + b2. Gated, w1 [2·d_ff, d]
 * and b1 [2·d_ff] hold linear1_gate's rows, then linear1's (one GEMM computes both). Without
 * biases b1 and b2 are NULL. */
typedef struct clattn_ffn {
    cl_mem w1, b1, w2, b2;
    clattn_gemm_weight lin1, lin2; /* w1 and w2 as the GEMMs read them */
    bool gated;
} clattn_ffn;

/* When the context's GEMM is the CPU GEMM, packs linear1 and linear2 and releases their unpacked
 * buffers (clattn__gemm_weight_pack), so that they are held once. */
clattn_status clattn__ffn_keep_packed_only(clattn_context *ctx, clattn_ffn *ffn);

/* A LayerNorm's weight and bias [d]. */
typedef struct clattn_norm {
    cl_mem weight, bias;
} clattn_norm;

/* The tensor `name` with exactly `shape`, uploaded into a new buffer; a missing tensor is
 * CLATTN_ERROR_FORMAT, a wrong shape CLATTN_ERROR_SHAPE_MISMATCH, both naming it. */
clattn_status clattn__load_tensor(const clattn_weight_loader *l, const char *name, int ndim,
                                  const size_t *shape, cl_mem *mem);
/* The tensor `name` [shape] copied into host memory (*data, malloc'd: the caller frees it). */
clattn_status clattn__load_host_tensor(const clattn_weight_loader *l, const char *name, int ndim,
                                       const size_t *shape, float **data);
/* "<name>.weight" and "<name>.bias" [d]; without `bias`, only the weight, and a bias of zeros. */
clattn_status clattn__load_norm(const clattn_weight_loader *l, const char *name, size_t d,
                                bool bias, clattn_norm *norm);
void clattn__norm_release(clattn_norm *norm);
/* "<prefix>linear1.weight", ".bias", "<prefix>linear2.weight", ".bias"; `gated`: also
 * "<prefix>linear1_gate.weight", ".bias" [d_ff, d], [d_ff]; without `bias`, no .bias tensors. */
clattn_status clattn__load_ffn(const clattn_weight_loader *l, const char *prefix, size_t d,
                               size_t ff, bool gated, bool bias, clattn_ffn *ffn);
void clattn__ffn_release(clattn_ffn *ffn);
/* An attention block of nn.MultiheadAttention's names under `prefix` ("layers.0.self_attn"):
 * in_proj_weight (or q/k/v_proj_weight), in_proj_bias, out_proj.weight, out_proj.bias (the
 * biases only with `bias`); nhead query heads, kv_heads key/value heads (grouped-query
 * attention when fewer). */
clattn_status clattn__load_attention(const clattn_weight_loader *l, const char *prefix, size_t E,
                                     size_t nhead, size_t kv_heads, size_t dk, size_t dv,
                                     bool bias, clattn_mha **attn);
/* The same with the input projections' bias (in_proj_bias) and the output projection's
 * (out_proj.bias) each present or not. */
clattn_status clattn__load_attention_biases(const clattn_weight_loader *l, const char *prefix,
                                            size_t E, size_t nhead, size_t kv_heads, size_t dk,
                                            size_t dv, bool in_bias, bool out_bias,
                                            clattn_mha **attn);

/* The hidden activations the feed-forward block holds at once, in floats: it runs over blocks
 * of rows so that a long input does not need a [T, d_ff] buffer. */
#define CLATTN_FFN_CHUNK_FLOATS ((size_t)16 << 20)
/* The rows of one block: hidden needs clattn__ffn_chunk_rows · d_ff (gated: 2·d_ff) floats. */
size_t clattn__ffn_chunk_rows(size_t tokens, size_t ff, bool gated);

/* out [T, d] = act(input [T, d]·W1ᵀ + b1)·W2ᵀ through hidden [rows, d_ff] (linear2's bias is
 * left to the caller's residual step); gated, out = (act(input·Wgᵀ + bg) ⊙ (input·W1ᵀ +
 * b1))·W2ᵀ through hidden [rows, 2·d_ff]; rows = clattn__ffn_chunk_rows. The block's GEMM
 * weights keep their packed forms. */
clattn_status clattn__ffn_forward(clattn_context *ctx, clattn_ffn *ffn, size_t tokens, size_t d,
                                  size_t ff, int act, cl_mem input, cl_mem hidden, cl_mem out);

/* Seeded random weights in PyTorch's initialisation ranges, made on request by name. */
typedef struct clattn_random_weights {
    uint64_t seed;
    bool packed; /* in_proj_weight rather than q/k/v_proj_weight */
    clattn_host_tensor *made;
    size_t count, capacity;
    bool out_of_memory;
} clattn_random_weights;

const clattn_host_tensor *clattn__random_weight(void *user, const char *name, int ndim,
                                                const size_t *shape);
void clattn__random_weights_free(clattn_random_weights *r);

/* A public clattn_weight_lookup seen as a provider. */
typedef struct clattn_lookup_adapter {
    clattn_weight_lookup lookup;
    void *user;
} clattn_lookup_adapter;

const clattn_host_tensor *clattn__lookup_weight(void *user, const char *name, int ndim,
                                                const size_t *shape);

#endif /* CLATTN_LAYER_WEIGHTS_H */
