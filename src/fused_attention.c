/* The fused attention kernel: per-(d_k, d_v) specialised programs, device-aware tuning, launch. */
#include "attention_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const clattn_embedded_source *embedded(const char *name)
{
    for (size_t i = 0; i < clattn__cl_source_count; i++)
        if (strcmp(clattn__cl_sources[i].name, name) == 0)
            return &clattn__cl_sources[i];
    return NULL;
}

/* The largest OpenCL vector width (1, 2, 4, 8, 16) that divides n and is at most `cap`. */
static size_t vector_width(size_t n, size_t cap)
{
    size_t w = 16;
    while (w > 1 && (w > cap || n % w != 0))
        w /= 2;
    return w;
}

/* Block size for the local variant: the tuned one, shrunk until K and V tiles fit in half of the
 * device's local memory. */
static size_t local_block(const clattn_context *ctx, size_t dk, size_t dv)
{
    size_t tk = ctx->tuning.fused_tk;
    while (tk > 1 && tk * (dk + dv) * sizeof(float) > ctx->info.local_mem_bytes / 2)
        tk /= 2;
    return tk;
}

static clattn_status build_variant(clattn_context *ctx, size_t dk, size_t dv,
                                   clattn_fused_variant *out)
{
    const clattn_embedded_source *common = embedded("common.cl");
    const clattn_embedded_source *fused = embedded("fused_attention.cl");
    if (!common || !fused)
        return clattn__fail(ctx, CLATTN_ERROR_BUILD_FAILED,
                            "the fused attention sources are missing from the library");
    clattn_fused_variant v;
    memset(&v, 0, sizeof(v));
    v.dk = dk;
    v.dv = dv;
    v.local = ctx->tuning.fused_local != 0;
    v.qpw = v.local ? 1 : ctx->tuning.fused_qpw;
    v.wg = ctx->tuning.fused_wg;
    v.tk = v.local ? local_block(ctx, dk, dv) : ctx->tuning.fused_tk;
    if (!v.local) { /* the global variant's key block is a vector: 1, 2, 4, 8 or 16 lanes */
        size_t lanes = 16;
        while (lanes > v.tk)
            lanes /= 2;
        v.tk = lanes;
    }
    char options[768];
    snprintf(options, sizeof(options),
             "%s -DCLATTN_FUSED_DK=%zu -DCLATTN_FUSED_DV=%zu -DCLATTN_FUSED_QPW=%zu "
             "-DCLATTN_FUSED_TK=%zu -DCLATTN_FUSED_WG=%zu -DCLATTN_FUSED_VK=%zu "
             "-DCLATTN_FUSED_VV=%zu%s",
             ctx->kernels.options, dk, dv, v.qpw, v.tk, v.wg, vector_width(dk, 16),
             vector_width(dv, 16), v.local ? " -DCLATTN_FUSED_LOCAL=1" : "");
    const char *sources[2] = {(const char *)common->data, (const char *)fused->data};
    size_t lengths[2] = {common->size, fused->size};
    clattn_status status = clattn__program_build(ctx, sources, lengths, 2, options, &v.program);
    if (status != CLATTN_OK)
        return status;
    const char *name = v.local ? "clattn_fused_attention_local" : "clattn_fused_attention";
    cl_int err;
    v.kernel = clCreateKernel(v.program, name, &err);
    if (err != CL_SUCCESS) {
        clReleaseProgram(v.program);
        return clattn__fail_cl(ctx, err, "clCreateKernel(%s) failed", name);
    }
    clattn__log(ctx, CLATTN_LOG_DEBUG, "built %s for d_k %zu, d_v %zu: %s", name, dk, dv, options);
    *out = v;
    return CLATTN_OK;
}

clattn_status clattn__fused_variant(clattn_context *ctx, size_t dk, size_t dv,
                                    const clattn_fused_variant **out)
{
    for (size_t i = 0; i < ctx->fused_count; i++)
        if (ctx->fused[i].dk == dk && ctx->fused[i].dv == dv) {
            *out = &ctx->fused[i];
            return CLATTN_OK;
        }
    clattn_fused_variant v;
    clattn_status status = build_variant(ctx, dk, dv, &v);
    if (status != CLATTN_OK)
        return status;
    if (ctx->fused_count == CLATTN_FUSED_CACHE) { /* forget the oldest */
        clattn__fused_release(&ctx->fused[0]);
        memmove(&ctx->fused[0], &ctx->fused[1], (CLATTN_FUSED_CACHE - 1) * sizeof(v));
        ctx->fused_count--;
    }
    ctx->fused[ctx->fused_count] = v;
    *out = &ctx->fused[ctx->fused_count++];
    return CLATTN_OK;
}

