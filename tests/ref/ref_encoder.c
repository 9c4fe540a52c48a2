#include "ref_encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_layernorm(const float *x, const float *w, const float *b, size_t rows, size_t width,
                   float eps, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * width;
        double mean = 0.0, var = 0.0;
        for (size_t c = 0; c < width; c++)
            mean += xr[c];
        mean /= (double)width;
        for (size_t c = 0; c < width; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
        var /= (double)width;
        double rstd = 1.0 / sqrt(var + eps);
        for (size_t c = 0; c < width; c++)
            y[r * width + c] = (float)((xr[c] - mean) * rstd * w[c] + b[c]);
    }
}

void ref_rmsnorm(const float *x, const float *w, size_t rows, size_t width, float eps, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * width;
        double squares = 0.0;
        for (size_t c = 0; c < width; c++)
            squares += (double)xr[c] * xr[c];
        double rstd = 1.0 / sqrt(squares / (double)width + eps);
        for (size_t c = 0; c < width; c++)
            y[r * width + c] = (float)(xr[c] * rstd * w[c]);
    }
}

void ref_sinusoidal(size_t positions, size_t d, float *pe)
{
    for (size_t pos = 0; pos < positions; pos++)
        for (size_t i = 0; 2 * i < d; i++) {
            double angle = (double)pos / pow(10000.0, (double)(2 * i) / (double)d);
            pe[pos * d + 2 * i] = (float)sin(angle);
            if (2 * i + 1 < d)
                pe[pos * d + 2 * i + 1] = (float)cos(angle);
        }
}

static void add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((double)y[i] + x[i]);
}

/* out = linear2(act(linear1(x))) */
static void feed_forward(const ref_encoder *e, const ref_encoder_layer *l, const float *x,
                         size_t T, float *out)
{
    float *hidden = malloc(T * e->ff * sizeof(float));
    ref_linear(x, l->w1, l->b1, T, e->ff, e->d, hidden);
    for (size_t i = 0; i < T * e->ff; i++) {
        double v = hidden[i];
        hidden[i] = (float)(e->gelu ? 0.5 * v * (1.0 + erf(v / sqrt(2.0))) : (v > 0 ? v : 0));
    }
    ref_linear(hidden, l->w2, l->b2, T, e->d, e->ff, out);
    free(hidden);
}

void ref_encoder_forward(const ref_encoder *e, const float *input, const int64_t *ids, size_t B,
                         size_t N, const float *kpm, bool causal, size_t offset, float *out)
{
    size_t d = e->d, T = B * N;
    float *x = malloc(T * d * sizeof(float)), *t = malloc(T * d * sizeof(float));
    float *u = malloc(T * d * sizeof(float));
    for (size_t i = 0; i < T; i++)
        for (size_t c = 0; c < d; c++)
            x[i * d + c] = ids ? (float)(e->embedding[ids[i] * d + c] * sqrt((double)d))
                               : input[i * d + c];
    if (e->sinusoidal) {
        float *pe = malloc((offset + N) * d * sizeof(float));
        ref_sinusoidal(offset + N, d, pe);
        for (size_t i = 0; i < T; i++)
            add(x + i * d, pe + (offset + i % N) * d, d);
        free(pe);
    }
    ref_masks masks = {0};
    masks.key_padding_mask = kpm;
    masks.key_padding_bool = true;
    masks.causal = causal;
    for (size_t li = 0; li < e->layers; li++) {
        const ref_encoder_layer *l = &e->layer[li];
        ref_mha m = {d, e->h, e->dk, e->dv, d, d, l->wq, l->wk, l->wv, l->in_bias, l->out_w,
                     l->out_b};
        if (e->norm_first) {
            if (l->norm1_w)
                ref_layernorm(x, l->norm1_w, l->norm1_b, T, d, e->eps, t);
            else /* no norm1: the attention reads x itself (ModernBERT's first layer) */
                memcpy(t, x, T * d * sizeof(float));
            ref_mha_forward(&m, t, t, t, B, N, N, &masks, u, NULL, false);
            add(x, u, T * d);
            ref_layernorm(x, l->norm2_w, l->norm2_b, T, d, e->eps, t);
            feed_forward(e, l, t, T, u);
            add(x, u, T * d);
        } else {
            ref_mha_forward(&m, x, x, x, B, N, N, &masks, u, NULL, false);
            add(x, u, T * d);
            ref_layernorm(x, l->norm1_w, l->norm1_b, T, d, e->eps, x);
            feed_forward(e, l, x, T, u);
            add(x, u, T * d);
            ref_layernorm(x, l->norm2_w, l->norm2_b, T, d, e->eps, x);
        }
    }
    if (e->norm_w)
        ref_layernorm(x, e->norm_w, e->norm_b, T, d, e->eps, out);
    else
        memcpy(out, x, T * d * sizeof(float));
    free(x), free(t), free(u);
}
