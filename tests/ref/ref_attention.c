#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float masked(const ref_masks *m, float s, size_t b, size_t h, size_t i, size_t j,
                    size_t Nk)
{
    if (!m)
        return s;
    if (m->causal && j > i)
        return -INFINITY;
    if (m->attn_mask) {
        float v = m->attn_mask[b * m->am_sb + h * m->am_sh + i * m->am_si + j * m->am_sj];
        if (m->attn_mask_bool) {
            if (v != 0.0f)
                return -INFINITY;
        } else {
            s = (float)((double)s + v);
        }
    }
    if (m->key_padding_mask) {
        float v = m->key_padding_mask[b * Nk + j];
        if (m->key_padding_bool) {
            if (v != 0.0f)
                return -INFINITY;
        } else {
            s = (float)((double)s + v);
        }
    }
    return s;
}

void ref_scores(const float *q, const float *k, size_t B, size_t H, size_t Nq, size_t Nk,
                size_t dk, float scale, const ref_masks *masks, float *s)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Nq; i++)
                for (size_t j = 0; j < Nk; j++) {
                    const float *qi = q + ((b * H + h) * Nq + i) * dk;
                    const float *kj = k + ((b * H + h) * Nk + j) * dk;
                    double acc = 0.0;
                    for (size_t c = 0; c < dk; c++)
                        acc += (double)qi[c] * kj[c];
                    float score = (float)(acc * scale);
                    s[((b * H + h) * Nq + i) * Nk + j] = masked(masks, score, b, h, i, j, Nk);
                }
}

void ref_softmax_rows(float *x, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        double max = -INFINITY;
        for (size_t j = 0; j < n; j++)
            if (row[j] > max)
                max = row[j];
        if (max == -INFINITY) {
            memset(row, 0, n * sizeof(float));
            continue;
        }
        double sum = 0.0;
        for (size_t j = 0; j < n; j++)
            sum += exp((double)row[j] - max);
        for (size_t j = 0; j < n; j++)
            row[j] = (float)(exp((double)row[j] - max) / sum);
    }
}

void ref_weights_v(const float *p, const float *v, size_t B, size_t H, size_t Nq, size_t Nk,
                   size_t dv, float *o)
{
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < Nq; i++)
            for (size_t c = 0; c < dv; c++) {
                double acc = 0.0;
                for (size_t m = 0; m < Nk; m++)
                    acc += (double)p[(bh * Nq + i) * Nk + m] * v[(bh * Nk + m) * dv + c];
                o[(bh * Nq + i) * dv + c] = (float)acc;
            }
}

void ref_sdpa(const float *q, const float *k, const float *v, size_t B, size_t H, size_t Nq,
              size_t Nk, size_t dk, size_t dv, float scale, const ref_masks *masks, float *out,
              float *weights)
{
    float *p = malloc(B * H * Nq * Nk * sizeof(float) + 1);
    ref_scores(q, k, B, H, Nq, Nk, dk, scale, masks, p);
    ref_softmax_rows(p, B * H * Nq, Nk);
    ref_weights_v(p, v, B, H, Nq, Nk, dv, out);
    if (weights)
        memcpy(weights, p, B * H * Nq * Nk * sizeof(float));
    free(p);
}

void ref_linear(const float *x, const float *w, const float *b, size_t M, size_t N, size_t K,
                float *y)
{
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double acc = b ? b[n] : 0.0;
            for (size_t k = 0; k < K; k++)
                acc += (double)x[m * K + k] * w[n * K + k];
            y[m * N + n] = (float)acc;
        }
}

/* [B, N, H·d] (heads concatenated) ↔ [B, H, N, d] (heads split). */
static void split_heads(const float *x, size_t B, size_t N, size_t H, size_t d, float *out)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++)
                memcpy(out + ((b * H + h) * N + n) * d, x + (b * N + n) * H * d + h * d,
                       d * sizeof(float));
}

static void merge_heads(const float *x, size_t B, size_t N, size_t H, size_t d, float *out)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++)
                memcpy(out + (b * N + n) * H * d + h * d, x + ((b * H + h) * N + n) * d,
                       d * sizeof(float));
}

void ref_mha_forward(const ref_mha *m, const float *query, const float *key, const float *value,
                     size_t B, size_t Nq, size_t Nk, const ref_masks *masks, float *out,
                     float *weights, bool average)
{
    size_t H = m->H, qk = H * m->dk, vw = H * m->dv;
    float *qp = malloc(B * Nq * qk * sizeof(float) + 1);
    float *kp = malloc(B * Nk * qk * sizeof(float) + 1);
    float *vp = malloc(B * Nk * vw * sizeof(float) + 1);
    float *qh = malloc(B * Nq * qk * sizeof(float) + 1);
    float *kh = malloc(B * Nk * qk * sizeof(float) + 1);
    float *vh = malloc(B * Nk * vw * sizeof(float) + 1);
    float *oh = malloc(B * Nq * vw * sizeof(float) + 1);
    float *cat = malloc(B * Nq * vw * sizeof(float) + 1);
    float *w = malloc(B * H * Nq * Nk * sizeof(float) + 1);

    ref_linear(query, m->wq, m->b_in, B * Nq, qk, m->E, qp);
    ref_linear(key, m->wk, m->b_in ? m->b_in + qk : NULL, B * Nk, qk, m->kdim, kp);
    ref_linear(value, m->wv, m->b_in ? m->b_in + 2 * qk : NULL, B * Nk, vw, m->vdim, vp);
    split_heads(qp, B, Nq, H, m->dk, qh);
    split_heads(kp, B, Nk, H, m->dk, kh);
    split_heads(vp, B, Nk, H, m->dv, vh);
    ref_sdpa(qh, kh, vh, B, H, Nq, Nk, m->dk, m->dv, (float)(1.0 / sqrt((double)m->dk)), masks,
             oh, w);
    merge_heads(oh, B, Nq, H, m->dv, cat);
    if (m->w_out)
        ref_linear(cat, m->w_out, m->b_out, B * Nq, m->E, vw, out);
    else
        memcpy(out, cat, B * Nq * vw * sizeof(float));

    if (weights && !average)
        memcpy(weights, w, B * H * Nq * Nk * sizeof(float));
    if (weights && average)
        for (size_t b = 0; b < B; b++)
            for (size_t ij = 0; ij < Nq * Nk; ij++) {
                double sum = 0.0;
                for (size_t h = 0; h < H; h++)
                    sum += w[(b * H + h) * Nq * Nk + ij];
                weights[b * Nq * Nk + ij] = (float)(sum / (double)H);
            }
    free(qp), free(kp), free(vp), free(qh), free(kh), free(vh), free(oh), free(cat), free(w);
}
