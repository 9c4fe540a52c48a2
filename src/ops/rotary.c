/* Rotary position embeddings: one kernel per operand, reading a head view and writing a
 * contiguous rotated copy; the cosines and sines come from the context's table. */
#include "rotary.h"
#include "runtime/launch.h"
#include "runtime/buffers.h"
#include "runtime/rotary_table.h"
#include "runtime/shape.h"

#include <math.h>

/* The context's table covering the positions spec->pos0 .. pos0 + n - 1, and *row0, its row of
 * position pos0 (the kernels index the table from there: the table holds a window of positions,
 * not all from 0). */
static clattn_status table_for(clattn_context *ctx, const clattn_rotary_spec *spec, size_t n,
                               cl_mem *table, cl_uint *row0)
{
    size_t first;
    clattn_status status = clattn__rotary_table(ctx, spec->pos0, n, spec->rot_dim / 2,
                                                spec->theta, spec->inv_freq, table, &first);
    if (status == CLATTN_OK)
        *row0 = (cl_uint)(spec->pos0 - first); /* the window has fewer than 2^32 rows */
    return status;
}

clattn_status clattn__rotary(clattn_context *ctx, const clattn_head_view *x, size_t batch,
                             size_t heads, size_t n, size_t d, const clattn_rotary_spec *spec,
                             cl_mem out, size_t out_offset, clattn_head_view *rotated)
{
    cl_mem table;
    cl_uint row0;
    clattn_status status = table_for(ctx, spec, n, &table, &row0);
    if (status != CLATTN_OK)
        return status;
    cl_ulong y_off = out_offset;
    cl_uint h = (cl_uint)heads, pairs = (cl_uint)(batch * heads), rows = (cl_uint)n;
    cl_uint width = (cl_uint)d, rot_dim = (cl_uint)spec->rot_dim;
    cl_int interleaved = spec->interleaved;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ROTARY);
    clattn__head_view_args(&args, x);
    CLATTN_ARG(&args, out);
    CLATTN_ARG(&args, y_off);
    CLATTN_ARG(&args, h);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, rows);
    CLATTN_ARG(&args, width);
    CLATTN_ARG(&args, rot_dim);
    CLATTN_ARG(&args, interleaved);
    CLATTN_ARG(&args, table);
    CLATTN_ARG(&args, row0);
    size_t global[3] = {d, n, batch * heads};
    *rotated = (clattn_head_view){out, out_offset, heads * n * d, n * d, d};
    return clattn__launch(ctx, &args, "rotary", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__rope_spec_of(clattn_context *ctx, const char *fn,
                                   const clattn_rope_params *r, size_t dk,
                                   clattn_rotary_spec *spec)
{
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(r->reserved, sizeof(r->reserved)),
                     "rope->reserved is not zero (initialise it with clattn_rope_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, r->layout == CLATTN_ROPE_HALF || r->layout == CLATTN_ROPE_INTERLEAVED,
                     "rope->layout is %d, not a clattn_rope_layout", (int)r->layout);
    CLATTN_CHECK_ARG(ctx, fn, r->theta == 0.0f || (isfinite(r->theta) && r->theta >= 1.0f),
                     "rope->theta is %g: it must be a finite base >= 1 (0 for 10000)",
                     (double)r->theta);
    size_t rot = r->rotary_dim ? r->rotary_dim : dk;
    CLATTN_CHECK_ARG(ctx, fn, rot % 2 == 0 && rot <= dk,
                     "rope->rotary_dim is %zu: it must be even and at most d_k = %zu", rot, dk);
    spec->rot_dim = rot;
    spec->interleaved = r->layout == CLATTN_ROPE_INTERLEAVED;
    spec->theta = r->theta > 0.0f ? (double)r->theta : 10000.0;
    spec->pos0 = r->query_offset;
    spec->inv_freq = NULL;
    return CLATTN_OK;
}

