/* The fused attention programs: specialised per (d_k, d_v) from the tuning, built on first use. */
#include "fused_cache.h"
#include "context_internal.h"

#include <stdio.h>
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

static void program_release(clattn_fused_program *p)
{
    cl_kernel kernels[6] = {p->kernel, p->unstaged, p->combine, p->tiled, p->tiled_rows, p->query};
    for (int i = 0; i < 6; i++)
        if (kernels[i])
            clReleaseKernel(kernels[i]);
    if (p->program)
        clReleaseProgram(p->program);
    memset(p, 0, sizeof(*p));
}

static clattn_status build(clattn_context *ctx, size_t dk, size_t dv, bool kv_half, int mods,
                           size_t qpw, clattn_fused_program *out)
{
    /* constants.h and common.cl come first, as in the base program. */
    const clattn_embedded_source *parts[3] = {embedded("constants.h"), embedded("common.cl"),
                                              embedded("fused_attention.cl")};
    const char *sources[3];
    size_t lengths[3];
    for (int i = 0; i < 3; i++) {
        if (!parts[i])
            return clattn__fail(ctx, CLATTN_ERROR_BUILD_FAILED,
                                "the fused attention sources are missing from the library");
        sources[i] = (const char *)parts[i]->data;
        lengths[i] = parts[i]->size;
    }
    clattn_fused_program p;
    memset(&p, 0, sizeof(p));
    p.dk = dk;
    p.dv = dv;
    p.kv_half = kv_half;
    p.mods = mods;
    p.local = ctx->tuning.fused_local != 0 && !kv_half;
    p.qpw = p.local ? 1 : qpw;
    p.wg = ctx->tuning.fused_wg;
    /* The unstaged kernel's key block is a vector: 1, 2, 4, 8 or 16 lanes. */
    p.unstaged_tk = 16;
    while (p.unstaged_tk > ctx->tuning.fused_tk)
        p.unstaged_tk /= 2;
    p.tk = p.local ? local_block(ctx, dk, dv) : p.unstaged_tk;
    char mod_option[40] = "";
    if (mods)
        snprintf(mod_option, sizeof(mod_option), " -DCLATTN_FUSED_MODS=%d", mods);
    char options[800];
    snprintf(options, sizeof(options),
             "%s -DCLATTN_FUSED_DK=%zu -DCLATTN_FUSED_DV=%zu -DCLATTN_FUSED_QPW=%zu "
             "-DCLATTN_FUSED_TK=%zu -DCLATTN_FUSED_GTK=%zu -DCLATTN_FUSED_WG=%zu "
             "-DCLATTN_FUSED_VK=%zu -DCLATTN_FUSED_VV=%zu%s%s%s",
             ctx->kernels.options, dk, dv, p.qpw, p.tk, p.unstaged_tk, p.wg, vector_width(dk, 16),
             vector_width(dv, 16), p.local ? " -DCLATTN_FUSED_LOCAL=1" : "",
             kv_half ? " -DCLATTN_FUSED_KV_HALF=1" : "", mod_option);
    clattn_status status = clattn__program_build(ctx, sources, lengths, 3, options, &p.program);
    if (status != CLATTN_OK)
        return status;
    const char *name = p.local ? "clattn_fused_attention_local" : "clattn_fused_attention";
    const char *names[6] = {name,
                            "clattn_fused_attention",
                            "clattn_split_combine",
                            "clattn_fused_attention_tiled",
                            "clattn_fused_attention_tiled_rows",
                            "clattn_fused_attention_query"};
    cl_kernel *kernels[6] = {&p.kernel,        &p.unstaged, &p.combine, &p.tiled,
                             &p.tiled_rows,    &p.query};
    /* the tiled variants: unstaged float programs; the one-query kernel where its 16-wide
     * transposes and value columns fit the head widths, without modifiers */
    int count = p.local || kv_half ? 3 : dk % 16 == 0 && dv % 16 == 0 && !mods ? 6 : 5;
    for (int i = 0; i < count; i++) {
        cl_int err = CL_SUCCESS;
        *kernels[i] = clCreateKernel(p.program, names[i], &err);
        if (err != CL_SUCCESS) {
            *kernels[i] = NULL;
            program_release(&p);
            return clattn__fail_cl(ctx, err, "clCreateKernel(%s) failed", names[i]);
        }
    }
    clattn__log(ctx, CLATTN_LOG_DEBUG, "built %s for d_k %zu, d_v %zu: %s", name, dk, dv, options);
    *out = p;
    return CLATTN_OK;
}

clattn_status clattn__fused_program(clattn_context *ctx, size_t dk, size_t dv, bool kv_half,
                                    int mods, bool few_queries, const clattn_fused_program **out)
{
    clattn_fused_cache *cache = &ctx->fused;
    bool local = ctx->tuning.fused_local != 0 && !kv_half;
    size_t qpw = local || few_queries ? 1 : ctx->tuning.fused_qpw;
    for (size_t i = 0; i < cache->count; i++)
        if (cache->entries[i].dk == dk && cache->entries[i].dv == dv &&
            cache->entries[i].kv_half == kv_half && cache->entries[i].mods == mods &&
            cache->entries[i].qpw == qpw) {
            *out = &cache->entries[i];
            return CLATTN_OK;
        }
    clattn_fused_program p;
    clattn_status status = build(ctx, dk, dv, kv_half, mods, qpw, &p);
    if (status != CLATTN_OK)
        return status;
    if (cache->count == CLATTN_FUSED_CACHE_SIZE) { /* forget the oldest */
        program_release(&cache->entries[0]);
        memmove(&cache->entries[0], &cache->entries[1],
                (CLATTN_FUSED_CACHE_SIZE - 1) * sizeof(p));
        cache->count--;
    }
    cache->entries[cache->count] = p;
    *out = &cache->entries[cache->count++];
    return CLATTN_OK;
}

void clattn__fused_cache_clear(clattn_fused_cache *cache)
{
    for (size_t i = 0; i < cache->count; i++)
        program_release(&cache->entries[i]);
    cache->count = 0;
}
