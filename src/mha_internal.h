/*
 * The attention layer's internal entry, on raw buffer views and sizes: no tensors and no
 * validation. clattn_mha_forward validates its tensors and calls it; the encoder (and the layers
 * built later) call it once per layer with buffers of their own.
 */
#ifndef CLATTN_MHA_INTERNAL_H
#define CLATTN_MHA_INTERNAL_H

#include "attention_internal.h"

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
    int causal;
    clattn_attention_path path;
    clattn_weights_layout weights_layout; /* NONE, or where `weights` is [B, (h,) Nq, Nk] */
    cl_mem weights;
    size_t weights_offset;
} clattn_mha_io;

/* Runs the layer: projections, attention, output projection. Borrows the workspace slots
 * CLATTN_SLOT_PROJECTIONS and CLATTN_SLOT_HEADS (and attention's own). */
clattn_status clattn__mha_run(clattn_mha *mha, const clattn_mha_io *io);

#endif /* CLATTN_MHA_INTERNAL_H */