void clattn__fused_release(clattn_fused_variant *v)
{
    if (v->kernel)
        clReleaseKernel(v->kernel);
    if (v->program)
        clReleaseProgram(v->program);
    memset(v, 0, sizeof(*v));
}

static void view_args(clattn_kernel_args *args, const clattn_head_view *v)
{
    cl_ulong off = v->offset, sb = v->sb, sh = v->sh, sn = v->sn;
    CLATTN_ARG(args, v->mem);
    CLATTN_ARG(args, off);
    CLATTN_ARG(args, sb);
    CLATTN_ARG(args, sh);
    CLATTN_ARG(args, sn);
}

/* Keys and values shorter than this are read in place: they stay in cache anyway. */
#define PACK_MIN_KEYS 256

/* Copies the [B, H, Nk, d] view *view into mem at `offset` (floats) as contiguous per-head rows
 * and points *view there. */
static clattn_status pack(clattn_context *ctx, const clattn_attention_problem *p, size_t d,
                          cl_mem mem, size_t offset, clattn_head_view *view)
{
    cl_ulong x_off = view->offset, sb = view->sb, sh = view->sh, sn = view->sn, out_off = offset;
    cl_uint heads = (cl_uint)p->heads, pairs = (cl_uint)(p->batch * p->heads);
    cl_uint n = (cl_uint)p->seq_k, width = (cl_uint)d, bh0 = 0;
    clattn_kernel_args args = {ctx->kernels.kernel[CLATTN_KERNEL_PACK_HEADS], 0, CL_SUCCESS};
    CLATTN_ARG(&args, view->mem);
    CLATTN_ARG(&args, x_off);
    CLATTN_ARG(&args, sb);
    CLATTN_ARG(&args, sh);
    CLATTN_ARG(&args, sn);
    CLATTN_ARG(&args, mem);
    CLATTN_ARG(&args, out_off);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, width);
    CLATTN_ARG(&args, bh0);
    size_t global[3] = {d, p->seq_k, pairs};
    *view = (clattn_head_view){mem, offset, p->heads * p->seq_k * d, p->seq_k * d, d};
    return clattn__launch(ctx, &args, "pack_heads", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__attention_fused(clattn_context *ctx, const clattn_attention_problem *given)
{
    const clattn_fused_variant *v;
    clattn_status status = clattn__fused_variant(ctx, given->dk, given->dv, &v);
    if (status != CLATTN_OK)
        return status;
    /* Without staging every work-item streams all keys and values of its head: rows strided by a
     * packed projection's width (a page per row at long sequences) are first made contiguous. */
    clattn_attention_problem packed = *given;
    const clattn_attention_problem *p = &packed;
    bool strided = given->k.sn != given->dk || given->v.sn != given->dv;
    if (strided && !v->local && given->seq_k >= PACK_MIN_KEYS) {
        size_t k_floats = given->batch * given->heads * given->seq_k * given->dk;
        size_t v_floats = given->batch * given->heads * given->seq_k * given->dv;
        cl_mem scratch;
        if ((status = clattn__scratch(ctx, CLATTN_SCRATCH_PACKED,
                                      (k_floats + v_floats) * sizeof(float), &scratch)) ||
            (status = pack(ctx, given, given->dk, scratch, 0, &packed.k)) ||
            (status = pack(ctx, given, given->dv, scratch, k_floats, &packed.v)))
            return status;
    }
    cl_uint heads = (cl_uint)p->heads, pairs = (cl_uint)(p->batch * p->heads);
    cl_uint nq = (cl_uint)p->seq_q, nk = (cl_uint)p->seq_k, bh0 = 0;
    float scale = p->scale;
    clattn_kernel_args args = {v->kernel, 0, CL_SUCCESS};
    view_args(&args, &p->q);
    view_args(&args, &p->k);
    view_args(&args, &p->v);
    view_args(&args, &p->out);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, nq);
    CLATTN_ARG(&args, nk);
    CLATTN_ARG(&args, bh0);
    CLATTN_ARG(&args, scale);
    clattn__mask_args(&args, p);
    size_t global[2] = {(p->seq_q + v->qpw - 1) / v->qpw, pairs}, local[2] = {v->wg, 1};
    uint64_t score_macs = (uint64_t)pairs * nq * nk * p->dk;
    status = clattn__launch(ctx, &args, "fused_attention", 2, global, local, CLATTN_OP_SCORES,
                            score_macs);
    /* The same kernel did the weights·V products: count them under their own operation. */
    if (status == CLATTN_OK)
        status = clattn__account(ctx, "fused_attention", CLATTN_OP_WEIGHTS_V,
                                 (uint64_t)pairs * nq * nk * p->dv, NULL);
    if (status == CLATTN_OK)
        ctx->stats.kernel_launches--; /* one launch, two counters */
    return status;
}
