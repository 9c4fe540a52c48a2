/*
 * The gated feed-forward block with SwiGLU fused into its first layer (ffn_swiglu.c), for a
 * block whose gate|up weight is kept quantised (an LLM's, from a GGUF file): one launch of
 * ops/qlinear.h's clattn__qlinear_swiglu computes silu(x·Wgᵀ)·(x·Wuᵀ) where the unfused block
 * (layer_weights.h's clattn__ffn_forward) runs the gate|up layer and then the glu kernel. A
 * quantised gate|up layer split over buffers runs unfused with the fused kernels' SwiGLU after
 * it (clattn__qlinear_glu), so that both give the same bytes; every other block (float weights,
 * biases, another activation, ungated) runs clattn__ffn_forward.
 */
#ifndef CLATTN_FFN_SWIGLU_H
#define CLATTN_FFN_SWIGLU_H

#include <stdbool.h>

#include "layer_weights.h"

/* Whether clattn__ffn_forward_swiglu fuses this block: gated, SiLU, linear1 kept quantised in
 * one buffer (all 2·ff rows) and no linear1 bias. */
bool clattn__ffn_swiglu_fuses(const clattn_ffn *ffn, size_t ff, int act);

/* clattn__ffn_forward's contract (out [T, d] through hidden, linear2's bias left to the
 * caller), fused where clattn__ffn_swiglu_fuses says so, a split quantised gate|up layer as
 * above, else clattn__ffn_forward itself. */
clattn_status clattn__ffn_forward_swiglu(clattn_context *ctx, clattn_ffn *ffn, size_t tokens,
                                         size_t d, size_t ff, int act, cl_mem input, cl_mem hidden,
                                         cl_mem out);

#endif /* CLATTN_FFN_SWIGLU_H */
