/* Rotary position embeddings (rotary.c, cl/rotary.cl) on [B, H, N, d] head views. */
#ifndef CLATTN_ROTARY_H
#define CLATTN_ROTARY_H

#include "attention_problem.h"

/* How to rotate: the first rot_dim channels (even, <= d) of every head, positions from pos0. */
typedef struct clattn_rotary_spec {
    size_t rot_dim;
    bool interleaved; /* GPT-J's pairs (2k, 2k + 1); else GPT-NeoX's halves (k, k + rot_dim/2) */
    double theta;     /* the base */
    size_t pos0;      /* the position of row 0 */
    /* Scaled RoPE (Llama 3.1's, linear): [rot_dim / 2] inverse frequencies that replace
     * θ^(-2k / rot_dim) (the caller's, alive for the call; the context's table keeps a copy);
     * NULL: from theta. */
    const float *inv_freq;
} clattn_rotary_spec;

/* Writes x [batch, heads, n, d] (a head view) rotated into out, contiguous from out_offset
 * (floats); *rotated receives the view of the copy. */
clattn_status clattn__rotary(clattn_context *ctx, const clattn_head_view *x, size_t batch,
                             size_t heads, size_t n, size_t d, const clattn_rotary_spec *spec,
                             cl_mem out, size_t out_offset, clattn_head_view *rotated);

/* Rotates x [batch, heads, n, d] (a head view, e.g. into a projection buffer) in place: row i
 * at position spec->pos0 + i, the first spec->rot_dim channels of every head. */
clattn_status clattn__rotary_in_place(clattn_context *ctx, const clattn_head_view *x,
                                      size_t batch, size_t heads, size_t n,
                                      const clattn_rotary_spec *spec);

/* A step's new tokens into a float key/value cache, in one launch (cl/rotary.cl
 * clattn_rope_append): proj holds batch · n rows of `pitch` floats from proj_offset, each the
 * queries' `heads` heads of d floats, the keys' kv_heads heads of d, the values' kv_heads heads
 * of dv. The queries are rotated in place (positions spec->pos0 + row); the keys, rotated, and
 * the values go to rows k_at + b·k_sb + row·kv_heads·d of k_cache and v_at + b·v_sb +
 * row·kv_heads·dv of v_cache. The same bytes as clattn__rotary_in_place on the queries and the
 * keys followed by copies. */
typedef struct clattn_rope_append_args {
    cl_mem proj;
    size_t proj_offset, pitch, batch, n, heads, kv_heads, d, dv;
    cl_mem k_cache, v_cache;
    size_t k_at, k_sb, v_at, v_sb;
} clattn_rope_append_args;
clattn_status clattn__rope_append(clattn_context *ctx, const clattn_rope_append_args *a,
                                  const clattn_rotary_spec *spec);

/* Checks the public RoPE parameters against the head width d_k (errors name `function`) and
 * fills *spec for the queries (pos0 = r->query_offset; the keys' offset is r->key_offset). */
clattn_status clattn__rope_spec_of(clattn_context *ctx, const char *function,
                                   const clattn_rope_params *r, size_t dk,
                                   clattn_rotary_spec *spec);

/* Rotates p's q (positions from spec->pos0) and k (positions from key_pos0) into the
 * workspace slot CLATTN_SLOT_ROTARY; p's views then point at the copies. A half-precision k
 * (p->kv_half) is CLATTN_ERROR_UNSUPPORTED. */
clattn_status clattn__rope_qk(clattn_context *ctx, clattn_attention_problem *p,
                              const clattn_rotary_spec *spec, size_t key_pos0);

#endif /* CLATTN_ROTARY_H */
