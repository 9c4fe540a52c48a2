/*
 * Plain-C reference of attention: loops anyone can check, double accumulation, no OpenCL.
 * Every device kernel and public operation is compared with these on seeded random inputs.
 * All arrays are row-major float32; shapes are written next to each parameter.
 */
#ifndef CLATTN_REF_ATTENTION_H
#define CLATTN_REF_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

/* Masks on [B, H, Nq, Nk] scores; PyTorch polarity: a nonzero bool mask entry means IGNORE. */
typedef struct ref_masks {
    /* attention mask element (b, h, i, j) = attn_mask[b·am_sb + h·am_sh + i·am_si + j·am_sj] */
    const float *attn_mask;
    bool attn_mask_bool; /* else additive */
    size_t am_sb, am_sh, am_si, am_sj;
    /* key padding mask [B, Nk] */
    const float *key_padding_mask;
    bool key_padding_bool;
    bool causal; /* ignore key j for query i when j > i */
} ref_masks;

/* s[b,h,i,j] = Σ_c (q[b,h,i,c]·scale)·k[b,h,j,c] + masks (-inf where ignored).
 * q: [B,H,Nq,dk]  k: [B,H,Nk,dk]  s: [B,H,Nq,Nk] */
void ref_scores(const float *q, const float *k, size_t B, size_t H, size_t Nq, size_t Nk,
                size_t dk, float scale, const ref_masks *masks, float *s);

/* Softmax over each row of x [rows, n] in place; a row of only -inf becomes zeros. */
void ref_softmax_rows(float *x, size_t rows, size_t n);

/* o[b,h,i,c] = Σ_m p[b,h,i,m]·v[b,h,m,c].  p: [B,H,Nq,Nk]  v: [B,H,Nk,dv]  o: [B,H,Nq,dv] */
void ref_weights_v(const float *p, const float *v, size_t B, size_t H, size_t Nq, size_t Nk,
                   size_t dv, float *o);

/* out = softmax(scale·q·kᵀ + masks)·v; weights (optional, may be NULL): [B,H,Nq,Nk]. */
void ref_sdpa(const float *q, const float *k, const float *v, size_t B, size_t H, size_t Nq,
              size_t Nk, size_t dk, size_t dv, float scale, const ref_masks *masks, float *out,
              float *weights);

/* y[m, n] = Σ_k x[m,k]·w[n,k] + b[n].  x: [M,K]  w: [N,K] (PyTorch layout)  b: [N] or NULL */
void ref_linear(const float *x, const float *w, const float *b, size_t M, size_t N, size_t K,
                float *y);

/* nn.MultiheadAttention (batch_first) with general head widths. */
typedef struct ref_mha {
    size_t E, H, dk, dv, kdim, vdim;
    const float *wq;    /* [H·dk, E] */
    const float *wk;    /* [H·dk, kdim] */
    const float *wv;    /* [H·dv, vdim] */
    const float *b_in;  /* [2·H·dk + H·dv] or NULL */
    const float *w_out; /* [E, H·dv], or NULL for identity (H·dv == E) */
    const float *b_out; /* [E] or NULL */
} ref_mha;

/* out = MHA(query, key, value).  query: [B,Nq,E]  key: [B,Nk,kdim]  value: [B,Nk,vdim]
 * out: [B,Nq,E]; weights (optional): [B,H,Nq,Nk] per head, or [B,Nq,Nk] when average. */
void ref_mha_forward(const ref_mha *m, const float *query, const float *key, const float *value,
                     size_t B, size_t Nq, size_t Nk, const ref_masks *masks, float *out,
                     float *weights, bool average);

#endif
