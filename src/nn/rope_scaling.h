/*
 * Scaled RoPE (rope_scaling.c): the inverse frequencies of a block spec's rotary pairs
 * (clattn_block_spec.rope_scaled, rope_inv_freq) for the scalings models ship with, each
 * computed in float32 operation by operation as transformers' modeling_rope_utils computes it,
 * so that the angles p · inv_freq are the bytes a PyTorch model turns at.
 *
 * Each call starts from the spec's current frequencies (θ^(-2k / rotary_dim) when not yet
 * scaled: the spec's rope_theta, rotary_dim and head_dim_qk must be set) and scales them; each
 * returns false, changing nothing, when the spec rotates more than CLATTN_ROPE_MAX_PAIRS pairs.
 */
#ifndef CLATTN_ROPE_SCALING_H
#define CLATTN_ROPE_SCALING_H

#include "block_spec.h"

/* The spec's rotary pairs: rotary_dim / 2, or head_dim_qk / 2 when rotary_dim is 0. */
size_t clattn__rope_pairs(const clattn_block_spec *spec);

/* Pair k's frequency divided by divisors[k] (llama.cpp's rope_freqs.weight "frequency factors",
 * as ggml's rope divides the angle by them). */
bool clattn__rope_scale_divide(clattn_block_spec *spec, const float *divisors);

/* Linear scaling ("linear" rope_scaling, GGUF's rope.scaling.type "linear"): every frequency
 * divided by factor, i.e. positions divided by it. */
bool clattn__rope_scale_linear(clattn_block_spec *spec, float factor);

/* Llama 3.1's scaling (rope_type "llama3", transformers' _compute_llama3_parameters): pairs
 * whose wavelength 2π / f exceeds original_max / low_freq_factor turn factor times slower,
 * those shorter than original_max / high_freq_factor as they are, those between at a smooth
 * mix. Needs high_freq_factor != low_freq_factor. */
typedef struct clattn_rope_llama3 {
    double factor, low_freq_factor, high_freq_factor, original_max_position_embeddings;
} clattn_rope_llama3;
bool clattn__rope_scale_llama3(clattn_block_spec *spec, const clattn_rope_llama3 *params);

#endif /* CLATTN_ROPE_SCALING_H */
