/* The unfused attention path: scores → softmax → weights·V over chunks of (batch, head) pairs,
 * each chunk's scores in the workspace (or straight in the caller's attention-weights tensor). */
#include "attention_problem.h"
#include "runtime/buffers.h"

#include <string.h>

clattn_status clattn__launch_scores(clattn_context *ctx, const clattn_attention_problem *p,
                                    const clattn_score_chunk *c)
{
    cl_uint dk = (cl_uint)p->dk;
    float scale = p->scale;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_SCORES);
    cl_uint group = (cl_uint)clattn__kv_group(p);
    clattn__head_view_args(&args, &p->q);
    clattn__head_view_args(&args, &p->k);
    CLATTN_ARG(&args, c->scores);
    CLATTN_ARG(&args, c->scores_offset);
    CLATTN_ARG(&args, c->heads);
    CLATTN_ARG(&args, group);
    CLATTN_ARG(&args, c->pairs);
    CLATTN_ARG(&args, c->nq);
    CLATTN_ARG(&args, c->nk);
    CLATTN_ARG(&args, dk);
    CLATTN_ARG(&args, c->bh0);
    CLATTN_ARG(&args, scale);
    clattn__mask_args(&args, p);
    size_t global[3] = {c->nk, c->nq, c->pairs};
    uint64_t macs = (uint64_t)c->pairs * c->nq * c->nk * p->dk;
    return clattn__launch(ctx, &args, "scores", 3, global, NULL, CLATTN_OP_SCORES, macs);
}

clattn_status clattn__launch_score_mods(clattn_context *ctx, const clattn_attention_problem *p,
                                        const clattn_score_chunk *c)
{
    cl_int mods = p->mods.flags;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_SCORE_MODS);
    CLATTN_ARG(&args, c->scores);
    CLATTN_ARG(&args, c->scores_offset);
    CLATTN_ARG(&args, c->heads);
    CLATTN_ARG(&args, c->pairs);
    CLATTN_ARG(&args, c->nq);
    CLATTN_ARG(&args, c->nk);
    CLATTN_ARG(&args, c->bh0);
    CLATTN_ARG(&args, mods);
    clattn__mod_args(&args, p);
    clattn__mask_args(&args, p);
    size_t global[3] = {c->nk, c->nq, c->pairs};
    return clattn__launch(ctx, &args, "score_mods", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__launch_softmax(clattn_context *ctx, const clattn_score_chunk *c)
{
    cl_uint rows = c->pairs * c->nq;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_SOFTMAX);
    CLATTN_ARG(&args, c->scores);
    CLATTN_ARG(&args, c->scores_offset);
    CLATTN_ARG(&args, rows);
    CLATTN_ARG(&args, c->nk);
    size_t wg = clattn__reduce_wg(ctx);
    size_t global = (size_t)rows * wg;
    return clattn__launch(ctx, &args, "softmax", 1, &global, &wg, CLATTN_OP_OTHER, 0);
}

clattn_status clattn__launch_head_merge(clattn_context *ctx, const clattn_attention_problem *p,
                                        const clattn_score_chunk *c)
{
    cl_uint dv = (cl_uint)p->dv;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_HEAD_MERGE);
    CLATTN_ARG(&args, c->scores);
    CLATTN_ARG(&args, c->scores_offset);
    cl_uint group = (cl_uint)clattn__kv_group(p);
    clattn__head_view_args(&args, &p->v);
    clattn__head_view_args(&args, &p->out);
    CLATTN_ARG(&args, c->heads);
    CLATTN_ARG(&args, group);
    CLATTN_ARG(&args, c->pairs);
    CLATTN_ARG(&args, c->nq);
    CLATTN_ARG(&args, c->nk);
    CLATTN_ARG(&args, dv);
    CLATTN_ARG(&args, c->bh0);
    size_t global[3] = {p->dv, c->nq, c->pairs};
    uint64_t macs = (uint64_t)c->pairs * c->nq * c->nk * p->dv;
    return clattn__launch(ctx, &args, "head_merge", 3, global, NULL, CLATTN_OP_WEIGHTS_V, macs);
}

