/*
 * Plain-C reference of rotary position embeddings (RoPE), the angles as PyTorch's rotary code
 * computes them (transformers' LlamaRotaryEmbedding and rotate_half, GPT-J's rotate_every_two,
 * NomicBERT with pos_idx_in_fp32): everything in float32 up to the angle, which is what decides
 * the result at large positions, then double. Arrays are row-major float32.
 */
#ifndef CLATTN_REF_ROTARY_H
#define CLATTN_REF_ROTARY_H

#include <stdbool.h>
#include <stddef.h>

/* cos and sin of the angle of pair k at position p, r channels rotated:
 *   inv_freq = 1 / θ^(2k / r)      float32: torch.arange(0, r, 2).float() / r, θ ** that, 1 / that
 *   angle    = float(p) · inv_freq float32: position ids .float(), the outer product
 * then the cosine and sine of that float angle in double. Beyond 2^24 the position itself is
 * rounded to float32 (at 1e8, to a multiple of 8), as PyTorch's float position ids are. */
void ref_rope_cos_sin(size_t p, size_t k, size_t r, double theta, double *cos_a, double *sin_a);

/* Rotates x [B, H, N, d] in place: row n at position pos0 + n, the first r channels of each
 * row; interleaved: pairs (2k, 2k + 1) (rotate_every_two), else (k, k + r/2) (rotate_half):
 *   x'[a] = x[a]·cos - x[b]·sin,  x'[b] = x[b]·cos + x[a]·sin   (in double, rounded) */
void ref_rope(float *x, size_t B, size_t H, size_t N, size_t d, size_t r, bool interleaved,
              double theta, size_t pos0);

#endif
