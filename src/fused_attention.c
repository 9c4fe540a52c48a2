/* The fused attention kernel's launch: packing long strided keys and values, then one kernel. */
#include "attention_internal.h"
#include "buffers.h"
#include "context_internal.h"
#include "fused_cache.h"

/* Keys and values shorter than this are read in place: they stay in cache anyway. */
#define PACK_MIN_KEYS 256

/* Copies the [B, H, Nk, d] view *view into mem at `offset` (floats) as contiguous per-head rows
 * and points *view there. */
static clattn_status pack(clattn_context *ctx, const clattn_attention_problem *p, size_t d,
                          cl_mem mem, size_t offset, clattn_head_view *view)
{
    cl_ulong out_off = offset;
    size_t kv_heads = p->heads / clattn__kv_group(p); /* keys and values have their own heads */
    cl_uint heads = (cl_uint)kv_heads, pairs = (cl_uint)(p->batch * kv_heads);
    cl_uint n = (cl_uint)p->seq_k, width = (cl_uint)d;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_PACK_HEADS], 0, CL_SUCCESS};
    clattn__head_view_args(&args, view);
    CLATTN_ARG(&args, mem);
    CLATTN_ARG(&args, out_off);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, width);
    size_t global[3] = {d, p->seq_k, pairs};
    *view = (clattn_head_view){mem, offset, kv_heads * p->seq_k * d, p->seq_k * d, d};
    return clattn__launch(ctx, &args, "pack_heads", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__attention_fused(clattn_context *ctx, const clattn_attention_problem *given)
{
    const clattn_fused_program *prog;
    clattn_status status = clattn__fused_program(ctx, given->dk, given->dv, &prog);
    if (status != CLATTN_OK)
        return status;
    /* Without staging every work-item streams all keys and values of its head: rows strided by a
     * packed projection's width (a page per row at long sequences) are first made contiguous. */
    clattn_attention_problem packed = *given;
    const clattn_attention_problem *p = &packed;
    bool strided = given->k.sn != given->dk || given->v.sn != given->dv;
    if (strided && !prog->local && given->seq_k >= PACK_MIN_KEYS) {
        size_t kv_heads = given->heads / clattn__kv_group(given);
        size_t k_floats = given->batch * kv_heads * given->seq_k * given->dk;
        size_t v_floats = given->batch * kv_heads * given->seq_k * given->dv;
        cl_mem scratch;
        if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PACKED_KV,
                                             (k_floats + v_floats) * sizeof(float), &scratch)) ||
            (status = pack(ctx, given, given->dk, scratch, 0, &packed.k)) ||
            (status = pack(ctx, given, given->dv, scratch, k_floats, &packed.v)))
            return status;
    }
    cl_uint heads = (cl_uint)p->heads, pairs = (cl_uint)(p->batch * p->heads);
    cl_uint group = (cl_uint)clattn__kv_group(p);
    cl_uint nq = (cl_uint)p->seq_q, nk = (cl_uint)p->seq_k;
    float scale = p->scale;
    clattn_kernel_args args = {prog->kernel, 0, CL_SUCCESS};
    clattn__head_view_args(&args, &p->q);
    clattn__head_view_args(&args, &p->k);
    clattn__head_view_args(&args, &p->v);
    clattn__head_view_args(&args, &p->out);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, group);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, nq);
    CLATTN_ARG(&args, nk);
    CLATTN_ARG(&args, scale);
    clattn__mask_args(&args, p);
    size_t global[2] = {(p->seq_q + prog->qpw - 1) / prog->qpw, pairs}, local[2] = {prog->wg, 1};
    uint64_t score_macs = (uint64_t)pairs * nq * nk * p->dk;
    status = clattn__launch(ctx, &args, "fused_attention", 2, global, local, CLATTN_OP_SCORES,
                            score_macs);
    /* The same kernel did the weights·V products: count them under their own operation, as part
     * of the same launch. */
    if (status == CLATTN_OK)
        clattn__count_macs(ctx, CLATTN_OP_WEIGHTS_V, (uint64_t)pairs * nq * nk * p->dv);
    return status;
}