clattn_status clattn__rope_qk(clattn_context *ctx, clattn_attention_problem *p,
                              const clattn_rotary_spec *spec, size_t key_pos0)
{
    if (p->kv_half)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "rotary embeddings on a half-precision key cache are not supported");
    size_t kv_heads = p->kv_heads ? p->kv_heads : p->heads;
    size_t q_floats = p->batch * p->heads * p->seq_q * p->dk;
    size_t k_floats = p->batch * kv_heads * p->seq_k * p->dk;
    size_t floats = q_floats + k_floats, bytes;
    if (floats < q_floats || !clattn__mul_size(floats, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "rotated q and k overflow size_t");
    cl_mem scratch;
    clattn_status status = clattn__workspace_slot(ctx, CLATTN_SLOT_ROTARY, bytes, &scratch);
    if (status != CLATTN_OK ||
        (status = clattn__rotary(ctx, &p->q, p->batch, p->heads, p->seq_q, p->dk, spec, scratch,
                                 0, &p->q)))
        return status;
    clattn_rotary_spec keys = *spec;
    keys.pos0 = key_pos0;
    return clattn__rotary(ctx, &p->k, p->batch, kv_heads, p->seq_k, p->dk, &keys, scratch,
                          q_floats, &p->k);
}

clattn_status clattn__rotary_in_place(clattn_context *ctx, const clattn_head_view *x,
                                      size_t batch, size_t heads, size_t n,
                                      const clattn_rotary_spec *spec)
{
    size_t pairs_per_row = spec->rot_dim / 2;
    if (pairs_per_row == 0 || n == 0 || batch * heads == 0)
        return CLATTN_OK;
    cl_mem table;
    cl_uint row0;
    clattn_status status = table_for(ctx, spec, n, &table, &row0);
    if (status != CLATTN_OK)
        return status;
    cl_uint h = (cl_uint)heads, pairs = (cl_uint)(batch * heads), rows = (cl_uint)n;
    cl_uint rot_dim = (cl_uint)spec->rot_dim;
    cl_int interleaved = spec->interleaved;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ROTARY_IN_PLACE);
    clattn__head_view_args(&args, x);
    CLATTN_ARG(&args, h);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, rows);
    CLATTN_ARG(&args, rot_dim);
    CLATTN_ARG(&args, interleaved);
    CLATTN_ARG(&args, table);
    CLATTN_ARG(&args, row0);
    size_t global[3] = {pairs_per_row, n, batch * heads};
    return clattn__launch(ctx, &args, "rotary in place", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__rope_append(clattn_context *ctx, const clattn_rope_append_args *a,
                                  const clattn_rotary_spec *spec)
{
    if (a->n == 0 || a->batch == 0)
        return CLATTN_OK;
    cl_mem table;
    cl_uint row0;
    clattn_status status = table_for(ctx, spec, a->n, &table, &row0);
    if (status != CLATTN_OK)
        return status;
    cl_ulong proj_off = a->proj_offset, pitch = a->pitch;
    cl_uint heads = (cl_uint)a->heads, kv_heads = (cl_uint)a->kv_heads, d = (cl_uint)a->d;
    cl_uint dv = (cl_uint)a->dv, n = (cl_uint)a->n, rot_dim = (cl_uint)spec->rot_dim;
    cl_int interleaved = spec->interleaved;
    cl_ulong k_at = a->k_at, k_sb = a->k_sb, v_at = a->v_at, v_sb = a->v_sb;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_ROPE_APPEND);
    CLATTN_ARG(&args, a->proj);
    CLATTN_ARG(&args, proj_off);
    CLATTN_ARG(&args, pitch);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, kv_heads);
    CLATTN_ARG(&args, d);
    CLATTN_ARG(&args, dv);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, rot_dim);
    CLATTN_ARG(&args, interleaved);
    CLATTN_ARG(&args, table);
    CLATTN_ARG(&args, row0);
    CLATTN_ARG(&args, a->k_cache);
    CLATTN_ARG(&args, k_at);
    CLATTN_ARG(&args, k_sb);
    CLATTN_ARG(&args, a->v_cache);
    CLATTN_ARG(&args, v_at);
    CLATTN_ARG(&args, v_sb);
    size_t global[3] = {a->heads + 2 * a->kv_heads, a->n, a->batch};
    return clattn__launch(ctx, &args, "rope_append", 3, global, NULL, CLATTN_OP_OTHER, 0);
}