clattn_status clattn__launch_average_heads(clattn_context *ctx,
                                           const clattn_attention_problem *p,
                                           const clattn_score_chunk *c)
{
    cl_ulong avg_offset = p->weights_offset;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_AVERAGE_HEADS);
    CLATTN_ARG(&args, c->scores);
    CLATTN_ARG(&args, c->scores_offset);
    CLATTN_ARG(&args, p->weights);
    CLATTN_ARG(&args, avg_offset);
    CLATTN_ARG(&args, c->heads);
    CLATTN_ARG(&args, c->pairs);
    CLATTN_ARG(&args, c->nq);
    CLATTN_ARG(&args, c->nk);
    CLATTN_ARG(&args, c->bh0);
    size_t first_batch = c->bh0 / c->heads, last_batch = (c->bh0 + c->pairs - 1) / c->heads;
    size_t global[3] = {c->nk, c->nq, last_batch - first_batch + 1};
    return clattn__launch(ctx, &args, "average_heads", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

static clattn_status zero_buffer(clattn_context *ctx, cl_mem mem, size_t offset, size_t count)
{
    const float zero = 0.0f;
    return clattn__fill_bytes(ctx, mem, &zero, sizeof(zero), offset * sizeof(float),
                              count * sizeof(float),
                              "clEnqueueFillBuffer (zeroing attention weights) failed");
}

clattn_status clattn__attention_unfused(clattn_context *ctx, const clattn_attention_problem *p)
{
    size_t total = p->batch * p->heads;
    size_t pair_floats, pair_bytes;
    if (!clattn__mul_size(p->seq_q, p->seq_k, &pair_floats) ||
        !clattn__mul_size(pair_floats, sizeof(float), &pair_bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "attention scores [%zu, %zu] overflow size_t", p->seq_q, p->seq_k);

    clattn_score_chunk c = {(cl_uint)p->heads, 0, (cl_uint)p->seq_q, (cl_uint)p->seq_k, 0, NULL, 0};
    size_t chunk_pairs;
    if (p->weights_layout == CLATTN_WEIGHTS_PER_HEAD) {
        /* The caller's weights tensor holds every pair's scores: no workspace needed. */
        c.scores = p->weights;
        c.scores_offset = p->weights_offset;
        chunk_pairs = total;
    } else {
        uint64_t limit = clattn__workspace_limit(ctx);
        if (pair_bytes > limit)
            return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                                "the scores of one (batch, head) pair, [%zu, %zu] floats = %zu "
                                "bytes, exceed the workspace limit of %llu bytes; use the fused "
                                "path (no attention weights) or raise workspace_limit_bytes",
                                p->seq_q, p->seq_k, pair_bytes,
                                (unsigned long long)limit);
        chunk_pairs = (size_t)(limit / pair_bytes);
        if (chunk_pairs > total)
            chunk_pairs = total;
        clattn_status status =
            clattn__workspace_slot(ctx, CLATTN_SLOT_SCORES, chunk_pairs * pair_bytes, &c.scores);
        if (status != CLATTN_OK)
            return status;
    }
    if (chunk_pairs < total)
        clattn__log(ctx, CLATTN_LOG_DEBUG, "attention scores in chunks of %zu of %zu pairs",
                    chunk_pairs, total);
    if (p->weights_layout == CLATTN_WEIGHTS_AVERAGED) {
        clattn_status status =
            zero_buffer(ctx, p->weights, p->weights_offset, p->batch * pair_floats);
        if (status != CLATTN_OK)
            return status;
    }

    /* With modifiers the scores come without masks: scores → modifiers → masks → softmax. */
    clattn_attention_problem unmasked = *p;
    if (p->mods.flags) {
        memset(&unmasked.attn_mask, 0, sizeof(unmasked.attn_mask));
        memset(&unmasked.key_padding_mask, 0, sizeof(unmasked.key_padding_mask));
        unmasked.causal = 0;
    }
    for (size_t bh0 = 0; bh0 < total; bh0 += chunk_pairs) {
        c.bh0 = (cl_uint)bh0;
        c.pairs = (cl_uint)(total - bh0 < chunk_pairs ? total - bh0 : chunk_pairs);
        if (p->weights_layout == CLATTN_WEIGHTS_PER_HEAD)
            c.scores_offset = p->weights_offset + bh0 * pair_floats;
        clattn_status status;
        if ((status = clattn__launch_scores(ctx, &unmasked, &c)) ||
            (p->mods.flags && (status = clattn__launch_score_mods(ctx, p, &c))) ||
            (status = clattn__launch_softmax(ctx, &c)) ||
            (status = clattn__launch_head_merge(ctx, p, &c)))
            return status;
        if (p->weights_layout == CLATTN_WEIGHTS_AVERAGED &&
            (status = clattn__launch_average_heads(ctx, p, &c)))
            return status;
    }
    return CLATTN_OK;
}
