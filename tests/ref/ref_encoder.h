/*
 * Plain-C reference of the Transformer encoder (nn.TransformerEncoderLayer semantics, inference):
 * loops, double accumulation, built on ref_attention. Arrays are row-major float32.
 */
#ifndef CLATTN_REF_ENCODER_H
#define CLATTN_REF_ENCODER_H

#include "ref_attention.h"

#include <stdint.h>

typedef struct ref_encoder_layer {
    const float *wq, *wk, *wv; /* [h·dk, d], [h·dk, d], [h·dv, d] */
    const float *in_bias;      /* [2·h·dk + h·dv] */
    const float *out_w;        /* [d, h·dv] */
    const float *out_b;        /* [d] */
    const float *w1, *b1;      /* [ff, d], [ff] */
    const float *w2, *b2;      /* [d, ff], [d] */
    const float *norm1_w, *norm1_b, *norm2_w, *norm2_b; /* [d]; norm1_w NULL in a pre-LN
                                                         * layer: no norm1 */
} ref_encoder_layer;

typedef struct ref_encoder {
    size_t d, h, dk, dv, ff, layers;
    bool gelu, norm_first, sinusoidal;
    float eps;
    const ref_encoder_layer *layer;   /* [layers] */
    const float *norm_w, *norm_b;     /* final norm [d], or NULL */
    const float *embedding;           /* [vocab, d], or NULL */
} ref_encoder;

/* y[r] = (x[r] - mean) / sqrt(var + eps) · w + b, biased variance. x, y: [rows, width]. */
void ref_layernorm(const float *x, const float *w, const float *b, size_t rows, size_t width,
                   float eps, float *y);

/* y[r] = x[r] / sqrt(mean(x[r]²) + eps) · w (RMSNorm). x, y: [rows, width]. */
void ref_rmsnorm(const float *x, const float *w, size_t rows, size_t width, float eps, float *y);

/* pe[pos, 2i] = sin(pos / 10000^(2i/d)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d)); [positions, d]. */
void ref_sinusoidal(size_t positions, size_t d, float *pe);

/* out [B, N, d] = encoder(input [B, N, d]) — or, with ids [B, N] instead of input, of the token
 * embedding scaled by sqrt(d). kpm: [B, N] bool (nonzero = padding) or NULL. The sinusoidal
 * table starts at position `offset`. */
void ref_encoder_forward(const ref_encoder *e, const float *input, const int64_t *ids, size_t B,
                         size_t N, const float *kpm, bool causal, size_t offset, float *out);

#endif
