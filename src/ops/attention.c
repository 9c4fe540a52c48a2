/* The attention entry: the kernels' index limits, then the fused or the unfused path. */
#include "attention_problem.h"

#include <stdint.h>

static clattn_status check_kernel_limits(clattn_context *ctx, const clattn_attention_problem *p)
{
    size_t pairs;
    bool ok = clattn__mul_size(p->batch, p->heads, &pairs) && pairs <= UINT32_MAX &&
              p->seq_q <= UINT32_MAX && p->seq_k <= UINT32_MAX && p->dk <= UINT32_MAX &&
              p->dv <= UINT32_MAX;
    size_t rows; /* the softmax and the kernels index rows of all pairs with 32 bits */
    ok = ok && clattn__mul_size(pairs, p->seq_q, &rows) && rows <= UINT32_MAX;
    if (!ok)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "attention sizes B=%zu H=%zu Nq=%zu Nk=%zu exceed the kernels' 32-bit "
                            "index range",
                            p->batch, p->heads, p->seq_q, p->seq_k);
    return CLATTN_OK;
}

clattn_status clattn__attention(clattn_context *ctx, const clattn_attention_problem *p)
{
    clattn_status status = check_kernel_limits(ctx, p);
    if (status != CLATTN_OK)
        return status;
    bool fused = p->path == CLATTN_PATH_FUSED || p->kv_half ||
                 (p->path == CLATTN_PATH_AUTO && p->weights_layout == CLATTN_WEIGHTS_NONE);
    return fused ? clattn__attention_fused(ctx, p) : clattn__attention_unfused(ctx, p);
}
