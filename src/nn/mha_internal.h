/*
 * The attention layer's internal entry, on raw buffer views and sizes: no tensors and no
 * validation. clattn_mha_forward validates its tensors and calls it; the encoder (and the layers
 * built later) call it once per layer with buffers of their own.
 */
#ifndef CLATTN_MHA_INTERNAL_H
#define CLATTN_MHA_INTERNAL_H

#include "ops/attention_problem.h"
#include "ops/rotary.h"
#include "runtime/gemm.h"

/* One call of the layer. Sequences are contiguous [B, N, width] blocks from their offsets (in
 * floats). Masks are already checked and mapped (attention_views.c). */
typedef struct clattn_mha_io {
    size_t batch, seq_q, seq_k;
    cl_mem query;                 /* [B, Nq, E] */
    size_t query_offset;
    cl_mem key, value;            /* [B, Nk, kdim], [B, Nk, vdim]; NULL for self-attention */
    size_t key_offset, value_offset;
    cl_mem out;                   /* [B, Nq, E]; must not overlap the inputs */
    size_t out_offset;
    clattn_mask_view attn_mask, key_padding_mask;
    clattn_score_mods mods; /* score modifiers (flags 0: none) */
    /* Rotary embeddings on the projected q and k (when `rope`): queries from rope_q.pos0, keys
     * from rope_key_pos0 (clattn__mha_run_cached adds the cache's past length to the queries'). */
    bool rope;
    clattn_rotary_spec rope_q;
    size_t rope_key_pos0;
    /* Self-attention only: a per-head RMSNorm of the projected queries and keys before the
     * rotation (Qwen3's q_norm and k_norm), weights [d_k] each and eps qk_norm_eps; NULL: none
     * (both or neither). Applied by clattn__mha_run(_out_bias_left), clattn__mha_run_cached and
     * clattn__mha_run_cached_seqs, so the cache holds normed, rotated keys. */
    cl_mem q_norm, k_norm;
    float qk_norm_eps;
    int causal;
    bool no_key_split; /* clattn_attention_problem's: the same bytes for any query count */
    clattn_attention_path path;
    clattn_weights_layout weights_layout; /* NONE, or where `weights` is [B, (h,) Nq, Nk] */
    cl_mem weights;
    size_t weights_offset;
} clattn_mha_io;

/* For a layer that only ever runs self-attention (an encoder's): when the context's GEMM is the
 * CPU GEMM, packs its projection weights and releases their unpacked buffers, so that they are
 * held once (clattn__gemm_weight_pack); cross-attention on the layer is then refused. */
clattn_status clattn__mha_keep_packed_only(clattn_mha *mha);

struct clattn_gemm_quant;

/* Loads a self-attention layer's weights kept quantised (ops/linear.h): `in` the rows of q, k
 * and v stacked [h·d_k + h_kv·d_k + h_kv·d_v, E], `out` [E, h·d_v], both owned by the caller
 * and outliving the layer; the biases (in's rows, E) as the configuration has them, else NULL.
 * Cross-attention on the layer is then refused. */
clattn_status clattn__mha_load_quantised(clattn_mha *mha, const struct clattn_gemm_quant *in,
                                        const struct clattn_gemm_quant *out,
                                        const float *in_bias, const float *out_bias);

/* Runs the layer: projections, attention, output projection. Borrows the workspace slots
 * CLATTN_SLOT_PROJECTIONS and CLATTN_SLOT_HEADS (and attention's own). */
clattn_status clattn__mha_run(clattn_mha *mha, const clattn_mha_io *io);

/* clattn__mha_run for a caller whose next kernel adds io->out to a residual (an encoder layer's
 * add with LayerNorm): when the output projection's GEMM does not fuse its bias, io->out is left
 * without it and *out_bias is that bias [E] for the caller to add there (saving a launch);
 * otherwise *out_bias is NULL. */
clattn_status clattn__mha_run_out_bias_left(clattn_mha *mha, const clattn_mha_io *io,
                                            cl_mem *out_bias);

/* A key/value cache of one self-attention layer: rows [B, capacity, h·d_k] and [B, capacity,
 * h·d_v] (the projection's own layout, so that a step appends rows by a rectangle copy). */
typedef struct clattn_kv_cache {
    cl_mem k, v;  /* [B, capacity, h_kv·d_k], [B, capacity, h_kv·d_v] */
    size_t capacity;
    bool half;    /* elements are IEEE half floats (vstore_half), else float */
} clattn_kv_cache;

/* Incremental self-attention: the io->seq_q new tokens of io->query are projected, their keys
 * and values appended to the cache at rows past .., and the queries attend to the cache's
 * past + seq_q keys (causally when io->causal: query i sees keys up to past + i). With io->rope
 * the new queries are rotated at positions rope_q.pos0 + past + i and the new keys at
 * rope_key_pos0 + past + i before they are cached (the cache holds rotated keys, float or half).
 * The caller checks that past + seq_q <= capacity. */
clattn_status clattn__mha_run_cached(clattn_mha *mha, const clattn_mha_io *io,
                                     const clattn_kv_cache *cache, size_t past);

/* clattn__mha_run_cached for sequences of their own lengths: row b of the io->batch rows
 * appends its io->seq_q new tokens to cache sequence slot[b] after its past[b] rows and attends
 * to those past[b] + seq_q keys (causally when io->causal); with io->rope its new queries and
 * keys are rotated at positions pos[b] + i. io's masks are not used. One GEMM per projection,
 * the rotations, appends and attention sequence by sequence (each the bytes it gives alone:
 * the attention is batch-invariant). The caller checks past[b] + seq_q <= capacity. */
clattn_status clattn__mha_run_cached_seqs(clattn_mha *mha, const clattn_mha_io *io,
                                          const clattn_kv_cache *cache, const size_t *slot,
                                          const size_t *past, const size_t *pos);

/* Projects a memory x [B, S, kdim] once into keys k [B·S, h·d_k] and values v [B·S, h·d_v]
 * (cross-attention's keys and values for every decoding step). */
clattn_status clattn__mha_project_kv(clattn_mha *mha, cl_mem x, size_t x_offset, size_t batch,
                                     size_t seq, cl_mem k, cl_mem v);

/* Attention of io->query over keys and values projected by clattn__mha_project_kv (io->seq_k of
 * them per sequence); masks from io. */
clattn_status clattn__mha_run_projected(clattn_mha *mha, const clattn_mha_io *io, cl_mem k,
                                        cl_mem v);

/* The weight of the self-attention's one q|k|v projection [h·d_k + 2·h_kv·d_k, E]: the first
 * to read the layer's input (nn/block_stack.c: a norm that quantises its rows for it). */
const clattn_gemm_weight *clattn__mha_in_weight(const clattn_mha *mha);

#endif /* CLATTN_MHA_INTERNAL_H */
